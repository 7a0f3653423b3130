{{ dbt_doi.udf_body('doi_key', 's') }}
