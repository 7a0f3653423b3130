"""Normalize + validate at scale: the operators' push-down against a hand-written UPDATE.

For each engine and size, a catalogue with 30% duplicate keys (the same DOI written another
way: URL, ``doi:``, padding, other case) is built inside the database, then timed in one run:

* ``pushdown``: ``DoiNormalizeOperator`` (``full_refresh=True``: every row, as a first run) +
  ``DoiValidateOperator`` in ``mode="sql"`` (the default where the engine has generated SQL),
  run in this process as the tasks run them;
* ``hand``: what an expert writes by hand with our functions installed from ``sql/<dialect>``:
  ``UPDATE t SET doi = doi_normalize(raw), ...`` and ``SELECT doi_reason(raw), count(*) ...
  GROUP BY 1`` (the baseline);
* ``python``: the same operators in ``mode="python"`` (page by page through the worker), at
  the sizes given by ``--python-sizes`` only.

Prints seconds, the ratio to ``hand`` and microseconds per row, and checks (exit 1 otherwise)
that push-down is within 1.5x of ``hand`` and that its time per row grows by at most 1.3x
from the smallest size to the largest.

    .venv/bin/python bench/operators_scale.py [--duckdb-sizes 1000000,4000000,16000000]
        [--pg-sizes 1000000,4000000] [--python-sizes 1000000,4000000] [--pg-dsn DSN]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-doi-bench-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

#: Row i shows DOI number ``i * 7 // 10``: 30% of the rows repeat a DOI of another row, in
#: another presentation form picked by ``i % 10`` (and 4% are not DOIs at all).
CATALOGUE_SQL = """
SELECT i AS id, CASE i % 10
  WHEN 0 THEN '10.' || (1000 + k % 9000) || '/j.cell.' || k
  WHEN 1 THEN 'https://doi.org/10.' || (1000 + k % 9000) || '/J.CELL.' || k
  WHEN 2 THEN 'doi:10.' || (1000 + k % 9000) || '/j.Cell.' || k
  WHEN 3 THEN ' 10.' || (1000 + k % 9000) || '/j.cell.' || k || ' '
  WHEN 4 THEN 'http://dx.doi.org/10.' || (1000 + k % 9000) || '/j.cell.' || k
  WHEN 5 THEN '10.' || (1000 + k % 9000) || '/J.CELL.' || k
  WHEN 6 THEN CASE WHEN k % 5 = 0 THEN 'n/a ' || k
                   ELSE 'https://doi.org/10.' || (1000 + k % 9000) || '/j.cell.%3C' || k END
  WHEN 7 THEN 'DOI: 10.' || (1000 + k % 9000) || '/j.cell.' || k
  WHEN 8 THEN 'urn:doi:10.' || (1000 + k % 9000) || ':j.cell.' || k
  ELSE '10.' || (1000 + k % 9000) || '/j.cell.' || k || 'é'
END AS doi_raw
FROM (SELECT i, i * 7 / 10 AS k FROM {series}) AS s
"""

HAND_UPDATE = (
    "UPDATE {t} SET doi = doi_normalize(doi_raw), doi_key = doi_key(doi_raw), "
    "doi_valid = doi_is_valid(doi_raw), doi_reason = doi_reason(doi_raw)"
)
HAND_VALIDATE = "SELECT doi_reason(doi_raw), count(*) FROM {t} GROUP BY 1"
ADD_COLUMNS = ("doi VARCHAR", "doi_key VARCHAR", "doi_valid BOOLEAN", "doi_reason VARCHAR")


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def operators(conn_id: str, table: str, mode: str) -> None:
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator
    from airflow_doi.provider.operators.validate import DoiValidateOperator

    common = {"conn_id": conn_id, "table": table, "doi_column": "doi_raw", "mode": mode}
    # Every row, as the first run (a later run writes only what changed: bench/incremental.py).
    DoiNormalizeOperator(task_id="n", batch_size=10_000, full_refresh=True, **common).execute({})
    DoiValidateOperator(task_id="v", batch_size=10_000, max_invalid_share=1.0,
                        **common).execute({})


class DuckDb:
    name = "duckdb"

    def __init__(self, workdir: Path) -> None:
        import duckdb

        self.path = workdir / "catalogue.duckdb"
        self.con = duckdb.connect(str(self.path))
        self.con.execute((ROOT / "sql/duckdb/doi_functions.sql").read_text())
        os.environ["AIRFLOW_CONN_BENCH_DUCKDB"] = json.dumps(
            {"conn_type": "duckdb", "host": str(self.path)})
        self.conn_id = "bench_duckdb"

    def build(self, table: str, rows: int) -> None:
        series = f"range({rows}) AS r(i)"
        self.con.execute(f"CREATE OR REPLACE TABLE {table} AS "
                         + CATALOGUE_SQL.format(series=series))

    def run(self, sql: str) -> None:
        self.con.execute(sql)
        self.con.fetchall() if self.con.description else None

    def release(self) -> None:  # the operators open the file themselves
        self.con.close()

    def reopen(self) -> None:
        import duckdb

        self.con = duckdb.connect(str(self.path))


class Postgres:
    name = "postgres"

    def __init__(self, dsn: str) -> None:
        import psycopg

        self.schema = f"bench_{uuid.uuid4().hex[:8]}"
        self.con = psycopg.connect(dsn, autocommit=True)
        self.con.execute(f"CREATE SCHEMA {self.schema}")
        self.con.execute(f"SET search_path TO {self.schema}")
        self.con.execute((ROOT / "sql/postgres/doi_functions.sql").read_text())
        url = urlparse(dsn)
        os.environ["AIRFLOW_CONN_BENCH_POSTGRES"] = json.dumps({
            "conn_type": "postgres", "host": url.hostname, "port": url.port or 5432,
            "login": url.username, "password": url.password or "",
            "schema": url.path.lstrip("/")})
        self.conn_id = "bench_postgres"

    def build(self, table: str, rows: int) -> None:
        self.con.execute(f"DROP TABLE IF EXISTS {table}")
        series = f"generate_series(0, {rows - 1}) AS r(i)"
        self.con.execute(f"CREATE TABLE {table} AS " + CATALOGUE_SQL.format(series=series))
        self.con.execute(f"VACUUM ANALYZE {table}")

    def run(self, sql: str) -> None:
        self.con.execute(sql)

    def release(self) -> None:
        pass

    def reopen(self) -> None:
        pass

    def drop(self) -> None:
        self.con.execute(f"DROP SCHEMA {self.schema} CASCADE")


def measure(engine: DuckDb | Postgres, rows: int, python: bool) -> dict[str, float]:
    schema = f"{engine.schema}." if isinstance(engine, Postgres) else ""
    table = f"{schema}catalogue"
    figures: dict[str, float] = {}
    engine.build(table, rows)
    for column in ADD_COLUMNS:
        engine.run(f"ALTER TABLE {table} ADD COLUMN {column}")
    figures["hand"] = timed(lambda: (engine.run(HAND_UPDATE.format(t=table)),
                                     engine.run(HAND_VALIDATE.format(t=table))))
    engine.release()
    figures["pushdown"] = timed(lambda: operators(engine.conn_id, table, "sql"))
    if python:
        figures["python"] = timed(lambda: operators(engine.conn_id, table, "python"))
    engine.reopen()
    return figures


def sizes(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duckdb-sizes", type=sizes, default=sizes("1000000,4000000,16000000"))
    parser.add_argument("--pg-sizes", type=sizes, default=sizes("1000000,4000000"))
    parser.add_argument("--python-sizes", type=sizes, default=sizes("1000000,4000000"))
    parser.add_argument("--pg-dsn", default=os.environ.get(
        "AIRFLOW_DOI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"))
    args = parser.parse_args()
    failures = []
    print(f"{'engine':9} {'rows':>11} {'hand s':>8} {'push s':>8} {'push/hand':>9} "
          f"{'push us/row':>11} {'python s':>9} {'python/hand':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        engines: list[tuple[DuckDb | Postgres, list[int]]] = [
            (DuckDb(Path(tmp)), args.duckdb_sizes), (Postgres(args.pg_dsn), args.pg_sizes)]
        for engine, engine_sizes in engines:
            if not engine_sizes:
                continue
            # Imports and SQL generation once, untimed: a constant second or two per task.
            measure(engine, 1000, True)
            per_row = []
            for rows in engine_sizes:
                f = measure(engine, rows, rows in args.python_sizes)
                ratio = f["pushdown"] / f["hand"]
                per_row.append(f["pushdown"] / rows * 1e6)
                python = (f"{f['python']:9.1f} {f['python'] / f['hand']:10.1f}x"
                          if "python" in f else f"{'-':>9} {'-':>11}")
                print(f"{engine.name:9} {rows:11,} {f['hand']:8.2f} {f['pushdown']:8.2f} "
                      f"{ratio:8.2f}x {per_row[-1]:11.2f} {python}", flush=True)
                if ratio > 1.5:
                    failures.append(f"{engine.name} {rows:,}: push-down {ratio:.2f}x hand")
            growth = per_row[-1] / per_row[0]
            print(f"{engine.name}: time per row grows {growth:.2f}x from "
                  f"{engine_sizes[0]:,} to {engine_sizes[-1]:,} rows (limit 1.3x)")
            if growth > 1.3:
                failures.append(f"{engine.name}: time per row grows {growth:.2f}x")
            if isinstance(engine, Postgres):
                engine.drop()
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
