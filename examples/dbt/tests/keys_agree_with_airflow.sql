-- The comparison key computed by the dbt_doi macro must equal the one DoiNormalizeOperator
-- wrote (Python's airflow_doi.syntax): any row returned is a disagreement.
select *
from {{ ref('stg_catalogue') }}
where coalesce(sql_doi_key, '<null>') <> coalesce(doi_key, '<null>')
