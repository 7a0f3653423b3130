"""airflow-doi: DOIs per ANSI/NISO Z39.84, for Python, SQL warehouses, dbt and Airflow.

The standard (parse, validate, normalize, comparison key, URL/URN, extraction) is imported
eagerly because it is pure standard library. Everything that needs a third-party package
(the resolver, the pandas accessor) is imported on first use, so ``import airflow_doi`` stays
cheap and never imports Airflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_doi._lazy import lazy_getattr
from airflow_doi._version import __version__
from airflow_doi.extract import find_dois
from airflow_doi.presentation import to_url, to_urn
from airflow_doi.syntax import (
    REASONS,
    Doi,
    InvalidDoiError,
    Validation,
    comparison_key,
    normalize,
    parse,
    short_doi,
    validate,
)

__all__ = [
    "REASONS",
    "Doi",
    "InvalidDoiError",
    "ResolutionResult",
    "ResolverConfig",
    "Validation",
    "__version__",
    "aresolve",
    "comparison_key",
    "find_dois",
    "normalize",
    "parse",
    "resolve",
    "short_doi",
    "to_url",
    "to_urn",
    "validate",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_doi.resolver import ResolutionResult, ResolverConfig, aresolve, resolve

#: Names exported lazily: they need the ``resolve`` extra (aiohttp, tenacity, redis).
_LAZY: dict[str, str] = dict.fromkeys(
    ("resolve", "aresolve", "ResolverConfig", "ResolutionResult"), "airflow_doi.resolver"
)


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
