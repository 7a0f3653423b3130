"""#32: the example dbt project's incremental model keys only the cells it has not keyed.

``examples/dbt/models/staging/catalogue_doi_keys.sql`` (materialized ``incremental``,
``is_incremental()``) is built twice on DuckDB and on PostgreSQL with rows inserted (new cells,
an edited cell, a cell that repeats one already keyed) between the runs: the second run keys
only the new cells (``keyed_by`` is each run's invocation), every key equals Python's, and
``--full-refresh`` keys every cell again.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import duckdb
import pytest

from airflow_doi.syntax import validate
from tests import forked
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

PROJECT = ROOT / "examples" / "dbt"
MODEL = "catalogue_doi_keys"


def _sample() -> list[tuple[int, str, str | None]]:
    with (ROOT / "examples" / "data" / "catalogue.csv").open(encoding="utf-8", newline="") as f:
        return [(int(r["record_id"]), r["title"], r["doi_raw"] or None) for r in csv.DictReader(f)]


def _dbt(env: dict[str, str], scratch: Path, *args: str) -> None:
    dbt = [sys.executable, "-m", "dbt.cli.main"]
    common = ["--project-dir", str(PROJECT), "--profiles-dir", str(PROJECT)]
    done = forked.run([*dbt, *args, *common], env=env, cwd=scratch, capture_output=True,
                      text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


class Catalogue:
    """The sample catalogue on one engine, and the dbt environment that builds beside it."""

    def __init__(self, kind: str, tmp_path: Path, dsn: str | None, schema: str | None) -> None:
        self.kind, self.scratch = kind, tmp_path
        env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1",
               "DOI_DBT_PACKAGES_DIR": str(tmp_path / "dbt_packages"),
               "DBT_TARGET_PATH": str(tmp_path / "target"), "DBT_LOG_PATH": str(tmp_path / "logs")}
        if kind == "duckdb":
            self.path = str(tmp_path / "catalogue.duckdb")
            env.update(DOI_DBT_TARGET="duckdb", DOI_DUCKDB_PATH=self.path, DOI_DBT_SCHEMA="main")
            self.prefix, self.mark = "", "?"
        else:
            assert dsn is not None and schema is not None
            url = urlparse(dsn)
            self.dsn = dsn
            env.update(DOI_DBT_TARGET="postgres", DOI_PG_HOST=url.hostname or "127.0.0.1",
                       DOI_PG_PORT=str(url.port or 5432), DOI_PG_USER=url.username or "postgres",
                       DOI_PG_PASSWORD=url.password or "",
                       DOI_PG_DBNAME=url.path.lstrip("/"), DOI_DBT_SCHEMA=schema)
            self.prefix, self.mark = f'"{schema}".', "%s"
        self.env = env
        self.run("CREATE TABLE {p}catalogue (record_id INTEGER, title TEXT, doi_raw TEXT)")
        self.insert(_sample())

    def connect(self) -> Any:
        if self.kind == "duckdb":
            return duckdb.connect(self.path)
        import psycopg

        return psycopg.connect(self.dsn)

    def run(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        conn = self.connect()
        try:
            cursor = conn.cursor()
            cursor.execute(sql.format(p=self.prefix), params or [])
            rows = cursor.fetchall() if cursor.description else []
            conn.commit()
            return [tuple(r) for r in rows]
        finally:
            conn.close()

    def insert(self, rows: list[tuple[int, str, str | None]]) -> None:
        conn = self.connect()
        try:
            conn.cursor().executemany(
                f"INSERT INTO {self.prefix}catalogue VALUES ({self.mark}, {self.mark}, "
                f"{self.mark})", rows)
            conn.commit()
        finally:
            conn.close()

    def build(self, *extra: str) -> None:
        _dbt(self.env, self.scratch, "run", "--select", MODEL,
             "--vars", json.dumps({"catalogue_table": "catalogue"}), *extra)

    def keyed(self) -> list[tuple[Any, ...]]:
        return self.run(f"SELECT doi_raw, doi_key, doi_valid, doi_reason, keyed_by "
                        f"FROM {{p}}{MODEL}")


@pytest.mark.parametrize("kind", ["duckdb", "postgres"])
def test_the_incremental_model_keys_only_the_new_cells(kind: str, tmp_path: Path,
                                                      request: pytest.FixtureRequest) -> None:
    dsn = schema = None
    if kind == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("postgres_schema")
    catalogue = Catalogue(kind, tmp_path, dsn, schema)
    _dbt(catalogue.env, tmp_path, "deps")
    catalogue.build()
    first = catalogue.keyed()
    cells = {raw for _, _, raw in _sample() if raw is not None}
    assert {row[0] for row in first} == cells and len({row[4] for row in first}) == 1
    (first_run,) = {row[4] for row in first}

    # Between the runs: two new cells, an edited one, and a row repeating a keyed cell.
    catalogue.insert([(9001, "New", "https://doi.org/10.5555/NEW-1"),
                      (9002, "New too", "doi:10.5555/new-2"),
                      (9003, "Again", sorted(cells)[0])])
    catalogue.run("UPDATE {p}catalogue SET doi_raw = '10.5555/edited' WHERE record_id = 1")
    catalogue.build()
    second = catalogue.keyed()
    by_run = Counter(row[4] for row in second)
    assert by_run[first_run] == len(cells)  # nothing keyed again
    assert sorted(by_run.values()) == [3, len(cells)], by_run  # only the three new cells
    assert {row[0] for row in second if row[4] != first_run} == {
        "https://doi.org/10.5555/NEW-1", "doi:10.5555/new-2", "10.5555/edited"}
    for raw, key, valid, reason, _ in second:
        answer = validate(raw)
        assert (key, bool(valid), reason) == (answer.key, answer.valid, answer.reason), raw

    catalogue.build("--full-refresh")
    third = catalogue.keyed()
    assert len({row[4] for row in third}) == 1 and len(third) == len(cells) + 2  # edited: gone
