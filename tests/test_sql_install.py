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

import duckdb
import pytest

from airflow_doi.sqlgen import DIALECTS

ROOT = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).with_name("airflow-doi"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "sql", *args], capture_output=True, text=True, timeout=300,
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


def test_install_into_postgres_twice_in_a_schema_of_its_own(postgres_dsn: str) -> None:
    import psycopg

    schema = f"doi_install_{uuid.uuid4().hex[:8]}"
    try:
        for _ in range(2):  # idempotent: the second run replaces, nothing else changes
            result = _cli("install", postgres_dsn, "--schema", schema)
            assert result.returncode == 0, result.stderr
            assert f"11 functions created or replaced in schema {schema}" in result.stderr
        with psycopg.connect(postgres_dsn) as conn:
            names = conn.execute(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = %s ORDER BY 1", (schema,)).fetchall()
            key = conn.execute(f"SELECT {schema}.doi_key(%s)",
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
    missing = tmp_path / "typo.duckdb"
    _user_error(_cli("install", f"duckdb:///{missing}"), "no DuckDB file at",
                "create the database first")
    assert not missing.exists()
    _user_error(_cli("install", "oracle://scott:tiger@db/orcl"), "give a postgresql://",
                "oracle://db/orcl")  # the password is never echoed
    _user_error(_cli("install", "postgresql://nobody:secret@127.0.0.1:1/test"),
                "cannot connect", "postgresql://127.0.0.1:1/test")
    _user_error(_cli("install", f"duckdb:///{missing}", "--schema", "x; DROP"),
                "is not a plain name")


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
