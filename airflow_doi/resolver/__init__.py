"""Polite, fast, fault-tolerant batch resolution against the DOI proxy REST API.

``resolve``/``aresolve`` take any iterable of values (any DOI form, or junk) and return one
:class:`ResolutionResult` per value, in order. Requires the ``resolve`` extra (aiohttp,
tenacity, redis). :mod:`airflow_doi.resolver.simulator` is a local stand-in for
the proxy used by tests, benchmarks and the offline demo.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_doi._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_doi.resolver.batch import aresolve, awhich_ra, resolve, which_ra
    from airflow_doi.resolver.config import ResolverConfig
    from airflow_doi.resolver.result import (
        COLUMNS,
        STATUSES,
        ProgressEvent,
        ResolutionResult,
        ResolverStats,
    )

__all__ = [
    "COLUMNS",
    "STATUSES",
    "ProgressEvent",
    "ResolutionResult",
    "ResolverConfig",
    "ResolverStats",
    "aresolve",
    "awhich_ra",
    "resolve",
    "which_ra",
]

#: Exported name -> its module, imported on first use: the package itself needs no extra, so
#: ``airflow_doi.resolver.config`` (standard library only) can be read without aiohttp.
__getattr__ = lazy_getattr(__name__, {
    **dict.fromkeys(("aresolve", "awhich_ra", "resolve", "which_ra"), "airflow_doi.resolver.batch"),
    "ResolverConfig": "airflow_doi.resolver.config",
    **dict.fromkeys(("COLUMNS", "STATUSES", "ProgressEvent", "ResolutionResult", "ResolverStats"),
                    "airflow_doi.resolver.result"),
}, globals())
