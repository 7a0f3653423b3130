"""Nightly runs cost what changed (#32): DoiNormalizeOperator on the same table, run after run.

For each engine (DuckDB, PostgreSQL, SQLite, MariaDB in the worker and in the database), a
catalogue of ``--rows`` rows (30% of them another spelling of another row's DOI, 4% not DOIs;
``bench/operators_scale.py``'s mix) is built inside the database, then timed in one run:

* ``hand``: the baseline, a hand-written ``UPDATE`` of the same four columns with the engine's
  built-in string functions (``trim``, ``upper``, ``LIKE``), on a copy of the table;
* ``first``: the operator's first run (it adds its five columns and writes every row);
* ``again``: the same run on the unchanged table;
* ``0.2%``: after 0.1% of the rows were inserted and 0.1% edited;
* ``full``: ``full_refresh=True``;
* ``floor``: the engine writing the 0.2% run's rows, the five columns set to their own values
  (nothing computed): what no incremental run can go under (DuckDB rewrites each column of
  every row group an edit touches, so 0.1% edited rows spread over the table cost it most of
  a whole column's write).

Each line prints the seconds, the ratio to the first run (the goals: ``again`` at most 0.1x,
``0.2%`` at most 0.15x) and to ``hand`` (PostgreSQL's first run: at most 2x), the rows the run
wrote (the operator's count; on PostgreSQL also the server's ``n_tup_upd`` + ``n_tup_ins`` of the
table, after the run's statistics are flushed) and PostgreSQL's table size after each run
(``again`` must leave it unchanged). Exit 1 when a goal is missed.

    .venv/bin/python bench/incremental.py [--rows 1000000] [--engines duckdb,postgres,...]
        [--pg-dsn DSN] [--mariadb-dsn DSN]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-doi-bench-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")

from operators_scale import CATALOGUE_SQL  # noqa: E402  (the same catalogue)

#: The hand-written baseline: four columns from built-in string functions, no DOI rules.
HAND = ("UPDATE {t} SET doi = TRIM(doi_raw), doi_key = UPPER(TRIM(doi_raw)), "
        "doi_valid = TRIM(doi_raw) LIKE '10.%/%', doi_reason = CASE WHEN TRIM(doi_raw) LIKE "
        "'10.%/%' THEN NULL ELSE 'bad_directory' END")


class Engine:
    """A catalogue database: build it, change it, run SQL, read the server's own figures."""

    name = ""
    table = "catalogue"
    mode = "auto"
    functions_schema: str | None = None
    text = "TEXT"

    def build(self, table: str, rows: int) -> None: ...

    def execute(self, sql: str) -> None: ...

    def written(self) -> int | None:
        """Rows the server counts as updated or inserted so far (None: not counted)."""
        return None

    def size(self) -> str:
        return "-"

    def close(self) -> None: ...

    def series(self, rows: int) -> str:
        raise NotImplementedError

    def hand(self, rows: int) -> float:
        self.build("hand_copy", rows)
        for column in ("doi", "doi_key", "doi_reason"):
            self.execute(f"ALTER TABLE hand_copy ADD COLUMN {column} {self.text}")
        self.execute("ALTER TABLE hand_copy ADD COLUMN doi_valid BOOLEAN")
        start = time.perf_counter()
        self.execute(HAND.format(t="hand_copy"))
        seconds = time.perf_counter() - start
        self.execute("DROP TABLE hand_copy")
        return seconds


class DuckDb(Engine):
    name = "duckdb"

    def __init__(self, workdir: Path) -> None:
        self.path = str(workdir / "catalogue.duckdb")
        self.connection = {"conn_type": "duckdb", "host": self.path}

    def execute(self, sql: str) -> None:
        import duckdb

        with duckdb.connect(self.path) as con:
            con.execute(sql)

    def build(self, table: str, rows: int) -> None:
        self.execute(f"CREATE OR REPLACE TABLE {table} AS "
                     + CATALOGUE_SQL.format(series=f"range({rows}) AS r(i)"))


class Sqlite(Engine):
    name = "sqlite"

    def __init__(self, workdir: Path) -> None:
        self.path = str(workdir / "catalogue.sqlite")
        self.connection = {"conn_type": "sqlite", "host": self.path}

    def execute(self, sql: str) -> None:
        with sqlite3.connect(self.path) as con:
            con.execute(sql)

    def build(self, table: str, rows: int) -> None:
        self.execute(f"DROP TABLE IF EXISTS {table}")
        series = (f"(WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r "
                  f"WHERE i < {rows - 1}) SELECT i FROM r)")
        self.execute(f"CREATE TABLE {table} AS " + CATALOGUE_SQL.format(series=series))


class Postgres(Engine):
    name = "postgres"

    def __init__(self, dsn: str) -> None:
        import psycopg

        self.schema = f"bench_{uuid.uuid4().hex[:8]}"
        self.con = psycopg.connect(dsn, autocommit=True)
        self.con.execute(f"CREATE SCHEMA {self.schema}")
        self.con.execute(f"SET search_path TO {self.schema}")
        self.table = f"{self.schema}.catalogue"
        url = urlparse(dsn)
        self.connection = {"conn_type": "postgres", "host": url.hostname,
                           "port": url.port or 5432, "login": url.username,
                           "password": url.password or "", "schema": url.path.lstrip("/")}

    def execute(self, sql: str) -> None:
        self.con.execute(sql)

    def build(self, table: str, rows: int) -> None:
        self.execute(f"DROP TABLE IF EXISTS {table}")
        self.execute(f"CREATE TABLE {table} WITH (autovacuum_enabled = false) AS "
                     + CATALOGUE_SQL.format(series=f"generate_series(0, {rows - 1}) AS r(i)"))
        self.execute(f"VACUUM ANALYZE {table}")

    def written(self) -> int | None:
        self.con.execute("SELECT pg_stat_force_next_flush()")  # this session's own changes
        time.sleep(1.1)  # a session reports its statistics at most every second
        self.con.execute("SELECT pg_stat_clear_snapshot()")
        row = self.con.execute(
            "SELECT n_tup_upd + n_tup_ins FROM pg_stat_user_tables WHERE schemaname = %s "
            "AND relname = 'catalogue'", (self.schema,)).fetchone()
        return int(row[0]) if row else 0

    def size(self) -> str:
        (size,) = self.con.execute(
            f"SELECT pg_total_relation_size('{self.schema}.catalogue')").fetchone()
        return f"{size / 2**20:.0f} MiB"

    def close(self) -> None:
        self.con.execute(f"DROP SCHEMA {self.schema} CASCADE")


class MariaDb(Engine):
    text = "TEXT COLLATE utf8mb4_bin"

    def __init__(self, dsn: str, mode: str) -> None:
        import pymysql

        url = urlparse(dsn)
        self.database = f"bench_{uuid.uuid4().hex[:8]}"
        self.login = {"host": url.hostname or "127.0.0.1", "port": url.port or 3306,
                      "user": url.username or "root", "password": url.password or "",
                      "charset": "utf8mb4", "autocommit": True}
        with pymysql.connect(**self.login) as con:
            con.cursor().execute(f"CREATE DATABASE {self.database} CHARACTER SET utf8mb4")
        self.connection = {"conn_type": "mysql", "host": self.login["host"],
                           "port": self.login["port"], "login": self.login["user"],
                           "password": self.login["password"], "schema": self.database}
        self.mode = mode
        self.name = f"mariadb/{'sql' if mode == 'sql' else 'worker'}"
        self.functions_schema = self.database if mode == "sql" else None

    def execute(self, sql: str) -> None:
        import pymysql

        with pymysql.connect(**self.login, database=self.database) as con:
            con.cursor().execute(sql)

    def build(self, table: str, rows: int) -> None:
        import pymysql
        import sqlglot

        # The same rows: || is CONCAT there and / is not an integer division (DIV is).
        series = f"(SELECT seq AS i FROM seq_0_to_{rows - 1}) AS r"
        select = sqlglot.transpile(CATALOGUE_SQL.format(series=series), read="postgres",
                                   write="mysql")[0].replace("i * 7 / 10", "i * 7 DIV 10")
        with pymysql.connect(**self.login, database=self.database) as con:
            cursor = con.cursor()
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
            cursor.execute(f"CREATE TABLE {table} (id INTEGER, doi_raw TEXT) "
                           "CHARACTER SET utf8mb4")
            cursor.execute(f"INSERT INTO {table} {select}")

    def close(self) -> None:
        self.execute(f"DROP DATABASE {self.database}")


def normalize(engine: Engine, **kwargs: Any) -> tuple[float, int]:
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator

    start = time.perf_counter()
    summary = DoiNormalizeOperator(
        task_id="normalize", conn_id="bench", table=engine.table, doi_column="doi_raw",
        mode=engine.mode, functions_schema=engine.functions_schema, **kwargs,
    ).execute({})
    return time.perf_counter() - start, int(summary["rows_written"])


def change(engine: Engine, rows: int) -> int:
    """0.1% of the rows inserted (copies of others' cells) and 0.1% edited: how many."""
    share = rows // 1000
    engine.execute(f"INSERT INTO catalogue (id, doi_raw) SELECT id + {rows}, doi_raw "
                   f"FROM catalogue WHERE id < {share}")
    prefix = "CONCAT('doi:', doi_raw)" if engine.name.startswith("mariadb") else \
        "'doi:' || doi_raw"
    engine.execute(f"UPDATE catalogue SET doi_raw = {prefix} WHERE id % 1000 = 7 "
                   f"AND id < {rows}")
    return 2 * share


def measure(engine: Engine, rows: int, failures: list[str]) -> None:
    os.environ["AIRFLOW_CONN_BENCH"] = json.dumps(engine.connection)
    engine.build("catalogue", 1000)  # imports, SQL generation: once, untimed
    normalize(engine)
    hand = engine.hand(rows)
    engine.build("catalogue", rows)
    runs: list[tuple[str, float, int, int | None, str]] = []

    def run(label: str, expected: int, **kwargs: Any) -> float:
        before = engine.written()
        seconds, wrote = normalize(engine, **kwargs)
        after = engine.written()
        delta = None if after is None or before is None else after - before
        runs.append((label, seconds, wrote, delta, engine.size()))
        if wrote != expected and not (engine.name.startswith("mariadb") and label == "full"):
            failures.append(f"{engine.name} {label}: wrote {wrote:,} rows, not {expected:,}")
        return seconds

    first = run("first", rows)
    run("again", 0)
    changed = change(engine, rows)
    run("0.2%", changed)
    # MariaDB skips (and does not count) a row whose values do not change.
    run("full", rows + rows // 1000, full_refresh=True)
    # The engine's own cost of writing the 0.2% run's rows: the five columns set to what they
    # hold, on the same 2,000 rows, nothing computed (the floor of any incremental run).
    start = time.perf_counter()
    engine.execute("UPDATE catalogue SET doi = doi, doi_key = doi_key, doi_valid = doi_valid, "
                   "doi_reason = doi_reason, doi_fingerprint = doi_fingerprint "
                   f"WHERE (id % 1000 = 7 AND id < {rows}) OR id >= {rows}")
    floor = time.perf_counter() - start
    for label, seconds, wrote, delta, size in runs:
        server = "-" if delta is None else f"{delta:,}"
        print(f"{engine.name:15} {label:6} {seconds:8.2f} s {seconds / first:6.3f}x first "
              f"{seconds / hand:7.2f}x hand  wrote {wrote:>9,}  server {server:>9}  {size}",
              flush=True)
    print(f"{engine.name:15} floor  {floor:8.2f} s {floor / first:6.3f}x first  (the 0.2% run's "
          f"{changed:,} rows: five columns set to their own values, nothing computed)")
    print(f"{engine.name:15} hand   {hand:8.2f} s (built-in trim/upper/LIKE, four columns)")
    by_label = {label: (seconds, size) for label, seconds, _, _, size in runs}
    goals: list[tuple[str, float, float]] = [("again", 0.10, first), ("0.2%", 0.15, first)]
    if engine.name == "postgres":
        goals.append(("first", 2.0, hand))
        if by_label["again"][1] != by_label["first"][1]:
            failures.append(f"postgres: the table grew from {by_label['first'][1]} to "
                            f"{by_label['again'][1]} on a run with nothing to write")
    for label, limit, base in goals:
        ratio = by_label[label][0] / base
        if ratio > limit:
            failures.append(f"{engine.name} {label}: {ratio:.3f}x (goal {limit}x)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--engines", default="duckdb,postgres,sqlite,mariadb-worker,mariadb-sql")
    parser.add_argument("--pg-dsn", default=os.environ.get(
        "AIRFLOW_DOI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--mariadb-dsn", default=os.environ.get(
        "AIRFLOW_DOI_TEST_MARIADB_DSN", "mysql://root@127.0.0.1:3306/test"))
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    failures: list[str] = []
    makers: dict[str, Callable[[Path], Engine]] = {
        "duckdb": DuckDb,
        "sqlite": Sqlite,
        "postgres": lambda _: Postgres(args.pg_dsn),
        "mariadb-worker": lambda _: MariaDb(args.mariadb_dsn, "python"),
        "mariadb-sql": lambda _: MariaDb(args.mariadb_dsn, "sql"),
    }
    print(f"{args.rows:,} rows; ratios against the first run and against a hand-written "
          "UPDATE, measured in this run")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.engines.split(","):
            engine = makers[name](Path(tmp))
            try:
                measure(engine, args.rows, failures)
            finally:
                engine.close()
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
