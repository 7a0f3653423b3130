"""The SQLite cache (and checkpoint) of an enrichment: one row per key, with its expiry.

The resolver's cache file format, with a table of its own (``metadata``): one file may serve
``resolve`` and ``enrich`` at once. Claims are the resolver's, in their own namespace, so
several processes sharing the file ask for each key once. Each key is committed the moment
it finishes: a run killed halfway and started again asks only for the keys it had not
finished. ``error`` results are never stored.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from airflow_doi.resolver.cache import ResolverCache, _iso

__all__ = ["CachedMetadata", "MetadataCache"]

_SCHEMA = """
create table if not exists metadata (
    key text not null primary key,
    doi text not null,
    status text not null,
    fields text not null,
    source_host text,
    note text,
    attempts integer not null,
    http_status integer,
    csl_json text,
    fetched_at text not null,
    expires_at text not null,
    allowlist text not null,
    agency text,
    metadata_source text
)
"""
#: The data files' members a scan finished (its found keys are in ``metadata``): a scan of the
#: same files for the same keys, killed and started again, reads only the others.
_SNAPSHOT_MEMBERS = """
create table if not exists snapshot_members (
    scan text not null,
    member text not null,
    finished_at text not null,
    records integer not null,
    found integer not null,
    newest text,
    primary key (scan, member)
)
"""
#: The update streams' harvests: where each stands (its next cursor) and when it started and
#: finished; kept with the rows of each page in one commit.
_UPDATE_STREAMS = """
create table if not exists update_streams (
    id text not null primary key,
    source text not null,
    since text not null,
    cursor text,
    pages integer not null,
    records integer not null,
    found integer not null,
    restarts integer not null,
    started_at text not null,
    finished_at text
)
"""
_INSERT = (
    "insert or replace into metadata (key, doi, status, fields, source_host, note, attempts,"
    " http_status, csl_json, fetched_at, expires_at, allowlist, agency, metadata_source)"
    " values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: Columns added since the first release, with their types: added to an older cache file.
_ADDED = (("agency", "text"), ("metadata_source", "text"))
#: The claims namespace of metadata requests (the resolver's is its filter query).
CLAIMS = "metadata:csl"


@dataclass(frozen=True)
class CachedMetadata:
    key: str
    doi: str
    status: str
    fields: dict[str, Any]
    source_host: str | None
    note: str | None
    attempts: int
    http_status: int | None
    csl_json: str | None
    fetched_at: datetime
    expires_at: datetime
    agency: str | None = None
    metadata_source: str | None = None


class MetadataCache(ResolverCache):
    """Open (creating if needed) a cache file for metadata; a context manager."""

    def __init__(self, path: str | os.PathLike[str], allowlist: str = "") -> None:
        super().__init__(path, CLAIMS)
        self._retrying(_SCHEMA)
        self._retrying(_SNAPSHOT_MEMBERS)
        self._retrying(_UPDATE_STREAMS)
        have = {row[1] for row in self._conn.execute("pragma table_info(metadata)")}
        for name, sql_type in _ADDED:
            if name not in have:  # a cache file of an earlier release
                try:
                    self._retrying(f"alter table metadata add column {name} {sql_type}")
                except sqlite3.OperationalError as error:  # another process added it first
                    if "duplicate column" not in str(error):
                        raise
        #: The allowed origins of this run: a ``no_metadata`` answer given under another
        #: allowlist (a landing page off it) is asked again, not trusted.
        self.allowlist = allowlist

    def fresh(self, keys: Any, now: datetime) -> dict[str, CachedMetadata]:  # type: ignore[override]
        """Records for ``keys`` that have not expired at ``now``."""
        found: dict[str, CachedMetadata] = {}
        select = (
            "select key, doi, status, fields, source_host, note, attempts, http_status,"
            " csl_json, fetched_at, expires_at, allowlist, agency, metadata_source"
            " from metadata where key in"
        )
        for row in self.select_keys(select, keys):
            expires_at = datetime.fromisoformat(row[10])
            if expires_at <= now or (row[2] == "no_metadata" and row[11] != self.allowlist):
                continue
            found[row[0]] = CachedMetadata(
                row[0], row[1], row[2], json.loads(row[3]), row[4], row[5], row[6], row[7],
                row[8], datetime.fromisoformat(row[9]), expires_at, row[12], row[13],
            )
        return found

    def _row(self, answer: CachedMetadata) -> tuple[Any, ...]:
        if answer.status == "error":
            raise ValueError("error results are never cached")
        return (answer.key, answer.doi, answer.status,
                json.dumps(answer.fields, ensure_ascii=False), answer.source_host, answer.note,
                answer.attempts, answer.http_status, answer.csl_json, _iso(answer.fetched_at),
                _iso(answer.expires_at), self.allowlist, answer.agency, answer.metadata_source)

    def store(self, answer: CachedMetadata) -> None:  # type: ignore[override]
        """Write one finished key and commit at once (the checkpoint of the batch)."""
        self._conn.execute(_INSERT, self._row(answer))

    def finished_members(self, scan: str) -> set[str]:
        """The members of the data files that the scan ``scan`` finished."""
        rows = self._conn.execute("select member from snapshot_members where scan = ?", (scan,))
        return {row[0] for row in rows}

    def store_member(self, scan: str, member: str, records: int,
                     answers: Sequence[CachedMetadata], newest: str | None = None) -> None:
        """A finished member's keys and the member itself (and when its newest record
        changed), in one commit: a scan killed before it reads the member again, never half
        of it."""
        rows = [self._row(answer) for answer in answers]
        finished = _iso(datetime.now(timezone.utc))
        self.together(_INSERT, rows, (
            "insert or replace into snapshot_members (scan, member, finished_at, records,"
            " found, newest) values (?, ?, ?, ?, ?, ?)",
            (scan, member, finished, records, len(rows), newest)))

    def newest_record(self, scan: str) -> str | None:
        """When the newest record the scan ``scan`` read last changed (ISO text)."""
        row = self._conn.execute("select max(newest) from snapshot_members where scan = ?",
                                 (scan,)).fetchone()
        return row[0] if row and row[0] else None

    def update_states(self) -> list[dict[str, Any]]:
        """Every harvest of the update streams this cache recorded, newest first."""
        cursor = self._conn.execute(
            "select id, source, since, cursor, pages, records, found, restarts, started_at,"
            " finished_at from update_streams order by started_at desc")
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def store_page(self, state: Any, answers: Sequence[CachedMetadata]) -> None:
        """A page of an update stream: its keys and where the stream stands, in one commit."""
        rows = [self._row(answer) for answer in answers]
        finished = _iso(datetime.now(timezone.utc)) if state.finished else None
        self.together(_INSERT, rows, (
            "insert or replace into update_streams (id, source, since, cursor, pages, records,"
            " found, restarts, started_at, finished_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (state.id, state.source, state.since, state.cursor, state.pages, state.records,
             state.found, state.restarts, _iso(state.started_at), finished)))

    def keys_stored_since(self, sources: Sequence[str], since: datetime) -> set[str]:
        """The keys whose rows ``sources`` (``metadata_source`` values) stored at or after
        ``since``: what a harvest started again must not write twice."""
        marks = ",".join("?" * len(sources))
        rows = self._conn.execute(
            f"select key from metadata where metadata_source in ({marks}) and fetched_at >= ?",
            (*sources, _iso(since)))
        return {row[0] for row in rows}

    def __len__(self) -> int:
        return int(self._conn.execute("select count(*) from metadata").fetchone()[0])
