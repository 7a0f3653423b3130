"""The generated DOI functions as shipped, and their installation in a database the user names
(``airflow-doi sql print`` and ``sql install``).

Only ``CREATE OR REPLACE`` statements of our own file are run, so installing twice changes
nothing and a newer version replaces an older one; the only other things created are the schema
the user asks for with ``schema=`` (``CREATE SCHEMA IF NOT EXISTS``) and, as ``duckdb FILE``
does, a DuckDB file that does not exist yet (said so; a typo in a *directory* is refused, and a
file this install created is removed again when the install fails).

A dialect is named by its directory under ``sql/`` or as people write it (:func:`sql_dialect`:
``postgresql``, ``pg``, ``mysql``). A schema name goes through one rule wherever it is written
(:func:`schema_name`: the ``CREATE SCHEMA``, the functions' names and the calls between them):
checked first, so a name a dialect cannot take is refused before anything is created, then
quoted as that dialect quotes, so a reserved word (``order``) is a name like any other.
"""

from __future__ import annotations

import re
from importlib.resources import files
from typing import Any
from urllib.parse import unquote, urlparse

from airflow_doi.db.connect import DatabaseUrlError, database_path, url_port
from airflow_doi.resolver.config import redact_url, scrub

__all__ = [
    "NORMALIZE_FUNCTIONS",
    "InstallError",
    "install",
    "install_mariadb",
    "mariadb_statements",
    "normalized_columns",
    "qualified",
    "quote_name",
    "schema_name",
    "shipped_dialects",
    "shipped_sql",
    "sql_dialect",
    "statements",
]

#: The generated functions a normalized column is made of, in the order of
#: :func:`normalized_columns`: the DOI, its key, its valid flag and its reason.
NORMALIZE_FUNCTIONS: tuple[str, str, str, str] = (
    "doi_normalize", "doi_key", "doi_is_valid", "doi_reason",
)


def normalized_columns(prefix: str = "doi") -> tuple[str, str, str, str]:
    """The four columns a DOI column is normalized into, for a prefix (the normalize
    operator's, and Spark's ``with_doi_columns``): ``NORMALIZE_FUNCTIONS`` of the column."""
    return prefix, f"{prefix}_key", f"{prefix}_valid", f"{prefix}_reason"


#: One part of a schema name: letters (any script), digits, ``_``, ``$`` and ``-``. Quoted
#: wherever written (:func:`quote_name`), so ``analytics-prod`` and ``2024db`` are names as the
#: databases take them; a space, a quote or a ``;`` is refused (README: "sql install").
_NAME_PART = re.compile(r"[\w$-]+")
#: The longest name part an engine holds: (most, counted in, engine). PostgreSQL and Redshift
#: count the bytes of the name in UTF-8 (PostgreSQL silently cuts a longer one to 63), the
#: others characters; DuckDB and Trino set no limit.
_NAME_LIMITS: dict[str, tuple[int, str, str]] = {
    "postgres": (63, "bytes", "PostgreSQL"),
    "redshift": (127, "bytes", "Redshift"),
    "mariadb": (64, "characters", "MariaDB"),
    "snowflake": (255, "characters", "Snowflake"),
    "databricks": (255, "characters", "Databricks"),
    "bigquery": (1024, "characters", "BigQuery"),
}


class InstallError(Exception):
    """The functions could not be installed; the message says why in our words."""


def shipped_dialects() -> list[str]:
    """The dialects whose generated functions ship in the package, sorted (the generator's
    list, :data:`airflow_doi.sqlgen.DIALECTS`, read from what it wrote: no sqlglot needed)."""
    shipped = files("airflow_doi") / "sql_files"
    return sorted(entry.name for entry in shipped.iterdir() if entry.is_dir())


#: Names people write for a dialect -> the generated file's dialect. ``mysql`` names the
#: MariaDB file (MySQL 8 itself is refused by :func:`install_mariadb`, and its header says so).
DIALECT_ALIASES: dict[str, str] = {"postgresql": "postgres", "pg": "postgres", "mysql": "mariadb"}


def sql_dialect(name: str) -> str:
    """The generated file's dialect for ``name`` as people write it (any case, an alias of
    :data:`DIALECT_ALIASES`). Raises ``ValueError`` naming the known dialects and aliases."""
    known = shipped_dialects()
    wanted = name.strip().lower() if isinstance(name, str) else name
    dialect = DIALECT_ALIASES.get(wanted, wanted)
    if dialect not in known:
        aliases = ", ".join(f"{alias} for {target}" for alias, target in DIALECT_ALIASES.items())
        raise ValueError(f"unknown dialect {name!r}; known: {', '.join(known)} (also {aliases})")
    return dialect


def shipped_sql(dialect: str) -> str:
    """The generated ``doi_functions.sql`` of ``dialect`` (any name :func:`sql_dialect` takes)
    as shipped in the package (``airflow_doi/sql_files`` is the repository's ``sql/``; the
    test suite holds it equal to the generator's output). Raises ``ValueError`` naming the
    known dialects."""
    name = sql_dialect(dialect)
    return (files("airflow_doi") / "sql_files" / name / "doi_functions.sql").read_text(
        encoding="utf-8")


#: Dialects whose functions only live in a session: no schema can hold them.
_SESSION_ONLY = {"spark": "TEMPORARY functions", "sqlite": "Python functions registered"
                 " on a connection (airflow_doi.db.sqlite)"}
#: Identifier quotes that are not the standard's double quote.
_QUOTES = {"mariadb": "`", "bigquery": "`", "databricks": "`", "spark": "`"}
#: Dotted parts a schema name may have (default 2: ``database.schema``), and why not more.
_SCHEMA_PARTS: dict[str, tuple[int, str]] = {
    "mariadb": (1, "MariaDB has no schemas inside a database: the functions go into one "
                   "database, named alone"),
    "postgres": (1, "PostgreSQL cannot create a schema in another database: name the schema "
                    "alone (the URL names the database)"),
}
#: Dialects that fold an unquoted name to upper case: a quoted name is upper-cased first, so
#: that it is the name the user's unquoted ``doi`` means there (``DOI``).
_FOLD_UPPER = frozenset({"snowflake"})


def quote_name(dialect: str, name: str) -> str:
    """One identifier as ``dialect`` quotes it (a quote inside doubled): the one spelling of a
    name every statement here writes."""
    quote = _QUOTES.get(dialect, '"')
    if dialect in _FOLD_UPPER:
        name = name.upper()
    return quote + name.replace(quote, quote * 2) + quote


def schema_name(dialect: str, schema: str, label: str = "--schema") -> str:
    """``schema`` (``name``, or ``database.name`` where the dialect has both) checked and
    quoted as ``dialect`` writes it: what ``CREATE SCHEMA``, the functions' names and the calls
    between them all use. Raises ``ValueError`` saying why, naming ``label`` (the option or
    parameter the name came from), before anything is created."""
    parts = schema.split(".") if isinstance(schema, str) else [schema]
    limit, why = _SCHEMA_PARTS.get(dialect, (2, "a schema name has at most two parts"))
    shape = "a plain name" if limit == 1 else "a plain name or database.name"
    for part in parts:
        if not isinstance(part, str) or not _NAME_PART.fullmatch(part):
            raise ValueError(f"{label} {schema!r} is not {shape}: {_unfit(part, label)}")
    if len(parts) > limit:
        raise ValueError(f"{label} {schema!r}: {why}, e.g. {label} {parts[-1]}")
    most, unit, engine = _NAME_LIMITS.get(dialect, (0, "", ""))
    for part in parts:
        size = len(part.encode("utf-8")) if unit == "bytes" else len(part)
        if most and size > most:
            named = "" if len(parts) == 1 else f" (its part {part[:20]}...)"
            raise ValueError(f"{label} {schema!r} is too long{named}: {size} {unit}, and "
                             f"{engine} holds a name of at most {most} {unit}: choose a "
                             f"shorter name")
    return ".".join(quote_name(dialect, part) for part in parts)


def _unfit(part: object, label: str) -> str:
    """Why ``part`` of a schema name is not a name here, and what to write instead."""
    taken = "a name here holds letters, digits, _, $ and - only"
    if not isinstance(part, str):
        return f"{taken}, given as text"
    if not part:
        return ("a name (or a part of one, between dots) is empty: give a name of letters, "
                "digits, _, $ and -")
    bad = sorted({c for c in part if not _NAME_PART.fullmatch(c)}, key=part.index)
    if all(c.isspace() for c in bad):
        fixed = "_".join(part.split())
        return f"{taken}, so not a space: write _ instead, e.g. {label} {fixed}"
    shown = ", ".join(repr(c) for c in bad)
    return f"{taken}, so not {shown}: choose a name of those characters"


def in_schema(dialect: str, text: str, schema: str) -> str:
    """The generated file of ``dialect`` creating every function in ``schema`` (``name`` or
    ``database.name``, :func:`schema_name`), every call between them qualified; BigQuery's
    ``TEMP`` functions become persistent ones. Raises ``ValueError`` saying why where that
    cannot be done."""
    dialect = sql_dialect(dialect)
    if dialect in _SESSION_ONLY:
        raise ValueError(
            f"{dialect}'s functions are {_SESSION_ONLY[dialect]}: no schema can hold them; "
            "print it without --schema"
        )
    qualifier = schema_name(dialect, schema)
    if dialect == "bigquery":
        text = re.sub(r"^CREATE TEMP FUNCTION ", "CREATE OR REPLACE FUNCTION ", text, flags=re.M)
    return qualified(text, qualifier)


def qualified(text: str, schema: str) -> str:
    """``text`` with every function it defines, and every call of one, in ``schema`` (as
    written: :func:`schema_name`'s answer).

    DuckDB binds the names in a macro body where it is called, and PostgreSQL never looks in
    ``pg_temp`` for an unqualified function: in another schema than the caller's, the bodies'
    calls of one another must name it. Bodies spell calls in any case (``DOI__URL_DT(s)``).
    """
    names = re.findall(r"CREATE OR REPLACE (?:FUNCTION|MACRO) (\w+)\(", text)
    calls = re.compile(r"(?<![\w.])(" + "|".join(names) + r")\(", re.IGNORECASE)
    return calls.sub(lambda m: f"{schema}.{m.group(1)}(", text)


def _count(text: str) -> int:
    return len(re.findall(r"^CREATE OR REPLACE ", text, re.MULTILINE))


#: A schema as the user wrote it and as :func:`schema_name` quotes it for the dialect.
Schema = tuple[str, str] | None


def install(url: str, dialect: str, text: str, *, schema: str | None = None) -> tuple[int, str]:
    """Run ``text`` (the generated file of ``dialect``) against ``url``; returns the number of
    functions and where they went (for the user; the URL's password is never shown)."""

    shown = redact_url(url)
    try:
        dialect = sql_dialect(dialect)
        quoted = schema_name(dialect, schema) if schema is not None else None
    except ValueError as error:
        raise InstallError(str(error)) from None
    where = (schema, quoted) if schema is not None and quoted is not None else None
    if dialect == "duckdb":
        return _duckdb(url, text, where, shown)
    if dialect == "postgres":
        return _postgres(url, text, where, shown)
    if dialect == "mariadb":
        return _mariadb(url, text, where, shown)
    raise InstallError(f"installing {dialect} functions is not supported")


def _said(error: BaseException, url: str) -> str:
    """What the server or driver said, on one line, without the credentials of ``url``
    (libpq echoes a malformed percent-encoded password, and may name the URL)."""
    words = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return scrub(words, url) or type(error).__name__


def _duckdb(url: str, text: str, schema: Schema, shown: str) -> tuple[int, str]:
    import duckdb

    try:
        path = database_path(url)  # duckdb:///rel, duckdb:////abs
    except ValueError as error:
        raise InstallError(f"{shown}: {error}") from None
    if path.is_symlink():  # Review: a failed install would remove the link, not the file
        path = path.resolve()
    new = not path.exists()
    if new and not path.parent.is_dir():
        raise InstallError(f"{shown}: there is no directory {path.parent} for a new DuckDB file "
                           f"{path.name}: check the path (duckdb:///relative.duckdb, "
                           "duckdb:////absolute/path.duckdb)")
    done = False
    try:
        try:
            con = duckdb.connect(str(path))
        except duckdb.Error:
            raise InstallError(f"{shown}: cannot open {path} as a DuckDB database (is it "
                               "another file, or open in another process?)") from None
        try:
            _duckdb_catalog(con, schema, shown, path)
            count = _duckdb_run(con, text, schema)
            done = True
        except duckdb.Error as error:
            raise InstallError(f"{shown}: DuckDB refused the functions ({_said(error, url)})"
                               ) from None
        finally:
            con.close()
    finally:
        if new and not done:  # the files this run made, for functions it could not create
            for leftover in (path, path.with_name(path.name + ".wal")):
                leftover.unlink(missing_ok=True)
    place = f"schema {schema[0] if schema else 'main'} of {path}"
    return count, place + (" (a new DuckDB file, created now)" if new else "")


def _duckdb_catalog(con: Any, schema: Schema, shown: str, path: Any) -> None:
    """Refuse, before anything is created, a ``catalog.schema`` whose catalog is not the
    file's own: another would have to be attached, and would be gone after the command."""
    if not schema or "." not in schema[0]:
        return
    catalog, name = schema[0].split(".")
    own = str(con.execute("SELECT current_database()").fetchone()[0])
    if catalog.casefold() != own.casefold():
        raise InstallError(
            f"{shown}: nothing was installed: --schema {schema[0]!r} puts the functions in "
            "the "
            f"catalog {catalog!r}, and the only one in {path} is {own!r} (another would have "
            f"to be attached, and would be gone after the command): name the schema alone, "
            f"e.g. --schema {name}")


def _duckdb_run(con: Any, text: str, schema: Schema) -> int:
    """The file (and the schema) in one transaction: all of it, or nothing."""
    con.execute("BEGIN TRANSACTION")
    try:
        if schema:
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema[1]}")
            text = qualified(text, schema[1])
        con.execute(text)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return _count(text)


def _postgres(url: str, text: str, schema: Schema, shown: str) -> tuple[int, str]:
    import psycopg

    try:
        con = psycopg.connect(url, connect_timeout=10)
    except psycopg.Error as error:
        raise InstallError(f"{shown}: cannot connect ({_said(error, url)}): check the host, port, "
                           "user, password and database name, and that the server is running"
                           ) from None
    try:
        with con.transaction():
            if schema:
                # Quoted like every name (schema_name): unquoted, PostgreSQL would look for
                # "trial_up" where "Trial_Up" was created.
                con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema[1]}")
                text = qualified(text, schema[1])
            con.execute(text.encode("utf-8"))
            row = (schema[0],) if schema else con.execute("SELECT current_schema()").fetchone()
    except psycopg.errors.InsufficientPrivilege:
        raise InstallError(f"{shown}: the user may not create functions there: use "
                           "--schema with a schema it owns, or another user") from None
    except psycopg.Error as error:
        old = con.info.server_version < 140000
        raise InstallError(f"{shown}: the server refused the functions ({_said(error, url)})"
                           + ("; PostgreSQL 14 or newer is needed" if old else "")) from None
    finally:
        con.close()
    return _count(text), f"schema {row[0] if row else '(current)'} of {shown}"


def statements(text: str) -> list[str]:
    """The statements of a generated file whose statements end a line with ``;`` (every
    dialect's but MariaDB's, see :func:`mariadb_statements`), without its comment lines."""
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    return [part.strip() for part in body.split(";\n") if part.strip()]


def mariadb_statements(text: str) -> list[str]:
    """The statements of a MariaDB file written for the ``mariadb`` client: ``DELIMITER``
    lines set the terminator (the stored functions hold ``;`` inside), as the client reads
    them. Comments stay with the statement after them; the server ignores them."""
    statements: list[str] = []
    delimiter, current = ";", []
    for line in text.split("\n"):
        if line.upper().startswith("DELIMITER "):
            delimiter = line.split(None, 1)[1].strip()
            continue
        if line.rstrip().endswith(delimiter):
            current.append(line.rstrip()[: -len(delimiter)])
            statements.append("\n".join(current).strip())
            current = []
        else:
            current.append(line)
    rest = "\n".join(line for line in current if not line.startswith("--")).strip()
    if rest:
        raise ValueError(f"text after the last statement: {rest[:60]!r}")
    return [statement for statement in statements if statement]


def install_mariadb(cursor: Any, text: str) -> int:
    """Run the generated MariaDB file on ``cursor`` (a DB-API cursor of the database that is
    to hold the functions); returns how many were created or replaced. MySQL and MariaDB
    before 10.5 are refused first, in our words (the file needs PCRE2 and nopad collations)."""
    cursor.execute("SELECT VERSION()")
    version = str(cursor.fetchone()[0])
    match = re.match(r"(\d+)\.(\d+)", version)
    if "mariadb" not in version.lower() or not match or (int(match[1]), int(match[2])) < (10, 5):
        raise InstallError(f"the server is {version}: the generated functions need MariaDB 10.5 "
                           "or newer (MySQL's regular expressions differ); use the operators' "
                           "mode='python' there")
    statements = mariadb_statements(text)
    for statement in statements:
        cursor.execute(statement)
    return sum(1 for s in statements if "CREATE OR REPLACE FUNCTION" in s)


def mariadb_refusal(error: BaseException, database: str) -> str:
    """Why a MariaDB server refused the functions, and what to do, from a driver error (PyMySQL
    or mysqlclient: both carry the server's error number first)."""
    code = error.args[0] if error.args else None
    if code == 1418:
        return ("binary logging is on, so the server accepts stored functions only from a user "
                "with SUPER or with log_bin_trust_function_creators=1 (these functions are "
                "DETERMINISTIC and read no table)")
    if code in (1044, 1142, 1227, 1370):
        return (f"the user may not create functions in {database!r}: grant CREATE ROUTINE, or "
                "name a database it owns")
    return f"the server refused the functions (error {code}); MariaDB 10.5 or newer is needed"


def _mariadb(url: str, text: str, schema: Schema, shown: str) -> tuple[int, str]:
    import pymysql  # type: ignore[import-untyped,unused-ignore]

    try:
        port = url_port(url, 3306)  # first: urlparse's own words name neither URL nor remedy
    except DatabaseUrlError as error:
        raise InstallError(str(error)) from None
    parsed = urlparse(url)
    database = schema[0] if schema else unquote(parsed.path.lstrip("/"))
    if not database:
        raise InstallError(f"{shown}: name the database, in the URL (mysql://user@host/db) "
                           "or with --schema")
    try:
        con = pymysql.connect(
            host=parsed.hostname or "127.0.0.1", port=port,
            user=unquote(parsed.username or "root"), password=unquote(parsed.password or ""),
            charset="utf8mb4", connect_timeout=10, autocommit=True,
        )
    except pymysql.Error as error:
        raise InstallError(f"{shown}: cannot connect ({_said(error, url)}): check the host, "
                           "port, user, password and database name, and that the server is "
                           "running") from None
    try:
        with con.cursor() as cursor:
            if schema:
                cursor.execute(f"CREATE DATABASE IF NOT EXISTS {schema[1]} CHARACTER SET utf8mb4")
            try:
                cursor.execute(f"USE {quote_name('mariadb', database)}")
            except pymysql.err.OperationalError:
                raise InstallError(f"{shown}: there is no database {database!r} (or the user "
                                   "may not use it): check the name, or pass --schema to "
                                   "create one") from None
            count = install_mariadb(cursor, text)
    except pymysql.Error as error:
        raise InstallError(f"{shown}: {mariadb_refusal(error, database)}") from None
    finally:
        con.close()
    return count, f"database {database} of {shown}"
