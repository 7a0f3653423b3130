"""Figures of a resolution table: status mix, registration agencies, failures, repairs.

The table is whatever a resolve step left behind, read as text columns: the output of
``airflow-doi resolve`` (``input``, ``doi``, ``key``, ``status``, ``error`` ...), the
``doi_resolution`` table of ``DoiResolveOperator`` (``doi_key``, ``doi``, ``status`` ...), rows
of :meth:`ResolutionResult.as_row`, Which RA? rows (``ra``) or repair columns
(``doi_suggestion``, ``doi_suggestion_rule``, ``doi_suggestion_verified``). Each section of
the report appears when its columns are there, so one function serves every producer.

Statuses are counted on one basis whatever the producer: the distinct DOIs (comparison keys)
looked up. The CLI writes a row per input cell (a key may repeat, and cells that are not valid
DOIs are ``invalid``: never sent), the operator a row per key; the first row of each key stands
for it, and ``invalid`` rows are counted apart, never as looked up. A shortDOI (``10/b6vnmd``) is
sent: its rows carry the key of the DOI it aliases, or, when it has none (no such shortDOI, no
DOI named, the proxy failing), the shortDOI's own key, which is what was asked. So the same
data gives the same figures from ``airflow-doi resolve`` and from the DAG.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_doi.columns import to_large_string
from airflow_doi.repair.rules import REPAIR_COLUMNS
from airflow_doi.report.figures import top_counts, value_counts
from airflow_doi.resolver.result import STATUSES
from airflow_doi.syntax import ascii_upper, short_doi

__all__ = ["FAILED_STATUSES", "ResolutionFigures", "resolution_figures"]

#: Statuses the report lists as failures: the proxy does not know the DOI, or gave no answer.
FAILED_STATUSES: Final[tuple[str, ...]] = ("not_found", "error")
#: Rows shown in the failures and repairs tables.
TOP_ROWS: Final[int] = 15
#: Columns naming the DOI of a row, best first; the first one not empty on a row is shown. A
#: failure is shown by its DOI (a shortDOI that named none, by the cell); a repair by the cell
#: as written (the damage is what it repairs).
_DOI_COLUMNS: Final[tuple[str, ...]] = ("doi", "input", "doi_key", "key")
#: Columns holding a row's comparison key, best first (the operator's, the CLI's).
_KEY_COLUMNS: Final[tuple[str, ...]] = ("doi_key", "key")
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
    #: ``status -> DOIs`` (distinct keys looked up), :data:`STATUSES` order; ``invalid`` never.
    #: ``agencies`` is ``agency -> DOIs`` likewise (Which RA?). Each holds the commonest few
    #: and the others summed (:func:`~airflow_doi.report.figures.top_counts`).
    statuses: dict[str, int] | None = None
    #: Distinct keys looked up (a status other than ``invalid``), and of them ``resolved``.
    looked_up: int = 0
    resolved: int = 0
    #: Rows never sent: ``invalid`` (not a valid DOI), or without a key.
    not_sent: int = 0
    agencies: dict[str, int] | None = None
    #: DOIs (distinct keys) that failed: ``not_found`` or ``error``.
    failures: int = 0
    #: ``(doi, status, error, rows)``: the failures with the most rows first (rows of the DOI
    #: column holding the key, when the report has it; else rows of the table).
    failure_examples: list[tuple[str, str, str, int]] = field(default_factory=list)
    #: ``error -> DOIs`` among failed DOIs with an error text (timeouts, HTTP 500 ...), the
    #: commonest few and the others summed.
    failure_reasons: dict[str, int] = field(default_factory=dict)
    repairs_proposed: int | None = None
    repairs_verified: int | None = None
    #: ``(cell, suggestion, rule, verified)``, verified ones first.
    repair_examples: list[tuple[str, str, str, bool]] = field(default_factory=list)


def resolution_figures(table: pa.Table, key_rows: pa.Table | None = None) -> ResolutionFigures:
    """Figures of a resolution table (any of the shapes in the module docstring).

    ``key_rows`` (``key``, ``rows``): how many rows of the report's DOI column hold each key,
    for the rows of each failure.
    """
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
        _statuses(figures, text, _shown(text), key_rows)
    if "ra" in text:
        figures.agencies = _agencies(text)
    if _SUGGESTION in text:
        _repairs(figures, text, _first(text, _CELL_COLUMNS))
    return figures


def _first(text: dict[str, Any], names: tuple[str, ...]) -> Any:
    return next((text[name] for name in names if name in text), None)


def _text(values: Any, count: int) -> Any:
    """``values`` with a missing one as ``""``; all ``""`` when the table has no such column
    (``values`` None)."""
    return pa.repeat(_EMPTY, count) if values is None else pc.fill_null(values, _EMPTY)


def _selected(values: Any, mask: Any, count: int) -> Any:
    """The ``count`` cells of ``values`` where ``mask`` holds, a missing one as ``""``; all
    ``""`` when the table has no such column (``values`` None)."""
    if values is None:
        return pa.repeat(_EMPTY, count)
    return pc.fill_null(pc.filter(values, mask), _EMPTY)


def _agencies(text: dict[str, Any]) -> dict[str, int]:
    """``agency -> DOIs``: the first row of each key that names one (rows, without a key)."""
    agency = _nonempty(text["ra"])
    key = _keys(text)
    if key is None:
        return top_counts(value_counts(agency))
    named = pa.table({
        "key": key, "ra": agency, "row": pa.array(np.arange(len(agency), dtype=np.int64)),
    }).filter(pc.and_(pc.is_valid(key), pc.is_valid(agency)))
    first = named.group_by("key").aggregate([("row", "min")])["row_min"]
    return top_counts(
        value_counts(pc.take(named["ra"], pc.index_in(first, value_set=named["row"])))
    )


def _keys(text: dict[str, Any]) -> Any:
    """Each row's comparison key: the ``doi_key`` or ``key`` column, else the ``doi`` column
    ASCII upper-cased; empty cells as null. None when the table has none of them."""
    for name in _KEY_COLUMNS:
        if name in text:
            return _nonempty(text[name])
    if "doi" in text:
        return pc.ascii_upper(_nonempty(text["doi"]))
    return None


def _nonempty(values: Any) -> Any:
    trimmed = pc.utf8_trim_whitespace(values)
    return pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, pa.large_string()), trimmed)


def _short_doi_keys(key: Any, status: Any, text: dict[str, Any]) -> Any:
    """``key``, with the key of the shortDOI it holds on each row that was sent without a DOI
    of its own: ``resolve`` asked the proxy for the shortDOI (its key), which does not exist,
    names no DOI or could not be expanded; such a row is one of the keys looked up."""
    cells = _first(text, ("input", "doi"))
    if cells is None:
        return key
    key = _combined(key)
    unkeyed = pc.fill_null(pc.and_(pc.is_null(key), pc.invert(
        pc.is_in(status, value_set=pa.array(["invalid", ""], pa.large_string())))), False)
    rows = pc.indices_nonzero(unkeyed)
    if not len(rows):
        return key
    held = [short_doi(cell) for cell in pc.take(_combined(cells), rows).to_pylist()]
    return pc.replace_with_mask(key, unkeyed, pa.array(
        [None if handle is None else ascii_upper(handle) for handle in held],
        pa.large_string()))


def _combined(values: Any) -> Any:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _shown(text: dict[str, Any]) -> Any:
    """What names each row's DOI: the first of :data:`_DOI_COLUMNS` that is not empty on it (the
    cell as written, for a row whose shortDOI named no DOI); None without any such column."""
    present = [text[name] for name in _DOI_COLUMNS if name in text]
    if not present:
        return None
    return pc.coalesce(*(pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.large_string()),
                                    values) for values in present))


def _statuses(
    figures: ResolutionFigures, text: dict[str, Any], shown: Any, key_rows: pa.Table | None
) -> None:
    status = pc.fill_null(pc.utf8_trim_whitespace(text["status"]), _EMPTY)
    key = _keys(text)
    if key is None:  # nothing names the DOI of a row: each row stands for itself
        key = pc.cast(pa.array(np.arange(len(status))), pa.large_string())
    else:
        key = _short_doi_keys(key, _combined(status), text)
    sent = pc.fill_null(pc.and_(pc.is_valid(key), pc.not_equal(status, "invalid")), False)
    figures.not_sent = len(status) - int(pc.sum(sent).as_py() or 0)
    rows = pa.table({
        "key": key, "status": status, "doi": _text(shown, len(status)),
        "error": _text(text.get("error"), len(status)),
        "row": pa.array(np.arange(len(status), dtype=np.int64)),
    }).filter(sent)
    # The first row of each key stands for it; "rows" is how many rows the key has.
    counted = rows.group_by("key").aggregate([("row", "min"), ([], "count_all")])
    per_key = rows.take(pc.index_in(counted["row_min"], value_set=rows["row"]))
    per_key = per_key.append_column("rows", counted["count_all"])
    statuses = value_counts(per_key["status"], STATUSES)
    figures.statuses = top_counts(statuses)
    figures.looked_up = per_key.num_rows
    # Found in the registry: resolved, or (an existence-only run) registered.
    figures.resolved = statuses.get("resolved", 0) + statuses.get("registered", 0)
    failed = pc.is_in(per_key["status"], value_set=pa.array(FAILED_STATUSES))
    figures.failures = int(pc.sum(failed).as_py() or 0)
    if not figures.failures:
        return
    failures = per_key.filter(failed)
    figures.failure_reasons = top_counts(value_counts(failures["error"]))
    if key_rows is not None:  # the rows of the DOI column, where it holds the key
        found = pc.index_in(failures["key"], value_set=key_rows["key"])
        column_rows = pc.take(key_rows["rows"], found)
        failures = failures.set_column(
            failures.schema.get_field_index("rows"), "rows",
            pc.coalesce(pc.cast(column_rows, pa.int64()), failures["rows"]))
    failures = failures.sort_by(
        [("rows", "descending"), ("status", "ascending"), ("doi", "ascending")]
    ).slice(0, TOP_ROWS)
    figures.failure_examples = [
        (row["doi"], row["status"], row["error"], row["rows"]) for row in failures.to_pylist()
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
