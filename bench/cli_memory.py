"""Time and peak memory of ``airflow-doi normalize`` on a large CSV, native core vs fallback.

Usage: ``python bench/cli_memory.py [--rows N] [--chunk-size N] [--repeat N] [--keep]``

Generates a CSV of messy DOI cells (the mix of ``bench/normalize.py``) with an id and a title
column and runs the CLI on it in child processes, alternately with the native core and with
``AIRFLOW_DOI_NATIVE=0`` (the pure-Arrow path an install without a C compiler gets: the
baseline, measured in the same run). Reports each child's own peak resident set size
(``wait4``), the best wall time of ``--repeat`` runs, the output size and the speed-up.
Acceptance (issue #12): native at least 2x the fallback, peak RSS under 500 MiB. The input is
written row by row, so this process stays small and cannot inflate the children's figures.

``--against DIR`` also runs another checkout's CLI (``git worktree add DIR REV``, with its
native module built or copied in) in turn with this one, on the same file, and prints the
ratio of the two native figures (issue #21: at most 1.10 of the previous release's time).
``--input-dialect excel-de`` writes the input as a European Excel export instead: ``;``,
CRLF, Windows-1252, ``NA`` for a missing DOI.
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


def write_input(path: Path, rows: int, seed: int, dialect: str = "plain") -> None:
    excel = dialect == "excel-de"
    encoding = "cp1252" if excel else "utf-8"
    with path.open("w", newline="", encoding=encoding, errors="replace") as handle:
        writer = (csv.writer(handle, delimiter=";", lineterminator="\r\n") if excel
                  else csv.writer(handle))
        writer.writerow(["id", "title", "doi"])
        for i, value in enumerate(iter_values(rows, seed)):
            cell = ("NA" if excel else "") if value is None else value
            title = f"Universität {i}, Teil {i % 7}" if excel else f"Title {i}, part {i % 7}"
            writer.writerow([f"{i:08d}", title, cell])


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


def run_cli(
    command: list[str], native: bool, checkout: Path | None = None
) -> tuple[float, float, subprocess.Popen[str]]:
    """One CLI run: (wall seconds, the child's own peak RSS in MiB, the finished process);
    ``checkout``: another source tree's ``airflow_doi`` instead of the installed one."""
    env = dict(os.environ)
    env["AIRFLOW_DOI_NATIVE"] = "1" if native else "0"
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, cwd=checkout)
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
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="another checkout to time in turn (its native core built)")
    parser.add_argument("--input-dialect", choices=("plain", "excel-de"), default="plain")
    args = parser.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="airflow-doi-bench-"))
    source, target = folder / "input.csv", folder / "output.csv"
    write_input(source, args.rows, args.seed, args.input_dialect)
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
    against: list[float] = []
    ratios: list[float] = []
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
            if native and args.against is not None:
                target.unlink(missing_ok=True)
                other, _, child = run_cli(command, True, args.against)
                if child.returncode != 0:
                    print(f"--against CLI failed ({child.returncode}): "
                          f"{child.stderr.read()}")  # type: ignore[union-attr]
                    return 1
                against.append(other)
                ratios.append(elapsed / other)
    print(f"output:          {target.stat().st_size / 2**20:,.1f} MiB CSV "
          f"({'identical' if outputs[True] == outputs[False] else 'DIFFERENT'} on both engines)")
    for native, label in ((True, "native core"), (False, "pure Arrow (fallback)")):
        elapsed, peak = best[native]
        print(f"{label:22s} {elapsed:7.2f} s ({args.rows / elapsed:12,.0f} rows/s)   "
              f"peak RSS {peak:6,.0f} MiB")
    if against:
        ratios.sort()
        print(f"{'--against (native)':22s} {min(against):7.2f} s   this/that per pair: median "
              f"{ratios[len(ratios) // 2]:.2f} (min {ratios[0]:.2f}, max {ratios[-1]:.2f}); "
              f"best/best {best[True][0] / min(against):.2f}")
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
