"""Benchmark: ``Series.doi.key()`` against ``idutils.normalize_doi`` on the same messy values.

Usage: ``python bench/normalize.py [--rows N] [--seed S] [--sample K]``

Both contenders get the same values in the same run: ours as a pandas Series of the default
string dtype; idutils per row, both as a bare Python loop over a list (the cheapest way to call
it) and through ``Series.map`` (like ours, Series in, Series out). idutils raises on anything it
does not recognise, so each call is wrapped in try/except. Timings are the best of ``--repeat``.
Ours is timed twice in the same run: on the native core (``airflow_doi.native._core``, built at
install time) and on the pure-Arrow fallback an install without a C compiler gets. Afterwards
a random sample of both engines' keys is checked against the scalar ``comparison_key``
(``None`` where it raises): any disagreement is printed and fails the run. Acceptance (issue
#12): native at least 20x the idutils loop, CPU-time ratio at least 10x.
"""

from __future__ import annotations

import argparse
import os
import random
import string
import sys
import time
from collections.abc import Callable, Iterator

import idutils
import pandas as pd

import airflow_doi.pandas  # noqa: F401  (registers Series.doi)
from airflow_doi import InvalidDoiError, comparison_key
from airflow_doi.native import arrow as native_arrow

TARGET_SPEEDUP, TARGET_CPU_RATIO = 20.0, 10.0

#: Share of each shape in the generated column: most real columns hold bare DOIs and doi.org
#: URLs; a few per cent are percent-encoded, wrapped in whitespace, or not DOIs at all.
MIX: tuple[tuple[str, float], ...] = (
    ("bare", 0.36),
    ("https", 0.22),
    ("http_dx", 0.06),
    ("doi_scheme", 0.10),
    ("whitespace", 0.08),
    ("upper_url", 0.03),
    ("percent_url", 0.05),
    ("info_or_handle", 0.02),
    ("non_ascii", 0.01),
    ("junk", 0.045),
    ("missing", 0.015),
)

REGISTRANTS = ("1000", "1002", "1016", "1038", "1093", "1103", "1371", "3390", "48550", "5281")
JUNK = (
    "", " ", "n/a", "N/A", "-", "none", "unknown", "TBD", "see notes", "doi:", "https://doi.org/",
    "10.1000", "10.abc/123", "11.1000/182", "ISBN 978-3-16-148410-0", "https://example.com/a",
)


def _suffix(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:
        journal = rng.choice(("cell", "jmb", "neuron"))
        return f"j.{journal}.{rng.randint(2000, 2024)}.{rng.randint(1, 99999):05d}"
    if kind < 0.7:
        numbers = (rng.randint(10000, 99999), rng.randint(0, 999), rng.randint(0, 9999))
        return "s{}-{:03d}-{:04d}-".format(*numbers) + str(rng.randint(0, 9))
    if kind < 0.9:
        return f"{rng.choice(('nature', 'ncomms', 'sdata'))}{rng.randint(1000, 99999)}"
    return "".join(rng.choice(string.ascii_letters + string.digits + "._-;()") for _ in range(12))


def _doi(rng: random.Random) -> str:
    return f"10.{rng.choice(REGISTRANTS)}/{_suffix(rng)}"


def _percent(doi: str, rng: random.Random) -> str:
    table = {"/": "%2F", "(": "%28", ")": "%29", ";": "%3B", ".": "%2E"}
    prefix, _, suffix = doi.partition("/")
    suffix = "".join(table[c] if c in table and rng.random() < 0.5 else c for c in suffix)
    return f"{prefix}/{suffix}"


def messy_value(rng: random.Random, shape: str) -> str | None:
    """One cell of the given shape (see :data:`MIX`)."""
    doi = _doi(rng)
    if rng.random() < 0.3:
        doi = doi.lower() if rng.random() < 0.5 else doi.translate(_UPPER)
    if shape == "bare":
        return doi
    if shape == "https":
        return f"https://doi.org/{doi}"
    if shape == "http_dx":
        return f"http://dx.doi.org/{doi}"
    if shape == "doi_scheme":
        return rng.choice(("doi:", "DOI:", "doi: ", "DOI: ", "Doi:  ")) + doi
    if shape == "whitespace":
        before = rng.choice((" ", "\t", "\u00a0", "\ufeff", ""))
        return before + doi + rng.choice((" ", "\n", "  ", "\u200b"))
    if shape == "upper_url":
        return f"HTTPS://DOI.ORG/{doi}"
    if shape == "percent_url":
        return f"https://doi.org/{_percent(doi, rng)}"
    if shape == "info_or_handle":
        form = rng.choice(("info:doi/", "https://hdl.handle.net/", "urn:doi:"))
        return form + (doi.replace("/", ":", 1) if form == "urn:doi:" else doi)
    if shape == "non_ascii":
        return doi + rng.choice(("-é", "ß", "-ﬁ", "İ", "\u212a", "-日本"))
    if shape == "junk":
        if rng.random() < 0.7:
            return rng.choice(JUNK)
        return f"PMID:{rng.randint(1, 40_000_000)}"
    return None


_UPPER = str.maketrans(string.ascii_lowercase, string.ascii_uppercase)


def iter_values(rows: int, seed: int) -> Iterator[str | None]:
    """``rows`` messy cells, reproducibly for a seed, without holding them all."""
    rng = random.Random(seed)
    shapes = [s for s, _ in MIX]
    weights = [w for _, w in MIX]
    for _ in range(rows):
        yield messy_value(rng, rng.choices(shapes, weights)[0])


def generate(rows: int, seed: int) -> list[str | None]:
    return list(iter_values(rows, seed))


def _idutils_key(value: str | None) -> str | None:
    try:
        return idutils.normalize_doi(value)
    except Exception:  # idutils raises AttributeError/TypeError on anything unexpected
        return None


def _scalar_key(value: str | None) -> str | None:
    try:
        return comparison_key(value)
    except InvalidDoiError:
        return None


def _timed(run: Callable[[], object]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (all threads of this process) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def _best(run: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The fastest of ``repeat`` runs, as (wall, CPU) seconds."""
    return min(_timed(run) for _ in range(repeat))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=20240501)
    parser.add_argument("--sample", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of N timings for each side")
    args = parser.parse_args(argv)

    values = generate(args.rows, args.seed)
    series = pd.Series(values)  # pandas' default string dtype (Arrow-backed with pyarrow)
    series.doi.key()  # warm up: compile the regexes, start the thread pool code paths
    engine = native_arrow.status()
    if native_arrow.module() is None:
        print(f"the native core is not available ({engine}): timing the fallback only")

    ours, ours_cpu = _best(lambda: series.doi.key(), args.repeat)
    native_module = native_arrow.module
    native_arrow.module = lambda: None  # type: ignore[assignment]  # the fallback, same process
    try:
        series.doi.key()
        fallback, fallback_cpu = _best(lambda: series.doi.key(), args.repeat)
        fallback_keys = series.doi.key()
    finally:
        native_arrow.module = native_module  # type: ignore[method-assign]
    # idutils two ways: a bare Python loop (the cheapest possible per-row call) and
    # Series.map (what a pandas user writes; like ours, it returns a Series).
    loop, loop_cpu = _best(lambda: [_idutils_key(v) for v in values], args.repeat)
    mapped, mapped_cpu = _best(lambda: series.map(_idutils_key), args.repeat)

    keys = series.doi.key()
    rng = random.Random(args.seed + 1)
    sample = rng.sample(range(args.rows), min(args.sample, args.rows))
    disagreements = [
        (values[i], got.iloc[i], _scalar_key(values[i]))
        for got in (keys, fallback_keys)
        for i in sample
        if (None if pd.isna(got.iloc[i]) else got.iloc[i]) != _scalar_key(values[i])
    ]

    def line(label: str, seconds: float, cpu: float) -> str:
        return (
            f"{label:34s}{seconds * 1000:8.1f} ms {args.rows / seconds:12,.0f} rows/s"
            f"   CPU {cpu * 1000:8.1f} ms"
        )

    print(f"rows: {args.rows:,} (seed {args.seed}, dtype {series.dtype}, best of {args.repeat}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    print(f"engine: {engine}")
    print(line("Series.doi.key()", ours, ours_cpu))
    print(line("Series.doi.key(), fallback", fallback, fallback_cpu))
    print(line("idutils.normalize_doi, Python loop", loop, loop_cpu))
    print(line("idutils.normalize_doi, Series.map", mapped, mapped_cpu))
    speedup, cpu_ratio = loop / ours, loop_cpu / ours_cpu
    met = speedup >= TARGET_SPEEDUP and cpu_ratio >= TARGET_CPU_RATIO
    print(f"speed-up vs Python loop: {speedup:5.1f}x   vs Series.map: {mapped / ours:5.1f}x"
          f"   (target >= {TARGET_SPEEDUP:.0f}x: {'met' if met else 'NOT met'})")
    print(f"CPU time ratio (less sensitive to other load): {cpu_ratio:5.1f}x vs loop "
          f"(target >= {TARGET_CPU_RATIO:.0f}x), {mapped_cpu / ours_cpu:5.1f}x vs Series.map")
    print(f"fallback: {loop / fallback:5.1f}x vs loop, CPU {loop_cpu / fallback_cpu:5.1f}x; "
          f"native {fallback / ours:5.1f}x the fallback")
    print(f"disagreements with scalar comparison_key on {len(sample):,} sampled rows x 2 engines: "
          f"{len(disagreements)}")
    for value, got, expected in disagreements[:10]:
        print(f"  {value!r}: vectorized {got!r}, scalar {expected!r}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
