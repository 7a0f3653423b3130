"""Trino: SQL routines (``CREATE FUNCTION ... RETURN``) in a catalog that stores functions."""

from __future__ import annotations

from sqlglot import exp

from airflow_doi.sqlgen.dialects.base import JavaRegexDialect


class Trino(JavaRegexDialect):
    name = "trino"
    sqlglot_dialect = "trino"
    title = "Trino (SQL routines)"
    proof = (
        "emulated: every body transpiled by sqlglot (trino -> duckdb) and run on DuckDB against"
        " every conformance case (airflow_doi/sqlgen/emulate.py); no Trino engine runs in the"
        " test suite."
    )
    install = (
        "run each statement with a catalog/schema that supports function storage"
        " (e.g. SET SESSION CATALOG ... ; or prefix the names)."
    )
    dbt_adapter = "trino"
    dbt_binding = "inline"

    def re_extract(self, value: exp.Expression, pattern: str) -> exp.Expression:
        # Trino's regexp_extract is already NULL when nothing matches.
        return exp.RegexpExtract(
            this=value,
            expression=exp.Literal.string(self.regex(pattern)),
            group=exp.Literal.number(1),
        )

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        return self.snippet("URL_DECODE(REPLACE({x}, '+', '%2B'))", x=value)

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        return self.snippet(
            "ARRAY_JOIN(TRANSFORM(REGEXP_EXTRACT_ALL({x}, {runs}), r -> IF(REGEXP_LIKE(r,"
            " {ascii}), r, URL_ENCODE(r))), '')",
            x=value,
            runs=exp.Literal.string(self.regex("[\x00-\x7f]+|[^\x00-\x7f]+")),
            ascii=exp.Literal.string(self.regex("^[\x00-\x7f]")),
        )

    def create_function(
        self, name: str, param: str, body: str, *, returns_boolean: bool, null_aware: bool
    ) -> str:
        returns = self.bool_type if returns_boolean else self.text_type
        strict = "" if null_aware else "\nRETURNS NULL ON NULL INPUT"
        return (
            f"CREATE OR REPLACE FUNCTION {name}({param} {self.text_type})\n"
            f"RETURNS {returns}\nDETERMINISTIC{strict}\nRETURN\n{self.indent(body)};"
        )
