"""Time and peak memory of ``airflow-doi normalize`` on a large CSV, native core vs fallback.

Usage: ``python bench/cli_memory.py [--rows N] [--chunk-size N] [--repeat N] [--keep]``

Generates a CSV of messy DOI cells (the mix of ``bench/normalize.py``) with an id and a title
column and runs the CLI on it in child processes, alternately with the native core and with
``AIRFLOW_DOI_NATIVE=0`` (the pure-Arrow path an install without a C compiler gets: the
baseline, measured in the same run). Reports each child's own peak resident set size
(``wait4``), the best wall time of ``--repeat`` runs, the output size and the speed-up.
Acceptance (issue #12): native at least 2x the fallback, peak RSS under 500 MiB. The input is
written row by row, so this process stays small and cannot inflate the children's figures.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from normalize import iter_values  # the sibling benchmark's value generator

LIMIT_MIB = 500
TARGET_SPEEDUP = 2.0


def write_input(path: Path, rows: int, seed: int) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "title", "doi"])
        for i, value in enumerate(iter_values(rows, seed)):
            cell = "" if value is None else value
            writer.writerow([f"{i:08d}", f"Title {i}, part {i % 7}", cell])


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


def run_cli(command: list[str], native: bool) -> tuple[float, float, subprocess.Popen[str]]:
    """One CLI run: (wall seconds, the child's own peak RSS in MiB, the finished process)."""
    env = dict(os.environ)
    env["AIRFLOW_DOI_NATIVE"] = "1" if native else "0"
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss / 1024, child  # ru_maxrss: KiB on Linux


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=20240501)
    parser.add_argument("--chunk-size", type=int, default=None, help="passed to the CLI")
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs for each engine")
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
    print(f"rows:            {args.rows:,} ({os.cpu_count()} CPUs, best of {args.repeat}, "
          f"load average {os.getloadavg()[0]:.1f})")
    print(f"input:           {source.stat().st_size / 2**20:,.1f} MiB CSV")
    best: dict[bool, tuple[float, float]] = {}
    outputs: dict[bool, str] = {}  # digests: holding the files would inflate the children's RSS
    for _ in range(args.repeat):
        for native in (True, False):
            target.unlink(missing_ok=True)  # freeing the last run's file is not this run's work
            elapsed, peak, child = run_cli(command, native)
            if child.returncode != 0:
                print(f"CLI failed ({child.returncode}): {child.stderr.read()}")  # type: ignore[union-attr]
                return 1
            outputs[native] = _digest(target)
            old = best.get(native)
            best[native] = (min(elapsed, old[0]) if old else elapsed,
                            max(peak, old[1]) if old else peak)
    print(f"output:          {target.stat().st_size / 2**20:,.1f} MiB CSV "
          f"({'identical' if outputs[True] == outputs[False] else 'DIFFERENT'} on both engines)")
    for native, label in ((True, "native core"), (False, "pure Arrow (fallback)")):
        elapsed, peak = best[native]
        print(f"{label:22s} {elapsed:7.2f} s ({args.rows / elapsed:12,.0f} rows/s)   "
              f"peak RSS {peak:6,.0f} MiB")
    speedup = best[False][0] / best[True][0]
    print(f"speed-up:        {speedup:.2f}x (target >= {TARGET_SPEEDUP}x); peak RSS limit "
          f"{LIMIT_MIB} MiB")
    if not args.keep:
        source.unlink()
        target.unlink()
        folder.rmdir()
    else:
        print(f"files kept in    {folder}")
    ok = outputs[True] == outputs[False] and best[True][1] < LIMIT_MIB
    return 0 if ok and speedup >= TARGET_SPEEDUP else 1


if __name__ == "__main__":
    sys.exit(main())
