{#-
  Generic test: every non-NULL value of the column is a valid DOI (in any presentation form).
  Failing rows carry the first failing reason. NULLs pass: pair with not_null if needed.
-#}
{% test valid_doi(model, column_name) %}

select
    {{ column_name }} as value,
    {{ dbt_doi.doi_reason(column_name) }} as reason
from {{ model }}
where {{ column_name }} is not null
  and not {{ dbt_doi.doi_is_valid(column_name) }}

{% endtest %}
