select
    course,
    week,
    cited_as,
    {{ dbt_doi.doi_key('cited_as') }} as doi_key
from {{ ref('reading_list') }}
