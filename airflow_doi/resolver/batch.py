"""Batch resolution (``resolve``, ``aresolve``, ``which_ra``) and the keyed batch loop behind it.

One result per input row, in input order, each key asked once; :class:`KeyedBatch` and
:func:`answer_rows` are shared with the metadata fetcher, :func:`blocking_twin` makes the
blocking twin of each async batch function.

The steps, each with one job:

1. validate every value (:func:`airflow_doi.syntax.validate`); invalid ones are answered
   locally and never sent, but for a shortDOI (``10/b6vnmd``), which the resolver expands:
   the DOI its record's ``HS_ALIAS`` value names (asked once per shortDOI, cached like any
   answer) stands in for it from then on;
2. group rows by comparison key, so ``10.1000/ABC`` and ``doi:10.1000/abc`` cost one request;
3. take what the cache still trusts;
4. resolve the rest concurrently under the rate limit, the breaker and the retry budget,
   writing each finished key to the cache at once (a killed run loses nothing finished);
   with a cache, each key is looked up again and claimed in it just before its request, so
   a second process on the same cache file takes what the first finished (or is working
   on) instead of asking the proxy again: keys claimed elsewhere are put off to the end and
   then waited for;
5. fan the per-key answers back out to the rows.

The modules that need the ``resolve`` extra (aiohttp, redis, tenacity: the client, the
shared pace, the retry policy) are imported where a batch starts, so that this module (and
the result and config types through :mod:`airflow_doi.resolver`) stays importable without it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import numbers
import os
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, ParamSpec, TypeVar

from airflow_doi.resolver.breaker import CircuitBreaker
from airflow_doi.resolver.cache import CachedAnswer, ResolverCache
from airflow_doi.resolver.config import ResolverConfig
from airflow_doi.resolver.result import (
    ProgressEvent,
    ResolutionResult,
    ResolverStats,
    answer_fields,
)
from airflow_doi.resolver.text import server_text
from airflow_doi.resolver.urls import judge_url
from airflow_doi.syntax import ascii_upper, short_doi, validate

__all__ = [
    "KeyedBatch",
    "answer_rows",
    "aresolve",
    "ask_aliases",
    "awhich_ra",
    "blocking_twin",
    "resolve",
    "run_sync",
    "which_ra",
]

Progress = Callable[[ProgressEvent], None]
P = ParamSpec("P")
T = TypeVar("T")
#: Seconds between two looks at a key another process has claimed in the shared cache.
CLAIM_POLL = 0.1
#: Longest agency name kept from a Which RA? answer (as safe text).
AGENCY_CHARS = 60


def _config(config: ResolverConfig | None, overrides: dict[str, Any]) -> ResolverConfig:
    return (config or ResolverConfig()).replace(**overrides)


def _check(value: object) -> tuple[str | None, str | None, str | None]:
    """``(doi, key, reason)`` of one input value, as :func:`airflow_doi.syntax.validate`
    judges it.

    Text, bytes and missing values are read as they are; any other value (a number, a
    boolean, a list...) as ``str(value)`` (``10`` is ``bad_directory``), as the pandas
    accessor, the CLI, the SQLite UDFs and the Airflow operators read it, so one column gets
    the same reasons on every face. ``validate`` raises a ``TypeError`` only for text whose
    own methods do (a ``str`` subclass overriding ``strip``): such a value is ``invalid``
    with reason ``bad_type: <type name>`` (a number of that kind is judged as ``str(value)``)
    instead of failing the batch.
    """
    try:
        check = validate(value)
    except TypeError:
        if not isinstance(value, numbers.Number):  # bool is an int, so it is a Number too
            return None, None, f"bad_type: {type(value).__name__}"
        check = validate(str(value))
    return check.doi, check.key, check.reason


def _failed(
    doi: str,
    key: str,
    reason: str,
    *,
    attempts: int = 0,
    http_status: int | None = None,
    response_code: int | None = None,
) -> ResolutionResult:
    """The ``error`` result of a key the resolver gave up on; the reason is kept."""
    return ResolutionResult(
        input=None,
        doi=doi,
        key=key,
        status="error",
        http_status=http_status,
        response_code=response_code,
        attempts=attempts,
        error=reason,
    )


class KeyedBatch:
    """One batch of distinct keys: the shared cache's claims, progress, the request loop.

    Subclasses say how a key is asked (:meth:`request`), what a cached answer becomes
    (:meth:`cached_result`) and which client the requests share (:meth:`client`); the
    resolver and the metadata fetcher are the two.
    """

    def __init__(self, cache: Any, progress: Progress | None, stats: ResolverStats) -> None:
        self.cache = cache
        self.progress = progress
        self.stats = stats
        self.done = 0
        self.total = 0
        self.started = time.monotonic()
        #: Keys allowed to wait on backoff at once: request slots times this.
        self.pending_limit = 32
        #: Every valid key of the call, cached or not (set by :func:`answer_rows`).
        self.all_keys: list[str] = []
        #: Keys :meth:`prepare` answered (from bulk sources): not cache hits, asked no more.
        self.early: dict[str, Any] = {}

    def report(self) -> None:
        if self.progress is None:
            return
        elapsed = time.monotonic() - self.started
        fetched = self.done - self.stats.cache_hits
        rate = fetched / elapsed if elapsed > 0 else 0.0
        remaining = self.total - self.done
        eta = remaining / rate if rate > 0 else None
        self.progress(ProgressEvent(self.done, self.total, rate, self.stats.retries, eta))

    # -- what a subclass provides -------------------------------------------------------------
    #: Whether :meth:`expand` turns shortDOIs into the DOIs they alias (else they stay invalid).
    expands_short_dois = False

    async def expand(self, shorts: dict[str, str]) -> dict[str, Any]:
        """For each shortDOI (its key -> the handle as written): the DOI it aliases, or the
        result of its rows when there is none (not found, no alias, the proxy failing)."""
        return {}

    async def prepare(self, todo: dict[str, str]) -> None:
        """Work on every valid key of the call (key -> DOI) before the cache is read (the
        metadata fetcher's update streams, which may renew cached rows)."""
        return None

    def cached_result(self, key: str, answer: Any) -> Any:
        raise NotImplementedError

    def usable(self, answer: Any) -> bool:
        """Whether a fresh cached answer serves this call (an existence-only answer does not
        serve a call that wants the URL)."""
        return True

    async def request(self, client: Any, doi: str, key: str) -> Any:
        raise NotImplementedError

    def client(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    async def finish(self) -> None:
        """Close the gates (a shared limit's Redis pool) and copy their counters to stats."""

    # -- the loop -----------------------------------------------------------------------------
    def _hit(self, doi: str, key: str) -> Any:
        """The cached answer another process stored for ``key`` meanwhile, as a finished key."""
        assert self.cache is not None
        answer = self.cache.fresh([key], datetime.now(timezone.utc)).get(key)
        if answer is None or not self.usable(answer):
            return None
        self.stats.cache_hits += 1
        self.done += 1
        self.report()
        return self.cached_result(key, answer)

    async def take(self, doi: str, key: str, wait: bool) -> Any:
        """Claim ``key`` in the shared cache: True when it is ours to request, a cached
        result when another process finished it, False when another one holds it (and
        ``wait`` is off). With ``wait``, polls until one of the first two.
        """
        assert self.cache is not None
        while True:
            mine = self.cache.claim(key)
            hit = self._hit(doi, key)
            if hit is not None:
                if mine:
                    self.cache.release(key)
                return hit
            if mine:
                return True
            if not wait:
                return False
            await asyncio.sleep(CLAIM_POLL)

    async def resolve_key(self, client: Any, doi: str, key: str, *, wait: bool = True) -> Any:
        """The key's result; None when another process holds it and ``wait`` is off."""
        if self.cache is not None:
            taken = await self.take(doi, key, wait)
            if taken is False:
                return None
            if taken is not True:
                return taken
        try:
            result = await self.request(client, doi, key)
        finally:
            if self.cache is not None:
                self.cache.release(key)
        self.done += 1
        self.report()
        return result

    async def run(self, todo: dict[str, str]) -> dict[str, Any]:
        """Every key of ``todo`` (key -> DOI) asked under one client; the results by key."""
        try:
            async with self.client() as client:
                return await self.run_keys(client, todo)
        finally:
            await self.finish()
            if self.cache is not None:
                self.cache.release_all()

    async def run_keys(self, client: Any, todo: dict[str, str]) -> dict[str, Any]:
        """Ask every key of ``todo`` on ``client``, one request flow per key (each claimed in
        the shared cache first); the results by key."""
        results: dict[str, Any] = {}
        # Tasks are created lazily: at most ``pending_limit`` keys wait on backoff at once, so
        # a batch of a million DOIs does not create a million tasks.
        pending = asyncio.Semaphore(self.pending_limit)

        failures: list[BaseException] = []
        #: Keys another process on the same cache held when their turn came.
        elsewhere: dict[str, str] = {}

        async def one(doi: str, key: str, wait: bool) -> None:
            try:
                result = await self.resolve_key(client, doi, key, wait=wait)
                if result is None:
                    elsewhere[key] = doi
                else:
                    results[key] = result
            except Exception as error:  # e.g. the cache file became unwritable
                failures.append(error)
            finally:
                pending.release()

        running: set[asyncio.Task[None]] = set()
        try:
            # First pass: skip what others hold; second pass: wait for it (or take it over
            # once its holder has died).
            for wait, keys in ((False, todo), (True, elsewhere)):
                for key, doi in list(keys.items()):
                    await pending.acquire()
                    if failures:
                        break
                    task = asyncio.create_task(one(doi, key, wait))
                    running.add(task)
                    task.add_done_callback(running.discard)
                await asyncio.gather(*running)
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
        if failures:
            raise failures[0]
        return results


class _Batch(KeyedBatch):
    """One aresolve() call: one proxy, its breaker, rate limit and retry budget."""

    def __init__(
        self,
        config: ResolverConfig,
        cache: Any,
        progress: Progress | None,
        stats: ResolverStats,
    ) -> None:
        from airflow_doi.resolver.limits import RateLimiter  # the resolve extra: redis
        from airflow_doi.resolver.retry import RetryPolicy  # the resolve extra: tenacity

        super().__init__(cache, progress, stats)
        self.config = config
        self.pending_limit = config.concurrency * config.pending_per_slot
        self.breaker = CircuitBreaker(
            threshold=config.breaker_threshold,
            cooldown=config.breaker_cooldown,
            cooldown_max=config.breaker_cooldown_max,
            give_up=config.breaker_give_up,
            target=f"the proxy at {config.safe_base_url}",
        )
        self.breaker.answered = stats.answered  # an earlier batch of the run was answered
        self.limiter = RateLimiter(config)
        #: Who registered each key, as Which RA? names it.
        self.agencies: dict[str, str] = {}
        self.policy = RetryPolicy(config, self.breaker, self.limiter, stats)

    expands_short_dois = True

    async def expand(self, shorts: dict[str, str]) -> dict[str, Any]:
        """shortDOIs through the proxy's REST API (only their ``HS_ALIAS`` values), under the
        batch's gates; each answer is cached like any other, under the shortDOI's key."""
        self.stats.short_dois = len(shorts)
        found: dict[str, Any] = {}
        if self.cache is not None:
            for key, answer in self.cache.fresh(list(shorts), datetime.now(timezone.utc)).items():
                found[key] = _expanded(shorts[key], answer, answer.attempts, cached=True)
        todo = {key: handle for key, handle in shorts.items() if key not in found}
        if todo:
            async with self.client() as client:
                found.update(await ask_aliases(todo, client, self.policy, self.stats,
                                               self.cache, self.pending_limit))
        return found

    def usable(self, answer: CachedAnswer) -> bool:
        return answer.status != "registered" or not self.config.urls

    async def run(self, todo: dict[str, str]) -> dict[str, Any]:
        """Which RA? first (``existence_first``, or ``urls=False``): the keys that do not exist
        end ``not_found`` with no handle request, and with ``urls=False`` the others
        ``registered``; then each remaining key's handle (the keys Which RA? left undecided)."""
        if not self.config.existence_first and self.config.urls:
            return await super().run(todo)
        try:
            async with self.client() as client:
                results = await self._which_ra(client, todo)
                rest = {key: doi for key, doi in todo.items() if key not in results}
                if rest:
                    results.update(await self.run_keys(client, rest))
                return results
        finally:
            await self.finish()
            if self.cache is not None:
                self.cache.release_all()

    async def _which_ra(self, client: Any, todo: dict[str, str]) -> dict[str, Any]:
        """Which RA? about ``todo``'s keys, ``concurrency`` requests at once: the results of the
        keys it settles (and each key's agency, kept for its handle's result)."""
        from airflow_doi.resolver.client import ProxyError, which_ra_batches
        from airflow_doi.resolver.retry import GaveUpError

        results: dict[str, Any] = {}
        existence_only = not self.config.urls
        if self.cache is not None and not existence_only:
            # A run stopped during these requests: a key whose agency it kept exists, and its
            # handle is asked next anyway (existence only, a key's answer is the cache's).
            kept = self.cache.agencies(todo, datetime.now(timezone.utc))
            self.agencies.update(kept)
            todo = {key: doi for key, doi in todo.items() if key not in kept}
        by_doi = {doi: key for key, doi in todo.items()}
        slots = asyncio.Semaphore(self.config.concurrency)

        async def one(group: list[str]) -> None:
            async with slots:
                if self.breaker.gave_up_reason is not None:
                    return
                try:
                    entries, attempts = await self.policy.run(
                        lambda: client.get_which_ra(group))
                except (GaveUpError, ProxyError) as error:
                    self.stats.which_ra_requests += error.attempts
                    if existence_only:  # nothing else will answer them
                        for doi in group:
                            results[by_doi[doi]] = _failed(
                                doi, by_doi[doi], f"Which RA?: {error.reason}",
                                http_status=error.http_status)
                    return
            self.stats.which_ra_requests += attempts
            now = datetime.now(timezone.utc)
            share = 0  # no request of its own: the group's (counted in which_ra_requests)
            said: set[str] = set()
            named: dict[str, str] = {}
            for entry in entries:
                echoed = entry.get("DOI")
                key = ascii_upper(echoed) if isinstance(echoed, str) else None
                if key is None or key not in todo or key in said:
                    continue
                said.add(key)
                doi = todo[key]
                agency = entry.get("RA")
                if isinstance(agency, str) and agency.strip():
                    self.agencies[key] = named[key] = server_text(agency.strip(),
                                                                  AGENCY_CHARS)
                    if existence_only:
                        results[key] = self._settled(doi, key, "registered", now, share)
                elif str(entry.get("status", "")).lower() == "doi does not exist":
                    results[key] = self._settled(doi, key, "not_found", now, share)
                # "Invalid DOI" (the proxy reads the DOI otherwise), or an entry left out: its
                # handle decides (existence-only too: its answer says at least as much)
            if self.cache is not None and named:
                self.cache.store_agencies(named.items(), now)

        await asyncio.gather(*(one(group) for group in which_ra_batches(list(by_doi))))
        self.done += len(results)
        self.report()
        return results

    def _settled(self, doi: str, key: str, status: str, now: datetime,
                 attempts: int) -> ResolutionResult:
        """A key Which RA? settled: ``not_found`` (the DOI does not exist) or ``registered``;
        cached like a handle's answer (the registry's word, for a day)."""
        from airflow_doi.resolver.result import expires_after

        ttl = self.config.negative_ttl if status == "not_found" else max(
            self.config.negative_ttl, 86400.0)
        fields: dict[str, Any] = {
            "status": status, "http_status": 200, "resolved_at": now,
            "expires_at": expires_after(now, ttl), "agency": self.agencies.get(key)}
        if self.cache is not None:
            self.cache.store(CachedAnswer(key=key, doi=doi, attempts=attempts, **fields))
        reason = ("doi.org's Which RA? says the DOI does not exist" if status == "not_found"
                  else None)
        return ResolutionResult(None, doi, key, attempts=attempts, error=reason, **fields)

    def cached_result(self, key: str, answer: CachedAnswer) -> ResolutionResult:
        # url_raw and a refusal are not stored: they follow from the values, as when fetched.
        _, url_raw, refusal = (
            judge_url(answer.values) if answer.response_code == 1 else (None, None, None)
        )
        return ResolutionResult(
            None, answer.doi, key, attempts=answer.attempts, url_raw=url_raw, cached=True,
            error=refusal if answer.status == "no_values" else None, **answer_fields(answer),
        )

    @asynccontextmanager
    async def client(self) -> AsyncIterator[Any]:
        from airflow_doi.resolver.client import ProxyClient  # the resolve extra: aiohttp

        async with ProxyClient.open_session(self.config) as session:
            yield ProxyClient(self.config, session)

    async def finish(self) -> None:
        await self.limiter.aclose()
        self.stats.breaker_opens = self.breaker.opens
        self.stats.gave_up = self.breaker.gave_up_reason
        self.stats.answered = self.breaker.answered
        if self.breaker.never_answered:
            self.stats.never_answered = self.breaker.last_reason

    async def request(self, client: Any, doi: str, key: str) -> ResolutionResult:
        from airflow_doi.resolver.client import ProxyError  # the resolve extra: aiohttp
        from airflow_doi.resolver.retry import GaveUpError  # the resolve extra: tenacity

        try:
            answer, attempts = await self.policy.run(lambda: client.get_handle(doi, key))
        except (GaveUpError, ProxyError) as error:
            return _failed(
                doi, key, error.reason, attempts=error.attempts, http_status=error.http_status,
                response_code=getattr(error, "response_code", None),
            )
        carried = {**answer_fields(answer), "agency": self.agencies.get(key)}
        if self.cache is not None:
            self.cache.store(CachedAnswer(key=key, doi=doi, attempts=attempts, **carried))
        return ResolutionResult(
            None, doi, key, attempts=attempts, error=answer.refusal, url_raw=answer.url_raw,
            **carried,
        )


async def ask_aliases(shorts: dict[str, str], client: Any, policy: Any, stats: ResolverStats,
                      cache: ResolverCache | None, at_once: int) -> dict[str, Any]:
    """For each shortDOI of ``shorts`` (its key -> the handle as written): the DOI it aliases,
    or the :class:`ResolutionResult` of its rows when there is none (no such shortDOI, no DOI
    named, the proxy failing). Asked on ``client`` (a :class:`~airflow_doi.resolver.client.
    ProxyClient`) under ``policy``'s gates, ``at_once`` at a time; the requests counted in
    ``stats``, each answer kept in ``cache`` (when given) under the shortDOI's key."""
    from airflow_doi.resolver.client import ProxyError  # the resolve extra: aiohttp
    from airflow_doi.resolver.retry import GaveUpError  # the resolve extra: tenacity

    found: dict[str, Any] = {}

    async def one(key: str, handle: str) -> None:
        try:
            answer, attempts = await policy.run(lambda: client.get_alias(handle, key))
        except (GaveUpError, ProxyError) as error:
            stats.short_doi_requests += error.attempts
            found[key] = ResolutionResult(
                None, None, None, status="error", attempts=error.attempts,
                http_status=error.http_status, error=f"the shortDOI {handle} could not be "
                f"expanded: {error.reason}")
            return
        stats.short_doi_requests += attempts
        if cache is not None:
            cache.store(CachedAnswer(key=key, doi=handle, attempts=attempts,
                                     **answer_fields(answer)))
        found[key] = _expanded(handle, answer, attempts)

    todo = list(shorts.items())
    for start in range(0, len(todo), at_once):
        await asyncio.gather(*(one(key, handle) for key, handle in todo[start:start + at_once]))
    return found


def _expanded(handle: str, answer: Any, attempts: int, *, cached: bool = False) -> Any:
    """The DOI a shortDOI's answer aliases (normalized), or the result of its rows: it does
    not exist (``not_found``), or names no valid DOI (``no_values``, the reason in ``error``)."""
    from airflow_doi.resolver.client import ALIAS_TYPE, alias_of, server_text

    carried = answer_fields(answer)
    if answer.status == "not_found":
        problem = f"the shortDOI {handle} does not exist"
    else:
        alias = alias_of(answer.values)
        check = validate(alias) if alias is not None else None
        if check is not None and check.valid and check.doi is not None:
            return check.doi
        problem = (f"the shortDOI {handle} names no DOI (no {ALIAS_TYPE} value)" if check is None
                   else f"the shortDOI {handle} names {server_text(repr(alias))}, which is not "
                   f"a valid DOI ({check.reason})")
        carried.update(status="no_values", url=None)
    return ResolutionResult(None, None, None, attempts=attempts, error=problem, cached=cached,
                            **carried)


async def aresolve(
    values: Iterable[object],
    *,
    config: ResolverConfig | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    stats: ResolverStats | None = None,
    **overrides: Any,
) -> list[ResolutionResult]:
    """Resolve DOIs through the proxy REST API; one result per value, in order.

    ``overrides`` are :class:`ResolverConfig` fields by name (``base_url=``, ``rate=``...).
    Never raises for a per-row problem: invalid values come back ``invalid`` (reason in
    ``error``) and DOIs that kept failing come back ``error`` with the last reason, as does
    an answer the proxy sends over 4 MiB (final, not retried).
    Pass a :class:`ResolverStats` as ``stats`` to read the batch's counters afterwards.
    """
    config = _config(config, overrides)
    stats = stats if stats is not None else ResolverStats()
    store = ResolverCache(cache, config.query) if cache is not None else None
    return await answer_rows(
        list(values), _Batch(config, store, progress, stats),
        invalid=lambda value, doi, key, reason: ResolutionResult(
            value, doi, key, status="invalid", error=reason),
        status_of=lambda result: result.status,
    )


async def answer_rows(
    rows: list[object],
    batch: KeyedBatch,
    *,
    invalid: Callable[[object, str | None, str | None, str | None], Any],
    status_of: Callable[[Any], str],
) -> list[Any]:
    """The rows of one batch call, in order: each value checked, each distinct valid key
    taken from ``batch.cache`` while fresh or asked through ``batch`` (the cache is closed at
    the end), invalid values answered by ``invalid(value, doi, key, reason)``; the counters
    of ``batch.stats`` filled in, by ``status_of`` each row."""
    stats = batch.stats
    started = time.monotonic()
    checked = [_check(v) for v in rows]
    shorts: dict[str, str] = {}  # a shortDOI's key -> the shortDOI, as first written
    short_rows: dict[int, str] = {}  # row -> its shortDOI's key
    if batch.expands_short_dois:
        for row, (value, (_, _, reason)) in enumerate(zip(rows, checked, strict=True)):
            handle = short_doi(value) if reason == "short_doi" else None
            if handle is not None:
                short_rows[row] = ascii_upper(handle)
                shorts.setdefault(short_rows[row], handle)
    store = batch.cache
    ran = False
    try:
        expanded = await batch.expand(shorts) if shorts else {}
        for row, short in short_rows.items():
            if isinstance(expanded[short], str):  # the DOI it aliases stands in for it
                checked[row] = (expanded[short], ascii_upper(expanded[short]), None)
        todo: dict[str, str] = {}
        for doi, key, reason in checked:
            if reason is None and key is not None and doi is not None and key not in todo:
                todo[key] = doi
        stats.rows, stats.keys = len(rows), len(todo)
        batch.all_keys = list(todo)
        await batch.prepare(todo)
        known: dict[str, Any] = {}
        if store is not None:
            rest = [key for key in todo if key not in batch.early]
            for key, answer in store.fresh(rest, datetime.now(timezone.utc)).items():
                if batch.usable(answer):
                    known[key] = batch.cached_result(key, answer)
        stats.cache_hits = len(known)
        batch.total, batch.done = len(todo), len(known)
        batch.report()
        missing = {k: d for k, d in todo.items() if k not in known}
        if missing:
            ran = True
            known.update(await batch.run(missing))
    finally:
        if shorts and not ran:  # expand used the gates; run() closes them when it runs
            await batch.finish()
        if store is not None:
            store.close()
    results = [
        replace(expanded[short_rows[row]], input=value)
        if row in short_rows and not isinstance(expanded[short_rows[row]], str)
        else invalid(value, doi, key, reason) if reason is not None or key is None
        else replace(known[key], input=value, doi=doi)
        for row, (value, (doi, key, reason)) in enumerate(zip(rows, checked, strict=True))
    ]
    stats.elapsed = time.monotonic() - started
    stats.by_status = {}
    for result in results:
        status = status_of(result)
        stats.by_status[status] = stats.by_status.get(status, 0) + 1
    return results


def run_sync(coro_factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``asyncio.run`` — or, inside a running loop (Jupyter, some workers), in a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_factory())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(coro_factory())).result()


def blocking_twin(function: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The blocking twin of an async batch function ``afoo``, named ``foo``: same arguments,
    same results, run by :func:`run_sync`.

    The first argument (the values) is read into a list first, in the caller's thread: an
    iterator such as a database cursor may not be read from the thread :func:`run_sync` uses.
    """
    signature = inspect.signature(function)
    first = next(iter(signature.parameters))
    name = function.__name__.removeprefix("a")

    @functools.wraps(function)
    def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        bound = signature.bind(*args, **kwargs)
        bound.arguments[first] = list(bound.arguments[first])
        call: Callable[..., Coroutine[Any, Any, T]] = function
        return run_sync(lambda: call(*bound.args, **bound.kwargs))

    twin.__name__ = twin.__qualname__ = name
    twin.__doc__ = f"Blocking twin of :func:`{function.__name__}` (same arguments, same results)."
    return twin


resolve = blocking_twin(aresolve)


async def awhich_ra(
    values: Iterable[object], *, config: ResolverConfig | None = None, **overrides: Any
) -> list[dict[str, Any]]:
    """Which RA? for each value, in order: ``{"input", "doi", "ra", "error"}``.

    Valid DOIs are sent in batches (commas inside a DOI go as ``%2C``), each batch under the
    same rate limit, breaker and retry budget as handle requests; invalid values never leave.
    """
    # The resolve extra: aiohttp and tenacity.
    from airflow_doi.resolver.client import ProxyClient, ProxyError, which_ra_batches
    from airflow_doi.resolver.retry import GaveUpError

    config = _config(config, overrides)
    rows = list(values)
    checked = [_check(v) for v in rows]
    first_doi: dict[str, str] = {}
    for doi, key, reason in checked:
        if reason is None and key is not None and doi is not None:
            first_doi.setdefault(key, doi)
    answers: dict[str, tuple[str | None, str | None]] = {}
    batch = _Batch(config, None, None, ResolverStats())
    async with ProxyClient.open_session(config) as session:
        client = ProxyClient(config, session)
        try:
            for group in which_ra_batches(list(first_doi.values())):
                try:
                    listed, _ = await batch.policy.run(
                        lambda group=group: client.get_which_ra(group)  # type: ignore[misc]
                    )
                except (GaveUpError, ProxyError) as error:
                    for member in group:
                        answers[ascii_upper(member)] = (None, error.reason)
                    continue
                except Exception as error:  # one unreadable answer costs its group, not all
                    for member in group:
                        answers[ascii_upper(member)] = (None, f"unexpected {type(error).__name__}")
                    continue
                for entry in listed:
                    echoed, ra = entry.get("DOI"), entry.get("RA")
                    if not isinstance(echoed, str):
                        continue
                    if isinstance(ra, str):
                        answers[ascii_upper(echoed)] = (server_text(ra, AGENCY_CHARS), None)
                    else:
                        answers[ascii_upper(echoed)] = (
                            None, server_text(entry.get("status", "Unknown")))
        finally:
            await batch.limiter.aclose()
    out: list[dict[str, Any]] = []
    for value, (doi, key, reason) in zip(rows, checked, strict=True):
        if reason is not None or key is None:
            out.append({"input": value, "doi": doi, "ra": None, "error": reason})
        else:
            found, problem = answers.get(key, (None, "missing from the Which RA? answer"))
            out.append({"input": value, "doi": doi, "ra": found, "error": problem})
    return out


which_ra = blocking_twin(awhich_ra)
