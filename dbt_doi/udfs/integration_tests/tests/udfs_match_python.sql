-- Fails with one row per vector where a UDF resource disagrees with the Python reference.
select *
from {{ ref('udf_results') }}
where actual_doi is distinct from expected_doi
   or actual_key is distinct from expected_key
   or actual_valid is distinct from expected_valid
   or actual_reason is distinct from expected_reason
   or actual_url is distinct from expected_url
