"""The generated SQL, run for real: DuckDB, PostgreSQL, SQLite and MariaDB against the Python
reference.

Every syntax vector with ``decode="auto"`` plus :data:`EXTRA_CASES` goes through the five
functions in each engine; any disagreement fails with the input and both answers. Spark has
its own module (its session is slow to start). The other dialects cannot run here, so every
statement of their files must parse with sqlglot in that dialect.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import psycopg
import pytest
import sqlglot
from hypothesis import example, given, settings
from hypothesis import strategies as st

from airflow_doi.db.sqlite import register
from airflow_doi.sqlgen import DIALECTS
from airflow_doi.sqlgen.conformance import EXTRA_CASES, INJECTION, Answer, expected, mixtures
from tests.conftest import MARIADB_DSN, ROOT, mariadb_connect, syntax_vectors
from tests.test_properties import noisy_values

SQL_DIR = ROOT / "sql"
SELECT_ALL = "doi_normalize({0}), doi_key({0}), doi_is_valid({0}), doi_reason({0}), doi_url({0})"


#: Edges of the shortcuts in front of the full parse (``urn:doi:`` without escapes, bare DOIs
#: with non-ASCII characters, URLs with escapes): each must still agree with Python.
SHORTCUT_CASES: tuple[str, ...] = (
    "urn:doi:10.1000:a:b",
    "URN:DOI:10.1000.5:x/y",
    "urn:doi:10.1000:./x",
    "urn:doi:10.1000:a%2Fb",
    "urn:doi:10.1000/a:b",
    "https://doi.org/10.1000%2Fx",
    "https://doi.org/10.1000/%2E/x",
    "HTTPS://DX.DOI.ORG/10.1000/A%2fb",
    "https://doi.org/10.1000/%C3%A9%C3%9F",
    "https://doi.org/10.1000/%FF",
    "https://doi.org/10.1000/a%00",
    "https://doi.org/10.1000/a%E2%80%A8",
    "https://doi.org/10.1000/a%",
    "https://doi.org/10.1000/a%2",
    "https://doi.org/10.1000/a%zz",
    "https://doi.org/10.1000/%",
    "https://doi.org/10.1000",
    "https://doi.org/10.1000%2F",
    "https://doi.org/10.x/%41",
    "http://hdl.handle.net/10.1000/%41b ",
    "10.1000/é/x",
    "10.1000/éß\u3000",
    "10.1000/a é",
    "10.1000/ǆ%41",
    "10.1000/\u00a0x",
    "10.1000/x\u200b",
    "10.1000/e\u0301",
)


def cases() -> list[str | None]:
    vectors = [v["input"] for v in syntax_vectors() if v.get("decode", "auto") == "auto"]
    return [*vectors, *EXTRA_CASES, *SHORTCUT_CASES]


def compare(engine: str, answers: list[tuple[str | None, Answer]]) -> None:
    wrong = [
        f"{value!r}: python {want} != {engine} {got}"
        for value, got in answers
        for want in [expected(value)]
        if Answer(*got) != want
    ]
    print(f"{engine}: {len(answers) - len(wrong)}/{len(answers)} cases agree with Python")
    assert not wrong, "\n".join(wrong)


def sql_file(dialect: str) -> str:
    return (SQL_DIR / dialect / "doi_functions.sql").read_text(encoding="utf-8")


def test_duckdb_agrees_with_python() -> None:
    con = duckdb.connect()
    con.execute(sql_file("duckdb"))
    answers = [
        (value, tuple(con.execute(f"SELECT {SELECT_ALL.format('$1')}", [value]).fetchone() or ()))
        for value in cases()
    ]
    compare("duckdb", answers)  # type: ignore[arg-type]


def test_duckdb_column_at_once_matches_row_by_row() -> None:
    # Vectorized execution takes CASE branches per chunk: a column mixing fast-path and
    # full-path rows must give the same answers as the rows one at a time.
    con = duckdb.connect()
    con.execute(sql_file("duckdb"))
    values = cases()
    con.execute("CREATE TABLE t (i INTEGER, x VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(values)))
    rows = con.execute(f"SELECT i, {SELECT_ALL.format('x')} FROM t ORDER BY i").fetchall()
    compare("duckdb (one column)", [(values[row[0]], row[1:]) for row in rows])


def test_duckdb_agrees_on_random_mixtures() -> None:
    con = duckdb.connect()
    con.execute(sql_file("duckdb"))
    values = mixtures(5000)
    con.execute("CREATE TABLE t (i INTEGER, x VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(values)))
    rows = con.execute(f"SELECT i, {SELECT_ALL.format('x')} FROM t ORDER BY i").fetchall()
    compare("duckdb (random mixtures)", [(values[row[0]], row[1:]) for row in rows])


@pytest.mark.parametrize("source", ["cases", "mixtures"])
def test_postgres_agrees_with_python(source: str, postgres_dsn: str, postgres_schema: str) -> None:
    values = cases() if source == "cases" else list(mixtures(5000))
    with psycopg.connect(postgres_dsn, autocommit=True) as con:
        con.execute(f'SET search_path TO "{postgres_schema}"')
        con.execute(sql_file("postgres"))
        storable = [v for v in values if v is None or "\x00" not in v]
        con.execute("CREATE TABLE t (i integer, x text)")
        with con.cursor() as cur:
            cur.executemany("INSERT INTO t VALUES (%s, %s)", list(enumerate(storable)))
        rows = con.execute(f"SELECT i, {SELECT_ALL.format('x')} FROM t ORDER BY i").fetchall()
        compare(f"postgres ({source})", [(storable[row[0]], row[1:]) for row in rows])
        # U+0000 cannot be stored in PostgreSQL text: the driver refuses it before SQL runs.
        for value in set(values) - set(storable):
            with pytest.raises(psycopg.DataError):
                con.execute("SELECT doi_key(%s)", [value])


def test_postgres_functions_are_immutable_inlinable_and_null_aware(
    postgres_dsn: str, postgres_schema: str
) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as con:
        con.execute(f'SET search_path TO "{postgres_schema}"')
        con.execute(sql_file("postgres"))
        flags = dict(
            con.execute(
                "SELECT p.proname,"
                " p.provolatile::text || p.proparallel::text || p.proisstrict::text"
                " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                " WHERE n.nspname = %s",
                [postgres_schema],
            ).fetchall()
        )
        # Immutable and parallel safe; not STRICT, so that PostgreSQL can inline the bodies.
        assert set(flags.values()) == {"isfalse"}, flags
        row = con.execute(f"SELECT {SELECT_ALL.format('NULL::text')}").fetchone()
        assert row == (None, None, False, "empty", None)
        # Inlined: the plan shows the body, not a call (every body subquery-free, immutable).
        con.execute("CREATE TABLE doi__plan (x text)")
        for name in ("doi_normalize", "doi_key", "doi_is_valid", "doi_reason", "doi_url"):
            plan = con.execute(f"EXPLAIN VERBOSE SELECT {name}(x) FROM doi__plan").fetchall()
            text = "\n".join(line for (line,) in plan)
            assert f"{name}(" not in text, text


@pytest.fixture(scope="module")
def duckdb_macros() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(sql_file("duckdb"))
    return con


@settings(max_examples=300, deadline=None)
@given(st.one_of(noisy_values, st.text(max_size=12)))
@example("\n\thttps://www.doi.org/10.1/%20")
def test_normalize_is_idempotent_in_duckdb_and_sqlite(
    duckdb_macros: duckdb.DuckDBPyConnection, value: str
) -> None:
    """doi_normalize(doi_normalize(x)) = doi_normalize(x), and both agree with Python."""
    lite = sqlite3.connect(":memory:")
    register(lite)
    want = expected(value)
    # Two plain queries: DuckDB plans a nested macro call ~40x slower than a single one.
    for engine, run in (
        ("duckdb", lambda q, v: duckdb_macros.execute(q.format("$1"), [v]).fetchone()),
        ("sqlite", lambda q, v: lite.execute(q.format("?1"), [v]).fetchone()),
    ):
        once, valid = run("SELECT doi_normalize({0}), doi_is_valid({0})", value)
        assert (once, bool(valid)) == (want.doi, want.valid), engine
        if once is not None:
            assert run("SELECT doi_normalize({0})", once) == (once,), engine


def test_sqlite_agrees_with_python() -> None:
    con = sqlite3.connect(":memory:")
    register(con)
    answers = []
    for value in cases():
        row = con.execute(f"SELECT {SELECT_ALL.format('?')}", [value] * 5).fetchone()
        answers.append((value, (row[0], row[1], bool(row[2]), row[3], row[4])))
    compare("sqlite", answers)


def test_sqlite_non_text_cells_do_not_abort_the_statement() -> None:
    con = sqlite3.connect(":memory:")
    register(con)
    assert con.execute("SELECT doi_reason(42), doi_key(X'ff')").fetchone() == (
        "bad_directory",
        None,
    )


@pytest.mark.parametrize("dialect", ["duckdb", "postgres", "sqlite"])
def test_injection_shaped_doi_round_trips(
    dialect: str, postgres_dsn: str, postgres_schema: str, tmp_path: Path
) -> None:
    """A DOI holding ', ; and -- comes back byte for byte, and nothing else runs."""
    if dialect == "duckdb":
        con = duckdb.connect(str(tmp_path / "db.duckdb"))
        con.execute(sql_file("duckdb"))
        got = con.execute("SELECT doi_normalize($1), doi_key($1)", [INJECTION]).fetchone()
        tables = con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()
    elif dialect == "postgres":
        with psycopg.connect(postgres_dsn, autocommit=True) as pg:
            pg.execute(f'SET search_path TO "{postgres_schema}"')
            pg.execute(sql_file("postgres"))
            got = pg.execute("SELECT doi_normalize(%s), doi_key(%s)", [INJECTION] * 2).fetchone()
            tables = pg.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = %s", [postgres_schema]
            ).fetchone()
    else:
        lite = sqlite3.connect(":memory:")
        register(lite)
        got = lite.execute("SELECT doi_normalize(?), doi_key(?)", [INJECTION] * 2).fetchone()
        tables = lite.execute("SELECT count(*) FROM sqlite_master").fetchone()
    assert got == (INJECTION, expected(INJECTION).key)
    assert tables == (0,)


PARSE_ONLY = ["snowflake", "bigquery", "trino", "redshift", "databricks"]


@pytest.mark.parametrize("dialect", PARSE_ONLY)
def test_other_dialects_parse(dialect: str) -> None:
    """sqlglot parses every statement of the file as a CREATE FUNCTION in that dialect (no
    fallback to an opaque command), and the five public functions are among them."""
    text = sql_file(dialect)
    statements = [s for s in sqlglot.parse(text, read=DIALECTS[dialect].sqlglot_dialect) if s]
    kinds = {type(s).__name__ for s in statements}
    print(f"{dialect}: {len(statements)} statements parse as {sorted(kinds)}")
    assert kinds == {"Create"}
    created = {s.this.this.name for s in statements}
    assert {"doi_normalize", "doi_key", "doi_is_valid", "doi_reason", "doi_url"} <= created


def test_headers_state_install_and_limits() -> None:
    for name, dialect in DIALECTS.items():
        head = sql_file(name).split("\n\n")[0]
        assert "GENERATED by `airflow-doi sql generate`" in head
        assert "Install:" in head and "cannot honour" in head
        for limit in dialect.limitations:
            assert limit.split()[0] in head


def _without_c_collated_upper(body: str) -> str:
    """``body`` with every ``UPPER(<x> COLLATE "C")`` removed: PostgreSQL's UPPER under the "C"
    collation maps ASCII a-z only (``test_postgres_c_collated_upper_is_ascii_only`` proves it on
    the server), so the key of any value may use it."""
    out, i = [], 0
    while (start := body.find("UPPER(", i)) != -1:
        depth, j = 0, start + len("UPPER")
        while True:
            depth += {"(": 1, ")": -1}.get(body[j], 0)
            if depth == 0:
                break
            j += 1
        inner = body[start + len("UPPER("):j]
        out.append(body[i:start])
        if not inner.rstrip().endswith('COLLATE "C"'):
            out.append(body[start:j + 1])
        i = j + 1
    return "".join(out) + body[i:]


def test_postgres_c_collated_upper_is_ascii_only(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn) as con:
        got = con.execute("""SELECT UPPER('abzéßıﬁǆ' COLLATE "C")""").fetchone()
    assert got == ("ABZéßıﬁǆ",)


def test_no_unicode_upper_on_a_doi() -> None:
    """UPPER appears only in the ASCII fast paths of DuckDB, PostgreSQL, MariaDB, Spark and
    Databricks (values proven printable ASCII, where every UPPER maps a-z only; PostgreSQL's
    under the "C" collation) and in DuckDB's key of a parsed DOI whose byte length equals its
    character length (ASCII)."""
    for name in DIALECTS:
        body = sql_file(name)
        if name == "postgres":
            body = _without_c_collated_upper(body)
        if name in ("duckdb", "postgres", "mariadb", "spark", "databricks"):
            body = body.replace("THEN UPPER(", "")
        code = "\n".join(line for line in body.splitlines() if not line.startswith("--"))
        assert "UPPER(" not in code.upper().replace("DOI__", ""), name


EXAMPLES = ROOT / "examples" / "queries"


def test_duckdb_example_query_runs_and_joins_by_key() -> None:
    con = duckdb.connect()
    con.execute(sql_file("duckdb"))
    statements = [s for s in (EXAMPLES / "duckdb_catalogue_join.sql").read_text().split(";\n")]
    results = [con.execute(s).fetchall() for s in statements if s.strip().strip("-").strip()]
    quality, joined, duplicates = results[-3:]
    assert quality == [(5, "10.100O/182", "bad_registrant")]
    assert [row[0] for row in joined] == [1, 2, 4]  # not 3: straße is not STRASSE
    assert duplicates == []


def test_postgres_example_query_runs(postgres_dsn: str, postgres_schema: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as con:
        con.execute(f'SET search_path TO "{postgres_schema}"')
        con.execute(sql_file("postgres"))
        text = (EXAMPLES / "postgres_catalogue_quality.sql").read_text(encoding="utf-8")
        statements = [s for s in text.split(";\n") if s.strip()]
        results = []
        for statement in statements:
            cursor = con.execute(statement)
            results.append(cursor.fetchall() if cursor.description else None)
        status, lookup, export = results[-3:]
        assert dict(status) == {
            "valid": 3,
            "bad_directory": 1,
            "empty": 1,
            "reserved_suffix": 1,
        }
        assert lookup == [(1, "10.1000/182", "https://doi.org/10.1000/182")]
        assert [row[0] for row in export] == [1, 2, 3]


#: Long and hostile values: 10,000 characters in every form, all-``%``, trailing dot segments
#: and spaces after a long suffix, a long run of escapes (the regexes must not recurse per
#: character, and the answer must be Python's).
LONG_CASES: tuple[str, ...] = (
    "10.1000/" + "x" * 10_000,
    " doi:10.1000/" + "Ab" * 5_000 + " ",
    "https://doi.org/10.1000/" + "%41" * 3_000 + "%20",
    "urn:doi:10.1000:" + "y" * 10_000,
    "10.1000/" + "a/" * 5_000 + "..",
    "10.1000/" + "é" * 10_000,
    "%" * 10_000,
    "https://doi.org/" + "%" * 10_000,
    "10." + "1" * 10_000 + "/x",
)


def test_long_and_hostile_values_agree_on_every_executed_engine(
    postgres_dsn: str, postgres_schema: str
) -> None:
    values = list(LONG_CASES)
    con = duckdb.connect()
    con.execute(sql_file("duckdb"))
    compare("duckdb (long)", [
        (v, tuple(con.execute(f"SELECT {SELECT_ALL.format('$1')}", [v]).fetchone() or ()))
        for v in values])
    lite = sqlite3.connect(":memory:")
    register(lite)
    answers = []
    for v in values:
        row = lite.execute(f"SELECT {SELECT_ALL.format('?')}", [v] * 5).fetchone()
        answers.append((v, (row[0], row[1], bool(row[2]), row[3], row[4])))
    compare("sqlite (long)", answers)
    with psycopg.connect(postgres_dsn, autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{postgres_schema}"')
        pg.execute(sql_file("postgres"))
        compare("postgres (long)", [
            (v, tuple(pg.execute(f"SELECT {SELECT_ALL.format('%s')}", [v] * 5).fetchone() or ()))
            for v in values])


# -- MariaDB (issue #11): its own dialect, run on the real server ------------------------------


def _mariadb_client_install(database: str) -> None:
    """The file through the ``mariadb`` command-line client, as its header says to install it
    (its DELIMITER lines are the client's)."""
    import shutil
    import subprocess
    from urllib.parse import urlparse

    client = shutil.which("mariadb") or shutil.which("mysql")
    assert client, "the mariadb client comes with mariadb-server (scripts/services.sh)"
    url = urlparse(MARIADB_DSN)
    command = [client, f"--host={url.hostname}", f"--port={url.port or 3306}",
               f"--user={url.username}", "--default-character-set=utf8mb4", database]
    env = {"MYSQL_PWD": url.password or "", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(command, input=sql_file("mariadb"), text=True, capture_output=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr


def _mariadb_answers(cursor: object, values: list[str | None]) -> list[tuple]:
    cursor.execute("CREATE OR REPLACE TABLE t (i INTEGER, x LONGTEXT)")  # type: ignore[attr-defined]
    cursor.executemany("INSERT INTO t VALUES (%s, %s)", list(enumerate(values)))  # type: ignore[attr-defined]
    cursor.execute(f"SELECT i, {SELECT_ALL.format('x')} FROM t ORDER BY i")  # type: ignore[attr-defined]
    return [(values[row[0]], (row[1], row[2], bool(row[3]), row[4], row[5]))
            for row in cursor.fetchall()]  # type: ignore[attr-defined]


@pytest.mark.parametrize("source", ["cases", "mixtures"])
def test_mariadb_agrees_with_python(source: str, mariadb_database: str) -> None:
    """Every conformance vector and the extra cases, installed with the mariadb client into a
    database whose default collation is the server's case-blind one (the table column too):
    the functions compare exactly anyway (``ß`` is not ``SS``, ``doi:`` is not ``DOI:``)."""
    _mariadb_client_install(mariadb_database)
    values = cases() if source == "cases" else list(mixtures(5000))
    with mariadb_connect(mariadb_database) as con, con.cursor() as cursor:
        compare(f"mariadb ({source})", _mariadb_answers(cursor, values))


def test_mariadb_long_and_hostile_values(mariadb_database: str) -> None:
    """10,000-character values in every form and a 1 MB one: no error, Python's answers."""
    _mariadb_client_install(mariadb_database)
    values = [*LONG_CASES, "10.1000/" + "x" * 1_000_000,
              "https://doi.org/10.1/" + "%C3%A9" * 50_000]
    with mariadb_connect(mariadb_database) as con, con.cursor() as cursor:
        compare("mariadb (long)", _mariadb_answers(cursor, values))


def test_mariadb_keys_keep_apart_what_its_default_collation_folds(mariadb_database: str) -> None:
    """On a *_general_ci column ``ß`` = ``S`` and ``'a '`` = ``'a'``; the generated key
    collates utf8mb4_bin, so joining on it keeps them apart, as the standard does."""
    _mariadb_client_install(mariadb_database)
    with mariadb_connect(mariadb_database) as con, con.cursor() as cursor:
        cursor.execute("CREATE TABLE a (x VARCHAR(100))")  # the database's general_ci
        cursor.executemany("INSERT INTO a VALUES (%s)",
                           [("10.1/ß",), ("10.1/SS",), ("10.1/s",), ("10.1/S",)])
        cursor.execute("SELECT COUNT(*) FROM a a1 JOIN a a2 ON a1.x = a2.x")
        assert cursor.fetchone()[0] > 4  # the collation folds them together
        cursor.execute("SELECT COUNT(*) FROM a a1 JOIN a a2 ON doi_key(a1.x) = doi_key(a2.x)")
        assert cursor.fetchone()[0] == 6  # ß, SS, and the two of S/s sharing the key 10.1/S
