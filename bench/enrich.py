"""Enrichment at scale (#33): the agencies' batch APIs against content negotiation alone.

A SQLite catalogue of ``--keys`` distinct DOIs, already normalized, registered 70% by Crossref,
20% by DataCite and 10% by two other agencies (mEDRA, and one without content negotiation), is
enriched by ``DoiEnrichOperator`` in a *child* process against the simulator, which runs in a
process of its own (``airflow-doi simulator --records``) with per-host limits: the proxy
``--proxy-limit``/s, each agency's single records ``--agency-limit``/s, and each batch API's
list queries ``--list-limit`` in any second (slower than single records; Crossref announces it
in ``x-rate-limit-limit``). The client is configured at those limits (the list queries at twice
theirs: the announcement must bring it down). Four measurements, in one run:

* **negotiation alone** (the baseline): ``source="negotiation"`` on ``--baseline-keys``
  Crossref and DataCite keys: keys/s;
* **the batch sources alone**: the same two agencies' keys (``--batch-keys``) with
  ``source="auto"``: keys/s (goal: at least 20x the baseline), requests per key at each batch
  API (goal: at most 0.05), 429s, queries over the announced limit (goal: 0);
* **the whole catalogue**: every key, ``source="auto"``: keys/s, keys and requests by source,
  429s, queries over the announced limit, the child's RSS at 10%, 20%, 50% and 100% of the keys
  (flat), and a sample of stored rows checked column by column against the simulator's works.
  The other agencies' 10% go through negotiation at its own pace (two requests a key, the
  proxy's and the agency's limits): they bound the whole run's rate;
* **kill and resume**: a fresh catalogue of ``--resume-keys``, the child killed (SIGKILL) once
  half the keys are stored, then run again: the keys asked again that had been stored before
  the kill (goal: 0), and the keys of the batch in flight.

    .venv/bin/python bench/enrich.py [--keys 100000] [--proxy-limit 40] [--agency-limit 20]
        [--list-limit 10] [--list-size 100] [--batch-size 2000]

The default run takes about 12 minutes. For a quick look: ``--keys 5000 --batch-keys 5000
--baseline-keys 300 --resume-keys 3000``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-doi-bench-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")

#: The child: the operator as a task runs it, with its own RSS before and after.
ENRICHER = """
import json, sys
from airflow_doi.provider.operators.enrich import DoiEnrichOperator

def vm(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])

operator = DoiEnrichOperator(task_id="enrich", conn_id="bench_cat", table="catalogue",
                             batch_size=int(sys.argv[1]))
print(json.dumps({"start_rss_kib": vm("VmRSS")}), flush=True)
summary = operator.execute({})
summary.update(end_rss_kib=vm("VmRSS"), peak_rss_kib=vm("VmHWM"))
print(json.dumps(summary), flush=True)
"""
#: The agencies of the catalogue, with their shares.
SHARES = {"crossref": 0.70, "datacite": 0.20, "medra": 0.05, "nocn": 0.05}


def catalogue_dois(count: int, stem: str) -> dict[str, str]:
    """``count`` DOIs as the catalogue writes them, each with its agency, in :data:`SHARES`
    (shuffled, reproducibly). DataCite holds its DOIs in upper case and its index is
    case-sensitive (datacite#2115): half of them are written in lower case here, as
    catalogues do (:func:`registered_form` is the agency's)."""
    agencies: list[str] = []
    for agency, share in SHARES.items():
        agencies += [agency] * round(count * share)
    agencies = (agencies + ["crossref"] * count)[:count]
    random.Random(33).shuffle(agencies)
    written: dict[str, str] = {}
    for i, agency in enumerate(agencies):
        doi = f"10.5555/{stem}.{i:07d}"
        if agency == "datacite":
            doi = doi.lower() if i % 2 else doi.upper()
        written[doi] = agency
    return written


def registered_form(doi: str, agency: str) -> str:
    """The DOI as its agency registered it (DataCite: upper case)."""
    return doi.upper() if agency == "datacite" else doi


def build_catalogue(path: Path, dois: list[str]) -> None:
    """The catalogue as the normalize step leaves it; the file in WAL mode, so that the
    parent's row counts never block the child's commits."""
    from airflow_doi import comparison_key

    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE catalogue (record_id INTEGER, doi TEXT, doi_key TEXT, "
                     "doi_valid BOOLEAN)")
        conn.executemany("INSERT INTO catalogue VALUES (?, ?, ?, ?)",
                         [(i, d, comparison_key(d), True) for i, d in enumerate(dois)])
        conn.commit()


# -- the simulator in another process -------------------------------------------------------
def start_simulator(args: argparse.Namespace, records: Path, log: Path
                    ) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "airflow_doi", "simulator", "--records", str(records),
             "--rate-limit", str(args.proxy_limit), "--agency-rate-limit",
             str(args.agency_limit), "--list-rate-limit", str(args.list_limit),
             "--latency", str(args.latency)],
            stdout=subprocess.PIPE, stderr=stderr, text=True,
        )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    process.stdout.readline()  # the metadata hosts
    export = process.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:") or "=" not in export:
        process.kill()
        raise SystemExit(f"simulator did not start: {url!r}\n{log.read_text()}")
    connection = json.loads(export.partition("=")[2].strip("'"))
    return process, connection


def simulator_stats(url: str, reset: bool = False) -> dict[str, Any]:
    if reset:
        urllib.request.urlopen(urllib.request.Request(f"{url}/_simulator/reset", method="POST"))
        return {}
    with urllib.request.urlopen(f"{url}/_simulator/stats") as response:
        return json.load(response)  # type: ignore[no-any-return]


# -- the child --------------------------------------------------------------------------------
def child_env(database: Path, connection: dict[str, Any], args: argparse.Namespace,
              source: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    env["AIRFLOW_CONN_BENCH_CAT"] = json.dumps({"conn_type": "sqlite", "host": str(database)})
    extra = {**connection["extra"], "rate": args.proxy_limit, "agency_rate": args.agency_limit,
             "concurrency": args.concurrency, "source": source,
             # Twice the servers' limit: the first answer's announcement must slow it down.
             "list_rate": 2 * args.list_limit, "list_concurrency": 2,
             "list_size": args.list_size}
    env["AIRFLOW_CONN_DOI_PROXY_DEFAULT"] = json.dumps({**connection, "extra": extra})
    return env


def run_child(database: Path, env: dict[str, str], batch_size: int, name: str,
              total: int, kill_at_half: bool = False) -> dict[str, Any]:
    """Run the enrich child to the end (or kill it once half the keys are stored), polling
    its RSS and the rows stored; its summary and the samples."""
    out, err = database.with_suffix(f".{name}.out"), database.with_suffix(f".{name}.err")
    started = time.perf_counter()
    with open(out, "w") as stdout, open(err, "w") as stderr:
        process = subprocess.Popen([sys.executable, "-c", ENRICHER, str(batch_size)], env=env,
                                   stdout=stdout, stderr=stderr, text=True)
    samples: list[tuple[float, int, int]] = []  # (seconds, stored rows, VmRSS KiB)
    while process.poll() is None:
        rss = vm_kib(process.pid)
        stored = stored_count(database)
        if rss is not None:
            samples.append((time.perf_counter() - started, stored, rss))
        if kill_at_half and stored >= total / 2:
            process.send_signal(signal.SIGKILL)
            process.wait()  # reaped: its PID is gone, so its claims are free at once
            return {"killed": True, "samples": samples}
        time.sleep(0.2 if kill_at_half else 0.5)
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"enrich child failed ({process.returncode}):\n"
                         f"{err.read_text()[-3000:]}")
    lines = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    if kill_at_half:
        raise SystemExit("the child finished before it could be killed: use more keys")
    return {"start": lines[0], "summary": lines[1], "wall": wall, "samples": samples}


def vm_kib(pid: int, field: str = "VmRSS") -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def stored_count(database: Path) -> int:
    """Rows of ``doi_metadata`` (0 before the child creates it); a read-only look."""
    try:
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM doi_metadata").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def stored_rows(database: Path, columns: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)) as conn:
        return conn.execute(f"SELECT {columns} FROM doi_metadata ORDER BY doi_key").fetchall()


def enrich(workdir: Path, name: str, dois: dict[str, str], connection: dict[str, Any],
           args: argparse.Namespace, source: str) -> dict[str, Any]:
    """One enrichment of ``dois`` through the child; the simulator's counts beside it."""
    database = workdir / f"{name}.sqlite"
    build_catalogue(database, list(dois))
    url = connection["host"]
    simulator_stats(url, reset=True)
    run = run_child(database, child_env(database, connection, args, source), args.batch_size,
                    name, len(dois))
    run.update(served=simulator_stats(url), database=database, keys=len(dois))
    return run


def rate(run: dict[str, Any]) -> float:
    summary = run["summary"]
    return float(summary["stored_keys"]) / float(summary["elapsed_seconds"])


def check_sample(database: Path, works: dict[str, str], size: int) -> tuple[int, int, list[str]]:
    """``(matching, checked, first mismatches)``: stored rows against the simulator's works
    (typed columns equal, or ``no_metadata`` where the agency has no CSL-JSON)."""
    from airflow_doi.metadata.csl import FIELDS
    from airflow_doi.resolver.agencies import expected_metadata, work_from_record

    rows = stored_rows(database, f"doi, metadata_status, metadata_source, {', '.join(FIELDS)}")
    sample = random.Random(33).sample(rows, min(size, len(rows)))
    matching, wrong = 0, list[str]()
    agency_of = {d.upper(): a for d, a in works.items()}
    for doi, status, _, *values in sample:
        agency = agency_of[doi.upper()]
        expected = expected_metadata(work_from_record(registered_form(doi, agency),
                                                      {"agency": agency}))
        got = dict(zip(FIELDS, values, strict=True))
        if (status == "no_metadata" and expected is None) or (status == "ok" and got == expected):
            matching += 1
        elif len(wrong) < 3:
            wrong.append(f"{doi}: {status} {got} != {expected}")
    return matching, len(sample), wrong


def vocabulary(database: Path) -> dict[str, Any]:
    """Whether every stored ``csl_type`` is one of CSL's, and every ok row has its
    ``registry_type`` (issue 40, acceptance 4)."""
    from airflow_doi.metadata.csl import CSL_TYPES

    rows = [r for r in stored_rows(database, "metadata_status, csl_type, registry_type")
            if r[0] == "ok"]
    types = {csl for _, csl, _ in rows if csl is not None}
    return {"ok": len(rows), "types": len(types), "not_csl": types - CSL_TYPES,
            "no_registry_type": sum(1 for _, _, registry in rows if registry is None)}


# -- kill and resume (the simulator in this process: its per-key counts) --------------------
def kill_and_resume(workdir: Path, dois: dict[str, str], args: argparse.Namespace
                    ) -> dict[str, Any]:
    from airflow_doi.resolver.simulator import ProxySimulator

    database = workdir / "resume.sqlite"
    build_catalogue(database, list(dois))
    records = {registered_form(doi, agency): {"agency": agency} for doi, agency in dois.items()}
    with ProxySimulator(records, rate_limit=args.proxy_limit, latency=args.latency,
                        agency_rate_limit=args.agency_limit,
                        list_rate_limit=args.list_limit) as sim:
        connection = {"conn_type": "doi_proxy", "host": sim.url, "extra": {
            "metadata_hosts": ",".join(sim.metadata_hosts), "crossref_url": sim.crossref_url,
            "datacite_url": sim.datacite_url}}
        env = child_env(database, connection, args, "auto")
        run_child(database, env, args.batch_size, "killed", len(dois), kill_at_half=True)
        first = Counter(sim.list_dois_by_key) + Counter(sim.cn_by_key)
        before = dict(stored_rows(database, "doi_key, fetched_at"))
        sim.reset_counts()
        resumed = run_child(database, env, args.batch_size, "resumed", len(dois))["summary"]
        second = Counter(sim.list_dois_by_key) + Counter(sim.cn_by_key)
    after = dict(stored_rows(database, "doi_key, fetched_at"))
    in_flight = set(first) - set(before)  # asked by the killed child, never stored
    return {
        "total": len(dois), "stored_at_kill": len(before), "due": resumed["due_keys"],
        "in_flight": len(in_flight), "asked": len(second),
        "asked_again": sum(1 for key in before if second[key]),
        "in_flight_again": sum(1 for key in in_flight if second[key]),
        "rewritten": sum(1 for key, stamp in before.items() if after.get(key) != stamp),
        "stored_end": len(after),
    }


def mib(kib: int | None) -> str:
    return "?" if kib is None else f"{kib / 1024:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000, help="the whole catalogue")
    parser.add_argument("--batch-keys", type=int, default=20_000,
                        help="Crossref and DataCite keys of the batch sources alone")
    parser.add_argument("--baseline-keys", type=int, default=1_500,
                        help="Crossref and DataCite keys of negotiation alone")
    parser.add_argument("--resume-keys", type=int, default=20_000)
    parser.add_argument("--proxy-limit", type=float, default=40.0)
    parser.add_argument("--agency-limit", type=float, default=20.0)
    parser.add_argument("--list-limit", type=float, default=10.0)
    parser.add_argument("--list-size", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.01)
    parser.add_argument("--batch-size", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sample", type=int, default=300, help="stored rows checked")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="airflow-doi-bench-enrich-"))
    whole = catalogue_dois(args.keys, "Whole")
    two = {d: a for d, a in catalogue_dois(args.batch_keys * 2, "Batch").items()
           if a in ("crossref", "datacite")}
    batch = dict(list(two.items())[:args.batch_keys])
    baseline = dict(list(two.items())[:args.baseline_keys])
    records = workdir / "records.json"
    records.write_text(json.dumps({registered_form(d, a): {"agency": a} for part in (whole, two)
                                   for d, a in part.items()}), encoding="utf-8")
    print(f"{args.keys:,} keys: " + ", ".join(f"{a} {s:.0%}" for a, s in SHARES.items())
          + f"; limits: proxy {args.proxy_limit:g}/s, each agency's single records "
          f"{args.agency_limit:g}/s, each batch API {args.list_limit:g} list queries a second "
          f"(the client told {2 * args.list_limit:g}/s), {args.list_size} DOIs a query; "
          f"latency {args.latency * 1000:g} ms; batch {args.batch_size}", flush=True)
    simulator, connection = start_simulator(args, records, workdir / "simulator.err")
    try:
        negotiated = enrich(workdir, "baseline", baseline, connection, args, "negotiation")
        print(f"negotiation alone: {rate(negotiated):.1f} keys/s", flush=True)
        batched = enrich(workdir, "batch", batch, connection, args, "auto")
        print(f"batch sources alone: {rate(batched):.1f} keys/s", flush=True)
        everything = enrich(workdir, "whole", whole, connection, args, "auto")
        print(f"whole catalogue: {rate(everything):.1f} keys/s", flush=True)
    finally:
        simulator.terminate()
        simulator.wait(10)
    matching, checked, wrong = check_sample(everything["database"], whole, args.sample)
    resume = kill_and_resume(workdir, dict(list(whole.items())[:args.resume_keys]), args)
    failures = report(args, negotiated, batched, everything, (matching, checked, wrong), resume)
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


def report(args: argparse.Namespace, negotiated: dict[str, Any], batched: dict[str, Any],
           everything: dict[str, Any], sample: tuple[int, int, list[str]],
           resume: dict[str, Any]) -> list[str]:
    base = rate(negotiated)
    rows: list[tuple[str, str, str]] = []

    def add(name: str, value: str, note: str = "") -> None:
        rows.append((name, value, note))

    failures: list[str] = []

    def per_source(run: dict[str, Any], label: str) -> None:
        summary, served = run["summary"], run["served"]
        by_source = summary.get("by_source", {})
        add(f"{label}: keys/s", f"{rate(run):.1f}",
            f"{summary['stored_keys']:,} keys in {summary['elapsed_seconds']:.1f} s; "
            f"{rate(run) / base:.1f}x negotiation alone")
        for name, count in by_source.items():
            keys = count["keys"]
            per_key = f"{count['requests'] / keys:.3f} requests a key" if keys else ""
            add(f"  {name}", f"{keys:,} keys",
                f"{count['requests']:,} requests; {per_key}".rstrip("; "))
        listed = sum(served["list_requests"].values())
        batch_keys = sum(by_source.get(n, {}).get("keys", 0) for n in ("crossref", "datacite"))
        if batch_keys:
            add("  list queries a Crossref/DataCite key",
                f"{listed / batch_keys:.4f}", "goal: at most 0.05")
            if listed / batch_keys > 0.05:
                failures.append(f"{label}: {listed / batch_keys:.4f} list queries a key")
        if served["list_over_announced"]:
            failures.append(f"{label}: {served['list_over_announced']} queries over an "
                            "announced limit")
        add("  429s received", f"{served['throttled'] + served['agency_throttled']:,} + "
            f"{served['list_throttled']:,}", "proxy and agencies' single records + list queries")
        add("  queries over an announced limit", f"{served['list_over_announced']}",
            "goal: 0")

    summary = negotiated["summary"]
    add("negotiation alone: keys/s", f"{base:.1f}",
        f"{summary['stored_keys']:,} Crossref/DataCite keys in "
        f"{summary['elapsed_seconds']:.1f} s, {summary['requests']:,} requests "
        f"({summary['requests'] / summary['stored_keys']:.2f} a key)")
    per_source(batched, "batch sources alone")
    add("  batch sources alone / negotiation alone", f"{rate(batched) / base:.1f}x",
        "goal: at least 20x")
    if rate(batched) / base < 20:
        failures.append(f"batch sources alone: {rate(batched) / base:.1f}x negotiation alone")
    negotiated_keys = batched["summary"].get("by_source", {}).get("negotiation", {}).get(
        "keys", 0)
    add("  keys the batch APIs left to negotiation", f"{negotiated_keys:,}",
        "goal: 0 (half the DataCite keys written in lower case; DataCite's index is "
        "case-sensitive)")
    if negotiated_keys:
        failures.append(f"batch sources alone: {negotiated_keys} keys negotiated")
    per_source(everything, "whole catalogue")
    samples = everything["samples"]
    total = everything["keys"]

    def rss_at(share: float) -> int | None:
        return next((rss for _, stored, rss in samples if stored >= share * total), None)

    end = everything["summary"]
    rss = [rss_at(0.10), rss_at(0.20), rss_at(0.50), end["end_rss_kib"]]
    start = everything["start"]["start_rss_kib"]
    add("  RSS at 10/20/50/100% of the keys", "/".join(mib(r) for r in rss) + " MiB",
        f"peak {mib(end['peak_rss_kib'])} MiB; after imports {mib(start)} MiB")
    if rss[1] is not None:
        add("  RSS growth 20% -> 100%", f"{(rss[3] - rss[1]) / 1024:+.1f} MiB",
            f"{(rss[3] - rss[1]) / (0.8 * total / 1000):+.1f} KiB per 1,000 keys")
    matching, checked, wrong = sample
    add("  stored rows equal to the works", f"{matching}", f"of {checked} checked")
    types = vocabulary(everything["database"])
    add("  csl_type values not CSL's", f"{len(types['not_csl'])}",
        f"{types['types']} types over {types['ok']:,} ok rows (goal: 0) "
        f"{sorted(types['not_csl'])[:5]}")
    add("  ok rows without registry_type", f"{types['no_registry_type']:,}", "goal: 0")
    if types["not_csl"] or types["no_registry_type"]:
        failures.append(f"type vocabulary: {types}")
    add("kill: stored when killed", f"{resume['stored_at_kill']:,}",
        f"of {resume['total']:,}; {resume['in_flight']:,} keys in flight (asked, unstored)")
    add("resume: due keys", f"{resume['due']:,}",
        f"= {resume['total']:,} - {resume['stored_at_kill']:,}: "
        f"{resume['due'] == resume['total'] - resume['stored_at_kill']}")
    add("resume: keys asked", f"{resume['asked']:,}",
        f"{resume['in_flight_again']:,} of the {resume['in_flight']:,} in flight")
    add("asked again after the kill", f"{resume['asked_again']:,}",
        f"of {resume['stored_at_kill']:,} stored before it (goal: 0); rows rewritten "
        f"{resume['rewritten']:,}")
    add("resume: keys stored at the end", f"{resume['stored_end']:,}", f"of {resume['total']:,}")
    print()
    for name, value, note in rows:
        print(f"{name:<44} {value:>16}  {note}")
    for line in wrong:
        print(f"  mismatch: {line}")
    if wrong:
        failures.append(f"{len(wrong)} stored rows differ from the works")
    if resume["asked_again"]:
        failures.append(f"{resume['asked_again']} keys stored before the kill asked again")
    return failures


if __name__ == "__main__":
    sys.exit(main())
