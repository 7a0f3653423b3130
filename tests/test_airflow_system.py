"""System tests: the example DAGs on a real Airflow deployment, as teams run it.

One :class:`~tests.airflow_deployment.Deployment` (api-server, scheduler and dag-processor as
separate processes, LocalExecutor with parallelism 4, PostgreSQL metadata) serves the whole
module; runs are triggered through the REST API, connections are made through it too. Each
test brings its own catalogue (a DuckDB file or a fresh PostgreSQL schema), its own catalogue
connection id and its own proxy simulator (``doi_proxy_default`` is pointed at it).

The deployment's tasks are retried twice, one second later (``AIRFLOW_DOI_EXAMPLE_RETRIES``,
``AIRFLOW_DOI_EXAMPLE_RETRY_DELAY``). Measured figures are printed and appended as JSON lines
to ``$AIRFLOW_DOI_SYSTEM_FIGURES`` when set.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import duckdb
import pytest

from airflow_doi.resolver.simulator import ProxySimulator
from tests.airflow_deployment import Deployment, TaskInstance
from tests.conftest import record_figure

pytestmark = [pytest.mark.xdist_group("airflow_system"), pytest.mark.slow]

MAPPED = "doi_resolve_mapped"
ENRICH = "doi_enrich_catalogue"
RETRIES = 2


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, postgres_dsn: str) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("airflow_system")
    env = {"AIRFLOW_DOI_EXAMPLE_RETRIES": str(RETRIES), "AIRFLOW_DOI_EXAMPLE_RETRY_DELAY": "1"}
    clock = time.monotonic()
    with Deployment(root, admin_dsn=postgres_dsn, env=env) as airflow:
        timings = {k: round(v, 1) for k, v in airflow.timings.items()}
        print(f"\nAirflow deployment on {airflow.base_url} (metadata {airflow.database}) "
              f"ready in {time.monotonic() - clock:.1f} s: {timings}")
        _record({"figure": "deployment_start", **timings})
        yield airflow


@pytest.fixture(autouse=True)
def _component_logs_on_failure(request: pytest.FixtureRequest,
                               deployment: Deployment) -> Iterator[None]:
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed > failed:
        print(deployment.log_tails(60))


def _record(figure: dict[str, Any]) -> None:
    record_figure({"suite": "airflow_system", **figure})


def _keys(count: int) -> list[str]:
    return [f"10.5555/K{i:05d}" for i in range(1, count + 1)]


def _rows(keys: list[str]) -> list[tuple[int, str, str]]:
    """One row per key, and a second, differently written, for every fifth key."""
    rows = [(i, f"title {i}", key) for i, key in enumerate(keys)]
    rows += [(len(keys) + i, f"copy {i}", f"https://doi.org/{key.lower()}")
             for i, key in enumerate(keys[::5])]
    return rows


class Catalogue:
    """A catalogue table on one engine, its Airflow connection and a way to query it."""

    def __init__(self, kind: str, keys: list[str], tmp_path: Path, postgres_dsn: str,
                 schema: str | None) -> None:
        self.kind = kind
        self.keys = keys
        self.conn_id = f"cat_{kind}_{uuid.uuid4().hex[:8]}"
        rows = _rows(keys)
        if kind == "duckdb":
            self.path = tmp_path / "catalogue.duckdb"
            with duckdb.connect(str(self.path)) as conn:
                conn.execute("CREATE TABLE catalogue (record_id INTEGER, title VARCHAR, "
                             "doi_raw VARCHAR)")
                conn.executemany("INSERT INTO catalogue VALUES (?, ?, ?)", rows)
            self.connection: dict[str, Any] = {"conn_type": "duckdb", "host": str(self.path)}
            self.table = "catalogue"
            self.prefix = ""
        else:
            import psycopg

            assert schema is not None
            self.dsn = postgres_dsn
            with psycopg.connect(postgres_dsn) as conn:
                conn.execute(f'CREATE TABLE "{schema}".catalogue (record_id integer, '
                             "title text, doi_raw text)")
                with conn.cursor() as cursor:
                    cursor.executemany(
                        f'INSERT INTO "{schema}".catalogue VALUES (%s, %s, %s)', rows)
            url = urlparse(postgres_dsn)
            self.connection = {"conn_type": "postgres", "host": url.hostname,
                               "port": url.port or 5432, "login": url.username,
                               "password": url.password or "", "schema": url.path.lstrip("/")}
            self.table = f"{schema}.catalogue"
            self.prefix = f'"{schema}".'

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """``sql`` with ``{s}`` standing for the catalogue's schema prefix."""
        sql = sql.format(s=self.prefix)
        if self.kind == "duckdb":
            with duckdb.connect(str(self.path), read_only=True) as conn:
                return conn.execute(sql).fetchall()
        import psycopg

        with psycopg.connect(self.dsn) as conn:
            return conn.execute(sql).fetchall()

    def resolution(self) -> dict[str, str]:
        """doi_key -> status of ``doi_resolution`` (empty before it exists)."""
        try:
            return dict(self.query("SELECT doi_key, status FROM {s}doi_resolution"))
        except Exception as error:
            if "doi_resolution" in str(error):
                return {}
            raise


def _catalogue(kind: str, keys: int, tmp_path: Path, request: pytest.FixtureRequest) -> Catalogue:
    dsn = request.getfixturevalue("postgres_dsn")
    schema = request.getfixturevalue("postgres_schema") if kind == "postgres" else None
    return Catalogue(kind, _keys(keys), tmp_path, dsn, schema)


def _table_assets(catalogue: Catalogue, *siblings: str) -> list[tuple[str, str]]:
    """``(name, uri)`` of the assets the operators emit for the catalogue and its siblings,
    worked out by the provider's own :func:`~airflow_doi.provider.assets.table_asset`."""
    import json
    import os

    from airflow_doi.db.statements import sibling_table
    from airflow_doi.provider.assets import table_asset

    variable = f"AIRFLOW_CONN_{catalogue.conn_id.upper()}"
    os.environ[variable] = json.dumps(catalogue.connection)
    try:
        tables = [catalogue.table, *(sibling_table(catalogue.table, s) for s in siblings)]
        return [(asset.name, asset.uri) for asset in (table_asset(catalogue.conn_id, t)
                                                       for t in tables)]
    finally:
        del os.environ[variable]


def _proxy(deployment: Deployment, sim: ProxySimulator, **extra: Any) -> None:
    """The proxy connection on ``sim``, its agencies and batch APIs as a deployment's connection
    names doi.org's and the agencies' hosts (none of which this machine can reach)."""
    deployment.set_connection("doi_proxy_default", {
        "conn_type": "doi_proxy", "host": sim.url,
        # The enrich step at a test's pace too: the agencies' defaults (2 single requests and
        # 1 list query a second) made it the longest part of every run here.
        "extra": {"rate": 200, "concurrency": 4, "crossref_url": sim.crossref_url,
                  "datacite_url": sim.datacite_url, "agency_rate": 500, "list_rate": 50,
                  "metadata_hosts": ",".join(sim.metadata_hosts), **extra}})


def _free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports on the loopback."""
    import random
    import socket

    for _ in range(200):
        base = random.randint(20000, 60000)
        sockets = []
        try:
            for port in range(base, base + count):
                held = socket.socket()
                sockets.append(held)
                held.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for held in sockets:
                held.close()
    raise RuntimeError("no free ports")


def _seconds(ti: TaskInstance) -> tuple[float, float]:
    assert ti.start_date and ti.end_date, ti
    return (datetime.fromisoformat(ti.start_date).timestamp(),
            datetime.fromisoformat(ti.end_date).timestamp())


def _max_overlap(tis: list[TaskInstance]) -> int:
    """The most task instances that were running at one moment."""
    events = sorted(e for ti in tis for e in ((_seconds(ti)[0], 1), (_seconds(ti)[1], -1)))
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def _per_key(sim: ProxySimulator, keys: int) -> str:
    spread = Counter(sim.requests_by_key.values())
    handles = sim.request_count - sim.ra_requests
    return (f"{handles} handle requests for {keys} keys "
            f"({handles / keys:.3f} per key; keys by times asked {dict(spread)}) and "
            f"{sim.ra_requests} Which RA? requests")


@pytest.mark.parametrize("kind", ["duckdb", "postgres"])
def test_mapped_dag_four_wide(kind: str, deployment: Deployment, tmp_path: Path,
                              request: pytest.FixtureRequest) -> None:
    """``doi_resolve_mapped`` plans 4 key ranges and resolves them 4 at a time: success,
    and one request per distinct key."""
    keys = 1000
    catalogue = _catalogue(kind, keys, tmp_path, request)
    deployment.set_connection(catalogue.conn_id, catalogue.connection)
    with ProxySimulator(auto_records=True, latency=0.002) as sim:
        _proxy(deployment, sim, rate=100)  # each range takes a few seconds: they overlap
        started = time.monotonic()
        run_id = deployment.trigger(MAPPED, {"catalogue_conn_id": catalogue.conn_id,
                                             "catalogue_table": catalogue.table,
                                             "range_size": keys // 4,
                                             "batch_size": 50})
        state = deployment.wait(MAPPED, run_id, timeout=150)
        elapsed = time.monotonic() - started
        tis = deployment.task_instances(MAPPED, run_id)
        assert state == "success", deployment.describe(MAPPED, run_id)
        mapped = [ti for ti in tis if ti.task_id == "resolve"]
        overlap = _max_overlap(mapped)
        retried = deployment.failed_tries(MAPPED, run_id)
        print(f"\n{MAPPED} on {kind}: {len(mapped)} mapped resolve tasks, up to {overlap} at "
              f"once, {len(retried)} failed tries; {_per_key(sim, keys)}; run took "
              f"{elapsed:.1f} s")
        _record({"figure": "mapped_four_wide", "engine": kind, "keys": keys,
                 "mapped_tasks": len(mapped), "max_running_at_once": overlap,
                 "failed_tries": len(retried),
                 "requests": sim.request_count,
                 "requests_per_key": round(sim.request_count / keys, 4),
                 "seconds": round(elapsed, 1)})
        assert len(mapped) >= 4 and {ti.state for ti in mapped} == {"success"}
        assert not retried, "tasks failed a try and were retried:\n" + "\n".join(retried)
        assert overlap >= 2, "the mapped tasks never ran side by side"
        assert set(sim.requests_by_key) == set(catalogue.keys)
        assert sim.request_count == keys
    resolution = catalogue.resolution()
    assert set(resolution) == set(catalogue.keys)
    assert set(resolution.values()) == {"resolved"}
    summary = deployment.logs(MAPPED, run_id, "summarize")
    assert f"resolved {keys} keys in {len(mapped)} mapped tasks with {keys} requests" in summary


@pytest.mark.parametrize("kind", ["postgres", "duckdb"])
def test_two_enrichment_runs_at_once_ask_each_key_once(
        kind: str, deployment: Deployment, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    """Two ``doi_enrich_catalogue`` runs triggered together on one table (PostgreSQL, the
    DuckDB file): both succeed, their resolve tasks overlap, and the proxy is asked once per
    distinct key."""
    keys = 3000
    catalogue = _catalogue(kind, keys, tmp_path, request)
    deployment.set_connection(catalogue.conn_id, catalogue.connection)
    conf = {"catalogue_conn_id": catalogue.conn_id, "catalogue_table": catalogue.table,
            "load_sample": False, "run_dbt": False, "resolve_batch_size": 100}
    # The tables' assets exist, as after any earlier run: this test is about the claims, not
    # Airflow's race on creating one new asset from two tasks at once (Deployment.create_assets).
    deployment.create_assets(_table_assets(catalogue, "doi_resolution", "doi_metadata"),
                             alias="doi_enrich_catalogue")  # the DAG's AssetAlias
    with ProxySimulator(auto_records=True, latency=0.002) as sim:
        _proxy(deployment, sim, rate=300)
        started = time.monotonic()
        suffix = uuid.uuid4().hex[:6]
        runs = [deployment.trigger(ENRICH, conf, run_id=f"together_{n}_{suffix}")
                for n in (1, 2)]
        states = [deployment.wait(ENRICH, run_id, timeout=180) for run_id in runs]
        elapsed = time.monotonic() - started
        resolves = [deployment.task_instance(ENRICH, run_id, "resolve") for run_id in runs]
        summaries = [deployment.request(
            "GET", f"/dags/{ENRICH}/dagRuns/{run_id}/taskInstances/resolve/xcomEntries/"
            "return_value", ok=(200, 404)).json().get("value") for run_id in runs]
        print(f"\ntwo {ENRICH} runs at once on {kind}: {_per_key(sim, keys)}; "
              f"both done in {elapsed:.1f} s; resolve summaries {summaries}")
        _record({"figure": "two_enrichment_runs", "engine": kind, "keys": keys,
                 "requests": sim.request_count,
                 "requests_per_key": round(sim.request_count / keys, 4),
                 "max_requests_for_a_key": max(sim.requests_by_key.values(), default=0),
                 "seconds": round(elapsed, 1)})
        for run_id, state in zip(runs, states, strict=True):
            assert state == "success", deployment.describe(ENRICH, run_id)
        for run_id in runs:
            retried = deployment.failed_tries(ENRICH, run_id)
            assert not retried, "tasks failed a try and were retried:\n" + "\n".join(retried)
        spans = [_seconds(ti) for ti in resolves if ti is not None]
        assert max(s for s, _ in spans) < min(e for _, e in spans), (
            f"the two resolve tasks did not overlap: {spans}")
        assert set(sim.requests_by_key) == set(catalogue.keys)
        assert sim.request_count - sim.ra_requests == keys, _per_key(sim, keys)
        assert sim.ra_requests <= 2 * -(-keys // 50), _per_key(sim, keys)  # 50 a request
    resolution = catalogue.resolution()
    assert len(resolution) == keys and set(resolution.values()) == {"resolved"}


def _wait_for_requests(sim: ProxySimulator, count: int, deployment: Deployment, dag_id: str,
                       run_id: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while sim.request_count < count:
        assert time.monotonic() < deadline, (
            f"only {sim.request_count} requests\n{deployment.describe(dag_id, run_id)}")
        time.sleep(0.05)


def test_sigkilled_resolve_task_is_retried_and_asks_nothing_stored_again(
        deployment: Deployment, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """SIGKILL of the running ``resolve`` task process: Airflow retries it, the run succeeds,
    and no key stored before the kill is asked again."""
    keys = 600
    catalogue = _catalogue("postgres", keys, tmp_path, request)
    deployment.set_connection(catalogue.conn_id, catalogue.connection)
    conf = {"catalogue_conn_id": catalogue.conn_id, "catalogue_table": catalogue.table,
            "load_sample": False, "run_dbt": False, "resolve_batch_size": 20}
    with ProxySimulator(auto_records=True, latency=0.01) as sim:
        _proxy(deployment, sim, rate=60)
        run_id = deployment.trigger(ENRICH, conf)
        deployment.wait_for_task(ENRICH, run_id, "resolve", {"running"}, timeout=120)
        _wait_for_requests(sim, 150, deployment, ENRICH, run_id)
        pid = deployment.kill_task(ENRICH, run_id, "resolve", sig=signal.SIGKILL)
        killed_at, killed_wall = time.monotonic(), time.time()
        time.sleep(0.3)  # requests the process sent before it died have arrived
        asked_before = sim.request_count
        by_key_before = Counter(sim.requests_by_key)  # handle requests (not Which RA?)
        stored = set(catalogue.resolution())
        state = deployment.wait(ENRICH, run_id, timeout=150)
        elapsed = time.monotonic() - killed_at
        resolve = deployment.task_instance(ENRICH, run_id, "resolve")
        asked_after = Counter(sim.requests_by_key) - by_key_before
        retry_after = _seconds(resolve)[0] - killed_wall if resolve and resolve.end_date else -1
        print(f"\nSIGKILL of resolve (pid {pid}) after {asked_before} requests, {len(stored)} "
              f"keys stored: retried as try {resolve and resolve.try_number} "
              f"{retry_after:.1f} s after the kill, run {state} "
              f"{elapsed:.1f} s after the kill; the retry asked {sum(asked_after.values())} "
              f"requests for {len(asked_after)} keys; overall {_per_key(sim, keys)}")
        _record({"figure": "sigkill_resolve", "keys": keys, "stored_before_kill": len(stored),
                 "requests_before_kill": asked_before,
                 "requests_after_kill": sum(asked_after.values()),
                 "requests_per_key": round(sim.request_count / keys, 4),
                 "seconds_kill_to_retry_start": round(retry_after, 1),
                 "seconds_kill_to_success": round(elapsed, 1)})
        assert state == "success", deployment.describe(ENRICH, run_id)
        assert resolve is not None and resolve.try_number == 2 and resolve.state == "success"
        retried = deployment.failed_tries(ENRICH, run_id)
        assert [line.split(":")[0] for line in retried] == ["resolve[-1] try 1"], retried
        assert 0 < len(stored) < keys
        assert not set(asked_after) & stored, "keys stored before the kill were asked again"
        assert set(asked_after) | stored == set(catalogue.keys)
        assert max(asked_after.values()) == 1
    resolution = catalogue.resolution()
    assert len(resolution) == keys and set(resolution.values()) == {"resolved"}
    assert "Stored " in deployment.logs(ENRICH, run_id, "resolve", try_number=2)


def test_proxy_down_fails_the_try_fast_and_the_next_asks_only_what_is_due(
        deployment: Deployment, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The proxy stops mid-run: the resolve try ends within ``breaker_give_up`` plus one
    batch, nothing unanswered gets a row, and the retry (proxy back) asks only what is due."""
    keys, batch, rate, give_up = 600, 20, 60.0, 10.0
    catalogue = _catalogue("postgres", keys, tmp_path, request)
    deployment.set_connection(catalogue.conn_id, catalogue.connection)
    conf = {"catalogue_conn_id": catalogue.conn_id, "catalogue_table": catalogue.table,
            "load_sample": False, "run_dbt": False, "resolve_batch_size": batch}
    # The agencies on fixed ports: the proxy that comes back serves them where they were.
    base = _free_ports(5)
    sim = ProxySimulator(auto_records=True, latency=0.01, agency_base_port=base).start()
    revived: ProxySimulator | None = None
    try:
        _proxy(deployment, sim, rate=rate, breaker_give_up=give_up)
        run_id = deployment.trigger(ENRICH, conf)
        deployment.wait_for_task(ENRICH, run_id, "resolve", {"running"}, timeout=120)
        _wait_for_requests(sim, 150, deployment, ENRICH, run_id)
        stopper = threading.Thread(target=sim.stop)  # the stop itself may wait on answers
        stopped_at = time.monotonic()
        stopper.start()
        ti = deployment.wait_for_task(ENRICH, run_id, "resolve",
                                      {"up_for_retry", "failed", "success"},
                                      timeout=give_up + 60, poll=0.1)
        left_running = time.monotonic() - stopped_at
        stopper.join(30)
        asked_before = set(sim.requests_by_key)
        resolution = catalogue.resolution()
        errors = sorted(k for k, status in resolution.items() if status == "error")
        batch_seconds = batch / rate
        print(f"\nproxy stopped after {sim.request_count} requests: resolve left running "
              f"{left_running:.1f} s later as {ti.state} (give-up {give_up:.0f} s, one batch "
              f"{batch_seconds:.1f} s); {len(resolution)} rows stored, {len(errors)} error rows")
        _record({"figure": "proxy_down", "keys": keys, "breaker_give_up": give_up,
                 "batch_seconds": batch_seconds, "seconds_stop_to_try_end": round(left_running, 2),
                 "state_after": ti.state, "rows_at_failure": len(resolution),
                 "error_rows": len(errors)})

        # The proxy comes back on the same address; the retry asks only for what is due.
        revived = ProxySimulator(auto_records=True, latency=0.002, port=sim.port,
                                 agency_base_port=base).start()
        state = deployment.wait(ENRICH, run_id, timeout=120)
        resolve = deployment.task_instance(ENRICH, run_id, "resolve")
        asked_again = Counter(revived.requests_by_key)
        print(f"proxy back: run {state}, resolve try {resolve and resolve.try_number}, "
              f"asked {revived.request_count} requests for {len(asked_again)} keys "
              f"({keys - len(resolution)} were due)")
        _record({"figure": "proxy_back", "keys": keys, "due": keys - len(resolution),
                 "requests": revived.request_count, "run_state": state})

        assert ti.state == "up_for_retry", deployment.describe(ENRICH, run_id)
        assert left_running <= give_up + batch_seconds + 2.0, (
            f"the try ran {left_running:.1f} s after the proxy stopped")
        assert not errors, f"error rows for keys the proxy never answered: {errors[:10]}"
        assert set(resolution) <= asked_before
        assert 0 < len(resolution) < keys
        assert state == "success", deployment.describe(ENRICH, run_id)
        assert resolve is not None and resolve.try_number == 2
        retried = deployment.failed_tries(ENRICH, run_id)
        assert [line.split(":")[0] for line in retried] == ["resolve[-1] try 1"], retried
        assert "ProxyUnavailableError" in retried[0] or "gave up" in retried[0], retried
        assert not set(asked_again) & set(resolution), "stored keys were asked again"
        assert set(asked_again) == set(catalogue.keys) - set(resolution)
        assert max(asked_again.values()) == 1
    finally:
        sim.stop()
        if revived is not None:
            revived.stop()
    final = catalogue.resolution()
    assert len(final) == keys and set(final.values()) == {"resolved"}
