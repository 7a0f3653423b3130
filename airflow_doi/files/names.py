"""The names of a table's columns as the file commands take them: the DOI column found as
people type it (:func:`match_column`), and the names of the columns a command adds, chosen so
that none clashes (:func:`added_names`) and found again in a file it wrote
(:func:`find_added`). Standard library only."""

from __future__ import annotations

import itertools

from airflow_doi.files import TableInputError

__all__ = ["added_names", "find_added", "fold", "match_column"]


def fold(name: str) -> str:
    """A header as people mean it: spaces, no-break spaces and a stray BOM trimmed, any case."""
    return name.strip().strip("\ufeff").strip().casefold()


def match_column(names: list[str], column: str) -> list[str]:
    """The headers ``column`` names: itself if present, else those equal to it once trimmed
    and case-folded (several: ambiguous)."""
    if column in names:
        return [column] * names.count(column)
    return [name for name in names if fold(name) == fold(column)]


def added_names(
    wanted: tuple[str, ...], names: list[str], column: str, prefix: str | None,
    stem: str | None = None,
) -> list[str]:
    """Names for the columns a command appends to a file that has ``names``.

    ``prefix`` (``--prefix``) is taken as given, and refused if a name then clashes. Without
    it the names are ``wanted`` unless one of them is already a column (case-insensitively,
    as DuckDB and spreadsheets compare names); then each is named after ``stem``, the
    command's own word (``resolve``'s ``resolution_status``, ``enrich``'s ``metadata_title``;
    a name that starts with it is kept: ``metadata_status``), or without one each ``doi...``
    name is derived from the DOI column (``doi`` -> ``<column>_normalized``, ``doi_key`` ->
    ``<column>_key``, ...), with ``_2``, ``_3``... added until none clashes.
    """
    taken = {fold(name) for name in names}

    def clashes(candidates: list[str]) -> list[str]:
        return [name for name in candidates if fold(name) in taken]

    if prefix:
        chosen = [prefix + name for name in wanted]
        if clashes(chosen):
            raise TableInputError(
                f"already has column(s) {', '.join(clashes(chosen))}; pick another --prefix, "
                "or leave it out and the added columns are named after the DOI column"
            )
        return chosen
    if not clashes(list(wanted)):
        return list(wanted)
    if stem:
        derived = [name if name.startswith(f"{stem}_") else f"{stem}_{name}" for name in wanted]
    else:
        stem = column.strip().strip("\ufeff").strip() or "doi"
        derived = [_derived_name(stem, name) for name in wanted]
    for number in itertools.count(1):
        chosen = derived if number == 1 else [f"{name}_{number}" for name in derived]
        if not clashes(chosen) and len({fold(name) for name in chosen}) == len(chosen):
            return chosen
    raise AssertionError("unreachable")  # pragma: no cover


def find_added(names: list[str], wanted: tuple[str, ...]) -> dict[str, str] | None:
    """Where a file a command wrote holds the columns it added: ``wanted`` -> the name
    each has there, whether as is or renamed by :func:`added_names` (after the DOI column, with
    a ``_2``... for a second clash, or a ``--prefix``); None when they are not all there. So a
    reader of ``resolve``'s output finds ``status`` in ``doi_status`` when the input had a
    column ``doi``."""
    if all(name in names for name in wanted):
        return {name: name for name in wanted}
    # Renamed: the last of ours ends one of the names, maybe with a _2...; what comes before
    # it is a --prefix, or the DOI column's name and "_".
    last = wanted[-1]
    for found in names:
        for suffix in ("", *(f"_{number}" for number in range(2, 10))):
            if not found.endswith(last + suffix) or found == last + suffix:
                continue
            before = found[: len(found) - len(last) - len(suffix)]
            candidates = [{name: before + name for name in wanted}] if not suffix else []
            if before.endswith("_"):
                candidates.append({name: _derived_name(before[:-1], name) + suffix
                                   for name in wanted})
                candidates.append({name: (name if name.startswith(before) else before + name)
                                   + suffix for name in wanted})
            for mapping in candidates:
                if all(value in names for value in mapping.values()):
                    return mapping
    return None


def _derived_name(stem: str, name: str) -> str:
    """``name`` as :func:`added_names` renames it after the DOI column ``stem``."""
    if name == "doi":
        return f"{stem}_normalized"
    if name.startswith("doi_"):
        return stem + name[3:]
    return f"{stem}_{name}"
