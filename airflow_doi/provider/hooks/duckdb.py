"""A minimal DB-API hook for DuckDB files, so every common-sql operator works on them.

The only DuckDB provider on PyPI (``airflow-provider-duckdb`` 0.2) predates Airflow 3 and is
unmaintained, so the embedded default of this project ships its own: connection type
``duckdb``, the database file in ``host`` (empty for an in-memory database), ``read_only`` in
the extras. DuckDB takes one writer process per file: open connections for a task, close them
before handing the file to dbt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.common.sql.hooks.sql import DbApiHook

if TYPE_CHECKING:
    import duckdb

__all__ = ["DuckDbHook"]


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


class DuckDbHook(DbApiHook):
    """Talk to a DuckDB database file through the DB-API (placeholder ``?``)."""

    conn_name_attr = "duckdb_conn_id"
    default_conn_name = "duckdb_default"
    conn_type = "duckdb"
    hook_name = "DuckDB (file)"
    supports_autocommit = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._placeholder = "?"

    @property
    def database(self) -> str:
        """The database file of the connection (``host``, else ``schema``), or ``:memory:``."""
        connection = self.get_connection(self.get_conn_id())
        return connection.host or connection.schema or ":memory:"

    def get_conn(self) -> duckdb.DuckDBPyConnection:
        import duckdb

        connection = self.get_connection(self.get_conn_id())
        read_only = _truthy(connection.extra_dejson.get("read_only", False))
        return duckdb.connect(self.database, read_only=read_only)

    def get_uri(self) -> str:
        return f"duckdb:///{self.database}"

    @property
    def dialect_name(self) -> str:
        return "duckdb"

    def set_autocommit(self, conn: Any, autocommit: bool) -> None:
        """DuckDB commits each statement unless a transaction is open: nothing to switch."""

    def get_autocommit(self, conn: Any) -> bool:
        return False
