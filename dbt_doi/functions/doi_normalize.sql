{{ dbt_doi.udf_body('doi_normalize', 's') }}
