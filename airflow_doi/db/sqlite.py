"""DOI functions for SQLite, registered on a Python ``sqlite3`` connection.

SQLite has no ``CREATE FUNCTION``: scalar functions come from the host program. These call
the parser directly (the C core through :func:`airflow_doi.native.validate` where it is
built, else :mod:`airflow_doi.syntax`), so SQLite answers exactly like Python
(``decode="auto"``) and NULL behaves as in every other engine: normalize/key/url give NULL,
``doi_is_valid`` gives 0 and ``doi_reason`` gives ``'empty'``.

The functions of one connection share the parse of the last cell they read: an ``UPDATE`` that
sets ``doi_normalize(x)``, ``doi_key(x)``, ``doi_is_valid(x)`` and ``doi_reason(x)`` parses each
row's cell once, not four times.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from airflow_doi.native import validate
from airflow_doi.presentation import DEFAULT_BASE_URL, encode_path
from airflow_doi.syntax import Validation, ascii_upper

__all__ = ["FUNCTIONS", "register"]

Cell = str | bytes | None
Result = str | int | None


def doi_normalize(result: Validation) -> str | None:
    return result.doi


def doi_key(result: Validation) -> str | None:
    return None if result.doi is None else ascii_upper(result.doi)


def doi_is_valid(result: Validation) -> int:
    return int(result.valid)


def doi_reason(result: Validation) -> str | None:
    return result.reason


def doi_url(result: Validation) -> str | None:
    return None if result.doi is None else DEFAULT_BASE_URL + encode_path(result.doi)


#: Each SQL function, as an answer drawn from the cell's validation.
FUNCTIONS: dict[str, Callable[[Validation], Result]] = {
    "doi_normalize": doi_normalize,
    "doi_key": doi_key,
    "doi_is_valid": doi_is_valid,
    "doi_reason": doi_reason,
    "doi_url": doi_url,
}


class _LastCell:
    """The validation of the last cell a connection's functions read, kept for the next call.

    A connection runs one statement at a time, so its functions are called one after another,
    and the four calls of one row meet the same cell.
    """

    def __init__(self) -> None:
        self.cell: object = None
        self.result: Validation = validate(None)

    def __call__(self, value: object) -> Validation:
        # A non-text cell (an INTEGER column, say) is not a DOI: answer like a bad string rather
        # than raise inside SQLite, which would abort the whole statement.
        if value is not None and not isinstance(value, (str, bytes)):
            value = str(value)
        if type(value) is not type(self.cell) or value != self.cell:
            self.cell, self.result = value, validate(value)
        return self.result


def _answer(name: str, function: Callable[[Validation], Result],
            judge: _LastCell) -> Callable[[object], Result]:
    def call(value: object) -> Result:
        return function(judge(value))

    call.__name__ = name
    return call


def register(connection: sqlite3.Connection) -> None:
    """Register the five DOI functions (deterministic) on ``connection``."""
    judge = _LastCell()
    for name, function in FUNCTIONS.items():
        connection.create_function(name, 1, _answer(name, function, judge), deterministic=True)
