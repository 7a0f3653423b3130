"""PostgreSQL: SQL-standard function bodies (PostgreSQL 14+) over Tcl-style AREs.

PostgreSQL has no URL decoder and no byte-level regular expressions, so percent-decoding splits
the string into runs of escapes and plain text (``regexp_matches(..., 'g') WITH ORDINALITY``)
and decodes each run with ``convert_from(decode(hex))`` after the UTF-8 check has passed.
"""

from __future__ import annotations

from sqlglot import exp

from airflow_doi.sqlgen.dialects.base import Dialect


class Postgres(Dialect):
    name = "postgres"
    sqlglot_dialect = "postgres"
    title = "PostgreSQL 14+"
    proof = "run on a real PostgreSQL server against every conformance vector in the test suite."
    install = (
        "psql -v ON_ERROR_STOP=1 -f sql/postgres/doi_functions.sql (into the first schema of"
        " search_path)."
    )
    limitations = (
        "U+0000 cannot be stored in PostgreSQL text at all, so inputs containing it cannot"
        " reach the functions; a decoded %00 is reported as bad_character like any control.",
    )
    dbt_adapter = "postgres"
    dbt_binding = "subquery"
    global_flag = "g"
    text_type = "text"
    bool_type = "boolean"

    def regex_char(self, code: int) -> str:
        return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"

    def re_match(self, value: exp.Expression, pattern: str) -> exp.Expression:
        return exp.RegexpLike(this=value, expression=exp.Literal.string(self.regex(pattern)))

    def re_replace(self, value: exp.Expression, pattern: str, replacement: str) -> exp.Expression:
        # Spelled out: sqlglot's own RegexpReplace adds a "g" of its own for PostgreSQL.
        return exp.Anonymous(
            this="REGEXP_REPLACE",
            expressions=[
                value,
                exp.Literal.string(self.regex(pattern)),
                exp.Literal.string(replacement),
                exp.Literal.string("g"),
            ],
        )

    def re_extract(self, value: exp.Expression, pattern: str) -> exp.Expression:
        # substring(x FROM pattern) is group 1, and NULL when nothing matches.
        return self.snippet(
            "SUBSTRING({x} FROM {p})", x=value, p=exp.Literal.string(self.regex(pattern))
        )

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        # %00 would make convert_from fail; %01 gives the same answer (bad_character).
        return self.snippet(
            "(SELECT STRING_AGG(CASE WHEN LEFT(doi__run.m[1], 1) = '%' THEN CONVERT_FROM("
            "DECODE(REPLACE(REPLACE(doi__run.m[1], '%00', '%01'), '%', ''), 'hex'), 'UTF8')"
            " ELSE doi__run.m[1] END, '' ORDER BY doi__run.i) FROM REGEXP_MATCHES({x},"
            " '((?:%[0-9A-Fa-f]{{2}})+|[^%]+)', 'g') WITH ORDINALITY AS doi__run(m, i))",
            x=value,
        )

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        return self.snippet(
            "(SELECT STRING_AGG(CASE WHEN doi__run.m[1] ~ '^[\\u0001-\\u007F]' THEN"
            " doi__run.m[1] ELSE REGEXP_REPLACE(TRANSLATE(ENCODE(CONVERT_TO(doi__run.m[1],"
            " 'UTF8'), 'hex'), 'abcdef', 'ABCDEF'), '(..)', '%\\1', 'g') END, '' ORDER BY"
            " doi__run.i) FROM REGEXP_MATCHES({x}, '([\\u0001-\\u007F]+|[^\\u0001-\\u007F]+)',"
            " 'g') WITH ORDINALITY AS doi__run(m, i))",
            x=value,
        )

    def create_function(
        self, name: str, param: str, body: str, *, returns_boolean: bool, null_aware: bool
    ) -> str:
        # Not STRICT: PostgreSQL only inlines a STRICT SQL function whose body is provably
        # strict, and a CASE never is; a called (not inlined) function costs ~30x here. The
        # bodies give NULL for NULL anyway (doi_is_valid false, doi_reason 'empty').
        returns = self.bool_type if returns_boolean else self.text_type
        return (
            f"CREATE OR REPLACE FUNCTION {name}({param} {self.text_type}) RETURNS {returns}\n"
            f"LANGUAGE sql IMMUTABLE PARALLEL SAFE\n"
            f"RETURN\n{self.indent(body)};"
        )

    def ascii_upper_of_ascii(self, value: exp.Expression) -> exp.Expression:
        # TRANSLATE costs ~7x UPPER here. Under the "C" collation PostgreSQL's UPPER maps ASCII
        # a-z only, whatever the database locale (no Turkish dotted I), and the fast path has
        # proven the value printable ASCII anyway.
        collation = exp.Identifier(this="C", quoted=True)
        return exp.Upper(this=exp.Collate(this=value, expression=collation))
