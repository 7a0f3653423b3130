"""Keying a column of messy DOIs in each dataframe face, against that engine's own upper-casing.

Usage: ``python bench/dataframes.py [--rows 1000000] [--repeat 3] [--skip-spark]``

The same values for every face (``bench/normalize.py``'s mix of bare, ``doi:``, URL, URN,
percent-encoded and junk cells, written once to a Parquet file), and, per face, the baseline
measured in the same run on the same column:

* Polars: ``pl.col("x").doi.key()`` against ``pl.col("x").str.to_uppercase()`` (issue 26's
  goal: at most 3x its time), both in one ``select`` of an in-memory frame;
* the Arrow API: ``airflow_doi.arrow.key`` against ``pyarrow.compute.utf8_upper``;
* PySpark (``local[1]``, the column cached): ``doi_key(x)`` (``airflow_doi.spark.register``)
  against ``upper(x)``, each as ``max(...)`` so nothing but one row leaves the JVM (issue 26:
  about 0.36 of ``upper``'s speed today, to keep or better).

Each figure is the best of ``--repeat`` runs; the engine in use (native core or the pure-Arrow
fallback) is printed first.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from normalize import iter_values  # the sibling benchmark's value generator

import airflow_doi.polars  # noqa: F401  (registers .doi)
from airflow_doi import arrow
from airflow_doi.native import arrow as native_arrow
from sql import MESSY_SQL, best_of, local_spark  # bench/sql.py's column, timer, session

#: Goals from issue 26, as "this much of the baseline's speed at least" (baseline time / ours).
GOALS = {"polars": 1 / 3, "spark": 0.36}


def line(face: str, ours: str, theirs: str, rows: int, mine: float, base: float) -> float:
    ratio = base / mine
    goal = GOALS.get(face)
    verdict = ""
    if goal is not None:
        verdict = f"  (goal >= {goal:.2f}: {'met' if ratio >= goal else 'NOT met'})"
    print(f"{face:<8} {ours:<26} {rows / mine:>12,.0f}/s   {theirs:<26} {rows / base:>12,.0f}/s"
          f"   speed ratio {ratio:.2f}{verdict}", flush=True)
    return ratio


def bench_polars(frame: pl.DataFrame, repeat: int) -> float:
    key = best_of(repeat, lambda: frame.select(pl.col("x").doi.key()))
    upper = best_of(repeat, lambda: frame.select(pl.col("x").str.to_uppercase()))
    return line("polars", '.doi.key()', ".str.to_uppercase()", frame.height, key, upper)


def bench_arrow(column: pa.ChunkedArray, repeat: int) -> float:
    key = best_of(repeat, lambda: arrow.key(column))
    upper = best_of(repeat, lambda: pc.utf8_upper(column))
    return line("arrow", "airflow_doi.arrow.key", "pc.utf8_upper", len(column), key, upper)


def bench_spark(path: Path, rows: int, repeat: int) -> float:
    from airflow_doi.spark import register, with_doi_columns

    spark = local_spark("airflow-doi-bench-dataframes")
    try:
        register(spark)
        frame = spark.read.parquet(str(path)).cache()
        frame.count()
        frame.createOrReplaceTempView("messy")
        upper = best_of(repeat, lambda: spark.sql("SELECT max(upper(x)) FROM messy").collect())
        key = best_of(repeat, lambda: spark.sql("SELECT max(doi_key(x)) FROM messy").collect())
        line("spark", "doi_key(x) (SQL functions)", "upper(x)", rows, key, upper)
        # A new DataFrame each time: Spark answers a DataFrame collected again from its cache.
        arrow_key = best_of(repeat, lambda: with_doi_columns(frame, "x", engine="arrow")
                            .agg({"doi_key": "max"}).collect())
        line("spark", 'engine="arrow" doi_key', "upper(x)", rows, arrow_key, upper)
        mix = MESSY_SQL.replace("i %", "id %").replace("|| i", "|| id")
        messy = spark.range(rows).selectExpr(f"{mix} AS x").cache()
        messy.count()
        messy.createOrReplaceTempView("sql_messy")
        upper = best_of(repeat, lambda: spark.sql("SELECT max(upper(x)) FROM sql_messy").collect())
        key = best_of(repeat, lambda: spark.sql("SELECT max(doi_key(x)) FROM sql_messy").collect())
    finally:
        spark.stop()
    return line("spark", "doi_key(x), bench/sql's mix", "upper(x)", rows, key, upper)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=20240501)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args(argv)
    print(f"engine: {native_arrow.status()}; rows: {args.rows:,}; best of {args.repeat}")
    column = pa.chunked_array([pa.array(iter_values(args.rows, args.seed), pa.large_string())])
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "messy.parquet"
        pq.write_table(pa.table({"x": column}), path)
        bench_polars(pl.read_parquet(path), args.repeat)
        bench_arrow(column, args.repeat)
        if not args.skip_spark:
            bench_spark(path, args.rows, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
