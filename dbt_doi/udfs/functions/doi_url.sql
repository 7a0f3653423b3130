{{ dbt_doi_udfs.udf_body('doi_url', 's') }}
