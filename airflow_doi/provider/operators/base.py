"""The base of the catalogue operators: one table of a SQL connection, its page size, its assets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook, BaseOperator

from airflow_doi._moved import moved
from airflow_doi.db.statements import quote_identifier
from airflow_doi.provider.assets import emit_table_assets, table_asset
from airflow_doi.provider.hooks.sql import sql_hook

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook

__all__ = ["DoiSqlOperator"]

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
        emit_table_assets(
            list(self.outlets or []), context, [table_asset(self.conn_id, t) for t in tables]
        )


#: sql_hook, connect and dialect_of moved to :mod:`airflow_doi.provider.hooks.sql`.
__getattr__ = moved(
    __name__, "airflow_doi.provider.hooks.sql", ("connect", "dialect_of", "sql_hook")
)
