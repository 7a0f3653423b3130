"""The operators' statements in the dialects of engines this machine does not run.

BigQuery and Snowflake are not here, so each operator runs against a stand-in: a DuckDB file
behind a connection that records every statement in the target dialect, checks that it parses
there (sqlglot) and follows the engine's quoting rules, then transpiles it to DuckDB and runs
it, so the run is real end to end and the table can be checked against Python. This is a fake
in addition to the real engines of ``test_airflow_provider.py``, never instead: it proves the
statements' shape and the operators' logic on them, not the warehouses' behaviour.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import duckdb
import pytest
import sqlglot

from airflow_doi.syntax import validate
from tests import test_airflow_provider as provider
from tests.conftest import MARIADB_DSN
from tests.test_airflow_provider import VALID_KEYS, VALUES

simulator = provider.simulator  # the fixture: the proxy simulator as doi_proxy_default

#: Identifiers as each engine needs them: BigQuery backticks (``"x"`` is a string there),
#: Snowflake upper case (an unquoted ``works`` is stored as ``WORKS``).
QUOTING = {
    "bigquery": (re.compile(r"`[A-Za-z_][A-Za-z0-9_]*`"), re.compile(r'"[A-Za-z_]\w*"')),
    "snowflake": (re.compile(r'"[A-Z_][A-Z0-9_]*"'), re.compile(r'"[A-Za-z_]*[a-z]\w*"')),
}


class StandIn:
    """A DB-API connection that speaks ``dialect`` and runs on a DuckDB file."""

    def __init__(self, path: Path, dialect: str, statements: list[str]) -> None:
        self.con = duckdb.connect(str(path))
        self.dialect = dialect
        self.statements = statements

    def cursor(self) -> Any:
        return _Cursor(self)

    def commit(self) -> None:
        pass

    def close(self) -> None:
        self.con.close()


class _Cursor:
    def __init__(self, owner: StandIn) -> None:
        self.owner = owner
        self.cur = owner.con.cursor()

    def _duckdb(self, sql: str) -> str:
        self.owner.statements.append(sql)
        trees = sqlglot.parse(sql, read=self.owner.dialect)  # raises when it does not parse
        return ";".join(t.sql(dialect="duckdb") for t in trees if t)

    def execute(self, sql: str, params: Any = None) -> Any:
        self.cur.execute(self._duckdb(sql), params or [])
        self.rowcount = -1
        if sql.lstrip().upper().startswith("UPDATE"):  # DuckDB answers with the count
            (self.rowcount,) = self.cur.fetchone()
        return self

    def executemany(self, sql: str, rows: Any) -> None:
        self.cur.executemany(self._duckdb(sql), rows)

    @property
    def description(self) -> Any:
        return self.cur.description

    def fetchone(self) -> Any:
        return self.cur.fetchone()

    def fetchall(self) -> Any:
        return self.cur.fetchall()

    def close(self) -> None:
        self.cur.close()


class StandInHook:
    placeholder = "?"

    def __init__(self, path: Path, dialect: str, statements: list[str]) -> None:
        self.conn_type = dialect
        self.path, self.statements = path, statements

    def get_conn(self) -> StandIn:
        return StandIn(self.path, self.conn_type, self.statements)


@pytest.mark.parametrize("dialect", ["bigquery", "snowflake"])
def test_python_mode_statements_parse_quote_and_run_in_the_dialect(
    dialect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, simulator: Any
) -> None:
    from airflow_doi.provider.operators.base import DoiSqlOperator
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator
    from airflow_doi.provider.operators.resolve import DoiResolveOperator
    from airflow_doi.provider.operators.validate import DoiValidateOperator

    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as con:  # created unquoted, as users do
        con.execute("CREATE TABLE works (id INTEGER, doi_raw VARCHAR)")
        con.executemany("INSERT INTO works VALUES (?, ?)", list(enumerate(VALUES)))
    statements: list[str] = []
    monkeypatch.setattr(DoiSqlOperator, "get_db_hook",
                        lambda self: StandInHook(path, dialect, statements))
    common = {"conn_id": "wh", "table": "works", "doi_column": "doi_raw", "mode": "python"}
    summary = DoiNormalizeOperator(task_id="n", batch_size=3, **common).execute({})
    assert summary["rows_written"] == len(VALUES)
    again = DoiNormalizeOperator(task_id="n", batch_size=3, **common).execute({})
    assert again["rows_written"] == 0  # the fingerprint, in the dialect's own MD5
    report = DoiValidateOperator(task_id="v", max_invalid_share=1.0, **common).execute({})
    assert report["invalid_rows"] == 4
    # Upserts are one MERGE per batch (no ON CONFLICT there; no delete-then-insert window).
    resolved = DoiResolveOperator(task_id="r", conn_id="wh", table="works",
                                  batch_size=2).execute({})
    assert resolved["stored_keys"] == len(VALID_KEYS)
    assert any(sql.startswith("MERGE INTO") for sql in statements)
    assert not any(sql.startswith("DELETE") and "doi_resolution" in sql.lower()
                   and "doi_resolution_claims" not in sql.lower() for sql in statements)
    with duckdb.connect(str(path)) as con:
        rows = con.execute("SELECT doi_raw, doi, doi_key, doi_valid, doi_reason FROM works "
                           "ORDER BY id").fetchall()
        stored = dict(con.execute("SELECT doi_key, status FROM doi_resolution").fetchall())
    assert set(stored) == VALID_KEYS and stored["10.1000/MISSING"] == "not_found"
    assert rows == [(v, validate(v).doi, validate(v).key, validate(v).valid, validate(v).reason)
                    for v in VALUES]
    good, bad = QUOTING[dialect]
    table = {"bigquery": "`works`", "snowflake": '"WORKS"'}[dialect]
    naming = [sql for sql in statements if "works" in sql.lower()]
    assert len(naming) > 10
    for sql in naming:  # every statement on the user's table names it as the engine needs
        assert table in sql and good.search(sql), sql
    for sql in statements:
        assert not bad.search(sql), sql


@pytest.mark.parametrize("dialect", ["bigquery", "snowflake", "trino", "databricks"])
def test_push_down_statements_parse_in_the_dialect_and_quote_as_it_needs(dialect: str) -> None:
    from airflow_doi.db.statements import dialect_named
    from airflow_doi.provider.pushdown import FUNCTIONS, column_sql, plan

    assert plan("auto", dialect).in_database
    target = dialect_named(dialect)
    exprs = column_sql(None, target, "doi_raw")
    assert set(exprs) == set(FUNCTIONS)
    update = (f"UPDATE {target.quote('s.works')} SET {target.quote('doi_key')} = "
              f"{exprs['doi_key']} WHERE 1 = 1")
    [tree] = sqlglot.parse(update, read={"databricks": "databricks"}.get(dialect, dialect))
    assert isinstance(tree, sqlglot.exp.Update)
    quoted = {"bigquery": "`s`.`works`", "snowflake": '"S"."WORKS"', "trino": '"s"."works"',
              "databricks": "`s`.`works`"}[dialect]
    assert update.startswith(f"UPDATE {quoted} SET ")
    column = {"bigquery": "`doi_raw`", "snowflake": '"DOI_RAW"', "trino": '"doi_raw"',
              "databricks": "`doi_raw`"}[dialect]
    assert column in exprs["doi_key"]




class MariaDbHook:
    """A DB-API hook on the real MariaDB server (PyMySQL), one fresh database per test."""

    conn_type = "mysql"
    placeholder = "%s"

    def __init__(self, database: str) -> None:
        self.database = database

    def get_conn(self) -> Any:
        import pymysql

        url = urlparse(MARIADB_DSN)
        return pymysql.connect(host=url.hostname, port=url.port or 3306, user=url.username,
                               password=url.password or "", database=self.database,
                               charset="utf8mb4")


@pytest.fixture()
def mariadb(mariadb_database: str) -> Any:
    return MariaDbHook(mariadb_database)


@pytest.mark.parametrize("functions_schema", [None, "own"])
def test_operators_on_real_mariadb_keep_case_and_match_python(
    mariadb: MariaDbHook, functions_schema: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both modes on MariaDB, whose default collation folds case (and ``ß`` with ``s``):
    every row still gets its own value's answer. Without ``functions_schema`` the work is in
    the worker; with it (here the test's own database) one UPDATE and one GROUP BY call the
    generated functions, created there, and nothing is created anywhere else."""
    from airflow_doi.provider.operators.base import DoiSqlOperator
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator
    from airflow_doi.provider.operators.validate import DoiValidateOperator

    schema = mariadb.database if functions_schema else None
    values = [*VALUES, "10.1000/abc", "10.1000/Straße", "10.1000/STRASSE", "10.1000/strasse",
              "https://doi.org/10.1000/%C3%A9t%C3%A9", "urn:doi:10.1000:x%2Fy", " doi:10.1/a. "]
    conn = mariadb.get_conn()
    with conn.cursor() as cursor:
        cursor.execute("CREATE TABLE works (id INTEGER, doi_raw TEXT)")
        cursor.executemany("INSERT INTO works VALUES (%s, %s)", list(enumerate(values)))
    conn.commit()
    monkeypatch.setattr(DoiSqlOperator, "get_db_hook", lambda self: mariadb)
    lines: list[str] = []
    log = type("Log", (), {"info": lambda self, msg, *a: lines.append(msg % a),
                           "warning": lambda self, msg, *a: lines.append(msg % a)})()
    monkeypatch.setattr(DoiSqlOperator, "log", property(lambda self: log))
    common = {"conn_id": "catalogue", "table": "works", "doi_column": "doi_raw",
              "functions_schema": schema}
    DoiNormalizeOperator(task_id="n", batch_size=4, **common).execute({})
    report = DoiValidateOperator(task_id="v", max_invalid_share=1.0, **common).execute({})
    invalid = sum(not validate(v).valid for v in values)
    assert report["rows"] == len(values) and report["invalid_rows"] == invalid
    where = "in the database" if schema else "in the worker"
    assert sum(where in line for line in lines) == 2, lines
    conn = mariadb.get_conn()
    with conn.cursor() as cursor:
        cursor.execute("SELECT doi_raw, doi, doi_key, doi_valid, doi_reason FROM works ORDER BY id")
        rows = cursor.fetchall()
        cursor.execute("SELECT ROUTINE_SCHEMA, COUNT(*) FROM information_schema.ROUTINES "
                       "WHERE ROUTINE_NAME LIKE 'doi%%' GROUP BY ROUTINE_SCHEMA")
        routines = dict(cursor.fetchall())
    assert [(r[0], r[1], r[2], bool(r[3]), r[4]) for r in rows] == [
        (v, validate(v).doi, validate(v).key, validate(v).valid, validate(v).reason)
        for v in values]
    assert routines.get(mariadb.database, 0) == (13 if schema else 0)


def test_mariadb_push_down_needs_a_named_database(mariadb: MariaDbHook,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """mode='sql' on MariaDB without functions_schema says what to pass, before any change."""
    from airflow_doi.provider.operators.base import DoiSqlOperator
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator

    monkeypatch.setattr(DoiSqlOperator, "get_db_hook", lambda self: mariadb)
    operator = DoiNormalizeOperator(task_id="n", conn_id="c", table="works",
                                    doi_column="doi_raw", mode="sql")
    with pytest.raises(ValueError, match="functions_schema="):
        operator.execute({})


@pytest.mark.parametrize(("dialect", "expected"), [
    ("bigquery", "SELECT `doi_key` FROM `s`.`works` WHERE `doi_valid` = %s LIMIT %s"),
    ("mysql", "SELECT `doi_key` FROM `s`.`works` WHERE `doi_valid` = %s LIMIT %s"),
    ("snowflake", 'SELECT "DOI_KEY" FROM "S"."WORKS" WHERE "DOI_VALID" = ? LIMIT ?'),
    ("databricks", "SELECT `doi_key` FROM `s`.`works` WHERE `doi_valid` = ? LIMIT ?"),
])
def test_placeholders_are_the_drivers_own_and_never_touch_literals(dialect: str,
                                                                   expected: str) -> None:
    from airflow_doi.db.statements import dialect_named

    target = dialect_named(dialect, "%s" if dialect in ("bigquery", "mysql") else "?")
    ansi = 'SELECT "doi_key" FROM "s"."works" WHERE "doi_valid" = ? LIMIT ?'
    assert target.translate(ansi.replace("?", target.placeholder)) == expected
    literal = target.translate(f"SELECT 'a?b%s' FROM \"t\" WHERE \"x\" = {target.placeholder}")
    assert "'a?b%s'" in literal and literal.endswith(f"= {target.placeholder}")
