{#-
  The body of a function resource: the generated expression, as a SELECT where the adapter's
  CREATE FUNCTION wants a query (PostgreSQL's default LANGUAGE SQL body) and bare on DuckDB.
-#}
{% macro udf_body(name, argument) -%}
  {{ return(adapter.dispatch('udf_body', 'dbt_doi')(name, argument)) }}
{%- endmacro %}

{% macro default__udf_body(name, argument) -%}
  select {{ context['dbt_doi'][name](argument) }}
{%- endmacro %}

{% macro duckdb__udf_body(name, argument) -%}
  {{ context['dbt_doi'][name](argument) }}
{%- endmacro %}
