"""A database URL opened read-only: ``sqlite:///``, ``duckdb:///`` and ``postgresql://`` URLs.

A file database is written ``scheme:///path`` as SQLAlchemy spells it (``sqlite:///rel.db``,
``sqlite:////abs.db``); :func:`database_path` is the one reading of that form, for the report
and for ``airflow-doi sql install``. Errors name the URL without its password and say what to
do, in our words rather than a driver's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Final

from airflow_doi._install import pip_install
from airflow_doi.resolver.config import redact_url

__all__ = [
    "FILE_SCHEMES",
    "SQL_SCHEMES",
    "DatabaseUrlError",
    "database_file",
    "database_path",
    "is_database_url",
    "open_read_only",
]

#: URL schemes read as databases; anything else is a file path.
SQL_SCHEMES: Final[tuple[str, ...]] = ("sqlite", "duckdb", "postgresql", "postgres")
#: The schemes of :data:`SQL_SCHEMES` whose database is a file (``scheme:///path``).
FILE_SCHEMES: Final[tuple[str, ...]] = ("sqlite", "duckdb")


class DatabaseUrlError(ValueError):
    """The URL cannot be opened; the message names it (without its password) and says why."""


def is_database_url(source: str | Path) -> bool:
    """Whether ``source`` is a URL of :data:`SQL_SCHEMES` (else it is a file path)."""
    scheme, sep, _ = str(source).partition("://")
    return bool(sep) and scheme.lower() in SQL_SCHEMES


def database_path(url: str) -> Path:
    """The file of a ``scheme:///path`` URL: ``sqlite:///relative.db`` and
    ``sqlite:////absolute.db``, as SQLAlchemy spells them. Raises ``ValueError`` when the
    URL is not written with three slashes; whether the file exists is the caller's concern."""
    rest = url.partition("://")[2]
    if not rest.startswith("/"):
        raise ValueError("write a file database as scheme:///path (three slashes)")
    return Path(rest[1:])


def database_file(url: str) -> Path | None:
    """The file a ``sqlite:///`` or ``duckdb:///`` URL reads (None for a server's URL, or
    one not written with three slashes, which cannot be opened)."""
    if url.partition("://")[0].lower() not in FILE_SCHEMES:
        return None
    try:
        return database_path(url)
    except ValueError:
        return None


def open_read_only(url: str) -> Any:
    """A DB-API connection to ``url`` that may only read (a DuckDB connection for
    ``duckdb:///``). Raises :class:`DatabaseUrlError` saying why it cannot be opened."""
    where = redact_url(url)
    scheme = url.partition("://")[0].lower()
    try:
        if scheme == "sqlite":
            return sqlite3.connect(f"{_existing(url, where).resolve().as_uri()}?mode=ro", uri=True)
        if scheme == "duckdb":
            import duckdb  # the [duckdb] extra: said missing before the path is looked at

            return duckdb.connect(str(_existing(url, where)), read_only=True)
        import psycopg  # the [postgres] extra

        connection = psycopg.connect(url)
        connection.read_only = True
        return connection
    except DatabaseUrlError:
        raise
    except ModuleNotFoundError as error:
        raise DatabaseUrlError(
            f"{where}: reading it needs the {error.name} package: "
            + pip_install("duckdb" if scheme == "duckdb" else "postgres")
        ) from None
    except Exception:
        raise DatabaseUrlError(
            f"{where}: cannot connect: check the host, port, user, password and database "
            "name in the URL, and that the server is running"
        ) from None


def _existing(url: str, where: str) -> Path:
    """The file of a ``scheme:///path`` URL, which must exist (a typo must not create one)."""
    try:
        path = database_path(url)
    except ValueError as error:
        raise DatabaseUrlError(f"{where}: {error}") from None
    if not path.is_file():
        raise DatabaseUrlError(f"{where}: no such database file {str(path)!r}")
    return path
