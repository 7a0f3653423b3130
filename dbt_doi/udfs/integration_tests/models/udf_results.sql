-- The same vectors through the UDF resources of dbt_doi_udfs, called directly as a user would.
select
    id,
    expected_doi,
    expected_key,
    expected_valid,
    expected_reason,
    expected_url,
    {{ function('doi_normalize') }}(input) as actual_doi,
    {{ function('doi_key') }}(input) as actual_key,
    {{ function('doi_is_valid') }}(input) as actual_valid,
    {{ function('doi_reason') }}(input) as actual_reason,
    {{ function('doi_url') }}(input) as actual_url
from {{ ref('vector_results') }}
