# ruff: noqa: F811  (``engine`` is the fixture of test_airflow_claims, used as an argument)
"""Two ``normalize`` tasks on one table at once (two runs of a DAG), on real engines.

CI saw it on PostgreSQL: each task read the table's columns (a read lock, held to the end of
the transaction), then asked for the exclusive lock to add the columns; each waited for the
other, and PostgreSQL killed one as a deadlock. Here the tasks meet at that point on purpose.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from contextlib import closing
from typing import Any

import pytest

from airflow_doi.db.statements import add_missing_columns, column_names, quote_identifier
from airflow_doi.syntax import validate
from tests import forked
from tests.test_airflow_claims import Engine, _env, engine  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("airflow_claims")]

NEW = {"doi_a": "TEXT", "doi_b": "TEXT"}


def _deadlocks(engine: Engine) -> int:
    """Deadlocks PostgreSQL has broken in this database so far (0 elsewhere)."""
    if engine.kind != "postgres":
        return 0
    time.sleep(0.6)  # sessions report their statistics at most every 500 ms (PostgreSQL 15+)
    engine.run("SELECT pg_stat_clear_snapshot()")
    return int(engine.run("SELECT deadlocks FROM pg_stat_database "
                          "WHERE datname = current_database()")[0][0])


@pytest.mark.parametrize("engine", ["postgres", "mariadb", "sqlite", "duckdb"], indirect=True)
def test_two_sessions_that_read_the_table_add_the_same_columns_without_a_deadlock(
        engine: Engine) -> None:
    """Both sessions have read the table (as ``require_columns`` does) before either adds the
    columns: both calls return, the columns are there once, the rows are untouched."""
    engine.load(["10.1000/A", "10.1000/B"])
    if_not_exists = engine.kind in ("postgres", "duckdb")
    deadlocks_before = _deadlocks(engine)
    added: list[list[str]] = [[], []]
    errors: list[BaseException] = []
    both_read = threading.Barrier(2, timeout=60)

    def add(n: int) -> None:
        try:
            with closing(engine.connect()) as conn:
                cursor = engine.dialect.cursor(conn)
                # Each holds what a read of the table holds, until it commits.
                assert "doi" in column_names(cursor, engine.table)
                both_read.wait()
                added[n] = add_missing_columns(conn, cursor, engine.table, NEW,
                                               if_not_exists=if_not_exists)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    assert not any(thread.is_alive() for thread in threads), "a session never returned"
    assert errors == []
    # A deadlock the engine broke (and the loser's retry hid) counts too: there must be none.
    assert _deadlocks(engine) == deadlocks_before
    with closing(engine.connect()) as conn:
        have = column_names(engine.dialect.cursor(conn), engine.table)
    assert [n for n in have if n.lower() in NEW] == ["doi_a", "doi_b"]
    # Each column was added by one session or by both under IF NOT EXISTS: never missing.
    assert set(added[0]) | set(added[1]) == set(NEW)
    assert engine.run(f"SELECT COUNT(*) FROM {quote_identifier(engine.table)}") == [(2,)]


NORMALIZER = """
import json, sys
from airflow_doi.provider.operators.normalize import DoiNormalizeOperator
summary = DoiNormalizeOperator(task_id="normalize", conn_id="cat", table=sys.argv[1],
                               doi_column="raw", output_prefix="norm", mode=sys.argv[2],
                               functions_schema=sys.argv[3] or None).execute({})
print(json.dumps(summary))
"""


@pytest.mark.parametrize("engine", ["postgres", "mariadb", "duckdb"], indirect=True)
@pytest.mark.parametrize("mode", ["auto", "python"])
def test_three_normalize_tasks_at_once_all_succeed_with_one_answer(
        engine: Engine, mode: str) -> None:
    """Three processes normalize one table that has no output columns yet: all three succeed
    and every row holds its DOI, key, flag and reason."""
    raws = ["doi:10.1000/ABC", "https://doi.org/10.1000/abc", "10.1000/x\ty", None] * 500
    table = quote_identifier(engine.table)
    engine.run(f"CREATE TABLE {table} (id INTEGER, raw {engine.dialect.text_type})")
    with closing(engine.connect()) as conn:
        cursor = engine.dialect.cursor(conn)
        cursor.executemany(f"INSERT INTO {table} VALUES ({engine.dialect.marks(2)})",
                           list(enumerate(raws)))
        conn.commit()
    env = _env(engine, "http://127.0.0.1:9")
    # MariaDB's push-down installs its functions in a database named for it: the catalogue's.
    functions = engine.connection["schema"] if engine.kind == "mariadb" else ""
    processes = [forked.popen([sys.executable, "-c", NORMALIZER, engine.table, mode,
                               functions], env=env, text=True) for _ in range(3)]
    outputs = [p.communicate(timeout=300) for p in processes]
    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err[-3000:]
    summaries: list[dict[str, Any]] = [json.loads(out.strip().splitlines()[-1])
                                       for out, _ in outputs]
    # Each row is written once: by whichever task got to it first (the others find it current,
    # or wait for the first one's write and then find it current).
    assert sum(s["rows_written"] for s in summaries) == len(raws), summaries
    rows = engine.run(f"SELECT raw, norm, norm_key, norm_valid, norm_reason, COUNT(*) "
                      f"FROM {table} GROUP BY raw, norm, norm_key, norm_valid, norm_reason")
    expected = []
    for raw in set(raws):
        if raw is None:
            expected.append((None, None, None, False, "empty", 500))
            continue
        result = validate(raw)
        expected.append((raw, result.doi, result.key, result.valid, result.reason, 500))
    got = [(r[0], r[1], r[2], bool(r[3]), r[4], r[5]) for r in rows]
    assert sorted(got, key=repr) == sorted(expected, key=repr)


class _Recording:
    """A connection and cursor (a fake, beside the real engines above) that write down every
    statement, commit and rollback, and fail the first ALTER with ``failure``."""

    def __init__(self, failure: str) -> None:
        self.log: list[str] = []
        self.failure: str | None = failure
        self.columns = ["doi"]
        self.description: list[tuple[str]] = []

    def cursor(self) -> _Recording:
        return self

    def execute(self, sql: str, params: Any = None) -> None:
        verb = sql.split()[0]
        self.log.append(verb)
        if verb == "ALTER":
            if self.failure is not None:
                failure, self.failure = self.failure, None
                raise RuntimeError(failure)
            self.columns.append(sql.split('"')[-2])
        self.description = [(name,) for name in self.columns]

    def fetchall(self) -> list[Any]:
        return []

    def commit(self) -> None:
        self.log.append("COMMIT")

    def rollback(self) -> None:
        self.log.append("ROLLBACK")


def test_a_retried_alter_never_runs_inside_the_rechecks_read() -> None:
    fake = _Recording("canceling statement due to lock timeout")
    assert add_missing_columns(fake, fake, "t", {"doi_a": "TEXT"}, if_not_exists=True) == [
        "doi_a"]
    # Every ALTER follows a COMMIT: no read lock is held while it waits for the exclusive one.
    alters = [i for i, verb in enumerate(fake.log) if verb == "ALTER"]
    assert len(alters) == 2
    assert all(fake.log[i - 1] in ("COMMIT", "ROLLBACK") and "SELECT" not in fake.log[i - 1]
               for i in alters)
    assert fake.log[alters[1] - 1] == "COMMIT"
    assert fake.log[-1] == "COMMIT"


def test_an_alter_refused_for_good_is_raised_at_once() -> None:
    fake = _Recording("permission denied for table t")
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="permission denied"):
        add_missing_columns(fake, fake, "t", {"doi_a": "TEXT"}, if_not_exists=True)
    assert time.monotonic() - started < 0.1  # no waiting for what cannot pass
    assert fake.log.count("ALTER") == 1
    assert fake.log[-1] == "COMMIT"  # the re-check's read is ended before raising
