"""Repairs for damaged DOIs: candidate rules (pure) and their verification against the proxy.

:mod:`.rules` proposes candidates, standard library only; :mod:`.verify` asks the resolver
which of them exist, so :func:`repair` and :func:`arepair` need the ``resolve`` extra and are
imported on first use: ``from airflow_doi.repair import suggest_repairs`` stays stdlib-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_doi._lazy import lazy_getattr
from airflow_doi.repair import rules
from airflow_doi.repair.rules import *  # noqa: F403 - the package exports rules.__all__

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_doi.repair.verify import RepairResult, RepairStats, arepair, repair, repair_columns

__all__ = [*rules.__all__, "RepairResult", "RepairStats", "arepair", "repair", "repair_columns"]

# What rules does not define is :mod:`.verify`'s (the ``resolve`` extra): imported on first use.
__getattr__ = lazy_getattr(
    __name__,
    {name: "airflow_doi.repair.verify" for name in __all__ if name not in rules.__all__},
    globals(),
)
