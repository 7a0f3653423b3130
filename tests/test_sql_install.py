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


# -- a new-user trial of `sql install`: the URL and --schema mistakes it met ---------------------


def _refused(result: subprocess.CompletedProcess[str], message: str) -> None:
    """Exit 2, no traceback, nothing on stdout, and exactly ``message`` on stderr."""
    assert result.returncode == 2, result
    assert result.stdout == ""
    assert result.stderr == f"airflow-doi sql install: error: {message}\n"


def test_install_refuses_an_in_memory_duckdb(tmp_path: Path) -> None:
    """`duckdb:///:memory:` said "11 functions created" of a database gone with the command."""
    for memory in (":memory:", ":memory:named"):
        _refused(forked.run([CLI, "sql", "install", f"duckdb:///{memory}"], capture_output=True,
                            text=True, timeout=300, check=False, cwd=tmp_path),
                 f"duckdb:///{memory}: {memory!r} is an in-memory database, which ends with "
                 "the command that opens it (nothing would be kept or found in it): name a "
                 "file, e.g. duckdb:///catalogue.duckdb")
    _refused(_cli("install", "duckdb:///"), "duckdb:///: the URL names no file: write its "
             "path after the three slashes, e.g. duckdb:///catalogue.duckdb")
    assert list(tmp_path.iterdir()) == []


def test_a_duckdb_url_is_percent_decoded_and_its_query_refused(tmp_path: Path) -> None:
    """The path was taken literally (a file named `trial%20sql.duckdb`, another named
    `x.duckdb?access_mode=read_only`); the report reads such URLs through the same parser."""
    result = _cli("install", f"duckdb:///{tmp_path}/trial%20sql.duckdb")
    assert result.returncode == 0, result.stderr
    made = tmp_path / "trial sql.duckdb"
    assert f"of {made} (a new DuckDB file, created now)" in result.stderr
    with duckdb.connect(str(made)) as con:
        assert con.execute("SELECT doi_key('doi:10.1000/abc')").fetchall() == [("10.1000/ABC",)]
    url = f"duckdb:///{tmp_path}/x.duckdb?access_mode=read_only"
    _refused(_cli("install", url), f"{url}: the query string '?access_mode=read_only' is not "
             "taken (no option of the driver is read from the URL, and it is no part of the "
             "file name): remove it, and write a ? that is in the file name as %3F")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trial sql.duckdb"]
    report = forked.run([CLI, "report", url, "--table", "t", "-o", str(tmp_path / "r.html")],
                        capture_output=True, text=True, timeout=300, check=False)
    assert report.returncode == 2 and "Traceback" not in report.stderr
    assert "the query string '?access_mode=read_only' is not taken" in report.stderr

    from airflow_doi.db.connect import database_path

    assert database_path("sqlite:////data/a%3Fb%25.db") == Path("/data/a?b%.db")


def test_a_schema_name_too_long_names_the_engine_limit(tmp_path: Path) -> None:
    """79 letters were refused as "not a plain name": the length is the reason (PostgreSQL
    63 bytes, MariaDB 64 characters); DuckDB has no limit, and takes the name."""
    from airflow_doi.db.install import schema_name

    long = "fix_sql_" + "a" * 71
    _refused(_cli("install", "postgresql://nobody:secret@127.0.0.1:1/test", "--schema", long),
             f"--schema {long!r} is too long: 79 bytes, and PostgreSQL holds a name of at "
             "most 63 bytes: choose a shorter name")
    with pytest.raises(ValueError) as error:
        schema_name("mariadb", long)
    assert str(error.value) == (f"--schema {long!r} is too long: 79 characters, and MariaDB "
                                "holds a name of at most 64 characters: choose a shorter name")
    with pytest.raises(ValueError, match=r"too long: 64 bytes, .* at most 63 bytes"):
        schema_name("postgres", "é" * 32)  # 32 characters, 64 bytes in UTF-8
    path = tmp_path / "long.duckdb"
    result = _cli("install", f"duckdb:///{path}", "--schema", long)
    assert result.returncode == 0, result.stderr
    with duckdb.connect(str(path)) as con:
        assert con.execute(f"SELECT {long}.doi_key('10.1/x')").fetchall() == [("10.1/X",)]


def test_a_schema_name_with_a_space_says_which_characters_are_taken(tmp_path: Path) -> None:
    """The README said a name is "written quoted, as given": it now says which characters a
    name holds, and the refusal says what to write instead."""
    path = tmp_path / "t.duckdb"
    _refused(_cli("install", f"duckdb:///{path}", "--schema", "trial sql sp"),
             "--schema 'trial sql sp' is not a plain name or database.name: a name here holds "
             "letters, digits, _, $ and - only, so not a space: write _ instead, e.g. --schema "
             "trial_sql_sp")
    _refused(_cli("install", f"duckdb:///{path}", "--schema", "a;b'c"),
             "--schema \"a;b'c\" is not a plain name or database.name: a name here holds "
             "letters, digits, _, $ and - only, so not ';', \"'\": choose a name of those "
             "characters")
    assert not path.exists()
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert ("a name of letters (any script), digits, `_`, `$` and `-` (at most 63 bytes on "
            "PostgreSQL, 64 characters on MariaDB)") in readme


def test_a_duckdb_catalog_is_checked_before_anything_is_created(tmp_path: Path) -> None:
    """`--schema a.b` reached DuckDB (`Catalog Error: "a" is not a catalog or schema`): the
    catalog is checked first, and the file's own catalog is taken."""
    path = tmp_path / "cat.duckdb"
    _refused(_cli("install", f"duckdb:///{path}", "--schema", "a.b"),
             f"duckdb:///{path}: nothing was installed: --schema 'a.b' puts the functions in "
             "the "
             f"catalog 'a', and the only one in {path} is 'cat' (another would have to be "
             "attached, and would be gone after the command): name the schema alone, e.g. "
             "--schema b")
    assert not path.exists()
    result = _cli("install", f"duckdb:///{path}", "--schema", "CAT.doi")
    assert result.returncode == 0, result.stderr
    with duckdb.connect(str(path)) as con:
        assert con.execute("SELECT cat.doi.doi_key('10.1/x')").fetchall() == [("10.1/X",)]


def test_a_mariadb_url_with_a_bad_port_is_named() -> None:
    """`Port could not be cast to integer value as 'notaport'`: neither the URL nor a remedy."""
    _refused(_cli("install", "mysql://root:sekrit99@127.0.0.1:notaport/test"),
             "mysql://127.0.0.1:notaport/test: the port 'notaport' is not a number: write the "
             "port in digits (e.g. :3306), or leave it out for 3306")
    _refused(_cli("install", "mysql://root@127.0.0.1:99999/test"),
             "mysql://127.0.0.1:99999/test: the port 99999 is out of range: a port is a number "
             "from 1 to 65535 (leave it out for 3306)")
    _refused(_cli("install", "mysql://root@[::1/test"),
             "mysql://[::1/test: the host is not one a URL can hold (an IPv6 address is "
             "written in brackets, e.g. mysql://user@[::1]:3306/db): check the host")
