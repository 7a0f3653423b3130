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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from datetime import datetime, timedelta, timezone
from typing import Any, Final

from airflow_doi.resolver.result import AnswerFields
from airflow_doi.resolver.text import json_text
from airflow_doi.resolver.urls import is_safe_url

__all__ = ["AGENCY_TTL", "CLAIM_LEASE", "CachedAnswer", "ResolverCache"]

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
    agency text,
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
#: Who registered each key, as Which RA? named it, kept the moment each request is answered:
#: a run stopped during its Which RA? requests (a million keys are 20,000 of them) asks only
#: for the others when started again.
_AGENCIES = """
create table if not exists agencies (
    key text not null primary key,
    agency text not null,
    asked_at text not null
)
"""
#: Seconds a key's agency is trusted (30 days): a DOI seldom moves to another agency, and a
#: moved one is asked again after that.
AGENCY_TTL: Final = 30 * 86400.0
#: Seconds after which a claim is taken over even if its holder may still run (another host
#: sharing the file, or a platform where process ids cannot be checked).
CLAIM_LEASE: Final = 3600.0
#: Seconds a writer waits for another process's write to finish before failing.
BUSY_TIMEOUT: Final = 30.0

#: SQLite caps the number of bound parameters; look-ups go in chunks below it.
_CHUNK = 500


@dataclass(frozen=True, kw_only=True)
class CachedAnswer(AnswerFields):
    """One row of the ``answers`` table: the proxy's answer fields
    (:class:`~airflow_doi.resolver.result.AnswerFields`), for this key, and the requests it
    took."""

    key: str
    doi: str
    attempts: int


#: The columns of ``answers`` besides ``query``: one per field of :class:`CachedAnswer`.
_COLUMNS: Final[tuple[str, ...]] = tuple(f.name for f in fields(CachedAnswer))
_COLUMN_LIST: Final = ", ".join(f'"{name}"' for name in _COLUMNS)


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat()


def _cell(value: object) -> object:
    """A field of a :class:`CachedAnswer` as its cell: a time as UTC ISO text, the values as
    JSON text that is safe text (:func:`~airflow_doi.resolver.text.json_text`: a lone
    surrogate a server sent is stored as its escape, and read back as it came)."""
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, (tuple, list)):
        return json_text(list(value))
    return value


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
        self._retrying(_AGENCIES)
        have = {row[1] for row in self._conn.execute("pragma table_info(answers)")}
        if "agency" not in have:  # a cache file of an earlier release
            try:
                self._retrying("alter table answers add column agency text")
            except sqlite3.OperationalError as error:  # another process added it first
                if "duplicate column" not in str(error):
                    raise

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

    def select_keys(
        self, select: str, keys: Iterable[str], *params: object
    ) -> Iterator[tuple[Any, ...]]:
        """The rows of ``select``, a statement ending in ``key in``, for the distinct ``keys``
        (``params`` bound before them): in chunks under SQLite's cap on bound parameters."""
        wanted = list(dict.fromkeys(keys))
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            yield from self._conn.execute(f"{select} ({marks})", [*params, *chunk]).fetchall()

    def fresh(self, keys: Iterable[str], now: datetime) -> dict[str, CachedAnswer]:
        """Answers for ``keys`` that have not expired at ``now``."""
        found: dict[str, CachedAnswer] = {}
        select = f"select {_COLUMN_LIST} from answers where query = ? and key in"
        for row in self.select_keys(select, keys, self.query):
            cells = dict(zip(_COLUMNS, row, strict=True))
            expires_at = datetime.fromisoformat(cells["expires_at"])
            url = cells["url"]
            if expires_at <= now or (url is not None and not is_safe_url(url)):
                continue
            found[cells["key"]] = CachedAnswer(**{
                **cells,
                "values": tuple(json.loads(cells["values"])),
                "resolved_at": datetime.fromisoformat(cells["resolved_at"]),
                "expires_at": expires_at,
            })
        return found

    def store(self, answer: CachedAnswer) -> None:
        """Write one finished key and commit at once (the checkpoint of the batch)."""
        if answer.status == "error":
            raise ValueError("error results are never cached")
        marks = ", ".join("?" * (len(_COLUMNS) + 1))
        self._conn.execute(
            f"insert or replace into answers (query, {_COLUMN_LIST}) values ({marks})",
            (self.query, *(_cell(getattr(answer, name)) for name in _COLUMNS)),
        )

    def __len__(self) -> int:
        return int(self._conn.execute("select count(*) from answers").fetchone()[0])

    # -- agencies: Which RA?'s answers, kept for a run started again ----------------------------
    def agencies(self, keys: Iterable[str], now: datetime) -> dict[str, str]:
        """The agency Which RA? named for each of ``keys`` that was asked within
        :data:`AGENCY_TTL` of ``now``."""
        oldest = now - timedelta(seconds=AGENCY_TTL)
        select = "select key, agency, asked_at from agencies where key in"
        return {key: agency for key, agency, asked in self.select_keys(select, keys)
                if datetime.fromisoformat(asked) > oldest}

    def store_agencies(self, agencies: Iterable[tuple[str, str]], now: datetime) -> None:
        """``(key, agency)`` pairs Which RA? answered at ``now``, in one commit."""
        asked = _iso(now)
        self.together("insert or replace into agencies (key, agency, asked_at) values (?, ?, ?)",
                      [(key, agency, asked) for key, agency in agencies])

    def together(self, statement: str, rows: Iterable[tuple[Any, ...]],
                 *more: tuple[str, tuple[Any, ...]]) -> None:
        """``statement`` for each of ``rows``, then each of ``more`` (a statement and its
        values), in one transaction: all of it is kept, or none."""
        self._retrying("begin immediate")  # another writer's transaction: wait for its end
        try:
            self._conn.executemany(statement, rows)
            for extra in more:
                self._conn.execute(*extra)
            self._conn.execute("commit")
        except BaseException:
            self._conn.execute("rollback")
            raise

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
