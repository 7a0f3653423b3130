"""Repairs for damaged DOIs: candidate rules (pure) and their verification against the proxy.

:mod:`.rules` proposes candidates, standard library only; :mod:`.verify` asks the resolver
which of them exist, so :func:`repair` and :func:`arepair` need the ``resolve`` extra and are
imported on first use: ``from airflow_doi.repair import suggest_repairs`` stays stdlib-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_doi._lazy import lazy_getattr
from airflow_doi.repair.rules import (
    MAX_CANDIDATES,
    MAX_CUTS,
    REPAIR_COLUMNS,
    RULES,
    Repair,
    Rule,
    suggest_repairs,
)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_doi.repair.verify import RepairResult, RepairStats, arepair, repair, repair_columns

__all__ = [
    "MAX_CANDIDATES",
    "MAX_CUTS",
    "REPAIR_COLUMNS",
    "RULES",
    "Repair",
    "RepairResult",
    "RepairStats",
    "Rule",
    "arepair",
    "repair",
    "repair_columns",
    "suggest_repairs",
]

__getattr__ = lazy_getattr(
    __name__,
    dict.fromkeys(("RepairResult", "RepairStats", "arepair", "repair", "repair_columns"),
                  "airflow_doi.repair.verify"),
    globals(),
)
