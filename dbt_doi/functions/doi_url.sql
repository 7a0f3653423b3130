{{ dbt_doi.udf_body('doi_url', 's') }}
