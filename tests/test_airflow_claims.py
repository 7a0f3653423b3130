"""#24: claims on due keys, DuckDB files under a real executor, and failing fast on a dead proxy.

Real engines (SQLite, DuckDB, PostgreSQL, MariaDB), real processes resolving one table at
once, the proxy simulator over loopback counting what it was asked.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import duckdb
import pytest

from airflow_doi.db.statements import dialect_named, quote_identifier
from airflow_doi.provider.hooks.claims import _PLACE, KeyClaims
from airflow_doi.provider.hooks.resolution import ensure_resolution_table
from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked
from tests.conftest import MARIADB_DSN, record_figure

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("airflow_claims")]

ENGINES = ["sqlite", "duckdb", "postgres", "mariadb"]


class Engine:
    """One catalogue database: its Airflow connection, a raw client and its dialect."""

    def __init__(self, kind: str, connection: dict[str, Any],
                 connect: Callable[[], Any], table: str) -> None:
        self.kind, self.connection, self.connect, self.table = kind, connection, connect, table
        self.dialect = dialect_named(connection["conn_type"],
                                     "%s" if kind in ("postgres", "mariadb") else "?")
        self.results = table.rpartition(".")[0] + "." if "." in table else ""
        self.results += "doi_resolution"

    def run(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        with closing(self.connect()) as conn:
            cursor = self.dialect.cursor(conn)
            cursor.execute(sql, params or [])
            rows = [tuple(r) for r in cursor.fetchall()] if cursor.description else []
            conn.commit()
            return rows

    def load(self, keys: list[str]) -> None:
        table = quote_identifier(self.table)
        with closing(self.connect()) as conn:
            cursor = self.dialect.cursor(conn)
            text = self.dialect.text_type
            cursor.execute(f"CREATE TABLE {table} (doi {text}, doi_key {text}, "
                           f"doi_valid {self.dialect.boolean_type})")
            p = self.dialect.marks(3)
            cursor.executemany(f"INSERT INTO {table} VALUES ({p})",
                               [(k.lower(), k, True) for k in keys])
            conn.commit()


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    kind = request.param
    if kind == "sqlite":
        import sqlite3

        path = str(tmp_path / "cat.sqlite")
        yield Engine(kind, {"conn_type": "sqlite", "host": path},
                     lambda: sqlite3.connect(path, timeout=30), "catalogue")
    elif kind == "duckdb":
        path = str(tmp_path / "cat.duckdb")
        yield Engine(kind, {"conn_type": "duckdb", "host": path},
                     lambda: duckdb.connect(path), "catalogue")
    elif kind == "postgres":
        import psycopg

        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("postgres_schema")
        url = urlparse(dsn)
        yield Engine(kind, {"conn_type": "postgres", "host": url.hostname,
                            "port": url.port or 5432, "login": url.username,
                            "password": url.password or "", "schema": url.path.lstrip("/")},
                     lambda: psycopg.connect(dsn), f"{schema}.catalogue")
    else:
        import pymysql

        database = request.getfixturevalue("mariadb_database")
        url = urlparse(MARIADB_DSN)
        login = {"host": url.hostname, "port": url.port or 3306, "user": url.username,
                 "password": url.password or "", "database": database, "charset": "utf8mb4"}
        yield Engine(kind, {"conn_type": "mysql", "host": url.hostname, "port": login["port"],
                            "login": url.username, "password": login["password"],
                            "schema": database},
                     lambda: pymysql.connect(**login), "catalogue")


def _claims(engine: Engine, owner: str, lease: float = 60.0) -> KeyClaims:
    return KeyClaims(f"{engine.results}_claims", engine.results, engine.dialect, owner, lease)


def test_a_claim_takes_each_key_once_and_lets_go(engine: Engine) -> None:
    """Compare-and-set on each engine: of two owners one gets a key; a retry of the same
    owner takes its keys back; finished keys leave; a stored key is never claimed; an
    expired lease lets another owner in."""
    keys = [f"10.5555/C{i}" for i in range(8)]
    now = datetime.now(timezone.utc)
    with closing(engine.connect()) as conn:
        cursor = engine.dialect.cursor(conn)
        ensure_resolution_table(cursor, engine.dialect, engine.results)
        first, second = _claims(engine, "dag/run/a/-1"), _claims(engine, "dag/run/b/-1")
        first.ensure(cursor)
        a = first.claim(cursor, keys[:5], now)
        conn.commit()
        b = second.claim(cursor, keys, now)
        conn.commit()
        assert a.mine == set(keys[:5]) and not a.elsewhere
        assert b.mine == set(keys[5:]) and b.elsewhere == set(keys[:5])
        again = first.claim(cursor, keys[:5], now)  # the same task's next try
        conn.commit()
        assert again.mine == set(keys[:5])
        first.finish(cursor, again)
        stamp = engine.dialect.timestamp(now + timedelta(days=30))
        cursor.execute(f'INSERT INTO {quote_identifier(engine.results)} ("doi_key", "doi", '
                       f'"status", "expires_at") VALUES ({engine.dialect.marks(4)})',
                       [keys[0], keys[0].lower(), "resolved", stamp])
        conn.commit()
        taken = second.claim(cursor, keys[:5], now)
        conn.commit()
        assert taken.fresh == {keys[0]} and taken.mine == set(keys[1:5])
        later = now + timedelta(seconds=61)  # b's leases have run out
        third = _claims(engine, "dag/run/c/-1").claim(cursor, keys, later)
        conn.commit()
        assert third.mine == set(keys[1:]) and third.fresh == {keys[0]}
    table = quote_identifier(f"{engine.results}_claims")
    assert engine.run(f"SELECT COUNT(*) FROM {table}") == [(7,)]  # third's, unfinished
    # Third's process is gone (killed) on this machine: its keys are taken over at once.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    engine.run(f'UPDATE {table} SET "token" = {engine.dialect.marks()}',
               [f"{_PLACE}/{int(gone.stdout)}/feed"])
    with closing(engine.connect()) as conn:
        cursor = engine.dialect.cursor(conn)
        fourth = _claims(engine, "dag/run/d/-1").claim(cursor, keys, later)
        conn.commit()
    assert fourth.mine == set(keys[1:]) and not fourth.elsewhere


RESOLVER = """
import json, sys
from airflow_doi.provider.operators.resolve import resolve_key_range
print(json.dumps(resolve_key_range(conn_id="cat", table=sys.argv[1], batch_size=25)))
"""


def _env(engine: Engine, proxy: str, **extra: Any) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    env["AIRFLOW_CONN_CAT"] = json.dumps(engine.connection)
    env["AIRFLOW_CONN_DOI_PROXY_DEFAULT"] = json.dumps(
        {"conn_type": "doi_proxy", "host": proxy,
         "extra": {"rate": 1000, "concurrency": 4, **extra}})
    return env


def test_resolvers_running_at_once_ask_each_key_once(engine: Engine) -> None:
    """Three processes resolve one table at the same moment (as two DAG runs and a mapped
    task would): every key is asked once, every key is stored, and all three succeed."""
    keys = [f"10.5555/K{i:04d}" for i in range(400)]
    engine.load(keys)
    with ProxySimulator(auto_records=True, latency=0.005) as sim:
        env = _env(engine, sim.url, rate=50)  # ~8 s alone: the three overlap
        processes = [forked.popen([sys.executable, "-c", RESOLVER, engine.table], env=env,
                                  text=True)
                     for _ in range(3)]
        outputs = [p.communicate(timeout=300) for p in processes]
        for process, (_, err) in zip(processes, outputs, strict=True):
            assert process.returncode == 0, err[-3000:]
        summaries = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
        assert sim.request_count == len(keys), summaries
        assert set(sim.requests_by_key.values()) == {1}
    record_figure({"figure": "three_processes_one_table", "engine": engine.kind,
                   "keys": len(keys), "requests": sim.request_count,
                   "stored_by_each": [s["stored_keys"] for s in summaries]})
    assert sum(s["stored_keys"] for s in summaries) == len(keys)
    assert all(s["stored_keys"] > 0 for s in summaries)  # they did work side by side
    results = quote_identifier(engine.results)
    assert engine.run(f"SELECT COUNT(*) FROM {results} WHERE status = 'resolved'") == [
        (len(keys),)]
    assert engine.run(f"SELECT COUNT(*) FROM {quote_identifier(engine.results + '_claims')}"
                      ) == [(0,)]


#: DoiResolveOperator run as a task runs it, on the table of argv[1], batches of argv[2].
OPERATOR = """
import json, sys
from airflow_doi.provider.operators.resolve import DoiResolveOperator
summary = DoiResolveOperator(task_id="resolve", conn_id="cat", table=sys.argv[1],
                             batch_size=int(sys.argv[2])).execute({})
print(json.dumps(summary))
"""


def _dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_a_proxy_never_there_fails_the_operator_within_seconds(engine: Engine) -> None:
    """Issue 34: nothing ever answered (every request refused): DoiResolveOperator fails the
    task in seconds, not after breaker_give_up (120 s by default), naming the proxy, and
    writes no row for the keys never answered."""
    engine.load([f"10.5555/N{i}" for i in range(30)])
    base = f"http://127.0.0.1:{_dead_port()}"
    env = _env(engine, base, rate=20)  # the default breaker_give_up
    started = time.monotonic()
    result = forked.run([sys.executable, "-c", OPERATOR, engine.table, "10"], env=env,
                        capture_output=True, text=True, timeout=300, check=False)
    elapsed = time.monotonic() - started
    assert result.returncode != 0
    assert elapsed < 30, elapsed
    assert ("ProxyUnavailableError: the DOI proxy failed (no request was ever answered (could "
            f"not connect to {base}/ (connection refused), ") in result.stderr, result.stderr
    assert "not after breaker_give_up (120s)" in result.stderr
    assert engine.run(f"SELECT COUNT(*) FROM {quote_identifier(engine.results)}") == [(0,)]


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_a_proxy_dead_after_the_first_batch_is_waited_for(engine: Engine) -> None:
    """The proxy answered the first batch, then died before the second (it stops listening
    after its 10th answer): the run had an answer, so the bounded wait applies
    (breaker_give_up), as for a proxy that dies mid-batch; the first batch is stored, the
    rest stays due."""
    engine.load([f"10.5555/W{i:03d}" for i in range(40)])
    give_up = 3.0
    with ProxySimulator(auto_records=True, faults={"die_after": 10}) as sim:
        env = _env(engine, sim.url, rate=200, breaker_give_up=give_up, breaker_cooldown=0.5,
                   max_attempts=50, backoff_base=0.1, timeout=5)
        started = time.monotonic()
        result = forked.run([sys.executable, "-c", OPERATOR, engine.table, "10"], env=env,
                            capture_output=True, text=True, timeout=300, check=False)
        elapsed = time.monotonic() - started
        assert sim.request_count == 10
    assert result.returncode != 0
    assert "the DOI proxy failed (circuit breaker open" in result.stderr, result.stderr[-2000:]
    assert "never answered" not in result.stderr
    assert elapsed >= give_up
    results = quote_identifier(engine.results)
    assert engine.run(f"SELECT COUNT(*) FROM {results}") == [(10,)]


@pytest.mark.parametrize("engine", ["postgres", "duckdb"], indirect=True)
def test_a_dead_proxy_fails_the_task_within_give_up_plus_one_batch(engine: Engine) -> None:
    """The proxy stops mid-run: the task fails once the breaker gives up (not a second
    window later), keys answered before are stored, and the keys never answered get no
    row and no claim: the next run asks only for those."""
    keys = [f"10.5555/D{i:04d}" for i in range(200)]
    engine.load(keys)
    give_up = 3.0
    sim = ProxySimulator(auto_records=True, latency=0.002)
    sim.start()
    stopped: list[float] = []

    def stop_midway() -> None:
        while sim.request_count < 60:
            time.sleep(0.005)
        sim.stop()
        stopped.append(time.monotonic())

    stopper = threading.Thread(target=stop_midway)
    stopper.start()
    env = _env(engine, sim.url, rate=200, breaker_give_up=give_up, breaker_cooldown=0.5,
               max_attempts=3, backoff_base=0.1, timeout=2)
    started = time.monotonic()
    result = forked.run([sys.executable, "-c", RESOLVER, engine.table], env=env,
                        capture_output=True, text=True, timeout=300, check=False)
    ended = time.monotonic()
    stopper.join(30)
    assert result.returncode != 0
    assert "ProxyUnavailableError" in result.stderr and "the DOI proxy failed" in result.stderr
    to_fail = ended - stopped[0]
    print(f"{engine.kind}: failed {to_fail:.1f} s after the proxy stopped "
          f"(give-up {give_up:g} s; whole run {ended - started:.1f} s)")
    record_figure({"figure": "dead_proxy_resolve_key_range", "engine": engine.kind,
                   "breaker_give_up": give_up, "seconds_stop_to_failure": round(to_fail, 2)})
    assert to_fail < give_up + 5.0  # one batch of 25 at 200/s, plus a process's start
    results = quote_identifier(engine.results)
    stored = {k for (k,) in engine.run(f"SELECT doi_key FROM {results}")}
    assert engine.run(f"SELECT COUNT(*) FROM {results} WHERE status <> 'resolved'") == [(0,)]
    answered = set(sim.requests_by_key)
    assert 25 <= len(stored) < len(keys) and stored <= answered
    assert engine.run(f"SELECT COUNT(*) FROM {quote_identifier(engine.results + '_claims')}"
                      ) == [(0,)]
    with ProxySimulator(auto_records=True) as healthy:
        again = forked.run([sys.executable, "-c", RESOLVER, engine.table],
                           env=_env(engine, healthy.url), capture_output=True, text=True,
                           timeout=300, check=False)
        assert again.returncode == 0, again.stderr[-3000:]
        assert set(healthy.requests_by_key) == set(keys) - stored
        assert set(healthy.requests_by_key.values()) == {1}


def test_duckdb_waits_for_a_file_another_process_holds(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A task opening a DuckDB file another process writes waits for it, saying so; past
    the connection's ``lock_wait`` it fails with what to do."""
    from airflow_doi.provider.hooks.duckdb import DuckDbHook

    path = tmp_path / "held.duckdb"
    duckdb.connect(str(path)).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
         "print('held', flush=True); time.sleep(float(sys.argv[2]))", str(path), "2"],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    monkeypatch.setenv("AIRFLOW_CONN_HELD", json.dumps(
        {"conn_type": "doi_duckdb", "host": str(path), "extra": {"lock_wait": 30}}))
    lines: list[str] = []
    hook = DuckDbHook(duckdb_conn_id="held")
    monkeypatch.setattr(type(hook), "log", _Recorder(lines), raising=False)
    started = time.monotonic()
    with closing(hook.get_conn()) as conn:
        assert conn.execute("SELECT 42").fetchone() == (42,)
    waited = time.monotonic() - started
    holder.wait(30)
    assert 0.5 < waited < 20
    assert any(f"process {holder.pid}" in line and "waiting up to 30 s" in line
               for line in lines), lines

    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
         "print('held', flush=True); time.sleep(float(sys.argv[2]))", str(path), "10"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        monkeypatch.setenv("AIRFLOW_CONN_HELD", json.dumps(
            {"conn_type": "doi_duckdb", "host": str(path), "extra": {"lock_wait": 0.5}}))
        with pytest.raises(RuntimeError, match=r"still held by process \d+ after 0.5 s.*"
                           "one-slot pool.*lock_wait"):
            DuckDbHook(duckdb_conn_id="held").get_conn()
    finally:
        holder.kill()
        holder.wait(30)


class _Recorder:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def info(self, message: str, *args: Any) -> None:
        self.lines.append(message % args)


def test_a_duckdb_connection_is_served_by_whichever_provider_owns_the_type(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``duckdb`` connections: ours when no provider registers the type (the DuckDB
    provider's type); ``doi_duckdb``: always ours."""
    from airflow_doi.provider.hooks.duckdb import DuckDbHook
    from airflow_doi.provider.hooks.sql import dialect_of, sql_hook

    for conn_type in ("duckdb", "doi_duckdb"):
        monkeypatch.setenv("AIRFLOW_CONN_DUCK", json.dumps(
            {"conn_type": conn_type, "host": str(tmp_path / "x.duckdb")}))
        hook = sql_hook("duck")
        assert isinstance(hook, DuckDbHook) and dialect_of(hook).name == "duckdb"


THEIRS = Path(__file__).resolve().parent.parent / ".venv-duckdb-provider"
WITH_THEIRS = """
import json, sys
from airflow.providers_manager import ProvidersManager
from airflow_doi.provider.hooks.sql import sql_hook
from airflow_doi.provider.operators.resolve import resolve_key_range
hook = sql_hook("cat")
print("OWNER", ProvidersManager().hooks["duckdb"].package_name, type(hook).__module__)
print("SUMMARY", json.dumps(resolve_key_range(conn_id="cat", table="catalogue", batch_size=25)))
"""


@pytest.mark.parametrize("engine", ["duckdb"], indirect=True)
def test_with_the_duckdb_provider_installed_a_duckdb_connection_uses_its_hook(
        engine: Engine) -> None:
    """``airflow-provider-duckdb`` (scripts/bootstrap.sh keeps it in .venv-duckdb-provider)
    owns the type ``duckdb``: with it on the path, the provider registers it, our operators
    take its hook, and resolution works through it (ours still answers ``doi_duckdb``)."""
    assert (THEIRS / "duckdb_provider").is_dir(), "run scripts/bootstrap.sh dev"
    keys = [f"10.5555/P{i:03d}" for i in range(60)]
    engine.load(keys)
    with ProxySimulator(auto_records=True) as sim:
        env = _env(engine, sim.url)
        env["PYTHONPATH"] = os.pathsep.join([str(THEIRS), env.get("PYTHONPATH", "")])
        result = forked.run([sys.executable, "-c", WITH_THEIRS], env=env,
                            capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        assert sim.request_count == len(keys)
    said = dict(line.split(" ", 1) for line in result.stdout.splitlines()
                if line.startswith(("OWNER ", "SUMMARY ")))
    assert said["OWNER"] == "airflow-provider-duckdb duckdb_provider.hooks.duckdb_hook"
    assert json.loads(said["SUMMARY"])["stored_keys"] == len(keys)


def test_progress_comes_once_per_interval_and_nothing_due_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """#24, item 6: no near-duplicate progress pairs (a periodic line then a batch's line in
    the same second); when another table of the schema already resolved every key, the log
    says nothing is due and why (``doi_resolution`` is a cache by key, shared)."""
    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook
    from airflow_doi.provider.hooks.resolution import resolve_due_keys
    from airflow_doi.provider.hooks.sql import sql_hook

    path = str(tmp_path / "cat.duckdb")
    engine = Engine("duckdb", {"conn_type": "doi_duckdb", "host": path},
                    lambda: duckdb.connect(path), "catalogue")
    keys = [f"10.5555/G{i:03d}" for i in range(200)]
    engine.load(keys)
    with ProxySimulator(auto_records=True) as sim:
        for name, value in _env(engine, sim.url).items():
            if name.startswith("AIRFLOW_CONN_"):
                monkeypatch.setenv(name, value)
        lines: list[str] = []
        summary = resolve_due_keys(sql_hook("cat"), DoiProxyHook(), table="catalogue",
                                   batch_size=10, log=_Recorder(lines))
        assert summary.stored_keys == 200 and summary.batches == 20
        progress = [line for line in lines if line.startswith("resolve catalogue:")]
        assert progress == ["resolve catalogue: 0/200 keys (0.0%), 0.0 keys/s, ETA ?"], lines
        assert lines[-1].startswith("Stored 200 keys in doi_resolution in 20 batches")
        engine.table = "catalogue_copy"  # another table whose keys are all resolved already
        engine.load(keys)
        lines.clear()
        again = resolve_due_keys(sql_hook("cat"), DoiProxyHook(), table="catalogue_copy",
                                 log=_Recorder(lines))
        assert again.due_keys == 0 and sim.request_count == 200
    said = "\n".join(lines)
    assert ("Nothing due in catalogue_copy: all 200 valid keys already have a fresh row in "
            "doi_resolution; doi_resolution is a cache by key, shared by every table") in said


def test_a_key_stored_by_another_task_during_a_claim_is_let_go(engine: Engine) -> None:
    """Review finding: B's freshness look ran before A stored key K and let go of it, and B
    then claimed K and asked again. The look after the claim is committed catches it."""
    now = datetime.now(timezone.utc)
    a_conn, b_conn = engine.connect(), engine.connect()
    try:
        ca, cb = engine.dialect.cursor(a_conn), engine.dialect.cursor(b_conn)
        ensure_resolution_table(ca, engine.dialect, engine.results)
        first, second = _claims(engine, "A"), _claims(engine, "B")
        first.ensure(ca)
        a_conn.commit()
        held = first.claim(ca, ["10.5555/K"], now)
        a_conn.commit()
        create_rows = second._create_rows

        def a_stores_meanwhile(cursor: Any, keys: Any) -> None:
            ca.execute(f'INSERT INTO {quote_identifier(engine.results)} ("doi_key", "doi", '
                       f'"status", "expires_at") VALUES ({engine.dialect.marks(4)})',
                       ["10.5555/K", "10.5555/k", "resolved",
                        engine.dialect.timestamp(now + timedelta(days=1))])
            first.finish(ca, held)
            a_conn.commit()
            create_rows(cursor, keys)

        object.__setattr__(second, "_create_rows", a_stores_meanwhile)
        claim = second.claim(cb, ["10.5555/K"], now)
        b_conn.commit()
        assert claim.mine == {"10.5555/K"}  # the race as found
        second.drop_fresh(cb, claim, now)
        b_conn.commit()
        assert not claim.mine and claim.fresh == {"10.5555/K"}
    finally:
        a_conn.close()
        b_conn.close()
    table = quote_identifier(f"{engine.results}_claims")
    assert engine.run(f"SELECT COUNT(*) FROM {table}") == [(0,)]


class _OneKeyAlwaysFails:
    """A proxy hook stand-in whose answer for keys ending in 3 is a final HTTP 400."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def get_config(self) -> Any:
        from airflow_doi.resolver import ResolverConfig

        return ResolverConfig()

    def resolve(self, dois: list[str], progress: Any = None, stats: Any = None) -> list[Any]:
        from airflow_doi.resolver import ResolutionResult

        self.asked += dois
        now = datetime.now(timezone.utc)
        return [ResolutionResult(input=d, doi=d, key=d.upper(), status="error", http_status=400,
                                 attempts=1, error="unexpected answer: HTTP 400")
                if d.endswith("3") else
                ResolutionResult(input=d, doi=d, key=d.upper(), status="resolved",
                                 url="https://x.example/", http_status=200, attempts=1,
                                 resolved_at=now, expires_at=now + timedelta(days=1))
                for d in dois]


def test_a_doi_the_proxy_always_refuses_does_not_fail_every_later_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding: a lone key with a final error (HTTP 400) made each later batch
    "every key failed", so every run failed on a healthy proxy. A final answer is stored as
    an error row and the run succeeds; only keys without an answer count as a dead proxy."""
    from airflow_doi.provider.hooks.resolution import resolve_due_keys
    from airflow_doi.provider.hooks.sql import sql_hook

    path = str(tmp_path / "one.sqlite")
    import sqlite3

    engine = Engine("sqlite", {"conn_type": "sqlite", "host": path},
                    lambda: sqlite3.connect(path), "catalogue")
    engine.load([f"10.5555/E{i}" for i in range(5)])
    monkeypatch.setenv("AIRFLOW_CONN_CAT", json.dumps(engine.connection))
    proxy = _OneKeyAlwaysFails()
    for run in range(3):
        summary = resolve_due_keys(sql_hook("cat"), proxy, table="catalogue",  # type: ignore[arg-type]
                                   log=_Recorder([]))
        assert summary.by_status["error"] == 1, run
    assert proxy.asked.count("10.5555/e3") == 3 and len(proxy.asked) == 7
    assert engine.run("SELECT status, error FROM doi_resolution WHERE doi_key = '10.5555/E3'"
                      ) == [("error", "unexpected answer: HTTP 400")]


RANGE_WORKER = """
import json, sys, time
from airflow_doi.provider.hooks.claims import KeyClaims
claim = KeyClaims.claim
def late(self, cursor, keys, now, first=[True]):
    if first:  # both processes numbered their keys before either claims
        first.clear()
        time.sleep(1.5)
    return claim(self, cursor, keys, now)
KeyClaims.claim = late
from airflow_doi.provider.operators.resolve import resolve_key_range
after, upto = (None if a == "-" else a for a in sys.argv[1:3])
print("SUMMARY", json.dumps(resolve_key_range(conn_id="cat", table="catalogue", after=after,
                                              upto=upto, batch_size=10)))
"""


def test_two_key_ranges_at_once_on_sqlite_resolve_every_key(tmp_path: Path) -> None:
    """Review finding: two mapped tasks on one SQLite file, each with its own range: a lock
    error on the first claim rolled back the numbered key list with it, and the task
    "succeeded" with a third of its keys left. The list is committed once numbered."""
    import sqlite3

    path = str(tmp_path / "ranges.sqlite")
    engine = Engine("sqlite", {"conn_type": "sqlite", "host": path},
                    lambda: sqlite3.connect(path), "catalogue")
    keys = [f"10.5555/N{i:03d}" for i in range(60)]
    engine.load(keys)
    with ProxySimulator(auto_records=True) as sim:
        env = _env(engine, sim.url)
        processes = [forked.popen([sys.executable, "-c", RANGE_WORKER, after, upto],
                                  env=env, text=True)
                     for after, upto in (("-", keys[29]), (keys[29], "-"))]
        outputs = [p.communicate(timeout=300) for p in processes]
        assert sim.request_count == len(keys)
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err[-3000:]
        said = [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("SUMMARY")]
        summary = json.loads(said[0])
        assert summary["due_keys"] == summary["stored_keys"] == 30
    assert engine.run("SELECT COUNT(*) FROM doi_resolution") == [(len(keys),)]


def test_a_users_table_named_like_the_claims_table_is_refused_untouched(engine: Engine) -> None:
    """The claims table is this project's own: a table of the user's by that name (other
    columns, rows) fails the resolve step before any write, and keeps every row."""
    from airflow_doi.provider.hooks.claims import claims_table_of

    table = quote_identifier(claims_table_of(engine.results))
    engine.run(f"CREATE TABLE {table} (id INTEGER, note {engine.dialect.text_type})")
    engine.run(f"INSERT INTO {table} VALUES (1, 'mine'), (2, 'also mine')")
    engine.load(["10.5555/U1"])
    with ProxySimulator(auto_records=True) as sim:
        result = forked.run([sys.executable, "-c", RESOLVER, engine.table],
                            env=_env(engine, sim.url), capture_output=True, text=True,
                            timeout=300, check=False)
        assert sim.request_count == 0
    assert result.returncode != 0
    assert "is not the claims table" in result.stderr and "left untouched" in result.stderr
    assert engine.run(f"SELECT id, note FROM {table} ORDER BY id") == [
        (1, "mine"), (2, "also mine")]


RANGE = """
import json, sys
from airflow_doi.provider.operators.resolve import resolve_key_range
print(json.dumps(resolve_key_range(conn_id="cat", table=sys.argv[1])))
"""


@pytest.mark.parametrize("engine", ["postgres"], indirect=True)
def test_a_killed_range_asks_one_batch_again_and_its_requests_still_count(
        engine: Engine, redis_url: str) -> None:
    """#35: a key range is asked and committed a batch at a time (``resolve_key_range``'s
    default 100), so a process killed mid-range asks again at most the batch it was in; the
    killed process's requests were counted in Redis as they left (``request_count_key``),
    so the next try's summary reports them."""
    import signal
    import uuid

    keys = [f"10.5555/R{i:04d}" for i in range(600)]
    engine.load(keys)
    counter = f"airflow-doi-test:requests:{uuid.uuid4().hex}"
    with ProxySimulator(auto_records=True, latency=0.005) as sim:
        env = _env(engine, sim.url, rate=100, redis_url=redis_url, request_count_key=counter,
                   redis_namespace=f"airflow-doi-test:{uuid.uuid4().hex}")
        first = forked.popen([sys.executable, "-c", RANGE, engine.table], env=env, text=True)
        deadline = time.monotonic() + 120
        while sim.request_count < 250 and first.poll() is None:
            assert time.monotonic() < deadline, "the first run sent too few requests"
            time.sleep(0.01)
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
        time.sleep(0.3)  # what it sent has arrived
        asked_before = sim.request_count
        stored = {k for (k,) in engine.run(f"SELECT doi_key FROM {engine.results}")}
        second = forked.run([sys.executable, "-c", RANGE, engine.table], env=env,
                            capture_output=True, text=True, timeout=300, check=False)
        assert second.returncode == 0, second.stderr[-3000:]
        summary = json.loads(second.stdout.strip().splitlines()[-1])
        asked_again = [k for k, n in sim.requests_by_key.items() if n > 1]
        record_figure({"figure": "killed_range", "keys": len(keys),
                       "stored_before_kill": len(stored), "requests_before_kill": asked_before,
                       "asked_again": len(asked_again), "summary": summary})
        assert 0 < len(stored) < len(keys) and len(stored) % 100 == 0  # whole batches
        assert not set(asked_again) & stored
        assert len(asked_again) <= 100, len(asked_again)  # the batch it was killed in
        # Counted as each request leaves, just before it is sent: the kill may land between
        # the count and the send of the requests in flight (concurrency 4), which the proxy
        # then never saw. The count is never short of the proxy's, and over by at most those.
        assert 0 <= summary["requests_by_earlier_tries"] - asked_before <= 4, summary
        counted = summary["requests"] + summary["requests_by_earlier_tries"]
        assert 0 <= counted - sim.request_count <= 4, (summary, sim.request_count)
        assert summary["requests"] == sim.request_count - asked_before  # the retry's own
    assert len(engine.run(f"SELECT doi_key FROM {engine.results}")) == len(keys)
