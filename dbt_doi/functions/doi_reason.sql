{{ dbt_doi.udf_body('doi_reason', 's') }}
