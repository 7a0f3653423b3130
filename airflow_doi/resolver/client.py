"""The HTTP side: build request URLs and turn proxy answers into outcomes.

Two rules matter more than anything else here:

* The DOI enters the path only through :func:`airflow_doi.presentation.encode_path`, and the
  URL is handed to aiohttp already encoded (``yarl.URL(..., encoded=True)``). Letting yarl
  re-encode or normalise it would turn ``%25`` into ``%`` or collapse ``/../``, and the proxy
  would answer for somebody else's handle.
* Only the configured base URL is contacted: redirects are never followed and proxies from
  the environment are ignored.

:func:`interpret` is a pure function from (HTTP status, body, headers) to an :class:`Answer`
or a raised :class:`RetryableError` / :class:`ProxyError`, so the mapping is unit-testable
without a server.
"""

from __future__ import annotations

import asyncio
import errno
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Final

import aiohttp
import yarl

from airflow_doi.presentation import encode_path, encode_which_ra
from airflow_doi.resolver.config import ResolverConfig, redact_url
from airflow_doi.resolver.result import MAX_TTL_SECONDS, AnswerFields, expires_after
from airflow_doi.resolver.text import MAX_REASON, MAX_SERVER_TEXT, server_text
from airflow_doi.resolver.urls import judge_url
from airflow_doi.syntax import ascii_upper

__all__ = [
    "ALIAS_TYPE",
    "MAX_BODY_BYTES",
    "MAX_SERVER_TEXT",
    "MAX_TTL_SECONDS",
    "Answer",
    "ProxyClient",
    "ProxyError",
    "RetryableError",
    "alias_of",
    "expires_after",
    "expiry",
    "interpret",
    "parse_retry_after",
    "server_text",
]

#: Longest Which RA? request path we build; DOIs beyond it go in the next request.
WHICH_RA_MAX_PATH = 1800
WHICH_RA_MAX_DOIS = 50
#: Largest response body read (decompressed). A handle record is a few KiB; anything bigger
#: is a broken or hostile answer that would otherwise be buffered whole in memory.
MAX_BODY_BYTES: Final = 4 * 1024 * 1024
#: The type of a handle value that names another handle to resolve instead: a shortDOI's
#: record holds one naming its DOI (the proxy follows it when it redirects).
ALIAS_TYPE: Final = "HS_ALIAS"


class _RequestError(Exception):
    """A request that failed: ``reason`` in our words, the HTTP status when one came back.

    The reason goes to a row's ``error``, a table and log lines: it is kept as safe text
    (:func:`server_text`, up to :data:`MAX_REASON` characters), whatever a server put in it.
    """

    def __init__(self, reason: str, *, http_status: int | None = None) -> None:
        reason = server_text(reason, MAX_REASON)
        super().__init__(reason)
        self.reason = reason
        self.http_status = http_status


class RetryableError(_RequestError):
    """A failure worth retrying (the proxy or the network, not the DOI, was at fault).

    ``unreachable``: no connection could be made at all (refused, host name not found,
    connection timed out): the server was not reached.
    """

    def __init__(self, reason: str, *, http_status: int | None = None,
                 retry_after: float | None = None, unreachable: bool = False) -> None:
        super().__init__(reason, http_status=http_status)
        self.retry_after = retry_after
        self.unreachable = unreachable

    @property
    def throttled(self) -> bool:
        return self.http_status in (403, 429)


class ProxyError(_RequestError):
    """An answer that retrying cannot change (a 400, a redirect, an unknown response code)."""

    def __init__(self, reason: str, *, http_status: int | None = None,
                 response_code: int | None = None) -> None:
        super().__init__(reason, http_status=http_status)
        self.response_code = response_code
        self.attempts = 1


@dataclass(frozen=True, kw_only=True)
class Answer(AnswerFields):
    """A definitive answer of the proxy for one handle (``status``: resolved, no_values or
    not_found; the fields are :class:`~airflow_doi.resolver.result.AnswerFields`)."""

    #: The lowest-index URL value as sent, safe or not (as safe text: control characters
    #: escaped, bounded; see :func:`~airflow_doi.resolver.urls.judge_url`); ``refusal`` says
    #: why ``url`` is None.
    url_raw: str | None = None
    refusal: str | None = None


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date).

    ``inf``, ``nan`` and ``1e999`` are not seconds: they read as no header at all (the
    caller's own backoff applies), like any other text that is neither form.
    """
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - now).total_seconds())


def _parse_iso(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def expiry(values: Sequence[Mapping[str, Any]], now: datetime, default: float) -> datetime:
    """When the answer stops being fresh: the earliest expiry among the values.

    A value's ``ttl`` is seconds relative to ``now`` or, rarely, an absolute ISO 8601 time.
    Without any usable ttl the ``default`` (the negative-cache ttl) applies. Every candidate
    is capped at :data:`MAX_TTL_SECONDS` from ``now`` (see :func:`expires_after`).
    """
    delays: list[float] = []
    for value in values:
        ttl = value.get("ttl")
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float, str)):
            continue
        absolute = _parse_iso(ttl) if isinstance(ttl, str) else None
        try:
            seconds = (absolute - now).total_seconds() if absolute else float(ttl)
        except OverflowError:  # an int beyond any float: as long as it gets
            seconds = math.inf if isinstance(ttl, int) and ttl > 0 else 0.0
        except ValueError:  # text that is neither a number nor a date
            continue
        if not math.isnan(seconds):
            delays.append(seconds)
    return expires_after(now, min(delays) if delays else default)


def alias_of(values: Sequence[Mapping[str, Any]]) -> str | None:
    """The handle named by the lowest-index :data:`ALIAS_TYPE` value whose data is text
    (as the REST API sends it: ``{"format": "string", "value": ...}``), or None."""
    aliases = [
        value for value in values
        if value.get("type") == ALIAS_TYPE and isinstance(value.get("data"), Mapping)
        and isinstance(value["data"].get("value"), str)
    ]
    if not aliases:
        return None
    first = min(aliases, key=_index)
    text: str = first["data"]["value"]
    return text


def _index(value: Mapping[str, Any]) -> int:
    """A handle value's index (0 when it has none that is a number)."""
    index = value.get("index")
    return index if isinstance(index, int) else 0


def interpret(
    http_status: int,
    body: bytes,
    headers: Mapping[str, str],
    key: str,
    now: datetime,
    negative_ttl: float,
) -> Answer:
    """Map one HTTP answer of ``/api/handles/`` to an :class:`Answer`, or raise.

    Raises :class:`RetryableError` for 429/403/5xx and malformed JSON, :class:`ProxyError`
    for answers that will not change on retry.
    """
    if http_status in (429, 403):
        retry_after = parse_retry_after(headers.get("Retry-After"), now)
        raise RetryableError(
            f"HTTP {http_status} (throttled)", http_status=http_status, retry_after=retry_after
        )
    if 300 <= http_status < 400:
        location = server_text(redact_url(headers.get("Location", "?")))
        raise ProxyError(
            f"HTTP {http_status} redirect to {location} not followed", http_status=http_status
        )
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        document = None
    if http_status >= 500:
        message = document.get("message") if isinstance(document, dict) else None
        failed = document.get("responseCode") if isinstance(document, dict) else None
        detail = f" responseCode {server_text(failed)}" if failed is not None else ""
        detail += f": {server_text(message)}" if message else ""
        raise RetryableError(f"HTTP {http_status}{detail}", http_status=http_status)
    if not isinstance(document, dict) or not isinstance(document.get("responseCode"), int):
        if http_status == 200:
            raise RetryableError("malformed JSON in HTTP 200 answer", http_status=http_status)
        raise ProxyError(f"HTTP {http_status} without a proxy JSON answer", http_status=http_status)
    code: int = document["responseCode"]
    handle = document.get("handle")
    if isinstance(handle, str) and ascii_upper(handle) != key:
        raise ProxyError(
            f"proxy answered for another handle ({server_text(repr(handle))})",
            http_status=http_status,
            response_code=code,
        )
    raw_values = document.get("values")
    values = (
        tuple(v for v in raw_values if isinstance(v, dict)) if isinstance(raw_values, list) else ()
    )
    if http_status == 404 and code == 100:
        return Answer(status="not_found", http_status=http_status, response_code=code,
                      resolved_at=now, expires_at=expires_after(now, negative_ttl))
    if http_status == 200 and code in (1, 200):
        url, url_raw, refusal = judge_url(values) if code == 1 else (None, None, None)
        return Answer(
            status="resolved" if url is not None else "no_values", http_status=http_status,
            response_code=code, url=url, values=values, resolved_at=now,
            expires_at=expiry(values, now, negative_ttl), url_raw=url_raw, refusal=refusal,
        )
    message = document.get("message")
    raise ProxyError(
        f"unexpected answer: HTTP {http_status} responseCode {code}"
        + (f": {server_text(message)}" if message else ""),
        http_status=http_status,
        response_code=code,
    )


class ProxyClient:
    """Thin aiohttp wrapper: one session, the polite headers, no redirects, no env proxies."""

    def __init__(self, config: ResolverConfig, session: aiohttp.ClientSession) -> None:
        self.config = config
        self.session = session

    @classmethod
    def open_session(
        cls, config: ResolverConfig, accept: str = "application/json"
    ) -> aiohttp.ClientSession:
        session = aiohttp.ClientSession(
            headers={"User-Agent": config.user_agent, "Accept": accept},
            timeout=aiohttp.ClientTimeout(total=config.timeout),
            connector=aiohttp.TCPConnector(limit=config.concurrency + 1),
            trust_env=False,
            # No cookie is kept: none is needed, and one session may talk to several hosts
            # (the proxy and the agencies of content negotiation).
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        # aiohttp silently re-sends an idempotent request once when a kept-alive connection
        # drops. That request would bypass the rate limiter and the retry budget, so every
        # retry here goes through RetryPolicy instead (no public switch exists for this).
        if hasattr(session, "_retry_connection"):
            session._retry_connection = False
        return session

    def handle_url(self, doi: str) -> yarl.URL:
        """``{base}/api/handles/{encoded DOI}[?filters]``, already encoded (yarl keeps it)."""
        query = self.config.query
        text = f"{self.config.root}/api/handles/{encode_path(doi)}"
        return yarl.URL(text + (f"?{query}" if query else ""), encoded=True)

    def alias_url(self, handle: str) -> yarl.URL:
        """``{base}/api/handles/{encoded handle}?type=HS_ALIAS``: only the aliases, whatever
        ``types``/``indexes`` the configuration filters a DOI's values by."""
        return yarl.URL(
            f"{self.config.root}/api/handles/{encode_path(handle)}?type={ALIAS_TYPE}",
            encoded=True)

    def which_ra_url(self, dois: Sequence[str]) -> yarl.URL:
        joined = ",".join(encode_which_ra(d) for d in dois)
        return yarl.URL(f"{self.config.root}/doiRA/{joined}", encoded=True)

    async def get(self, url: yarl.URL, *, accept: str | None = None,
                  ) -> tuple[int, bytes, Mapping[str, str]]:
        """One GET (``accept`` instead of the session's Accept header, when given); every
        network or protocol failure becomes a :class:`RetryableError` whose reason is ours
        (aiohttp's wording, e.g. ``ssl:default`` for plain http, never reaches a row or a log
        line)."""
        headers = {"Accept": accept} if accept else None
        try:
            async with self.session.get(url, allow_redirects=False,
                                        headers=headers) as response:
                body = await _read_capped(response, MAX_BODY_BYTES)
                return response.status, body, response.headers
        except aiohttp.ConnectionTimeoutError:  # before TimeoutError, which it also is
            raise RetryableError(
                f"could not connect to {self._where()} (connection timed out)", unreachable=True
            ) from None
        except asyncio.TimeoutError:
            raise RetryableError(f"no complete answer within {self.config.timeout:g}s") from None
        except aiohttp.ServerDisconnectedError:
            raise RetryableError("connection dropped by the server") from None
        except aiohttp.ClientPayloadError:
            raise RetryableError(
                "the answer's body was cut short or could not be decoded"
            ) from None
        except aiohttp.ClientConnectorError as error:
            raise RetryableError(
                f"could not connect to {self._where()} ({_why(error)})", unreachable=True
            ) from None
        except aiohttp.ClientConnectionError as error:
            raise RetryableError(f"connection to {self._where()} failed ({_why(error)})") from None
        except aiohttp.ClientResponseError:  # raised for a status line or header aiohttp refuses
            raise RetryableError("the server's answer is not valid HTTP") from None

    def _where(self) -> str:
        return f"{redact_url(self.config.root)}/"

    async def get_handle(self, doi: str, key: str) -> Answer:
        status, body, headers = await self.get(self.handle_url(doi))
        now = datetime.now(timezone.utc)
        return interpret(status, body, headers, key, now, self.config.negative_ttl)

    async def get_alias(self, handle: str, key: str) -> Answer:
        """The proxy's answer for a handle's aliases (a shortDOI's): :func:`alias_of` reads
        the DOI it names from the answer's values."""
        status, body, headers = await self.get(self.alias_url(handle))
        now = datetime.now(timezone.utc)
        return interpret(status, body, headers, key, now, self.config.negative_ttl)

    async def get_which_ra(self, dois: Sequence[str]) -> list[dict[str, Any]]:
        """One Which RA? request; returns the proxy's list of ``{"DOI", "RA"|"status"}``."""
        status, body, headers = await self.get(self.which_ra_url(dois))
        if status in (429, 403) or status >= 500:
            now = datetime.now(timezone.utc)
            retry_after = parse_retry_after(headers.get("Retry-After"), now)
            raise RetryableError(f"HTTP {status}", http_status=status, retry_after=retry_after)
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise RetryableError("malformed JSON in Which RA? answer", http_status=status) from None
        if status != 200 or not isinstance(document, list):
            raise ProxyError(f"unexpected Which RA? answer (HTTP {status})", http_status=status)
        return [d for d in document if isinstance(d, dict)]


#: errno values users meet, in our words.
_ERRNO_WORDS: Final = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.ECONNABORTED: "connection aborted",
    errno.EPIPE: "connection closed while sending",
    errno.ENETUNREACH: "network unreachable",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ETIMEDOUT: "connection timed out",
    errno.EADDRNOTAVAIL: "address not available",
}


def _why(error: aiohttp.ClientConnectionError) -> str:
    """A short cause of a connection failure in our words (no library message)."""
    if isinstance(error, aiohttp.ClientConnectorDNSError):
        return "host name not found"
    if isinstance(error, (aiohttp.ClientConnectorCertificateError, aiohttp.ClientSSLError)):
        return "TLS handshake or certificate refused"
    number = getattr(error, "errno", None)
    if number is None:
        number = getattr(getattr(error, "os_error", None), "errno", None)
    if number in _ERRNO_WORDS:
        return _ERRNO_WORDS[number]
    if isinstance(number, int) and number in errno.errorcode:
        return f"system error {errno.errorcode[number]}"
    return "network error"


async def _read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The body, or :class:`ProxyError` as soon as it exceeds ``limit`` bytes.

    Final, not retryable: the proxy answers a handle with the same record each time, so a
    retry would only download the oversized body ``max_attempts`` times. The connection is
    dropped rather than drained (aiohttp closes it when the unread response is released).
    """
    declared = response.content_length
    if declared is not None and declared > limit:
        raise ProxyError(
            f"response body of {declared} bytes exceeds the {limit}-byte limit",
            http_status=response.status,
        )
    body = bytearray()
    while True:
        chunk = await response.content.read(limit + 1 - len(body))
        if not chunk:
            return bytes(body)
        body += chunk
        if len(body) > limit:
            raise ProxyError(
                f"response body exceeds the {limit}-byte limit", http_status=response.status
            )


def which_ra_batches(dois: Sequence[str]) -> list[list[str]]:
    """Split DOIs into Which RA? requests that stay under the path and count limits."""
    batches: list[list[str]] = []
    current: list[str] = []
    length = 0
    for doi in dois:
        size = len(encode_which_ra(doi)) + 1
        if current and (length + size > WHICH_RA_MAX_PATH or len(current) >= WHICH_RA_MAX_DOIS):
            batches.append(current)
            current, length = [], 0
        current.append(doi)
        length += size
    if current:
        batches.append(current)
    return batches
