"""DOI metadata enrichment at scale (issue 23, acceptance 3): rate, memory, kill and resume.

A SQLite catalogue of ``--keys`` distinct DOIs, already normalized (``doi``, ``doi_key``,
``doi_valid``, as DoiNormalizeOperator writes them), is enriched by ``DoiEnrichOperator``
(the engine ``enrich_due_keys``, batches of ``--batch-size``) in a *child* process, against
the proxy simulator serving content negotiation: each DOI costs two requests, the proxy's
(limited to ``--proxy-limit``/s) then its registration agency's (each agency limited to
``--agency-limit``/s; crossref holds about 65 % of the DOIs, datacite 20 %, medra 12 %,
nocn 3 %). The binding limit in keys/s is ``min(proxy limit, min over agencies of agency
limit / agency share)``, computed from the real shares of the bench's DOIs. The client is
configured at exactly those limits (connection extras ``rate`` and ``agency_rate``).

Three measurements, in one run:

* rate and memory: the simulator runs in a process of its own (``airflow-doi simulator``, so
  its counting does not share a GIL with anyone); the parent polls the child's VmRSS
  (``/proc/PID/status``) and the row count of ``doi_metadata`` (read-only, the file in WAL
  mode) every 0.5 s. Reports keys/s against the binding limit, requests/s per host against
  its limit, 429s seen by the proxy and the agencies, and RSS at 10 %, 20 %, 50 % and 100 %
  of the keys (flat: the growth from 20 % to 100 % does not scale with the keys). Then a
  sample of stored rows is checked column by column against the simulator's records;
* kill and resume: a fresh catalogue, the child is sent SIGKILL ``--kill-delay`` seconds
  after ``doi_metadata`` holds half the keys (default: a quarter of a batch's time at the
  binding limit, so a batch is in flight), then a new child runs to completion. The
  simulator runs in this process here (its per-key counters are not in its stats endpoint).
  Reports the keys asked by the second run, and how many of the keys stored before the kill
  were asked again (target 0); the keys of the batch in flight at the kill were never
  stored, so they are legitimately asked again (the dead process's claims are taken over at
  once: same host, its PID gone);
* baseline, same simulator, same limits: a naive sequential client (urllib, one DOI at a
  time, redirects followed by urllib, a 429 waited out per its Retry-After) on
  ``--baseline-keys`` other DOIs.

Targets (issue 23): achieved rate >= 90 % of the binding limit with ~0 throttled, RSS flat,
``asked again after the kill: 0``. No assertions on timing: read the table.

    .venv/bin/python bench/enrich.py [--keys 10000] [--proxy-limit 40] [--agency-limit 20]
        [--latency 0.01] [--batch-size 500] [--baseline-keys 200]

The default run takes ~12 minutes (two phases of ~5.5 min at ~31 keys/s). For a quick look:
``--keys 600 --proxy-limit 200 --agency-limit 100``.
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
import urllib.error
import urllib.request
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-doi-bench-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")

CSL = "application/vnd.citationstyles.csl+json"

#: The child: the operator as a task runs it, with its own RSS before and after.
ENRICHER = """
import json, resource, sys
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


def dois_for(count: int, stem: str) -> list[str]:
    return [f"10.5555/{stem}.{i:07d}" for i in range(count)]


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


def agency_shares(dois: list[str]) -> dict[str, float]:
    from airflow_doi.resolver.agencies import work_for

    counts = Counter(work_for(d).agency for d in dois)
    return {agency: n / len(dois) for agency, n in counts.most_common()}


def binding_limit(shares: dict[str, float], proxy_limit: float,
                  agency_limit: float) -> tuple[float, str]:
    """Keys/s the limits allow, and which host binds."""
    limits = {"proxy": proxy_limit} | {a: agency_limit / s for a, s in shares.items() if s}
    host = min(limits, key=limits.__getitem__)
    return limits[host], host


# -- the simulator in another process -------------------------------------------------------
def start_simulator(args: argparse.Namespace, log: Path
                    ) -> tuple[subprocess.Popen[str], str, list[str]]:
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "airflow_doi", "simulator", "--auto-records",
             "--rate-limit", str(args.proxy_limit), "--agency-rate-limit",
             str(args.agency_limit), "--latency", str(args.latency)],
            stdout=subprocess.PIPE, stderr=stderr, text=True,
        )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    hosts = process.stdout.readline().strip()
    process.stdout.readline()  # the export line
    if not url.startswith("http://127.0.0.1:") or not hosts.startswith("metadata hosts: "):
        process.kill()
        raise SystemExit(f"simulator did not start: {url!r} {hosts!r}\n{log.read_text()}")
    return process, url, hosts.removeprefix("metadata hosts: ").split(",")


def simulator_stats(url: str, reset: bool = False) -> dict[str, Any]:
    if reset:
        urllib.request.urlopen(urllib.request.Request(f"{url}/_simulator/reset", method="POST"))
        return {}
    with urllib.request.urlopen(f"{url}/_simulator/stats") as response:
        return json.load(response)  # type: ignore[no-any-return]


# -- the child --------------------------------------------------------------------------------
def child_env(database: Path, url: str, hosts: list[str], args: argparse.Namespace) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    env["AIRFLOW_CONN_BENCH_CAT"] = json.dumps({"conn_type": "sqlite", "host": str(database)})
    env["AIRFLOW_CONN_DOI_PROXY_DEFAULT"] = json.dumps({
        "conn_type": "doi_proxy", "host": url,
        "extra": {"rate": args.proxy_limit, "agency_rate": args.agency_limit,
                  "concurrency": args.concurrency, "metadata_hosts": ",".join(hosts)},
    })
    return env


def start_child(database: Path, env: dict, batch_size: int, name: str
                ) -> tuple[subprocess.Popen[str], Path, Path]:
    out, err = database.with_suffix(f".{name}.out"), database.with_suffix(f".{name}.err")
    with open(out, "w") as stdout, open(err, "w") as stderr:
        process = subprocess.Popen([sys.executable, "-c", ENRICHER, str(batch_size)], env=env,
                                   stdout=stdout, stderr=stderr, text=True)
    return process, out, err


def child_lines(process: subprocess.Popen[str], out: Path, err: Path) -> list[dict[str, Any]]:
    if process.returncode != 0:
        raise SystemExit(f"enrich child failed ({process.returncode}):\n"
                         f"{err.read_text()[-3000:]}")
    return [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]


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


# -- phase 1: rate and memory -----------------------------------------------------------------
def rate_and_memory(workdir: Path, dois: list[str], url: str, hosts: list[str],
                    args: argparse.Namespace) -> dict[str, Any]:
    database = workdir / "rate.sqlite"
    build_catalogue(database, dois)
    simulator_stats(url, reset=True)
    started = time.perf_counter()
    process, out, err = start_child(database, child_env(database, url, hosts, args),
                                    args.batch_size, "rate")
    samples: list[tuple[float, int, int]] = []  # (seconds, stored rows, VmRSS KiB)
    while process.poll() is None:
        rss = vm_kib(process.pid)
        if rss is not None:
            samples.append((time.perf_counter() - started, stored_count(database), rss))
        time.sleep(0.5)
    wall = time.perf_counter() - started
    served = simulator_stats(url)
    start_line, summary = child_lines(process, out, err)[:2]
    total = len(dois)

    def rss_at(share: float) -> int | None:
        return next((rss for _, stored, rss in samples if stored >= share * total), None)

    return {"database": database, "summary": summary, "served": served, "wall": wall,
            "rss": {"start": start_line["start_rss_kib"], "10%": rss_at(0.10),
                    "20%": rss_at(0.20), "50%": rss_at(0.50),
                    "100%": summary["end_rss_kib"], "peak": summary["peak_rss_kib"]},
            "samples": len(samples)}


def check_sample(database: Path, size: int) -> tuple[int, int, list[str]]:
    """``(matching, checked, first mismatches)``: stored rows against the simulator's records
    (typed columns equal, or ``no_metadata`` where the agency has no CSL-JSON)."""
    from airflow_doi.metadata.csl import FIELDS
    from airflow_doi.resolver.simulator import ProxySimulator

    reference = ProxySimulator(auto_records=True)  # never started: its records only
    rows = stored_rows(database, f"doi, metadata_status, {', '.join(FIELDS)}")
    sample = random.Random(23).sample(rows, min(size, len(rows)))
    matching, wrong = 0, []
    for doi, status, *values in sample:
        expected = reference.expected_metadata(doi)
        got = dict(zip(FIELDS, values, strict=True))
        if (status == "no_metadata" and expected is None) or (status == "ok" and got == expected):
            matching += 1
        elif len(wrong) < 3:
            wrong.append(f"{doi}: {status} {got} != {expected}")
    return matching, len(sample), wrong


# -- phase 2: kill and resume -----------------------------------------------------------------
def kill_and_resume(workdir: Path, dois: list[str], args: argparse.Namespace) -> dict[str, Any]:
    from airflow_doi.resolver.simulator import ProxySimulator

    database = workdir / "resume.sqlite"
    build_catalogue(database, dois)
    total = len(dois)
    with ProxySimulator(auto_records=True, rate_limit=args.proxy_limit,
                        agency_rate_limit=args.agency_limit, latency=args.latency) as sim:
        env = child_env(database, sim.url, list(sim.metadata_hosts), args)
        process, _, _ = start_child(database, env, args.batch_size, "killed")
        half_at = None
        while process.poll() is None:
            if half_at is None and stored_count(database) >= total / 2:
                half_at = time.perf_counter()
            if half_at is not None and time.perf_counter() - half_at >= args.kill_delay:
                break
            time.sleep(0.1)
        if process.poll() is not None:
            raise SystemExit("the child finished before it could be killed: use more --keys")
        process.send_signal(signal.SIGKILL)
        process.wait()  # reaped: its PID is gone, so its claims are free at once
        first_asked = Counter(sim.cn_by_key)
        before = dict(stored_rows(database, "doi_key, fetched_at"))
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
            claimed = conn.execute("SELECT COUNT(*) FROM doi_metadata_claims").fetchone()[0]
        sim.reset_counts()
        started = time.perf_counter()
        process, out, err = start_child(database, env, args.batch_size, "resumed")
        process.wait()
        resumed = child_lines(process, out, err)[1]
        elapsed = time.perf_counter() - started
        second_asked = Counter(sim.cn_by_key)
        second_throttled = sim.throttled + sim.agency_throttled
    after = dict(stored_rows(database, "doi_key, fetched_at"))
    in_flight = set(first_asked) - set(before)  # asked by the killed child, never stored
    return {
        "stored_at_kill": len(before),
        "claims_at_kill": claimed,
        "asked_before_kill": len(first_asked),
        "in_flight": len(in_flight),
        "due": resumed["due_keys"],
        "asked": len(second_asked),
        "requests": sum(second_asked.values()),
        "asked_twice": sum(1 for n in second_asked.values() if n > 1),
        "asked_again": sum(1 for k in before if second_asked[k]),
        "in_flight_again": sum(1 for k in in_flight if second_asked[k]),
        "rewritten": sum(1 for k, stamp in before.items() if after.get(k) != stamp),
        "stored_end": len(after),
        "total": total,
        "waited_for": resumed["waited_for"],
        "throttled": second_throttled,
        "elapsed": elapsed,
    }


# -- baseline: a naive sequential client ------------------------------------------------------
def naive_fetch(url: str, doi: str) -> tuple[str, int]:
    """One DOI, the simple way: GET with the CSL Accept header, urllib follows the redirect;
    a 429 (from either host) is waited out and the whole thing asked again."""
    throttled = 0
    while True:
        request = urllib.request.Request(f"{url}/{quote(doi, safe='/')}",
                                         headers={"Accept": CSL})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                json.loads(response.read())
                return "ok", throttled
        except urllib.error.HTTPError as error:
            if error.code == 429:
                throttled += 1
                time.sleep(float(error.headers.get("Retry-After") or 1))
                continue
            if error.code in (404, 406):
                return "no_metadata" if error.code == 406 else "not_found", throttled
            raise


def baseline(url: str, dois: list[str]) -> dict[str, Any]:
    simulator_stats(url, reset=True)
    started = time.perf_counter()
    statuses: Counter[str] = Counter()
    throttled = 0
    for doi in dois:
        status, waited = naive_fetch(url, doi)
        statuses[status] += 1
        throttled += waited
    elapsed = time.perf_counter() - started
    served = simulator_stats(url)
    return {"elapsed": elapsed, "rate": len(dois) / elapsed, "statuses": dict(statuses),
            "throttled": served["throttled"] + served["agency_throttled"]}


def mib(kib: int | None) -> str:
    return "    ?" if kib is None else f"{kib / 1024:5.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--proxy-limit", type=float, default=40.0)
    parser.add_argument("--agency-limit", type=float, default=20.0)
    parser.add_argument("--latency", type=float, default=0.01)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--baseline-keys", type=int, default=200)
    parser.add_argument("--kill-delay", type=float,
                        help="seconds after half the keys are stored before the SIGKILL "
                        "(default: a quarter of a batch's time at the binding limit)")
    parser.add_argument("--sample", type=int, default=200, help="stored rows checked")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="airflow-doi-bench-enrich-"))
    dois = dois_for(args.keys, "Enrich")
    shares = agency_shares(dois)
    limit, binds = binding_limit(shares, args.proxy_limit, args.agency_limit)
    print(f"{args.keys} keys; agency shares: "
          + ", ".join(f"{a} {s:.1%}" for a, s in shares.items())
          + f"; limits: proxy {args.proxy_limit:g}/s, each agency {args.agency_limit:g}/s; "
          f"binding limit {limit:.2f} keys/s ({binds}); simulator latency "
          f"{args.latency * 1000:g} ms; batch {args.batch_size}, concurrency {args.concurrency}")

    if args.kill_delay is None:
        args.kill_delay = 0.25 * args.batch_size / limit
    simulator, url, hosts = start_simulator(args, workdir / "simulator.err")
    try:
        base = baseline(url, dois_for(args.baseline_keys, "Baseline"))
        rate = rate_and_memory(workdir, dois, url, hosts, args)
    finally:
        simulator.terminate()
        simulator.wait(10)
    matching, checked, wrong = check_sample(rate["database"], args.sample)
    resume = kill_and_resume(workdir, dois, args)

    summary, served, rss = rate["summary"], rate["served"], rate["rss"]
    elapsed = summary["elapsed_seconds"]
    achieved = summary["stored_keys"] / elapsed
    agency = served["agency_requests"]
    print()
    print(f"{'measure':<40} {'value':>20}  notes")
    rows: list[tuple[str, str, str]] = [
        ("baseline: naive sequential client",
         f"{base['rate']:8.2f} keys/s",
         f"{args.baseline_keys} keys in {base['elapsed']:.1f}s, {base['throttled']} x 429, "
         + ", ".join(f"{k}={v}" for k, v in sorted(base["statuses"].items()))),
        ("enrich: keys stored",
         f"{summary['stored_keys']:>14}",
         f"of {args.keys}; {summary['batches']} batches; "
         + ", ".join(f"{k}={v}" for k, v in sorted(summary["by_status"].items()))),
        ("enrich: achieved rate (engine time)",
         f"{achieved:8.2f} keys/s",
         f"{achieved / limit:.1%} of the binding limit {limit:.2f} ({elapsed:.1f}s); "
         f"speed-up over baseline {achieved / base['rate']:.1f}x"),
        ("enrich: rate incl. process start",
         f"{summary['stored_keys'] / rate['wall']:8.2f} keys/s",
         f"{summary['stored_keys'] / rate['wall'] / limit:.1%} of the binding limit "
         f"({rate['wall']:.1f}s wall)"),
        ("proxy requests/s",
         f"{served['cn_requests'] / elapsed:8.2f} req/s",
         f"{served['cn_requests'] / elapsed / args.proxy_limit:.1%} of {args.proxy_limit:g}; "
         f"{served['cn_requests']} requests, {served['throttled']} x 429"),
    ]
    for name in shares:
        count = agency.get(name, 0)
        rows.append((f"agency {name} requests/s", f"{count / elapsed:8.2f} req/s",
                     f"{count / elapsed / args.agency_limit:.1%} of {args.agency_limit:g}; "
                     f"{count} requests"))
    rows += [
        ("throttled (429) proxy + agencies",
         f"{served['throttled'] + served['agency_throttled']:>14}",
         f"{(served['throttled'] + served['agency_throttled']) / max(1, served['cn_requests'] + sum(agency.values())):.2%} of all requests; "  # noqa: E501
         f"engine retries {summary['retries']}"),
        ("RSS after imports", f"{mib(rss['start'])} MiB", "child process, before the first batch"),
        ("RSS at 10% / 20% / 50% / 100% of keys",
         f"{mib(rss['10%']).strip()}/{mib(rss['20%']).strip()}/{mib(rss['50%']).strip()}/"
         f"{mib(rss['100%']).strip()} MiB",
         f"peak {mib(rss['peak']).strip()} MiB; {rate['samples']} samples"),
        ("RSS growth 20% -> 100% of keys",
         "?" if rss["20%"] is None else f"{(rss['100%'] - rss['20%']) / 1024:+10.1f} MiB",
         "" if rss["20%"] is None else
         f"{(rss['100%'] - rss['20%']) / (0.8 * args.keys / 1000):+.0f} KiB per 1,000 keys"),
        ("sample rows equal to the records", f"{matching:>14}", f"of {checked} checked"),
        ("kill: stored when killed", f"{resume['stored_at_kill']:>14}",
         f"of {resume['total']}; {resume['asked_before_kill']} keys asked before the kill, "
         f"{resume['in_flight']} of them in flight (unstored), {resume['claims_at_kill']} "
         "claims left behind"),
        ("resume: due keys", f"{resume['due']:>14}",
         f"= {resume['total']} - {resume['stored_at_kill']} stored: "
         f"{resume['due'] == resume['total'] - resume['stored_at_kill']}"),
        ("resume: keys asked", f"{resume['asked']:>14}",
         f"{resume['requests']} proxy requests, {resume['asked_twice']} keys asked twice, "
         f"{resume['in_flight_again']} of the {resume['in_flight']} in flight asked again; "
         f"{resume['elapsed']:.1f}s, waited for {resume['waited_for']} claimed keys, "
         f"{resume['throttled']} x 429"),
        ("asked again after the kill", f"{resume['asked_again']:>14}",
         f"of {resume['stored_at_kill']} stored before it; rows rewritten "
         f"{resume['rewritten']}"),
        ("resume: keys stored at the end", f"{resume['stored_end']:>14}",
         f"of {resume['total']}"),
    ]
    for name, value, note in rows:
        print(f"{name:<40} {value:>20}  {note}")
    for line in wrong:
        print(f"  mismatch: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
