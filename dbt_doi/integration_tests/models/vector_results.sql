-- Every conformance vector (decode="auto") through the package's macros, beside the answers
-- the Python reference gives (the seed is generated from tests/vectors/*.jsonl).
with vectors as (
    select
        id,
        case when input_is_null then null else coalesce({{ decode_hex('input_hex') }}, '') end
            as input,
        expected_doi,
        expected_key,
        expected_valid,
        expected_reason,
        expected_url
    from {{ ref('doi_vectors') }}
)

select
    vectors.*,
    {{ dbt_doi.doi_normalize('input') }} as actual_doi,
    {{ dbt_doi.doi_key('input') }} as actual_key,
    {{ dbt_doi.doi_is_valid('input') }} as actual_valid,
    {{ dbt_doi.doi_reason('input') }} as actual_reason,
    {{ dbt_doi.doi_url('input') }} as actual_url
from vectors
