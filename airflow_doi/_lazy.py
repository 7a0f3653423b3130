"""Lazy package exports: ``from package import Name`` without importing every module up front.

The Airflow-facing packages (``airflow_doi.provider.operators``,
``airflow_doi.provider.hooks``) export their classes at the package level, the Airflow
convention, but must stay cheap to import: provider discovery imports
``airflow_doi.provider.hooks`` and nothing should follow from that. Standard library only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, exports: Mapping[str, str],
                 namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``exports[name]`` on first use and caches it."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
