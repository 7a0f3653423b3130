"""OpenLineage for the catalogue operators: which tables they read and write, column by column.

Called by the OpenLineage provider (``apache-airflow-providers-openlineage``) when a task
completes, and only then, so its imports stay inside the functions. Where the hook has its own
``get_openlineage_database_info`` the datasets are named as common-sql's
``SQLExecuteQueryOperator`` names the same table (PostgreSQL: namespace ``postgres://host:port``,
name ``database.schema.table``). No provider names DuckDB and SQLite tables (their hooks have
no such method), so those namings are this project's own, after the database file:
``duckdb://<absolute path>`` with ``<file stem>.main.<table>`` (``<file stem>.<schema>.<table>``
for a qualified table), and ``sqlite://<absolute path>`` with the table as given.

Naming never reports lineage of its own: the default schema of an unqualified table is asked
with the hook's own query on a plain DB-API cursor (:func:`default_schema`), not through
``DbApiHook.get_first``, which reports every statement it runs to Airflow's hook-level lineage
and so to the OpenLineage provider, as a child job (``<task>.query.N``) of the task.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

__all__ = ["dataset", "dataset_names", "default_schema", "operator_lineage"]

#: hook -> its default schema, asked once per hook (one connection, not one per dataset).
_DEFAULT_SCHEMAS: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()


def _first_row(hook: Any, sql: str, parameters: Sequence[Any] | None = None) -> Any:
    """``hook.get_first`` without its hook-level lineage: the row, read on a plain cursor."""
    with closing(hook.get_conn()) as conn, closing(conn.cursor()) as cursor:
        if parameters:
            cursor.execute(sql, parameters)
        else:
            cursor.execute(sql)
        return cursor.fetchone()


def default_schema(hook: Any) -> str | None:
    """The schema an unqualified table name falls in: the hook's own
    ``get_openlineage_default_schema()`` (what common-sql's OpenLineage naming uses), with the
    query it may run (PostgreSQL's ``SELECT CURRENT_SCHEMA;``, MSSQL's, Redshift's, all
    through ``self.get_first``) sent on a plain DB-API cursor, so that naming a dataset never
    reports a SQL job of its own to hook-level lineage. ``None`` when it cannot be told."""
    try:
        return _DEFAULT_SCHEMAS[hook]
    except (KeyError, TypeError):
        pass
    own = vars(hook).get("get_first")  # normally none: the class's method
    hook.get_first = lambda sql, parameters=None, **_: _first_row(hook, sql, parameters)
    schema: str | None
    try:
        schema = hook.get_openlineage_default_schema()
    except Exception:  # lineage must never fail the task
        schema = None
    finally:
        if own is None:
            del hook.get_first
        else:
            hook.get_first = own
    try:
        _DEFAULT_SCHEMAS[hook] = schema
    except TypeError:  # not weakly referenceable: ask again next time
        pass
    return schema


def dataset_names(hook: Any, connection: Any, table: str) -> tuple[str, str]:
    """(namespace, name) of ``table`` reached through ``hook``."""
    info = None
    getter = getattr(hook, "get_openlineage_database_info", None)
    if getter is not None:
        try:
            info = getter(connection)
        except Exception:  # lineage must never fail the task
            info = None
    parts = table.split(".")
    if info is not None and info.scheme:
        schema = default_schema(hook) if len(parts) == 1 else None
        database = info.database or connection.schema  # MySQL: the connection's database
        qualified = [database, *([schema] if schema else []), *parts]
        return f"{info.scheme}://{info.authority}", ".".join(p for p in qualified if p)
    path = str(Path(connection.host or "").resolve()) if connection.host else ":memory:"
    kind = connection.conn_type or "dbapi"
    if kind in ("duckdb", "doi_duckdb"):  # the DuckDB provider's type, or ours
        if len(parts) == 1:
            parts = ["main", *parts]
        return f"duckdb://{path}", ".".join([Path(path).stem, *parts])
    return f"{kind}://{path}", table


def dataset(hook: Any, connection: Any, table: str,
            fields: Mapping[str, Iterable[str]] | None = None,
            source: tuple[str, str] | None = None) -> Any:
    """An OpenLineage dataset for ``table``; with ``fields``, a column-lineage facet mapping
    each output column to the input columns of ``source`` ((namespace, name)) it came from."""
    from airflow.providers.common.compat.openlineage.facet import (
        ColumnLineageDatasetFacet,
        Dataset,
        Fields,
        InputField,
    )

    namespace, name = dataset_names(hook, connection, table)
    facets: dict[str, Any] = {}
    if fields:
        src_namespace, src_name = source or (namespace, name)
        facets["columnLineage"] = ColumnLineageDatasetFacet(fields={
            column: Fields(
                inputFields=[InputField(namespace=src_namespace, name=src_name, field=f)
                             for f in inputs],
                transformationType="", transformationDescription="",
            )
            for column, inputs in fields.items()
        })
    return Dataset(namespace=namespace, name=name, facets=facets)


def file_dataset(path: str) -> Any:
    """An OpenLineage dataset of a file or a folder read (the agencies' data files):
    namespace ``file://{host}``, name the absolute path, as OpenLineage names local files."""
    import socket

    from airflow.providers.common.compat.openlineage.facet import Dataset

    return Dataset(namespace=f"file://{socket.gethostname()}",
                   name=str(Path(path).expanduser().absolute()))


def operator_lineage(inputs: list[Any], outputs: list[Any]) -> Any:
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(inputs=inputs, outputs=outputs)
