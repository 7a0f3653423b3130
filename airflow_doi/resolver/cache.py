"""A persistent answer cache in SQLite, keyed by comparison key, honouring each ttl.

Why SQLite: it is in the standard library, one file, safe across processes, and with WAL
journaling each committed row survives the process being killed, so the cache doubles as the
batch's checkpoint. Every key is written (and committed) the moment it finishes; a re-run
after a crash or SIGKILL only asks the proxy for keys that are missing or expired.

Rows are also keyed by the request's filter query (``type``/``index``): an answer filtered
to ``URL`` values must not stand in for an unfiltered one. ``error`` results are never
stored, so a failure is always retried by the next run.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

__all__ = ["CachedAnswer", "ResolverCache"]

_SCHEMA = """
create table if not exists answers (
    key text not null,
    query text not null,
    doi text not null,
    status text not null,
    url text,
    response_code integer,
    http_status integer,
    attempts integer not null,
    "values" text not null,
    resolved_at text not null,
    expires_at text not null,
    primary key (key, query)
)
"""

#: SQLite caps the number of bound parameters; look-ups go in chunks below it.
_CHUNK = 500


@dataclass(frozen=True)
class CachedAnswer:
    key: str
    doi: str
    status: str
    url: str | None
    response_code: int | None
    http_status: int | None
    attempts: int
    values: tuple[dict[str, Any], ...]
    resolved_at: datetime
    expires_at: datetime


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat()


class ResolverCache:
    """Open (creating if needed) a cache file; use as a context manager or call close()."""

    def __init__(self, path: str | os.PathLike[str], query: str = "") -> None:
        self.path = os.fspath(path)
        self.query = query
        self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self._conn.execute("pragma journal_mode=wal")
        # NORMAL under WAL: a committed row survives a killed process (not a power cut),
        # without an fsync per DOI.
        self._conn.execute("pragma synchronous=normal")
        self._conn.execute(_SCHEMA)

    def __enter__(self) -> ResolverCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    def fresh(self, keys: Iterable[str], now: datetime) -> dict[str, CachedAnswer]:
        """Answers for ``keys`` that have not expired at ``now``."""
        found: dict[str, CachedAnswer] = {}
        wanted = list(dict.fromkeys(keys))
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(
                "select key, doi, status, url, response_code, http_status, attempts,"
                ' "values", resolved_at, expires_at from answers'
                f" where query = ? and key in ({marks})",
                [self.query, *chunk],
            ).fetchall()
            for row in rows:
                expires_at = datetime.fromisoformat(row[9])
                if expires_at <= now:
                    continue
                found[row[0]] = CachedAnswer(
                    key=row[0],
                    doi=row[1],
                    status=row[2],
                    url=row[3],
                    response_code=row[4],
                    http_status=row[5],
                    attempts=row[6],
                    values=tuple(json.loads(row[7])),
                    resolved_at=datetime.fromisoformat(row[8]),
                    expires_at=expires_at,
                )
        return found

    def store(self, answer: CachedAnswer) -> None:
        """Write one finished key and commit at once (the checkpoint of the batch)."""
        if answer.status == "error":
            raise ValueError("error results are never cached")
        self._conn.execute(
            "insert or replace into answers (key, query, doi, status, url, response_code,"
            ' http_status, attempts, "values", resolved_at, expires_at)'
            " values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                answer.key,
                self.query,
                answer.doi,
                answer.status,
                answer.url,
                answer.response_code,
                answer.http_status,
                answer.attempts,
                json.dumps(list(answer.values), ensure_ascii=False),
                _iso(answer.resolved_at),
                _iso(answer.expires_at),
            ),
        )

    def __len__(self) -> int:
        return int(self._conn.execute("select count(*) from answers").fetchone()[0])
