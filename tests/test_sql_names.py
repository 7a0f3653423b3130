"""The SQL face's names and speed (issue #41 items 11-13, issue #42 item 7).

* Item 11: a dialect is named as people write it (``postgresql``, ``pg``, ``mysql``) wherever
  one is named, and ``sql install duckdb:///new.duckdb`` creates the file, as ``duckdb FILE``
  does, and says so.
* Item 12: ``doi_url`` within 5x of ``doi_key`` on PostgreSQL and in the DuckDB macros, the
  same answers as Python on hostile values, and the figures in ``bench/sql.py``'s output and in
  ``docs/sql-support.md``.
* Item 13: a cell in decomposed Unicode (``e`` + U+0301) keeps its own key (the standard
  compares code points) and is flagged as likely damaged by ``normalize`` and the report.
* #42 item 7: one rule for a schema name wherever it is written: checked before anything is
  created (a dotted name on MariaDB), quoted per dialect (``order`` in DuckDB).

Run as a user runs them where it matters (the console script in a subprocess), on real
DuckDB, PostgreSQL and MariaDB.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import unicodedata
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from airflow_doi import validate
from airflow_doi.sqlgen.conformance import expected
from tests import forked
from tests.conftest import MARIADB_DSN, ROOT, mariadb_connect

CLI = str(Path(sys.executable).with_name("airflow-doi"))
SQL_DIR = ROOT / "sql"
DECOMPOSED = "10.1000/cafe\u0301"
COMPOSED = "10.1000/caf\u00e9"


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return forked.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300,
                      check=False)


def _user_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr and result.stdout == ""
    for word in words:
        assert word in result.stderr, result.stderr


def _sql_file(dialect: str) -> str:
    return (SQL_DIR / dialect / "doi_functions.sql").read_text(encoding="utf-8")


# -- item 11: the names people write ---------------------------------------------------------


@pytest.mark.parametrize(("written", "dialect"), [
    ("postgresql", "postgres"), ("pg", "postgres"), ("PostgreSQL", "postgres"),
    ("mysql", "mariadb"), ("DuckDB", "duckdb"),
])
def test_print_takes_the_names_people_write(written: str, dialect: str) -> None:
    result = _cli("sql", "print", written)
    assert result.returncode == 0, result.stderr
    assert result.stdout == _sql_file(dialect)
    if written == "mysql":  # the MariaDB file, and a word on what MySQL itself cannot run
        assert "MariaDB 10.5+" in result.stderr and "MySQL 8" in result.stderr


def test_every_place_a_dialect_is_named_takes_the_same_names() -> None:
    from airflow_doi.db.install import in_schema, shipped_sql, sql_dialect
    from airflow_doi.sqlgen import generate

    assert generate("postgresql") == generate("pg") == _sql_file("postgres")
    assert generate("mysql") == _sql_file("mariadb")
    assert shipped_sql("postgresql") == _sql_file("postgres")
    assert sql_dialect("MySQL") == "mariadb"
    assert '"doi".doi_key(' in in_schema("postgresql", _sql_file("postgres"), "doi")
    with pytest.raises(ValueError, match=r"unknown dialect 'oracle'.*postgresql for postgres"):
        sql_dialect("oracle")
    _user_error(_cli("sql", "print", "oracle"), "unknown dialect 'oracle'", "pg for postgres")


def test_install_creates_a_new_duckdb_file_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "new.duckdb"
    result = _cli("sql", "install", f"duckdb:///{path}")
    assert result.returncode == 0, result.stderr
    assert "a new DuckDB file, created now" in result.stderr and str(path) in result.stderr
    with duckdb.connect(str(path)) as con:
        assert con.execute("SELECT doi_key('doi:10.1000/abc')").fetchall() == [("10.1000/ABC",)]
    again = _cli("sql", "install", f"duckdb:///{path}")  # now it exists: nothing said
    assert again.returncode == 0 and "new DuckDB file" not in again.stderr


def test_install_refuses_a_missing_directory_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "new.duckdb"
    _user_error(_cli("sql", "install", f"duckdb:///{missing}"), "there is no directory",
                str(missing.parent), "check the path")
    assert not missing.parent.exists()


# -- item 12: doi_url as fast as the key, and Python's answers ---------------------------------

BARE_DUCKDB = "'10.' || (1000 + i % 9000) || '/j.Cell.' || i"
#: Non-ASCII characters of 2, 3 and 4 bytes, every escaped character, dot segments, a bare
#: "%": each step of the encoding, 10,000 characters and more.
HOSTILE = (
    "10.1000/" + "aé%<b/./" * 1249,
    "10.1000/" + "é" * 9992,
    "10.1000/" + "".join(chr(c) for c in range(0x21, 0x7F)) * 110,
    "https://doi.org/10.1000/" + "a%3C%E2%82%AC" * 900,
    "10.1000/ß€😀ſ\u0800\u07ff\U0001d11e/../x/.",
    "doi:10.1000/a b\"c#d%e?f<g>h{i}j^k[l]m`n|o\\p+q",
    "10.1000/.",
    "10.1000/./..",
    "https://doi.org/10.1000/a/..",
    "10.1000/a/.b",
    DECOMPOSED,
)


def _ratio(execute: Callable[[str], object], table: str) -> float:
    """doi_url time / doi_key time over one table, best of 5 each, interleaved (the machine
    is shared: both see the same load)."""
    best_of = _bench().best_of
    key = url = float("inf")
    for _ in range(5):
        key = min(key, best_of(1, lambda: execute(f"SELECT max(doi_key(x)) FROM {table}")))
        url = min(url, best_of(1, lambda: execute(f"SELECT max(doi_url(x)) FROM {table}")))
    return url / key


@pytest.fixture(scope="module")
def duckdb_macros() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.execute(_sql_file("duckdb"))
    yield con
    con.close()


def test_doi_url_within_5x_of_doi_key_in_the_duckdb_macros(
    duckdb_macros: duckdb.DuckDBPyConnection,
) -> None:
    """100,000 bare DOIs (the issue: 156 ms against 23), and 100 copies of a hostile
    10,000-character DOI (the issue: 10-45 ms one value)."""
    con = duckdb_macros
    con.execute(f"CREATE OR REPLACE TABLE bare AS SELECT {BARE_DUCKDB} AS x"
                " FROM range(100000) t(i)")
    con.execute("CREATE OR REPLACE TABLE long AS SELECT ? AS x FROM range(100)", [HOSTILE[0]])
    for table in ("bare", "long"):
        ratio = _ratio(lambda q: con.execute(q).fetchall(), table)
        assert ratio < 5, (table, ratio)


def test_doi_url_within_5x_of_doi_key_on_postgres_and_inlined(
    postgres_dsn: str, postgres_schema: str,
) -> None:
    """100,000 bare DOIs (the issue: 2.2 s against 0.06 s); doi_url is inlined like the
    other four (its body used to hold a subquery, so PostgreSQL called it for every row)."""
    with psycopg.connect(postgres_dsn, autocommit=True) as con:
        con.execute(f'SET search_path TO "{postgres_schema}"')
        con.execute(_sql_file("postgres"))
        con.execute(f"CREATE TABLE bare AS SELECT {BARE_DUCKDB} AS x"
                    " FROM generate_series(0, 99999) i")
        con.execute("ANALYZE bare")
        plan = "\n".join(line for (line,) in con.execute(
            "EXPLAIN VERBOSE SELECT doi_url(x) FROM bare").fetchall())
        assert "doi_url(" not in plan, plan
        ratio = _ratio(lambda q: con.execute(q).fetchall(), "bare")
        assert ratio < 5, ratio


def test_doi_url_agrees_with_python_on_hostile_values(
    duckdb_macros: duckdb.DuckDBPyConnection, postgres_dsn: str, postgres_schema: str,
) -> None:
    for value in HOSTILE:
        want = expected(value).url
        assert want is not None, value
        got = duckdb_macros.execute("SELECT doi_url(?)", [value]).fetchone()
        assert got == (want,), ("duckdb", value[:60])
    with psycopg.connect(postgres_dsn, autocommit=True) as con:
        con.execute(f'SET search_path TO "{postgres_schema}"')
        con.execute(_sql_file("postgres"))
        for value in HOSTILE:
            got = con.execute("SELECT doi_url(%s)", [value]).fetchone()
            assert got == (expected(value).url,), ("postgres", value[:60])


@pytest.mark.parametrize("encoding", ["LATIN1", "EUC_JP"])
def test_doi_url_in_a_database_not_in_utf8_says_why(postgres_dsn: str, encoding: str) -> None:
    """doi_url's escapes are the bytes the database stores (so that PostgreSQL can inline
    it): in a LATIN1 or EUC_JP database an ASCII DOI is escaped as in UTF8, one beyond ASCII
    fails the query, never with other escapes; the other functions work there."""
    from urllib.parse import urlparse

    name = f"doi_{encoding.lower()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:  # EUC_JP: CHR(233) fails
        admin.execute(f"CREATE DATABASE {name} ENCODING '{encoding}' TEMPLATE template0"
                      " LC_COLLATE 'C' LC_CTYPE 'C'")
    try:
        with psycopg.connect(urlparse(postgres_dsn)._replace(path=f"/{name}").geturl(),
                             autocommit=True) as con:
            con.execute(_sql_file("postgres"))
            assert con.execute("SELECT doi_key(%s)", ["doi:10.1/café"]).fetchone() == (
                "10.1/CAFé",)
            # ASCII has the same bytes in every encoding PostgreSQL serves: escaped as in UTF8.
            for value in ["10.1/a b#c<d>", "doi:10.1000/182", "10.1/x%y"]:
                assert con.execute("SELECT doi_url(%s)", [value]).fetchone() == (
                    expected(value).url,), value
            # Beyond ASCII: an error, never other escapes (in the EUC encodings PostgreSQL's
            # own, as CHR(233) has no character there).
            said = ("doi_url needs a database whose encoding is UTF8 for a DOI beyond ASCII"
                    if encoding == "LATIN1" else "too large for encoding")
            with pytest.raises(psycopg.Error, match=said):
                con.execute("SELECT doi_url(%s)", ["10.1/café"])
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")  # made above


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_sql", ROOT / "bench" / "sql.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_bench_prints_the_doi_url_ratios(capsys: pytest.CaptureFixture[str],
                                             postgres_dsn: str) -> None:
    """bench/sql.py measures doi_url against doi_key in the same session, on the DuckDB
    macros and PostgreSQL, and prints each ratio beside the target (a small run here)."""
    bench = _bench()
    bench.bench_duckdb(2000, 1, ROOT, "macros")
    bench.bench_postgres(2000, 1, postgres_dsn, ROOT)
    out = capsys.readouterr().out
    for label in ("duckdb macros", "postgres"):
        for table in ("bare", "long", "messy"):
            line = re.search(rf"^{label}\s+{table}\s.*doi_url/doi_key = ([0-9.]+)\s+\(target 5",
                             out, re.M)
            assert line is not None, (label, table, out)


def test_the_docs_table_holds_measured_doi_url_figures() -> None:
    """docs/sql-support.md's table of doi_url against doi_key: each engine, each set of
    values, the ratio its two times give; under the target for the issue's figures (bare DOIs
    on both engines, the 10,000-character value in the DuckDB macros) and the messy mix."""
    text = (ROOT / "docs" / "sql-support.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (DuckDB, installed macros|PostgreSQL 15, installed functions) \|"
                      r" ([^|]+) \| ([0-9.]+) ms \| ([0-9.]+) ms \| ([0-9.]+) \|$", text, re.M)
    found = {(engine.split(",")[0], values): float(ratio) for engine, values, *_, ratio in rows}
    for engine in ("DuckDB", "PostgreSQL 15"):
        assert found[(engine, "100,000 bare DOIs")] < 5, found
        assert found[(engine, "1,000,000 messy values")] < 5, found
        assert (engine, "100 hostile 10,000-character DOIs") in found, found
    assert found[("DuckDB", "100 hostile 10,000-character DOIs")] < 5, found
    for engine, values, key, url, ratio in rows:
        assert abs(float(url) / float(key) - float(ratio)) < 0.06, (engine, values)


# -- item 13: decomposed Unicode -----------------------------------------------------------------


def test_a_decomposed_cell_keeps_its_own_key_and_is_likely_damaged() -> None:
    from airflow_doi.repair import likely_damage

    assert not unicodedata.is_normalized("NFC", DECOMPOSED)
    own, twin = validate(DECOMPOSED), validate(COMPOSED)
    assert own.valid and twin.valid and own.key != twin.key  # code points, per the standard
    found = likely_damage(DECOMPOSED)
    assert found is not None and found.doi == COMPOSED, found
    assert found.rules == ("decomposed_unicode",)
    assert likely_damage(COMPOSED) is None


def test_normalize_and_the_report_flag_decomposed_cells(tmp_path: Path) -> None:
    from airflow_doi.report import build_report

    source = tmp_path / "macos.csv"
    source.write_text(f"id,doi\n1,{DECOMPOSED}\n2,{COMPOSED}\n3,10.1000/plain\n",
                      encoding="utf-8")
    result = _cli("normalize", source, "--column", "doi", "-o", tmp_path / "out.csv")
    assert result.returncode == 0, result.stderr
    assert "1 valid cell looks damaged" in result.stderr, result.stderr
    assert "decomposed_unicode" in result.stderr and "\\u0301" in result.stderr, result.stderr
    page, figures = build_report(source, "doi")
    assert figures.damaged == 1, figures.damaged_examples
    assert [row[2] for row in figures.damaged_examples] == ["decomposed_unicode"]
    assert "decomposed_unicode" in page


def test_the_docs_say_decomposed_cells_never_join() -> None:
    standard = (ROOT / "docs" / "standard.md").read_text(encoding="utf-8")
    assert "U+0301" in standard and "decomposed_unicode" in standard
    assert "decomposed_unicode" in (ROOT / "docs" / "repair.md").read_text(encoding="utf-8")


# -- #42 item 7: one rule for a schema name ------------------------------------------------------


def test_schema_names_follow_one_rule_per_dialect() -> None:
    from airflow_doi.db.install import in_schema, schema_name

    assert schema_name("duckdb", "order") == '"order"'
    assert schema_name("mariadb", "order") == "`order`"
    assert schema_name("bigquery", "proj.doi") == "`proj`.`doi`"
    assert schema_name("snowflake", "cat.doi") == '"CAT"."DOI"'  # what unquoted cat.doi means
    for dialect in ("mariadb", "postgres"):
        with pytest.raises(ValueError, match=r"--schema 'a\.b'"):
            schema_name(dialect, "a.b")
    with pytest.raises(ValueError, match="not a plain name"):
        schema_name("duckdb", 'x"; DROP TABLE t; --')
    text = in_schema("duckdb", _sql_file("duckdb"), "order")
    created = re.findall(r"^CREATE OR REPLACE MACRO (\S+)\(", text, re.M)
    assert created and all(name.startswith('"order".') for name in created), created
    assert not re.search(r'(?<!")order\.', text)


def test_duckdb_install_and_print_quote_a_reserved_word(tmp_path: Path) -> None:
    """The issue: `--schema order` was quoted in CREATE SCHEMA but not in the macro names (a
    parser error, and the schema left behind)."""
    path = tmp_path / "t.duckdb"
    duckdb.connect(str(path)).close()
    result = _cli("sql", "install", f"duckdb:///{path}", "--schema", "order")
    assert result.returncode == 0, result.stderr
    with duckdb.connect(str(path)) as con:
        assert con.execute('SELECT "order".doi_url(\'doi:10.1000/a<b\')').fetchall() == [
            ("https://doi.org/10.1000/a%3Cb",)]
    printed = _cli("sql", "print", "duckdb", "--schema", "order")
    assert printed.returncode == 0, printed.stderr
    with duckdb.connect() as con:
        con.execute('CREATE SCHEMA "order"')
        con.execute(printed.stdout)
        assert con.execute('SELECT "order".doi_key(\'10.1/x\')').fetchall() == [("10.1/X",)]


def test_duckdb_install_that_fails_leaves_nothing_behind(tmp_path: Path) -> None:
    """A schema in a catalog that is not attached: refused before anything is made (DuckDB
    would refuse it inside the install's transaction); the message says so, no schema is left
    and the new file is removed."""
    kept = tmp_path / "kept.duckdb"
    duckdb.connect(str(kept)).close()
    _user_error(_cli("sql", "install", f"duckdb:///{kept}", "--schema", "elsewhere.doi"),
                "nothing was installed: --schema 'elsewhere.doi' puts the functions in the "
                "catalog 'elsewhere'")
    with duckdb.connect(str(kept)) as con:
        assert con.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name "
                           "LIKE 'doi%' AND NOT internal").fetchall() == [(0,)]
    new = tmp_path / "new.duckdb"
    _user_error(_cli("sql", "install", f"duckdb:///{new}", "--schema", "elsewhere.doi"),
                "nothing was installed: --schema 'elsewhere.doi' puts the functions in the "
                "catalog 'elsewhere'")
    assert not new.exists()


def test_postgres_install_quotes_a_reserved_word(postgres_dsn: str) -> None:
    schema = "order"
    with psycopg.connect(postgres_dsn, autocommit=True) as con:
        exists = con.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone()
    assert exists is None, "a schema named order is someone else's: not touching it"
    try:
        result = _cli("sql", "install", postgres_dsn, "--schema", schema)
        assert result.returncode == 0, result.stderr
        with psycopg.connect(postgres_dsn) as con:
            assert con.execute('SELECT "order".doi_key(%s)', ["10.1/x"]).fetchone() == ("10.1/X",)
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as con:
            con.execute('DROP SCHEMA IF EXISTS "order" CASCADE')  # made by this test


def _mariadb_databases() -> set[str]:
    with mariadb_connect(autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute("SHOW DATABASES")
        return {row[0] for row in cursor.fetchall()}


def test_a_dotted_name_on_mariadb_is_refused_before_anything_is_created(
    mariadb_database: str,
) -> None:
    """The issue: functions_schema="a.b" created a database literally named a.b, then called
    `a`.`b`.doi_key (which fails), leaving the stray database."""
    from airflow_doi.db.statements import dialect_named
    from airflow_doi.provider.pushdown import column_sql, plan

    dotted = f"{mariadb_database}.doi"
    before = _mariadb_databases()
    with pytest.raises(ValueError, match=r"functions_schema .*no schemas inside a database"):
        plan("sql", "mysql", "auto", dotted)
    with mariadb_connect(mariadb_database, autocommit=True) as conn, pytest.raises(
            ValueError, match="functions_schema"):
        column_sql(conn, dialect_named("mysql"), "doi", dotted)
    base = MARIADB_DSN.rsplit("/", 1)[0]
    _user_error(_cli("sql", "install", f"{base}/", "--schema", dotted),
                "no schemas inside a database")
    _user_error(_cli("sql", "print", "mariadb", "--schema", dotted),
                "no schemas inside a database")
    # Nothing created: the databases that came and went meanwhile are other tests' own
    # (the mariadb_database fixture's doi_test_<10 hex>, made by tests on other workers).
    others = re.compile(r"doi_test_[0-9a-f]{10}")
    assert {d for d in _mariadb_databases() ^ before if not others.fullmatch(d)} == set()


def test_the_provider_installs_into_a_plain_mariadb_database(mariadb_database: str) -> None:
    """The same rule lets a plain name through: the functions are created in it and called
    through its quoted name."""
    from airflow_doi.db.statements import dialect_named
    from airflow_doi.provider.pushdown import column_sql

    with mariadb_connect(mariadb_database, autocommit=True) as conn:
        exprs = column_sql(conn, dialect_named("mysql"), "doi", mariadb_database)
        assert exprs["doi_key"] == f"`{mariadb_database}`.doi_key(`doi`)"
        with conn.cursor() as cursor:
            cursor.execute(f"SELECT {exprs['doi_key']} FROM (SELECT %s AS doi) AS t",
                           [" doi:10.1/straße "])
            assert cursor.fetchone() == ("10.1/STRAßE",)


def test_a_database_name_that_needs_quoting_is_still_a_name() -> None:
    """Review: the one naming rule first took only [A-Za-z_][A-Za-z0-9_]*, where MariaDB
    push-down had quoted ``analytics-prod`` and ``2024db`` (and DAGs used them)."""
    from airflow_doi.db.install import schema_name

    assert schema_name("mariadb", "analytics-prod", "functions_schema") == "`analytics-prod`"
    assert schema_name("mariadb", "2024db") == "`2024db`"
    assert schema_name("postgres", "Schéma") == '"Schéma"'
    for bad in ["doi; DROP TABLE x", "a b", "x`y", ""]:
        with pytest.raises(ValueError, match="not a plain name"):
            schema_name("mariadb", bad)
    with pytest.raises(ValueError, match=r"is too long: 65 characters, and MariaDB holds a "
                       r"name of at most 64 characters"):  # the limit, said as the limit
        schema_name("mariadb", "a" * 65)


def test_a_failed_install_through_a_link_keeps_the_link(tmp_path: Path) -> None:
    """Review: a dangling symlink counted as a new file, and the cleanup removed the user's
    link (not the file DuckDB made through it)."""
    target = tmp_path / "data" / "made.duckdb"
    target.parent.mkdir()
    link = tmp_path / "link.duckdb"
    link.symlink_to(target)
    _user_error(_cli("sql", "install", f"duckdb:///{link}", "--schema", "elsewhere.doi"),
                "nothing was installed: --schema 'elsewhere.doi' puts the functions in the "
                "catalog 'elsewhere'")
    assert link.is_symlink() and not target.exists()
