"""Everything a batch resolution can be tuned with, in one frozen dataclass.

The defaults are deliberately polite (a few requests per second, one in flight per
quarter-second) because the doi.org proxy publishes no limit and has answered bursty clients
with 403 and 429. Benchmarks and tests raise them explicitly against the local simulator.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote, unquote, unquote_plus, urlsplit

from airflow_doi._version import __version__
from airflow_doi.presentation import DEFAULT_BASE_URL

__all__ = ["DEFAULT_PROXY_URL", "ResolverConfig", "check_contact", "redact_url", "scrub"]

#: Fields that count things: integers of at least 1 (0 would hang a semaphore for ever).
_COUNTS: Final = ("burst", "concurrency", "max_attempts", "breaker_threshold", "pending_per_slot")
#: Seconds that must be a real, finite, positive number (aiohttp reads a 0 timeout as none).
_POSITIVE: Final = ("rate", "timeout")
#: Seconds that may be 0 but must stay finite (they are slept on directly).
_FINITE: Final = ("backoff_base", "backoff_max", "breaker_cooldown")
#: Seconds that may be 0 or infinite (a cap or a ttl; infinity means "no limit"/"the cap").
_NON_NEGATIVE: Final = (
    "retry_after_max",
    "breaker_cooldown_max",
    "breaker_give_up",
    "negative_ttl",
)


#: Query parameters whose value is a credential, matched in any case: libpq's password,
#: sslpassword and passfile (a path is a secret too), and the other drivers' and services'
#: spellings.
_SECRET_PARAMETERS: Final = frozenset({
    "password", "passwd", "pwd", "sslpassword", "passfile", "secret", "token",
    "access_token", "api_key", "apikey",
})
#: What a hidden value is shown as.
_HIDDEN: Final = "***"


def redact_url(url: str) -> str:
    """``url`` without its credentials, whatever its scheme: no userinfo
    (``https://user:pw@host`` -> ``https://host``), and the value of every query parameter
    that carries one (``?password=``, ``sslpassword=``, ``passfile=``...) shown as ``***``.

    Credentials may ride in a base URL (a corporate proxy in front of doi.org), a Redis or a
    database URL; they must never reach a log line, an error message or a Redis key. The
    userinfo is found as every driver may read it (:func:`_userinfos`: a password holding
    ``?``, ``#`` or ``/`` too), and the longest reading is hidden: hiding too much in a message
    is harmless, too little is a leak.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    userinfo = max(_userinfos(rest), key=len, default="")
    if userinfo:
        rest = rest[len(userinfo) + 1:]
    before, mark, query = rest.partition("?")
    fragment = ""
    if mark:
        query, hash_, fragment = query.partition("#")
        fragment = hash_ + fragment
        query = "&".join(_redact_parameter(item) for item in query.split("&"))
    return f"{scheme}://{before}{mark}{query}{fragment}"


def _userinfos(rest: str) -> set[str]:
    """The userinfo of a URL's ``rest`` (after ``scheme://``) as the drivers read it: up to
    the last ``@`` of the authority as RFC 3986 ends it (at ``/``, ``?`` or ``#``), as libpq
    ends it (at ``/``: a password may hold ``?`` and ``#``), and up to the last ``@`` of all
    when a ``:`` comes before the first ``/`` (a password holding a bare ``/`` and a ``?``)."""
    found = set()
    for authority in (re.split(r"[/?#]", rest, maxsplit=1)[0], rest.partition("/")[0]):
        if "@" in authority:
            found.add(authority.rpartition("@")[0])
    userinfo = rest.rpartition("@")[0]
    if userinfo and ":" in userinfo.partition("/")[0]:
        found.add(userinfo)
    return found


def _redact_parameter(item: str) -> str:
    name, equals, _ = item.partition("=")
    if equals and unquote_plus(name).strip().lower() in _SECRET_PARAMETERS:
        return f"{name}={_HIDDEN}"
    return item


def scrub(text: str, *urls: str | None) -> str:
    """``text`` (what a driver or a server said) without the credentials of ``urls``: each
    URL as :func:`redact_url` shows it, then every password, token-as-user-name and secret
    query value they carry, as written and percent-decoded, shown as ``***`` (libpq echoes a
    malformed percent-encoded password in its parse error). A secret of fewer than four
    characters is hidden only where it stands alone (``p`` is no part of ``https``)."""
    for url in urls:
        if url:
            text = text.replace(url, redact_url(url))
    found = {secret for url in urls if url for secret in _secrets(url)}
    for secret in sorted(found, key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, _HIDDEN)
        else:
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", _HIDDEN,
                          text)
    return text


def _secrets(url: str) -> set[str]:
    """The credentials ``url`` carries, as written and decoded: the password of each reading
    of its userinfo (:func:`_userinfos`; of an http(s) URL without one, the user name: a
    token), and the values of its secret query parameters."""
    scheme, _, rest = url.partition("://")
    token_user = scheme.lower() in ("http", "https")
    written = set()
    for userinfo in _userinfos(rest):
        user, colon, password = userinfo.partition(":")
        written.add(password if colon else user if token_user else "")
    userinfo = max(_userinfos(rest), key=len, default="")
    after = rest[len(userinfo) + 1:] if userinfo else rest
    for item in after.partition("?")[2].partition("#")[0].split("&"):
        name, equals, value = item.partition("=")
        if equals and unquote_plus(name).strip().lower() in _SECRET_PARAMETERS:
            written.add(value)
    decoded = {form for secret in written for form in (unquote(secret), unquote_plus(secret))}
    return {secret for secret in written | decoded if secret}


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, not {value!r}")
    return float(value)


#: The public doi.org proxy: the one default of every face (the URL presentation's base
#: without its closing slash).
DEFAULT_PROXY_URL: Final[str] = DEFAULT_BASE_URL.rstrip("/")


def _version() -> str:
    return __version__


#: Domains reserved for documentation and tests (RFC 2606, RFC 6761): no one's mailbox.
_RESERVED: Final = ("example", "test", "invalid", "localhost", "local")
_MAILBOX: Final = re.compile(r"[^@\s<>(),;:\"\[\]\\]+@([A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                             r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+)")


def check_contact(contact: object) -> str | None:
    """A contact address as given, or ``ValueError`` when it is no one's mailbox: not an
    address, or one at a domain kept for documentation (``you@example.org``). The agencies
    count requests per address (Crossref puts a client in its polite pool by it) and block
    addresses that keep failing: two teams behind one placeholder would share one limit and
    one block. Empty text is no contact (None)."""
    if not isinstance(contact, str):
        raise ValueError(f"contact must be an e-mail address, not {contact!r}")
    text = contact.strip()
    if not text:
        return None
    found = _MAILBOX.fullmatch(text)
    domain = found.group(1).lower() if found else ""
    labels = domain.split(".")
    if not found:
        raise ValueError(
            f"contact {text!r} is not an e-mail address (name@domain.tld): give your team's "
            "address, which the agencies' operators can write to, or leave it out (the "
            "agencies' public pools, slower)")
    if (labels[-1] in _RESERVED or domain in ("example.com", "example.org", "example.net")
            or ("example" in labels[-2:-1] and labels[-1] in ("com", "org", "net"))):
        raise ValueError(
            f"contact {text!r} is a placeholder ({domain} is kept for documentation): the "
            "agencies count requests per address and block addresses that keep failing, so "
            "every copy of it would share one limit; give your team's address, or leave it "
            "out (the agencies' public pools, slower)")
    return text


@dataclass(frozen=True)
class ResolverConfig:
    """Knobs of :func:`airflow_doi.resolver.aresolve`; every field has a polite default."""

    #: The only host ever contacted; redirects are never followed.
    base_url: str = DEFAULT_PROXY_URL
    #: Requests per second, spaced evenly (the sum over all processes when ``redis_url`` is
    #: set).
    rate: float = 3.0
    #: How many requests may leave back to back (1: each ``1 / rate`` after the last).
    burst: int = 1
    #: Requests in flight at most.
    concurrency: int = 4
    #: Seconds per request (connect + read).
    timeout: float = 10.0
    #: Contact address named in the User-Agent, so the proxy operator can reach a bad client.
    contact: str | None = None
    #: ``redis://host:port/db``: share the pace with every process using the same URL.
    redis_url: str | None = None
    #: Namespace of the shared limit; defaults to one per proxy host.
    redis_namespace: str | None = None
    #: With ``redis_url``: a Redis key counting every request sent, by every process that
    #: names it, in the step that lets the request leave (the provider names it after the
    #: task, so a try killed mid-batch still has its requests counted).
    request_count_key: str | None = None
    #: Retry budget per DOI: attempts, including the first.
    max_attempts: int = 6
    #: First backoff (seconds); it doubles per attempt, plus up to the same again as jitter.
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    #: A ``Retry-After`` longer than this is capped (a broken header must not stall a batch).
    retry_after_max: float = 300.0
    #: Consecutive failed requests (5xx, 429, 403, timeouts, drops) that open the breaker.
    breaker_threshold: int = 5
    #: First pause while the breaker is open; doubles after each failed probe.
    breaker_cooldown: float = 2.0
    breaker_cooldown_max: float = 60.0
    #: After the proxy has kept failing this long, every unfinished DOI ends as ``error``.
    breaker_give_up: float = 120.0
    #: How long a ``not_found`` (or value-less) answer is trusted by the cache, in seconds
    #: (capped at ten years, like every ttl the proxy sends).
    negative_ttl: float = 3600.0
    #: Keys allowed to wait on backoff at once, per request slot (bounds memory and tasks).
    pending_per_slot: int = 8
    #: ``type=`` and ``index=`` filters of the REST API (values matching any are returned).
    types: tuple[str, ...] = field(default=())
    indexes: tuple[int, ...] = field(default=())
    #: Ask the proxy to bypass its own cache (``auth``); the local cache still applies.
    auth: bool = False
    #: Ask each key's URL (its handle record). False: existence only, from doi.org's Which
    #: RA? (about 50 DOIs a request): ``registered`` with the agency, or ``not_found``; a
    #: later run with URLs asks the handles of the registered keys. Either way, a key Which
    #: RA? says does not exist is ``not_found`` without a handle request.
    urls: bool = True
    #: With URLs too: ask Which RA? first, many DOIs a request, which keys exist (and who
    #: registered them): the keys that do not are ``not_found`` at once, no handle request
    #: each (about one request in fifty more, where few keys are missing).
    existence_first: bool = False

    def __post_init__(self) -> None:
        # Values also arrive from Airflow connection extras, so every message names the field
        # and the offending value: a bad setting must fail here, not hang a batch later.
        if not isinstance(self.base_url, str):
            raise ValueError(f"base_url must be an http(s) URL, not {self.base_url!r}")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http(s) URL, not {self.safe_base_url!r}")
        if parts.query or parts.fragment:
            raise ValueError("base_url must not carry a query or a fragment")
        for name in _COUNTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be an integer of at least 1, not {value!r}")
        for name in _POSITIVE:
            value = _number(name, getattr(self, name))
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number above 0, not {value!r}")
        for name in _FINITE:
            value = _number(name, getattr(self, name))
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number of at least 0, not {value!r}")
        for name in _NON_NEGATIVE:
            value = _number(name, getattr(self, name))
            if not value >= 0:  # also refuses NaN
                raise ValueError(f"{name} must be a number of at least 0, not {value!r}")
        if self.contact is not None:
            object.__setattr__(self, "contact", check_contact(self.contact))
        if isinstance(self.types, str) or isinstance(self.indexes, (str, int)):
            raise TypeError("types and indexes are tuples")

    def __repr__(self) -> str:
        # The dataclass repr would print credentials of base_url/redis_url into task logs.
        shown = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        shown["base_url"] = self.safe_base_url
        if self.redis_url is not None:
            shown["redis_url"] = redact_url(self.redis_url)
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    @property
    def safe_base_url(self) -> str:
        """``base_url`` without credentials: the form for logs and error messages."""
        return redact_url(self.base_url)

    @property
    def user_agent(self) -> str:
        contact = f"; mailto:{self.contact}" if self.contact else ""
        return f"airflow-doi/{_version()} (+https://pypi.org/project/airflow-doi/{contact})"

    @property
    def root(self) -> str:
        """The base URL without a trailing slash: request paths are appended to it."""
        return self.base_url.rstrip("/")

    @property
    def limit_namespace(self) -> str:
        """Where the shared limit lives in Redis: one bucket per proxy host by default."""
        return self.redis_namespace or f"airflow-doi:{urlsplit(self.safe_base_url).netloc}"

    @property
    def query(self) -> str:
        """The encoded query string of a handles request (``""`` when unfiltered)."""
        params = [f"type={quote(t, safe='')}" for t in self.types]
        params += [f"index={int(i)}" for i in self.indexes]
        if self.auth:
            params.append("auth")
        return "&".join(params)

    def replace(self, **overrides: Any) -> ResolverConfig:
        """A copy with some fields changed; unknown names are a ``TypeError`` (typos)."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"unknown resolver option(s): {', '.join(unknown)}")
        if "types" in overrides and overrides["types"] is not None:
            overrides["types"] = tuple(overrides["types"])
        if "indexes" in overrides and overrides["indexes"] is not None:
            overrides["indexes"] = tuple(int(i) for i in overrides["indexes"])
        return dataclasses.replace(self, **overrides)
