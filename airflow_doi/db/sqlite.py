"""DOI functions for SQLite, registered on a Python ``sqlite3`` connection.

SQLite has no ``CREATE FUNCTION``: scalar functions come from the host program. These call
the parser directly (the C core through :func:`airflow_doi.native.validate` where it is
built, else :mod:`airflow_doi.syntax`), so SQLite answers exactly like Python
(``decode="auto"``) and NULL behaves as in every other engine: normalize/key/url give NULL,
``doi_is_valid`` gives 0 and ``doi_reason`` gives ``'empty'``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from airflow_doi.native import validate
from airflow_doi.presentation import DEFAULT_BASE_URL, encode_path
from airflow_doi.syntax import ascii_upper

__all__ = ["FUNCTIONS", "register"]


def doi_normalize(value: str | bytes | None) -> str | None:
    return validate(value).doi


def doi_key(value: str | bytes | None) -> str | None:
    doi = validate(value).doi
    return None if doi is None else ascii_upper(doi)


def doi_is_valid(value: str | bytes | None) -> int:
    return int(validate(value).valid)


def doi_reason(value: str | bytes | None) -> str | None:
    return validate(value).reason


def doi_url(value: str | bytes | None) -> str | None:
    doi = validate(value).doi
    return None if doi is None else DEFAULT_BASE_URL + encode_path(doi)


Result = str | int | None

FUNCTIONS: dict[str, Callable[[str | bytes | None], Result]] = {
    "doi_normalize": doi_normalize,
    "doi_key": doi_key,
    "doi_is_valid": doi_is_valid,
    "doi_reason": doi_reason,
    "doi_url": doi_url,
}


def _safe(function: Callable[[str | bytes | None], Result]) -> Callable[[object], Result]:
    # A non-text cell (an INTEGER column, say) is not a DOI: answer like a bad string rather
    # than raise inside SQLite, which would abort the whole statement.
    def call(value: object) -> Result:
        if value is not None and not isinstance(value, (str, bytes)):
            value = str(value)
        return function(value)

    call.__name__ = function.__name__
    return call


def register(connection: sqlite3.Connection) -> None:
    """Register the five DOI functions (deterministic) on ``connection``."""
    for name, function in FUNCTIONS.items():
        connection.create_function(name, 1, _safe(function), deterministic=True)
