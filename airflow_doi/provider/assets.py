"""Airflow Assets for the SQL tables the DOI operators write.

A table's asset URI is ``dbapi://<conn_id>/<table>``: the connection id (not the host) names
the database, because the operators only ever know the connection, and a DAG param can point
them at another one at run time. DAGs declare an :class:`AssetAlias` as the outlet and the
operators attach the concrete table assets when they run.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Asset, AssetAlias

__all__ = ["emit_table_assets", "table_asset"]


def table_asset(conn_id: str, table: str) -> Asset:
    """The asset of ``table`` reached through the Airflow connection ``conn_id``."""
    return Asset(uri=f"dbapi://{conn_id}/{table}", name=f"{conn_id}.{table}")


def emit_table_assets(outlets: list[Any], context: Any, assets: list[Asset]) -> None:
    """Record ``assets`` against every :class:`AssetAlias` among a task's ``outlets``."""
    events = context.get("outlet_events") if hasattr(context, "get") else None
    if events is None:
        return
    for outlet in outlets:
        if isinstance(outlet, AssetAlias):
            for asset in assets:
                events[outlet].add(asset)
