"""PySpark: the DOI functions in a Spark session, run by the JVM, and the normalized columns.

:func:`register` creates ``doi_normalize``, ``doi_key``, ``doi_is_valid``, ``doi_reason`` and
``doi_url`` as temporary SQL functions of the session, from the generated file shipped with
the package (``airflow-doi sql print spark``): exact per the standard (tested on every
conformance vector), and evaluated inside Spark's executors: no Python worker per row, no
Arrow round trip. :func:`with_doi_columns` adds the four normalized columns to a DataFrame::

    from airflow_doi.spark import with_doi_columns
    catalogue = with_doi_columns(spark.table("catalogue"), "doi_raw")
    catalogue.groupBy("doi_key").count()

On Databricks, Unity Catalog keeps persistent functions instead: create them once with
``airflow-doi sql print databricks --schema main.doi`` (run the file in a SQL warehouse or a
notebook), then call ``main.doi.doi_key(x)`` from any cluster. Needs ``pyspark`` (the
``spark`` extra).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

import pyarrow as pa

from airflow_doi.columns import analyse
from airflow_doi.db.install import (
    NORMALIZE_FUNCTIONS,
    normalized_columns,
    shipped_sql,
    statements,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["FUNCTIONS", "Engine", "register", "with_doi_columns"]

#: Where :func:`with_doi_columns` computes: the session's SQL functions, or Arrow batches.
Engine = Literal["sql", "arrow"]

#: The SQL functions :func:`register` creates, each of one string argument.
FUNCTIONS: tuple[str, ...] = (*NORMALIZE_FUNCTIONS, "doi_url")


def register(spark: SparkSession) -> tuple[str, ...]:
    """Create (or replace) the DOI functions as temporary functions of ``spark``'s session;
    returns their names. A second call changes nothing."""
    for statement in statements(shipped_sql("spark")):
        spark.sql(statement)
    return FUNCTIONS


def with_doi_columns(frame: DataFrame, column: str, *, prefix: str = "doi",
                     engine: Engine = "sql") -> DataFrame:
    """``frame`` with ``column``'s DOI normalized, as the normalize operator writes it:
    ``<prefix>`` (the DOI, null when invalid), ``<prefix>_key`` (the comparison key),
    ``<prefix>_valid`` and ``<prefix>_reason``.

    ``engine="sql"`` (the default) calls the session's SQL functions (registered when the
    session lacks them): they run in the JVM and need nothing on the executors.
    ``engine="arrow"`` sends Arrow batches through :mod:`airflow_doi.columns` in Python workers
    (``mapInArrow``), on the native core: several times faster (``bench/dataframes.py``), and
    it needs airflow-doi installed where the executors' Python runs. The answers are the same.
    Raises ``ValueError`` when ``column`` is not one of ``frame``'s columns or a new column
    would replace one of them."""
    from pyspark.sql import functions

    if engine not in ("sql", "arrow"):
        raise ValueError(f"engine must be 'sql' or 'arrow', not {engine!r}")
    if column not in frame.columns:
        raise ValueError(f"no column {column!r} (columns: {', '.join(frame.columns)})")
    names = normalized_columns(prefix)
    clashes = [name for name in names if name in frame.columns]
    if clashes:
        raise ValueError(
            f"the frame already has {', '.join(clashes)}: pass another prefix= (the columns "
            f"added are {', '.join(names)})"
        )
    if engine == "arrow":
        return _with_arrow_columns(frame, column, names)
    spark = frame.sparkSession
    if not spark.catalog.functionExists("doi_key"):
        register(spark)
    quoted = "`" + column.replace("`", "``") + "`"
    return frame.withColumns({
        name: functions.expr(f"{call}({quoted})")
        for name, call in zip(names, NORMALIZE_FUNCTIONS, strict=True)
    })


def _with_arrow_columns(frame: DataFrame, column: str,
                        names: tuple[str, str, str, str]) -> DataFrame:
    """The four columns from one :func:`airflow_doi.columns.analyse` pass per Arrow batch."""
    from pyspark.sql.types import BooleanType, StringType, StructField, StructType

    kinds = (StringType(), StringType(), BooleanType(), StringType())
    added = [StructField(name, kind) for name, kind in zip(names, kinds, strict=True)]
    schema = StructType([*frame.schema.fields, *added])

    def add(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield _normalized_batch(batch, column, names)

    return frame.mapInArrow(add, schema)


def _normalized_batch(batch: pa.RecordBatch, column: str,
                      names: tuple[str, str, str, str]) -> pa.RecordBatch:
    outcome = analyse(batch.column(column))
    added = [outcome.doi.combine_chunks().cast(pa.string()),
             outcome.key().combine_chunks().cast(pa.string()), outcome.valid_array,
             outcome.reason.cast(pa.string())]
    return pa.RecordBatch.from_arrays([*batch.columns, *added],
                                      names=[*batch.schema.names, *names])
