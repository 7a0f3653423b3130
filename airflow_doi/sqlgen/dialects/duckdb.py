"""DuckDB: macros over RE2; ``url_decode`` keeps ``+`` and the UTF-8 check runs before it."""

from __future__ import annotations

from sqlglot import exp

from airflow_doi.sqlgen import definition
from airflow_doi.sqlgen.dialects.base import Dialect, scan_regex


def _single_branch(pattern: str) -> bool:
    """True when no top-level ``|`` splits the pattern (so ^...$ anchors all of it)."""
    depth = 0
    for _, char, in_class in scan_regex(pattern):
        if in_class:
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return False
    return True


class DuckDB(Dialect):
    name = "duckdb"
    sqlglot_dialect = "duckdb"
    title = "DuckDB"
    proof = "run on DuckDB (python duckdb) against every conformance vector in the test suite."
    install = "con.execute(open('sql/duckdb/doi_functions.sql').read()) (creates macros)."
    dbt_adapter = "duckdb"
    dbt_binding = "inline"
    # The native extension (airflow_doi/native): built-in functions live in system.main.
    dbt_native_var = "dbt_doi_duckdb_native"
    dbt_native_schema = "system.main"
    global_flag = "g"

    def re_match(self, value: exp.Expression, pattern: str) -> exp.Expression:
        # regexp_full_match is about twice as fast as an anchored regexp_matches in DuckDB.
        if pattern.startswith("^") and pattern.endswith("$") and _single_branch(pattern):
            return exp.Anonymous(
                this="REGEXP_FULL_MATCH",
                expressions=[value, exp.Literal.string(self.regex(pattern[1:-1]))],
            )
        return super().re_match(value, pattern)

    def re_extract(self, value: exp.Expression, pattern: str) -> exp.Expression:
        # regexp_extract gives '' for no match, and NULLIF would evaluate its argument twice
        # inside a CASE branch; the first element of an empty list is NULL, in one read.
        return self.snippet(
            "REGEXP_EXTRACT_ALL({x}, {p}, 1)[1]", x=value, p=exp.Literal.string(self.regex(pattern))
        )

    def ascii_upper_of_ascii(self, value: exp.Expression) -> exp.Expression:
        # DuckDB's TRANSLATE costs ~30x UPPER. UPPER is locale-independent in DuckDB and, on a
        # value the fast path has proven printable ASCII, is exactly the a-z -> A-Z map.
        return exp.Upper(this=value)

    def key(self, value: exp.Expression) -> exp.Expression:
        # TRANSLATE costs DuckDB ~2 us a value, most of the full parse; a value whose byte
        # length equals its character length is ASCII, where UPPER is exactly a-z -> A-Z. The
        # one-element lambda reads the (expensive) value once: DuckDB does not share common
        # subexpressions inside CASE.
        return self.snippet(
            "LIST_TRANSFORM([{x}], LAMBDA doi__n: CASE WHEN STRLEN(doi__n) = LENGTH(doi__n)"
            " THEN UPPER(doi__n) ELSE TRANSLATE(doi__n, {lower}, {upper}) END)[1]",
            x=value,
            lower=exp.Literal.string(definition.LOWER),
            upper=exp.Literal.string(definition.UPPER),
        )

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        # The caller checked the escapes (well-formed UTF-8); url_decode leaves "+" alone.
        return exp.Anonymous(this="URL_DECODE", expressions=[value])

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        return self.snippet(
            "ARRAY_TO_STRING(LIST_TRANSFORM(REGEXP_EXTRACT_ALL({x}, "
            "'[\\x00-\\x7F]+|[^\\x00-\\x7F]+'), LAMBDA r: CASE WHEN ORD(r) < 128 THEN r "
            "ELSE URL_ENCODE(r) END), '')",
            x=value,
        )

    def create_function(
        self, name: str, param: str, body: str, *, returns_boolean: bool, null_aware: bool
    ) -> str:
        return f"CREATE OR REPLACE MACRO {name}({param}) AS\n{self.indent(body)};"
