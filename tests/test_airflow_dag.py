# ruff: noqa: F811  (``browser`` is the fixture of test_report_browser, used as an argument)
"""The example DAG ``doi_enrich_catalogue`` end to end, through ``airflow dags test``.

One migrated ``AIRFLOW_HOME`` (SQLite metadata) is shared by every test of this module, which
therefore runs on one xdist worker; each test brings its own catalogue database (a DuckDB file,
a SQLite file, or a fresh PostgreSQL schema) and its own proxy simulator, reached by the DAG
through ``AIRFLOW_CONN_*`` environment variables in JSON form.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import urlparse

import duckdb
import pytest

from airflow_doi import comparison_key, normalize, validate
from airflow_doi.metadata.csl import FIELDS
from airflow_doi.resolver.agencies import work_for
from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked
from tests.conftest import MARIADB_DSN, record_figure
from tests.test_report_browser import browser, cards_in_chromium  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.xdist_group("airflow_dags"), pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
DAGS = ROOT / "examples" / "dags"
SAMPLE = ROOT / "examples" / "data" / "catalogue.csv"
DAG_ID = "doi_enrich_catalogue"


def _sample_keys() -> set[str]:
    import csv

    with SAMPLE.open(encoding="utf-8", newline="") as handle:
        checks = [validate(row["doi_raw"] or None) for row in csv.DictReader(handle)]
    return {c.key for c in checks if c.valid and c.key}


SAMPLE_KEYS = _sample_keys()
SAMPLE_ROWS = sum(1 for _ in SAMPLE.open(encoding="utf-8")) - 1
#: What the demo and these tests ask of the DAG; its defaults load nothing and run no dbt.
SAMPLE_RUN = {"load_sample": True, "run_dbt": True}


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ``AIRFLOW_HOME`` migrated once (``airflow db migrate`` is the slow part)."""
    home = tmp_path_factory.mktemp("airflow_home")
    result = subprocess.run([AIRFLOW, "db", "migrate"], env=_base_env(home), cwd=home,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return home


def _base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AIRFLOW_CONN_") and k != "AIRFLOW_DOI_EXAMPLE_RETRIES"}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(DAGS),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
    )
    return env


def _dag_env(home: Path, catalogue: dict[str, object], proxy_url: str,
             rate: float = 200.0, metadata_hosts: tuple[str, ...] = (),
             simulator: ProxySimulator | None = None) -> dict[str, str]:
    """The DAG's connections; with ``simulator``, its agencies and batch APIs, as its
    connection line names them."""
    env = _base_env(home)
    env["AIRFLOW_CONN_DOI_CATALOGUE"] = json.dumps(catalogue)
    extra: dict[str, object] = {"rate": rate, "concurrency": 4, "agency_rate": rate,
                                "list_rate": rate}
    if simulator is not None:
        metadata_hosts = simulator.metadata_hosts
        extra.update(crossref_url=simulator.crossref_url, datacite_url=simulator.datacite_url)
    if metadata_hosts:
        extra["metadata_hosts"] = ",".join(metadata_hosts)
    env["AIRFLOW_CONN_DOI_PROXY_DEFAULT"] = json.dumps(
        {"conn_type": "doi_proxy", "host": proxy_url, "extra": extra})
    return env


#: The typed columns of doi_metadata, as read back for the comparison.
METADATA_FIELDS = FIELDS


def _assert_sources(simulator: ProxySimulator) -> None:
    """Enrichment went through the batch APIs by default (#33): every key asked once, by a
    list query (Crossref's and DataCite's) or by content negotiation (the others)."""
    asked = Counter(simulator.list_dois_by_key) + Counter(simulator.cn_by_key)
    assert set(asked) == SAMPLE_KEYS and set(asked.values()) == {1}
    assert sum(simulator.list_requests.values()) >= 2  # one query a batch API, at least
    assert simulator.cn_requests == sum(
        work_for(key).agency not in ("crossref", "datacite") for key in SAMPLE_KEYS)


def _assert_metadata(rows: list[tuple], simulator: ProxySimulator) -> None:
    """Acceptance 1 of the enrichment issue: every valid key the simulator knows has a row
    whose typed columns equal the simulator's record, column by column."""
    by_key = {row[0]: row for row in rows}
    assert set(by_key) == SAMPLE_KEYS
    checked = 0
    for key, row in by_key.items():
        doi, status, values = row[1], row[2], row[3:]
        expected = simulator.expected_metadata(doi)
        if expected is None:
            assert status == "no_metadata", key
            continue
        assert status == "ok", (key, row)
        assert dict(zip(METADATA_FIELDS, values, strict=True)) == expected, key
        checked += 1
    assert checked >= len(SAMPLE_KEYS) - 2  # one agency of the four has no negotiation


METADATA_SQL = ("SELECT doi_key, doi, metadata_status, " + ", ".join(METADATA_FIELDS)
                + " FROM {}")


def _dags_test(env: dict[str, str], home: Path, **conf: object) -> subprocess.CompletedProcess[str]:
    command = [AIRFLOW, "dags", "test", DAG_ID]
    if conf:
        command += ["--conf", json.dumps(conf)]
    return forked.run(command, env=env, cwd=home, text=True, timeout=600)


def _succeeded(result: subprocess.CompletedProcess[str]) -> bool:
    return result.returncode == 0 and "state=success" in (result.stdout + result.stderr)


def _explain(result: subprocess.CompletedProcess[str]) -> str:
    output = result.stdout + result.stderr
    errors = [line for line in output.splitlines() if "error" in line.lower()]
    return "\n".join(errors[-40:]) + "\n...\n" + output[-4000:]


def _task_states(home: Path, result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """task_id -> state of the run ``result`` printed, read from the metadata database."""
    output = result.stdout + result.stderr
    match = re.search(r"run_id='?(manual__[^',\s]+)", output)
    assert match, "no run id in the output of airflow dags test"
    run_id = match.group(1)
    with sqlite3.connect(home / "airflow.db") as conn:
        rows = conn.execute("SELECT task_id, state FROM task_instance WHERE run_id = ?",
                            (run_id,)).fetchall()
    return dict(rows)


@pytest.fixture()
def simulator() -> Iterator[ProxySimulator]:
    with ProxySimulator(auto_records=True) as sim:
        yield sim


def _assert_catalogue(rows: list[tuple], resolution: dict[str, str]) -> None:
    """The normalized columns agree with the standard module; every valid key is resolved."""
    assert len(rows) == SAMPLE_ROWS
    for raw, doi, key, valid, reason in rows:
        expected = validate(raw)
        assert (doi, key, bool(valid), reason) == (
            expected.doi, expected.key, expected.valid, expected.reason), raw
    assert set(resolution) == SAMPLE_KEYS
    assert set(resolution.values()) == {"resolved"}


CATALOGUE_SQL = "SELECT doi_raw, doi, doi_key, doi_valid, doi_reason FROM {} ORDER BY record_id"


def test_dag_on_duckdb_with_dbt_and_a_fresh_rerun(airflow_home: Path, tmp_path: Path,
                                                  simulator: ProxySimulator) -> None:
    path = tmp_path / "catalogue.duckdb"
    with duckdb.connect(str(path)) as conn:  # a table the injection value names
        conn.execute("CREATE TABLE works (id INTEGER)")
        conn.execute("INSERT INTO works VALUES (1), (2), (3)")
    env = _dag_env(airflow_home, {"conn_type": "duckdb", "host": str(path)}, simulator.url,
                   simulator=simulator)
    first = _dags_test(env, airflow_home, **SAMPLE_RUN)
    assert _succeeded(first), _explain(first)
    assert _task_states(airflow_home, first)["enrich"] == "success"
    assert _task_states(airflow_home, first)["dbt_build"] == "success"
    assert simulator.request_count == len(SAMPLE_KEYS) + 1  # and one Which RA?
    assert set(simulator.requests_by_key.values()) == {1}
    _assert_sources(simulator)
    assert f"Normalized catalogue: wrote {SAMPLE_ROWS} rows" in first.stdout + first.stderr

    simulator.reset_counts()
    second = _dags_test(env, airflow_home)  # the defaults: enrich the table as it is
    assert _succeeded(second), _explain(second)
    assert _task_states(airflow_home, second)["load_sample_catalogue"] == "skipped"
    assert _task_states(airflow_home, second)["dbt_build"] == "skipped"
    assert simulator.request_count == 0  # every key is fresh in doi_resolution
    assert simulator.cn_requests == 0 and not simulator.list_requests  # ... and doi_metadata
    # The table is unchanged: normalize writes nothing, and validate reads what it stored.
    assert "Normalized catalogue: wrote 0 rows" in second.stdout + second.stderr
    assert "Reading the reasons stored in" in second.stdout + second.stderr

    # The first run's conf again (#41 item 10), on the catalogue it loaded, which holds
    # exactly the sample: it succeeds, loading nothing, asking nothing, dbt building again.
    simulator.reset_counts()
    third = _dags_test(env, airflow_home, **SAMPLE_RUN)
    assert _succeeded(third), _explain(third)
    states = _task_states(airflow_home, third)
    assert states["load_sample_catalogue"] == "success" and states["dbt_build"] == "success"
    assert (f"{SAMPLE_ROWS} rows, exactly the sample: nothing loaded"
            in third.stdout + third.stderr)
    assert simulator.request_count == 0 and simulator.cn_requests == 0

    # Asking for the sample in a table that holds other rows: refused, nothing deleted.
    fourth = _dags_test(env, airflow_home, load_sample=True, catalogue_table="works")
    states = _task_states(airflow_home, fourth)
    assert states["load_sample_catalogue"] == "failed", _explain(fourth)
    assert states["normalize"] == "upstream_failed"
    assert "works already exists and holds 3 rows" in fourth.stdout + fourth.stderr

    with duckdb.connect(str(path), read_only=True) as conn:
        _assert_catalogue(conn.execute(CATALOGUE_SQL.format("catalogue")).fetchall(),
                          dict(conn.execute("SELECT doi_key, status FROM doi_resolution")
                               .fetchall()))
        assert conn.execute("SELECT COUNT(*) FROM works").fetchone() == (3,)
        _assert_metadata(conn.execute(METADATA_SQL.format("doi_metadata")).fetchall(),
                         simulator)
        assert conn.execute("SELECT typeof(csl_json) FROM doi_metadata LIMIT 1").fetchone() == (
            "JSON",)
        holdings = conn.execute(
            "SELECT cited_as, record_id, copies, resolution_status "
            "FROM reading_list_holdings ORDER BY course, week"
        ).fetchall()
    assert len(holdings) == 9
    by_citation = {cited: (record, copies, status) for cited, record, copies, status in holdings}
    assert by_citation["10.1038/171737A0"] == (2, 2, "resolved")  # URL and doi: forms
    assert by_citation["10.1000/182"] == (6, 3, "resolved")  # URN, info URI, handle URL
    assert by_citation["10.9999/not-in-the-catalogue"] == (None, 0, None)
    assert by_citation["10.1000/STRAßE"][1] == 2  # ASCII-only case folding: ß stays


#: Each card of a report as (label, value, note), read from its HTML.
CARD_RE = re.compile(r'<div class="label">(.*?)</div><div class="value[^"]*">(.*?)</div>'
                     r'(?:<div class="note">(.*?)</div>)?')


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return forked.run([sys.executable, "-m", "airflow_doi", *map(str, args)],
                      capture_output=True, text=True, timeout=300, check=False)


def test_report_cards_are_the_same_from_the_cli_and_the_dag(
        airflow_home: Path, tmp_path: Path, simulator: ProxySimulator, browser: str) -> None:
    """Issue 34: on the same data the CLI's report said "85.2%, 1,705 of 2,000 looked up"
    and the DAG's "100.0%, 25 of 25". One basis now (distinct keys looked up, cells that are
    not valid DOIs never counted): the DAG's quality_report and airflow-doi resolve, enrich
    and report on the sample show the same cards, which fit their boxes in Chromium at 1280
    and 390 px."""
    path = tmp_path / "catalogue.duckdb"
    dag_page = tmp_path / "dag.html"
    env = _dag_env(airflow_home, {"conn_type": "duckdb", "host": str(path)}, simulator.url,
                   metadata_hosts=simulator.metadata_hosts)
    run = _dags_test(env, airflow_home, load_sample=True, report_path=str(dag_page))
    assert _succeeded(run), _explain(run)
    assert _task_states(airflow_home, run)["quality_report"] == "success"

    proxy = ["--base-url", simulator.url, "--rate", "200", "--agency-rate", "200"]
    steps = [
        ("resolve", SAMPLE, "--column", "doi_raw", "-o", tmp_path / "resolved.csv",
         *proxy[:4]),
        ("enrich", SAMPLE, "--column", "doi_raw", "-o", tmp_path / "metadata.csv", *proxy,
         "--metadata-host", ",".join(simulator.metadata_hosts)),
        ("report", SAMPLE, "--column", "doi_raw", "--resolution", tmp_path / "resolved.csv",
         "--metadata", tmp_path / "metadata.csv", "-o", tmp_path / "cli.html"),
    ]
    for step in steps:
        done = _cli(*step)
        assert done.returncode == 0, (step[0], done.stderr[-3000:])

    pages = {name: (tmp_path / f"{name}.html").read_text(encoding="utf-8")
             for name in ("dag", "cli")}
    cards = {name: CARD_RE.findall(page) for name, page in pages.items()}
    assert cards["cli"] == cards["dag"]
    shown = {label: (value, note) for label, value, note in cards["dag"]}
    keys = len(SAMPLE_KEYS)
    assert shown["Resolved"] == ("100.0%", f"{keys} of {keys} DOIs looked up")
    assert shown["Rows"][0] == str(SAMPLE_ROWS)
    # https://doi.org/10.1000/abc%20def and the quoted injection: valid, text glued on.
    assert shown["Likely damaged"] == ("2", "valid, but a repair rule changes them")
    for name in ("dag", "cli"):
        seen = cards_in_chromium(browser, tmp_path / f"{name}.html", tmp_path)
        assert len(seen[1280]) == len(seen[390]) == len(cards[name]) == 10


def test_dag_on_sqlite_skips_dbt(airflow_home: Path, tmp_path: Path,
                                 simulator: ProxySimulator) -> None:
    path = tmp_path / "catalogue.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE works (id INTEGER)")
        conn.execute("INSERT INTO works VALUES (1)")
    env = _dag_env(airflow_home, {"conn_type": "sqlite", "host": str(path)}, simulator.url,
                   simulator=simulator)
    result = _dags_test(env, airflow_home, catalogue_table="library", doi_column="identifier",
                        **SAMPLE_RUN)
    assert _succeeded(result), _explain(result)
    assert _task_states(airflow_home, result)["dbt_build"] == "skipped"
    assert simulator.request_count == len(SAMPLE_KEYS) + 1  # and one Which RA?
    _assert_sources(simulator)
    with sqlite3.connect(path) as conn:
        _assert_catalogue(
            conn.execute(CATALOGUE_SQL.replace("doi_raw", "identifier").format("library"))
            .fetchall(),
            dict(conn.execute("SELECT doi_key, status FROM doi_resolution").fetchall()),
        )
        assert conn.execute("SELECT COUNT(*) FROM works").fetchone() == (1,)


def test_dag_on_postgres_with_dbt(airflow_home: Path, simulator: ProxySimulator,
                                  postgres_dsn: str, postgres_schema: str) -> None:
    import psycopg

    url = urlparse(postgres_dsn)
    connection = {"conn_type": "postgres", "host": url.hostname, "port": url.port or 5432,
                  "login": url.username, "password": url.password or "",
                  "schema": url.path.lstrip("/")}
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{postgres_schema}".works (id integer)')
        conn.execute(f'INSERT INTO "{postgres_schema}".works VALUES (1), (2)')
    env = _dag_env(airflow_home, connection, simulator.url, simulator=simulator)
    result = _dags_test(env, airflow_home, catalogue_table=f"{postgres_schema}.catalogue",
                        **SAMPLE_RUN)
    assert _succeeded(result), _explain(result)
    assert _task_states(airflow_home, result)["dbt_build"] == "success"
    # Resolve asks each key's handle; enrich asks Which RA? once (the sample's keys fit in
    # one request), then each key from its source.
    assert simulator.request_count == len(SAMPLE_KEYS) + 1
    _assert_sources(simulator)
    with psycopg.connect(postgres_dsn) as conn:
        _assert_catalogue(
            conn.execute(CATALOGUE_SQL.format(f'"{postgres_schema}".catalogue')).fetchall(),
            dict(conn.execute(f'SELECT doi_key, status FROM "{postgres_schema}".doi_resolution')
                 .fetchall()),
        )
        assert conn.execute(f'SELECT COUNT(*) FROM "{postgres_schema}".works').fetchone() == (2,)
        _assert_metadata(conn.execute(METADATA_SQL.format(
            f'"{postgres_schema}".doi_metadata')).fetchall(), simulator)
        # csl_json is jsonb: the warehouse can query into the record.
        assert conn.execute(
            f'SELECT pg_typeof(csl_json)::text, count(*) FROM "{postgres_schema}".doi_metadata '
            "WHERE csl_json->>'type' = csl_type GROUP BY 1").fetchone()[0] == "jsonb"
        retracted = conn.execute(
            f'SELECT count(*) FROM "{postgres_schema}".reading_list_metadata').fetchone()
        assert retracted == (9,)
        joined = conn.execute(
            f'SELECT COUNT(*) FROM "{postgres_schema}".reading_list_holdings '
            "WHERE record_id IS NOT NULL"
        ).fetchone()
    assert joined == (8,)
    table = f"{postgres_schema}.catalogue"
    assert f"Normalized {table}: wrote {SAMPLE_ROWS} rows" in result.stdout + result.stderr

    # The same DAG again on the unchanged table (the nightly run): nothing to write or ask.
    simulator.reset_counts()
    again = _dags_test(env, airflow_home, catalogue_table=table)
    assert _succeeded(again), _explain(again)
    assert f"Normalized {table}: wrote 0 rows" in again.stdout + again.stderr
    assert simulator.request_count == 0 and simulator.cn_requests == 0


#: A user's own table: five rows, the DOI column among other columns of theirs.
USER_ROWS = [
    (101, "Watson & Crick", "https://doi.org/10.1038/171737a0"),
    (102, "A handbook", "doi:10.1000/182"),
    (103, "Scanned card", "10.100O/182"),
    (104, "No DOI yet", None),
    (105, "Straße", " 10.1000/Straße "),
]


def _user_catalogue(kind: str, tmp_path: Path, postgres_dsn: str | None,
                    schema: str | None) -> tuple[dict[str, object], str, Callable[[str], list]]:
    """``my_works(record_id, title, doi_raw)`` holding :data:`USER_ROWS`, on one engine.

    Returns the Airflow connection, the ``catalogue_table`` param and a query function.
    """
    if kind == "postgres":
        import psycopg

        assert postgres_dsn is not None and schema is not None
        url = urlparse(postgres_dsn)
        connection: dict[str, object] = {
            "conn_type": "postgres", "host": url.hostname, "port": url.port or 5432,
            "login": url.username, "password": url.password or "",
            "schema": url.path.lstrip("/")}
        table = f"{schema}.my_works"
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE TABLE "{schema}".my_works (record_id integer, title text, '
                         "doi_raw text)")
            with conn.cursor() as cursor:
                cursor.executemany(f'INSERT INTO "{schema}".my_works VALUES (%s, %s, %s)',
                                   USER_ROWS)

        def query(sql: str) -> list:
            with psycopg.connect(postgres_dsn) as conn:
                return conn.execute(sql.replace("my_works", f'"{schema}".my_works')).fetchall()

        return connection, table, query
    if kind == "mariadb":
        import pymysql

        assert schema is not None  # the per-test database of the mariadb_database fixture
        url = urlparse(MARIADB_DSN)
        login = {"host": url.hostname, "port": url.port or 3306, "user": url.username,
                 "password": url.password or "", "database": schema, "charset": "utf8mb4"}
        with closing(pymysql.connect(**login)) as conn, conn.cursor() as cursor:
            cursor.execute("CREATE TABLE my_works (record_id INTEGER, title TEXT, doi_raw TEXT)")
            cursor.executemany("INSERT INTO my_works VALUES (%s, %s, %s)", USER_ROWS)
            conn.commit()

        def query(sql: str) -> list:
            with closing(pymysql.connect(**login)) as conn, conn.cursor() as cursor:
                cursor.execute(sql)
                return [tuple(row) for row in cursor.fetchall()]

        return ({"conn_type": "mysql", "host": url.hostname, "port": url.port or 3306,
                 "login": url.username, "password": url.password or "", "schema": schema},
                "my_works", query)
    if kind == "sqlite":
        path = tmp_path / "works.sqlite"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE my_works (record_id INTEGER, title TEXT, doi_raw TEXT)")
            conn.executemany("INSERT INTO my_works VALUES (?, ?, ?)", USER_ROWS)

        def query(sql: str) -> list:
            with closing(sqlite3.connect(path)) as conn:
                return conn.execute(sql).fetchall()

        return {"conn_type": "sqlite", "host": str(path)}, "my_works", query
    path = tmp_path / "works.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE my_works (record_id INTEGER, title VARCHAR, doi_raw VARCHAR)")
        conn.executemany("INSERT INTO my_works VALUES (?, ?, ?)", USER_ROWS)

    def query(sql: str) -> list:
        with duckdb.connect(str(path), read_only=True) as conn:
            return conn.execute(sql).fetchall()

    return {"conn_type": "duckdb", "host": str(path)}, "my_works", query




@pytest.mark.parametrize("kind", ["sqlite", "duckdb", "postgres", "mariadb"])
def test_the_documented_params_keep_a_users_rows(
    kind: str, airflow_home: Path, tmp_path: Path, simulator: ProxySimulator,
    request: pytest.FixtureRequest,
) -> None:
    """Issue #10: only ``catalogue_conn_id``, ``catalogue_table``, ``doi_column`` on a table of
    one's own: every row survives, gets the standard's columns, and nothing else changes."""
    dsn = request.getfixturevalue("postgres_dsn") if kind == "postgres" else None
    schema = request.getfixturevalue("postgres_schema") if kind == "postgres" else None
    if kind == "mariadb":
        schema = request.getfixturevalue("mariadb_database")
    connection, table, query = _user_catalogue(kind, tmp_path, dsn, schema)
    env = _dag_env(airflow_home, connection, simulator.url, simulator=simulator)
    # On MariaDB the operators run in the database when given one for the functions: the
    # test's own database.
    extra = {"functions_schema": schema} if kind == "mariadb" else {}
    result = _dags_test(env, airflow_home, catalogue_conn_id="doi_catalogue",
                        catalogue_table=table, doi_column="doi_raw", **extra)
    assert _succeeded(result), _explain(result)
    if kind == "mariadb":  # push-down ran: the functions are in the named database only
        routines = query("SELECT COUNT(*) FROM information_schema.ROUTINES "
                         f"WHERE ROUTINE_SCHEMA = '{schema}'")
        assert routines == [(13,)]
    states = _task_states(airflow_home, result)
    assert states["load_sample_catalogue"] == "skipped"
    assert states["resolve"] == "success"
    rows = query("SELECT record_id, title, doi_raw, doi, doi_key, doi_valid, doi_reason "
                 "FROM my_works ORDER BY record_id")
    assert [row[:3] for row in rows] == USER_ROWS  # every row, every value of theirs
    for _, _, raw, doi, key, valid, reason in rows:
        expected = validate(raw)
        assert (bool(valid), reason) == (expected.valid, expected.reason), raw
        if expected.valid:
            assert (doi, key) == (normalize(raw), comparison_key(raw)), raw
        else:
            assert (doi, key) == (expected.doi, expected.key), raw
    assert sum(bool(row[5]) for row in rows) == 3
    # The proxy was asked once per valid DOI by resolve, and enrich's one Which RA? request
    # named the three DOIs' agencies (their records then came from the batch APIs).
    assert sum(simulator.requests_by_key.values()) == 3
    assert simulator.request_count == 4
    # The final task writes the quality report beside AIRFLOW_HOME and logs where.
    assert states["quality_report"] == "success"
    report = airflow_home / "doi_reports" / f"{table}.html"
    page = report.read_text(encoding="utf-8")
    assert f"Quality report: {report}" in result.stdout + result.stderr
    assert f"{table}: DOI quality" in page and "10.100O/182" in page  # a failing cell
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']https?:", page)


def test_run_dbt_leaves_a_users_table_of_a_dbt_name_alone(airflow_home: Path, tmp_path: Path,
                                                          simulator: ProxySimulator) -> None:
    """``run_dbt`` on a database whose ``reading_list`` is someone's: dbt is not run at all."""
    connection, table, query = _user_catalogue("duckdb", tmp_path, None, None)
    with duckdb.connect(str(connection["host"])) as conn:
        conn.execute("CREATE TABLE reading_list (student VARCHAR, book VARCHAR)")
        conn.execute("INSERT INTO reading_list VALUES ('ada', 'SICP')")
    env = _dag_env(airflow_home, connection, simulator.url, simulator=simulator)
    result = _dags_test(env, airflow_home, catalogue_table=table, run_dbt=True)
    states = _task_states(airflow_home, result)
    assert states["resolve"] == "success", _explain(result)
    assert states["dbt_build"] == "failed"
    assert "reading_list exists and is not the example dbt project's" in (
        result.stdout + result.stderr)
    assert query("FROM reading_list") == [("ada", "SICP")]
    assert len(query("FROM my_works")) == len(USER_ROWS)


def test_every_task_of_the_dag_is_retried(airflow_home: Path) -> None:
    """The README's promise that Airflow retries a resolve task failed by a dead proxy."""
    code = (
        "import json; from airflow.dag_processing.dagbag import DagBag; "
        f"bag = DagBag(dag_folder={str(DAGS)!r}); "
        "print(json.dumps({d: {t.task_id: [t.retries, t.retry_delay.total_seconds()] "
        "for t in bag.dags[d].tasks} for d in sorted(bag.dags)}))"
    )
    result = subprocess.run([sys.executable, "-c", code], env=_base_env(airflow_home),
                            cwd=airflow_home, capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    retries = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(retries) == {DAG_ID, "doi_resolve_mapped"}
    for dag_id, tasks in retries.items():
        assert tasks, dag_id
        for task_id, (count, delay) in tasks.items():
            assert count >= 2 and delay >= 60, (dag_id, task_id, count, delay)


def test_the_parallelism_knob_caps_the_mapped_tasks_of_one_run(airflow_home: Path) -> None:
    """``AIRFLOW_DOI_EXAMPLE_PARALLELISM`` is, as documented, of one run
    (``max_active_tis_per_dagrun``), not of every run of the DAG together."""
    code = (
        "import json; from airflow.dag_processing.dagbag import DagBag; "
        f"bag = DagBag(dag_folder={str(DAGS)!r}); "
        "t = bag.dags['doi_resolve_mapped'].get_task('resolve'); "
        "print(json.dumps([t.max_active_tis_per_dagrun, t.max_active_tis_per_dag]))"
    )
    env = {**_base_env(airflow_home), "AIRFLOW_DOI_EXAMPLE_PARALLELISM": "3"}
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=airflow_home,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [3, None]


def test_a_dead_proxy_leaves_resolve_up_for_retry(airflow_home: Path, tmp_path: Path) -> None:
    """The proxy answers 500 to everything: the resolve task waits for its retry, not failed."""
    path = tmp_path / "dead.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE catalogue (record_id INTEGER, doi_raw TEXT)")
        conn.executemany("INSERT INTO catalogue VALUES (?, ?)",
                         [(i, f"10.5555/D{i}") for i in range(5)])
    with sqlite3.connect(airflow_home / "airflow.db") as conn:
        before = {r for (r,) in conn.execute("SELECT run_id FROM dag_run")}
    with ProxySimulator(faults={"always_500": True}) as dead:
        env = _dag_env(airflow_home, {"conn_type": "sqlite", "host": str(path)}, dead.url)
        env["AIRFLOW_CONN_DOI_PROXY_DEFAULT"] = json.dumps(
            {"conn_type": "doi_proxy", "host": dead.url,
             "extra": {"rate": 200, "max_attempts": 1, "breaker_threshold": 1000}})
        command = [AIRFLOW, "dags", "test", DAG_ID, "--conf", json.dumps({"run_dbt": False})]
        process = forked.popen(command, env=env, cwd=airflow_home, start_new_session=True)
        state: tuple | None = None
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and process.poll() is None:
                with closing(sqlite3.connect(airflow_home / "airflow.db", timeout=30)) as conn:
                    rows = conn.execute(
                        "SELECT run_id, state, try_number FROM task_instance "
                        "WHERE dag_id = ? AND task_id = 'resolve'", (DAG_ID,)).fetchall()
                state = next(((s, n) for run, s, n in rows if run not in before and s), None)
                if state is not None and state[0] in ("up_for_retry", "failed", "success"):
                    break
                time.sleep(0.5)
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
        assert dead.request_count == 5
    assert state == ("up_for_retry", 1)
    with sqlite3.connect(path) as conn:  # nothing answered: no error rows, no claims (#24)
        assert conn.execute("SELECT COUNT(*) FROM doi_resolution").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(*) FROM doi_resolution_claims").fetchone() == (0,)


@pytest.mark.parametrize("kind", ["postgres", "duckdb"])
def test_two_runs_at_once_on_one_table_ask_each_key_once(
        kind: str, airflow_home: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """#24, acceptance 2: two ``airflow dags test`` runs of the example DAG on one table at
    the same moment both succeed, with at most 1.05 requests per distinct key (each run its
    own metadata file, as two deployments or two workers would)."""
    keys = 2000
    rows = [(i, f"t{i}", f"https://doi.org/10.5555/R{i % keys:05d}") for i in range(keys + 500)]
    if kind == "duckdb":
        path = tmp_path / "shared.duckdb"
        with duckdb.connect(str(path)) as conn:
            conn.execute("CREATE TABLE catalogue (record_id INTEGER, title VARCHAR, "
                         "doi_raw VARCHAR)")
            conn.executemany("INSERT INTO catalogue VALUES (?, ?, ?)", rows)
        catalogue: dict[str, object] = {"conn_type": "duckdb", "host": str(path)}
        table = "catalogue"
    else:
        import psycopg

        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("postgres_schema")
        with psycopg.connect(dsn) as conn:
            conn.execute(f'CREATE TABLE "{schema}".catalogue (record_id INTEGER, title TEXT, '
                         "doi_raw TEXT)")
            with conn.cursor() as cursor:
                cursor.executemany(f'INSERT INTO "{schema}".catalogue VALUES (%s, %s, %s)', rows)
        url = urlparse(dsn)
        catalogue = {"conn_type": "postgres", "host": url.hostname, "port": url.port or 5432,
                     "login": url.username, "password": url.password or "",
                     "schema": url.path.lstrip("/")}
        table = f"{schema}.catalogue"
    homes = [airflow_home, tmp_path / "second_home"]
    homes[1].mkdir()
    (homes[1] / "airflow.db").write_bytes((airflow_home / "airflow.db").read_bytes())
    conf = {"catalogue_table": table, "load_sample": False, "run_dbt": False,
            "resolve_batch_size": 100}
    with ProxySimulator(auto_records=True, latency=0.002) as sim:
        processes = []
        command = [AIRFLOW, "dags", "test", DAG_ID, "--conf", json.dumps(conf)]
        for home in homes:  # each home's server started first: the two runs start together
            forked.warm(command, env=_dag_env(home, catalogue, sim.url))
        started = time.monotonic()
        for home in homes:
            env = _dag_env(home, catalogue, sim.url, rate=300.0)
            env["AIRFLOW_DOI_EXAMPLE_RETRIES"] = "0"
            processes.append(forked.popen(command, env=env, cwd=home, text=True, merged=True))
        assert processes[0].poll() is None, "the first run ended before the second started"
        outputs = [p.communicate(timeout=600)[0] for p in processes]
        elapsed = time.monotonic() - started
        for process, output in zip(processes, outputs, strict=True):
            assert process.returncode == 0 and "state=success" in output, output[-5000:]
        per_key = sim.request_count / keys
        print(f"two runs at once on {kind}: {sim.request_count} requests for {keys} keys "
              f"({per_key:.3f} per key) in {elapsed:.1f} s")
        record_figure({"figure": "two_dags_test_runs", "engine": kind, "keys": keys,
                        "requests": sim.request_count, "requests_per_key": round(per_key, 4),
                        "seconds": round(elapsed, 1)})
        assert set(sim.requests_by_key) == {f"10.5555/R{i:05d}" for i in range(keys)}
        assert per_key <= 1.05
        assert max(sim.requests_by_key.values()) == 1
    assert all("Stored " in output for output in outputs)


def test_killed_resolve_resumes_without_asking_again(airflow_home: Path, tmp_path: Path) -> None:
    """SIGKILL the whole ``dags test`` mid-resolve; the next run asks only for what is left."""
    keys = 300
    path = tmp_path / "big.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE catalogue (record_id INTEGER, title VARCHAR, doi_raw VARCHAR)")
        conn.executemany("INSERT INTO catalogue VALUES (?, ?, ?)",
                         [(i, f"t{i}", f"https://doi.org/10.5555/K{i:05d}") for i in range(keys)])
    catalogue = {"conn_type": "duckdb", "host": str(path)}
    conf = {"load_sample": False, "run_dbt": False, "resolve_batch_size": 20}
    with ProxySimulator(auto_records=True, latency=0.01) as sim:
        env = _dag_env(airflow_home, catalogue, sim.url, rate=60.0)
        command = [AIRFLOW, "dags", "test", DAG_ID, "--conf", json.dumps(conf)]
        process = forked.popen(command, env=env, cwd=airflow_home, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while sim.request_count < 100 and time.monotonic() < deadline:
                assert process.poll() is None, "the run ended before it could be killed"
                time.sleep(0.05)
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
        asked_before_kill = set(sim.requests_by_key)
        assert 100 <= len(asked_before_kill) < keys
        with duckdb.connect(str(path), read_only=True) as conn:
            stored = {k for (k,) in conn.execute("SELECT doi_key FROM doi_resolution").fetchall()}
        assert 80 <= len(stored) < keys  # whole batches of 20 committed before the kill
        assert stored <= asked_before_kill

        sim.reset_counts()
        result = _dags_test(env, airflow_home, **conf)
        assert _succeeded(result), _explain(result)
        asked_on_retry = set(sim.requests_by_key)
    assert not asked_on_retry & stored  # nothing stored is asked again
    assert set(sim.requests_by_key.values()) == {1}
    with duckdb.connect(str(path), read_only=True) as conn:
        assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT doi_key) FROM doi_resolution "
                            "WHERE status = 'resolved'").fetchone() == (keys, keys)
    assert stored | asked_on_retry == {f"10.5555/K{i:05d}" for i in range(keys)}


def test_mapped_resolution_dag(airflow_home: Path, tmp_path: Path,
                               simulator: ProxySimulator) -> None:
    """``doi_resolve_mapped``: one mapped task per key range, one request per key overall."""
    path = tmp_path / "mapped.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE catalogue (record_id INTEGER, doi_raw TEXT)")
        conn.executemany("INSERT INTO catalogue VALUES (?, ?)",
                         [(i, f"doi:10.5555/M{i % 25}") for i in range(60)])
    env = _dag_env(airflow_home, {"conn_type": "sqlite", "host": str(path)}, simulator.url)
    result = subprocess.run(
        [AIRFLOW, "dags", "test", "doi_resolve_mapped", "--conf",
         json.dumps({"range_size": 10, "batch_size": 4})],
        env=env, cwd=airflow_home, capture_output=True, text=True, timeout=600, check=False,
    )
    assert _succeeded(result), _explain(result)
    assert "resolved 25 keys in 3 mapped tasks with 25 requests" in result.stdout + result.stderr
    assert simulator.request_count == 25
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM doi_resolution").fetchone() == (25,)
    again = subprocess.run(  # nothing due: the run succeeds and says so in one line (#24)
        [AIRFLOW, "dags", "test", "doi_resolve_mapped", "--conf",
         json.dumps({"range_size": 10, "batch_size": 4})],
        env=env, cwd=airflow_home, capture_output=True, text=True, timeout=600, check=False,
    )
    assert _succeeded(again), _explain(again)
    assert "resolved 0 keys: nothing was due in catalogue" in again.stdout + again.stderr
    assert simulator.request_count == 25


def _demo(out: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW__", "AIRFLOW_HOME"))}
    return subprocess.run(
        [sys.executable, "-m", "airflow_doi", "demo", "--root", str(ROOT), "--out", str(out)],
        env=env, cwd=out, capture_output=True, text=True, timeout=900, check=False,
    )


NEVER_REGISTERED = "10.5555/AIRFLOW-DOI-NEVER-REGISTERED"


def test_demo_runs_the_pipeline_offline(tmp_path: Path) -> None:
    """``airflow-doi demo`` (the README's main command): fresh AIRFLOW_HOME, simulator, DAG,
    and it shows its result: enriched rows (resolved, not_found, invalid) and how to open it."""
    result = _demo(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    # Its first step normalized the messy sample, row for row, as the standard reads it.
    from tests.test_cli_normalize import expected, read_csv

    normalized = read_csv(tmp_path / "messy_dois.normalized.csv")
    with (ROOT / "examples/data/messy_dois.csv").open(newline="", encoding="utf-8") as handle:
        sample = list(csv.DictReader(handle))
    assert len(normalized) == len(sample) >= 200
    assert all(r["doi_reason"] or r["doi_valid"] == "true" for r in normalized)
    assert [r["doi_key"] for r in normalized] == [expected(r["doi_raw"])["doi_key"]
                                                   for r in sample]
    assert "messy_dois.normalized.csv" in out and "valid" in out
    database = tmp_path / "catalogue.duckdb"
    assert f"enriched tables in {database}" in out
    assert "reading_list_holdings (9 rows)" in out
    assert "bundled simulator" in out
    assert f"doi_resolution: not_found=1, resolved={len(SAMPLE_KEYS) - 1}" in out
    catalogue = out[out.index("a few rows of catalogue"):out.index("a few rows of doi_resolution")]
    resolution = out[out.index("a few rows of doi_resolution"):out.index("open the file")]
    for shown in ("10.1002/ANDP.19053221004", "resolved", NEVER_REGISTERED, "not_found",
                  "10.100O/182", "bad_registrant", "missing_suffix"):
        assert shown in catalogue, shown
    for shown in (NEVER_REGISTERED, "not_found", "404", "resolved", "https://records.example/"):
        assert shown in resolution, shown
    metadata = out[out.index("doi_metadata (registry metadata"):out.index("open the file")]
    assert f"ok={len(SAMPLE_KEYS) - 2}" in metadata  # one not_found, one agency without CSL
    # Crossref's sample DOIs came from the data file the demo wrote, the others from the APIs.
    assert "enrich reads " in out and "snapshot/crossref.tar first" in out
    by_source = out[out.index("doi_metadata by source"):].splitlines()[0]
    assert "crossref_snapshot=" in by_source and "crossref=" not in by_source, by_source
    assert "datacite=" in by_source or "negotiation=" in by_source, by_source
    assert "retraction:10.1000/xyz.notice" in metadata
    for kind in ("article-journal", "dataset", "chapter"):
        assert kind in metadata, kind
    from airflow_doi.cli.demo import DEMO_TABLES, _relations

    assert _relations(database) <= DEMO_TABLES  # so the next demo run may replace the file
    with duckdb.connect(str(database), read_only=True) as conn:
        assert conn.execute("SELECT COUNT(*) FROM doi_resolution WHERE status = 'resolved'"
                            ).fetchone() == (len(SAMPLE_KEYS) - 1,)
        assert conn.execute("SELECT doi_key FROM doi_metadata WHERE updated_by LIKE "
                            "'retraction:%'").fetchall() == [("10.1000/XYZ",)]
        assert conn.execute("SELECT status FROM doi_resolution WHERE doi_key = ?",
                            [NEVER_REGISTERED]).fetchone() == ("not_found",)
        # One type vocabulary (issue 40): CSL's types whichever source answered, and the
        # registry's own word beside them on every ok row.
        from airflow_doi.metadata.csl import CSL_TYPES

        typed = conn.execute("SELECT csl_type, registry_type FROM doi_metadata "
                             "WHERE metadata_status = 'ok'").fetchall()
        assert typed and {csl for csl, _ in typed} <= CSL_TYPES, typed
        assert all(registry for _, registry in typed), typed

    # The DAG's last task wrote the quality report; the demo says where and how to open it.
    report = tmp_path / "report.html"
    assert f"quality report of the catalogue: {report}" in out
    assert report.as_uri() in out
    page = report.read_text(encoding="utf-8")
    assert "catalogue: DOI quality" in page
    assert "Retracted or corrected works" in page and "10.1000/xyz.notice" in page

    # The command it prints opens the file, here, as printed.
    command = out.split("open the file", 1)[1].splitlines()[1].strip()
    opened = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True,
                            input="print('rows', db.sql('FROM catalogue').fetchall().__len__())\n",
                            timeout=120, check=False)
    assert opened.returncode == 0, opened.stderr
    assert "doi_resolution" in opened.stdout  # SHOW TABLES
    assert f"rows {SAMPLE_ROWS}" in opened.stdout + opened.stderr


def test_demo_leaves_a_database_of_someone_elses_alone(tmp_path: Path) -> None:
    """An ``out/catalogue.duckdb`` holding tables the demo did not make: exit 2, untouched."""
    database = tmp_path / "catalogue.duckdb"
    with duckdb.connect(str(database)) as conn:
        conn.execute("CREATE TABLE catalogue (record_id INTEGER, doi_raw VARCHAR)")
        conn.execute("INSERT INTO catalogue VALUES (1, '10.1000/mine')")
        conn.execute("CREATE TABLE thesis_notes (note VARCHAR)")
    result = _demo(tmp_path)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert "holds tables the demo did not create (thesis_notes)" in result.stderr
    assert "Traceback" not in result.stderr
    with duckdb.connect(str(database), read_only=True) as conn:
        assert conn.execute("FROM catalogue").fetchall() == [(1, "10.1000/mine")]


def test_demo_replaces_only_its_own_previous_database(tmp_path: Path) -> None:
    from airflow_doi.cli.demo import DEMO_TABLES, fresh_database

    database = tmp_path / "catalogue.duckdb"
    with duckdb.connect(str(database)) as conn:
        for name in sorted(DEMO_TABLES):
            conn.execute(f"CREATE TABLE {name} (x INTEGER)")
    fresh_database(database)
    assert not database.exists()
    fresh_database(database)  # nothing there: nothing to do
