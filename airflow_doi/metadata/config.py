"""The knobs of an enrichment: the resolver's, plus the metadata hosts and their own limits.

Content negotiation is two requests per DOI: the proxy answers with a redirect to the
registration agency's metadata service, which sends the CSL-JSON. Each host has its own
rate limit (``rate`` for the proxy, ``agency_rate`` for each agency host), its own breaker and
its own shared pace in Redis. Only the proxy and the hosts of ``metadata_hosts`` are ever
contacted; a redirect anywhere else is not followed.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import os
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any, Final
from urllib.parse import urlsplit

from airflow_doi.resolver.config import ResolverConfig, redact_url

__all__ = [
    "CROSSREF_POOLS", "CROSSREF_URL", "DATACITE_URL", "DEFAULT_METADATA_HOSTS", "MAX_LIST_SIZE",
    "SOURCES", "MetadataConfig", "origin_of", "since_text",
]

#: Crossref's REST API and DataCite's, where their batch lookups are asked.
CROSSREF_URL: Final = "https://api.crossref.org"
DATACITE_URL: Final = "https://api.datacite.org"
#: Where a key's record may come from (:attr:`MetadataConfig.source`).
SOURCES: Final[tuple[str, ...]] = ("auto", "negotiation", "snapshot")
#: Crossref's pools since December 2025: (single requests, list queries) a second. A contact
#: address (``mailto``) puts a client in the polite pool; the answers name it (``x-api-pool``).
CROSSREF_POOLS: Final[dict[str, tuple[float, float]]] = {
    "public": (5.0, 1.0), "polite": (10.0, 3.0),
}
#: DOIs one list query may name at most.
MAX_LIST_SIZE: Final = 100

#: The registration agencies' content negotiation services (https only), as documented by
#: Crossref, DataCite (crosscite.org) and mEDRA. Other agencies' hosts can be added.
DEFAULT_METADATA_HOSTS: Final[tuple[str, ...]] = (
    "api.crossref.org",
    "data.crossref.org",
    "api.datacite.org",
    "data.datacite.org",
    "data.crosscite.org",
    "data.medra.org",
)


def since_text(value: str | date | datetime) -> str:
    """A harvest's start as the agencies' filters take it: ``YYYY-MM-DD`` (UTC); raises
    ``ValueError`` for anything else."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return moment.astimezone(timezone.utc).date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    text = str(value).strip()
    try:
        return date.fromisoformat(text[:10]).isoformat()
    except ValueError:
        raise ValueError(f"updates since {value!r}: not a date (YYYY-MM-DD)") from None


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of an absolute http(s) URL (lower case, no credentials, the
    default port left out), or None."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    default = 443 if scheme == "https" else 80
    return f"{scheme}://{host}" + (f":{port}" if port and port != default else "")


def _allowed_origin(entry: str) -> str:
    """An allowlist entry as an origin: a bare host name means https on its default port."""
    text = entry.strip()
    url = text if "://" in text else f"https://{text}"
    origin = origin_of(url)
    if origin is None or urlsplit(url).path not in ("", "/"):
        raise ValueError(
            f"metadata_hosts: {redact_url(entry)!r} is not a host name (api.crossref.org) or "
            "an origin (http://127.0.0.1:8080)"
        )
    if "@" in text:
        raise ValueError("metadata_hosts: an entry must not carry credentials")
    return origin


@dataclass(frozen=True, repr=False)  # the resolver's repr hides credentials
class MetadataConfig(ResolverConfig):
    """:class:`ResolverConfig` (``rate`` and ``burst`` are the proxy's) plus:"""

    #: Requests per second to each agency host (the sum over processes with ``redis_url``);
    #: None: Crossref's pool's for Crossref's hosts (:data:`CROSSREF_POOLS`), 2 elsewhere.
    agency_rate: float | None = None
    agency_burst: int = 1
    #: Hosts a redirect may lead to: bare names (https only) or ``http(s)://host:port``.
    metadata_hosts: tuple[str, ...] = DEFAULT_METADATA_HOSTS
    #: Seconds an ``ok`` record is trusted (30 days); ``not_found`` and ``no_metadata``
    #: answers are trusted ``negative_ttl``.
    metadata_ttl: float = 30 * 86400.0
    #: Redirects followed at most (doi.org sends one to the agency).
    max_redirects: int = 2
    #: Largest ``csl_json`` kept, in UTF-8 bytes (the typed columns are kept whatever the size).
    max_csl_bytes: int = 65536
    #: Where each key's record comes from: ``auto``, its agency's batch API where there is one
    #: (Crossref's list queries, DataCite's ``/dois``; see :mod:`airflow_doi.metadata.sources`),
    #: else content negotiation; ``negotiation``: content negotiation for every key.
    source: str = "auto"
    #: Crossref's REST API and DataCite's: the batch sources (on the allowlist by default).
    crossref_url: str = CROSSREF_URL
    datacite_url: str = DATACITE_URL
    #: List queries per second to each batch API (all processes together with ``redis_url``),
    #: and how many at once: lower than single requests, as the agencies ask. Lowered at once
    #: to what a server announces (``x-rate-limit-limit`` / ``x-rate-limit-interval``). None:
    #: Crossref's pool's for Crossref's API (:data:`CROSSREF_POOLS`), 1 elsewhere.
    list_rate: float | None = None
    list_concurrency: int = 1
    #: DOIs per list query (at most 100), and the longest URL a query may have.
    list_size: int = 50
    max_url_length: int = 4000
    #: The agencies' public data files to read first (:mod:`airflow_doi.metadata.snapshot`):
    #: Crossref's tar or JSON-lines files, DataCite's tar, or folders of them. Every key they
    #: hold is answered from them; the others go to the APIs, unless ``source="snapshot"``.
    snapshot: tuple[str, ...] = ()
    #: Processes reading the data files at once (0: one per core).
    snapshot_workers: int = 0
    #: Harvest the agencies' update streams first (:mod:`airflow_doi.metadata.updates`): every
    #: record changed since this date (``YYYY-MM-DD``), or ``"auto"``: since the last harvest
    #: the cache (or the operator's table) recorded, else since the data files' date. None:
    #: no harvest.
    updates_since: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, not {self.source!r}")
        snapshot: Any = self.snapshot
        if isinstance(snapshot, (str, os.PathLike)):
            snapshot = (snapshot,)
        if not isinstance(snapshot, (tuple, list)) or not all(
                isinstance(p, (str, os.PathLike)) and os.fspath(p) for p in snapshot):
            raise ValueError(f"snapshot must be paths of data files or folders, not "
                             f"{snapshot!r}")
        object.__setattr__(self, "snapshot", tuple(os.fspath(p) for p in snapshot))
        if self.source == "snapshot" and not self.snapshot:
            raise ValueError("source 'snapshot' answers from the data files alone: name at "
                             "least one (snapshot)")
        if self.updates_since is not None and self.updates_since != "auto":
            day = since_text(self.updates_since)
            if day > datetime.now(timezone.utc).date().isoformat():
                raise ValueError(f"updates_since {day} is in the future: nothing has changed "
                                 "since then yet; give a past day, or 'auto'")
            object.__setattr__(self, "updates_since", day)
        workers = self.snapshot_workers
        if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 0:
            raise ValueError(f"snapshot_workers must be an integer of at least 0 (0: one per "
                             f"core), not {workers!r}")
        for name in ("crossref_url", "datacite_url"):
            url = getattr(self, name)
            if not isinstance(url, str) or origin_of(url) is None or "@" in url:
                raise ValueError(f"{name} must be an http(s) URL without credentials, not "
                                 f"{redact_url(str(url))!r}")
        if isinstance(self.metadata_hosts, str):
            object.__setattr__(self, "metadata_hosts", tuple(
                h.strip() for h in self.metadata_hosts.split(",") if h.strip()))
        if not isinstance(self.metadata_hosts, tuple):
            object.__setattr__(self, "metadata_hosts", tuple(self.metadata_hosts))
        if not self.metadata_hosts:
            raise ValueError(
                "metadata_hosts is empty: every DOI would end as no_metadata; leave it out for "
                "the agencies' own hosts, or name at least one host")
        for entry in self.metadata_hosts:
            if not isinstance(entry, str):
                raise ValueError(f"metadata_hosts: {entry!r} is not a host name")
            _allowed_origin(entry)
        value: Any
        for name in ("agency_rate", "metadata_ttl", "list_rate"):
            value = getattr(self, name)
            if value is None and name != "metadata_ttl":
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
                    math.isfinite(float(value)) and float(value) > 0):
                raise ValueError(f"{name} must be a finite number above 0, not {value!r}")
        for name, low in (("agency_burst", 1), ("max_redirects", 0), ("max_csl_bytes", 1),
                          ("list_concurrency", 1), ("list_size", 1), ("max_url_length", 200)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
                raise ValueError(f"{name} must be an integer of at least {low}, not {value!r}")
        if self.list_size > MAX_LIST_SIZE:
            raise ValueError(f"list_size must be at most {MAX_LIST_SIZE}, not {self.list_size}")

    @property
    def pool(self) -> str:
        """The pool of Crossref's this configuration puts the client in: ``polite`` with a
        contact address, else ``public``."""
        return "polite" if self.contact else "public"

    def is_crossref(self, origin: str) -> bool:
        """Whether an origin is Crossref's API (its own hosts, or ``crossref_url``)."""
        return origin == origin_of(self.crossref_url) or urlsplit(origin).hostname in (
            "api.crossref.org", "data.crossref.org")

    def pool_rate(self, origin: str, listing: bool) -> float:
        """The default pace of a host: Crossref's pool's (single records, list queries),
        elsewhere 2 single records and 1 list query a second."""
        if self.is_crossref(origin):
            single, lists = CROSSREF_POOLS[self.pool]
            return lists if listing else single
        return 1.0 if listing else 2.0

    @property
    def allowed_origins(self) -> frozenset[str]:
        """The origins a redirect may lead to: the allowlist and the proxy itself."""
        proxy = origin_of(self.base_url)
        listed = {_allowed_origin(entry) for entry in self.metadata_hosts}
        return frozenset(listed | ({proxy} if proxy else set()))

    def batch_origin(self, url: str) -> str | None:
        """The origin of a batch API (``crossref_url``, ``datacite_url``) when it is on the
        allowlist (a request goes only to a host the configuration allows), else None: its
        keys are then asked by content negotiation."""
        origin = origin_of(url)
        return origin if origin in self.allowed_origins else None

    def host_config(self, origin: str, kind: str = "") -> ResolverConfig:
        """The limits of one host and kind of request: the proxy's own, ``agency_rate`` for
        an agency host's single records, ``list_rate`` and ``list_concurrency`` for its list
        queries (``kind="list"``), with a shared pace of its own in Redis."""
        if origin == origin_of(self.base_url) and not kind:
            return self
        netloc = urlsplit(origin).netloc
        listing = kind == "list"
        rate = self.list_rate if listing else self.agency_rate
        if rate is None:
            rate = self.pool_rate(origin, listing)
        # One pace per host and address: the agencies count per contact address, so two
        # teams (two addresses) sharing one Redis keep a pace each, and one team one.
        who = (hashlib.sha256(self.contact.lower().encode()).hexdigest()[:12]
               if self.contact else "public")
        return ResolverConfig(
            base_url=origin, rate=rate,
            burst=1 if listing else self.agency_burst,
            concurrency=self.list_concurrency if listing else self.concurrency,
            timeout=self.timeout, contact=self.contact,
            redis_url=self.redis_url, redis_namespace=f"airflow-doi:{netloc}:{who}",
            request_count_key=self.request_count_key,
            max_attempts=self.max_attempts, backoff_base=self.backoff_base,
            backoff_max=self.backoff_max, retry_after_max=self.retry_after_max,
            breaker_threshold=self.breaker_threshold, breaker_cooldown=self.breaker_cooldown,
            breaker_cooldown_max=self.breaker_cooldown_max,
            breaker_give_up=self.breaker_give_up,
        )
