"""The generated Spark SQL file, run on Spark SQL in local mode against the Python reference.

One SparkSession for the whole module (it takes seconds to start); its own xdist group so a
second worker never starts another JVM beside it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_doi.sqlgen.conformance import INJECTION, expected, mixtures
from tests.conftest import ROOT
from tests.test_sql_engines import SELECT_ALL, cases, compare

pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.slow]


def statements(text: str) -> list[str]:
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    return [s.strip() for s in body.split(";\n") if s.strip()]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("airflow-doi-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    text = (ROOT / "sql" / "spark" / "doi_functions.sql").read_text(encoding="utf-8")
    for statement in statements(text):
        session.sql(statement)
    yield session
    session.stop()


def test_spark_agrees_with_python(spark: Any) -> None:
    values = [*cases(), *mixtures(3000)]
    frame = spark.createDataFrame(list(enumerate(values)), "i INT, x STRING")
    frame.createOrReplaceTempView("doi_cases")
    rows = spark.sql(f"SELECT i, {SELECT_ALL.format('x')} FROM doi_cases ORDER BY i").collect()
    compare("spark", [(values[row[0]], tuple(row[1:])) for row in rows])


def test_spark_injection_shaped_doi_round_trips(spark: Any) -> None:
    frame = spark.createDataFrame([(INJECTION,)], "x STRING")
    frame.createOrReplaceTempView("doi_injection")
    row = spark.sql("SELECT doi_normalize(x), doi_key(x) FROM doi_injection").collect()[0]
    assert tuple(row) == (INJECTION, expected(INJECTION).key)
    assert [t.name for t in spark.catalog.listTables() if not t.isTemporary] == []


def test_spark_long_and_hostile_values_agree(spark: Any) -> None:
    """10,000-character values: no JVM stack overflow in the regexes, Python's answers."""
    from tests.test_sql_engines import LONG_CASES

    values = list(LONG_CASES)
    frame = spark.createDataFrame(list(enumerate(values)), "i INT, x STRING")
    frame.createOrReplaceTempView("doi_long")
    rows = spark.sql(f"SELECT i, {SELECT_ALL.format('x')} FROM doi_long ORDER BY i").collect()
    compare("spark (long)", [(values[row[0]], tuple(row[1:])) for row in rows])
