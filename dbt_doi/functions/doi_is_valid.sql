{{ dbt_doi.udf_body('doi_is_valid', 's') }}
