"""A persistent answer cache in SQLite, keyed by comparison key, honouring each ttl.

Why SQLite: it is in the standard library, one file, safe across processes, and with WAL
journaling each committed row survives the process being killed, so the cache doubles as the
batch's checkpoint. Every key is written (and committed) the moment it finishes; a re-run
after a crash or SIGKILL only asks the proxy for keys that are missing or expired.

Rows are also keyed by the request's filter query (``type``/``index``): an answer filtered
to ``URL`` values must not stand in for an unfiltered one. ``error`` results are never
stored, so a failure is always retried by the next run.

Several processes may share one file (two ``resolve`` runs, mapped Airflow tasks on one
worker): WAL lets readers and the one writer work at once, a busy timeout makes writers
queue instead of failing, and a ``claims`` table says which process is asking the proxy
about which key right now, so the others wait for its answer instead of sending the same
request. A claim dies with its process: one held by a process id that no longer runs on
this host (a SIGKILLed run) is taken over at once, any other after :data:`CLAIM_LEASE`.
A cached ``url`` that is not a safe http(s) URL (written before that check existed) is
treated as expired, so it is fetched and judged again.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Final

from airflow_doi.resolver.urls import is_safe_url

__all__ = ["CLAIM_LEASE", "CachedAnswer", "ResolverCache"]

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
_CLAIMS = """
create table if not exists claims (
    key text not null,
    query text not null,
    owner text not null,
    claimed_at real not null,
    primary key (key, query)
)
"""
#: Seconds after which a claim is taken over even if its holder may still run (another host
#: sharing the file, or a platform where process ids cannot be checked).
CLAIM_LEASE: Final = 3600.0
#: Seconds a writer waits for another process's write to finish before failing.
BUSY_TIMEOUT: Final = 30.0

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
        #: host, process id and a per-batch token: two batches in one process differ too.
        self.owner = f"{socket.gethostname()}\t{os.getpid()}\t{uuid.uuid4().hex}"
        self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
        self._conn.execute(f"pragma busy_timeout={int(BUSY_TIMEOUT * 1000)}")
        # Two processes opening a new file at once: the switch to WAL needs the file to
        # itself, and SQLite answers "database is locked" at once instead of waiting for the
        # busy timeout; so these first statements are tried again until it is free.
        self._retrying("pragma journal_mode=wal")
        # NORMAL under WAL: a committed row survives a killed process (not a power cut),
        # without an fsync per DOI.
        self._retrying("pragma synchronous=normal")
        self._retrying(_SCHEMA)
        self._retrying(_CLAIMS)

    def _retrying(self, statement: str) -> None:
        deadline = time.monotonic() + BUSY_TIMEOUT
        while True:
            try:
                self._conn.execute(statement)
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01 + random.random() * 0.04)

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
                if expires_at <= now or (row[3] is not None and not is_safe_url(row[3])):
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

    # -- claims: one process asks the proxy about a key at a time -----------------------------
    def claim(self, key: str) -> bool:
        """Take ``key`` for this batch; False while another live process holds it."""
        now = time.time()
        for _ in range(2):  # the holder may release between our insert and our look
            inserted = self._conn.execute(
                "insert or ignore into claims (key, query, owner, claimed_at) values (?, ?, ?, ?)",
                (key, self.query, self.owner, now),
            ).rowcount
            if inserted:
                return True
            row = self._conn.execute(
                "select owner, claimed_at from claims where key = ? and query = ?",
                (key, self.query),
            ).fetchone()
            if row is None:
                continue
            holder, since = row
            if holder == self.owner:
                return True
            if _alive(holder, since, now):
                return False
            taken = self._conn.execute(  # compare-and-swap: one of two rivals wins
                "update claims set owner = ?, claimed_at = ? where key = ? and query = ?"
                " and owner = ?",
                (self.owner, now, key, self.query, holder),
            ).rowcount
            return bool(taken)
        return False

    def release(self, key: str) -> None:
        """Give ``key`` back (after its answer is stored, or when it failed)."""
        self._conn.execute(
            "delete from claims where key = ? and query = ? and owner = ?",
            (key, self.query, self.owner),
        )

    def release_all(self) -> None:
        """Give back every claim of this batch (it ended, or was cancelled)."""
        try:
            self._conn.execute("delete from claims where owner = ?", (self.owner,))
        except sqlite3.Error:  # the file went away: there is nothing left to give back
            pass


def _alive(owner: str, claimed_at: float, now: float) -> bool:
    """Whether the process that wrote ``owner`` may still be working on its claim."""
    if now - claimed_at > CLAIM_LEASE:
        return False
    host, _, rest = owner.partition("\t")
    pid_text = rest.partition("\t")[0]
    if host != socket.gethostname() or os.name != "posix" or not pid_text.isdigit():
        return True  # cannot look: trust the lease
    try:
        os.kill(int(pid_text), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True
