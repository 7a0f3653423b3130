"""The figures of a quality report, computed column-wise on Arrow arrays.

Every figure comes from one pass of the project's vectorized engine
(:func:`airflow_doi.columns.analyse`) and a few Arrow group-bys, never from a Python loop per
row, so a million-row column costs seconds. Python only touches what the report shows: the top
groups, the examples, at most a few hundred values.

Duplicates are grouped on the comparison key (Z39.84 section 4: ASCII ``a``-``z`` upper-cased,
nothing else), so ``doi:10.1038/171737A0`` and ``https://doi.org/10.1038/171737a0`` are one DOI
written two ways: the kind of duplicate a plain ``GROUP BY doi`` never shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_doi.columns import _URL_WRAPPER, _ci, analyse, to_large_string
from airflow_doi.repair.damage import LikelyDamaged
from airflow_doi.syntax import DOI_SCHEME, INFO_PREFIX, REASONS, TRIM_CHARS, URN_PREFIX, Decode

__all__ = [
    "FORMS",
    "MALFORMED_REASON",
    "DuplicateGroup",
    "Figures",
    "ReasonFigure",
    "compute_figures",
    "forms_of",
    "top_counts",
    "value_counts",
]

#: Presentation forms in report order, as :attr:`airflow_doi.Doi.form` names them.
FORMS: Final[tuple[str, ...]] = ("bare", "doi", "url", "urn", "info")
#: Reason of a CSV row whose field count did not match the header (as ``airflow-doi normalize``).
MALFORMED_REASON: Final[str] = "malformed_row"
#: How many duplicate groups, examples per reason and spellings per group are shown.
TOP_GROUPS: Final[int] = 25
EXAMPLES_PER_REASON: Final[int] = 3
SPELLINGS_PER_GROUP: Final[int] = 6
#: Values a chart or a list of counts shows one by one; the rest are one entry, the others.
TOP_VALUES: Final[int] = 10

_TEXT: Final[pa.DataType] = pa.large_string()
#: The wrapper tests of :func:`airflow_doi.syntax._unwrap`, as RE2 on the left-trimmed cell; a
#: DOI URL whose path starts ``urn:doi:`` is a URN, as the scalar parser says. A URL is the
#: engine's: ``http(s)://`` and a host of :data:`~airflow_doi.syntax.URL_HOSTS`, or a host of
#: :data:`~airflow_doi.syntax.SCHEMELESS_HOSTS` alone, then ``/``.
_FORM_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    ("urn", f"^(?:{_URL_WRAPPER})?{_ci(URN_PREFIX)}"),
    ("url", f"^{_URL_WRAPPER}"),
    ("doi", f"^{_ci(DOI_SCHEME)}"),
    ("info", f"^{_ci(INFO_PREFIX)}"),
)


@dataclass(frozen=True)
class ReasonFigure:
    """Rows failing for one reason and the commonest cells that did (raw, as written)."""

    reason: str
    rows: int
    examples: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class DuplicateGroup:
    """Rows sharing one comparison key, and how each spelling of it was written."""

    key: str
    rows: int
    spellings: tuple[tuple[str, int], ...]
    distinct_spellings: int


@dataclass
class Figures:
    """Everything the report shows about one DOI column."""

    source: str
    column: str
    rows: int = 0
    valid: int = 0
    #: Rows that normalize to a DOI (valid ones and reserved suffixes): these have a key.
    with_doi: int = 0
    reasons: list[ReasonFigure] = field(default_factory=list)
    forms: dict[str, int] = field(default_factory=dict)
    prefixes: list[tuple[str, int]] = field(default_factory=list)
    distinct_prefixes: int = 0
    distinct_keys: int = 0
    #: Keys found on more than one row, and the rows beyond the first of each such key.
    duplicate_keys: int = 0
    duplicate_rows: int = 0
    #: Keys whose rows are written in more than one way (case, wrapper, whitespace, encoding).
    hidden_keys: int = 0
    hidden_rows: int = 0
    groups: list[DuplicateGroup] = field(default_factory=list)
    #: Valid rows a repair rule would change (``10.1000/182 (retracted)``), and the commonest
    #: as ``(doi, likely meant, rule, rows)``.
    damaged: int = 0
    damaged_examples: list[tuple[str, str, str, int]] = field(default_factory=list)
    #: ``key``, ``rows``: each distinct key of the column and how many rows hold it.
    key_rows: pa.Table | None = field(default=None, repr=False)
    resolution: Any = None  # a ResolutionFigures, when a resolution table was given
    metadata: Any = None  # a MetadataFigures, when a metadata table was given

    @property
    def invalid(self) -> int:
        return self.rows - self.valid

    @property
    def valid_share(self) -> float:
        return self.valid / self.rows if self.rows else 0.0


def forms_of(raw: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    """The presentation form of every cell (``bare`` when no wrapper), like ``parse().form``."""
    text = pc.utf8_ltrim(to_large_string(raw), characters=TRIM_CHARS)
    form = pa.chunked_array([pa.array(np.full(len(text), "bare", dtype=object), _TEXT)])
    # Tested from the last to the first, so the first matching pattern wins (urn before url).
    for name, pattern in reversed(_FORM_PATTERNS):
        hit = pc.fill_null(pc.match_substring_regex(text, pattern), False)
        form = pc.if_else(hit, pa.scalar(name, _TEXT), form)
    return form


def compute_figures(
    raw: pa.ChunkedArray | pa.Array,
    *,
    source: str = "",
    column: str = "",
    decode: Decode = "auto",
    overrides: Mapping[int, object] | None = None,
    malformed: np.ndarray[Any, np.dtype[np.bool_]] | None = None,
) -> Figures:
    """The report's figures for one column of raw cells.

    ``overrides`` maps row numbers to the original value of cells Arrow could not hold (bytes
    that are not UTF-8; ``raw`` then holds their repaired text); ``malformed`` flags CSV rows
    whose field count did not match the header: they count as ``malformed_row``, never valid.
    """
    raw = to_large_string(raw)
    analysis = analyse(raw, decode, overrides)
    doi: Any = analysis.doi
    reason: Any = analysis.reason
    if malformed is not None and malformed.any():
        flags = pa.array(malformed)
        doi = pc.if_else(flags, pa.scalar(None, _TEXT), doi)
        reason = pc.if_else(flags, pa.scalar(MALFORMED_REASON, _TEXT), reason)
    table = pa.table({"raw": raw, "doi": doi, "reason": reason})
    figures = Figures(source=source, column=column, rows=table.num_rows)
    figures.valid = reason.null_count  # a null reason is a valid row
    figures.reasons = _reasons(table)
    with_doi = table.filter(pc.is_valid(table["doi"]))
    figures.with_doi = with_doi.num_rows
    keyed = with_doi.append_column("key", pc.ascii_upper(with_doi["doi"]))
    figures.forms = value_counts(forms_of(keyed["raw"]), FORMS, zeros=True)
    _prefixes(figures, keyed)
    _duplicates(figures, keyed)
    damaged = LikelyDamaged()
    damaged.add(doi, pc.is_null(reason))
    figures.damaged = damaged.rows
    figures.damaged_examples = [
        (text, repair.doi, repair.rule, rows) for text, repair, rows in damaged.examples()
    ]
    return figures


def value_counts(
    values: Any, order: tuple[str, ...] = (), *, zeros: bool = False
) -> dict[str, int]:
    """``value -> count`` of the non-empty values: the names of ``order`` first (with a 0 for
    one that is absent when ``zeros``), then the others by count, then by value."""
    found: dict[str, int] = {}
    for item in pc.value_counts(values).to_pylist():
        if item["values"] not in (None, ""):
            found[item["values"]] = int(item["counts"])
    ordered = {name: found.pop(name, 0) for name in order if zeros or name in found}
    ordered.update(sorted(found.items(), key=lambda item: (-item[1], item[0])))
    return ordered


def top_counts(counts: dict[str, int], limit: int = TOP_VALUES) -> dict[str, int]:
    """The first ``limit`` entries of ``counts`` (in its order: :func:`value_counts` puts the
    known names first, then the commonest), and when there are more, one last entry that sums
    them, ``(N others)``: a chart of any input has at most ``limit + 1`` bars, and its bars
    still add up to the whole."""
    items = list(counts.items())
    kept = dict(items[:limit])
    rest = items[limit:]
    if rest:
        label = f"({len(rest):,} others)"
        while label in kept:  # a value of the data spelled so: never merged with it
            label = f"({label})"
        kept[label] = sum(count for _, count in rest)
    return kept


def _reasons(table: pa.Table) -> list[ReasonFigure]:
    invalid = table.filter(pc.is_valid(table["reason"])).select(["reason", "raw"])
    if not invalid.num_rows:
        return []
    cells = pc.fill_null(invalid["raw"], "")  # an empty cell is shown as an empty example
    spelled = pa.table({"reason": invalid["reason"], "raw": cells})
    counted = spelled.group_by(["reason", "raw"]).aggregate([([], "count_all")])
    counted = counted.sort_by([("count_all", "descending"), ("raw", "ascending")])
    order = [*REASONS, MALFORMED_REASON]
    totals = value_counts(invalid["reason"])
    # Examples wanted per reason: three, or fewer where fewer distinct cells failed that way.
    wanted = {
        name: min(EXAMPLES_PER_REASON, n) for name, n in value_counts(counted["reason"]).items()
    }
    examples: dict[str, list[tuple[str, int]]] = {name: [] for name in totals}
    # The groups are sorted by count: walk them until every reason has its examples.
    reasons, raws, counts = (counted[name] for name in ("reason", "raw", "count_all"))
    for start in range(0, counted.num_rows, 4096):
        window = slice(start, start + 4096)
        for name, cell, count in zip(
            reasons[window].to_pylist(), raws[window].to_pylist(), counts[window].to_pylist(),
            strict=True,
        ):
            if len(examples[name]) < wanted[name]:
                examples[name].append((cell, count))
        if all(len(examples[name]) == wanted[name] for name in examples):
            break
    ranked = sorted(totals, key=lambda n: (order.index(n) if n in order else len(order), n))
    return [ReasonFigure(name, totals[name], tuple(examples[name])) for name in ranked]


def _prefixes(figures: Figures, keyed: pa.Table) -> None:
    if not keyed.num_rows:
        return
    prefix = pc.list_element(pc.split_pattern(keyed["doi"], "/", max_splits=1), 0)
    counts = value_counts(prefix)
    figures.distinct_prefixes = len(counts)
    figures.prefixes = list(top_counts(counts).items())


def _duplicates(figures: Figures, keyed: pa.Table) -> None:
    if not keyed.num_rows:
        return
    per_key = keyed.group_by("key").aggregate(
        [([], "count_all"), ("raw", "count_distinct")]
    )
    counts = per_key["count_all"]
    spellings = per_key["raw_count_distinct"]
    repeated = pc.greater(counts, 1)
    hidden = pc.greater(spellings, 1)
    figures.distinct_keys = per_key.num_rows
    figures.key_rows = pa.table({"key": per_key["key"], "rows": counts})
    figures.duplicate_keys = int(pc.sum(repeated).as_py() or 0)
    figures.duplicate_rows = figures.with_doi - figures.distinct_keys
    figures.hidden_keys = int(pc.sum(hidden).as_py() or 0)
    figures.hidden_rows = int(pc.sum(pc.filter(counts, hidden)).as_py() or 0)
    # Shown: groups written in several ways first (the ones a plain GROUP BY misses), then
    # groups of identical cells; the largest first within each.
    shown = per_key.filter(repeated).append_column(
        "hidden", pc.cast(pc.filter(hidden, repeated), pa.int8())
    )
    shown = shown.sort_by(
        [("hidden", "descending"), ("count_all", "descending"), ("key", "ascending")]
    ).slice(0, TOP_GROUPS)
    if not shown.num_rows:
        return
    members = keyed.filter(pc.is_in(keyed["key"], value_set=shown["key"]))
    spelled = members.group_by(["key", "raw"]).aggregate([([], "count_all")])
    spelled = spelled.sort_by([("count_all", "descending"), ("raw", "ascending")])
    by_key: dict[str, list[tuple[str, int]]] = {}
    for key, cell, count in zip(
        spelled["key"].to_pylist(), spelled["raw"].to_pylist(), spelled["count_all"].to_pylist(),
        strict=True,
    ):
        by_key.setdefault(key, []).append((cell, count))
    figures.groups = [
        DuplicateGroup(
            key=key,
            rows=rows,
            spellings=tuple(by_key[key][:SPELLINGS_PER_GROUP]),
            distinct_spellings=distinct,
        )
        for key, rows, distinct in zip(
            shown["key"].to_pylist(),
            shown["count_all"].to_pylist(),
            shown["raw_count_distinct"].to_pylist(),
            strict=True,
        )
    ]
