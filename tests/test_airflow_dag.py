"""The example DAG ``doi_enrich_catalogue`` end to end, through ``airflow dags test``.

One migrated ``AIRFLOW_HOME`` (SQLite metadata) is shared by every test of this module, which
therefore runs on one xdist worker; each test brings its own catalogue database (a DuckDB file,
a SQLite file, or a fresh PostgreSQL schema) and its own proxy simulator, reached by the DAG
through ``AIRFLOW_CONN_*`` environment variables in JSON form.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import duckdb
import pytest

from airflow_doi import validate
from airflow_doi.resolver.simulator import ProxySimulator

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


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ``AIRFLOW_HOME`` migrated once (``airflow db migrate`` is the slow part)."""
    home = tmp_path_factory.mktemp("airflow_home")
    result = subprocess.run([AIRFLOW, "db", "migrate"], env=_base_env(home), cwd=home,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return home


def _base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(DAGS),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
    )
    return env


def _dag_env(home: Path, catalogue: dict[str, object], proxy_url: str,
             rate: float = 200.0) -> dict[str, str]:
    env = _base_env(home)
    env["AIRFLOW_CONN_DOI_CATALOGUE"] = json.dumps(catalogue)
    env["AIRFLOW_CONN_DOI_PROXY_DEFAULT"] = json.dumps(
        {"conn_type": "doi_proxy", "host": proxy_url, "extra": {"rate": rate, "concurrency": 4}}
    )
    return env


def _dags_test(env: dict[str, str], home: Path, **conf: object) -> subprocess.CompletedProcess[str]:
    command = [AIRFLOW, "dags", "test", DAG_ID]
    if conf:
        command += ["--conf", json.dumps(conf)]
    return subprocess.run(command, env=env, cwd=home, capture_output=True, text=True,
                          timeout=600, check=False)


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
    assert len(rows) == 30
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
    env = _dag_env(airflow_home, {"conn_type": "duckdb", "host": str(path)}, simulator.url)
    first = _dags_test(env, airflow_home)
    assert _succeeded(first), _explain(first)
    assert _task_states(airflow_home, first)["dbt_build"] == "success"
    assert simulator.request_count == len(SAMPLE_KEYS)
    assert set(simulator.requests_by_key.values()) == {1}

    simulator.reset_counts()
    second = _dags_test(env, airflow_home, run_dbt=False)  # dbt ran once already
    assert _succeeded(second), _explain(second)
    assert simulator.request_count == 0  # every key is fresh in doi_resolution

    with duckdb.connect(str(path), read_only=True) as conn:
        _assert_catalogue(conn.execute(CATALOGUE_SQL.format("catalogue")).fetchall(),
                          dict(conn.execute("SELECT doi_key, status FROM doi_resolution")
                               .fetchall()))
        assert conn.execute("SELECT COUNT(*) FROM works").fetchone() == (3,)
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


def test_dag_on_sqlite_skips_dbt(airflow_home: Path, tmp_path: Path,
                                 simulator: ProxySimulator) -> None:
    path = tmp_path / "catalogue.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE works (id INTEGER)")
        conn.execute("INSERT INTO works VALUES (1)")
    env = _dag_env(airflow_home, {"conn_type": "sqlite", "host": str(path)}, simulator.url)
    result = _dags_test(env, airflow_home, catalogue_table="library", doi_column="identifier")
    assert _succeeded(result), _explain(result)
    assert _task_states(airflow_home, result)["dbt_build"] == "skipped"
    assert simulator.request_count == len(SAMPLE_KEYS)
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
    env = _dag_env(airflow_home, connection, simulator.url)
    result = _dags_test(env, airflow_home, catalogue_table=f"{postgres_schema}.catalogue")
    assert _succeeded(result), _explain(result)
    assert _task_states(airflow_home, result)["dbt_build"] == "success"
    assert simulator.request_count == len(SAMPLE_KEYS)
    with psycopg.connect(postgres_dsn) as conn:
        _assert_catalogue(
            conn.execute(CATALOGUE_SQL.format(f'"{postgres_schema}".catalogue')).fetchall(),
            dict(conn.execute(f'SELECT doi_key, status FROM "{postgres_schema}".doi_resolution')
                 .fetchall()),
        )
        assert conn.execute(f'SELECT COUNT(*) FROM "{postgres_schema}".works').fetchone() == (2,)
        joined = conn.execute(
            f'SELECT COUNT(*) FROM "{postgres_schema}".reading_list_holdings '
            "WHERE record_id IS NOT NULL"
        ).fetchone()
    assert joined == (8,)


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
        process = subprocess.Popen(command, env=env, cwd=airflow_home, start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
        [AIRFLOW, "dags", "test", "doi_resolve_mapped", "--conf", json.dumps({"batch_size": 10})],
        env=env, cwd=airflow_home, capture_output=True, text=True, timeout=600, check=False,
    )
    assert _succeeded(result), _explain(result)
    assert "resolved 25 keys in 3 mapped tasks with 25 requests" in result.stdout + result.stderr
    assert simulator.request_count == 25
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM doi_resolution").fetchone() == (25,)


def test_demo_runs_the_pipeline_offline(tmp_path: Path) -> None:
    """``airflow-doi demo`` (the README's main command): fresh AIRFLOW_HOME, simulator, DAG."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW__", "AIRFLOW_HOME"))}
    result = subprocess.run(
        [sys.executable, "-m", "airflow_doi", "demo", "--root", str(ROOT), "--out", str(tmp_path)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    database = tmp_path / "catalogue.duckdb"
    assert f"enriched tables in {database}" in result.stdout
    assert "reading_list_holdings (9 rows)" in result.stdout
    assert "bundled simulator" in result.stdout
    with duckdb.connect(str(database), read_only=True) as conn:
        assert conn.execute("SELECT COUNT(*) FROM doi_resolution WHERE status = 'resolved'"
                            ).fetchone() == (len(SAMPLE_KEYS),)
