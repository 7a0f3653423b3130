"""System test (#35): the mapped example DAG on the CeleryExecutor, a worker lost mid-run.

A :class:`~tests.airflow_deployment.CeleryDeployment`, set up as the README's Celery section
says: api-server, scheduler, dag-processor and two ``airflow celery worker`` processes, a Redis
broker (a database number and a queue of their own), PostgreSQL metadata and catalogue, one
pace shared by every task through the ``doi_proxy`` connection's ``redis_url``. The settings
that shorten a lost worker's recovery are the README's too: the scheduler's
``task_instance_heartbeat_timeout`` (300 s by default; 15 s here) and the tasks' retry delay
(``AIRFLOW_DOI_EXAMPLE_RETRY_DELAY``; 1 s here).

While ``doi_resolve_mapped`` runs, one worker's whole process tree is SIGKILLed (worker, pool
children, task supervisors, task processes), as a lost machine ends. Then: the run succeeds,
every key is stored and no claim is left behind, at most 1.05 requests per key were sent over
the run (each killed task asks again at most the batch it was in), and the run's summary
counts what the proxy saw (the killed tries' requests were counted in Redis as they left).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from urllib.parse import urlparse

import pytest

from airflow_doi.resolver.simulator import ProxySimulator
from tests.airflow_deployment import CeleryDeployment
from tests.conftest import record_figure

pytestmark = [pytest.mark.xdist_group("airflow_celery"), pytest.mark.slow]

MAPPED = "doi_resolve_mapped"
#: The Celery broker: the test Redis, a database number no other test uses.
BROKER_DB = 11
HEARTBEAT_TIMEOUT = 15


@pytest.fixture(scope="module")
def celery(tmp_path_factory: pytest.TempPathFactory, postgres_dsn: str,
           redis_url: str) -> Iterator[CeleryDeployment]:
    root = tmp_path_factory.mktemp("airflow_celery")
    broker = urlparse(redis_url)._replace(path=f"/{BROKER_DB}").geturl()
    env = {
        "AIRFLOW_DOI_EXAMPLE_RETRIES": "2",
        "AIRFLOW_DOI_EXAMPLE_RETRY_DELAY": "1",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
    }
    clock = time.monotonic()
    with CeleryDeployment(root, admin_dsn=postgres_dsn, broker_url=broker, env=env,
                          dag_ids=[MAPPED]) as airflow:
        timings = {k: round(v, 1) for k, v in airflow.timings.items()}
        print(f"\nCelery deployment on {airflow.base_url} (queue {airflow.queue}) ready in "
              f"{time.monotonic() - clock:.1f} s: {timings}")
        yield airflow


def test_a_lost_worker_costs_at_most_a_batch_per_task_and_every_request_is_counted(
        celery: CeleryDeployment, postgres_dsn: str, postgres_schema: str,
        redis_url: str) -> None:
    import psycopg

    keys, range_size, batch, rate = 1600, 200, 20, 40.0
    schema = postgres_schema
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(f'CREATE TABLE "{schema}".catalogue (record_id integer, doi_raw text)')
        with conn.cursor() as cursor:
            cursor.executemany(f'INSERT INTO "{schema}".catalogue VALUES (%s, %s)',
                               [(i, f"10.5555/C{i:05d}") for i in range(keys)])
    url = urlparse(postgres_dsn)
    conn_id = f"cat_{uuid.uuid4().hex[:8]}"
    celery.set_connection(conn_id, {
        "conn_type": "postgres", "host": url.hostname, "port": url.port or 5432,
        "login": url.username, "password": url.password or "", "schema": url.path.lstrip("/")})
    with ProxySimulator(auto_records=True, latency=0.01, rate_limit=rate, rate_burst=5) as sim:
        celery.set_connection("doi_proxy_default", {
            "conn_type": "doi_proxy", "host": sim.url,
            "extra": {"rate": rate, "concurrency": 4, "redis_url": redis_url,
                      "redis_namespace": f"airflow-doi-test:{uuid.uuid4().hex}"}})
        started = time.monotonic()
        run_id = celery.trigger(MAPPED, {"catalogue_conn_id": conn_id,
                                         "catalogue_table": f"{schema}.catalogue",
                                         "range_size": range_size, "batch_size": batch})
        # Mid-run: a third of the keys asked, and a worker running resolve tasks.
        deadline = time.monotonic() + 240
        victim, running = None, []
        while victim is None:
            assert time.monotonic() < deadline, celery.describe(MAPPED, run_id)
            if sim.request_count >= keys // 3:
                for name in celery.workers:
                    running = celery.task_processes(name)
                    if running:
                        victim = name
                        break
            time.sleep(0.05)
        asked_at_kill = sim.request_count
        celery.kill_worker(victim)
        killed_at, killed_wall = time.monotonic(), time.time()
        state = celery.wait(MAPPED, run_id, timeout=300)
        elapsed = time.monotonic() - started
        recovered = time.monotonic() - killed_at
        summary = celery.request(
            "GET", f"/dags/{MAPPED}/dagRuns/{run_id}/taskInstances/summarize/xcomEntries/"
            "return_value").json()["value"]
        retried = celery.failed_tries(MAPPED, run_id)
        retry_starts = [datetime.fromisoformat(ti.start_date).timestamp() - killed_wall
                        for ti in celery.task_instances(MAPPED, run_id)
                        if ti.task_id == "resolve" and ti.try_number > 1 and ti.start_date]
        recovery = round(min(retry_starts, default=-1), 1)
        spread = Counter(sim.requests_by_key.values())
        per_key = sim.request_count / keys
        print(f"\n{MAPPED} on Celery, worker {victim} killed with {len(running)} tasks running "
              f"after {asked_at_kill} requests: retried {recovery} s after the kill, run {state} "
              f"{recovered:.1f} s after it "
              f"({elapsed:.1f} s in all); {sim.request_count} requests for {keys} keys "
              f"({per_key:.3f} per key, keys by times asked {dict(spread)}); "
              f"{sim.throttled} refused; summary {summary}; retried: {retried}")
        record_figure({"suite": "airflow_celery", "figure": "worker_killed", "keys": keys,
                       "tasks_killed": len(running), "requests": sim.request_count,
                       "requests_per_key": round(per_key, 4), "refused": sim.throttled,
                       "summary_requests": summary["requests"],
                       "seconds_kill_to_retry": recovery,
                       "seconds_kill_to_success": round(recovered, 1),
                       "seconds": round(elapsed, 1)})
        assert state == "success", celery.describe(MAPPED, run_id)
        assert len(retried) >= len(running) >= 1, retried
        assert set(sim.requests_by_key) == {f"10.5555/C{i:05d}" for i in range(keys)}
        assert per_key <= 1.05, dict(spread)
        # Counted as each request leaves, just before it is sent: a SIGKILL between the
        # count and the send costs nothing at the proxy, so the summary may exceed what the
        # proxy saw by the requests the killed tasks had in flight (4 each), never fall short.
        over = summary["requests"] - sim.request_count
        assert 0 <= over <= 4 * len(running), (summary, sim.request_count)
        assert summary["requests_by_earlier_tries"] > 0
    with psycopg.connect(postgres_dsn) as conn:
        stored = dict(conn.execute(f'SELECT status, COUNT(*) FROM "{schema}".doi_resolution '
                                   "GROUP BY status").fetchall())
        claims = conn.execute(
            f'SELECT COUNT(*) FROM "{schema}".doi_resolution_claims').fetchone()
    assert stored == {"resolved": keys}
    assert claims == (0,)
