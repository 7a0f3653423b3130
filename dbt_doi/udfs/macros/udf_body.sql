{#-
  The body of a function resource: dbt_doi's generated expression for the adapter, as a
  SELECT where the adapter's CREATE FUNCTION wants a query (PostgreSQL's default LANGUAGE SQL
  body) and bare on DuckDB. Inside a function resource the dbt_doi macros always expand inline
  (a function cannot call itself).
-#}
{% macro udf_body(name, argument) -%}
  {{ return(adapter.dispatch('udf_body', 'dbt_doi_udfs')(name, argument)) }}
{%- endmacro %}

{% macro default__udf_body(name, argument) -%}
  select {{ context['dbt_doi'][name](argument) }}
{%- endmacro %}

{% macro duckdb__udf_body(name, argument) -%}
  {{ context['dbt_doi'][name](argument) }}
{%- endmacro %}
