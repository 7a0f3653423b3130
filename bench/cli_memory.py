"""Peak memory of ``airflow-doi normalize`` on a large CSV (acceptance: < 1 GiB for 1M rows).

Usage: ``python bench/cli_memory.py [--rows N] [--chunk-size N] [--keep]``

Generates a CSV of messy DOI cells (the mix of ``bench/normalize.py``) with an id and a title
column, runs the CLI on it in a child process and reports the child's peak resident set size
(``getrusage(RUSAGE_CHILDREN).ru_maxrss``), the wall time and the output size. The input is
written row by row, so this process stays small and cannot inflate the child's figure.
"""

from __future__ import annotations

import argparse
import csv
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from normalize import iter_values  # the sibling benchmark's value generator

LIMIT_MIB = 1024


def write_input(path: Path, rows: int, seed: int) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "title", "doi"])
        for i, value in enumerate(iter_values(rows, seed)):
            cell = "" if value is None else value
            writer.writerow([f"{i:08d}", f"Title {i}, part {i % 7}", cell])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=20240501)
    parser.add_argument("--chunk-size", type=int, default=None, help="passed to the CLI")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    args = parser.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="airflow-doi-bench-"))
    source, target = folder / "input.csv", folder / "output.csv"
    write_input(source, args.rows, args.seed)
    command = [
        sys.executable, "-m", "airflow_doi", "normalize", str(source),
        "--column", "doi", "--prefix", "norm_", "--output", str(target),
    ]
    if args.chunk_size:
        command += ["--chunk-size", str(args.chunk_size)]
    start = time.perf_counter()
    run = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux

    print(f"rows:            {args.rows:,}")
    print(f"input:           {source.stat().st_size / 2**20:,.1f} MiB CSV")
    if run.returncode != 0:
        print(f"CLI failed ({run.returncode}): {run.stderr}")
        return 1
    print(f"output:          {target.stat().st_size / 2**20:,.1f} MiB CSV")
    print(f"wall time:       {elapsed:,.1f} s ({args.rows / elapsed:,.0f} rows/s)")
    print(f"peak RSS (CLI):  {peak_mib:,.0f} MiB (limit {LIMIT_MIB:,} MiB)")
    print(f"CLI summary:     {run.stderr.strip()}")
    if not args.keep:
        source.unlink()
        target.unlink()
        folder.rmdir()
    else:
        print(f"files kept in    {folder}")
    return 0 if peak_mib < LIMIT_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
