"""How fast ``doi_key(x)`` is against plain ``upper(x)`` on the same column.

Three measurements: DuckDB with the native extension (:mod:`airflow_doi.duckdb_native`, built
here with the C compiler), DuckDB with the generated macros (``sql/duckdb``), and PostgreSQL
with the generated functions. DuckDB runs on 3,000,000 messy values (bare DOIs in both cases,
URLs, ``doi:`` and URN forms, padding, percent-escapes, non-ASCII suffixes and garbage);
PostgreSQL on a smaller table (``--pg-rows``, default 200,000: it is a row-at-a-time engine
and the ratio, not the row count, is the figure). Each ratio is measured in one run: same
data, same session, best of ``--repeat`` timings. ``upper`` is only the speed baseline: it
is *not* a correct key.

    .venv/bin/python bench/sql.py [--rows 3000000] [--pg-rows 200000] [--pg-dsn DSN]
                                  [--sql-root DIR]

``--sql-root`` reads ``sql/<dialect>/doi_functions.sql`` under another directory (default: this
checkout), e.g. a build of an older generator, to compare two versions on the same machine.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: One messy value per residue of i mod 200, in proportions seen in real catalogue exports:
#: mostly bare DOIs (any case) and doi.org URLs, some ``doi:`` prefixes and padding, and a
#: small tail of percent-encoded URLs, URNs, non-ASCII suffixes, odd spellings and garbage.
MESSY_SQL = """
CASE
  WHEN i % 200 < 100 THEN '10.' || (1000 + i % 9000) || '/j.Cell.' || i
  WHEN i % 200 < 150 THEN 'https://doi.org/10.' || (1000 + i % 9000) || '/abc.' || i
  WHEN i % 200 < 160 THEN 'http://dx.doi.org/10.' || (1000 + i % 9000) || '/X' || i
  WHEN i % 200 < 175 THEN 'doi:10.' || (1000 + i % 9000) || '/ABC' || i
  WHEN i % 200 < 182 THEN ' 10.' || (1000 + i % 9000) || '/padded.' || i || ' '
  WHEN i % 200 < 190 THEN 'n/a ' || i
  WHEN i % 200 < 194 THEN 'https://doi.org/10.' || (1000 + i % 9000) || '/a%3Cb%3E' || i
  WHEN i % 200 < 196 THEN 'DOI: 10.' || (1000 + i % 9000) || '/upper.' || i
  WHEN i % 200 < 198 THEN 'urn:doi:10.' || (1000 + i % 9000) || ':q' || i
  ELSE '10.' || (1000 + i % 9000) || '/é' || i
END
"""


#: The same aggregate over the same column: only the per-value function differs.
UPPER_QUERY = "SELECT max(upper(x)) FROM messy"
KEY_QUERY = "SELECT max(doi_key(x)) FROM messy"


def best_of(repeat: int, run: Callable[[], object]) -> float:
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return min(timings)


def bench_duckdb(rows: int, repeat: int, sql_root: Path = ROOT, *, native: bool) -> float:
    """One DuckDB session: the native extension's ``doi_key``, or the generated macros'."""
    import duckdb

    if native:
        from airflow_doi import duckdb_native

        con = duckdb_native.connect()
        label = "duckdb native"
    else:
        con = duckdb.connect()
        con.execute((sql_root / "sql/duckdb/doi_functions.sql").read_text(encoding="utf-8"))
        label = "duckdb macros"
    con.execute(f"CREATE TABLE messy AS SELECT {MESSY_SQL} AS x FROM range({rows}) t(i)")
    upper = best_of(repeat, lambda: con.execute(UPPER_QUERY).fetchall())
    key = best_of(repeat, lambda: con.execute(KEY_QUERY).fetchall())
    ratio = upper / key
    print(
        f"{label:<14} rows={rows:>9,}  upper(x) {rows / upper:>12,.0f}/s  "
        f"doi_key(x) {rows / key:>12,.0f}/s  speed ratio doi_key/upper = {ratio:.2f}"
    )
    return ratio


def bench_postgres(rows: int, repeat: int, dsn: str, sql_root: Path = ROOT) -> float:
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
        try:
            con.execute(f'SET search_path TO "{schema}"')
            con.execute((sql_root / "sql/postgres/doi_functions.sql").read_text(encoding="utf-8"))
            messy = MESSY_SQL.replace("i % ", "i::bigint % ")
            con.execute(
                f"CREATE TABLE messy AS SELECT {messy} AS x FROM generate_series(0, {rows - 1:d}) i"
            )
            con.execute("ANALYZE messy")
            upper = best_of(repeat, lambda: con.execute(UPPER_QUERY).fetchall())
            key = best_of(repeat, lambda: con.execute(KEY_QUERY).fetchall())
        finally:
            con.execute(f'DROP SCHEMA "{schema}" CASCADE')
    ratio = upper / key
    print(
        f"{'postgres':<14} rows={rows:>9,}  upper(x) {rows / upper:>12,.0f}/s  "
        f"doi_key(x) {rows / key:>12,.0f}/s  speed ratio doi_key/upper = {ratio:.2f}"
    )
    return ratio


def verdict(ratio: float) -> str:
    if ratio >= 0.5:
        return "goal met"
    return "target met" if ratio >= 1 / 3 else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--pg-rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--pg-dsn",
        default=os.environ.get(
            "AIRFLOW_DOI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument(
        "--skip-native", action="store_true", help="no C compiler: measure the macros only"
    )
    parser.add_argument("--sql-root", type=Path, default=ROOT)
    args = parser.parse_args()
    if not args.skip_native:
        ratio = bench_duckdb(args.rows, args.repeat, args.sql_root, native=True)
        print(f"duckdb native: target >= 0.33 (goal 0.50): {verdict(ratio)}")
    ratio = bench_duckdb(args.rows, args.repeat, args.sql_root, native=False)
    print(f"duckdb macros: target >= 0.33 (goal 0.50): {verdict(ratio)}")
    if not args.skip_postgres:
        bench_postgres(args.pg_rows, args.repeat, args.pg_dsn, args.sql_root)


if __name__ == "__main__":
    main()
