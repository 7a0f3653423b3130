"""Run the generated SQL of engines that cannot run here (Snowflake, BigQuery, Trino, Redshift)
on DuckDB: each file is parsed by sqlglot in its own dialect, and each ``CREATE FUNCTION``'s
body is transpiled to DuckDB and installed as a macro of the same name and parameters.

Why: parsing proves only the shape of a file (sqlglot passes unknown functions through), and
the four engines are not available offline. Transpiled bodies, executed, prove the logic of
the file we ship, string literal by string literal, on every conformance vector. The proof is
weaker than a run on the real engine in two documented ways: each engine's functions are
replaced by DuckDB's (sqlglot's mapping of them is trusted, except where :data:`SHIMS` corrects
it), and the regular expressions run on RE2 (Snowflake's POSIX and Redshift's PCRE engines, and
Trino's ``java.util.regex``, read the constructs the generator emits the same way).

Databricks needs no emulation: its file runs unchanged on Spark SQL 4 (persistent SQL
functions in the session catalog), see :func:`databricks_statements`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel

__all__ = [
    "EMULATED",
    "SHIMS",
    "Function",
    "databricks_statements",
    "install",
    "macros",
    "read_functions",
]

#: Dialects this module runs on DuckDB.
EMULATED = ("snowflake", "bigquery", "trino", "redshift")

#: Every place where sqlglot's own snowflake/bigquery/trino/redshift -> duckdb mapping is wrong
#: for a function the generated files use, and what the harness does instead. Each entry
#: weakens the proof for that function: it is checked against the engine's documentation, not
#: run on the engine. Rendered into docs/sql-support.md.
SHIMS: dict[str, tuple[str, ...]] = {
    "snowflake": (),
    "bigquery": (
        "`SAFE_CONVERT_BYTES_TO_STRING(b)` has no DuckDB mapping: a macro `decode(b,"
        " 'replace')`, which puts `?` where BigQuery puts U+FFFD for invalid UTF-8. DuckDB"
        " decorrelates the decoder's subquery and runs it on rows the UTF-8 check rejected,"
        " so the shim must not fail there; a bug that let such bytes through would still show"
        " (the answer would hold `?`, Python's is `bad_encoding`).",
        "`CAST(s AS BYTES)` is the UTF-8 encoding of `s` in BigQuery; sqlglot maps it to"
        " DuckDB's `CAST(s AS BLOB)`, which reads `\\x` escapes and refuses non-ASCII: the"
        " harness uses DuckDB's `encode(s)` (UTF-8 bytes).",
        "`REGEXP_EXTRACT(x, p)` returns p's capturing group in BigQuery; sqlglot counts the"
        " groups with Python's `re`, which cannot compile RE2's `\\x{600}`, and then returns"
        " the whole match: the harness counts them with `\\x{...}` masked.",
    ),
    "trino": (
        "`REGEXP_REPLACE` replacements: Java's `$1` is rewritten to RE2's `\\1` (sqlglot keeps"
        " `$1`, which DuckDB writes literally).",
        "`REGEXP_EXTRACT(x, p, 1)` is NULL in Trino when nothing matches; sqlglot's DuckDB"
        " `regexp_extract` gives `''`: emulated as `CASE WHEN regexp_matches(x, p) THEN"
        " regexp_extract(x, p, 1) END`.",
    ),
    "redshift": (
        "`REGEXP_REPLACE(x, p, r, 1, 'p')` replaces every match in Redshift; sqlglot maps it"
        " to a single replacement: the harness adds DuckDB's `'g'` flag.",
        "`REGEXP_REPLACE` replacements: PCRE's `$1` is rewritten to RE2's `\\1`.",
        "`REGEXP_SUBSTR(x, p, 1, 1, 'pe')` returns the first group in Redshift; sqlglot drops"
        " the `e` and returns the whole match: the harness asks DuckDB for group 1.",
    ),
}


@dataclass(frozen=True)
class Function:
    """One ``CREATE FUNCTION`` of a generated file, its body in the file's own dialect."""

    name: str
    params: tuple[str, ...]
    body: exp.Expression
    #: Declared ``RETURNS NULL ON NULL INPUT`` (the macro must then give NULL for NULL).
    strict: bool


@contextmanager
def _deep_recursion() -> Iterator[None]:
    # Redshift's bodies nest ~260 REPLACE calls (its ASCII percent-decoder): sqlglot's
    # recursive descent needs more than Python's default stack of frames for them.
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _body(dialect: str, statement: exp.Create) -> exp.Expression:
    body = statement.expression
    if isinstance(body, (exp.RawString, exp.Heredoc)):  # Snowflake $$...$$, Redshift $$ SELECT
        body = sqlglot.parse_one(body.name, read=dialect)
    elif isinstance(body, (exp.Return, exp.Paren)):  # Trino RETURN ..., BigQuery AS (...)
        body = body.this
    if isinstance(body, exp.Select):  # Redshift: SELECT <expression>, no FROM
        if len(body.expressions) != 1 or body.args.get("from"):
            raise ValueError(f"unexpected {dialect} function body: {body.sql(dialect)[:200]}")
        body = body.expressions[0]
    return cast(exp.Expression, body)


def read_functions(dialect: str, text: str) -> list[Function]:
    """Every ``CREATE FUNCTION`` of a generated file, in file order (helpers first)."""
    functions = []
    with _deep_recursion():
        statements = [s for s in sqlglot.parse(text, read=dialect) if s]
    for statement in statements:
        if not isinstance(statement, exp.Create) or statement.kind != "FUNCTION":
            raise ValueError(f"{dialect}: not a CREATE FUNCTION: {statement.sql(dialect)[:200]}")
        udf = statement.this
        with _deep_recursion():
            body = _body(dialect, statement)
            columns = udf.expressions
            if all(isinstance(c, exp.ColumnDef) for c in columns):
                params = tuple(c.name for c in columns)
            else:  # Redshift: types only, the body reads $1, $2, ...
                params = tuple(f"doi__p{i}" for i in range(1, len(columns) + 1))
                body = body.transform(_positional(params))
        properties = statement.args.get("properties")
        strict = properties is not None and any(
            "RETURNS NULL ON NULL INPUT" in p.sql(dialect).upper()
            for p in properties.expressions
        )
        functions.append(Function(udf.this.name, params, body, strict))
    return functions


def _positional(params: tuple[str, ...]) -> Any:
    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Parameter) and node.name.isdigit():
            return exp.column(params[int(node.name) - 1])
        return node

    return replace


def _group_refs(replacement: exp.Expression) -> exp.Expression:
    """``$1`` (Java, PCRE) to ``\\1`` (RE2); anything else that Java or PCRE would read as
    syntax is refused, so the rewrite can never silently change a replacement."""
    text = replacement.name
    if not isinstance(replacement, exp.Literal) or re.search(r"\\|\$(?!\d)", text):
        raise ValueError(f"replacement the emulation cannot translate: {replacement.sql()}")
    return exp.Literal.string(re.sub(r"\$(\d)", r"\\\1", text))


#: Regular-expression flags that mean nothing on RE2 and are dropped before transpiling (so
#: that any other construct sqlglot cannot map is an error, not a warning): Snowflake's ``c``
#: (case-sensitive, the default everywhere) and Redshift's ``p`` (PCRE syntax, which RE2 reads
#: alike for the constructs the generator emits).
_NEUTRAL_FLAGS = {"snowflake": "c", "redshift": "p"}


def _drop_neutral_flags(dialect: str, node: exp.Expression) -> None:
    neutral = _NEUTRAL_FLAGS.get(dialect, "")
    for key in ("parameters", "modifiers"):
        flags = node.args.get(key)
        if neutral and isinstance(flags, exp.Literal) and flags.is_string:
            kept = "".join(f for f in flags.name if f not in neutral)
            node.set(key, exp.Literal.string(kept) if kept else None)


def _shim(dialect: str, node: exp.Expression) -> exp.Expression:
    """Apply :data:`SHIMS` to one node (see there for why each exists)."""
    _drop_neutral_flags(dialect, node)
    if dialect in ("trino", "redshift") and isinstance(node, exp.RegexpReplace):
        node.set("replacement", _group_refs(node.args["replacement"]))
        if dialect == "redshift":
            node.set("single_replace", None)
            node.set("position", None)
            node.set("modifiers", exp.Literal.string("g"))
        return node
    if dialect == "bigquery" and isinstance(node, exp.Cast) and node.to.is_type("binary"):
        return exp.Anonymous(this="ENCODE", expressions=[node.this])
    if dialect == "bigquery" and isinstance(node, exp.RegexpExtract):
        groups = re.compile(re.sub(r"\\x\{[0-9A-Fa-f]+\}", "x", node.expression.name)).groups
        node.set("group", exp.Literal.number(1) if groups == 1 else None)
        return node
    if dialect == "trino" and isinstance(node, exp.RegexpExtract):
        matches = exp.RegexpLike(this=node.this.copy(), expression=node.expression.copy())
        return exp.Case(ifs=[exp.If(this=matches, true=node.copy())])
    if dialect == "redshift" and isinstance(node, exp.RegexpExtract):
        parameters = node.args.get("parameters")
        if parameters is not None and "e" in parameters.name:
            return exp.RegexpExtract(
                this=node.this.copy(),
                expression=node.expression.copy(),
                group=exp.Literal.number(1),
            )
    return node


def _apply_shims(dialect: str, body: exp.Expression) -> exp.Expression:
    """:func:`_shim` on every node, children before parents (a replacement copies its
    children, which must already be shimmed)."""
    root = body.copy()
    for node in reversed(list(root.walk())):
        new = _shim(dialect, cast(exp.Expression, node))
        if new is not node:
            if node is root:
                root = new
            else:
                node.replace(new)
    return root


#: DuckDB macros standing in for engine functions sqlglot does not map (see :data:`SHIMS`).
SHIM_MACROS: dict[str, tuple[str, ...]] = {
    "bigquery": (
        "CREATE OR REPLACE MACRO safe_convert_bytes_to_string(b) AS decode(b, 'replace')",
    ),
}


def macros(dialect: str, text: str) -> list[str]:
    """The DuckDB statements that emulate a generated file: shim macros, then one
    ``CREATE MACRO`` per function in file order."""
    if dialect not in EMULATED:
        raise ValueError(f"{dialect!r} is not emulated here; emulated: {', '.join(EMULATED)}")
    statements = list(SHIM_MACROS.get(dialect, ()))
    for function in read_functions(dialect, text):
        with _deep_recursion():
            body = _apply_shims(dialect, function.body)
            sql = body.sql(dialect="duckdb", unsupported_level=ErrorLevel.RAISE)
        if function.strict:
            nulls = " OR ".join(f"{p} IS NULL" for p in function.params)
            sql = f"CASE WHEN {nulls} THEN NULL ELSE {sql} END"
        statements.append(
            f"CREATE OR REPLACE MACRO {function.name}({', '.join(function.params)}) AS {sql}"
        )
    return statements


def install(con: Any, dialect: str, text: str) -> None:
    """Install the emulation of ``text`` (a generated file of ``dialect``) on a DuckDB
    connection: afterwards ``doi_key(x)`` & co. run the transpiled bodies."""
    for statement in macros(dialect, text):
        con.execute(statement)


def databricks_statements(text: str) -> list[str]:
    """The statements of ``sql/databricks/doi_functions.sql``, unchanged, for ``spark.sql()``:
    Spark SQL 4 creates them as persistent SQL functions in its session catalog."""
    body = "\n".join(line for line in text.split("\n") if not line.startswith("--"))
    return [s.strip() for s in body.split(";\n") if s.strip()]
