{{ dbt_doi_udfs.udf_body('doi_is_valid', 's') }}
