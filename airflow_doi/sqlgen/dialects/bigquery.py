"""BigQuery: SQL UDFs over RE2; percent-decoding and escaping go through BYTES."""

from __future__ import annotations

from sqlglot import exp

from airflow_doi.sqlgen.dialects.base import Dialect


class BigQuery(Dialect):
    name = "bigquery"
    sqlglot_dialect = "bigquery"
    title = "BigQuery (SQL UDFs)"
    proof = (
        "emulated: every body transpiled by sqlglot (bigquery -> duckdb) and run on DuckDB against"
        " every conformance case (airflow_doi/sqlgen/emulate.py); no BigQuery engine runs in the"
        " test suite."
    )
    install = (
        "run the file as one script (TEMP functions); for persistent functions in a dataset,"
        " print it with airflow-doi sql print bigquery --schema DATASET."
    )
    dbt_adapter = "bigquery"
    dbt_binding = "subquery"
    text_type = "STRING"
    bool_type = "BOOL"

    def re_extract(self, value: exp.Expression, pattern: str) -> exp.Expression:
        # REGEXP_EXTRACT returns the (only) capturing group, or NULL.
        return exp.Anonymous(
            this="REGEXP_EXTRACT", expressions=[value, exp.Literal.string(self.regex(pattern))]
        )

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        return self.snippet(
            "(SELECT STRING_AGG(IF(STARTS_WITH(doi__run, '%'), SAFE_CONVERT_BYTES_TO_STRING("
            "FROM_HEX(REPLACE(doi__run, '%', ''))), doi__run), '' ORDER BY doi__at) FROM"
            " UNNEST(REGEXP_EXTRACT_ALL({x}, {runs})) AS doi__run WITH OFFSET AS doi__at)",
            x=value,
            runs=exp.Literal.string("(?:%[0-9A-Fa-f]{2})+|[^%]+"),
        )

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        return self.snippet(
            "(SELECT STRING_AGG(IF(REGEXP_CONTAINS(doi__run, {ascii}), doi__run,"
            " REGEXP_REPLACE(TRANSLATE(TO_HEX(CAST(doi__run AS BYTES)), 'abcdef', 'ABCDEF'),"
            " '(..)', '%\\\\1')), '' ORDER BY doi__at) FROM UNNEST(REGEXP_EXTRACT_ALL({x},"
            " {runs})) AS doi__run WITH OFFSET AS doi__at)",
            x=value,
            runs=exp.Literal.string(self.regex("[\x00-\x7f]+|[^\x00-\x7f]+")),
            ascii=exp.Literal.string(self.regex("^[\x00-\x7f]")),
        )

    def create_function(
        self, name: str, param: str, body: str, *, returns_boolean: bool, null_aware: bool
    ) -> str:
        returns = self.bool_type if returns_boolean else self.text_type
        return (
            f"CREATE TEMP FUNCTION {name}({param} {self.text_type}) RETURNS {returns} AS (\n"
            f"{self.indent(body)}\n);"
        )
