-- Each distinct DOI cell of the catalogue with its comparison key, validity and reason, computed
-- in SQL by the dbt_doi macros. Incremental: a nightly run keys only the cells it has not keyed
-- before (new rows, edited cells), so its cost follows what changed, not the catalogue;
-- `dbt run --full-refresh --select catalogue_doi_keys` keys every cell again (after an upgrade of
-- dbt_doi whose rules changed, say). Join it on the cell: `join catalogue_doi_keys k on
-- k.doi_raw = c.<doi column>`. `keyed_by` is the dbt invocation that keyed the cell.
{{ config(materialized='incremental', incremental_strategy='append') }}

{%- set cell = 'c.' ~ adapter.quote(var('doi_column')) %}

select distinct
    {{ cell }} as doi_raw,
    {{ dbt_doi.doi_key(cell) }} as doi_key,
    {{ dbt_doi.doi_is_valid(cell) }} as doi_valid,
    {{ dbt_doi.doi_reason(cell) }} as doi_reason,
    '{{ invocation_id }}' as keyed_by
from {{ source('airflow', 'catalogue') }} as c
where {{ cell }} is not null
{% if is_incremental() %}
    and not exists (select 1 from {{ this }} as k where k.doi_raw = {{ cell }})
{% endif %}
