"""Figures of a resolution table: status mix, registration agencies, failures, repairs.

The table is whatever a resolve step left behind, read as text columns: the output of
``airflow-doi resolve`` (``input``, ``doi``, ``key``, ``status``, ``error`` ...), the
``doi_resolution`` table of ``DoiResolveOperator`` (``doi_key``, ``doi``, ``status`` ...), rows
of :meth:`ResolutionResult.as_row`, Which RA? rows (``ra``) or repair columns
(``doi_suggestion``, ``doi_suggestion_rule``, ``doi_suggestion_verified``). Each section of
the report appears when its columns are there, so one function serves every producer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from airflow_doi.columns import to_large_string
from airflow_doi.repair.rules import REPAIR_COLUMNS
from airflow_doi.report.figures import value_counts
from airflow_doi.resolver.result import STATUSES

__all__ = ["FAILED_STATUSES", "ResolutionFigures", "resolution_figures"]

#: Statuses the report lists as failures: the proxy does not know the DOI, or gave no answer.
FAILED_STATUSES: Final[tuple[str, ...]] = ("not_found", "error")
#: Rows shown in the failures and repairs tables.
TOP_ROWS: Final[int] = 15
#: Columns naming the DOI of a row, best first; the first one present is shown. A failure is
#: shown by its DOI; a repair by the cell as written (the damage is what it repairs).
_DOI_COLUMNS: Final[tuple[str, ...]] = ("doi", "input", "doi_key", "key")
_CELL_COLUMNS: Final[tuple[str, ...]] = ("input", "doi", "doi_key", "key")
_SUGGESTION, _RULE, _VERIFIED = REPAIR_COLUMNS
#: Text that means true in a boolean column read from CSV.
_TRUE: Final[tuple[str, ...]] = ("true", "t", "1", "yes", "y")
_EMPTY: Final[pa.Scalar] = pa.scalar("", pa.large_string())


class ResolutionTableError(ValueError):
    """The resolution table has none of the columns the report reads."""


@dataclass
class ResolutionFigures:
    """What the report shows about resolution; a ``None``/empty part was not in the table."""

    rows: int = 0
    statuses: dict[str, int] | None = None
    agencies: dict[str, int] | None = None
    failures: int = 0
    #: ``(doi, status, error, rows)``: the commonest failures.
    failure_examples: list[tuple[str, str, str, int]] = field(default_factory=list)
    #: ``error -> rows`` among failed rows with an error text (timeouts, HTTP 500 ...).
    failure_reasons: dict[str, int] = field(default_factory=dict)
    repairs_proposed: int | None = None
    repairs_verified: int | None = None
    #: ``(cell, suggestion, rule, verified)``, verified ones first.
    repair_examples: list[tuple[str, str, str, bool]] = field(default_factory=list)


def resolution_figures(table: pa.Table) -> ResolutionFigures:
    """Figures of a resolution table (any of the shapes in the module docstring)."""
    names = set(table.column_names)
    if not names & {"status", "ra", _SUGGESTION}:
        raise ResolutionTableError(
            "the resolution table has no status, ra or doi_suggestion column "
            f"(columns: {', '.join(table.column_names) or 'none'}); give the output of "
            "airflow-doi resolve, the doi_resolution table, or a table with those columns"
        )
    text = {name: to_large_string(table[name]) for name in table.column_names}
    figures = ResolutionFigures(rows=table.num_rows)
    if "status" in text:
        _statuses(figures, text, _first(text, _DOI_COLUMNS))
    if "ra" in text:
        figures.agencies = value_counts(pc.utf8_trim_whitespace(text["ra"]))
    if _SUGGESTION in text:
        _repairs(figures, text, _first(text, _CELL_COLUMNS))
    return figures


def _first(text: dict[str, Any], names: tuple[str, ...]) -> Any:
    return next((text[name] for name in names if name in text), None)


def _selected(values: Any, mask: Any, count: int) -> Any:
    """The ``count`` cells of ``values`` where ``mask`` holds, a missing one as ``""``; all
    ``""`` when the table has no such column (``values`` None)."""
    if values is None:
        return pa.repeat(_EMPTY, count)
    return pc.fill_null(pc.filter(values, mask), _EMPTY)


def _statuses(figures: ResolutionFigures, text: dict[str, Any], shown: Any) -> None:
    status = pc.utf8_trim_whitespace(text["status"])
    figures.statuses = value_counts(status, STATUSES)
    failed = pc.fill_null(pc.is_in(status, value_set=pa.array(FAILED_STATUSES)), False)
    figures.failures = int(pc.sum(failed).as_py() or 0)
    if not figures.failures:
        return
    rows = pa.table({
        "doi": _selected(shown, failed, figures.failures),
        "status": pc.filter(status, failed),
        "error": _selected(text.get("error"), failed, figures.failures),
    })
    figures.failure_reasons = value_counts(rows["error"])
    grouped = rows.group_by(["doi", "status", "error"]).aggregate([([], "count_all")])
    grouped = grouped.sort_by(
        [("count_all", "descending"), ("status", "ascending"), ("doi", "ascending")]
    ).slice(0, TOP_ROWS)
    figures.failure_examples = [
        (row["doi"], row["status"], row["error"], row["count_all"]) for row in grouped.to_pylist()
    ]


def _repairs(figures: ResolutionFigures, text: dict[str, Any], shown: Any) -> None:
    suggestion = text[_SUGGESTION]
    proposed = pc.and_(pc.is_valid(suggestion), pc.not_equal(suggestion, ""))
    proposed = pc.fill_null(proposed, False)
    figures.repairs_proposed = int(pc.sum(proposed).as_py() or 0)
    if _VERIFIED in text:
        flag = pc.utf8_lower(pc.utf8_trim_whitespace(pc.fill_null(text[_VERIFIED], _EMPTY)))
        verified = pc.and_(proposed, pc.is_in(flag, value_set=pa.array(_TRUE)))
        figures.repairs_verified = int(pc.sum(verified).as_py() or 0)
    else:
        verified = pc.and_(proposed, False)
    if not figures.repairs_proposed:
        return
    rows = pa.table({
        "cell": _selected(shown, proposed, figures.repairs_proposed),
        "suggestion": pc.filter(suggestion, proposed),
        "rule": _selected(text.get(_RULE), proposed, figures.repairs_proposed),
        "verified": pc.cast(pc.filter(verified, proposed), pa.int8()),
    })
    rows = rows.sort_by([("verified", "descending"), ("cell", "ascending")]).slice(0, TOP_ROWS)
    figures.repair_examples = [
        (row["cell"], row["suggestion"], row["rule"], bool(row["verified"]))
        for row in rows.to_pylist()
    ]
