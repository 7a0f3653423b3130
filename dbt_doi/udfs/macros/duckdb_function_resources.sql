{#-
  dbt-duckdb 1.11 does not render function resources itself: these overrides of dbt-core's
  scalar-function macros turn a function resource into a DuckDB macro,
  CREATE OR REPLACE MACRO <relation>(<argument names>) AS (<body>). DuckDB macros take
  untyped parameters and have no volatility clause.
-#}

{% macro duckdb__scalar_function_create_replace_signature_sql(target_relation) -%}
  {%- set names = [] -%}
  {%- for arg in model.arguments -%}{%- do names.append(arg.name) -%}{%- endfor -%}
  CREATE OR REPLACE MACRO {{ target_relation.render() }}({{ names | join(', ') }}) AS
{%- endmacro %}

{% macro duckdb__scalar_function_body_sql() -%}
  ({{ model.compiled_code }})
{%- endmacro %}

{% macro duckdb__scalar_function_volatility_sql() -%}
{%- endmacro %}
