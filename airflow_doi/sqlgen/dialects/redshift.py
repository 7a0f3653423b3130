"""Amazon Redshift: scalar SQL UDFs (one SELECT, no FROM, arguments as ``$1``), PCRE mode.

A Redshift SQL UDF cannot hold a FROM clause, so there is no way to split a string into runs
and map over them: percent-decoding handles ASCII escapes (%00-%7F) with nested REPLACE, and
``doi_url`` cannot escape non-ASCII characters. Both limits are stated in the file header.
"""

from __future__ import annotations

from sqlglot import exp

from airflow_doi.sqlgen import definition
from airflow_doi.sqlgen.dialects.base import Dialect

_ARG = "doi__argument"


def _num(value: int) -> exp.Expression:
    return exp.Literal.number(value)


class Redshift(Dialect):
    name = "redshift"
    sqlglot_dialect = "redshift"
    title = "Amazon Redshift (scalar SQL UDFs)"
    proof = (
        "emulated: every body transpiled by sqlglot (redshift -> duckdb) and run on DuckDB against"
        " every conformance case (airflow_doi/sqlgen/emulate.py); no Redshift engine runs in the"
        " test suite."
    )
    install = "run the file in the target schema (psql or the query editor)."
    limitations = (
        "percent-escapes of non-ASCII bytes (%80-%FF) in URL/URN/info forms give"
        " bad_encoding instead of being decoded (a SQL UDF cannot map over runs of escapes).",
        "doi_url is NULL for a DOI with non-ASCII characters (same reason).",
        "every function is one inlined expression: SQL UDFs cannot call SQL UDFs.",
    )
    binding = "inline"
    argument = _ARG
    pretty = False
    dbt_adapter = "redshift"
    dbt_binding = "inline"

    def regex(self, pattern: str) -> str:
        return super().regex(pattern.replace(definition.UTF8_ESCAPES, definition.ASCII_ESCAPES))

    def re_match(self, value: exp.Expression, pattern: str) -> exp.Expression:
        instr = exp.Anonymous(
            this="REGEXP_INSTR",
            expressions=[
                value,
                exp.Literal.string(self.regex(pattern)),
                _num(1),
                _num(1),
                _num(0),
                exp.Literal.string("p"),
            ],
        )
        return exp.GT(this=instr, expression=_num(0))

    def replacement(self, text: str) -> str:
        return text.replace("\\1", "$1")

    def re_replace(self, value: exp.Expression, pattern: str, replacement: str) -> exp.Expression:
        return exp.Anonymous(
            this="REGEXP_REPLACE",
            expressions=[
                value,
                exp.Literal.string(self.regex(pattern)),
                exp.Literal.string(self.replacement(replacement)),
                _num(1),
                exp.Literal.string("p"),
            ],
        )

    def re_extract(self, value: exp.Expression, pattern: str) -> exp.Expression:
        substr = exp.Anonymous(
            this="REGEXP_SUBSTR",
            expressions=[
                value,
                exp.Literal.string(self.regex(pattern)),
                _num(1),
                _num(1),
                exp.Literal.string("pe"),
            ],
        )
        return exp.Nullif(this=substr, expression=exp.Literal.string(""))

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        # Only ASCII escapes reach here (the check above uses ASCII_ESCAPES); %25 goes last so
        # that no escape is decoded twice.
        result = value
        for code in range(0x7F, -1, -1):
            if code == 0x25:
                continue
            spellings = {f"%{code:02X}", f"%{code:02x}"}
            for spelling in sorted(spellings):
                result = exp.Anonymous(
                    this="REPLACE",
                    expressions=[
                        result,
                        exp.Literal.string(spelling),
                        exp.Literal.string(chr(max(code, 1))),
                    ],
                )
        return exp.Anonymous(
            this="REPLACE", expressions=[result, exp.Literal.string("%25"), exp.Literal.string("%")]
        )

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        return exp.Case(
            ifs=[exp.If(this=self.re_match(value, "[^\x01-\x7f]"), true=exp.null())],
            default=value.copy(),
        )

    def create_function(
        self, name: str, param: str, body: str, *, returns_boolean: bool, null_aware: bool
    ) -> str:
        returns = self.bool_type if returns_boolean else self.text_type
        body = body.replace(_ARG, "$1")
        return (
            f"CREATE OR REPLACE FUNCTION {name}({self.text_type})\nRETURNS {returns}\nIMMUTABLE\n"
            f"AS $$\n  SELECT\n{self.indent(body, 4)}\n$$ LANGUAGE sql;"
        )
