# ruff: noqa: F811  (``engine`` is the fixture of test_airflow_claims, used as an argument)
"""DoiEnrichOperator with the agencies' data files and update streams (#39), on real
databases: the same doi_metadata rows as the CLI and Spark for one snapshot and catalogue, a
nightly run that asks the APIs only what the files lacked, a killed scan resumed member by
member, a refresh that replaces only the rows that changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from airflow_doi.db.statements import quote_identifier
from airflow_doi.metadata.csl import FIELDS
from airflow_doi.resolver.agencies import SHOWCASE_WORKS, Work, crossref_item_for, work_for
from airflow_doi.resolver.datafiles import crossref_tar, write_data_files
from airflow_doi.resolver.simulator import ProxySimulator, make_records
from tests import forked
from tests.conftest import ROOT, read_output_csv
from tests.test_airflow_claims import Engine, _env, engine  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("airflow_snapshot")]

#: The columns compared between faces (expires_at is each run's own now + TTL).
COMPARED = ("doi_key", "doi", "metadata_status", *FIELDS, "source_host", "agency",
            "metadata_source", "error", "attempts", "http_status", "fetched_at", "csl_json")
#: The files' date (their tar members'): 2025-01-01.
FILES_DATE = 1_735_689_600

OPERATOR = """
import json, os, sys
from airflow_doi.provider.operators.enrich import DoiEnrichOperator
options = json.loads(sys.argv[2])
summary = DoiEnrichOperator(task_id="enrich", conn_id="cat", table=sys.argv[1],
                            batch_size=50, **options).execute({})
print(json.dumps(summary))
"""


def _works(count: int = 240) -> list[Work]:
    return [*SHOWCASE_WORKS, *(work_for(f"10.5555/snap.{i}") for i in range(count))]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data files of the works (Crossref's tar and JSON lines, DataCite's tar)."""
    folder = tmp_path_factory.mktemp("datafiles")
    write_data_files(folder, _works(), mtime=FILES_DATE)
    return folder


def _catalogue(engine: Engine, dois: list[str]) -> None:
    engine.load([d.upper() for d in dois])
    table = quote_identifier(engine.table)
    # The catalogue's own spelling of each DOI, as the normalize step wrote it.
    engine.run(f"UPDATE {table} SET doi = doi_key")


def _operate(engine: Engine, env: dict[str, str], **options: Any) -> dict[str, Any]:
    done = forked.run([sys.executable, "-c", OPERATOR, engine.table, json.dumps(options)],
                      env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _metadata(engine: Engine) -> dict[str, dict[str, Any]]:
    table = quote_identifier(engine.results.replace("doi_resolution", "doi_metadata"))
    rows = engine.run(f"SELECT {', '.join(COMPARED)} FROM {table}")
    return {row[0]: _normal(dict(zip(COMPARED, row, strict=True))) for row in rows}


def _normal(row: dict[str, Any]) -> dict[str, Any]:
    """A row as every face can be compared on: times as UTC ISO text, numbers as integers,
    the record as parsed JSON (PostgreSQL's jsonb writes it its own way), '' as None."""
    out: dict[str, Any] = {}
    for name, value in row.items():
        if value == "":
            value = None
        if isinstance(value, datetime):
            value = (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(
                timezone.utc).isoformat()
        elif name == "fetched_at" and isinstance(value, str):
            value = datetime.fromisoformat(value).astimezone(timezone.utc).isoformat()
        elif name in ("year", "author_count", "attempts", "http_status") and value is not None:
            value = int(value)
        elif name == "csl_json" and value is not None:
            value = json.loads(value) if isinstance(value, str) else value
        out[name] = value
    return out


def _cli_rows(files: Path, dois: list[str], tmp_path: Path) -> dict[str, dict[str, Any]]:
    source = tmp_path / "catalogue.csv"
    source.write_text("doi\n" + "\n".join(d.upper() for d in dois) + "\n")
    done = forked.run([sys.executable, "-m", "airflow_doi", "enrich", str(source), "-o",
                           str(tmp_path / "out.csv"), "--snapshot", str(files), "--source",
                           "snapshot", "--workers", "2"], capture_output=True, text=True,
                      timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {}
    for row in read_output_csv(tmp_path / "out.csv"):
        if row["metadata_status"] != "ok":
            continue
        rows[row["key"]] = _normal({**{name: row.get(name) for name in COMPARED},
                                    "doi_key": row["key"]})
    return rows


@pytest.mark.parametrize("engine", ["duckdb", "postgres"], indirect=True)
def test_the_operator_stores_the_rows_the_cli_writes(engine: Engine, files: Path,
                                                     tmp_path: Path) -> None:
    works = _works()
    dois = [w.doi for w in works[::2]] + ["10.5555/not.in.the.files"]
    _catalogue(engine, dois)
    env = _env(engine, "http://127.0.0.1:9")  # no proxy: nothing may be asked
    summary = _operate(engine, env, snapshot=str(files),
                       resolver_options={"source": "snapshot"})
    stored = _metadata(engine)
    expected = _cli_rows(files, dois, tmp_path)
    assert stored == expected
    assert summary["snapshot"]["found_keys"] == len(expected)
    assert summary["snapshot"]["left_to_apis"] == len(dois) - len(expected)
    assert {r["fetched_at"] for r in stored.values()} == {
        datetime.fromtimestamp(FILES_DATE, timezone.utc).isoformat()}
    again = _operate(engine, env, snapshot=str(files), resolver_options={"source": "snapshot"})
    assert again["snapshot"]["already_read"] is True and _metadata(engine) == stored


def _insert(engine: Engine, dois: list[str]) -> None:
    """Rows added to the catalogue after a run, normalized (``doi`` as ``doi_key``)."""
    with closing(engine.connect()) as conn:
        cursor = engine.dialect.cursor(conn)
        cursor.executemany(f"INSERT INTO {quote_identifier(engine.table)} VALUES "
                           f"({engine.dialect.marks(3)})",
                           [(doi.upper(), doi.upper(), True) for doi in dois])
        conn.commit()


@pytest.mark.parametrize("engine", ["duckdb", "postgres"], indirect=True)
def test_keys_added_after_the_files_were_read_are_looked_up_in_them(
        engine: Engine, files: Path, tmp_path: Path) -> None:
    """source="snapshot": no API is ever asked, so the keys the catalogue gains after the
    files were read are looked up in them by the next run (the keys the files were already
    asked for, found or not, are not asked again); a run with nothing new reads nothing."""
    held = [w.doi for w in _works() if w.agency in ("crossref", "datacite")]
    first, later = held[:100], held[100:]
    missing = ["10.5555/not.in.the.files", "10.5555/not.in.the.files.either"]
    _catalogue(engine, [*first, missing[0]])
    env = _env(engine, "http://127.0.0.1:9")  # no proxy: nothing may be asked
    options: dict[str, Any] = {"snapshot": str(files),
                               "resolver_options": {"source": "snapshot"}}
    one = _operate(engine, env, **options)["snapshot"]
    assert (one["due_keys"], one["found_keys"], one["left_to_apis"]) == (101, 100, 1)
    assert one["already_read"] is False and one["members"] == 4
    assert len(_metadata(engine)) == 100
    _insert(engine, [*later, missing[1]])
    two = _operate(engine, env, **options)["snapshot"]
    # The 111 new keys, and only them: the key the files lacked last time is not asked again.
    assert (two["due_keys"], two["found_keys"], two["left_to_apis"]) == (112, 111, 1)
    assert two["already_read"] is False
    assert (two["members"], two["members_resumed"]) == (4, 0)
    stored = _metadata(engine)
    assert len(stored) == len(held) == 211
    assert stored == _cli_rows(files, [*held, *missing], tmp_path)
    three = _operate(engine, env, **options)["snapshot"]
    assert three["already_read"] is True
    assert (three["due_keys"], three["found_keys"], three["members"]) == (0, 0, 0)
    assert _metadata(engine) == stored


@pytest.mark.xdist_group("spark")
def test_the_spark_job_writes_the_same_rows(files: Path, tmp_path: Path) -> None:
    """examples/spark/snapshot_metadata.py through spark-submit on local[2], as Airflow's
    SparkSubmitOperator runs it: the members read on the executors, joined on doi_key."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dois = [w.doi.upper() for w in _works()[::2]] + ["10.5555/NOT.IN.THE.FILES"]
    pq.write_table(pa.table({"doi": dois, "doi_key": dois, "title": ["x"] * len(dois)}),
                   tmp_path / "catalogue.parquet")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    submit = Path(sys.executable).parent / "spark-submit"
    done = subprocess.run(
        [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
         "--conf", "spark.sql.session.timeZone=UTC", "--conf", "spark.sql.shuffle.partitions=2",
         str(ROOT / "examples" / "spark" / "snapshot_metadata.py"), "--snapshot", str(files),
         "--catalogue", str(tmp_path / "catalogue.parquet"),
         "--output", str(tmp_path / "metadata.parquet")],
        env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    table = pq.read_table(tmp_path / "metadata.parquet")
    rows = {row["doi_key"]: _normal({name: row[name] for name in COMPARED})
            for row in table.to_pylist()}
    assert rows == _cli_rows(files, dois, tmp_path)


@pytest.fixture()
def registry() -> Iterator[ProxySimulator]:
    works = _works()
    with ProxySimulator(make_records([w.doi for w in works]), list_rate_limit=20) as sim:
        yield sim


def _api_env(engine: Engine, sim: ProxySimulator) -> dict[str, str]:
    return _env(engine, sim.url, agency_rate=1000, list_rate=20,
                metadata_hosts=",".join(sim.metadata_hosts), crossref_url=sim.crossref_url,
                datacite_url=sim.datacite_url)


@pytest.mark.parametrize("engine", ["duckdb"], indirect=True)
def test_a_nightly_run_asks_the_apis_only_what_the_files_lacked(
        engine: Engine, files: Path, registry: ProxySimulator) -> None:
    works = _works()
    in_files = {w.doi.upper() for w in works
                if w.agency in ("crossref", "datacite") and w.fault is None}
    _catalogue(engine, [w.doi for w in works])
    env = _api_env(engine, registry)
    first = _operate(engine, env, snapshot=str(files))
    asked = set(registry.cn_by_key) | set(registry.list_dois_by_key)
    assert not asked & in_files  # what the files hold was never asked of an API
    assert first["snapshot"]["found_keys"] == len(in_files)
    assert first["stored_keys"] == len(works) - len(in_files)
    # The next night: one new key. The files are not read again; only that key is asked.
    registry.reset_counts()
    new = work_for("10.5555/snap.new.1")
    engine.run(f"INSERT INTO {quote_identifier(engine.table)} VALUES "
               f"({engine.dialect.marks(3)})", [new.doi.upper(), new.doi.upper(), True])
    second = _operate(engine, env, snapshot=str(files))
    assert second["snapshot"]["already_read"] is True
    assert second["due_keys"] == 1
    assert set(registry.cn_by_key) | set(registry.list_dois_by_key) <= {new.doi.upper()}


KILLED = """
import json, sys, time
import airflow_doi.provider.hooks.snapshots as snapshots
snapshots._TableStore.rows_per_flush = 1
flush = snapshots._TableStore.flush
def slow(self):
    flush(self)
    if self.stored >= int(sys.argv[3]):
        time.sleep(120)  # killed here
snapshots._TableStore.flush = slow
from airflow_doi.provider.operators.enrich import DoiEnrichOperator
DoiEnrichOperator(task_id="enrich", conn_id="cat", table=sys.argv[1], snapshot=sys.argv[2],
                  snapshot_workers=1, resolver_options={"source": "snapshot"}).execute({})
"""


def _many_members(tmp_path: Path, works: list[Work]) -> Path:
    """The data files of ``works``: members of the tars only, many of them."""
    folder = tmp_path / "files"
    write_data_files(folder, works, mtime=FILES_DATE)
    (folder / "crossref.jsonl.gz").unlink()
    (folder / "crossref.tar").unlink()
    crossref_tar(folder / "crossref.tar", [crossref_item_for(w) for w in works
                                          if w.agency == "crossref"], per_file=200,
                 mtime=FILES_DATE)
    return folder


@pytest.mark.parametrize("engine", ["postgres"], indirect=True)
def test_a_killed_scan_resumes_and_never_rewrites_a_stored_row(
        engine: Engine, tmp_path: Path) -> None:
    works = [work_for(f"10.5555/kill.{i}") for i in range(3000)]
    folder = _many_members(tmp_path, works)
    _catalogue(engine, [w.doi for w in works])
    env = _env(engine, "http://127.0.0.1:9")
    child = subprocess.Popen([sys.executable, "-c", KILLED, engine.table, str(folder), "400"],
                             env=env)
    table = quote_identifier(engine.results.replace("doi_resolution", "doi_metadata"))
    stored: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.3)
        try:
            count = engine.run(f"SELECT COUNT(*) FROM {table}")[0][0]
        except Exception:
            continue
        if count >= 400:
            stored = engine.run(f"SELECT doi_key, xmin::text FROM {table}")
            break
    child.kill()
    child.wait()
    assert len(stored) >= 400
    summary = _operate(engine, env, snapshot=str(folder), snapshot_workers=2,
                       resolver_options={"source": "snapshot"})
    assert summary["snapshot"]["members_resumed"] >= 2
    after = dict(engine.run(f"SELECT doi_key, xmin::text FROM {table}"))
    assert all(after[key] == xmin for key, xmin in stored)  # never written again
    holders = sum(w.agency in ("crossref", "datacite") for w in works)
    assert len(after) == holders


@pytest.mark.parametrize("engine", ["postgres"], indirect=True)
def test_a_refresh_replaces_only_the_rows_that_changed(
        engine: Engine, files: Path, registry: ProxySimulator) -> None:
    works = [w for w in _works() if w.agency in ("crossref", "datacite") and w.fault is None]
    _catalogue(engine, [w.doi for w in works])
    env = _api_env(engine, registry)
    _operate(engine, env, snapshot=str(files), resolver_options={"source": "snapshot"})
    table = quote_identifier(engine.results.replace("doi_resolution", "doi_metadata"))
    before = dict(engine.run(f"SELECT doi_key, xmin::text FROM {table}"))
    changed = works[:60]
    for number, work in enumerate(changed):
        registry.revise(work.doi, f"2025-05-{1 + number % 28:02d}T00:00:00Z",
                        title=f"Changed {number}")
    registry.reset_counts()
    summary = _operate(engine, env, snapshot=str(files), updates=True,
                       resolver_options={"source": "snapshot"})
    seen = registry.stats()
    assert sum(s["found"] for s in summary["updates"].values()) == len(changed)
    assert all(s["since"] == "2025-01-02" for s in summary["updates"].values())
    assert sum(seen["stream_pages"].values()) <= 4 and seen["list_over_announced"] == 0
    rows = dict(engine.run(f"SELECT doi_key, title FROM {table}"))
    after = dict(engine.run(f"SELECT doi_key, xmin::text FROM {table}"))
    keys = {w.doi.upper() for w in changed}
    assert all(rows[k].startswith("Changed") for k in keys)
    assert all(after[k] == before[k] for k in before if k not in keys)  # untouched
    # The next night goes on from this harvest's day: nothing changed since.
    later = _operate(engine, env, snapshot=str(files), updates=True,
                     resolver_options={"source": "snapshot"})
    assert {s["since"] for s in later["updates"].values()} == {
        datetime.now(timezone.utc).date().isoformat()}
    assert sum(s["found"] for s in later["updates"].values()) == 0


@pytest.mark.parametrize("engine", ["postgres"], indirect=True)
def test_a_killed_read_for_new_keys_resumes_with_its_own_keys(
        engine: Engine, tmp_path: Path) -> None:
    """source="snapshot": the read of the files for the keys added since the first one,
    killed, goes on from the members it had finished with the keys it was started for (never
    writing a stored row again); a key added after the kill is looked up in every member, by
    one more read."""
    works = [work_for(f"10.5555/kill.{i}") for i in range(3000)]
    folder = _many_members(tmp_path, works)
    holders = [w.doi for w in works if w.agency in ("crossref", "datacite")]
    others = [w.doi for w in works if w.agency not in ("crossref", "datacite")]
    first, late = works[:500], holders[-1]
    added = [w.doi for w in works[500:] if w.doi != late]
    _catalogue(engine, [w.doi for w in first])
    env = _env(engine, "http://127.0.0.1:9")
    options: dict[str, Any] = {"snapshot": str(folder), "resolver_options": {"source": "snapshot"}}
    one = _operate(engine, env, **options)["snapshot"]
    members = one["members"]
    table = quote_identifier(engine.results.replace("doi_resolution", "doi_metadata"))
    assert one["found_keys"] == len(engine.run(f"SELECT doi_key FROM {table}")) == sum(
        w.agency in ("crossref", "datacite") for w in first)
    _insert(engine, added)
    child = subprocess.Popen([sys.executable, "-c", KILLED, engine.table, str(folder), "400"],
                             env=env)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.3)
        if engine.run(f"SELECT COUNT(*) FROM {table}")[0][0] >= one["found_keys"] + 400:
            break
    child.kill()
    child.wait()
    stored = dict(engine.run(f"SELECT doi_key, xmin::text FROM {table}"))
    assert one["found_keys"] + 400 <= len(stored) < len(holders) - 1
    _insert(engine, [late])  # after the kill: not one of the killed read's keys
    two = _operate(engine, env, **options)["snapshot"]
    # The killed read's keys still due (the first read's misses are none of them), then the
    # key added after the kill.
    still_due = len(added) - (len(stored) - one["found_keys"])
    assert two["due_keys"] == still_due + 1
    assert two["found_keys"] == len(holders) - len(stored)
    assert two["left_to_apis"] == len(set(others) - {w.doi for w in first})
    assert two["members_resumed"] >= 2
    assert two["members"] == 2 * members - two["members_resumed"]  # the rest, then every one
    after = dict(engine.run(f"SELECT doi_key, xmin::text FROM {table}"))
    assert all(after[key] == xmin for key, xmin in stored.items())  # never written again
    assert set(after) == {doi.upper() for doi in holders}
    three = _operate(engine, env, **options)["snapshot"]
    assert three["already_read"] is True and (three["due_keys"], three["members"]) == (0, 0)
