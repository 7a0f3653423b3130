"""A database URL opened read-only: ``sqlite:///``, ``duckdb:///`` and ``postgresql://`` URLs.

A file database is written ``scheme:///path`` as SQLAlchemy spells it (``sqlite:///rel.db``,
``sqlite:////abs.db``); :func:`database_path` is the one reading of that form, for the report
and for ``airflow-doi sql install``: the path percent-decoded (``trial%20sql.duckdb``), a query
string refused (never part of a file name), an in-memory database refused (it ends with the
command). :func:`url_port` is the one reading of a server URL's port. Errors name the URL
without its password and say what to do, in our words rather than a driver's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from airflow_doi._install import pip_install
from airflow_doi.resolver.config import redact_url, scrub

__all__ = [
    "FILE_SCHEMES",
    "SQL_SCHEMES",
    "DatabaseUrlError",
    "database_file",
    "database_path",
    "is_database_url",
    "open_read_only",
    "url_port",
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
    ``sqlite:////absolute.db``, as SQLAlchemy spells them, the path percent-decoded (``%20`` a
    space, ``%3F`` a ``?``). Raises ``ValueError`` saying what to write instead when the URL is
    not written with three slashes, names no file, names an in-memory database (``:memory:``:
    it ends with the command that opens it) or carries a query string (``?access_mode=...``:
    none is taken, and it is never part of the file name); whether the file exists is the
    caller's concern."""
    scheme, _, rest = url.partition("://")
    example = f"{scheme}:///catalogue.{'db' if scheme.lower() == 'sqlite' else scheme.lower()}"
    if not rest.startswith("/"):
        raise ValueError(f"write a file database as scheme:///path (three slashes), e.g. "
                         f"{example}")
    written, mark, query = rest[1:].partition("?")
    if mark:
        raise ValueError(f"the query string {'?' + query!r} is not taken (no option of the "
                         "driver is read from the URL, and it is no part of the file name): "
                         "remove it, and write a ? that is in the file name as %3F")
    name = unquote(written)
    if not name:
        raise ValueError(f"the URL names no file: write its path after the three slashes, "
                         f"e.g. {example}")
    if name.startswith(":memory:"):
        raise ValueError(f"{name!r} is an in-memory database, which ends with the command that "
                         f"opens it (nothing would be kept or found in it): name a file, e.g. "
                         f"{example}")
    return Path(name)


def url_port(url: str, default: int) -> int:
    """The port of a server URL (``mysql://user@host:3306/db``), ``default`` where none is
    written. Raises :class:`DatabaseUrlError` naming the URL (without its password) when the
    port is not a number from 1 to 65535, or the host is not one a URL can hold."""
    where = redact_url(url)
    try:
        port = urlsplit(url).port  # as the drivers given host and port read the URL
    except ValueError:
        written = _port_written(url)
        if written is None:
            why = ("the host is not one a URL can hold (an IPv6 address is written in "
                   "brackets, e.g. mysql://user@[::1]:3306/db): check the host")
        elif written.isdigit():
            why = (f"the port {written} is out of range: a port is a number from 1 to 65535 "
                   f"(leave it out for {default})")
        else:
            why = (f"the port {written!r} is not a number: write the port in digits (e.g. "
                   f":{default}), or leave it out for {default}")
        raise DatabaseUrlError(scrub(f"{where}: {why}", url)) from None
    if port == 0:
        raise DatabaseUrlError(f"{where}: the port 0 is out of range: a port is a number from "
                               f"1 to 65535 (leave it out for {default})")
    return default if port is None else port


def _port_written(url: str) -> str | None:
    """The port as written after the host of ``url`` (None where the host cannot be read)."""
    authority = url.partition("://")[2]
    for end in "/?#":
        authority = authority.partition(end)[0]
    host = authority.rpartition("@")[2]
    if host.startswith("["):
        close = host.find("]")
        if close < 0:
            return None
        host = host[close + 1:]
    elif host.count(":") > 1:
        return None
    return host.partition(":")[2] if ":" in host else None


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
