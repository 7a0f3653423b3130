"""What the catalogue operators share: the SQL connection, its dialect and the table assets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook, BaseOperator

from airflow_doi.provider.sql import Dialect, dialect_named, quote_identifier

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook

__all__ = ["DoiSqlOperator", "connect", "dialect_of", "sql_hook"]

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
    from airflow.providers.common.sql.hooks.sql import DbApiHook

    connection = BaseHook.get_connection(conn_id)
    try:
        hook = connection.get_hook(hook_params=hook_params)  # type: ignore[no-untyped-call]
    except Exception as error:
        if connection.conn_type not in _DUCKDB_TYPES or "Unknown hook type" not in str(error):
            raise
        from airflow_doi.provider.hooks.duckdb import DuckDbHook

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
    from airflow_doi.provider.hooks.duckdb import DuckDbHook, lock_wait_of, wait_for_file

    if isinstance(hook, DuckDbHook) or dialect_of(hook).name != "duckdb":
        return hook.get_conn()  # ours waits by itself
    connection = BaseHook.get_connection(hook.get_conn_id())
    database = connection.host or connection.schema or ":memory:"
    return wait_for_file(hook.get_conn, database, lock_wait_of(connection.extra_dejson), hook.log)


def dialect_of(hook: DbApiHook) -> Dialect:
    """The SQL dialect of a DB-API hook: its connection type, else SQLAlchemy's name for it."""
    name = getattr(hook, "conn_type", None) or hook.dialect_name
    return dialect_named(str(name), hook.placeholder)


class DoiSqlOperator(BaseOperator):
    """Base of the operators that work on one table of any ``DbApiHook`` connection.

    :param conn_id: the SQL connection (SQLite, PostgreSQL, DuckDB, Snowflake, ...).
    :param table: the catalogue table, optionally schema-qualified (``schema.table``).
    :param batch_size: rows (or distinct values) per page read and per commit; templated
        (``"{{ params.batch_size }}"``), so it may arrive as a string.
    :param hook_params: keyword arguments for the connection's hook (e.g. Snowflake's
        ``warehouse`` and ``role``), as common-sql's operators take them; templated.
    """

    template_fields: Sequence[str] = ("conn_id", "table", "batch_size", "hook_params")
    ui_color = "#e8f4f8"

    def __init__(
        self, *, conn_id: str, table: str, batch_size: int | str = 10_000,
        hook_params: dict[str, Any] | None = None, **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.conn_id = conn_id
        self.hook_params = hook_params
        self.table = table
        self.batch_size = batch_size
        if isinstance(batch_size, int):
            _ = self.page_size  # fail at parse time when it is not templated

    @property
    def page_size(self) -> int:
        """``batch_size`` as a positive integer (after templating)."""
        try:
            size = int(self.batch_size)
        except (TypeError, ValueError):
            raise ValueError(f"batch_size must be an integer, not {self.batch_size!r}") from None
        if size < 1:
            raise ValueError("batch_size must be at least 1")
        return size

    def get_db_hook(self) -> DbApiHook:
        """The connection's own hook, which must speak the DB-API (common-sql ``DbApiHook``)."""
        return sql_hook(self.conn_id, self.hook_params)

    def check_identifiers(self, *names: str) -> None:
        """Fail before touching the database when a (templated) name is not a plain identifier."""
        for name in (self.table, *names):
            quote_identifier(name)

    def lineage_source(self) -> tuple[Any, Any]:
        """(hook, connection) for naming OpenLineage datasets (:mod:`.lineage`)."""
        return self.get_db_hook(), BaseHook.get_connection(self.conn_id)

    def emit_assets(self, context: Any, *tables: str) -> None:
        from airflow_doi.provider.assets import emit_table_assets, table_asset

        emit_table_assets(
            list(self.outlets or []), context, [table_asset(self.conn_id, t) for t in tables]
        )
