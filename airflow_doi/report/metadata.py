"""Figures of a metadata table: coverage, CSL types, years, journals, publishers, retractions.

The table is what an enrichment step left behind, read as text columns: the ``doi_metadata``
table of ``DoiEnrichOperator`` (one row per comparison key, ``doi_key``), or the output of
``airflow-doi enrich`` (``input``, ``doi``, ``key``, then the same columns; one row per input
cell, so a key may repeat and rows without a DOI have no key). Every figure counts distinct
keys: the first row of each key stands for it; rows without a key, and rows never asked
(``invalid``: a reserved suffix has a key, but is not a valid DOI), are counted apart, so the
CLI's output and ``doi_metadata`` give the same figures for the same data.

Only the key and ``metadata_status`` are required; each other figure appears when its column
is there (``csl_type``, ``year`` or ``issued``, ``container_title``, ``publisher``,
``updated_by``, ``update_to``). Every value is server-supplied text: the page escapes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_doi.columns import to_large_string
from airflow_doi.metadata.result import METADATA_STATUSES
from airflow_doi.report.figures import TOP_VALUES, top_counts, value_counts

__all__ = [
    "METADATA_STATUSES",
    "READ_COLUMNS",
    "MetadataFigures",
    "MetadataTableError",
    "UpdatedWork",
    "metadata_figures",
]

#: Key columns, best first: the operator's table, then the CLI's output.
KEY_COLUMNS: Final[tuple[str, ...]] = ("doi_key", "key")
#: The columns the figures read; a table's other columns (``csl_json``...) are never read.
READ_COLUMNS: Final[tuple[str, ...]] = (
    *KEY_COLUMNS, "doi", "metadata_status", "title", "csl_type", "issued", "year",
    "container_title", "publisher", "updated_by", "update_to",
)
#: Rows of the journal, publisher and type tables; rows of the retracted-or-corrected list.
TOP_NAMES: Final[int] = TOP_VALUES
TOP_UPDATED: Final[int] = 50
#: Years shown one by one up to this many distinct years; by decade beyond.
MAX_YEAR_BARS: Final[int] = 30
#: The update type that makes a work retracted (Crossref's ``updated-by`` types).
RETRACTION: Final[str] = "retraction"
_TEXT: Final[pa.DataType] = pa.large_string()


class MetadataTableError(ValueError):
    """The metadata table lacks the columns the report needs."""


@dataclass(frozen=True)
class UpdatedWork:
    """A work that a notice updates: its DOI, title and the ``(type, notice DOI)`` pairs."""

    doi: str
    title: str | None
    updates: tuple[tuple[str, str], ...]

    @property
    def retracted(self) -> bool:
        return any(kind.lower() == RETRACTION for kind, _ in self.updates)


@dataclass
class MetadataFigures:
    """What the report shows about metadata; a ``None`` part had no column in the table."""

    rows: int = 0
    #: Distinct comparison keys (each counted once, however many rows repeat it).
    keys: int = 0
    #: Rows without a key, or never asked (cells that are not valid DOIs, in the CLI's output).
    rows_without_key: int = 0
    #: ``metadata_status -> keys``, :data:`METADATA_STATUSES` first. This and each count of
    #: names below hold the commonest few and the others summed (``top_counts``).
    statuses: dict[str, int] = field(default_factory=dict)
    #: ``csl_type -> keys``, the commonest :data:`TOP_NAMES`; ``distinct_types`` of all.
    types: dict[str, int] | None = None
    distinct_types: int = 0
    #: ``year -> keys``, in year order; keys with metadata but no year.
    years: dict[int, int] | None = None
    no_year: int = 0
    #: ``(name, keys)``, commonest first, at most :data:`TOP_NAMES`; and how many there are.
    containers: list[tuple[str, int]] | None = None
    distinct_containers: int = 0
    publishers: list[tuple[str, int]] | None = None
    distinct_publishers: int = 0
    #: Keys that a notice updates (``updated_by``), of them retracted, and by update type.
    updated: int | None = None
    retracted: int = 0
    update_types: dict[str, int] = field(default_factory=dict)
    #: Retracted ones first, then by DOI; at most :data:`TOP_UPDATED`.
    updated_works: list[UpdatedWork] = field(default_factory=list)
    #: Keys that are themselves notices (``update_to``), and by notice type.
    notices: int | None = None
    notice_types: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> int:
        return self.statuses.get("ok", 0)

    @property
    def ok_share(self) -> float:
        return self.ok / self.keys if self.keys else 0.0


def metadata_figures(table: pa.Table) -> MetadataFigures:
    """Figures of a metadata table (the operator's ``doi_metadata`` or the CLI's output)."""
    found = {name.lower(): name for name in table.column_names}
    key_name = next((found[name] for name in KEY_COLUMNS if name in found), None)
    missing = [
        what for what, there in (
            ("doi_key (or key)", key_name is not None),
            ("metadata_status", "metadata_status" in found),
        ) if not there
    ]
    if missing:
        raise MetadataTableError(
            f"the metadata table has no column {' and no column '.join(missing)} "
            f"(columns: {', '.join(table.column_names) or 'none'}); give the output of "
            "airflow-doi enrich or the doi_metadata table written by DoiEnrichOperator"
        )
    assert key_name is not None
    text = {
        name: to_large_string(table[found[name]]) for name in READ_COLUMNS if name in found
    }
    figures = MetadataFigures(rows=table.num_rows)
    # A row of the CLI's output that is not a valid DOI (metadata_status invalid: never
    # asked, though a reserved suffix has a key) is no DOI of the table, as in doi_metadata.
    asked = pc.fill_null(pc.not_equal(_trimmed(text["metadata_status"]), "invalid"), True)
    key = pc.if_else(asked, _trimmed(table[key_name]), pa.scalar(None, _TEXT))
    first = _first_row_per_key(key)
    figures.keys = len(first)
    figures.rows_without_key = figures.rows - int(pc.sum(pc.is_valid(key)).as_py() or 0)
    keys = {name: pc.take(values, first) for name, values in text.items()}
    statuses = value_counts(_trimmed(keys["metadata_status"]), METADATA_STATUSES)
    figures.statuses = top_counts(statuses)
    if "csl_type" in keys:
        types = value_counts(_trimmed(keys["csl_type"]))
        figures.distinct_types = len(types)
        figures.types = top_counts(types, TOP_NAMES)
    if "year" in keys or "issued" in keys:
        _years(figures, keys)
    for name, target in (("container_title", "containers"), ("publisher", "publishers")):
        if name in keys:
            names = value_counts(_trimmed(keys[name]))
            setattr(figures, target, list(names.items())[:TOP_NAMES])
            setattr(figures, f"distinct_{target}", len(names))
    if "updated_by" in keys:
        _updated(figures, keys)
    if "update_to" in keys:
        notices = _filled(keys["update_to"])
        figures.notices = len(notices)
        figures.notice_types = _type_counts(notices)
    return figures


def _trimmed(values: Any) -> Any:
    """Trimmed text; empty cells as nulls."""
    trimmed = pc.utf8_trim_whitespace(to_large_string(values))
    return pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, _TEXT), trimmed)


def _first_row_per_key(key: pa.ChunkedArray) -> pa.Array:
    """Row numbers of the first row of each distinct non-empty key, in row order."""
    trimmed = _trimmed(key)
    rows = pa.table({"key": trimmed, "row": pa.array(np.arange(len(key), dtype=np.int64))})
    rows = rows.filter(pc.is_valid(trimmed))
    first = rows.group_by("key").aggregate([("row", "min")])["row_min"]
    return pa.array(np.sort(first.to_numpy()), pa.int64())


def _filled(values: Any) -> list[str]:
    """The non-empty cells, trimmed."""
    return [value for value in _trimmed(values).to_pylist() if value is not None]


def _years(figures: MetadataFigures, keys: dict[str, Any]) -> None:
    """Years from ``year`` (an integer column, read as text), else the start of ``issued``."""
    year = None
    if "year" in keys:
        digits = pc.extract_regex(
            pc.fill_null(keys["year"], ""), r"^\s*(?P<y>\d{1,4})(?:\.0*)?\s*$"
        )
        year = pc.struct_field(digits, [0])
    if "issued" in keys:
        start = pc.struct_field(
            pc.extract_regex(pc.fill_null(keys["issued"], ""), r"^\s*(?P<y>\d{4})(?:\D|$)"), [0]
        )
        year = start if year is None else pc.coalesce(year, start)
    assert year is not None
    counted: dict[int, int] = {}
    for value in year.to_pylist():
        if value is not None and 0 < int(value) <= 9999:
            counted[int(value)] = counted.get(int(value), 0) + 1
    figures.years = dict(sorted(counted.items()))
    figures.no_year = max(figures.ok - sum(counted.values()), 0)


def _updates(value: str) -> tuple[tuple[str, str], ...]:
    """``"retraction:10.5555/n.1; correction"`` -> ``(("retraction", "10.5555/n.1"),
    ("correction", ""))``."""
    items = []
    for item in value.split(";"):
        kind, _, doi = item.strip().partition(":")
        if kind.strip() or doi.strip():
            items.append((kind.strip() or "update", doi.strip()))
    return tuple(items)


def _type_counts(values: list[str]) -> dict[str, int]:
    """``type -> keys`` (a key counted once per type it has), commonest first: the few
    commonest and the others summed."""
    counted: dict[str, int] = {}
    for value in values:
        for kind in dict.fromkeys(kind.lower() for kind, _ in _updates(value)):
            counted[kind] = counted.get(kind, 0) + 1
    return top_counts(dict(sorted(counted.items(), key=lambda item: (-item[1], item[0]))))


def _updated(figures: MetadataFigures, keys: dict[str, Any]) -> None:
    updated_by = _trimmed(keys["updated_by"])
    hit = pc.is_valid(updated_by)
    # Shown by its DOI as the table spells it, else by its key.
    key = _trimmed(keys[next(name for name in KEY_COLUMNS if name in keys)])
    shown = pc.coalesce(_trimmed(keys["doi"]), key) if "doi" in keys else key
    count = int(pc.sum(hit).as_py() or 0)
    titles = pc.filter(keys["title"], hit).to_pylist() if "title" in keys else [None] * count
    rows = zip(
        pc.filter(shown, hit).to_pylist(), titles, pc.filter(updated_by, hit).to_pylist(),
        strict=True,
    )
    works = [
        UpdatedWork(doi or "", (title or "").strip() or None, _updates(value))
        for doi, title, value in rows
    ]
    figures.updated = len(works)
    figures.retracted = sum(work.retracted for work in works)
    figures.update_types = _type_counts([value for value in updated_by.to_pylist() if value])
    works.sort(key=lambda work: (not work.retracted, work.doi))
    figures.updated_works = works[:TOP_UPDATED]
