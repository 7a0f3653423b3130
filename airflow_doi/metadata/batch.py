"""Batch enrichment: one :class:`MetadataResult` per input value, each key asked once.

The resolver's steps (:mod:`airflow_doi.resolver.batch`): invalid values are answered
locally and never sent; rows are grouped by comparison key; what the cache still trusts is
taken from it; the rest is asked under the gates of each host (the proxy's and every
agency's), each finished key written to the cache at once; the answers fan back out to rows.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import fields
from datetime import datetime, timezone
from typing import Any

from airflow_doi.metadata.cache import CachedMetadata, MetadataCache
from airflow_doi.metadata.client import MetadataClient
from airflow_doi.metadata.config import MetadataConfig
from airflow_doi.metadata.csl import describe_ignored, kept_json, typed_fields
from airflow_doi.metadata.result import MetadataResult, MetadataStats
from airflow_doi.resolver.batch import KeyedBatch, Progress, answer_rows, blocking_twin
from airflow_doi.resolver.client import expires_after
from airflow_doi.resolver.result import ResolverStats

__all__ = ["afetch", "fetch", "result_of"]


def _config(config: MetadataConfig | None, overrides: dict[str, Any]) -> MetadataConfig:
    base = config if config is not None else MetadataConfig()
    if not isinstance(base, MetadataConfig):  # a ResolverConfig: keep its settings
        base = MetadataConfig(**{f.name: getattr(base, f.name) for f in fields(base)})
    result = base.replace(**overrides)
    assert isinstance(result, MetadataConfig)
    return result


def result_of(outcome: Any, doi: str, key: str, config: MetadataConfig,
              now: datetime) -> MetadataResult:
    """The :class:`MetadataResult` of a finished :class:`~airflow_doi.metadata.client.Outcome`."""
    if outcome.status == "ok":
        try:
            fields, ignored = typed_fields(outcome.document)
            kept = kept_json(outcome.document, config.max_csl_bytes)
        except Exception as error:  # a record no rule foresaw: its key, not the batch
            return MetadataResult(
                None, doi, key, "error", None, outcome.source,
                f"the CSL-JSON record could not be read ({type(error).__name__})",
                outcome.attempts, outcome.http_status, now)
        notes = [describe_ignored(ignored)]
        if kept is None:
            notes.append(f"CSL-JSON over {config.max_csl_bytes} bytes not kept in csl_json")
        note = "; ".join(n for n in notes if n) or None
        return MetadataResult(
            None, doi, key, "ok", fields, outcome.source, note, outcome.attempts,
            outcome.http_status, now, expires_after(now, config.metadata_ttl), kept,
        )
    if outcome.status in ("not_found", "no_metadata"):
        return MetadataResult(
            None, doi, key, outcome.status, None, outcome.source, outcome.reason,
            outcome.attempts, outcome.http_status, now, expires_after(now, config.negative_ttl),
        )
    return MetadataResult(None, doi, key, "error", None, outcome.source, outcome.reason,
                          outcome.attempts, outcome.http_status, now)


def _from_cache(key: str, answer: CachedMetadata) -> MetadataResult:
    return MetadataResult(
        None, answer.doi, key, answer.status, answer.fields or None, answer.source_host,
        answer.note, answer.attempts, answer.http_status, answer.fetched_at, answer.expires_at,
        answer.csl_json, cached=True,
    )


class _Fetch(KeyedBatch):
    """One afetch() call: the redirect-following client with a gate per host."""

    def __init__(self, config: MetadataConfig, cache: MetadataCache | None,
                 progress: Progress | None, stats: ResolverStats) -> None:
        super().__init__(cache, progress, stats)
        self.config = config
        self.pending_limit = config.concurrency * config.pending_per_slot
        self._client: Any = None

    def cached_result(self, key: str, answer: CachedMetadata) -> MetadataResult:
        return _from_cache(key, answer)

    @asynccontextmanager
    async def client(self) -> AsyncIterator[Any]:
        async with MetadataClient.open_session(self.config) as session:
            self._client = MetadataClient(self.config, session, self.stats)
            yield self._client

    async def finish(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def request(self, client: Any, doi: str, key: str) -> MetadataResult:
        outcome = await client.fetch(doi)
        result = result_of(outcome, doi, key, self.config, datetime.now(timezone.utc))
        if self.cache is not None and result.metadata_status != "error":
            assert result.fetched_at is not None and result.expires_at is not None
            self.cache.store(CachedMetadata(
                key, doi, result.metadata_status, result.fields or {}, result.source_host,
                result.error, result.attempts, result.http_status, result.csl_json,
                result.fetched_at, result.expires_at,
            ))
        return result


async def afetch(
    values: Iterable[object],
    *,
    config: MetadataConfig | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    stats: ResolverStats | None = None,
    **overrides: Any,
) -> list[MetadataResult]:
    """Registry metadata through DOI content negotiation; one result per value, in order.

    ``overrides`` are :class:`MetadataConfig` fields by name (``base_url=``, ``rate=``,
    ``agency_rate=``, ``metadata_hosts=``, ``contact=``...). Never raises for a per-row
    problem: invalid values come back ``invalid`` (reason in ``error``); a DOI the proxy does
    not know is ``not_found``; an agency without CSL-JSON gives ``no_metadata``; anything
    that kept failing, or was refused (a redirect off the allowlist, a hostile body), is
    ``error`` with the reason.
    """
    config = _config(config, overrides)
    stats = stats if stats is not None else MetadataStats()
    store = (MetadataCache(cache, ",".join(sorted(config.allowed_origins)))
             if cache is not None else None)
    results: list[MetadataResult] = await answer_rows(
        list(values), _Fetch(config, store, progress, stats),
        invalid=lambda value, doi, key, reason: MetadataResult(
            value, doi, key, "invalid", error=reason),
        status_of=lambda result: result.metadata_status,
    )
    return results


fetch = blocking_twin(afetch)
