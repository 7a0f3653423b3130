"""Acceptance 3 of the Airflow provider: a 100,000-row catalogue with 30% duplicate keys.

Builds the catalogue in a DuckDB file (70,000 distinct DOIs, 30,000 more rows that repeat
them in other presentation forms and cases), then runs the DAG's operators on it, in this
process, exactly as the tasks do: DoiNormalizeOperator, DoiValidateOperator and
DoiResolveOperator against the proxy simulator running in *another* process (so its
counting does not share the GIL). Reports:

* requests counted at the simulator vs distinct valid keys (must be equal, and 1 per key);
* peak RSS of this process after the operators (must stay under 1 GiB);
* the request rate: overall, and the busiest 1-second window from the simulator's arrival
  times, against the configured rate;
* throughput against a baseline run in the same process: ``airflow_doi.resolver.resolve`` on the
  distinct DOIs held in memory (no database, no paging), at the same rate.

    .venv/bin/python bench/airflow_resolve.py [--rows 100000] [--rate 1000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-doi-bench-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_catalogue(path: Path, rows: int, duplicate_share: float) -> int:
    """Write the catalogue; return its number of distinct keys."""
    import random

    import duckdb
    import pyarrow as pa

    distinct = round(rows * (1 - duplicate_share))
    dois = [f"10.5555/Bench.{i:07d}" for i in range(distinct)]
    rng = random.Random(84)
    forms = [
        lambda d: d.lower(),
        lambda d: "https://doi.org/" + d,
        lambda d: "doi:" + d.replace("Bench", "BENCH"),
        lambda d: f"  urn:doi:{d.replace('/', ':', 1)}  ",
    ]
    raw = dois + [rng.choice(forms)(rng.choice(dois)) for _ in range(rows - distinct)]
    rng.shuffle(raw)
    rows_table = pa.table({"record_id": list(range(rows)), "doi_raw": raw})
    with duckdb.connect(str(path)) as conn:
        conn.register("rows_table", rows_table)
        conn.execute("CREATE TABLE catalogue AS SELECT * FROM rows_table")
    return distinct


def start_simulator() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "airflow_doi", "simulator", "--auto-records"],
        stdout=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        process.kill()
        raise SystemExit(f"simulator did not start: {url!r}")
    return process, url


def simulator_stats(url: str, reset: bool = False) -> dict:
    if reset:
        urllib.request.urlopen(urllib.request.Request(f"{url}/_simulator/reset", method="POST"))
        return {}
    with urllib.request.urlopen(f"{url}/_simulator/stats?times=1") as response:
        return json.load(response)


def busiest_second(times: list[float]) -> int:
    """Most arrivals in any 1-second window (two pointers over the sorted times)."""
    times = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= 1.0:
            start += 1
        best = max(best, end - start + 1)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--duplicates", type=float, default=0.30)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=2000)
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="airflow-doi-bench-"))
    path = workdir / "catalogue.duckdb"
    t0 = time.perf_counter()
    distinct = build_catalogue(path, args.rows, args.duplicates)
    print(f"catalogue: {args.rows} rows, {distinct} distinct keys "
          f"({args.duplicates:.0%} duplicates) in {time.perf_counter() - t0:.1f}s")

    simulator, url = start_simulator()
    try:
        os.environ["AIRFLOW_CONN_BENCH_DB"] = json.dumps({"conn_type": "duckdb", "host": str(path)})
        os.environ["AIRFLOW_CONN_DOI_PROXY_DEFAULT"] = json.dumps({
            "conn_type": "doi_proxy", "host": url,
            "extra": {"rate": args.rate, "concurrency": args.concurrency},
        })
        from airflow_doi.provider.operators.normalize import DoiNormalizeOperator
        from airflow_doi.provider.operators.resolve import DoiResolveOperator
        from airflow_doi.provider.operators.validate import DoiValidateOperator

        common = {"conn_id": "bench_db", "table": "catalogue"}
        rss_start = peak_rss_mib()
        t0 = time.perf_counter()
        DoiNormalizeOperator(task_id="normalize", doi_column="doi_raw", **common).execute({})
        t_normalize = time.perf_counter() - t0
        t0 = time.perf_counter()
        DoiValidateOperator(task_id="validate", doi_column="doi_raw", **common).execute({})
        t_validate = time.perf_counter() - t0
        simulator_stats(url, reset=True)
        t0 = time.perf_counter()
        summary = DoiResolveOperator(task_id="resolve", batch_size=args.batch_size,
                                     **common).execute({})
        t_resolve = time.perf_counter() - t0
        rss_operators = peak_rss_mib()
        stats = simulator_stats(url)
        per_key = set(stats["by_key"].values())
        window = busiest_second(stats["times"])
        print(f"normalize: {args.rows / t_normalize:,.0f} rows/s ({t_normalize:.1f}s); "
              f"validate: {args.rows / t_validate:,.0f} rows/s ({t_validate:.1f}s)")
        print(f"resolve: {summary['stored_keys']} keys stored in {summary['batches']} batches, "
              f"{t_resolve:.1f}s, {summary['stored_keys'] / t_resolve:,.0f} keys/s")
        print(f"requests at the simulator: {stats['requests']} for {distinct} distinct valid "
              f"keys (requests per key: {sorted(per_key)}); exactly one each: "
              f"{stats['requests'] == distinct and per_key == {1}}")
        print(f"rate: configured {args.rate:.0f}/s; mean {stats['requests'] / t_resolve:,.0f}/s;"
              f" busiest 1-s window {window} requests; within the rate: "
              f"{window <= args.rate + 1}")
        print(f"peak RSS: {rss_operators:,.0f} MiB after the operators "
              f"(process start {rss_start:,.0f} MiB); under 1 GiB: {rss_operators < 1024}")

        simulator_stats(url, reset=True)
        t0 = time.perf_counter()
        rerun = DoiResolveOperator(task_id="resolve", **common).execute({})
        print(f"re-run: {rerun['due_keys']} due keys, "
              f"{simulator_stats(url)['requests']} requests, {time.perf_counter() - t0:.2f}s")

        if not args.skip_baseline:
            from airflow_doi.resolver import resolve

            simulator_stats(url, reset=True)
            dois = [f"10.5555/baseline.{i:07d}" for i in range(distinct)]
            t0 = time.perf_counter()
            resolve(dois, base_url=url, rate=args.rate, concurrency=args.concurrency)
            t_base = time.perf_counter() - t0
            print(f"baseline (resolve() in memory, same rate): {distinct / t_base:,.0f} keys/s "
                  f"({t_base:.1f}s); operator/baseline throughput ratio "
                  f"{(summary['stored_keys'] / t_resolve) / (distinct / t_base):.2f}")
    finally:
        simulator.terminate()
        simulator.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
