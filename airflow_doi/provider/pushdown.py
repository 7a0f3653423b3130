"""Push-down: where the operators compute (:func:`plan`), the DOI rules in SQL (:func:`column_sql`).

The project generates exact SQL for the DOI rules (:mod:`airflow_doi.sqlgen`); an operator
that pulled every value through the Python worker would ignore it and scale with the worker,
not the warehouse. So wherever the engine has generated SQL, normalize is one ``UPDATE`` and
validate one ``GROUP BY``, with the rules inlined as expressions of the source column: nothing
is installed in the user's database (no function, no schema), the statement carries its own
definition. SQLite has no SQL functions of its own: the Python ones are registered on the
task's connection (:mod:`airflow_doi.db.sqlite`), still one statement.

MariaDB is the exception: its percent-decoding needs two small stored functions (loops), so
its rules cannot be inlined. There the operators push down only when the user names a
database for them (``functions_schema``): they create or replace the generated ``doi_*``
functions there (the same file as ``airflow-doi sql install``) and call them; without it
they work in the worker and say how to push down. Nothing is created in a database the user
did not name.

``mode="python"`` keeps the page-by-page path, which is also what every other engine and any
``decode`` other than ``auto`` (the generated SQL implements ``auto``) get. Both modes write
the same columns (the test suite compares them row by row).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal, get_args

from airflow_doi._install import pip_install
from airflow_doi.db.install import (
    NORMALIZE_FUNCTIONS,
    InstallError,
    install_mariadb,
    mariadb_refusal,
    qualified,
    schema_name,
    shipped_sql,
)
from airflow_doi.db.sqlite import register
from airflow_doi.db.statements import StatementDialect, dialect_named

__all__ = [
    "PUSHDOWN_ENGINES", "Mode", "Plan", "check_mode", "column_sql", "from_normalized", "plan",
]

Mode = Literal["auto", "sql", "python"]
_MODES: tuple[str, ...] = get_args(Mode)

#: Engines whose rules run in the database: generated SQL (DuckDB, PostgreSQL) or the
#: registered Python functions (SQLite, one statement in the engine's own loop).
#: Snowflake, BigQuery, Trino and Databricks get their generated bodies inlined, in their own
#: dialect (proven by running the bodies, transpiled, on DuckDB: docs/sql-support.md).
#: Redshift is left out: its SQL cannot decode non-ASCII escapes, Python can.
#: MariaDB (the ``mysql`` connection type) pushes down into the database it is given.
PUSHDOWN_ENGINES: tuple[str, ...] = (
    "duckdb", "postgres", "sqlite", "snowflake", "bigquery", "trino", "databricks", "mysql",
)

#: The four expressions the operators need, by the public SQL function they come from.
FUNCTIONS = NORMALIZE_FUNCTIONS


def check_mode(mode: object) -> Mode:
    """``mode`` checked (it may come from a template)."""
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(_MODES)}, not {mode!r}")
    return mode  # type: ignore[return-value]


@dataclass(frozen=True)
class Plan:
    """Where one run computes, and why (the operators log ``why``)."""

    in_database: bool
    why: str


def plan(
    mode: Mode, engine: str, decode: str = "auto", functions_schema: str | None = None,
) -> Plan:
    """Push down when asked (``sql``) or possible (``auto``); ``sql`` that cannot be honoured
    is an error naming what to change, never a silent fallback. ``functions_schema``: the
    database MariaDB's functions go into (see the module docstring), checked by the rule of
    every schema name (:func:`~airflow_doi.db.install.schema_name`) before anything is made."""
    if engine == "mysql" and functions_schema:
        schema_name("mariadb", functions_schema, "functions_schema")
    if mode == "python":
        return Plan(False, "in the worker, page by page (mode='python')")
    problem = None
    if engine == "redshift":
        problem = ("Redshift's generated SQL cannot decode non-ASCII percent-escapes, so its "
                   "answers would differ from Python's (docs/sql-support.md)")
    elif engine not in PUSHDOWN_ENGINES:
        problem = (f"the {engine} connection has no generated DOI SQL in the operators "
                   f"(they push down on {', '.join(PUSHDOWN_ENGINES)})")
    elif decode != "auto":
        problem = f"decode={decode!r} is only implemented in Python (the SQL follows 'auto')"
    elif engine == "mysql" and not functions_schema:
        problem = ("on MariaDB the rules run in the database as stored functions: pass "
                   "functions_schema='<a database>' to let the operator create (or replace) "
                   "the doi_* functions there")
    if problem is None:
        if engine == "sqlite":
            how = "the Python functions registered on the connection"
        elif engine == "mysql":
            how = (f"the generated MariaDB functions, created or replaced in database "
                   f"{functions_schema}")
        else:
            how = f"the generated {engine} SQL, inlined: nothing is installed"
        return Plan(True, f"in the database, one statement with {how}")
    if mode == "sql":
        raise ValueError(f"mode='sql' cannot run here: {problem}; use mode='auto' or 'python'")
    return Plan(False, f"in the worker, page by page: {problem}")


def column_sql(
    conn: Any, dialect: StatementDialect, column: str, functions_schema: str | None = None,
    qualifier: str | None = None,
) -> dict[str, str]:
    """SQL expressions of the plain identifier ``column`` (after ``qualifier.``, a table alias,
    when given) for the four :data:`FUNCTIONS`, written in the engine's own dialect (run them
    on :func:`native_cursor`).

    On SQLite the functions are registered on ``conn`` (the task's own connection) first; on
    MariaDB they are created or replaced in the database ``functions_schema``.
    On DuckDB and PostgreSQL the generator writes each function's body around the column, cast
    to text, so a number or a date in a DOI column is judged as its text, as in Python mode.
    """
    engine = dialect.name
    if dialect.fold_upper:
        column = column.upper()
    source = (f"{qualifier}." if qualifier else "") + dialect.quote(column)
    if engine == "sqlite":
        register(conn)
        return {name: f"{name}({source})" for name in FUNCTIONS}
    if engine == "mysql":
        if not functions_schema:
            raise ValueError("MariaDB push-down needs functions_schema")
        schema = _install_mariadb(conn, functions_schema)
        return {name: f"{schema}.{name}({source})" for name in FUNCTIONS}
    try:
        import sqlglot  # noqa: F401  (the generator's, and _text_argument's)
    except ImportError as error:  # pragma: no cover - the [airflow] extra installs it
        raise RuntimeError(
            f"in-database DOI rules need sqlglot: {pip_install('airflow')} (or pass "
            "mode='python')"
        ) from error
    if engine == "postgres":
        with conn.cursor() as cursor:
            cursor.execute(_pg_temp_functions())
        argument = _text_argument("postgres", column, qualifier).sql(dialect="postgres")
        return {name: f"pg_temp.{name}({argument})" for name in FUNCTIONS}
    return dict(zip(FUNCTIONS, _inline(engine, column, qualifier), strict=True))


def _text_argument(engine: str, column: str, qualifier: str | None) -> Any:
    """``CAST(column AS text)`` under the engine's byte-wise collation where it has one
    (:attr:`~airflow_doi.db.statements.StatementDialect.binary_collation`): a column declared
    case- or accent-blind (DuckDB's ``NOCASE.NOACCENT``; on PostgreSQL a nondeterministic ICU
    collation, under which ``LIKE`` fails) is read as the text it holds."""
    import sqlglot
    from sqlglot import exp

    text = exp.Cast(this=exp.column(column, table=qualifier, quoted=True),
                    to=exp.DataType.build("text"))
    collation = dialect_named(engine).binary_collation
    if not collation:
        return text
    collated = sqlglot.parse_one(f"x{collation}", read=engine)
    collated.set("this", text)
    return collated


@functools.lru_cache(maxsize=32)
def _inline(engine: str, column: str, qualifier: str | None = None) -> tuple[str, ...]:
    """The :data:`FUNCTIONS`' bodies around ``CAST(column AS text)`` (generating them takes
    sqlglot a good part of a second: once per process and column)."""
    from airflow_doi.sqlgen.dialects import DIALECTS
    from airflow_doi.sqlgen.render import public_body

    dialect = DIALECTS[engine]
    binding = dialect.dbt_binding or dialect.binding
    text = _text_argument(engine, column, qualifier)
    return tuple(public_body(dialect, name, text.copy(), binding) for name in FUNCTIONS)


#: The generator's dialect for each engine the operators derive columns from a DOI on.
_SQLGEN_DIALECTS = {"postgres": "postgres", "duckdb": "duckdb", "mysql": "mariadb"}


@functools.lru_cache(maxsize=32)
def from_normalized(engine: str, doi: str, table: str | None = None) -> tuple[str, str] | None:
    """The key of the normalized DOI in the column (or derived column) ``doi`` (of ``table``,
    an alias, when given), and
    whether its suffix is reserved, in the engine's own dialect; None where the operators
    compute each column from the source instead (SQLite's registered functions share one parse
    per row anyway; warehouses get the four bodies)."""
    name = _SQLGEN_DIALECTS.get(engine)
    if name is None:
        return None
    from sqlglot import exp

    from airflow_doi.sqlgen.dialects import DIALECTS
    from airflow_doi.sqlgen.render import from_normalized as derive

    return derive(DIALECTS[name], exp.column(doi, table=table, quoted=True))


def _install_mariadb(conn: Any, schema: str) -> str:
    """The generated MariaDB functions, created or replaced in the database ``schema`` (made
    if missing: the user named it), every name and call qualified with it, so the task's
    connection keeps its own current database; returns the name as written (quoted)."""
    quoted = schema_name("mariadb", schema, "functions_schema")  # before anything is made
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS {quoted} CHARACTER SET utf8mb4")
            install_mariadb(cursor, qualified(shipped_sql("mariadb"), quoted))
    except InstallError:
        raise
    except Exception as error:  # the driver's (PyMySQL or mysqlclient): say it in our words
        if not (error.args and isinstance(error.args[0], int)):
            raise
        raise InstallError(f"functions_schema {schema!r}: {mariadb_refusal(error, schema)}; "
                           "or use mode='python'") from None
    return quoted


@functools.lru_cache(maxsize=1)
def _pg_temp_functions() -> str:
    """The generated PostgreSQL functions, every name (definitions and calls) in ``pg_temp``:
    PostgreSQL never looks up an unqualified function name there, by design."""
    return qualified(shipped_sql("postgres"), "pg_temp")
