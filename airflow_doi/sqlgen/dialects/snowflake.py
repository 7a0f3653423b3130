"""Snowflake: SQL UDFs over POSIX regular expressions (see :mod:`.posix`)."""

from __future__ import annotations

from sqlglot import exp

from airflow_doi.sqlgen.dialects.base import Dialect
from airflow_doi.sqlgen.dialects.posix import to_posix


def _num(value: int) -> exp.Expression:
    return exp.Literal.number(value)


class Snowflake(Dialect):
    name = "snowflake"
    sqlglot_dialect = "snowflake"
    title = "Snowflake (SQL UDFs)"
    proof = (
        "emulated: every body transpiled by sqlglot (snowflake -> duckdb) and run on DuckDB against"
        " every conformance case (airflow_doi/sqlgen/emulate.py); no Snowflake engine runs in the"
        " test suite."
    )
    install = "run the file with USE SCHEMA set (SnowSQL: !source sql/snowflake/doi_functions.sql)."
    limitations = (
        "U+0000 in an input is not tested for (Snowflake strings are C strings in several"
        " clients); the other controls are, and a decoded %00 is bad_character.",
    )
    dbt_adapter = "snowflake"
    dbt_binding = "inline"

    def regex(self, pattern: str) -> str:
        # Raw code points: Snowflake's POSIX engine has no \\x{...} escapes.
        return pattern.replace("\x00", "\x01")

    def _params(self, dotall: bool, extra: str = "") -> exp.Literal:
        return exp.Literal.string("c" + ("s" if dotall else "") + extra)

    def re_match(self, value: exp.Expression, pattern: str) -> exp.Expression:
        posix = to_posix(pattern)
        instr = exp.Anonymous(
            this="REGEXP_INSTR",
            expressions=[
                value,
                exp.Literal.string(self.regex(posix.pattern)),
                _num(1),
                _num(1),
                _num(0),
                self._params(posix.dotall),
            ],
        )
        return exp.GT(this=instr, expression=_num(0))

    def re_replace(self, value: exp.Expression, pattern: str, replacement: str) -> exp.Expression:
        posix = to_posix(pattern)
        return exp.Anonymous(
            this="REGEXP_REPLACE",
            expressions=[
                value,
                exp.Literal.string(self.regex(posix.pattern)),
                exp.Literal.string(replacement.replace("\\1", f"\\{posix.first_group}")),
                _num(1),
                _num(0),
                self._params(posix.dotall),
            ],
        )

    def re_extract(self, value: exp.Expression, pattern: str) -> exp.Expression:
        posix = to_posix(pattern)
        return exp.Anonymous(
            this="REGEXP_SUBSTR",
            expressions=[
                value,
                exp.Literal.string(self.regex(posix.pattern)),
                _num(1),
                _num(1),
                self._params(posix.dotall, "e"),
                _num(posix.first_group),
            ],
        )

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        # The patterns cannot test for U+0000 (see regex), so %00 decodes to U+0001 instead:
        # the same answer, bad_character. Every "%" of a run starts an escape, so "%00" found
        # in a run is always the escape itself.
        return self.snippet(
            "ARRAY_TO_STRING(TRANSFORM(REGEXP_SUBSTR_ALL({x}, '(%[0-9A-Fa-f]{{2}})+|[^%]+'),"
            " r -> IFF(LEFT(r::VARCHAR, 1) = '%', HEX_DECODE_STRING(REPLACE(REPLACE("
            "r::VARCHAR, '%00', '%01'), '%', '')), r::VARCHAR)), '')",
            x=value,
        )

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        return self.snippet(
            "ARRAY_TO_STRING(TRANSFORM(REGEXP_SUBSTR_ALL({x}, {runs}), r ->"
            " IFF(REGEXP_INSTR(r::VARCHAR, {ascii}) > 0, r::VARCHAR,"
            " REGEXP_REPLACE(HEX_ENCODE(r::VARCHAR), '(..)', '%\\\\1'))), '')",
            x=value,
            runs=exp.Literal.string(self.regex("[\x01-\x7f]+|[^\x01-\x7f]+")),
            ascii=exp.Literal.string(self.regex("^[\x01-\x7f]")),
        )

    def create_function(
        self, name: str, param: str, body: str, *, returns_boolean: bool, null_aware: bool
    ) -> str:
        returns = self.bool_type if returns_boolean else self.text_type
        strict = "" if null_aware else "\nRETURNS NULL ON NULL INPUT"
        return (
            f"CREATE OR REPLACE FUNCTION {name}({param} {self.text_type})\n"
            f"RETURNS {returns}\nLANGUAGE SQL{strict}\nIMMUTABLE\nAS\n$$\n{self.indent(body)}\n$$;"
        )
