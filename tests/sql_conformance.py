"""Every generated SQL dialect against every conformance case, counted per engine.

The per-engine table in docs/sql-support.md is rendered from this run, never typed by hand:
``python -m tests.sql_conformance --write-docs`` rewrites it, and
``tests/test_sql_emulated.py`` fails when the committed table differs from what a run gives.

A case's answer is one of: *passed* (the five functions agree with Python), a *documented
exception* (the engine gives exactly the answer a stated limitation of that dialect predicts,
for an input that has the limitation's trigger; counted apart, never as a pass), or a
*failure*. Executed engines run the generated file itself; emulated ones run it on DuckDB
through :mod:`airflow_doi.sqlgen.emulate`.
"""

from __future__ import annotations

import argparse
import re
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import psycopg

from airflow_doi.db.sqlite import register
from airflow_doi.sqlgen import emulate
from airflow_doi.sqlgen.conformance import Answer, expected
from airflow_doi.syntax import validate
from tests.conftest import MARIADB_DSN, POSTGRES_DSN, ROOT
from tests.test_sql_engines import SELECT_ALL, cases

DOCS = ROOT / "docs" / "sql-support.md"
START, END = "<!-- conformance-table:start -->", "<!-- conformance-table:end -->"

#: What a run gives per case: the five answers, or None where the engine cannot hold the value.
Answers = list[tuple[str | None, "tuple[Any, ...] | None"]]


def sql_file(dialect: str) -> str:
    return (ROOT / "sql" / dialect / "doi_functions.sql").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Documented:
    """A documented limitation of a dialect, and the exact symptom it predicts."""

    label: str
    applies: Callable[[str | None, Answer, Answer | None], bool]


#: A legal character standing in for U+0000, and its percent-escaped form in a URL.
STAND_IN, STAND_IN_ESCAPED = "\u2603", "%E2%98%83"


def _nul_as_legal(value: str | None, want: Answer, got: Answer | None) -> bool:
    """Snowflake's patterns cannot see U+0000: its answer is Python's for the value with every
    U+0000 read as a legal character."""
    if value is None or "\x00" not in value or STAND_IN in value:
        return False
    legal = expected(value.replace("\x00", STAND_IN))

    def back(text: str | None, stand_in: str, nul: str) -> str | None:
        return None if text is None else text.replace(stand_in, nul)

    return got == legal._replace(
        doi=back(legal.doi, STAND_IN, "\x00"),
        key=back(legal.key, STAND_IN, "\x00"),
        url=back(legal.url, STAND_IN_ESCAPED, "%00"),
    )


def _refused_nul(value: str | None, want: Answer, got: Answer | None) -> bool:
    return got is None and value is not None and "\x00" in value


_NON_ASCII_ESCAPE = re.compile("%[89A-Fa-f][0-9A-Fa-f]")


def _non_ascii_escape(value: str | None, want: Answer, got: Answer | None) -> bool:
    # Only where decoding matters (URL, URN and info forms; a bare DOI keeps "%C3" as is).
    return (
        value is not None
        and _NON_ASCII_ESCAPE.search(value) is not None
        and validate(value, decode="never") != validate(value)
        and got == Answer(None, None, False, "bad_encoding", None)
    )


def _no_url_for_non_ascii(value: str | None, want: Answer, got: Answer | None) -> bool:
    return want.doi is not None and not want.doi.isascii() and got == want._replace(url=None)


#: Per dialect, the limitations its file header states, as predicates over (input, Python's
#: answer, the engine's answer). Anything else that differs from Python is a failure.
EXCEPTIONS: dict[str, tuple[Documented, ...]] = {
    "postgres": (
        Documented("U+0000 cannot be stored in `text` (the driver refuses it)", _refused_nul),
    ),
    "snowflake": (
        Documented("U+0000 in an input is read as a legal character", _nul_as_legal),
    ),
    "redshift": (
        Documented(
            "non-ASCII percent-escapes (`%80`-`%FF`) give `bad_encoding`", _non_ascii_escape
        ),
        Documented("`doi_url` is NULL for a DOI with non-ASCII characters", _no_url_for_non_ascii),
    ),
}


@dataclass
class Outcome:
    dialect: str
    level: str
    engine: str
    total: int = 0
    passed: int = 0
    exceptions: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


def classify(dialect: str, level: str, engine: str, answers: Answers) -> Outcome:
    outcome = Outcome(dialect, level, engine, total=len(answers))
    for value, row in answers:
        want = expected(value)
        got = None if row is None else Answer(*row)
        if got == want:
            outcome.passed += 1
            continue
        rule = next((d for d in EXCEPTIONS.get(dialect, ()) if d.applies(value, want, got)), None)
        if rule is not None:
            outcome.exceptions[rule.label] += 1
        else:
            outcome.failures.append(f"{dialect}: {value!r}: python {want} != {got}")
    return outcome


# --- runners: each gives (value, five answers | None) for every value, in order ---------------


def _table_rows(con: Any, values: Sequence[str | None], placeholder: str = "?") -> Answers:
    con.execute("CREATE TABLE doi_cases (i INTEGER, x VARCHAR)")
    con.executemany(f"INSERT INTO doi_cases VALUES ({placeholder}, {placeholder})",
                    list(enumerate(values)))
    rows = con.execute(f"SELECT i, {SELECT_ALL.format('x')} FROM doi_cases ORDER BY i").fetchall()
    return [(values[row[0]], tuple(row[1:])) for row in rows]


def run_duckdb(values: Sequence[str | None]) -> Answers:
    con = duckdb.connect()
    con.execute(sql_file("duckdb"))
    return _table_rows(con, values)


@cache
def emulation(dialect: str) -> tuple[str, ...]:
    """The DuckDB macros emulating a dialect's file (transpiling Redshift's takes seconds)."""
    return tuple(emulate.macros(dialect, sql_file(dialect)))


def emulated_connection(dialect: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for statement in emulation(dialect):
        con.execute(statement)
    return con


def run_emulated(dialect: str, values: Sequence[str | None]) -> Answers:
    return _table_rows(emulated_connection(dialect), values)


def run_sqlite(values: Sequence[str | None]) -> Answers:
    import sqlite3

    con = sqlite3.connect(":memory:")
    register(con)
    out: Answers = []
    for value in values:
        row = con.execute(f"SELECT {SELECT_ALL.format('?1')}", [value]).fetchone()
        # SQLite has no boolean type: doi_is_valid gives 1 or 0.
        out.append((value, (*row[:2], {1: True, 0: False}.get(row[2], row[2]), *row[3:])))
    return out


def run_postgres(values: Sequence[str | None], dsn: str = POSTGRES_DSN) -> Answers:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
        try:
            con.execute(f'SET search_path TO "{schema}"')
            con.execute(sql_file("postgres"))
            storable = [v for v in values if v is None or "\x00" not in v]
            con.execute("CREATE TABLE doi_cases (i integer, x text)")
            with con.cursor() as cur:
                cur.executemany("INSERT INTO doi_cases VALUES (%s, %s)", list(enumerate(storable)))
            rows = con.execute(
                f"SELECT i, {SELECT_ALL.format('x')} FROM doi_cases ORDER BY i"
            ).fetchall()
            by_value: dict[str | None, tuple[Any, ...] | None] = {
                storable[row[0]]: tuple(row[1:]) for row in rows
            }
            for value in set(values) - set(storable):
                try:
                    con.execute("SELECT doi_key(%s)", [value])
                except psycopg.DataError:
                    by_value[value] = None  # refused before any SQL ran
                else:  # pragma: no cover - a server that stores U+0000 would be news
                    raise AssertionError("PostgreSQL accepted U+0000 in text")
        finally:
            con.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return [(value, by_value[value]) for value in values]


def run_mariadb(values: Sequence[str | None], dsn: str = MARIADB_DSN) -> Answers:
    """The MariaDB file in a database of its own (the server's case-blind default collation,
    as most catalogues have it), dropped afterwards."""
    from urllib.parse import urlparse

    import pymysql

    from airflow_doi.db.install import mariadb_statements

    url = urlparse(dsn)
    database = f"t_{uuid.uuid4().hex[:12]}"
    con = pymysql.connect(host=url.hostname, port=url.port or 3306, user=url.username,
                          password=url.password or "", charset="utf8mb4", autocommit=True)
    try:
        with con.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{database}` COLLATE utf8mb4_general_ci")
            try:
                cur.execute(f"USE `{database}`")
                for statement in mariadb_statements(sql_file("mariadb")):
                    cur.execute(statement)
                cur.execute("CREATE TABLE doi_cases (i INTEGER, x LONGTEXT)")
                cur.executemany("INSERT INTO doi_cases VALUES (%s, %s)", list(enumerate(values)))
                cur.execute(f"SELECT i, {SELECT_ALL.format('x')} FROM doi_cases ORDER BY i")
                rows = cur.fetchall()
            finally:
                cur.execute(f"DROP DATABASE `{database}`")
    finally:
        con.close()
    # MariaDB has no boolean type: doi_is_valid gives 1 or 0.
    return [(values[row[0]], (*row[1:3], {1: True, 0: False}.get(row[3], row[3]), *row[4:]))
            for row in rows]


@contextmanager
def spark_session() -> Iterator[Any]:
    """A local Spark SQL session (one JVM; the tests keep Spark in one xdist group)."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("airflow-doi-conformance")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def _spark_rows(session: Any, values: Sequence[str | None]) -> Answers:
    frame = session.createDataFrame(list(enumerate(values)), "i INT, x STRING")
    view = f"doi_cases_{uuid.uuid4().hex[:8]}"
    frame.createOrReplaceTempView(view)
    rows = session.sql(f"SELECT i, {SELECT_ALL.format('x')} FROM {view} ORDER BY i").collect()
    return [(values[row[0]], tuple(row[1:])) for row in rows]


def statements(text: str) -> list[str]:
    return emulate.databricks_statements(text)


def spark_functions(spark: Any) -> Any:
    """A fresh session (its own temporary functions) with sql/spark installed."""
    session = spark.newSession()
    for statement in statements(sql_file("spark")):
        session.sql(statement)
    return session


@contextmanager
def databricks_functions(spark: Any) -> Iterator[Any]:
    """A fresh session with sql/databricks run unchanged: persistent SQL functions in a
    database of their own (so no temporary function of the Spark file can shadow them),
    dropped afterwards."""
    session = spark.newSession()
    database = f"doi_databricks_{uuid.uuid4().hex[:8]}"
    session.sql(f"CREATE DATABASE {database}")
    try:
        session.sql(f"USE {database}")
        for statement in statements(sql_file("databricks")):
            session.sql(statement)
        yield session
    finally:
        session.sql(f"DROP DATABASE {database} CASCADE")


def run_spark(spark: Any, values: Sequence[str | None]) -> Answers:
    return _spark_rows(spark_functions(spark), values)


def run_databricks(spark: Any, values: Sequence[str | None]) -> Answers:
    with databricks_functions(spark) as session:
        return _spark_rows(session, values)


# --- the whole run and its table ------------------------------------------------------------

#: (dialect, level of proof, what runs it), in table order.
ENGINES: tuple[tuple[str, str, str], ...] = (
    ("duckdb", "executed", "DuckDB (python `duckdb`)"),
    ("postgres", "executed", "PostgreSQL server"),
    ("mariadb", "executed", "MariaDB server"),
    ("sqlite", "executed", "SQLite (python `sqlite3`; the functions call the Python reference)"),
    ("spark", "executed", "Spark SQL (pyspark, local mode)"),
    ("databricks", "executed", "Spark SQL (pyspark, local mode), the file unchanged"),
    ("snowflake", "emulated", "DuckDB, bodies transpiled by sqlglot (snowflake → duckdb)"),
    ("bigquery", "emulated", "DuckDB, bodies transpiled by sqlglot (bigquery → duckdb)"),
    ("trino", "emulated", "DuckDB, bodies transpiled by sqlglot (trino → duckdb)"),
    ("redshift", "emulated", "DuckDB, bodies transpiled by sqlglot (redshift → duckdb)"),
)


def run_all(spark: Any, values: Sequence[str | None] | None = None) -> list[Outcome]:
    values = list(cases() if values is None else values)
    outcomes = []
    for dialect, level, engine in ENGINES:
        if dialect == "duckdb":
            answers = run_duckdb(values)
        elif dialect == "postgres":
            answers = run_postgres(values)
        elif dialect == "mariadb":
            answers = run_mariadb(values)
        elif dialect == "sqlite":
            answers = run_sqlite(values)
        elif dialect == "spark":
            answers = run_spark(spark, values)
        elif dialect == "databricks":
            answers = run_databricks(spark, values)
        else:
            answers = run_emulated(dialect, values)
        outcomes.append(classify(dialect, level, engine, answers))
    return outcomes


def render(outcomes: Sequence[Outcome]) -> str:
    """The table and the list of emulation shims, between the markers."""
    lines = [
        START,
        "<!-- GENERATED by `python -m tests.sql_conformance --write-docs`: do not edit. -->",
        "",
        "| Dialect | Proof | Run on | Cases agreeing with Python | Documented exceptions |"
        " Failures | Emulation shims |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        exceptions = "; ".join(f"{n}: {label}" for label, n in sorted(o.exceptions.items()))
        count = len(emulate.SHIMS.get(o.dialect, ()))
        lines.append(
            f"| `{o.dialect}` | **{o.level}** | {o.engine} | {o.passed} / {o.total} |"
            f" {exceptions or 'none'} | {len(o.failures)} |"
            f" {count if o.level == 'emulated' else '—'} |"
        )
    lines += [
        "",
        "Emulation shims: where sqlglot's own mapping of a function to DuckDB is wrong, the"
        " harness (`airflow_doi/sqlgen/emulate.py`) substitutes its own, checked against the"
        " engine's documentation rather than run on the engine:",
        "",
    ]
    for dialect, shims in emulate.SHIMS.items():
        lines += [f"- {dialect}: {shim}" for shim in shims] or [f"- {dialect}: none."]
    lines.append(END)
    return "\n".join(lines)


def committed_table(path: Path = DOCS) -> str:
    text = path.read_text(encoding="utf-8")
    start, end = text.index(START), text.index(END) + len(END)
    return text[start:end]


def write_docs(table: str, path: Path = DOCS) -> None:
    text = path.read_text(encoding="utf-8")
    start, end = text.index(START), text.index(END) + len(END)
    path.write_text(text[:start] + table + text[end:], encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.sql_conformance",
        description="Run every dialect's generated SQL on the conformance cases and print"
        " (or write into docs/sql-support.md) the per-engine table.",
    )
    parser.add_argument("--write-docs", action="store_true", help="rewrite the table in docs")
    args = parser.parse_args(argv)
    with spark_session() as spark:
        outcomes = run_all(spark)
    table = render(outcomes)
    failures = [f for o in outcomes for f in o.failures]
    print(table)
    for failure in failures:
        print(failure, file=sys.stderr)
    if args.write_docs:
        write_docs(table)
        print(f"wrote the table into {DOCS}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
