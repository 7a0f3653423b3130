"""How fast ``doi_key(x)`` is against plain ``upper(x)`` on the same column, per engine.

One run measures, on the same 1,000,000 messy values (bare DOIs in both cases, URLs, ``doi:``
and URN forms, padding, percent-escapes, non-ASCII suffixes and garbage, in proportions seen in
real catalogue exports):

``duckdb native``
    the C extension (:mod:`airflow_doi.native.duckdb`, built here with the C compiler), as the
    dbt macros call it with ``dbt_doi_duckdb_native``;
``duckdb dbt inline``
    the dbt macro's DuckDB body (``dbt_doi/macros/_generated/duckdb.sql``), expanded in the
    query exactly as dbt compiles ``{{ dbt_doi.doi_key('x') }}``;
``duckdb macros``
    the DuckDB file (``sql/duckdb``), installed as macros;
``postgres``
    the PostgreSQL functions (``sql/postgres``), which PostgreSQL inlines;
``spark``
    the Spark SQL functions (``sql/spark``), temporary functions in a local session.

Each ratio is ``upper`` time / ``doi_key`` time in one session, best of ``--repeat``, the
aggregate the same (``max``): the figure is the share of ``upper()``'s speed. ``upper`` is only
the speed baseline: it is *not* a correct key. It also prints the SQL that one
``doi_key`` macro call expands to, inline and with the functions present (``dbt compile``).

For the DuckDB macros and PostgreSQL it also times ``doi_url`` against ``doi_key`` in the same
session (issue #41 item 12: ``doi_url/doi_key`` under :data:`URL_TARGET`), over 100,000 bare
DOIs, over the messy column, and over 100 copies of a hostile 10,000-character DOI
(non-ASCII, ``%``, ``<`` and dot segments: every step of the URL encoding).

    .venv/bin/python bench/sql.py [--rows 1000000] [--repeat 5] [--sql-root DIR]
                                  [--skip-native] [--skip-postgres] [--skip-spark] [--skip-dbt]

``--sql-root`` reads the generated files under another directory (default: this checkout),
e.g. a build of an older generator, to compare two versions on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
KEY_QUERY = "SELECT max({key}) FROM messy"
#: Targets of issue #15, as a share of upper(): name -> minimum.
TARGETS = {
    "duckdb native": 0.7,
    "duckdb dbt inline": 0.25,
    "duckdb macros": 0.25,
    "postgres": 0.3,
    "spark": 0.4,
}


#: Issue #41 item 12: doi_url at most this many times doi_key's time, same values and session.
URL_TARGET = 5.0
#: The values doi_url is timed on (table name -> rows, the SQL of value ``i``): bare DOIs (the
#: issue's figure), and a 10,000-character DOI needing every step of the encoding.
URL_TABLES = {
    "bare": (100_000, "'10.' || (1000 + i % 9000) || '/j.Cell.' || i"),
    "long": (100, "'10.1000/' || repeat('aé%<b/./', 1249)"),
}


def best_of(repeat: int, run: Callable[[], object]) -> float:
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return min(timings)


def report(label: str, rows: int, upper: float, key: float) -> float:
    ratio = upper / key
    target = TARGETS[label]
    verdict = "met" if ratio >= target else "NOT met"
    print(
        f"{label:<18} rows={rows:>9,}  upper(x) {rows / upper:>12,.0f}/s  "
        f"doi_key(x) {rows / key:>12,.0f}/s  doi_key/upper = {ratio:.2f}  "
        f"(target {target:.2f}: {verdict})",
        flush=True,
    )
    return ratio


def url_ratios(label: str, repeat: int, execute: Callable[[str], object],
               tables: tuple[str, ...]) -> dict[str, float]:
    """``doi_url`` time / ``doi_key`` time over each table's column ``x``, printed; by table."""
    ratios = {}
    for table in tables:
        key = best_of(repeat, lambda t=table: execute(f"SELECT max(doi_key(x)) FROM {t}"))
        url = best_of(repeat, lambda t=table: execute(f"SELECT max(doi_url(x)) FROM {t}"))
        ratio = ratios[table] = url / key
        verdict = "met" if ratio <= URL_TARGET else "NOT met"
        print(f"{label:<18} {table:<6} doi_key {key * 1000:>9,.1f} ms  doi_url {url * 1000:>9,.1f}"
              f" ms  doi_url/doi_key = {ratio:.2f}  (target {URL_TARGET:.0f}: {verdict})",
              flush=True)
    return ratios


def dbt_inline_body(sql_root: Path, adapter: str, value: str) -> str:
    """The SQL that ``{{ dbt_doi.doi_key(value) }}`` compiles to on ``adapter`` without the
    functions: the generated adapter body with the argument substituted, as dbt renders it."""
    text = (sql_root / "dbt_doi/macros/_generated" / f"{adapter}.sql").read_text(encoding="utf-8")
    start = text.index(f"{{% macro {adapter}__doi_key(value) -%}}")
    body = text[start : text.index("{%- endmacro %}", start)].split("\n", 1)[1]
    if "{%- else -%}" in body:  # the native-extension switch: keep the inline branch
        body = body.split("{%- else -%}\n", 1)[1].rsplit("{%- endif %}", 1)[0]
    return body.strip("\n").replace("{{ value }}", value)


def bench_duckdb(rows: int, repeat: int, sql_root: Path, mode: str) -> float:
    """One DuckDB session: the native extension, the dbt inline body, or the macros file."""
    import duckdb

    if mode == "native":
        from airflow_doi.native import duckdb as duckdb_native

        con = duckdb_native.connect()
        key, label = "system.main.doi_key(x)", "duckdb native"
    elif mode == "dbt":
        con = duckdb.connect()
        key, label = dbt_inline_body(sql_root, "duckdb", "x"), "duckdb dbt inline"
    else:
        con = duckdb.connect()
        con.execute((sql_root / "sql/duckdb/doi_functions.sql").read_text(encoding="utf-8"))
        key, label = "doi_key(x)", "duckdb macros"
    con.execute(f"CREATE TABLE messy AS SELECT {MESSY_SQL} AS x FROM range({rows}) t(i)")
    query = KEY_QUERY.format(key=key)
    upper = best_of(repeat, lambda: con.execute(UPPER_QUERY).fetchall())
    doi_key = best_of(repeat, lambda: con.execute(query).fetchall())
    ratio = report(label, rows, upper, doi_key)
    if mode == "macros":
        for table, (count, value) in URL_TABLES.items():
            con.execute(f"CREATE TABLE {table} AS SELECT {value} AS x FROM range({count}) t(i)")
        url_ratios(label, repeat, lambda q: con.execute(q).fetchall(), (*URL_TABLES, "messy"))
    con.close()
    return ratio


def bench_postgres(rows: int, repeat: int, dsn: str, sql_root: Path) -> float:
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
            query = KEY_QUERY.format(key="doi_key(x)")
            upper = best_of(repeat, lambda: con.execute(UPPER_QUERY).fetchall())
            key = best_of(repeat, lambda: con.execute(query).fetchall())
            ratio = report("postgres", rows, upper, key)
            for table, (count, value) in URL_TABLES.items():
                con.execute(f"CREATE TABLE {table} AS SELECT {value} AS x"
                            f" FROM generate_series(0, {count - 1:d}) i")
                con.execute(f"ANALYZE {table}")
            url_ratios("postgres", repeat, lambda q: con.execute(q).fetchall(),
                       (*URL_TABLES, "messy"))
        finally:
            con.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return ratio


def local_spark(app: str) -> Any:
    """A quiet local session on one core (``local[1]``): the ratio, not the core count, is the
    figure, and a second core would only measure the machine's other load. Its Python workers
    (``mapInArrow``) run this interpreter."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[1]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def bench_spark(rows: int, repeat: int, sql_root: Path) -> float:
    """A local session on one core (``local[1]``): the ratio, not the core count, is the
    figure, and a second core would only measure the machine's other load."""
    from airflow_doi.db.install import statements

    spark = local_spark("airflow-doi-bench")
    try:
        text = (sql_root / "sql/spark/doi_functions.sql").read_text(encoding="utf-8")
        for statement in statements(text):
            spark.sql(statement)
        messy = MESSY_SQL.replace("i %", "id %").replace("|| i", "|| id")
        frame = spark.range(rows).selectExpr(f"{messy} AS x").cache()
        frame.count()
        frame.createOrReplaceTempView("messy")
        query = KEY_QUERY.format(key="doi_key(x)")
        upper = best_of(repeat, lambda: spark.sql(UPPER_QUERY).collect())
        key = best_of(repeat, lambda: spark.sql(query).collect())
    finally:
        spark.stop()
    return report("spark", rows, upper, key)


DBT_PROJECT = """
name: doi_bench
version: "1.0"
config-version: 2
profile: doi_bench
dispatch:
  - macro_namespace: dbt
    search_order: ["doi_bench", "dbt_doi_udfs", "dbt"]
"""


def dbt_expansions(sql_root: Path) -> dict[str, str]:
    """What ``{{ dbt_doi.doi_key('doi') }}`` compiles to with dbt-duckdb: inline, with the
    UDF resources (``dbt_doi_use_functions``) and with the native extension."""
    dbt = Path(sys.executable).with_name("dbt")
    with tempfile.TemporaryDirectory(prefix="airflow-doi-bench-") as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        shutil.copytree(
            sql_root / "dbt_doi",
            Path(tmp) / "dbt_doi",
            ignore=shutil.ignore_patterns("integration_tests", "target", "dbt_packages", "logs"),
        )
        (project / "dbt_project.yml").write_text(DBT_PROJECT, encoding="utf-8")
        (project / "packages.yml").write_text(
            "packages:\n  - local: ../dbt_doi\n  - local: ../dbt_doi/udfs\n"
        )
        profile = {
            "doi_bench": {
                "target": "bench",
                "outputs": {"bench": {"type": "duckdb", "path": f"{tmp}/bench.duckdb"}},
            }
        }
        (project / "profiles.yml").write_text(json.dumps(profile), encoding="utf-8")
        env = {
            **os.environ,
            "DBT_PROFILES_DIR": str(project),
            "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
            "DO_NOT_TRACK": "1",
        }

        def run(*args: str) -> str:
            done = subprocess.run(
                [str(dbt), *args, "--project-dir", str(project)],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if done.returncode:
                raise RuntimeError(f"dbt {args[0]} failed:\n{done.stdout[-2000:]}")
            return done.stdout

        run("deps")
        found = {}
        for label, variables in (
            ("inline", {}),
            ("functions present", {"dbt_doi_use_functions": True}),
            ("native extension", {"dbt_doi_duckdb_native": True}),
        ):
            out = run(
                "compile",
                "--quiet",
                "--inline",
                "select {{ dbt_doi.doi_key('doi') }} as k",
                "--vars",
                json.dumps(variables),
            )
            found[label] = re.sub(r"^\s*select\s+|\s+as\s+k\s*$", "", out.strip(), flags=re.I)
    return found


def print_expansions(sql_root: Path) -> None:
    try:
        expansions = dbt_expansions(sql_root)
    except (OSError, RuntimeError) as error:
        print(f"dbt expansion not measured: {error}")
        return
    for label, sql in expansions.items():
        shown = sql if len(sql) < 80 else sql[:60].replace("\n", " ") + " ..."
        print(f"dbt_doi.doi_key('doi') on duckdb, {label:<18} {len(sql):>7,} bytes: {shown}")
    for adapter in ("postgres", "databricks", "snowflake", "bigquery", "trino", "redshift"):
        size = len(dbt_inline_body(sql_root, adapter, "doi"))
        print(f"dbt_doi.doi_key('doi') on {adapter}, inline {size:>7,} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--pg-dsn",
        default=os.environ.get(
            "AIRFLOW_DOI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--skip-dbt", action="store_true", help="do not run dbt compile")
    parser.add_argument(
        "--skip-native", action="store_true", help="no C compiler: measure the macros only"
    )
    parser.add_argument("--sql-root", type=Path, default=ROOT)
    args = parser.parse_args()
    if not args.skip_native:
        bench_duckdb(args.rows, args.repeat, args.sql_root, "native")
    bench_duckdb(args.rows, args.repeat, args.sql_root, "dbt")
    bench_duckdb(args.rows, args.repeat, args.sql_root, "macros")
    if not args.skip_postgres:
        bench_postgres(args.rows, args.repeat, args.pg_dsn, args.sql_root)
    if not args.skip_spark:
        bench_spark(args.rows, args.repeat, args.sql_root)
    if not args.skip_dbt:
        print_expansions(args.sql_root)


if __name__ == "__main__":
    main()
