-- What the registration agencies say about each reading (title, type, year, journal,
-- publisher), from the metadata DoiEnrichOperator fetched through doi.org, joined on the DOI
-- comparison key; and whether a retraction notice updates the work.
-- updated_by holds "type:DOI" items joined by "; " (an item without a DOI is just "type").
select
    r.course,
    r.week,
    r.cited_as,
    r.doi_key,
    m.metadata_status,
    m.title,
    m.csl_type,
    m.year,
    m.container_title,
    m.publisher,
    coalesce(
        ('; ' || lower(m.updated_by) || ';') like '%; retraction:%'
        or ('; ' || lower(m.updated_by) || ';') like '%; retraction;%',
        false
    ) as retracted
from {{ ref('stg_reading_list') }} as r
left join {{ source('airflow', 'doi_metadata') }} as m on m.doi_key = r.doi_key
