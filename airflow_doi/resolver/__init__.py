"""Polite, fast, fault-tolerant batch resolution against the DOI proxy REST API.

``resolve``/``aresolve`` take any iterable of values (any DOI form, or junk) and return one
:class:`ResolutionResult` per value, in order. Requires the ``resolve`` extra (aiohttp,
aiolimiter, tenacity, limits). :mod:`airflow_doi.resolver.simulator` is a local stand-in for
the proxy used by tests, benchmarks and the offline demo.
"""

from __future__ import annotations

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
