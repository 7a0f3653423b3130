"""Benchmark of the batch resolver against the local proxy simulator (issue 3, acceptance 1).

Three runs on the same simulator settings (50 ms latency, 40 requests/s token bucket):

* baseline: one request at a time, the way python-doi/habanero loop;
* clean: 600 distinct DOIs with ``rate=40``;
* faults: the same with a 500 every 17th request and a dropped connection every 29th.

Prints the achieved rate as a ratio of the limit, both as requests/s (what the limit
governs) and as DOIs/s (what a user waits for: retries cost request slots), the share of
throttled requests, whether every row is correct, and the speed-up over the sequential
baseline. No assertions on timing: read the ratios (targets: clean >= 0.90 with < 1 %
throttled; faults >= 0.85 with every row correct).

Resolver settings: ``rate`` equal to the limit, ``burst=4`` (the simulator's bucket holds a
quarter second, 10 requests, so timer lateness can be caught up without a 429),
``concurrency=8`` and ``backoff_base=0.25`` (a lone 500 from a healthy proxy is transient;
with the default 0.5 s the last retries' backoff tail costs a few percent on 600 DOIs).

    python bench/resolve.py [--dois 600] [--limit 40] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import time

from airflow_doi.resolver import ResolverConfig, ResolverStats, resolve
from airflow_doi.resolver.simulator import ProxySimulator, make_records, record_url


def _dois(count: int) -> list[str]:
    # A mix of plain and awkward suffixes, so the bench also exercises the encoding.
    odd = ["#", "?", "%", " ", "+", '"', "<>", "é", "/../"]
    return [f"10.5555/bench.{i}{odd[i % len(odd)] if i % 3 == 0 else ''}x" for i in range(count)]


def run(label: str, dois: list[str], config: ResolverConfig, **simulator: object) -> dict:
    with ProxySimulator(make_records(dois), **simulator) as sim:  # type: ignore[arg-type]
        stats = ResolverStats()
        started = time.perf_counter()
        results = resolve(dois, config=config.replace(base_url=sim.url), stats=stats)
        elapsed = time.perf_counter() - started
        served = sim.stats()
    correct = all(
        r.status == "resolved" and r.url == record_url(d)
        for r, d in zip(results, dois, strict=True)
    )
    return {
        "label": label,
        "rows": len(results),
        "elapsed": elapsed,
        "requests": served["requests"],
        "request_rate": served["requests"] / elapsed,
        "doi_rate": len(dois) / elapsed,
        "throttled": served["throttled"],
        "errors": served["errors"],
        "dropped": served["dropped"],
        "retries": stats.retries,
        "correct": correct,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dois", type=int, default=600)
    parser.add_argument("--baseline-dois", type=int, default=100)
    parser.add_argument("--limit", type=float, default=40.0)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    dois = _dois(args.dois)
    sim = {"latency": args.latency, "rate_limit": args.limit}
    fast = ResolverConfig(rate=args.limit, burst=4, concurrency=8, backoff_base=0.25)
    runs = [
        run(
            "baseline (sequential)",
            dois[: args.baseline_dois],
            fast.replace(concurrency=1, rate=1000.0),
            **sim,
        ),
        run("clean", dois, fast, **sim),
        run(
            "faults (500/17th, drop/29th)",
            dois,
            fast,
            **sim,
            faults={"error_every": 17, "drop_every": 29},
        ),
    ]
    baseline = runs[0]["doi_rate"]
    print(f"simulator: {args.latency * 1000:.0f} ms latency, {args.limit:g} req/s limit")
    for r in runs:
        print(
            f"{r['label']:<30} rows={r['rows']:<4} {r['elapsed']:6.2f}s "
            f"req/s={r['request_rate']:6.2f} ({r['request_rate'] / args.limit:5.1%} of limit) "
            f"DOI/s={r['doi_rate']:6.2f} ({r['doi_rate'] / args.limit:5.1%}) "
            f"throttled={r['throttled']} ({r['throttled'] / max(1, r['requests']):.2%}) "
            f"500s={r['errors']} drops={r['dropped']} retries={r['retries']} "
            f"correct={r['correct']} speed-up={r['doi_rate'] / baseline:4.1f}x"
        )


if __name__ == "__main__":
    main()
