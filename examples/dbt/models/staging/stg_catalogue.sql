-- The catalogue with its comparison key computed again, in SQL, from the raw column: the
-- dbt_doi macro and the Airflow operator (Python) must agree (see tests/).
select
    *,
    {{ dbt_doi.doi_key(adapter.quote(var('doi_column'))) }} as sql_doi_key
from {{ source('airflow', 'catalogue') }}
