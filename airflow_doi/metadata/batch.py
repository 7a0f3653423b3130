"""Batch enrichment: one :class:`MetadataResult` per input value, each key asked once.

The resolver's steps (:mod:`airflow_doi.resolver.batch`): invalid values are answered
locally and never sent, but for a shortDOI (``10/b6vnmd``), expanded through the proxy as
``resolve`` expands it (the DOI it aliases stands in for it); rows are grouped by comparison
key; what the cache still trusts is taken from it; the rest is asked under the gates of each
host (the proxy's and every agency's), each finished key written to the cache at once; the
answers fan back out to rows.

Which source answers a key is :mod:`airflow_doi.metadata.sources`'s choice (``source="auto"``):
the keys of Crossref and DataCite through their batch APIs, many a request, the others (and any
key a list answer leaves out) through content negotiation, which is every key's source with
``source="negotiation"``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import fields
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

from airflow_doi.metadata.cache import CachedMetadata, MetadataCache
from airflow_doi.metadata.client import ListAnswer, MetadataClient, Outcome
from airflow_doi.metadata.config import MetadataConfig
from airflow_doi.metadata.csl import clean_text
from airflow_doi.metadata.result import (
    UNKEPT_STATUSES,
    MetadataResult,
    MetadataStats,
    record_result,
)
from airflow_doi.metadata.sources import (
    BATCH_SOURCES,
    NEGOTIATION,
    SNAPSHOT,
    WHICH_RA,
    BatchSource,
    SourceCounts,
    SourceHealth,
    agency_of_host,
    group_by_source,
    registry_type_for,
)
from airflow_doi.resolver.batch import (
    KeyedBatch,
    Progress,
    answer_rows,
    ask_aliases,
    blocking_twin,
)
from airflow_doi.resolver.client import ProxyError, expires_after, which_ra_batches
from airflow_doi.resolver.result import ResolutionResult, ResolverStats
from airflow_doi.resolver.retry import GaveUpError
from airflow_doi.syntax import ascii_upper

__all__ = ["afetch", "fetch", "result_of"]


def _config(config: MetadataConfig | None, overrides: dict[str, Any]) -> MetadataConfig:
    base = config if config is not None else MetadataConfig()
    if not isinstance(base, MetadataConfig):  # a ResolverConfig: keep its settings
        base = MetadataConfig(**{f.name: getattr(base, f.name) for f in fields(base)})
    result = base.replace(**overrides)
    assert isinstance(result, MetadataConfig)
    return result


def result_of(outcome: Any, doi: str, key: str, config: MetadataConfig,
              now: datetime, agency: str | None = None,
              source: str = NEGOTIATION, registry_type: str | None = None) -> MetadataResult:
    """The :class:`MetadataResult` of a finished :class:`~airflow_doi.metadata.client.Outcome`
    (its record CSL-JSON, from content negotiation or made of a batch API's record; without a
    ``registry_type``, the registry's word is read from the answer's type and the agency)."""
    if outcome.status == "ok":
        if registry_type is None and isinstance(outcome.document, Mapping):
            registry_type = registry_type_for(outcome.document.get("type"), agency)
        return record_result(
            outcome.document, doi, key, max_csl_bytes=config.max_csl_bytes, fetched_at=now,
            expires_at=expires_after(now, config.metadata_ttl), source_host=outcome.source,
            attempts=outcome.attempts, http_status=outcome.http_status, agency=agency,
            metadata_source=source, registry_type=registry_type)
    if outcome.status in ("not_found", "no_metadata"):
        return MetadataResult(
            None, doi, key, outcome.status, None, outcome.source, outcome.reason,
            outcome.attempts, outcome.http_status, now, expires_after(now, config.negative_ttl),
            agency=agency, metadata_source=source,
        )
    return MetadataResult(None, doi, key, "error", None, outcome.source, outcome.reason,
                          outcome.attempts, outcome.http_status, now, agency=agency,
                          metadata_source=source)


def _from_cache(key: str, answer: CachedMetadata) -> MetadataResult:
    return MetadataResult(
        None, answer.doi, key, answer.status, answer.fields or None, answer.source_host,
        answer.note, answer.attempts, answer.http_status, answer.fetched_at, answer.expires_at,
        answer.csl_json, cached=True, agency=answer.agency,
        metadata_source=answer.metadata_source,
    )


class _Fetch(KeyedBatch):
    """One afetch() call: each key from its source, under a gate per host and kind."""

    def __init__(self, config: MetadataConfig, cache: MetadataCache | None,
                 progress: Progress | None, stats: ResolverStats,
                 agencies: Mapping[str, str | None]) -> None:
        super().__init__(cache, progress, stats)
        self.config = config
        #: Keys and requests by source (a plain ResolverStats passed in: counted aside).
        self.counts: SourceCounts = getattr(stats, "sources", None) or SourceCounts()
        self.pending_limit = config.concurrency * config.pending_per_slot
        #: Who registered each key, where known (given, or asked of Which RA?).
        self.agencies: dict[str, str | None] = dict(agencies)
        #: What the run knows of the batch APIs, kept across its calls (MetadataStats).
        kept = getattr(stats, "source_health", None)
        self.health: SourceHealth = kept if kept is not None else SourceHealth()
        self._client: Any = None
        #: When the newest record the data files held last changed (ISO text).
        self.newest_record: str | None = None

    def cached_result(self, key: str, answer: CachedMetadata) -> MetadataResult:
        return _from_cache(key, answer)

    @asynccontextmanager
    async def client(self) -> AsyncIterator[Any]:
        async with MetadataClient.open_session(self.config) as session:
            self._client = MetadataClient(self.config, session, self.stats,
                                          health=self.health)
            yield self._client

    async def finish(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    expands_short_dois = True

    async def expand(self, shorts: dict[str, str]) -> dict[str, Any]:
        """shortDOIs as the resolver expands them (:func:`~airflow_doi.resolver.batch.
        ask_aliases`), under the proxy's gate: the DOI each aliases, whose record then answers
        its rows, or the result of its rows (:func:`_unexpanded`). Not cached: the metadata
        cache holds records, and a shortDOI has none of its own."""
        self.stats.short_dois = len(shorts)
        try:
            async with self.client() as client:
                gate = client.proxy_gate()
                found = await ask_aliases(shorts, gate.client, gate.policy, self.stats, None,
                                          self.pending_limit)
        finally:
            await self.finish()
        return {key: answer if isinstance(answer, str) else _unexpanded(answer)
                for key, answer in found.items()}

    def keep(self, result: MetadataResult) -> MetadataResult:
        """Store a finished key in the cache (never an ``error``); the result."""
        if self.cache is not None and result.metadata_status not in UNKEPT_STATUSES:
            self.cache.store(_cached(result))
        return result

    def finished_members(self, scan: str) -> set[str]:
        """The data files' members the cache says the scan ``scan`` finished."""
        return self.cache.finished_members(scan) if self.cache is not None else set()

    def store_member(self, scan: str, member: Any, results: list[MetadataResult]) -> None:
        """A finished member's rows and the member, in the cache (one commit)."""
        if self.cache is not None:
            self.cache.store_member(scan, member.identity, member.records,
                                    [_cached(result) for result in results], member.newest)

    async def prepare(self, todo: dict[str, str]) -> None:
        """The bulk sources, before the cache is read: the data files for the keys the cache
        has no fresh row of (``snapshot``), then the update streams for every key
        (``updates_since``), whose rows are the newest there are. Their rows are stored in the
        cache as they come and kept to answer the keys (:meth:`run`)."""
        if not todo:
            return
        if self.config.snapshot:
            fresh = (self.cache.fresh(todo, datetime.now(timezone.utc))
                     if self.cache is not None else {})
            missing = {key: doi for key, doi in todo.items() if key not in fresh}
            if missing:
                # Blocking, in the loop's thread (the cache's connection lives here): nothing
                # else runs before the data files have answered.
                self.early.update(self._from_snapshots(missing))
        if self.config.updates_since is not None:
            await self._from_updates(todo)

    async def _from_updates(self, todo: dict[str, str]) -> None:
        """The update streams' records of ``todo``'s keys changed since :meth:`_since`, stored
        in the cache page by page (a harvest started again goes on from its page)."""
        from airflow_doi.metadata.updates import StreamState, aharvest

        held = self.cache.update_states() if self.cache is not None else []
        since = self._since(held)
        cache = self.cache
        states: dict[str, StreamState] = {}
        stored: set[str] = set()
        for row in held:  # newest first: each source's unfinished harvest of its day
            source = row["source"]
            if (source in states or row["finished_at"] is not None
                    or row["since"] != since.get(source)):
                continue
            state = StreamState(source, row["since"], datetime.fromisoformat(row["started_at"]),
                                row["cursor"], row["pages"], row["records"], row["found"])
            states[source] = state
            if cache is not None:  # resumed: what it stored is not written again
                stored |= cache.keys_stored_since([f"{source}_updates"], state.started_at)

        def on_page(state: Any, rows: list[MetadataResult]) -> None:
            for row in rows:
                self.early[row.key or ""] = row
            if cache is not None:
                cache.store_page(state, [_cached(row) for row in rows])

        stats = self.stats if isinstance(self.stats, MetadataStats) else MetadataStats()
        stats.updates = await aharvest(todo, since, config=self.config, on_page=on_page,
                                       states=states, stored=stored, stats=stats)
        stopped = [f"{name}'s: {state.error}" for name, state in stats.updates.items()
                   if state.error]
        stats.updates_error = "; ".join(stopped) or None

    def _since(self, held: list[dict[str, Any]]) -> dict[str, str]:
        """The day each source's update stream is read from (:func:`~airflow_doi.metadata.
        updates.harvest_days`)."""
        from airflow_doi.metadata.updates import harvest_days

        assert self.config.updates_since is not None
        return harvest_days(held, self.config.updates_since, self._files_day)

    def _files_day(self) -> str:
        """When the data files' newest record changed (else their newest file's date)."""
        from airflow_doi.metadata.config import since_text

        if self.config.snapshot:
            newest = self.newest_record or (self.cache.newest_record(self.scan_id)
                                            if self.cache is not None else None)
            if newest is not None:
                return since_text(newest)
            from airflow_doi.metadata.snapshot import index_snapshots

            dated = index_snapshots(self.config.snapshot).date
            if dated is not None:
                return since_text(dated)
        raise ValueError("updates since 'auto' needs a date to start from: the data files "
                         "(snapshot), or a cache in which an earlier harvest finished; or "
                         "give the date (YYYY-MM-DD)")

    @property
    def scan_id(self) -> str:
        """The scan of this call's keys (its input): the same input resumes it."""
        from airflow_doi.metadata.snapshot.source import scan_digest

        return scan_digest(self.all_keys, "metadata")

    def _from_snapshots(self, todo: dict[str, str]) -> dict[str, MetadataResult]:
        """The keys of ``todo`` the data files hold (:mod:`airflow_doi.metadata.snapshot`),
        their rows kept in the cache member by member, so that the same call killed and run
        again reads only the members it had not finished."""
        from airflow_doi.metadata.snapshot import index_snapshots
        from airflow_doi.metadata.snapshot.files import SnapshotError
        from airflow_doi.metadata.snapshot.records import RowSettings
        from airflow_doi.metadata.snapshot.source import answer_from_snapshots

        config = self.config
        index = index_snapshots(config.snapshot)
        if not len(index):
            reasons = "; ".join(f"{s.shown}: {s.detail}" for s in index.skipped[:3]) or "empty"
            raise SnapshotError(f"{', '.join(config.snapshot)}: no data file in it ({reasons})")
        now = datetime.now(timezone.utc)
        settings = RowSettings(index.date or now, expires_after(now, config.metadata_ttl),
                               config.max_csl_bytes)
        answers = answer_from_snapshots(
            config.snapshot, todo, settings=settings, workers=config.snapshot_workers or None,
            store=self, scan_id=self.scan_id, progress=self.progress, index=index)
        self.newest_record = answers.stats.newest
        for result in sorted(answers.results.values(),  # one order whatever finished first
                             key=lambda r: r.metadata_source or ""):
            self.counts.add(result.metadata_source or "snapshot", keys=1)
        stats = self.stats
        if isinstance(stats, MetadataStats):
            stats.snapshot = answers.stats
            stats.snapshot_keys = len(answers.results)
            stats.left_to_apis = len(todo) - len(answers.results)
        return answers.results

    async def request(self, client: Any, doi: str, key: str) -> MetadataResult:
        """One key by content negotiation."""
        outcome = await client.fetch(doi)
        self.counts.add(NEGOTIATION, keys=1, requests=outcome.attempts,
                        answered=int(outcome.http_status is not None))
        agency = self.agencies.get(key)
        kind = None
        if outcome.status == "ok" and isinstance(outcome.document, Mapping):
            # Whose the answer is where Which RA? was not asked: the host that sent it.
            kind = registry_type_for(outcome.document.get("type"),
                                     agency or agency_of_host(outcome.source, self.config))
        return self.keep(result_of(outcome, doi, key, self.config, datetime.now(timezone.utc),
                                   agency, registry_type=kind))

    async def run(self, todo: dict[str, str]) -> dict[str, Any]:
        # The bulk sources' rows (prepare) first: the APIs are asked only for the others.
        found: dict[str, Any] = {key: self.early[key] for key in todo if key in self.early}
        todo = {key: doi for key, doi in todo.items() if key not in found}
        self.done += len(found)
        self.report()
        if self.config.source == SNAPSHOT:
            for key, doi in todo.items():
                found[key] = MetadataResult(
                    None, doi, key, "not_in_snapshot", error="the data files hold no record "
                    "of this DOI; no API was asked (source snapshot)")
            self.done += len(todo)
            self.report()
            return found
        if not todo:
            return found
        if self.config.source == NEGOTIATION or not self._usable():
            found.update(await super().run(todo))
            return found
        try:
            async with self.client() as client:
                found.update(await self._by_source(client, todo))
                return found
        finally:
            await self.finish()
            if self.cache is not None:
                self.cache.release_all()

    def _usable(self) -> list[BatchSource]:
        """The batch APIs this configuration may ask (their hosts on the allowlist) and this
        run has not given up on."""
        return [source for source in BATCH_SOURCES
                if self.config.batch_origin(getattr(self.config, source.url_field))
                and source.name not in self.health.given_up]

    async def _by_source(self, client: MetadataClient, todo: dict[str, str]) -> dict[str, Any]:
        """Who registered each key (Which RA?), then each agency's keys from its source: the
        list queries and the other agencies' negotiations side by side (other hosts), then
        the keys the lists left out by negotiation."""
        results: dict[str, Any] = {}
        unknown = {key: doi for key, doi in todo.items() if key not in self.agencies}
        await self._look_up_agencies(client, unknown, results)
        remaining = {key: doi for key, doi in todo.items() if key not in results}
        usable = self._usable()
        by_source, others = group_by_source(remaining, self.agencies, usable)
        left_out: dict[str, str] = {}

        async def lists() -> None:
            await asyncio.gather(*(
                self._ask_lists(client, source, by_source[source.name], results, left_out)
                for source in usable))

        _, negotiated = await asyncio.gather(lists(), self.run_keys(client, others))
        results.update(negotiated)
        if left_out:
            results.update(await self.run_keys(client, left_out))
        return results

    async def _look_up_agencies(self, client: MetadataClient, unknown: dict[str, str],
                                results: dict[str, Any]) -> None:
        """Ask Which RA? about ``unknown`` keys, 50 a request (a few at once): the agency of
        each, or ``not_found`` where the proxy says the DOI does not exist."""
        if self.cache is not None and unknown:  # a run stopped during these requests
            kept = self.cache.agencies(unknown, datetime.now(timezone.utc))
            self.agencies.update(kept)
            self.counts.add(WHICH_RA, cached=len(kept))
            unknown = {key: doi for key, doi in unknown.items() if key not in kept}
        by_doi = {doi: key for key, doi in unknown.items()}
        slots = asyncio.Semaphore(self.config.concurrency)

        async def one(group: list[str]) -> None:
            async with slots:
                try:
                    entries, attempts = await client.which_ra(group)
                except (GaveUpError, ProxyError) as error:
                    self.counts.add(WHICH_RA, requests=error.attempts,
                                    answered=int(error.http_status is not None))
                    return  # their agency stays unknown: content negotiation asks them
                self.counts.add(WHICH_RA, requests=attempts, answered=1)
            now = datetime.now(timezone.utc)
            named: dict[str, str] = {}
            for entry in entries:
                echoed = entry.get("DOI") if isinstance(entry, Mapping) else None
                key = ascii_upper(echoed) if isinstance(echoed, str) else None
                if key is None or key not in unknown:
                    continue
                agency = entry.get("RA")
                if isinstance(agency, str) and agency.strip():
                    self.agencies[key] = clean_text(agency)
                    if self.agencies[key]:
                        named[key] = str(self.agencies[key])
                elif str(entry.get("status", "")).lower() == "doi does not exist":
                    results[key] = self.keep(MetadataResult(
                        None, unknown[key], key, "not_found", None, _host(client),
                        "doi.org's Which RA? says the DOI does not exist", attempts, 200, now,
                        expires_after(now, self.config.negative_ttl),
                        metadata_source=WHICH_RA))
                    self.done += 1
                    self.report()
            if self.cache is not None and named:
                self.cache.store_agencies(named.items(), now)

        await asyncio.gather(*(one(group) for group in which_ra_batches(list(by_doi))))

    async def _ask_lists(self, client: MetadataClient, source: BatchSource,
                         keys: dict[str, str], results: dict[str, Any],
                         left_out: dict[str, str]) -> None:
        """``keys`` through ``source``'s list queries; a key no answer holds goes to
        ``left_out`` (content negotiation), and so do a failed query's keys."""
        if not keys:
            return
        base = getattr(self.config, source.url_field)
        key_of = {doi: key for key, doi in keys.items()}
        batches = source.batches(list(key_of), base, size=self.config.list_size,
                                 max_url=self.config.max_url_length, contact=self.config.contact)
        # A few queries waiting at once: the gate's pace and cap decide when each leaves.
        slots = asyncio.Semaphore(self.config.list_concurrency + 1)

        async def one(batch: list[str]) -> None:
            async with slots:
                if source.name in self.health.given_up:  # an earlier query of the run failed
                    left_out.update((key_of[doi], doi) for doi in batch)
                    return
                claimed = self._claim([(key_of[doi], doi) for doi in batch], results, left_out)
                if not claimed:
                    return
                try:
                    answer = await client.ask_list(source, base, [d for _, d in claimed])
                except (GaveUpError, ProxyError) as error:
                    self.counts.add(source.name, requests=error.attempts,
                                    answered=int(error.http_status is not None))
                    self.health.failed(source.name, *client.list_health(base), str(error))
                    self._let_go(claimed, left_out)
                    return
                self.health.answered.add(source.name)
                self.counts.add(source.name, requests=answer.attempts, answered=1)
                self._answered(source, answer, claimed, results, left_out)

        await asyncio.gather(*(one(batch) for batch in batches))

    def _claim(self, pairs: list[tuple[str, str]], results: dict[str, Any],
               left_out: dict[str, str]) -> list[tuple[str, str]]:
        """The ``(key, doi)`` pairs this run may ask now: without a cache, all; with one, those
        it claims (a key another process finished meanwhile is taken from the cache; one it
        holds waits for negotiation's turn, which waits for it)."""
        if self.cache is None:
            return pairs
        mine: list[tuple[str, str]] = []
        for key, doi in pairs:
            claimed = self.cache.claim(key)
            hit = self._hit(doi, key)
            if hit is not None:
                if claimed:
                    self.cache.release(key)
                results[key] = hit
            elif claimed:
                mine.append((key, doi))
            else:
                left_out[key] = doi
        return mine

    def _let_go(self, pairs: list[tuple[str, str]], left_out: dict[str, str]) -> None:
        for key, doi in pairs:
            left_out[key] = doi
            if self.cache is not None:
                self.cache.release(key)

    def _answered(self, source: BatchSource, answer: ListAnswer, pairs: list[tuple[str, str]],
                  results: dict[str, Any], left_out: dict[str, str]) -> None:
        """Each claimed key from the answer's record, or to ``left_out`` when it holds none
        (or one that cannot be read: its key, not the batch)."""
        now = datetime.now(timezone.utc)
        for key, doi in pairs:
            record = answer.records.get(key)
            csl = kind = None
            if isinstance(record, Mapping):
                with suppress(Exception):  # a record of a shape no rule foresaw
                    csl = source.csl_of(record)
                    kind = source.registry_type_of(record)
            if csl is None:
                self._let_go([(key, doi)], left_out)
                continue
            outcome = Outcome("ok", answer.http_status, answer.attempts, answer.host, csl)
            result = self.keep(result_of(outcome, doi, key, self.config, now,
                                         self.agencies.get(key) or source.agency, source.name,
                                         kind))
            if self.cache is not None:
                self.cache.release(key)
            if result.metadata_status != "ok":  # its record could not be read after all
                left_out[key] = doi
                continue
            results[key] = result
            self.counts.add(source.name, keys=1)
            self.done += 1
            self.report()


def _unexpanded(answer: ResolutionResult) -> MetadataResult:
    """The rows of a shortDOI that names no DOI to fetch: ``not_found`` (no such shortDOI, or
    no valid DOI named in it: the reason in ``error``), or ``error`` (the proxy failed)."""
    return MetadataResult(
        None, None, None, "error" if answer.status == "error" else "not_found",
        error=answer.error, attempts=answer.attempts, http_status=answer.http_status,
        fetched_at=answer.resolved_at, expires_at=answer.expires_at)


def _cached(result: MetadataResult) -> CachedMetadata:
    """A finished result as its cache row."""
    assert result.fetched_at is not None and result.expires_at is not None
    return CachedMetadata(
        result.key or "", result.doi or "", result.metadata_status, result.fields or {},
        result.source_host, result.error, result.attempts, result.http_status,
        result.csl_json, result.fetched_at, result.expires_at, result.agency,
        result.metadata_source)


def _host(client: MetadataClient) -> str:
    """The proxy's ``host[:port]``, for the ``source_host`` of an answer Which RA? gave."""
    return urlsplit(client.config.base_url).netloc.rpartition("@")[2] or "?"


async def afetch(
    values: Iterable[object],
    *,
    config: MetadataConfig | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    stats: ResolverStats | None = None,
    agencies: Mapping[str, str | None] | None = None,
    **overrides: Any,
) -> list[MetadataResult]:
    """Registry metadata of each value; one result per value, in order.

    ``overrides`` are :class:`MetadataConfig` fields by name (``base_url=``, ``rate=``,
    ``agency_rate=``, ``metadata_hosts=``, ``contact=``, ``source=``, ``list_rate=``...).
    With ``source="auto"`` (the default) Crossref's and DataCite's keys come from their batch
    APIs, many a request (:mod:`airflow_doi.metadata.sources`), the others by content
    negotiation; ``agencies`` (comparison key -> agency, as Which RA? names it) saves asking
    Which RA? about keys whose agency is known. Never raises for a per-row problem: invalid
    values come back ``invalid`` (reason in ``error``); a DOI the proxy does not know is
    ``not_found``; an agency without CSL-JSON gives ``no_metadata``; anything that kept
    failing, or was refused (a redirect off the allowlist, a hostile body), is ``error`` with
    the reason. A shortDOI is the DOI it aliases (asked of the proxy, as :func:`~airflow_doi.
    resolver.aresolve` asks it), or ``not_found`` when it does not exist or names no DOI.
    Pass a :class:`MetadataStats` as ``stats`` to read the counters, by source too.
    """
    config = _config(config, overrides)
    stats = stats if stats is not None else MetadataStats()
    store = (MetadataCache(cache, ",".join(sorted(config.allowed_origins)))
             if cache is not None else None)
    results: list[MetadataResult] = await answer_rows(
        list(values), _Fetch(config, store, progress, stats, agencies or {}),
        invalid=lambda value, doi, key, reason: MetadataResult(
            value, doi, key, "invalid", error=reason),
        status_of=lambda result: result.metadata_status,
    )
    return results


fetch = blocking_twin(afetch)
