"""The agencies' update streams: every record changed since a date, a page at a time.

What changed since the data files were made (or since the last harvest) is a few hundred list
requests, not a request per key: Crossref's ``/works?filter=from-update-date:D`` and
DataCite's ``/dois?query=updated:[D TO *]``, cursor-paged, 1,000 records a page
(:func:`~airflow_doi.metadata.crossref.updates_url`, :func:`~airflow_doi.metadata.datacite.
updates_url`). Each page goes through its host's gate for list queries (the pace and the
concurrency cap of ``list_rate`` / ``list_concurrency``, lowered at once to a limit the host
announces, ``Retry-After``, backoff, the breaker), and the records of the keys asked for are
mapped exactly as the batch APIs' answers are (``metadata_source`` ``crossref_updates`` /
``datacite_updates``). The records of other keys are passed over unread.

Each page's rows are handed to ``on_page`` with the stream's state (the cursor of the next
page), for the caller to store together: a harvest stopped anywhere resumes at the page it
had reached. A Crossref cursor left unused for a few minutes expires (the API answers 404):
the stream is then read again from its start, and the keys this harvest already stored are
passed over, never written again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Final

from airflow_doi.metadata.client import MetadataClient
from airflow_doi.metadata.config import MetadataConfig, since_text
from airflow_doi.metadata.result import MetadataResult, MetadataStats, record_result
from airflow_doi.metadata.snapshot.records import key_of
from airflow_doi.metadata.sources import BATCH_SOURCES, BatchSource
from airflow_doi.resolver.batch import run_sync
from airflow_doi.resolver.client import ProxyError
from airflow_doi.resolver.result import expires_after
from airflow_doi.resolver.retry import GaveUpError
from airflow_doi.resolver.text import server_text

__all__ = ["StreamState", "aharvest", "harvest", "harvest_days", "since_text"]

#: Times a stream is read again from its start after its cursor expired, at most.
MAX_RESTARTS: Final = 3
#: Longest cursor asked for (Crossref's run to a few hundred characters).
MAX_CURSOR: Final = 4096


def cursor_problem(cursor: str | None) -> str | None:
    """Why a page's cursor for the next page cannot be asked for or stored (control
    characters, a lone surrogate: server text no URL or cache row can carry; or too long),
    or None."""
    if cursor is None or (len(cursor) <= MAX_CURSOR and cursor.isprintable()):
        return None
    return (f"the cursor for the next page ({server_text(cursor)}) holds control characters "
            f"or is over {MAX_CURSOR:,} characters: the next page cannot be asked for")


@dataclass
class StreamState:
    """Where one source's update stream stands in a harvest."""

    source: str
    since: str
    started_at: datetime
    #: The next page's cursor (None: the first page).
    cursor: str | None = None
    pages: int = 0
    records: int = 0
    found: int = 0
    restarts: int = 0
    requests: int = 0
    finished: bool = False
    #: Why the stream stopped before its end (the pages before it were kept), or None.
    error: str | None = None

    @property
    def id(self) -> str:
        """What names this harvest in a store: the source and the date it starts from."""
        return f"updates:{self.source}:{self.since}"


async def aharvest(
    keys: Mapping[str, str], since: str | Mapping[str, str], *, config: MetadataConfig,
    on_page: Callable[[StreamState, list[MetadataResult]], None],
    states: Mapping[str, StreamState] | None = None, stored: Collection[str] = (),
    stats: MetadataStats | None = None,
) -> dict[str, StreamState]:
    """Harvest the update streams of the batch sources the configuration may ask (their hosts
    on the allowlist) since ``since`` (a date, or one by source name), for ``keys`` (key
    -> the DOI as asked, which each row carries); ``states`` (by source name) resumes an
    unfinished harvest of the same day (a finished one is never read again: a new
    harvest starts), ``stored`` are keys it already stored (passed over when a stream
    starts again). A stream that cannot be read on (its host gave up, or refused) ends
    with its ``error`` set, the pages before it handed to ``on_page``; the other stream
    goes on. No stream when neither API is on the allowlist: an empty answer."""
    stats = stats if stats is not None else MetadataStats()
    usable = [s for s in BATCH_SOURCES if config.batch_origin(getattr(config, s.url_field))]
    done = set(stored)
    now = datetime.now(timezone.utc)
    result: dict[str, StreamState] = {}
    for source in usable:
        day = since_text(since if isinstance(since, str) else since[source.name])
        held = (states or {}).get(source.name)
        if held is not None and held.since == day and not held.finished:
            held.restarts = 0  # a limit per run: an expired cursor on resuming costs one
            held.error = None
            result[source.name] = held
        else:
            result[source.name] = StreamState(source.name, day, now)
    async with MetadataClient.open_session(config) as session:
        client = MetadataClient(config, session, stats, health=stats.source_health)
        try:
            await asyncio.gather(*(
                _stream(client, source, result[source.name], keys, done, on_page, stats)
                for source in usable if not result[source.name].finished))
        finally:
            await client.aclose()
    return result


async def _stream(client: MetadataClient, source: BatchSource, state: StreamState,
                  keys: Mapping[str, str], done: set[str],
                  on_page: Callable[[StreamState, list[MetadataResult]], None],
                  stats: MetadataStats) -> None:
    config = client.config
    base = getattr(config, source.url_field)
    while True:
        url = source.updates_url(base, state.since, state.cursor, contact=config.contact)
        try:
            page = await client.ask_page(source, base, url)
        except (ProxyError, GaveUpError) as error:
            state.requests += error.attempts
            stats.sources.add(source.updates_name, requests=error.attempts,
                              answered=int(error.http_status is not None))
            if (isinstance(error, ProxyError) and error.http_status in (400, 404, 410)
                    and state.cursor is not None and state.restarts < MAX_RESTARTS):
                state.cursor = None  # the cursor expired: the stream again, from its start
                state.restarts += 1
                continue
            expired = isinstance(error, ProxyError) and error.http_status in (400, 404, 410)
            state.error = (f"its cursor expired {MAX_RESTARTS} times in this run: "
                           f"{error.reason}" if expired and state.cursor is not None
                           else error.reason)
            return
        now = datetime.now(timezone.utc)
        expires = expires_after(now, config.metadata_ttl)
        rows: list[MetadataResult] = []
        for record in page.records:
            doi = source.doi_of(record) if isinstance(record, Mapping) else None
            key = key_of(doi) if doi is not None else None
            if key is None or key not in keys or key in done:
                continue
            try:
                csl, kind = source.csl_of(record), source.registry_type_of(record)
            except Exception:  # a record of a shape no rule foresaw: its key, not the page
                continue
            row = record_result(
                csl, keys[key], key, max_csl_bytes=config.max_csl_bytes, fetched_at=now,
                expires_at=expires, source_host=page.host, attempts=page.attempts,
                http_status=page.http_status, agency=source.agency,
                metadata_source=source.updates_name, registry_type=kind)
            if row.metadata_status == "ok":
                rows.append(row)
                done.add(key)
        state.pages += 1
        state.records += len(page.records)
        state.found += len(rows)
        state.requests += page.attempts
        state.finished = not page.records or page.cursor is None
        # A cursor that cannot be asked for ends the stream here, this page's rows kept (a
        # harvest resumed reads this page again: its cursor stays the one that led here).
        state.error = None if state.finished else cursor_problem(page.cursor)
        if state.error is None:
            state.cursor = page.cursor
        stats.sources.add(source.updates_name, keys=len(rows), requests=page.attempts,
                          answered=1)
        on_page(state, rows)
        if state.finished or state.error is not None:
            return


def harvest_days(held: Sequence[Mapping[str, Any]], wanted: str,
                 files_day: Callable[[], str]) -> dict[str, str]:
    """The day each source's update stream is read from, given the harvests a store
    recorded (``source``, ``since``, ``started_at``, ``finished_at``: None while unfinished),
    newest first: a harvest of it that did not finish goes on (from its day); else
    ``wanted`` (a date), or for ``"auto"`` the day that source's last finished harvest
    started, else ``files_day()`` (when the data files' newest record changed). Each source
    on its own: one whose API failed keeps its day while the other moves on."""
    days: dict[str, str] = {}
    fallback: str | None = None
    for source in BATCH_SOURCES:
        rows = [row for row in held if row["source"] == source.name]
        unfinished = [row for row in rows if row["finished_at"] is None]
        finished = [row for row in rows if row["finished_at"] is not None]
        if unfinished and (wanted == "auto" or unfinished[0]["since"] == wanted):
            days[source.name] = str(unfinished[0]["since"])
        elif wanted != "auto":
            days[source.name] = since_text(wanted)
        elif finished:
            started = max(str(row["started_at"]) for row in finished)
            days[source.name] = since_text(datetime.fromisoformat(started))
        else:
            fallback = fallback or files_day()
            days[source.name] = fallback
    return days


def harvest(keys: Mapping[str, str], since: str | Mapping[str, str],
            **options: Any) -> dict[str, StreamState]:
    """Blocking twin of :func:`aharvest` (same arguments, same results)."""
    return run_sync(lambda: aharvest(keys, since, **options))

