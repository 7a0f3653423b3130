{#- The vector seed stores inputs as UTF-8 hex, so that controls, padding and the empty
    string survive CSV; this turns them back into text. -#}
{% macro decode_hex(column) -%}
  {{ return(adapter.dispatch('decode_hex')(column)) }}
{%- endmacro %}

{% macro duckdb__decode_hex(column) -%}
  decode(unhex({{ column }}))
{%- endmacro %}

{% macro postgres__decode_hex(column) -%}
  convert_from(decode({{ column }}, 'hex'), 'UTF8')
{%- endmacro %}
