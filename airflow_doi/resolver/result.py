"""What a resolution produces: result rows, the answer fields, progress events and stats.

One :class:`ResolutionResult` per input row; :class:`AnswerFields` are the fields it shares
with the proxy's answer and the answer's cache row; :class:`ProgressEvent` and
:class:`ResolverStats` report on the batch.

Kept free of aiohttp so that consumers (the Airflow provider, the CLI writer) can import the
types without starting any network machinery.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, ClassVar, Final

from airflow_doi.words import plural

__all__ = [
    "COLUMNS",
    "MAX_TTL_SECONDS",
    "STATUSES",
    "AnswerFields",
    "ProgressEvent",
    "ResolutionResult",
    "ResolverStats",
    "answer_fields",
    "expires_after",
    "iso_text",
]

#: Every status a row can end in; ``error`` is the only one never cached.
#: ``registered``: the DOI exists (doi.org's Which RA? names its agency), its URL not asked
#: (an existence-only run, ``urls=False``).
STATUSES: Final[tuple[str, ...]] = (
    "resolved", "registered", "no_values", "not_found", "invalid", "error",
)
#: Output columns, in order (``values`` is kept on the object but not flattened into rows).
COLUMNS: Final[tuple[str, ...]] = (
    "input",
    "doi",
    "key",
    "status",
    "url",
    "response_code",
    "http_status",
    "attempts",
    "error",
    "resolved_at",
    "expires_at",
    "url_raw",
    "agency",
)


@dataclass(frozen=True, kw_only=True)
class AnswerFields:
    """The proxy's word on one handle, stated once: the fields that the answer it sends
    (:class:`~airflow_doi.resolver.client.Answer`), the answer's cache row
    (:class:`~airflow_doi.resolver.cache.CachedAnswer`) and a :class:`ResolutionResult` all
    carry. A field added here reaches all three (and must get its column in the cache's
    ``answers`` table)."""

    status: str
    url: str | None = None
    response_code: int | None = None
    http_status: int | None = None
    values: tuple[dict[str, Any], ...] = ()
    resolved_at: datetime | None = None
    expires_at: datetime | None = None
    #: Who registered the DOI, as doi.org's Which RA? names it (None: not asked).
    agency: str | None = None


#: The names of :class:`AnswerFields`, in order (read once: :func:`answer_fields` runs per key).
_ANSWER_NAMES: tuple[str, ...] = tuple(f.name for f in fields(AnswerFields))


def answer_fields(answer: AnswerFields) -> dict[str, Any]:
    """The :class:`AnswerFields` of ``answer`` by name, to build another record from it."""
    return {name: getattr(answer, name) for name in _ANSWER_NAMES}


#: Longest time any answer is trusted (10 years): a ttl of 1e12 seconds, an ISO date in the
#: year 9999 or a huge ``negative_ttl`` is capped here instead of overflowing ``datetime``.
MAX_TTL_SECONDS: Final = 10 * 365 * 86400


def expires_after(now: datetime, seconds: float) -> datetime:
    """``now + seconds``, clamped to ``[now, now + MAX_TTL_SECONDS]``; never raises.

    The proxy's ttl and the configured ``negative_ttl`` are untrusted numbers: infinity, 1e300
    or a date past year 9999 must become an expiry at the cap, not an ``OverflowError`` that
    takes the whole batch down.
    """
    if seconds != seconds:  # NaN says nothing: treat it as "already stale"
        seconds = 0.0
    seconds = min(max(0.0, seconds), float(MAX_TTL_SECONDS))
    try:
        return now + timedelta(seconds=seconds)
    except (OverflowError, ValueError):  # ``now`` itself is within 10 years of year 9999
        return datetime.max.replace(tzinfo=now.tzinfo)


def iso_text(when: datetime | None) -> str | None:
    """A row's time as ISO 8601 text (``None`` stays ``None``)."""
    return when.isoformat() if when else None


@dataclass(frozen=True)
class ResolutionResult(AnswerFields):
    """The outcome for one input value.

    ``attempts`` counts the requests sent for this key, whatever came of them (0 for an invalid
    value, or for a key that waited on a breaker that gave up before its turn); a cache hit
    keeps the count of the run that resolved it and sets ``cached``.
    ``url`` is only ever an absolute http(s) URL without control characters; ``url_raw`` is
    the handle's lowest-index URL value as the proxy sent it (see
    :mod:`airflow_doi.resolver.urls`). When that value is refused the row is ``no_values``
    with the reason in ``error``.
    ``resolved_at``/``expires_at`` are timezone-aware UTC; ``expires_at`` is when the cache
    stops trusting the answer (the smallest value ``ttl``, or the negative-cache ttl), never
    more than ten years after ``resolved_at`` (an absurd ttl is capped, not an error).
    """

    input: object
    doi: str | None
    key: str | None
    _: KW_ONLY  # the answer's fields (status, url...) and the rest go by name
    attempts: int = 0
    error: str | None = None
    url_raw: str | None = None
    cached: bool = False

    def as_row(self) -> dict[str, object]:
        """The :data:`COLUMNS` of this result; datetimes as ISO 8601 strings."""
        row = {name: getattr(self, name) for name in COLUMNS}
        row.update(resolved_at=iso_text(self.resolved_at), expires_at=iso_text(self.expires_at))
        return row


@dataclass
class ProgressEvent:
    """Reported after each distinct key finishes (and once at the start)."""

    done: int
    total: int
    rate: float
    retries: int
    eta_seconds: float | None


@dataclass
class ResolverStats:
    """Counters of one batch, filled in while it runs (pass one to ``aresolve(stats=...)``).

    The counters agree with the rows of the same run: over the distinct keys that were not
    cache hits (``cached=False``), ``requests == sum(attempts) + which_ra_requests`` (a Which
    RA? request speaks for many keys: a key it settles has no attempt of its own) and, without
    Which RA? retries, ``retries == sum(max(attempts - 1, 0))``: a retry is a request sent for
    a key that had already been asked, counted when it leaves (a backoff cut short by the
    breaker giving up is not a retry). ``by_status`` counts rows; :attr:`sent_rows` and
    :attr:`error_share` are what a caller needs to fail a run on too many ``error`` rows.
    """

    #: The statuses :meth:`summary` counts, in order (a subclass names its own).
    statuses: ClassVar[tuple[str, ...]] = STATUSES

    rows: int = 0
    keys: int = 0
    cache_hits: int = 0
    requests: int = 0
    retries: int = 0
    throttled: int = 0
    breaker_opens: int = 0
    elapsed: float = 0.0
    by_status: dict[str, int] = field(default_factory=dict)
    #: Why the breaker gave up on the proxy during the batch (None: it never did). Keys that
    #: were not answered before then ended ``error`` without an answer of their own.
    gave_up: str | None = None
    #: Set when it gave up because no request was ever answered (the proxy could not be
    #: reached at all): the last failure, e.g. ``could not connect to ... (connection
    #: refused)``.
    never_answered: str | None = None
    #: shortDOIs met (distinct), and the requests sent to expand them (also in ``requests``:
    #: they belong to no key of their own, so ``requests == sum(attempts) +
    #: short_doi_requests``).
    short_dois: int = 0
    short_doi_requests: int = 0
    #: Which RA? requests (many keys each: existence first), part of ``requests``.
    which_ra_requests: int = 0
    #: Whether the proxy has answered a request of this run (any HTTP answer). The batch sets
    #: it; a caller that resolves one run in several batches sets it before each later batch
    #: from the earlier ones', so that a proxy that dies between two batches is waited for
    #: ``breaker_give_up`` like one that dies mid-batch, not given up on at once.
    answered: bool = False

    @property
    def request_rate(self) -> float:
        """Requests sent per second of wall time."""
        return self.requests / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def sent_rows(self) -> int:
        """Rows that went to the proxy or the cache: every row that is not ``invalid``."""
        return sum(n for status, n in self.by_status.items() if status != "invalid")

    @property
    def error_share(self) -> float:
        """Share of :attr:`sent_rows` that ended ``error`` (0.0 when nothing was sent)."""
        sent = self.sent_rows
        return self.by_status.get("error", 0) / sent if sent else 0.0

    def summary(self) -> str:
        """The one-line summary the CLI prints at the end."""
        counts = " ".join(f"{s}={self.by_status.get(s, 0):,}" for s in self.statuses
                          if s != "registered" or self.by_status.get(s))
        shorts = (f"; {plural(self.short_dois, 'shortDOI')} looked up through the proxy "
                  f"({self.short_doi_requests:,} of the requests)" if self.short_dois else "")
        if self.which_ra_requests:
            shorts += (f"; {plural(self.which_ra_requests, 'Which RA? request')} (of the "
                       "requests) said which keys exist")
        return (
            f"{plural(self.rows, 'row')}, {plural(self.keys, 'distinct key')}: {counts}; "
            f"{plural(self.requests, 'request')} in {self.elapsed:.1f}s "
            f"({self.request_rate:,.1f}/s), {plural(self.retries, 'retry', 'retries')}, "
            f"{self.throttled:,} throttled, {plural(self.cache_hits, 'cache hit')}, "
            f"{plural(self.breaker_opens, 'breaker open')}{shorts}"
        )
