{#-
  Generic test: no two rows hold the same DOI by the standard's comparison key (so
  "10.1000/ABC" and "https://doi.org/10.1000/abc" are duplicates; "ß" and "SS" are not).
  Values that are not DOIs (key NULL) are ignored: test them with valid_doi.
-#}
{% test unique_doi(model, column_name) %}

select doi_key, count(*) as n_rows
from (
    select {{ dbt_doi.doi_key(column_name) }} as doi_key
    from {{ model }}
) as keyed
where doi_key is not null
group by doi_key
having count(*) > 1

{% endtest %}
