"""OpenLineage for the catalogue operators: which tables they read and write, column by column.

Called by the OpenLineage provider (``apache-airflow-providers-openlineage``) when a task
completes, and only then, so its imports stay inside the functions. Datasets are named as the
first-party SQL providers name them: the hook's own ``get_openlineage_database_info`` where it
has one (PostgreSQL: namespace ``postgres://host:port``, name ``database.schema.table``);
DuckDB and SQLite, which have none, are named after their file (``duckdb://<path>`` with
``<file stem>.main.<table>``, ``sqlite://<path>`` with ``<table>``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["dataset", "dataset_names", "operator_lineage"]


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
        schema = None
        if len(parts) == 1:
            try:
                schema = hook.get_openlineage_default_schema()
            except Exception:
                schema = None
        database = info.database or connection.schema  # MySQL: the connection's database
        qualified = [database, *([schema] if schema else []), *parts]
        return f"{info.scheme}://{info.authority}", ".".join(p for p in qualified if p)
    path = str(Path(connection.host or "").resolve()) if connection.host else ":memory:"
    kind = connection.conn_type or "dbapi"
    if kind == "duckdb":
        if len(parts) == 1:
            parts = ["main", *parts]
        return f"duckdb://{path}", ".".join([Path(path).stem, *parts])
    return f"{kind}://{path}", table


def dataset(hook: Any, connection: Any, table: str, fields: dict[str, Iterable[str]] | None = None,
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


def operator_lineage(inputs: list[Any], outputs: list[Any]) -> Any:
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(inputs=inputs, outputs=outputs)
