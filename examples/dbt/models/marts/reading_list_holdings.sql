-- Which readings the library holds, joined on the DOI comparison key (not on the raw
-- strings, which differ in case, wrapper and whitespace), with what the proxy said.
with holdings as (
    select
        sql_doi_key as doi_key,
        min(record_id) as record_id,
        count(*) as copies
    from {{ ref('stg_catalogue') }}
    where sql_doi_key is not null
    group by sql_doi_key
)

select
    r.course,
    r.week,
    r.cited_as,
    r.doi_key,
    h.record_id,
    coalesce(h.copies, 0) as copies,
    res.status as resolution_status,
    res.url as resolved_url
from {{ ref('stg_reading_list') }} as r
left join holdings as h on h.doi_key = r.doi_key
left join {{ source('airflow', 'doi_resolution') }} as res on res.doi_key = r.doi_key
