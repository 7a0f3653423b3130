"""Every dialect proven by running it: Snowflake, BigQuery, Trino and Redshift emulated on
DuckDB (bodies transpiled by sqlglot, :mod:`airflow_doi.sqlgen.emulate`), Databricks executed
unchanged on Spark SQL, beside the engines that run their own files; and the per-engine table
in docs/sql-support.md checked against the run (:mod:`tests.sql_conformance`).

All the Spark work is one test in the ``spark`` xdist group (see its docstring for why one).
"""

from __future__ import annotations

import re

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from airflow_doi.sqlgen import emulate
from airflow_doi.sqlgen.conformance import expected
from tests import sql_conformance as conformance
from tests.test_sql_engines import LONG_CASES, SELECT_ALL, cases

#: Long and hostile values beyond LONG_CASES: NUL raw and decoded, a long run of multi-byte
#: escapes.
HOSTILE_CASES: tuple[str, ...] = (
    *LONG_CASES,
    "urn:doi:10.1000:" + "%C3%A9" * 2_000,
    "10.1000/a\x00b",
    "\x00",
    "https://doi.org/10.1000/a%00",
)

#: 1 MB values, where the engine allows them (Snowflake, BigQuery, Trino, Spark/Databricks).
MEGABYTE_CASES: tuple[str, ...] = ("10.1000/" + "x" * 1_000_000, "%" * 1_000_000)

#: Redshift's VARCHAR holds at most 65,535 bytes: its longest values instead.
REDSHIFT_MAX_CASES: tuple[str, ...] = ("10.1000/" + "x" * 65_000, "%" * 65_535)


def hostile(dialect: str) -> list[str]:
    longest = REDSHIFT_MAX_CASES if dialect == "redshift" else MEGABYTE_CASES
    return [*HOSTILE_CASES, *longest]


#: Lone surrogates: Python strings can hold them, no engine's UTF-8 strings can.
SURROGATES: tuple[str, ...] = ("10.1000/\ud800", "\udfff10.1000/x")


@pytest.mark.xdist_group("spark")
@pytest.mark.slow
def test_every_dialect_on_every_case_and_the_committed_table(postgres_dsn: str) -> None:
    """Every dialect on every conformance case: each agrees with Python or gives exactly a
    documented exception of its own; docs/sql-support.md holds exactly the table this run
    renders (regenerate it with ``python -m tests.sql_conformance --write-docs``).

    One test for all the Spark work (this run, 1 MB values, lone surrogates): pytest 9.2 reads
    node ids from ``Node._id`` while pytest-xdist 3.8 writes its ``@group`` suffix to
    ``_nodeid``, so ``xdist_group`` does not keep tests on one worker, and every further test
    using Spark could start a second JVM in parallel."""
    with conformance.spark_session() as spark:
        outcomes = conformance.run_all(spark)
        for dialect, run in (("spark", conformance.run_spark),
                             ("databricks", conformance.run_databricks)):
            answers = run(spark, hostile(dialect))
            long = conformance.classify(dialect, "executed", "spark", answers)
            assert long.passed == long.total, "\n".join(f[:500] for f in long.failures)
        surrogates = conformance.run_spark(spark, list(SURROGATES))
    problems = []
    for outcome in outcomes:
        print(f"{outcome.dialect} ({outcome.level}): {outcome.passed}/{outcome.total} agree with"
              f" Python, documented exceptions {dict(outcome.exceptions)}")
        problems += outcome.failures
        if outcome.passed + sum(outcome.exceptions.values()) != outcome.total:
            problems.append(f"{outcome.dialect}: cases unaccounted for")
        # An exception only counts for a dialect whose file header states that limitation.
        labels = {d.label for d in conformance.EXCEPTIONS.get(outcome.dialect, ())}
        if not set(outcome.exceptions) <= labels or outcome.total < 200:
            problems.append(f"{outcome.dialect}: {outcome.exceptions}, {outcome.total} cases")
    assert not problems, "\n".join(problems)
    assert conformance.committed_table() == conformance.render(outcomes)
    # Spark strings are UTF-8 (UTF8String): pyspark's serializer turns a lone surrogate into
    # U+FFFD before any SQL runs, and the functions answer for the value Spark holds.
    for value, row in surrogates:
        assert value is not None
        held = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
        assert row == tuple(expected(held)), value


@pytest.mark.parametrize("dialect", emulate.EMULATED)
def test_emulated_long_and_hostile_values_agree(dialect: str) -> None:
    con = conformance.emulated_connection(dialect)
    answers = conformance._table_rows(con, hostile(dialect))
    outcome = conformance.classify(dialect, "emulated", "duckdb", answers)
    print(f"{dialect} (long): {outcome.passed}/{outcome.total}, {dict(outcome.exceptions)}")
    assert not outcome.failures, "\n".join(f[:500] for f in outcome.failures)
    # DuckDB, like the four engines' UTF-8 strings, cannot hold a lone surrogate: the client
    # refuses it before any SQL runs, instead of a wrong answer.
    for value in SURROGATES:
        with pytest.raises(duckdb.InvalidInputException, match="surrogate"):
            con.execute(f"SELECT {SELECT_ALL.format('$1')}", [value])


@pytest.mark.parametrize("dialect", emulate.EMULATED)
def test_emulation_runs_every_function_of_the_file(dialect: str) -> None:
    """Each CREATE FUNCTION of the file becomes a macro of the same name and parameters, and
    the string literals of the bodies reach DuckDB unchanged (only shims add or rewrite)."""
    text = conformance.sql_file(dialect)
    functions = emulate.read_functions(dialect, text)
    created = {s.this.this.name for s in sqlglot.parse(text, read=dialect) if s}
    assert [f.name for f in functions] == [
        s.this.this.name for s in sqlglot.parse(text, read=dialect) if s
    ]
    assert {"doi_normalize", "doi_key", "doi_is_valid", "doi_reason", "doi_url"} <= created
    con = conformance.emulated_connection(dialect)
    macros = {name for (name,) in con.execute(
        "SELECT function_name FROM duckdb_functions() WHERE function_type = 'macro'"
        " AND NOT internal").fetchall()}
    assert created <= macros
    for function in functions:
        statement = next(m for m in conformance.emulation(dialect)
                         if m.startswith(f"CREATE OR REPLACE MACRO {function.name}("))
        for lit in _literals(function.body):
            quoted = exp.Literal.string(_as_re2(dialect, lit.name)).sql("duckdb")
            assert quoted in statement, (function.name, quoted)


#: Regular-expression parameters (Snowflake's 'cs', Redshift's 'pe'): sqlglot turns them
#: into DuckDB options or a (?s) prefix, so they need not survive as literals.
_FLAGS = re.compile("[cimnpse]{1,3}")


def _literals(node: exp.Expression) -> list[exp.Literal]:
    return [
        lit for lit in node.find_all(exp.Literal)
        if lit.is_string and not _FLAGS.fullmatch(lit.name)
    ]


def _as_re2(dialect: str, text: str) -> str:
    # The documented shim: $1 in Trino's and Redshift's replacements is RE2's \1.
    return re.sub(r"\$(\d)", r"\\\1", text) if dialect in ("trino", "redshift") else text


@pytest.mark.parametrize("dialect", ["duckdb", "postgres", "sqlite"])
def test_executed_engines_take_megabyte_and_nul_values(dialect: str, postgres_dsn: str) -> None:
    """The 1 MB and NUL values on the engines that run their own files (the 10,000-character
    ones are in tests/test_sql_engines.py); PostgreSQL refuses U+0000 (its documented
    exception) and nothing else."""
    values = [*HOSTILE_CASES[len(LONG_CASES):], *MEGABYTE_CASES]
    if dialect == "duckdb":
        answers = conformance.run_duckdb(values)
    elif dialect == "postgres":
        answers = conformance.run_postgres(values, postgres_dsn)
    else:
        answers = conformance.run_sqlite(values)
    outcome = conformance.classify(dialect, "executed", dialect, answers)
    assert not outcome.failures, "\n".join(f[:500] for f in outcome.failures)
    nul = sum("\x00" in v for v in values)
    assert outcome.passed == outcome.total - (nul if dialect == "postgres" else 0)



def test_emulation_catches_the_corruption_parsing_missed() -> None:
    """Not vacuous: the Snowflake file as str.splitlines() once indented it (U+0085, U+2028
    and U+2029 inside the patterns turned into line breaks) parses fine, and fails here."""
    text = conformance.sql_file("snowflake")
    corrupted = "\n".join(text.splitlines())
    assert corrupted != text
    assert all(s is not None for s in sqlglot.parse(corrupted, read="snowflake"))
    con = duckdb.connect()
    emulate.install(con, "snowflake", corrupted)
    answers = conformance._table_rows(con, cases())
    outcome = conformance.classify("snowflake", "emulated", "duckdb", answers)
    print(f"corrupted snowflake file: {len(outcome.failures)} failures")
    assert len(outcome.failures) >= 10
