"""Polite, fast, fault-tolerant batch resolution against the DOI proxy REST API.

``resolve``/``aresolve`` take any iterable of values (any DOI form, or junk) and return one
:class:`ResolutionResult` per value, in order. Requires the ``resolve`` extra (aiohttp,
aiolimiter, tenacity, limits). :mod:`airflow_doi.resolve.simulator` is a local stand-in for
the proxy used by tests, benchmarks and the offline demo.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from airflow_doi.resolve.batch import aresolve, awhich_ra, resolve, which_ra
from airflow_doi.resolve.config import ResolverConfig
from airflow_doi.resolve.result import (
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


class _CallableModule(types.ModuleType):
    """Makes ``airflow_doi.resolve(...)`` work even after this package has been imported.

    Importing the subpackage binds the *module* to ``airflow_doi.resolve``, shadowing the
    lazily exported function of the same name; calling the module calls the function.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> list[ResolutionResult]:
        return resolve(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
