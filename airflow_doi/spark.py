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

:func:`snapshot_metadata` reads the agencies' public data files on Spark's executors (each
member of a tar a byte range of it, read where it lies) and maps their records to the
``doi_metadata`` columns with ``mapInArrow``, by the same reader as ``airflow-doi enrich
--snapshot``, joined to a catalogue on ``doi_key``::

    from airflow_doi.spark import snapshot_metadata
    metadata = snapshot_metadata(spark, ["/data/crossref-2025.tar"], spark.table("catalogue"))
    metadata.write.mode("overwrite").saveAsTable("doi_metadata")
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

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

__all__ = ["FUNCTIONS", "Engine", "register", "snapshot_metadata", "with_doi_columns"]

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


#: The columns of :func:`snapshot_metadata`'s rows: ``doi_metadata``'s, in its order.
def _metadata_columns() -> tuple[str, ...]:
    from airflow_doi.metadata.result import METADATA_COLUMNS

    return ("doi_key", *(c for c in METADATA_COLUMNS if c not in ("input", "key")))


_INTEGER_COLUMNS = frozenset({"year", "author_count", "attempts", "http_status"})
_TIME_COLUMNS = frozenset({"fetched_at", "expires_at"})
#: The member rows the executors read (a byte range of a file each).
_MEMBER_FIELDS = ("source", "path", "name", "offset", "size", "mtime", "container")


def snapshot_metadata(spark: SparkSession, paths: list[str] | str,
                      catalogue: DataFrame | None = None, *, key_column: str = "doi_key",
                      doi_column: str | None = "doi", metadata_ttl: float = 30 * 86400.0,
                      max_csl_bytes: int = 65536, partitions: int | None = None) -> DataFrame:
    """The ``doi_metadata`` rows of the data files at ``paths`` (Crossref's tar or JSON-lines
    files, DataCite's tar, folders of them: paths every executor can read) for the keys of
    ``catalogue`` (its ``key_column``, joined on ``doi_key``; the DOI of each row is the
    catalogue's ``doi_column`` where given), or for every record without one.

    The members are listed on the driver (a tar's headers only) and read on the executors,
    ``partitions`` tasks (default: four per core of the cluster), each member once, by the
    reader of :mod:`airflow_doi.metadata.snapshot`; the catalogue's keys go to the executors
    as a broadcast set (about 60 bytes a key). A key in several files gets its newest record.
    Raises ``ValueError`` for paths that hold no data file, or a gzipped tar (which cannot be
    read in parts: give the plain tar)."""
    from datetime import datetime, timedelta, timezone

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from airflow_doi.metadata.snapshot import index_snapshots

    index = index_snapshots([paths] if isinstance(paths, str) else list(paths))
    if index.streams:
        raise ValueError(f"{', '.join(s.shown for s in index.streams)}: a gzipped tar is read "
                         "in one pass and cannot be split among executors: give Spark the "
                         "plain tar (gunzip it once) or the folder of its members")
    if not index.members:
        raise ValueError(f"{paths}: no data file found")
    now = datetime.now(timezone.utc)
    fetched = index.date or now
    expires = now + timedelta(seconds=metadata_ttl)
    wanted = None
    keys: Any = None
    if catalogue is not None:
        if key_column not in catalogue.columns:
            raise ValueError(f"no column {key_column!r} (columns: {', '.join(catalogue.columns)})")
        keys = catalogue.where(F.col(key_column).isNotNull()).select(key_column).distinct()
        wanted = spark.sparkContext.broadcast(frozenset(r[0] for r in keys.collect()))
    columns = _metadata_columns()
    schema = _metadata_schema(columns)
    members = spark.createDataFrame(
        [tuple(getattr(m, f) for f in _MEMBER_FIELDS) for m in index.members],
        "source STRING, path STRING, name STRING, offset LONG, size LONG, mtime DOUBLE, "
        "container STRING")
    count = partitions or max(1, spark.sparkContext.defaultParallelism * 4)
    members = members.repartition(min(count, len(index.members)))

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from airflow_doi.metadata.snapshot.files import Limits, Member
        from airflow_doi.metadata.snapshot.records import RecordReader, RowSettings
        from airflow_doi.metadata.snapshot.scan import read_member

        reader = RecordReader(wanted.value if wanted is not None else None, Limits(),
                              RowSettings(fetched, expires, max_csl_bytes))
        arrow_schema = _arrow_schema(columns)
        for batch in batches:
            for member in batch.to_pylist():
                scanned = read_member(reader, Member(**member))
                rows = [{**_row(result, columns), "_stamp": stamp}
                        for result, stamp in zip(scanned.found, scanned.stamps, strict=True)]
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)

    found = members.mapInArrow(read, schema)
    newest = Window.partitionBy("doi_key").orderBy(F.col("_stamp").desc_nulls_last())
    rows = (found.withColumn("_rank", F.row_number().over(newest))
            .where(F.col("_rank") == 1).drop("_rank", "_stamp"))
    if catalogue is None:
        return rows
    spelled = catalogue.where(F.col(key_column).isNotNull()).groupBy(
        F.col(key_column).alias("doi_key"))
    if doi_column is not None and doi_column in catalogue.columns:
        catalogue_keys = spelled.agg(F.min(doi_column).alias("_doi"))
        joined = rows.join(catalogue_keys, "doi_key", "inner")
        return joined.withColumn("doi", F.coalesce("_doi", "doi")).drop("_doi").select(
            *columns)
    return rows.join(keys.select(F.col(key_column).alias("doi_key")), "doi_key",
                     "inner").select(*columns)


def _row(result: Any, columns: tuple[str, ...]) -> dict[str, Any]:
    values = {"doi_key": result.key}
    for name in columns[1:]:
        values[name] = getattr(result, name)
    return values


def _arrow_schema(columns: tuple[str, ...]) -> pa.Schema:
    fields = [pa.field(name, pa.int64() if name in _INTEGER_COLUMNS
                       else pa.timestamp("us", tz="UTC") if name in _TIME_COLUMNS
                       else pa.string()) for name in columns]
    return pa.schema([*fields, pa.field("_stamp", pa.string())])


def _metadata_schema(columns: tuple[str, ...]) -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    return StructType([
        *(StructField(name, LongType() if name in _INTEGER_COLUMNS
                      else TimestampType() if name in _TIME_COLUMNS else StringType())
          for name in columns),
        StructField("_stamp", StringType())])
