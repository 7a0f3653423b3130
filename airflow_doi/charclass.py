"""Sets of characters as a regular expression's bracket classes write them: the runs of
consecutive code points (``a-z``), found once here for the SQL generator's classes
(:func:`airflow_doi.sqlgen.definition.char_class`) and the repair rules' hints
(:mod:`airflow_doi.repair.rules`), which each spell them for their engines. Standard library
only."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["code_point_runs"]


def code_point_runs(chars: Iterable[str]) -> list[tuple[int, int]]:
    """The distinct code points of ``chars`` as ascending inclusive runs ``(first, last)``."""
    runs: list[list[int]] = []
    for point in sorted({ord(c) for c in chars}):
        if runs and point == runs[-1][1] + 1:
            runs[-1][1] = point
        else:
            runs.append([point, point])
    return [(first, last) for first, last in runs]
