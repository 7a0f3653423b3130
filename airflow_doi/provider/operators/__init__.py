"""Operators that normalize, validate, resolve and enrich the DOIs of a SQL table.

They are thin: the rules live in :mod:`airflow_doi.syntax`, the HTTP side in
:mod:`airflow_doi.resolver` (through
:class:`~airflow_doi.provider.hooks.doi_proxy.DoiProxyHook`) and the SQL in
:mod:`airflow_doi.db.statements` and :mod:`airflow_doi.provider.hooks`; their bases are in
:mod:`~airflow_doi.provider.operators.base`. One import line, the Airflow convention::

    from airflow_doi.provider.operators import (
        DoiEnrichOperator, DoiNormalizeOperator, DoiResolveOperator, DoiValidateOperator)

The names are resolved on first use (module ``__getattr__``), so importing one operator
module does not import the others; ``import airflow_doi`` never imports Airflow at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_doi._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_doi.provider.operators.enrich import DoiEnrichOperator
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator
    from airflow_doi.provider.operators.resolve import DoiResolveOperator
    from airflow_doi.provider.operators.validate import DoiValidateOperator

__all__ = [
    "DoiEnrichOperator", "DoiNormalizeOperator", "DoiResolveOperator", "DoiValidateOperator",
]

#: Exported name -> the module that defines it.
_LAZY: dict[str, str] = {
    "DoiEnrichOperator": "airflow_doi.provider.operators.enrich",
    "DoiNormalizeOperator": "airflow_doi.provider.operators.normalize",
    "DoiResolveOperator": "airflow_doi.provider.operators.resolve",
    "DoiValidateOperator": "airflow_doi.provider.operators.validate",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
