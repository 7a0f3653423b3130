-- Two messy catalogues joined the way the standard says: on the comparison key.
select
    a.id,
    b.record_id,
    a.doi as doi_a,
    b.doi as doi_b,
    {{ dbt_doi.doi_normalize('a.doi') }} as doi
from {{ ref('catalogue_a') }} as a
inner join {{ ref('catalogue_b') }} as b
    on {{ dbt_doi.doi_key('a.doi') }} = {{ dbt_doi.doi_key('b.doi') }}
