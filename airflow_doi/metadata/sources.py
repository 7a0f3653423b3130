"""Per key, the fastest polite source: an agency's batch API, else content negotiation.

Content negotiation costs two requests a key (the proxy's redirect, then the agency's record).
Crossref and DataCite, who register most DOIs, answer many DOIs in one request:

* Crossref's list query, ``GET /works?filter=doi:A,doi:B,...`` (:mod:`.crossref`);
* DataCite's batch lookup, ``GET /dois?query=doi:("A" OR "B" ...)`` (:mod:`.datacite`).

So an enrichment asks doi.org's Which RA? (up to 50 DOIs a request) who registered each key it
does not know the agency of, asks Crossref's keys and DataCite's in lists of ``list_size``, and
every other agency's (mEDRA, JaLC, KISTI, CNKI, OP...) by content negotiation. A key a list
answer leaves out is asked by content negotiation too: a batch's silence never makes a key
``not_found``; only the proxy says that (Which RA?'s "DOI does not exist", or a 404). Each list
query goes through its host's gate for list queries (:class:`MetadataClient`: a pace and a
concurrency cap of its own, lowered to what the server announces, ``Retry-After``, backoff on
429 and 503), and a record is read into the same typed columns whichever source sent it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from airflow_doi.metadata import crossref, datacite
from airflow_doi.resolver.limits import PaceState
from airflow_doi.resolver.text import server_text
from airflow_doi.words import plural

__all__ = [
    "BATCH_SOURCES",
    "NEGOTIATION",
    "SNAPSHOT",
    "WHICH_RA",
    "BatchSource",
    "SourceCount",
    "SourceCounts",
    "SourceHealth",
    "agency_of_host",
    "batch_source_for",
    "group_by_source",
    "registry_type_for",
]

#: The name of content negotiation in counts and in the ``metadata_source`` column.
NEGOTIATION: Final = "negotiation"
#: ``source="snapshot"``: the agencies' data files alone, no request at all.
SNAPSHOT: Final = "snapshot"
#: The name of the agency lookups (doi.org's Which RA?) in counts, and the ``metadata_source``
#: of a key they found does not exist.
WHICH_RA: Final = "which_ra"


@dataclass(frozen=True)
class BatchSource:
    """One agency's batch API: how its requests are written and its answers read."""

    #: Its name in counts and in ``metadata_source`` (``crossref``, ``datacite``).
    name: str
    #: What doi.org's Which RA? calls the agency.
    agency: str
    #: The :class:`~airflow_doi.metadata.config.MetadataConfig` field holding its URL.
    url_field: str
    #: The media type asked for.
    accept: str
    batches: Callable[..., list[list[str]]]
    list_url: Callable[..., str]
    read: Callable[[bytes], list[Any]]
    doi_of: Callable[[object], str | None]
    csl_of: Callable[[Mapping[str, Any]], dict[str, Any]]
    #: Its update stream: a page's URL (``base, since, cursor, rows, contact``) and its
    #: ``(records, next cursor, total)``.
    updates_url: Callable[..., str]
    read_updates: Callable[[bytes], tuple[list[Any], str | None, int | None]]
    #: The registry's own word for a record's type (Crossref's type, DataCite's
    #: resourceTypeGeneral): the ``registry_type`` column.
    registry_type_of: Callable[[Mapping[str, Any]], str | None]
    #: Whether a DOI can be put in one of its requests.
    accepts: Callable[[str], bool] = lambda doi: True

    @property
    def updates_name(self) -> str:
        """The ``metadata_source`` of a record its update stream sent."""
        return f"{self.name}_updates"


BATCH_SOURCES: Final[tuple[BatchSource, ...]] = (
    BatchSource("crossref", "Crossref", "crossref_url", "application/json",
                crossref.list_batches, crossref.list_url, crossref.read_items,
                crossref.item_doi, crossref.csl_of_item, crossref.updates_url,
                crossref.read_updates, crossref.registry_type_of, crossref.listable),
    BatchSource("datacite", "DataCite", "datacite_url", "application/vnd.api+json",
                datacite.list_batches, datacite.list_url, datacite.read_records,
                datacite.record_doi, datacite.csl_of_record, datacite.updates_url,
                datacite.read_updates, datacite.registry_type_of),
)
_BY_AGENCY: Final[dict[str, BatchSource]] = {s.agency.lower(): s for s in BATCH_SOURCES}


def registry_type_for(word: object, agency: str | None) -> str | None:
    """The registry's own word for a type, from the type word of a content negotiation answer
    and the agency that registered the DOI: Crossref's name (most of its answers carry it; a
    CSL type is named back), DataCite's resourceTypeGeneral, any other agency's word as
    sent."""
    if not isinstance(word, str) or not word.strip():
        return None
    kind = word.strip()
    source = batch_source_for(agency)
    if source is not None and source.name == "crossref" and kind not in crossref.CROSSREF_TYPES:
        return crossref.CSL_TO_CROSSREF.get(kind, kind)
    if source is not None and source.name == "datacite":
        return datacite.CSL_TO_RESOURCE_TYPE.get(kind, kind)
    return kind


#: The agencies' own metadata hosts, by the agency Which RA? names.
_HOSTS: Final[dict[str, str]] = {
    "api.crossref.org": "Crossref", "data.crossref.org": "Crossref",
    "api.datacite.org": "DataCite", "data.datacite.org": "DataCite",
    "data.crosscite.org": "DataCite", "data.medra.org": "mEDRA",
}


def agency_of_host(host: str | None, config: Any) -> str | None:
    """The agency whose metadata host ``host`` (``host[:port]``) is: its own hosts, or the
    configuration's ``crossref_url`` / ``datacite_url`` (a mirror, a simulator); None for any
    other."""
    if not host:
        return None
    for source in BATCH_SOURCES:
        url = getattr(config, source.url_field, None)
        if isinstance(url, str) and urlsplit(url).netloc.rpartition("@")[2] == host:
            return source.agency
    return _HOSTS.get(host.lower())


def batch_source_for(agency: str | None) -> BatchSource | None:
    """The batch API of an agency as Which RA? names it (any case), or None."""
    return _BY_AGENCY.get(agency.strip().lower()) if isinstance(agency, str) else None


@dataclass
class SourceCount:
    """What one source did in a run: keys it answered, requests it cost, and how many of its
    asks (a key's negotiation, a list query, a Which RA? or update stream request, retries
    and all) got an HTTP answer of any kind; and for Which RA?, the keys whose agency an
    earlier run's answer in the cache gave, unasked."""

    keys: int = 0
    requests: int = 0
    answered: int = 0
    cached: int = 0


@dataclass
class SourceCounts:
    """Keys and requests by source (``crossref``, ``datacite``, ``negotiation``, and
    ``which_ra``: the agency lookups, which answer no key themselves)."""

    counts: dict[str, SourceCount] = field(default_factory=dict)

    def add(self, source: str, *, keys: int = 0, requests: int = 0, answered: int = 0,
            cached: int = 0) -> None:
        count = self.counts.setdefault(source, SourceCount())
        count.keys += keys
        count.requests += requests
        count.answered += answered
        count.cached += cached

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {name: {"keys": c.keys, "requests": c.requests}
                for name, c in self.counts.items()}

    def summary(self) -> str:
        """``crossref 700 keys in 14 requests, ...`` (the order the sources were used); a
        source whose requests all went unanswered says so (``Which RA? 5 requests, none
        answered``), and one whose keys were never sent (the proxy given up on before their
        turn) too (``negotiation 20 keys, none sent``)."""
        parts = []
        for name, count in self.counts.items():
            if name.endswith("_snapshot") or name == SNAPSHOT:  # read from a file: no request
                parts.append(f"{name} {plural(count.keys, 'key')}")
                continue
            if name == WHICH_RA:
                part = f"Which RA? {plural(count.requests, 'request')}"
                if count.cached:
                    part += f" ({plural(count.cached, 'agency', 'agencies')} from the cache)"
            elif not count.requests and count.keys:
                part = f"{name} {plural(count.keys, 'key')}, none sent"
            else:
                part = (f"{name} {plural(count.keys, 'key')} in "
                        f"{plural(count.requests, 'request')}")
            parts.append(part + (", none answered" if count.requests and not count.answered
                                 else ""))
        return "; ".join(parts)


@dataclass
class SourceHealth:
    """What a run learned of the batch APIs, kept across its calls (an operator's batches): the
    ones that answered, and the ones it gave up on (why). A batch API given up on is not sent
    another query in the run: its keys are asked by content negotiation."""

    answered: set[str] = field(default_factory=set)
    given_up: dict[str, str] = field(default_factory=dict)
    #: Where each host's pace stood when a call ended, by (origin, kind of request): the next
    #: call goes on from it (a batch's first list query no sooner than the pace allows, at a
    #: limit a server announced), not from a fresh pace.
    paces: dict[tuple[str, str], PaceState] = field(default_factory=dict)
    #: The pool each host said it put the client in (``x-api-pool``: Crossref's ``polite``
    #: or ``public``), and its limit as announced (``x-rate-limit-limit`` per interval, and
    #: ``x-rate-limit-type``), by host.
    pools: dict[str, str] = field(default_factory=dict)

    def heard(self, host: str, headers: Mapping[str, str]) -> None:
        """Keep what a host's answer says of the pool and limit the client is in."""
        pool = headers.get("x-api-pool")
        if not pool:
            return
        said = server_text(pool.strip(), 40)  # a note repeats it: safe text (resolver.text)
        limit, interval = headers.get("x-rate-limit-limit"), headers.get("x-rate-limit-interval")
        if limit and interval:
            said += f", {server_text(limit.strip(), 12)} per {server_text(interval.strip(), 12)}"
        kind = headers.get("x-rate-limit-type")
        if kind:
            said += f" ({server_text(kind.strip(), 40)})"
        self.pools[host] = said

    def failed(self, source: str, answered: bool, gave_up: str | None, error: str) -> None:
        """A query of ``source`` failed: given up on when its breaker gave up, or when none of
        its queries was ever answered in the run (unreachable: each call would otherwise
        spend its retries on it again)."""
        if answered:
            self.answered.add(source)
        if gave_up is None and source not in self.answered:
            gave_up = f"no list query was ever answered ({error})"
        if gave_up is not None:
            self.given_up.setdefault(source, gave_up)


def group_by_source(todo: Mapping[str, str], agencies: Mapping[str, str | None],
                    usable: Sequence[BatchSource]) -> tuple[dict[str, dict[str, str]],
                                                            dict[str, str]]:
    """``todo`` (key -> DOI) split into the keys of each usable batch source (by name) and the
    rest (content negotiation)."""
    by_source: dict[str, dict[str, str]] = {source.name: {} for source in usable}
    names = {source.name for source in usable}
    rest: dict[str, str] = {}
    for key, doi in todo.items():
        source = batch_source_for(agencies.get(key))
        if source is not None and source.name in names and source.accepts(doi):
            by_source[source.name][key] = doi
        else:
            rest[key] = doi
    return by_source, rest
