# ruff: noqa: F811  (``engine`` is the fixture of test_airflow_claims, used as an argument)
"""DoiEnrichOperator and its engine on real databases: typed rows equal the simulator's
records, only due keys are asked, runs at once ask each key once, a dead proxy fails fast,
a user's own ``doi_metadata`` is left alone."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest

from airflow_doi.db.statements import quote_identifier
from airflow_doi.metadata.csl import FIELDS
from airflow_doi.resolver.agencies import HOSTILE_WORKS
from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked
from tests.conftest import record_figure
from tests.test_airflow_claims import Engine, _env, engine  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("airflow_enrich")]


ENRICHER = """
import json, sys
from airflow_doi.provider.operators.enrich import DoiEnrichOperator
summary = DoiEnrichOperator(task_id="enrich", conn_id="cat", table=sys.argv[1],
                            batch_size=int(sys.argv[2])).execute({})
print(json.dumps(summary))
"""


def _enrich(engine: Engine, sim: ProxySimulator, batch_size: int = 25,
            **extra: Any) -> Any:  # a subprocess.Popen, or its forked twin (tests/forked.py)
    # Content negotiation for every key; the agencies' REST APIs named as a deployment names
    # them (an answer's host then says whose it is).
    settings: dict[str, Any] = {"agency_rate": 1000, "source": "negotiation",
                                "crossref_url": sim.crossref_url,
                                "datacite_url": sim.datacite_url,
                                "metadata_hosts": ",".join(sim.metadata_hosts), **extra}
    env = _env(engine, sim.url, **settings)
    return forked.popen([sys.executable, "-c", ENRICHER, engine.table, str(batch_size)],
                        env=env, text=True)


def _metadata_table(engine: Engine) -> str:
    return engine.results.replace("doi_resolution", "doi_metadata")


def test_enrich_writes_typed_rows_and_asks_only_due_keys(engine: Engine) -> None:
    keys = [f"10.5555/E{i:03d}" for i in range(80)] + [HOSTILE_WORKS["html_200"].doi.upper()]
    engine.load(keys)
    with ProxySimulator(auto_records=True) as sim:
        process = _enrich(engine, sim)
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        summary = json.loads(out.strip().splitlines()[-1])
        assert sim.cn_requests == len(keys) and set(sim.cn_by_key.values()) == {1}
        table = quote_identifier(_metadata_table(engine))
        rows = engine.run(f"SELECT doi_key, doi, metadata_status, {', '.join(FIELDS)}, "
                          f"source_host, error, attempts FROM {table}")
        assert len(rows) == len(keys)
        for row in rows:
            expected = sim.expected_metadata(row[1])
            if row[0] == keys[-1]:
                assert row[2] == "error" and "HTML" in row[-2]
            elif expected is None:
                assert row[2] == "no_metadata"
            else:
                assert row[2] == "ok" and dict(
                    zip(FIELDS, row[3:3 + len(FIELDS)], strict=True)) == expected
                assert row[-1] == 2
        assert summary["by_status"]["error"] == 1
        # Again: only the error is due (errors never get an expiry).
        sim.reset_counts()
        again = _enrich(engine, sim)
        out, err = again.communicate(timeout=300)
        assert again.returncode == 0, err[-3000:]
        assert json.loads(out.strip().splitlines()[-1])["due_keys"] == 1
        assert sim.cn_requests == 1
    claims = quote_identifier(_metadata_table(engine) + "_claims")
    assert engine.run(f"SELECT COUNT(*) FROM {claims}") == [(0,)]
    if engine.kind == "postgres":
        assert engine.run(f"SELECT pg_typeof(csl_json)::text FROM {table} "
                          "WHERE metadata_status = 'ok' LIMIT 1") == [("jsonb",)]
        # The record as sent: its type CSL's or the registry's own word (Crossref's).
        assert engine.run(f"SELECT COUNT(*) FROM {table} WHERE csl_json->>'type' IN "
                          "(csl_type, registry_type)") == [(sum(1 for r in rows if r[2] == "ok"),)]
    if engine.kind == "mariadb":
        assert engine.run(f"SELECT COUNT(*) FROM {table} WHERE "
                          "JSON_UNQUOTE(JSON_EXTRACT(csl_json, '$.type')) IN "
                          "(csl_type, registry_type)") == [(sum(1 for r in rows if r[2] == "ok"),)]


@pytest.mark.parametrize("engine", ["postgres", "duckdb"], indirect=True)
def test_enrichers_running_at_once_ask_each_key_once(engine: Engine) -> None:
    keys = [f"10.5555/T{i:04d}" for i in range(300)]
    engine.load(keys)
    with ProxySimulator(auto_records=True, latency=0.005) as sim:
        processes = [_enrich(engine, sim, rate=60) for _ in range(3)]
        outputs = [p.communicate(timeout=300) for p in processes]
        for process, (_, err) in zip(processes, outputs, strict=True):
            assert process.returncode == 0, err[-3000:]
        summaries = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
        assert sim.cn_requests == len(keys) and set(sim.cn_by_key.values()) == {1}
        assert sum(sim.agency_requests.values()) == len(keys)
    record_figure({"figure": "three_enrichers_one_table", "engine": engine.kind,
                   "keys": len(keys), "negotiations": sim.cn_requests,
                   "stored_by_each": [s["stored_keys"] for s in summaries]})
    assert sum(s["stored_keys"] for s in summaries) == len(keys)
    assert all(s["stored_keys"] > 0 for s in summaries)


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_a_dead_proxy_fails_enrich_at_once_and_stores_nothing_unanswered(
        engine: Engine) -> None:
    engine.load([f"10.5555/Z{i}" for i in range(20)])
    with ProxySimulator(auto_records=True) as sim:
        sim_url = sim.url
    # The proxy is gone (its port closed): connection refused on every request. Nothing ever
    # answered, so the task fails in seconds, not after breaker_give_up (120 s by default).
    env = _env(engine, sim_url, max_attempts=3, backoff_base=0.05)
    started = time.monotonic()
    process = forked.run([sys.executable, "-c", ENRICHER, engine.table, "10"], env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert time.monotonic() - started < 30
    assert process.returncode != 0
    assert "ProxyUnavailableError" in process.stderr
    assert ("DOI content negotiation failed (no request was ever answered (could not connect "
            f"to {sim_url}/ (connection refused)") in process.stderr, process.stderr[-2000:]
    assert "not after breaker_give_up (120s)" in process.stderr
    table = quote_identifier(_metadata_table(engine))
    assert engine.run(f"SELECT COUNT(*) FROM {table}") == [(0,)]  # nothing unanswered kept


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_a_batch_api_that_cannot_be_reached_costs_the_task_one_give_up(engine: Engine) -> None:
    """Crossref's list host refuses connections (a deployment that cannot reach it): the first
    batch gives up on it, the task's later batches ask its keys by negotiation without trying
    it again (each batch once lost ~9 s on it), and every key gets its record."""
    keys = [f"10.5555/G{i:03d}" for i in range(60)]
    engine.load(keys)
    with ProxySimulator(auto_records=True) as sim:
        unreachable = "http://127.0.0.1:9"
        env = _env(engine, sim.url, agency_rate=1000, list_rate=1000, max_attempts=2,
                   backoff_base=0.05, crossref_url=unreachable,
                   datacite_url=sim.datacite_url,
                   metadata_hosts=",".join((*sim.metadata_hosts, unreachable)))
        process = forked.run([sys.executable, "-c", ENRICHER, engine.table, "10"], env=env,
                             capture_output=True, text=True, timeout=300, check=False)
        assert process.returncode == 0, process.stderr[-3000:]
        expected = {key: sim.expected_metadata(key) for key in keys}
    summary = json.loads(process.stdout.strip().splitlines()[-1])
    # One query of the first batch (its retries: max_attempts), none in the five after it.
    assert summary["by_source"]["crossref"] == {"keys": 0, "requests": 2}, summary
    table = quote_identifier(_metadata_table(engine))
    rows = engine.run(f"SELECT doi_key, metadata_status, metadata_source, agency, title "
                      f"FROM {table}")
    assert len(rows) == len(keys)
    crossref = [row for row in rows if row[3] == "Crossref"]
    assert len(crossref) > 20 and {row[2] for row in crossref} == {"negotiation"}
    assert any(row[2] == "datacite" for row in rows)  # the other batch API still asked
    for key, status, _, _, title in rows:
        assert (status == "ok") == (expected[key] is not None), key
        assert title == (expected[key] or {}).get("title"), key


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
def test_a_users_own_doi_metadata_is_left_untouched(engine: Engine) -> None:
    engine.load(["10.5555/U1"])
    table = quote_identifier(_metadata_table(engine))
    engine.run(f"CREATE TABLE {table} (doi_key {engine.dialect.text_type}, note "
               f"{engine.dialect.text_type})")
    engine.run(f"INSERT INTO {table} VALUES ('10.5555/U1', 'mine')")
    with ProxySimulator(auto_records=True) as sim:
        process = _enrich(engine, sim)
        _, err = process.communicate(timeout=300)
        assert process.returncode != 0
        assert "is not one DoiEnrichOperator wrote" in err and "metadata_table=" in err
        assert sim.cn_requests == 0
    assert engine.run(f"SELECT doi_key, note FROM {table}") == [("10.5555/U1", "mine")]
