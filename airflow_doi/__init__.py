"""airflow-doi: DOIs per ANSI/NISO Z39.84, for Python, SQL warehouses, dbt and Airflow.

The standard (parse, validate, normalize, comparison key, URL/URN, extraction) is imported
eagerly because it is pure standard library. Everything that needs a third-party package
(the resolver, the pandas accessor) is imported on first use, so ``import airflow_doi`` stays
cheap and never imports Airflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    validate,
)

__version__ = "0.1.0"

__all__ = [
    "REASONS",
    "Doi",
    "InvalidDoiError",
    "Validation",
    "__version__",
    "comparison_key",
    "find_dois",
    "normalize",
    "parse",
    "to_url",
    "to_urn",
    "validate",
]

_LAZY: dict[str, str] = {}
_LAZY |= dict.fromkeys(("resolve", "aresolve", "ResolverConfig", "ResolutionResult"),
                       "airflow_doi.resolve")
_LAZY |= {"DoiProxyHook": "airflow_doi.hooks.doi_proxy", "DuckDbHook": "airflow_doi.hooks.duckdb",
          "DoiNormalizeOperator": "airflow_doi.operators.normalize",
          "DoiValidateOperator": "airflow_doi.operators.validate",
          "DoiResolveOperator": "airflow_doi.operators.resolve"}

if TYPE_CHECKING:  # pragma: no cover
    pass


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'airflow_doi' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
