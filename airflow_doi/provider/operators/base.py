"""The operator bases: DoiSqlOperator, DoiColumnOperator, DoiDueKeysOperator; check_batch_size.

:class:`DoiSqlOperator`: one table of a SQL connection, its batch size, its assets.
:class:`DoiColumnOperator`: its DOI column (normalize, validate). :class:`DoiDueKeysOperator`:
its due keys asked of the proxy (resolve, enrich).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from airflow.sdk import BaseHook, BaseOperator

from airflow_doi.db.sqlite import register as register_sqlite
from airflow_doi.db.statements import (
    fold_identifier,
    quote_identifier,
    require_columns,
    sibling_table,
)
from airflow_doi.provider.assets import emit_table_assets, table_asset
from airflow_doi.provider.hooks import sql as sql_hooks
from airflow_doi.provider.hooks.doi_column import DoiColumn
from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook
from airflow_doi.provider.lineage import dataset, operator_lineage
from airflow_doi.provider.pushdown import Plan, check_mode, plan

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook

    from airflow_doi.provider.hooks.due_keys import DueKeysOptions

__all__ = [
    "DoiColumnOperator", "DoiDueKeysOperator", "DoiSqlOperator", "check_batch_size", "check_flag",
]


def check_batch_size(batch_size: int | str) -> int:
    """``batch_size`` as a positive integer (it may come from a template, as a string)."""
    try:
        size = int(batch_size)
    except (TypeError, ValueError):
        raise ValueError(f"batch_size must be an integer, not {batch_size!r}") from None
    if size < 1:
        raise ValueError("batch_size must be at least 1")
    return size


def check_flag(name: str, value: bool | str) -> bool:
    """A yes/no parameter (it may come from a template, as ``"True"`` or ``"false"``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"{name} must be true or false, not {value!r}")


class DoiSqlOperator(BaseOperator):
    """Base of the operators that work on one table of any ``DbApiHook`` connection.

    :param conn_id: the SQL connection (SQLite, PostgreSQL, DuckDB, Snowflake, ...).
    :param table: the catalogue table, optionally schema-qualified (``schema.table``).
    :param batch_size: rows (or distinct values) per page read and per commit; templated
        (``"{{ params.batch_size }}"``), so it may arrive as a string
        (:func:`check_batch_size` reads it).
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
            check_batch_size(batch_size)  # fail at parse time when it is not templated

    def get_db_hook(self) -> DbApiHook:
        """The connection's own hook, which must speak the DB-API (common-sql ``DbApiHook``)."""
        return sql_hooks.sql_hook(self.conn_id, self.hook_params)

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


class ColumnRun(NamedTuple):
    """An open DOI column (:class:`~airflow_doi.provider.hooks.doi_column.DoiColumn`), where
    the run computes, and the database its MariaDB functions live in (if any)."""

    column: DoiColumn
    where: Plan
    functions_schema: str | None


class DoiColumnOperator(DoiSqlOperator):
    """Base of the operators that apply the DOI rules to one column of the table, in the
    database or in the worker (:mod:`airflow_doi.provider.pushdown`).

    :param doi_column: the column holding the DOIs as found.
    :param mode: ``auto``, ``sql`` or ``python``; templated.
    :param functions_schema: MariaDB only: a database in which the operator may create (or
        replace) the generated ``doi_*`` functions.
    """

    template_fields: Sequence[str] = (
        *DoiSqlOperator.template_fields, "doi_column", "mode", "functions_schema",
    )

    def __init__(self, *, doi_column: str, mode: str = "auto",
                 functions_schema: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.doi_column = doi_column
        self.mode = mode
        self.functions_schema = functions_schema
        if "{{" not in str(mode):
            check_mode(mode)  # fail at parse time when it is not templated

    @contextmanager
    def open_column(self, gerund: str, decode: str = "auto",
                    outputs: Sequence[str] = ()) -> Iterator[ColumnRun]:
        """Check the names (``outputs`` must not overwrite the DOI column), plan where the run
        computes and log it, connect, and check that the table has the DOI column."""
        functions_schema = self.functions_schema or None
        self.check_identifiers(self.doi_column, *outputs, *filter(None, [functions_schema]))
        hook = self.get_db_hook()
        dialect = sql_hooks.dialect_of(hook)

        def fold(name: str) -> str:
            return fold_identifier(name, dialect.case_sensitive_identifiers)

        if fold(self.doi_column) in {fold(column) for column in outputs}:
            raise ValueError(
                f"doi_column {self.doi_column!r} would be overwritten by the normalized columns "
                f"{tuple(outputs)}: choose another output_prefix"
            )
        where = plan(check_mode(self.mode), dialect.name, decode, functions_schema)
        self.log.info("%s %s.%s %s", gerund, self.table, self.doi_column, where.why)
        with closing(sql_hooks.connect(hook)) as conn:
            if dialect.name == "sqlite":
                register_sqlite(conn)  # the rules, in either mode
            cursor = dialect.cursor(conn)
            require_columns(cursor, self.table, {"doi_column": self.doi_column},
                            case_sensitive=dialect.case_sensitive_identifiers)
            column = DoiColumn(conn, cursor, dialect, self.table, self.doi_column, self.log)
            yield ColumnRun(column, where, functions_schema)


class DoiDueKeysOperator(DoiSqlOperator):
    """Base of the operators that ask the ``doi_proxy`` connection about the due keys of the
    table and keep the answers by key in a table beside it
    (:mod:`airflow_doi.provider.hooks.due_keys`).

    :param resolver_conn_id: the ``doi_proxy`` connection (rate, concurrency, ...).
    :param key_column, doi_column, valid_column: the columns written by the normalize step.
    :param resolver_options: configuration fields that win over the connection.
    """

    template_fields: Sequence[str] = (
        *DoiSqlOperator.template_fields, "resolver_conn_id", "resolver_options", "key_column",
        "doi_column", "valid_column",
    )

    def __init__(
        self, *, resolver_conn_id: str = "doi_proxy_default", key_column: str = "doi_key",
        doi_column: str = "doi", valid_column: str = "doi_valid",
        resolver_options: dict[str, Any] | None = None, **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.resolver_conn_id = resolver_conn_id
        self.key_column = key_column
        self.doi_column = doi_column
        self.valid_column = valid_column
        self.resolver_options = resolver_options

    def get_proxy_hook(self) -> DoiProxyHook:
        """The ``doi_proxy`` connection's hook, ``resolver_options`` winning over it."""
        return DoiProxyHook(self.resolver_conn_id, **(self.resolver_options or {}))

    def results_table_of(self, named: str | None, default: str) -> str:
        """The results table: ``named``, else ``default`` beside the catalogue; its name and
        the catalogue's column names checked."""
        results_table = named or sibling_table(self.table, default)
        self.check_identifiers(results_table, self.key_column, self.doi_column,
                               self.valid_column)
        return results_table

    def due_keys_options(self) -> DueKeysOptions:
        """The catalogue's columns and the batch size, for the due-keys engine."""
        return {"key_column": self.key_column, "doi_column": self.doi_column,
                "valid_column": self.valid_column, "batch_size": check_batch_size(self.batch_size)}

    def due_keys_lineage(self, results_table: str,
                         *more: tuple[str, dict[str, list[str]]]) -> Any:
        """Reads ``table`` (key, DOI, valid flag); writes ``results_table`` keyed by the key
        column, and each ``(table, column lineage)`` of ``more``."""
        hook, connection = self.lineage_source()
        source = dataset(hook, connection, self.table)
        origin = (source.namespace, source.name)
        written = [(results_table, {"doi_key": [self.key_column], "doi": [self.doi_column]}),
                   *more]
        outputs = [dataset(hook, connection, table, fields, origin) for table, fields in written]
        return operator_lineage([source], outputs)
