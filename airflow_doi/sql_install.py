"""The generated DOI functions as shipped, and their installation in a database the user names
(``airflow-doi sql print`` and ``sql install``).

Only ``CREATE OR REPLACE`` statements of our own file are run, so installing twice changes
nothing and a newer version replaces an older one; the only other thing created is the schema
the user asks for with ``schema=`` (``CREATE SCHEMA IF NOT EXISTS``). A DuckDB file must
already exist: a typo in a path must not leave a new empty database behind.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["InstallError", "install", "qualified", "shipped_sql"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class InstallError(Exception):
    """The functions could not be installed; the message says why in our words."""


def shipped_sql(dialect: str) -> str:
    """The generated ``doi_functions.sql`` of ``dialect`` as shipped in the package
    (``airflow_doi/sql_files`` is the repository's ``sql/``; the test suite holds it equal to
    the generator's output). Raises ``ValueError`` naming the known dialects."""
    from importlib.resources import files

    shipped = files("airflow_doi") / "sql_files"
    known = sorted(entry.name for entry in shipped.iterdir() if entry.is_dir())
    if dialect not in known:
        raise ValueError(f"unknown dialect {dialect!r}; known: {', '.join(known)}")
    return (shipped / dialect / "doi_functions.sql").read_text(encoding="utf-8")


def _schema(schema: str | None) -> str | None:
    if schema is not None and not _IDENTIFIER.fullmatch(schema):
        raise InstallError(f"--schema {schema!r} is not a plain name (letters, digits and _)")
    return schema


def qualified(text: str, schema: str) -> str:
    """``text`` with every function it defines, and every call of one, in ``schema``.

    DuckDB binds the names in a macro body where it is called, and PostgreSQL never looks in
    ``pg_temp`` for an unqualified function: in another schema than the caller's, the bodies'
    calls of one another must name it. Bodies spell calls in any case (``DOI__URL_DT(s)``).
    """
    names = re.findall(r"CREATE OR REPLACE (?:FUNCTION|MACRO) (\w+)\(", text)
    calls = re.compile(r"(?<![\w.])(" + "|".join(names) + r")\(", re.IGNORECASE)
    return calls.sub(lambda m: f"{schema}.{m.group(1)}(", text)


def _count(text: str) -> int:
    return len(re.findall(r"^CREATE OR REPLACE ", text, re.MULTILINE))


def install(url: str, dialect: str, text: str, *, schema: str | None = None) -> tuple[int, str]:
    """Run ``text`` (the generated file of ``dialect``) against ``url``; returns the number of
    functions and where they went (for the user; the URL's password is never shown)."""
    from airflow_doi.resolver.config import redact_url

    schema = _schema(schema)
    shown = redact_url(url)
    if dialect == "duckdb":
        return _duckdb(url, text, schema, shown)
    if dialect == "postgres":
        return _postgres(url, text, schema, shown)
    raise InstallError(f"installing {dialect} functions is not supported")


def _duckdb(url: str, text: str, schema: str | None, shown: str) -> tuple[int, str]:
    import duckdb

    rest = url.split("://", 1)[1]
    path = Path(rest[1:] if rest.startswith("/") else rest)  # duckdb:///rel, duckdb:////abs
    if not path.is_file():
        raise InstallError(f"{shown}: no DuckDB file at {path}: create the database first, "
                           "or check the path (duckdb:///relative.duckdb, "
                           "duckdb:////absolute/path.duckdb)")
    try:
        con = duckdb.connect(str(path))
    except duckdb.Error:
        raise InstallError(f"{shown}: cannot open {path} as a DuckDB database (is it another "
                           "file, or open in another process?)") from None
    try:
        if schema:
            con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            text = qualified(text, schema)
        con.execute(text)
    finally:
        con.close()
    return _count(text), f"schema {schema or 'main'} of {path}"


def _postgres(url: str, text: str, schema: str | None, shown: str) -> tuple[int, str]:
    import psycopg

    try:
        con = psycopg.connect(url, connect_timeout=10)
    except psycopg.Error:
        raise InstallError(f"{shown}: cannot connect: check the host, port, user, password and "
                           "database name, and that the server is running") from None
    try:
        with con.transaction():
            if schema:
                con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                text = qualified(text, schema)
            con.execute(text.encode("utf-8"))
            row = (schema,) if schema else con.execute("SELECT current_schema()").fetchone()
    except psycopg.errors.InsufficientPrivilege:
        raise InstallError(f"{shown}: the user may not create functions there: use "
                           "--schema with a schema it owns, or another user") from None
    except psycopg.Error as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else "unknown"
        raise InstallError(f"{shown}: the server refused the functions ({first}); "
                           "PostgreSQL 14 or newer is needed") from None
    finally:
        con.close()
    return _count(text), f"schema {row[0] if row else schema} of {shown}"
