"""Content negotiation over HTTP: ask the proxy, follow its redirect to the agency, read.

One DOI is asked with ``GET {proxy}/{DOI}`` (the DOI percent-encoded per the IDF tables,
exactly as ``resolve`` encodes it) and ``Accept: application/vnd.citationstyles.csl+json``.
doi.org answers with a redirect to the registration agency's metadata service. We follow
redirects ourselves, never aiohttp, and only:

* at most ``max_redirects`` of them, never one already visited (a loop);
* to the proxy itself or to a host of the allowlist (``metadata_hosts``): a bare host name
  there allows https only, an explicit ``http://127.0.0.1:PORT`` allows that origin;
* to a URL without credentials or characters a URL may not carry.

A redirect from the proxy to any other host is the DOI's landing page (the agency offers no
content negotiation): the key is ``no_metadata``. The same from an agency host is an
``error``, as is an https-to-http downgrade. Each hop passes its own host's gate (pace,
breaker, retry budget, ``Retry-After``): a 429 from an agency retries that hop, not the proxy's.
A host that announces its limit (``x-rate-limit-limit`` / ``x-rate-limit-interval``) slows its
pace to it when that is lower than ours.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Final
from urllib.parse import urljoin, urlsplit

import aiohttp
import yarl

from airflow_doi.metadata.config import MetadataConfig, origin_of
from airflow_doi.metadata.csl import CSL_MEDIA_TYPE, CslError, read_document
from airflow_doi.metadata.sources import BatchSource, SourceHealth
from airflow_doi.presentation import encode_path
from airflow_doi.resolver.breaker import CircuitBreaker
from airflow_doi.resolver.client import (
    ProxyClient,
    ProxyError,
    RetryableError,
    parse_retry_after,
    server_text,
)
from airflow_doi.resolver.config import redact_url
from airflow_doi.resolver.limits import Pace, RateLimiter, announced_rate
from airflow_doi.resolver.result import ResolverStats
from airflow_doi.resolver.retry import GaveUpError, RetryPolicy
from airflow_doi.resolver.urls import is_safe_url
from airflow_doi.syntax import ascii_upper

__all__ = [
    "LANDING", "Hop", "ListAnswer", "MetadataClient", "Outcome", "PageAnswer", "interpret_hop",
]

#: How the reason of a key the proxy sent to a landing page begins (the CLI and the operator
#: warn when every key ends so: an allowlist that misses the agencies' hosts).
LANDING: Final = "the proxy sent the landing page"

#: The share of a server's announced rate a list query's pace slows to: requests arrive with
#: the network's jitter, and one arriving early would be one over the limit.
ANNOUNCED_MARGIN: Final = 0.95
#: Answers that say "no CSL-JSON for this DOI here": Not Acceptable, Unsupported Media Type,
#: No Content.
NO_METADATA_STATUSES: Final = frozenset({204, 406, 415})


@dataclass(frozen=True)
class Hop:
    """What one request came back with: a document, a redirect or a final word."""

    kind: str  # document | redirect | not_found | no_metadata
    http_status: int
    document: dict[str, Any] | None = None
    location: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Outcome:
    """Where a DOI's requests ended: the final hop, where it came from, requests sent."""

    status: str  # ok | not_found | no_metadata | error
    http_status: int | None
    attempts: int
    source: str | None
    document: dict[str, Any] | None = None
    reason: str | None = None


def interpret_hop(http_status: int, body: bytes, headers: Mapping[str, str],
                  now: datetime, host: str) -> Hop:
    """One answer as a :class:`Hop`, or :class:`RetryableError` / :class:`ProxyError`."""
    if http_status in (429, 403):
        retry_after = parse_retry_after(headers.get("Retry-After"), now)
        raise RetryableError(f"HTTP {http_status} (throttled) from {host}",
                             http_status=http_status, retry_after=retry_after)
    if http_status >= 500:
        raise RetryableError(f"HTTP {http_status} from {host}", http_status=http_status)
    if 300 <= http_status < 400:
        location = headers.get("Location")
        if not location:
            raise ProxyError(f"HTTP {http_status} from {host} without a Location",
                             http_status=http_status)
        return Hop("redirect", http_status, location=location)
    if http_status in (404, 410):
        return Hop("not_found", http_status)
    if http_status in NO_METADATA_STATUSES:
        return Hop("no_metadata", http_status,
                   reason=f"{host} has no CSL-JSON for this DOI (HTTP {http_status})")
    if http_status != 200:
        raise ProxyError(f"unexpected HTTP {http_status} from {host}", http_status=http_status)
    if not body.strip():
        return Hop("no_metadata", http_status, reason=f"{host} sent an empty answer")
    try:
        document = read_document(body)
    except CslError as error:  # a complete answer (a cut line is retried as such): final
        raise ProxyError(f"{error.reason} ({host})", http_status=200) from None
    return Hop("document", http_status, document=document)


class _Stop(Exception):
    """A redirect that is not followed: the key ends with ``status`` and ``reason``."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class _Gate:
    """One host's breaker, rate limit and retry budget, and the client speaking to it."""

    client: ProxyClient
    breaker: CircuitBreaker
    limiter: RateLimiter
    policy: RetryPolicy


@dataclass(frozen=True)
class PageAnswer:
    """One page of an update stream: its records, the next page's cursor (None: the last),
    the stream's total where the host says it."""

    records: list[Any]
    cursor: str | None
    total: int | None
    attempts: int
    http_status: int | None
    host: str


@dataclass(frozen=True)
class ListAnswer:
    """What one list query came back with: the records it holds, by comparison key."""

    records: dict[str, Any]
    attempts: int
    http_status: int | None
    host: str


@dataclass
class MetadataClient:
    """The requests of one enrichment: one session, a gate per host and kind of request
    (single records, list queries), the redirect rules."""

    config: MetadataConfig
    session: aiohttp.ClientSession
    stats: ResolverStats
    gates: dict[tuple[str, str], _Gate] = field(default_factory=dict)
    #: Per batch API host: set once its first list query has been answered (or has failed).
    probed: dict[str, asyncio.Event] = field(default_factory=dict)
    #: What the run learned in earlier calls (kept across them): each gate's pace goes on.
    health: SourceHealth = field(default_factory=SourceHealth)

    @classmethod
    def open_session(cls, config: MetadataConfig) -> aiohttp.ClientSession:
        return ProxyClient.open_session(config, accept=CSL_MEDIA_TYPE)

    def gate(self, origin: str, kind: str = "") -> _Gate:
        """The gate of a host's single requests (``kind=""``) or its list queries
        (``"list"``): each its own pace, concurrency cap, breaker and retry budget."""
        if (origin, kind) not in self.gates:
            host_config = self.config.host_config(origin, kind)
            breaker = CircuitBreaker(
                threshold=host_config.breaker_threshold, cooldown=host_config.breaker_cooldown,
                cooldown_max=host_config.breaker_cooldown_max,
                give_up=host_config.breaker_give_up,
                target=redact_url(origin) + (" (list queries)" if kind else ""),
            )
            if origin == origin_of(self.config.base_url) and not kind:
                breaker.answered = self.stats.answered  # the proxy answered an earlier batch
            pace = (Pace(host_config.rate, 1, host_config.concurrency) if kind == "list"
                    else None)
            limiter = RateLimiter(host_config, kind=kind, pace=pace)
            kept = self.health.paces.get((origin, kind))
            if kept is not None:
                limiter.pacer.resume(kept)
            self.gates[origin, kind] = _Gate(
                ProxyClient(host_config, self.session), breaker, limiter,
                RetryPolicy(host_config, breaker, limiter, self.stats),
            )
        return self.gates[origin, kind]

    async def aclose(self) -> None:
        for (origin, kind), gate in self.gates.items():
            self.health.paces[origin, kind] = gate.limiter.pacer.state()
            await gate.limiter.aclose()
        self.stats.breaker_opens = sum(g.breaker.opens for g in self.gates.values())
        # Only the proxy giving up stops a run: keys of an agency host that is down end as
        # errors (asked again next run) while the other agencies' keys go on.
        proxy = self.gates.get((origin_of(self.config.base_url) or "", ""))
        self.stats.gave_up = proxy.breaker.gave_up_reason if proxy is not None else None
        if proxy is not None:
            self.stats.answered = proxy.breaker.answered
        if proxy is not None and proxy.breaker.never_answered:
            self.stats.never_answered = proxy.breaker.last_reason

    def proxy_gate(self) -> _Gate:
        """The gate of the proxy's own requests (Which RA?, a shortDOI's aliases)."""
        origin = origin_of(self.config.base_url)
        assert origin is not None
        return self.gate(origin)

    async def which_ra(self, dois: list[str]) -> tuple[list[dict[str, Any]], int]:
        """One Which RA? request to the proxy, under its gate: ``(entries, requests sent)``;
        raises :class:`GaveUpError` or :class:`ProxyError`."""
        gate = self.proxy_gate()
        return await gate.policy.run(lambda: gate.client.get_which_ra(dois))

    async def ask_list(self, source: BatchSource, base: str, dois: list[str]) -> ListAnswer:
        """One list query of ``source`` for ``dois`` under its host's gate for list queries;
        raises :class:`GaveUpError` or :class:`ProxyError` (the caller asks the keys by content
        negotiation then)."""
        url = source.list_url(base, dois, self.config.contact)
        records, attempts, status = await self._list_get(base, url, source.accept, source.read)
        found: dict[str, Any] = {}
        for record in records:
            doi = source.doi_of(record)
            if doi is not None:
                found.setdefault(ascii_upper(doi), record)
        return ListAnswer(found, attempts, status, _host(url))

    async def ask_page(self, source: BatchSource, base: str, url: str) -> PageAnswer:
        """One page of ``source``'s update stream (``url``), under the host's gate for list
        queries; raises :class:`GaveUpError` or :class:`ProxyError` (a 404: the cursor has
        expired)."""
        (records, cursor, total), attempts, status = await self._list_get(
            base, url, source.accept, source.read_updates)
        return PageAnswer(records, cursor, total, attempts, status, _host(url))

    async def _list_get(self, base: str, url: str, accept: str,
                        read: Callable[[bytes], Any]) -> tuple[Any, int, int | None]:
        """``(read(body), requests sent, HTTP status)`` of a list query or a page, under the
        host's gate for list queries (its pace, lowered to what the host announces)."""
        origin = origin_of(base)
        assert origin is not None
        gate = self.gate(origin, "list")
        host = _host(url)
        status: list[int | None] = [None]

        async def ask() -> Any:
            code, body, headers = await gate.client.get(yarl.URL(url, encoded=True),
                                                        accept=accept)
            status[0] = code
            self.health.heard(host, headers)
            announced = announced_rate(headers)
            if announced is not None:  # Crossref's x-rate-limit-*: under it, with a margin
                gate.limiter.lower(announced * ANNOUNCED_MARGIN)
            return _list_records(read, code, body, headers, host)

        # The first query to a host goes alone and the others wait for its answer, which may
        # announce the host's limit: no query leaves at our own pace before it is known.
        probed = self.probed.get(origin)
        if probed is None:
            probed = self.probed[origin] = asyncio.Event()
            try:
                value, attempts = await gate.policy.run(ask)
            finally:
                probed.set()
        else:
            await probed.wait()
            value, attempts = await gate.policy.run(ask)
        return value, attempts, status[0]

    def list_health(self, base: str) -> tuple[bool, str | None]:
        """Of ``base``'s list queries in this call: whether any was answered (any status), and
        why the breaker gave up on the host (None if it did not)."""
        gate = self.gates.get((origin_of(base) or "", "list"))
        if gate is None:
            return False, None
        return gate.breaker.answered, gate.breaker.gave_up_reason

    def next_url(self, current: str, location: str, visited: set[str]) -> str:
        """Where a redirect leads, or :class:`_Stop` when it must not be followed."""
        here = _host(current)
        from_proxy = origin_of(current) == origin_of(self.config.base_url)
        current = redact_url(current)  # a relative Location must not inherit our credentials
        if not isinstance(location, str) or not is_safe_url(urljoin(current, location)):
            raise _Stop("error", f"{here} redirected to an unusable address "
                        f"({server_text(location)}); not followed")
        target = urljoin(current, location)
        origin = origin_of(target)
        if origin is None or "@" in urlsplit(target).netloc:
            raise _Stop("error", f"{here} redirected to {redact_url(target)!r}, which carries "
                        "credentials or is not http(s); not followed")
        allowed = self.config.allowed_origins
        if origin not in allowed:
            there = _host(target)
            if any(_host(o) == there for o in allowed):  # a listed host, another scheme
                raise _Stop("error", f"{here} redirected to {redact_url(origin)}: a "
                            "downgrade from https to http is never followed")
            if from_proxy:
                raise _Stop("no_metadata", f"{LANDING} at {there}, not a metadata host: the "
                            "agency offers no CSL-JSON for this DOI (or its host is missing "
                            "from the allowlist: metadata_hosts, --metadata-host)")
            raise _Stop("error", f"{here} redirected to {there}, which is not on the "
                        "metadata_hosts allowlist; not followed")
        if target in visited:
            raise _Stop("error", f"redirect loop between {here} and {_host(target)}")
        return target

    async def fetch(self, doi: str) -> Outcome:
        """Ask for one DOI's CSL-JSON; never raises for the DOI's own problems."""
        url = f"{self.config.root}/{encode_path(doi)}"
        visited = {url}
        attempts = 0
        last_status: int | None = None
        for _ in range(self.config.max_redirects + 1):
            origin = origin_of(url)
            assert origin is not None
            gate = self.gate(origin)
            host = _host(url)
            try:
                hop, sent = await gate.policy.run(_Ask(self, gate, url, host))
            except (GaveUpError, ProxyError) as error:
                return Outcome("error", error.http_status, attempts + error.attempts, host,
                               reason=error.reason)
            attempts += sent
            last_status = hop.http_status
            if hop.kind == "redirect":
                assert hop.location is not None
                try:
                    url = self.next_url(url, hop.location, visited)
                except _Stop as stop:
                    return Outcome(stop.status, hop.http_status, attempts, host,
                                   reason=stop.reason)
                visited.add(url)
                continue
            status = "ok" if hop.kind == "document" else hop.kind
            return Outcome(status, hop.http_status, attempts, host, hop.document, hop.reason)
        return Outcome("error", last_status, attempts, _host(url),
                       reason=f"more than {self.config.max_redirects} redirects; not followed")

    async def _ask(self, gate: _Gate, url: str, host: str) -> Hop:
        status, body, headers = await gate.client.get(yarl.URL(url, encoded=True))
        self.health.heard(host, headers)
        announced = announced_rate(headers)
        if announced is not None:  # e.g. Crossref's x-rate-limit-*: never faster than that
            gate.limiter.lower(announced)
        return interpret_hop(status, body, headers, datetime.now(timezone.utc), host)


@dataclass(frozen=True)
class _Ask:
    """One hop's request, as the retry policy calls it (again on a retry)."""

    client: MetadataClient
    gate: _Gate
    url: str
    host: str

    async def __call__(self) -> Hop:
        return await self.client._ask(self.gate, self.url, self.host)


def _list_records(read: Callable[[bytes], Any], status: int, body: bytes,
                  headers: Mapping[str, str], host: str) -> Any:
    """The records of a list answer, or :class:`RetryableError` (throttled, a server error, a
    body cut short: asked again) / :class:`ProxyError` (refused, or not a list: final)."""
    if status in (429, 403, 503) or status >= 500:
        retry_after = parse_retry_after(headers.get("Retry-After"), datetime.now(timezone.utc))
        throttled = " (throttled)" if status in (429, 403) else ""
        raise RetryableError(f"HTTP {status}{throttled} from {host}", http_status=status,
                             retry_after=retry_after)
    if status != 200:
        raise ProxyError(f"HTTP {status} from {host} to a list query", http_status=status)
    try:
        return read(body)
    except CslError as error:
        if "cut short" in error.reason:  # a body that ended early: the next one may not
            raise RetryableError(f"{error.reason} ({host})", http_status=200) from None
        raise ProxyError(f"{error.reason} ({host})", http_status=200) from None


def _host(url: str) -> str:
    """``host[:port]`` of a URL, for messages and ``source_host`` (never credentials)."""
    try:
        return urlsplit(url).netloc.rpartition("@")[2] or "?"
    except ValueError:
        return "?"
