"""Benchmark: ``airflow-doi report`` on a large messy CSV (acceptance: < 60 s, HTML < 5 MB).

Usage: ``python bench/report.py [--rows N] [--seed S] [--keep]``

Generates a CSV of messy DOI cells (the mix of ``bench/normalize.py``, with an id and a title
column, as ``bench/cli_memory.py`` writes it), then times :func:`airflow_doi.report.write_report`
on it: reading the column, every figure, the charts and the page. Prints the time and the
page's size, and fails when either is over its limit.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_memory import write_input  # the sibling benchmark's CSV writer

from airflow_doi.report import write_report

LIMIT_SECONDS = 60.0
LIMIT_BYTES = 5 * 1024 * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=20240501)
    parser.add_argument("--keep", action="store_true", help="keep the CSV and the page")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="airflow-doi-bench-report-"))
    source = workdir / "catalogue.csv"
    started = time.perf_counter()
    write_input(source, args.rows, args.seed)
    print(f"generated {args.rows:,} rows in {time.perf_counter() - started:.1f} s: {source}")

    started = time.perf_counter()
    page = write_report(workdir / "report.html", source, "doi")
    elapsed = time.perf_counter() - started
    size = page.stat().st_size
    print(f"report: {elapsed:.1f} s for {args.rows:,} rows ({args.rows / elapsed:,.0f} rows/s)")
    print(f"report: {size / 1024:,.0f} KiB: {page}")
    failed = []
    if elapsed >= LIMIT_SECONDS:
        failed.append(f"took {elapsed:.1f} s (limit {LIMIT_SECONDS:.0f} s)")
    if size >= LIMIT_BYTES:
        failed.append(f"page is {size:,} bytes (limit {LIMIT_BYTES:,})")
    if not args.keep:
        for path in (source, page):
            path.unlink()
        workdir.rmdir()
    for problem in failed:
        print(f"FAIL: {problem}")
    if not failed:
        print(f"PASS: under {LIMIT_SECONDS:.0f} s and {LIMIT_BYTES // 2**20} MiB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
