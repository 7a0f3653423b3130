"""Airflow hooks and the hook-level helpers the operators work through.

The hooks: :class:`DoiProxyHook` (the doi.org proxy, rate-limited) and :class:`DuckDbHook`
(DuckDB files). The helpers: ``sql`` (a connection's DB-API hook, connection and dialect),
``doi_column`` (normalizing and validating a DOI column), ``due_keys`` (the engine of resolve
and enrich) with ``resolution``, ``enrichment``, ``claims`` and ``tables``, and ``repairs``.

``from airflow_doi.provider.hooks import DoiProxyHook, DuckDbHook`` works; the names are resolved on
first use (module ``__getattr__``), so this package imports nothing by itself and Airflow's
provider discovery stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_doi._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook
    from airflow_doi.provider.hooks.duckdb import DuckDbHook

__all__ = ["DoiProxyHook", "DuckDbHook"]

#: Exported name -> the module that defines it.
_LAZY: dict[str, str] = {
    "DoiProxyHook": "airflow_doi.provider.hooks.doi_proxy",
    "DuckDbHook": "airflow_doi.provider.hooks.duckdb",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
