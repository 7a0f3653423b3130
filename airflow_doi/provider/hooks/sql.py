"""A SQL connection's DB-API hook, its connection (waiting for a held DuckDB file), its dialect.

Operators, assets and the report's Airflow branch all reach a database through these.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.common.sql.hooks.sql import DbApiHook
from airflow.sdk import BaseHook

from airflow_doi.db.statements import StatementDialect, dialect_named
from airflow_doi.provider.hooks.duckdb import DuckDbHook, lock_wait_of, wait_for_file

__all__ = ["connect", "dialect_of", "sql_hook"]

#: Connection types served by this project's DuckDB hook when no provider registers them.
_DUCKDB_TYPES = ("duckdb",)


def sql_hook(conn_id: str, hook_params: dict[str, Any] | None = None) -> DbApiHook:
    """The hook of a SQL connection (built with ``hook_params``, as common-sql's operators
    build theirs: a warehouse, a role, a database of the connection's engine); a clear error
    when the connection is not a SQL one.

    A ``duckdb`` connection gets the DuckDB provider's hook when it is installed (that type is
    theirs) and this project's :class:`~airflow_doi.provider.hooks.duckdb.DuckDbHook`
    otherwise.
    """
    connection = BaseHook.get_connection(conn_id)
    try:
        hook = connection.get_hook(hook_params=hook_params)  # type: ignore[no-untyped-call]
    except Exception as error:
        if connection.conn_type not in _DUCKDB_TYPES or "Unknown hook type" not in str(error):
            raise
        hook = DuckDbHook(duckdb_conn_id=conn_id, **(hook_params or {}))
    if not isinstance(hook, DbApiHook):
        raise TypeError(
            f"connection {conn_id!r} has hook {type(hook).__name__}, not a DbApiHook: "
            "the DOI operators need a SQL connection"
        )
    return hook


def connect(hook: DbApiHook) -> Any:
    """``hook.get_conn()``; on a DuckDB file held by another process, waits for it (the
    connection's ``lock_wait`` extra) whichever provider's hook it is."""
    if isinstance(hook, DuckDbHook) or dialect_of(hook).name != "duckdb":
        return hook.get_conn()  # ours waits by itself
    connection = BaseHook.get_connection(hook.get_conn_id())
    database = connection.host or connection.schema or ":memory:"
    return wait_for_file(hook.get_conn, database, lock_wait_of(connection.extra_dejson), hook.log)


def dialect_of(hook: DbApiHook) -> StatementDialect:
    """The SQL dialect of a DB-API hook: its connection type, else SQLAlchemy's name for it."""
    name = getattr(hook, "conn_type", None) or hook.dialect_name
    return dialect_named(str(name), hook.placeholder)
