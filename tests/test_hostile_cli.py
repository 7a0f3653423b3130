"""The command line against a user's own mistakes and secrets (issue 42, items 2 and 3).

Item 2: no command writes its ``--output`` over a file it reads: the input (a file, a
``sqlite:///`` or ``duckdb:///`` database, through a symlink or a hard link), ``--resolution``,
``--metadata``, ``--cache``, ``--snapshot``. Each is refused (exit 2, the file named) and left
byte for byte as it was.

Item 3: no message holds a credential: a ``--redis-url`` that cannot be reached or whose
password Redis refuses, a libpq URL's ``?password=``, ``sslpassword`` and ``passfile``, a
malformed percent-encoded password that libpq's own parse error would echo.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from airflow_doi.resolver.config import ResolverConfig, redact_url
from tests import forked
from tests.conftest import ROOT

SECRET = "TopSecret"
PASSFILE = "/secret/path"
DOIS = "doi\n10.1000/a\n10.1000/b\nnot a doi\n"
RESOLUTION = "doi,status,ra\n10.1000/a,resolved,Crossref\n"
METADATA = "key,metadata_status\n10.1000/a,ok\n"


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return forked.run(
        [sys.executable, "-m", "airflow_doi", *map(str, args)],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )


def dead_port() -> int:
    """A loopback port where nothing listens (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def refused(done: subprocess.CompletedProcess[str], *named: str) -> None:
    """Exit 2 with one plain error line naming ``named``, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert "error:" in done.stderr, done.stderr
    for text in named:
        assert text in done.stderr, (text, done.stderr)


def kept_secret(done: subprocess.CompletedProcess[str], *secrets: str) -> None:
    """Exit 2, no traceback, and none of ``secrets`` on stdout or stderr."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    for secret in secrets:
        assert secret not in done.stdout + done.stderr, done.stderr


# -- item 2: an output that is a file the command reads ---------------------------------------


@pytest.fixture()
def works(tmp_path: Path) -> Path:
    """A SQLite database of 1,000 DOIs in table works, column doi_raw."""
    database = tmp_path / "works.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE works (doi_raw TEXT)")
        connection.executemany("INSERT INTO works VALUES (?)",
                               [(f"10.1000/w{i}",) for i in range(1000)])
    connection.close()
    return database


def test_report_output_onto_its_own_sqlite_database_is_refused(works: Path) -> None:
    before = works.read_bytes()
    done = cli("report", f"sqlite:///{works}", "--table", "works", "--column", "doi_raw",
               "-o", works)
    refused(done, str(works))
    assert works.read_bytes() == before


def test_report_output_onto_its_own_duckdb_database_is_refused(tmp_path: Path) -> None:
    import duckdb

    database = tmp_path / "works.duckdb"
    with duckdb.connect(str(database)) as connection:
        connection.execute("CREATE TABLE works AS SELECT '10.1000/' || range AS doi "
                           "FROM range(100)")
    before = database.read_bytes()
    done = cli("report", f"duckdb:///{database}", "--table", "works", "-o", database)
    refused(done, str(database))
    assert database.read_bytes() == before


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link"])
def test_report_output_onto_its_csv_input_is_refused(tmp_path: Path, how: str) -> None:
    source = tmp_path / "cat.csv"
    source.write_text(DOIS, encoding="utf-8")
    target = source
    if how == "symlink":
        target = tmp_path / "report.html"
        target.symlink_to(source)
    elif how == "hard link":
        target = tmp_path / "report.html"
        os.link(source, target)
    done = cli("report", source, "-o", target)
    refused(done, str(target))
    assert source.read_text(encoding="utf-8") == DOIS
    if how == "symlink":
        assert target.is_symlink()


@pytest.mark.parametrize(("option", "text"), [("--resolution", RESOLUTION),
                                              ("--metadata", METADATA)],
                         ids=["resolution", "metadata"])
def test_report_output_onto_its_resolution_or_metadata_file_is_refused(
        tmp_path: Path, option: str, text: str) -> None:
    source = tmp_path / "cat.csv"
    source.write_text(DOIS, encoding="utf-8")
    table = tmp_path / "table.csv"
    table.write_text(text, encoding="utf-8")
    done = cli("report", source, option, table, "-o", table)
    refused(done, str(table), option)
    assert table.read_text(encoding="utf-8") == text
    assert source.read_text(encoding="utf-8") == DOIS


@pytest.mark.parametrize("command", ["resolve", "enrich", "repair"])
def test_output_onto_the_cache_is_refused(tmp_path: Path, command: str) -> None:
    """The cache is read (and written) by the run: an output over it would lose it."""
    source = tmp_path / "in.csv"
    source.write_text("doi\n10.1000/d1.\n", encoding="utf-8")
    cache = tmp_path / "cache.db"
    with sqlite3.connect(cache) as connection:
        connection.execute("CREATE TABLE mine (x)")
    connection.close()
    before = cache.read_bytes()
    done = cli(command, source, "-o", cache, "--cache", cache,
               "--base-url", f"http://127.0.0.1:{dead_port()}", "--max-error-share", "1")
    refused(done, str(cache), "--cache")
    assert cache.read_bytes() == before


def test_output_onto_a_new_cache_is_refused(tmp_path: Path) -> None:
    """Neither there yet: the run would create the cache, then write its output over it."""
    source = tmp_path / "in.csv"
    source.write_text("doi\n10.1000/d1\n", encoding="utf-8")
    cache = tmp_path / "new.db"
    done = cli("resolve", source, "-o", cache, "--cache", cache,
               "--base-url", f"http://127.0.0.1:{dead_port()}")
    refused(done, str(cache), "--cache")
    assert not cache.exists()


def test_enrich_output_onto_a_snapshot_file_is_refused(tmp_path: Path) -> None:
    import gzip

    source = tmp_path / "in.csv"
    source.write_text("doi\n10.1000/a\n", encoding="utf-8")
    snapshot = tmp_path / "works.jsonl.gz"
    snapshot.write_bytes(gzip.compress(b'{"DOI": "10.1000/a", "type": "journal-article"}\n'))
    before = snapshot.read_bytes()
    done = cli("enrich", source, "-o", snapshot, "--snapshot", snapshot, "--source", "snapshot")
    refused(done, str(snapshot), "--snapshot")
    assert snapshot.read_bytes() == before


def test_normalize_still_refuses_its_input_through_a_hard_link(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text(DOIS, encoding="utf-8")
    target = tmp_path / "out.csv"
    os.link(source, target)
    done = cli("normalize", source, "-o", target)
    refused(done, str(target), "input")
    assert source.read_text(encoding="utf-8") == DOIS


# -- item 3: secrets in messages -------------------------------------------------------------


@pytest.mark.parametrize("query", [
    f"password={SECRET}", f"sslpassword={SECRET}", f"passfile={PASSFILE}",
    f"PassWord={SECRET}", f"SSLPASSWORD={SECRET}",
])
def test_redact_url_hides_secret_query_parameters(query: str) -> None:
    for scheme in ("postgresql", "redis", "rediss", "mysql", "sqlite", "https"):
        url = f"{scheme}://user:{SECRET}2@host:1/db?sslmode=require&{query}&x=1"
        safe = redact_url(url)
        assert SECRET not in safe and PASSFILE not in safe, safe
        assert safe.startswith(f"{scheme}://host:1/db?sslmode=require&") and safe.endswith("&x=1")


def test_scrub_hides_what_a_driver_echoes() -> None:
    from airflow_doi.resolver.config import scrub

    url = f"postgresql://u:%zz{SECRET}@127.0.0.1:1/x?sslpassword={SECRET}2&passfile={PASSFILE}"
    said = (f'invalid percent-encoded token: "%zz{SECRET}"; {url}; '
            f'could not open "{PASSFILE}"; {SECRET}2')
    clean = scrub(said, url)
    assert SECRET not in clean and PASSFILE not in clean, clean
    assert "invalid percent-encoded token" in clean and "127.0.0.1:1" in clean
    token = "ghp_tokenInTheUserName"
    assert token not in scrub(f"refused {token}", f"https://{token}@proxy.example/")


@pytest.mark.parametrize("url", [
    "postgresql://u:Top?Secret@db.example/cat", "postgresql://u:Top#Secret@db.example/cat",
    "redis://:Top/Secret@localhost:6379/0", "https://u:Top#Secret@proxy.corp/",
    "mysql://u:Top?Sec/ret@db.example:3306/cat",
])
def test_a_password_holding_a_delimiter_is_hidden_all_the_same(url: str) -> None:
    """Review: urlsplit ends the userinfo at ``?``, ``#`` or ``/``, where libpq (and Redis)
    read on to the ``@``: such a password was printed whole."""
    from airflow_doi.resolver.config import redact_url, scrub

    shown = redact_url(url)
    assert "Top" not in shown and "Secret" not in shown, shown
    assert shown.split("://")[1].startswith(("db.example", "localhost", "proxy.corp")), shown
    said = scrub(f"connecting to {url} failed: bad password {url.split(':')[2].split('@')[0]}",
                 url)
    assert "Top" not in said and "Secret" not in said, said


def test_a_short_secret_is_hidden_where_it_stands_alone_only() -> None:
    """Review: a one-letter password turned every ``p`` of a message into ``***``."""
    from airflow_doi.resolver.config import redact_url, scrub

    said = scrub("https://u:p@h refused: https is down; password p is wrong", "https://u:p@h")
    assert said == "https://h refused: https is down; password *** is wrong", said
    assert redact_url("postgresql:///db?host=/tmp&password=x") == (
        "postgresql:///db?host=/tmp&password=***")  # a socket URL keeps its shape


def test_resolver_config_repr_hides_a_redis_password_in_the_query() -> None:
    config = ResolverConfig(redis_url=f"redis://127.0.0.1:6379/0?password={SECRET}")
    assert SECRET not in repr(config)


@pytest.mark.parametrize("command", ["resolve", "enrich", "repair"])
def test_a_dead_redis_url_is_named_without_its_password(tmp_path: Path, command: str) -> None:
    source = tmp_path / "in.csv"
    source.write_text("doi\n10.1000/d1.\n", encoding="utf-8")
    port = dead_port()
    done = cli(command, source, "-o", tmp_path / "out.csv",
               "--redis-url", f"redis://user:{SECRET}@127.0.0.1:{port}/0")
    kept_secret(done, SECRET)
    assert f"redis://127.0.0.1:{port}/0" in done.stderr, done.stderr
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_a_redis_that_refuses_the_password_is_named_without_it(
        tmp_path: Path, redis_url: str, form: str) -> None:
    """A live Redis: without auth it answers AUTH with an error; with auth, the password is
    wrong. Either way the run stops before any request, the password unsaid."""
    source = tmp_path / "in.csv"
    source.write_text("doi\n10.1000/d1\n", encoding="utf-8")
    where = urlsplit(redis_url).netloc.rpartition("@")[2]
    url = (f"redis://:{SECRET}@{where}/0" if form == "userinfo"
           else f"redis://{where}/0?password={SECRET}")
    done = cli("resolve", source, "-o", tmp_path / "out.csv", "--redis-url", url)
    kept_secret(done, SECRET)
    assert "Redis" in done.stderr and where in done.stderr, done.stderr


def _pg_url(port: int) -> str:
    return (f"postgresql://u@127.0.0.1:{port}/x?password={SECRET}&sslpassword={SECRET}2"
            f"&passfile={PASSFILE}")


@pytest.mark.parametrize("url", [
    pytest.param("pg-query", id="password-sslpassword-passfile"),
    pytest.param(f"postgresql://u:%zz{SECRET}@127.0.0.1:PORT/x", id="malformed-percent"),
    pytest.param(f"mysql://u@127.0.0.1:PORT/x?password={SECRET}", id="mysql-query"),
])
def test_sql_install_never_prints_the_password(url: str) -> None:
    port = dead_port()
    url = _pg_url(port) if url == "pg-query" else url.replace("PORT", str(port))
    done = cli("sql", "install", url)
    kept_secret(done, SECRET, PASSFILE)
    assert f"127.0.0.1:{port}" in done.stderr, done.stderr


@pytest.mark.parametrize("url", [
    pytest.param("pg-query", id="password-sslpassword-passfile"),
    pytest.param(f"postgresql://u:%zz{SECRET}@127.0.0.1:PORT/x", id="malformed-percent"),
])
def test_report_never_prints_the_password(tmp_path: Path, url: str) -> None:
    port = dead_port()
    url = _pg_url(port) if url == "pg-query" else url.replace("PORT", str(port))
    target = tmp_path / "r.html"
    done = cli("report", url, "--table", "works", "-o", target)
    kept_secret(done, SECRET, PASSFILE)
    assert f"127.0.0.1:{port}" in done.stderr, done.stderr
    assert not target.exists()


def test_report_on_a_live_database_never_prints_the_password(
        tmp_path: Path, postgres_dsn: str) -> None:
    """Connected (PostgreSQL trusts the test user): the error about the missing table names
    the database without the password the URL carried."""
    joiner = "&" if "?" in postgres_dsn else "?"
    url = f"{postgres_dsn}{joiner}password={SECRET}&sslpassword={SECRET}2"
    done = cli("report", url, "--table", "no_such_table_42", "-o", tmp_path / "r.html")
    kept_secret(done, SECRET)
    assert "no_such_table_42" in done.stderr, done.stderr
