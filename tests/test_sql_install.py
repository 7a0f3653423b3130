"""``airflow-doi sql print`` and ``sql install``: the SQL reaches a database without a checkout.

Run as a user runs them (the installed console script, in a subprocess), against real
PostgreSQL and DuckDB, twice (the second run must change nothing), and with the mistakes a
first hour brings: a wrong scheme, a missing file, a dead server.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlparse

import duckdb
import pytest

from airflow_doi.sqlgen import DIALECTS
from tests import forked

ROOT = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).with_name("airflow-doi"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return forked.run([CLI, "sql", *args], capture_output=True, text=True, timeout=300,
                      check=False)


def _user_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr and result.stdout == ""
    for word in words:
        assert word in result.stderr, result.stderr


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_print_is_the_committed_file(dialect: str) -> None:
    result = _cli("print", dialect)
    assert result.returncode == 0, result.stderr
    committed = (ROOT / "sql" / dialect / "doi_functions.sql").read_text(encoding="utf-8")
    assert result.stdout == committed


def test_print_an_unknown_dialect_names_the_known_ones() -> None:
    _user_error(_cli("print", "oracle"), "unknown dialect 'oracle'", "postgres")


#: Dialects whose functions a schema can hold, and how many each file creates.
SCHEMA_DIALECTS = {"bigquery": 11, "databricks": 5, "duckdb": 11, "mariadb": 13,
                   "postgres": 11, "redshift": 5, "snowflake": 11, "trino": 11}


@pytest.mark.parametrize("dialect", sorted(SCHEMA_DIALECTS))
def test_print_with_a_schema_qualifies_every_definition_and_call(dialect: str) -> None:
    """``sql print DIALECT --schema S``: what a warehouse user pastes (BigQuery needs a dataset
    for persistent functions): every function is created in S and every call of one is S's,
    S quoted as the dialect quotes (MariaDB and PostgreSQL take a name alone)."""
    import re

    from airflow_doi.db.install import schema_name

    schema = "doi" if dialect in ("mariadb", "postgres") else "cat.doi"
    result = _cli("print", dialect, "--schema", schema)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    created = re.findall(r"^CREATE (?:OR REPLACE )?(?:FUNCTION|MACRO) ([\w.`\"]+)\(", text,
                         re.M)
    assert len(created) == SCHEMA_DIALECTS[dialect], created
    prefix = schema_name(dialect, schema) + "."
    assert all(name.startswith(prefix) for name in created), created
    bare = {name.removeprefix(prefix) for name in created}
    unqualified = re.findall(r"(?<![\w.])(" + "|".join(bare) + r")\(", text, re.I)
    assert not unqualified, unqualified[:5]
    assert "TEMP FUNCTION" not in text


def test_print_with_a_schema_runs_on_postgres_and_duckdb(postgres_dsn: str) -> None:
    """The printed file, run by hand as psql or the DuckDB CLI would, creates working
    functions in the named schema and nowhere else."""
    import psycopg

    schema = f"doi_print_{uuid.uuid4().hex[:8]}"
    text = _cli("print", "postgres", "--schema", schema).stdout
    try:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute(text)
            key = conn.execute(f"SELECT {schema}.doi_url(%s)", ("doi:10.1000/a#b",)).fetchone()
            count = conn.execute(
                "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = %s", (schema,)).fetchone()
        assert key == ("https://doi.org/10.1000/a%23b",) and count == (11,)
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # ours, made above
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA doi")
        con.execute(_cli("print", "duckdb", "--schema", "doi").stdout)
        assert con.execute("SELECT doi.doi_key(' urn:doi:10.123:456 ')").fetchall() == [
            ("10.123/456",)]
        assert con.execute(
            "SELECT count(*) FROM duckdb_functions() WHERE schema_name = 'main' "
            "AND function_name LIKE 'doi%'").fetchall() == [(0,)]


def test_print_with_a_schema_mistakes() -> None:
    _user_error(_cli("print", "spark", "--schema", "doi"), "TEMPORARY", "without --schema")
    _user_error(_cli("print", "sqlite", "--schema", "doi"), "without --schema")
    _user_error(_cli("print", "postgres", "--schema", "doi; DROP TABLE x"), "not a plain name")


@pytest.mark.parametrize("stem", ["doi_install", "Doi_Install"])
def test_install_into_postgres_twice_in_a_schema_of_its_own(postgres_dsn: str,
                                                             stem: str) -> None:
    """A name with capitals too (found in a new-user trial: the schema was created quoted,
    the functions unquoted, so PostgreSQL looked for them in the lower-cased name)."""
    import psycopg

    schema = f"{stem}_{uuid.uuid4().hex[:8]}"
    try:
        for _ in range(2):  # idempotent: the second run replaces, nothing else changes
            result = _cli("install", postgres_dsn, "--schema", schema)
            assert result.returncode == 0, result.stderr
            assert f"11 functions created or replaced in schema {schema}" in result.stderr
        with psycopg.connect(postgres_dsn) as conn:
            names = conn.execute(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = %s ORDER BY 1", (schema,)).fetchall()
            key = conn.execute(f'SELECT "{schema}".doi_key(%s)',
                               (" https://doi.org/10.1000/Straße ",)).fetchone()
        assert len(names) == 11 and ("doi_key",) in names
        assert key == ("10.1000/STRAßE",)
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # ours, made above


def test_install_into_an_existing_duckdb_file(tmp_path: Path) -> None:
    path = tmp_path / "catalogue.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE works AS SELECT 'doi:10.1000/abc' AS doi_raw")
    for _ in range(2):
        result = _cli("install", f"duckdb:///{path}", "--schema", "doi")
        assert result.returncode == 0, result.stderr
    with duckdb.connect(str(path)) as con:
        assert con.execute("SELECT doi.doi_key(doi_raw) FROM works").fetchall() == [
            ("10.1000/ABC",)]
        assert con.execute("SELECT * FROM works").fetchall() == [("doi:10.1000/abc",)]


def test_install_mistakes_are_explained_and_leave_nothing_behind(tmp_path: Path) -> None:
    # A new file is created, as `duckdb FILE` does (tests/test_sql_names.py); a typo in its
    # directory is refused.
    missing = tmp_path / "typo" / "new.duckdb"
    _user_error(_cli("install", f"duckdb:///{missing}"), "there is no directory",
                "check the path")
    assert not missing.parent.exists()
    _user_error(_cli("install", "oracle://scott:tiger@db/orcl"), "give a postgresql://",
                "oracle://db/orcl")  # the password is never echoed
    _user_error(_cli("install", "postgresql://nobody:secret@127.0.0.1:1/test"),
                "cannot connect", "postgresql://127.0.0.1:1/test")
    _user_error(_cli("install", f"duckdb:///{missing}", "--schema", "x; DROP"),
                "is not a plain name")


def test_install_says_why_the_server_refused_the_connection(postgres_dsn: str) -> None:
    """What the server said is part of the message (found in a new-user trial: a missing
    database, an unknown user and a wrong password all read the same)."""
    url = urlparse(postgres_dsn)
    wrong = url._replace(path="/no_such_database_here").geturl()
    result = _cli("install", wrong)
    _user_error(result, "cannot connect (", "no_such_database_here", "does not exist")


def test_install_into_mariadb_twice_then_mistakes(mariadb_database: str) -> None:
    """The MariaDB file through ``sql install mysql://...``: into the database of the URL
    (twice: nothing changes), and into one --schema creates; the functions answer as Python;
    a missing database, a dead port and a URL without a database are explained (exit 2)."""
    from tests.conftest import MARIADB_DSN, mariadb_connect

    base = MARIADB_DSN.rsplit("/", 1)[0]
    for _ in range(2):
        result = _cli("install", f"{base}/{mariadb_database}")
        assert result.returncode == 0, result.stderr
        assert f"13 functions created or replaced in database {mariadb_database}" in result.stderr
    other = f"{mariadb_database}_s"
    try:
        result = _cli("install", f"{base}/", "--schema", other)
        assert result.returncode == 0, result.stderr
        with mariadb_connect(other) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT doi_key(%s), doi_reason(%s)", [" DOI:10.1/straße ", "10.1"])
            assert cursor.fetchone() == ("10.1/STRAßE", "missing_suffix")
            cursor.execute("SELECT COUNT(*) FROM information_schema.ROUTINES "
                           "WHERE ROUTINE_SCHEMA = %s", [other])
            assert cursor.fetchone()[0] == 13
    finally:
        with mariadb_connect(autocommit=True) as conn, conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{other}`")  # the test's own, made above
    _user_error(_cli("install", f"{base}/no_such_db_{uuid.uuid4().hex[:6]}"),
                "there is no database", "--schema")
    _user_error(_cli("install", "mysql://root@127.0.0.1:1/x"), "cannot connect")
    _user_error(_cli("install", f"{base}/"), "name the database")
