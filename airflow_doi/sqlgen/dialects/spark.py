"""Spark SQL (Apache Spark 4 temporary functions) and Databricks SQL (persistent functions).

Both run ``java.util.regex``; ``url_decode`` turns ``+`` into a space, so ``+`` is escaped to
``%2B`` first (the UTF-8 check has already rejected bad escapes).
"""

from __future__ import annotations

from sqlglot import exp

from airflow_doi.sqlgen import definition
from airflow_doi.sqlgen.dialects.base import JavaRegexDialect


class Spark(JavaRegexDialect):
    name = "spark"
    sqlglot_dialect = "spark"
    title = "Apache Spark SQL 4 (temporary SQL functions)"
    proof = "run on Spark SQL (pyspark, local mode) against every conformance vector."
    install = (
        "airflow_doi.spark.register(spark), or run each statement with spark.sql() in the"
        " session (TEMPORARY functions live as long as the session); see sql/databricks for"
        " persistent functions."
    )
    text_type = "STRING"
    temporary = True
    # One self-contained body per public function: Spark evaluates the argument of a nested
    # SQL function call for every row, above the CASE, so helper functions would run the full
    # parse on every value and the shortcuts would never save anything. A lambda binds each
    # step instead, and Spark runs it (interpreted) only for the rows that reach it.
    binding = "lambda"
    dbt_binding = "lambda"
    shortcuts = frozenset({definition.ESCAPED_URLS})

    def starts(self, value: exp.Expression, prefix: str) -> exp.Expression:
        # A byte comparison on Spark's UTF8String; SUBSTRING(...) = builds a string first.
        return exp.StartsWith(this=value, expression=exp.Literal.string(prefix))

    def ascii_upper_of_ascii(self, value: exp.Expression) -> exp.Expression:
        # TRANSLATE maps code point by code point through a hash map, ~3x UPPER here. Spark's
        # UPPER of an all-ASCII string is its ASCII fast path (a-z only, no locale), and the
        # fast path has proven the value printable ASCII.
        return exp.Upper(this=value)

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        return self.snippet("URL_DECODE(REPLACE({x}, '+', '%2B'))", x=value)

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        return self.snippet(
            "ARRAY_JOIN(TRANSFORM(REGEXP_EXTRACT_ALL({x}, {runs}, 1), r -> CASE WHEN r RLIKE"
            " {ascii} THEN r ELSE URL_ENCODE(r) END), '')",
            x=value,
            runs=exp.Literal.string(self.regex("([\x00-\x7f]+|[^\x00-\x7f]+)")),
            ascii=exp.Literal.string(self.regex("^[\x00-\x7f]")),
        )

    def create_function(
        self, name: str, param: str, body: str, *, returns_boolean: bool, null_aware: bool
    ) -> str:
        returns = self.bool_type if returns_boolean else self.text_type
        kind = "TEMPORARY FUNCTION" if self.temporary else "FUNCTION"
        deterministic = "" if self.temporary else "\nDETERMINISTIC"
        return (
            f"CREATE OR REPLACE {kind} {name}({param} {self.text_type})\n"
            f"RETURNS {returns}{deterministic}\nRETURN\n{self.indent(body)};"
        )


class Databricks(Spark):
    name = "databricks"
    sqlglot_dialect = "databricks"
    title = "Databricks SQL (Unity Catalog SQL functions)"
    proof = (
        "parsed with sqlglot (databricks); the same definition as sql/spark, which is run on"
        " Spark SQL in the test suite."
    )
    install = "run the file in a Databricks SQL warehouse with USE CATALOG/SCHEMA set first."
    dbt_adapter = "databricks"
    temporary = False
