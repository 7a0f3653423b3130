"""One small module per SQL dialect, each a :class:`~.base.Dialect` over the shared core."""

from __future__ import annotations

from airflow_doi.sqlgen.dialects.base import Dialect
from airflow_doi.sqlgen.dialects.bigquery import BigQuery
from airflow_doi.sqlgen.dialects.duckdb import DuckDB
from airflow_doi.sqlgen.dialects.mariadb import MariaDB
from airflow_doi.sqlgen.dialects.postgres import Postgres
from airflow_doi.sqlgen.dialects.redshift import Redshift
from airflow_doi.sqlgen.dialects.snowflake import Snowflake
from airflow_doi.sqlgen.dialects.spark import Databricks, Spark
from airflow_doi.sqlgen.dialects.sqlite import SQLite
from airflow_doi.sqlgen.dialects.trino import Trino

__all__ = ["DIALECTS", "Dialect"]

#: Every generated dialect, by directory name under ``sql/``.
DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        DuckDB(),
        Postgres(),
        SQLite(),
        Spark(),
        Databricks(),
        Snowflake(),
        BigQuery(),
        Trino(),
        Redshift(),
        MariaDB(),
    )
}
