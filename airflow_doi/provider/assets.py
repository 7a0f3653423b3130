"""Airflow Assets of the tables the DOI operators write: a table's asset, its URI, its events.

A table's asset URI is its OpenLineage dataset's (:mod:`.lineage`), namespace then
name with its dots as slashes, built when the task runs from the connection it ran on (a DAG
param can point the operators at another one at run time), in the form Airflow keeps (it drops
the empty authority of a file URI): ``postgres://host:port/database/schema/table`` through the
PostgreSQL hook's own OpenLineage naming, and, in this project's own naming (no provider names
these), ``duckdb:/path/file.duckdb/<file stem>/main/table`` and ``sqlite:/path/file/table``
(``sqlite:/path/file/schema/table`` for a qualified name). Where the connection cannot be read
the URI falls back to ``dbapi://<conn_id>/<table>``.
DAGs declare an :class:`AssetAlias` as the outlet and the operators attach the concrete table
assets when they run.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Asset, AssetAlias, BaseHook

from airflow_doi.provider.hooks.sql import sql_hook
from airflow_doi.provider.lineage import dataset_names

__all__ = ["emit_table_assets", "table_asset"]


def table_asset(conn_id: str, table: str) -> Asset:
    """The asset of ``table`` reached through the Airflow connection ``conn_id``."""
    name = f"{conn_id}.{table}"
    try:
        return Asset(uri=table_uri(conn_id, table), name=name)
    except ValueError:  # a provider's URI rules we did not meet: never fail the task for it
        return Asset(uri=f"dbapi://{conn_id}/{table}", name=name)


def table_uri(conn_id: str, table: str) -> str:
    """``table``'s URI as Airflow keeps it (``sqlite:/path/file/table``, not
    ``sqlite:///...``; ``dbapi://conn/table`` when it cannot be built: an asset must never fail
    a task that wrote its table). Raises ``ValueError`` where a provider's URI rules reject it."""
    try:
        hook = sql_hook(conn_id)
        namespace, name = dataset_names(hook, BaseHook.get_connection(conn_id), table)
    except Exception:
        return f"dbapi://{conn_id}/{table}"
    # Airflow's own normalization, so the URI returned is the one the asset stores
    return Asset(uri=f"{namespace}/{name.replace('.', '/')}").uri


def emit_table_assets(outlets: list[Any], context: Any, assets: list[Asset]) -> None:
    """Record ``assets`` against every :class:`AssetAlias` among a task's ``outlets``."""
    events = context.get("outlet_events") if hasattr(context, "get") else None
    if events is None:
        return
    for outlet in outlets:
        if isinstance(outlet, AssetAlias):
            for asset in assets:
                events[outlet].add(asset)
