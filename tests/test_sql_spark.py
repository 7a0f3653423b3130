"""The generated Spark SQL file, run on Spark SQL in local mode against the Python reference.

One SparkSession for the whole module (it takes seconds to start); its own xdist group so a
second worker never starts another JVM beside it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_doi.db.install import statements
from airflow_doi.sqlgen.conformance import INJECTION, expected, mixtures
from tests.conftest import ROOT
from tests.test_sql_engines import SELECT_ALL, cases, compare

pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.slow]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    # mapInArrow's Python workers run this venv's interpreter (it has pyarrow and airflow-doi).
    saved = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable
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
    if saved is None:
        os.environ.pop("PYSPARK_PYTHON", None)
    else:
        os.environ["PYSPARK_PYTHON"] = saved


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


def test_with_doi_columns_registers_the_functions_and_agrees_with_python(spark: Any) -> None:
    """airflow_doi.spark: the session's functions come from the shipped file (dropped first,
    so with_doi_columns must create them), and every conformance vector comes out as the
    scalar functions say, in the normalize operator's four columns."""
    from airflow_doi.spark import FUNCTIONS, register, with_doi_columns
    from airflow_doi.syntax import ascii_upper, validate
    from tests.conftest import syntax_vectors

    for name in FUNCTIONS:
        spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {name}")
    assert not spark.catalog.functionExists("doi_key")
    values = [v["input"] for v in syntax_vectors()
              if v["decode"] == "auto" and (v["input"] is None or isinstance(v["input"], str))]
    frame = spark.createDataFrame(list(enumerate(values)), "i INT, `doi raw` STRING")
    rows = with_doi_columns(frame, "doi raw", prefix="ref").orderBy("i").collect()
    assert spark.catalog.functionExists("doi_key")
    expected = [
        (outcome.doi, None if outcome.doi is None else ascii_upper(outcome.doi), outcome.valid,
         outcome.reason)
        for outcome in (validate(value) for value in values)
    ]
    assert [tuple(row)[2:] for row in rows] == expected
    arrow_rows = with_doi_columns(frame.repartition(3), "doi raw", prefix="ref",
                                  engine="arrow").orderBy("i").collect()
    assert [tuple(row)[2:] for row in arrow_rows] == expected
    with pytest.raises(ValueError, match="engine must be 'sql' or 'arrow'"):
        with_doi_columns(frame, "doi raw", engine="python")  # type: ignore[arg-type]
    assert rows and list(rows[0].asDict()) == ["i", "doi raw", "ref", "ref_key", "ref_valid",
                                               "ref_reason"]
    assert register(spark) == FUNCTIONS  # a second time changes nothing
    with pytest.raises(ValueError, match="already has ref, ref_key"):
        with_doi_columns(with_doi_columns(frame, "doi raw", prefix="ref"), "doi raw", prefix="ref")
    with pytest.raises(ValueError, match="no column 'doi'"):
        with_doi_columns(frame, "doi")


def test_readme_pyspark_block(spark: Any) -> None:
    """The README's PySpark block, with this module's session as ``spark``."""
    from tests.test_readme_blocks import block_under

    namespace: dict[str, object] = {"spark": spark}
    exec(compile(block_under("python", "PySpark"), "README:PySpark", "exec"), namespace)
    assert spark.sql("SELECT doi_key('doi:10.1000/abc') AS k").first().k == "10.1000/ABC"
    refs = namespace["refs"]
    columns = namespace["with_doi_columns"](refs, "doi_raw").columns  # type: ignore[operator]
    assert columns == ["doi_raw", "doi", "doi_key", "doi_valid", "doi_reason"]
