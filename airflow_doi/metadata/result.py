"""What an enrichment produces: one :class:`MetadataResult` per input value, and its stats.

Kept free of aiohttp, like :mod:`airflow_doi.resolver.result`, so the provider and the CLI
writer can import the types without the network machinery.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from airflow_doi.metadata.csl import FIELDS, describe_ignored, kept_json, typed_fields
from airflow_doi.metadata.sources import SourceCounts, SourceHealth
from airflow_doi.resolver.result import ResolverStats, iso_text

__all__ = [
    "METADATA_COLUMNS", "METADATA_STATUSES", "UNKEPT_STATUSES", "MetadataResult", "MetadataStats",
    "record_result",
]

#: Every status a key can end in, in report order: ``ok`` (a CSL record), ``not_found`` (no
#: such DOI), ``no_metadata`` (the agency offers no CSL-JSON for it: 406/415/204, or the proxy
#: sent us to a landing page), ``not_in_snapshot`` (``source="snapshot"``: the data files hold
#: no record of it, and no API was asked; never cached), ``invalid`` (never sent; only in the
#: CLI's output: a cell that is not a DOI) and ``error`` (the reason is kept; never cached, so
#: asked again next run).
METADATA_STATUSES: Final[tuple[str, ...]] = (
    "ok", "not_found", "no_metadata", "not_in_snapshot", "invalid", "error",
)
#: The statuses that are never kept (cached, stored by key): asked again next run.
UNKEPT_STATUSES: Final = frozenset({"error", "not_in_snapshot"})
#: Columns after the typed fields, in table order.
_TAIL: Final[tuple[str, ...]] = (
    "source_host", "agency", "metadata_source", "error", "attempts", "http_status",
    "fetched_at", "expires_at", "csl_json",
)
#: Output columns of :meth:`MetadataResult.as_row`, in order.
METADATA_COLUMNS: Final[tuple[str, ...]] = (
    "input", "doi", "key", "metadata_status", *FIELDS, *_TAIL,
)


@dataclass(frozen=True)
class MetadataResult:
    """The registry metadata of one input value.

    The typed fields (``title`` ... ``update_to``) are those of
    :func:`airflow_doi.metadata.csl.typed_fields`, empty unless ``metadata_status`` is ``ok``.
    ``error`` is the reason of an ``error``/``no_metadata`` key, or a note on an ``ok`` one
    (fields of an unexpected type, a CSL record too large to keep). ``source_host`` is the
    host the record came from, ``agency`` who registered the DOI (as doi.org's Which RA?
    names it, when it was asked), ``metadata_source`` how the record was asked
    (``crossref``, ``datacite``: their batch APIs; ``negotiation``; ``which_ra``: the agency
    lookup said the DOI does not exist); ``csl_json`` the record as stored, as CSL-JSON
    (without references).
    """

    input: object
    doi: str | None
    key: str | None
    metadata_status: str
    fields: dict[str, Any] | None = None
    source_host: str | None = None
    error: str | None = None
    attempts: int = 0
    http_status: int | None = None
    fetched_at: datetime | None = None
    expires_at: datetime | None = None
    csl_json: str | None = None
    cached: bool = False
    agency: str | None = None
    metadata_source: str | None = None

    def __getattr__(self, name: str) -> Any:
        # The typed fields read as attributes too: result.title, result.year ...
        if name in FIELDS:
            fields = self.__dict__.get("fields")
            return fields.get(name) if fields else None
        raise AttributeError(name)

    def as_row(self) -> dict[str, object]:
        """The :data:`METADATA_COLUMNS` of this result; datetimes as ISO 8601 strings."""
        # The typed fields read through __getattr__, like the other columns.
        row = {name: getattr(self, name) for name in METADATA_COLUMNS}
        row.update(fetched_at=iso_text(self.fetched_at), expires_at=iso_text(self.expires_at))
        return row


def record_result(document: Mapping[str, Any], doi: str, key: str, *, max_csl_bytes: int,
                  fetched_at: datetime, expires_at: datetime, source_host: str | None = None,
                  attempts: int = 0, http_status: int | None = None,
                  agency: str | None = None, metadata_source: str | None = None,
                  registry_type: str | None = None) -> MetadataResult:
    """The ``ok`` result of a CSL-JSON record, whichever source sent it (content negotiation,
    a batch API's record, a data file's record): its typed columns, the record as kept in
    ``csl_json``, a note for fields of an unexpected type or a record too large to keep; an
    ``error`` when the record cannot be read at all (its key, never the batch).
    ``registry_type``: the registry's own word for the type, where the source says it."""
    try:
        fields, ignored = typed_fields(document, registry_type)
        kept = kept_json(document, max_csl_bytes)
    except Exception as error:  # a record no rule foresaw
        return MetadataResult(
            None, doi, key, "error", None, source_host,
            f"the CSL-JSON record could not be read ({type(error).__name__})", attempts,
            http_status, fetched_at, agency=agency, metadata_source=metadata_source)
    notes = [describe_ignored(ignored)]
    if kept is None:
        notes.append(f"CSL-JSON over {max_csl_bytes} bytes not kept in csl_json")
    note = "; ".join(n for n in notes if n) or None
    return MetadataResult(None, doi, key, "ok", fields, source_host, note, attempts, http_status,
                          fetched_at, expires_at, kept, agency=agency,
                          metadata_source=metadata_source)


@dataclass
class MetadataStats(ResolverStats):
    """The counters of one enrichment (the resolver's, by metadata status), and the keys and
    requests of each source (:class:`~airflow_doi.metadata.sources.SourceCounts`)."""

    statuses = METADATA_STATUSES
    sources: SourceCounts = field(default_factory=SourceCounts)
    #: What the run learned of the batch APIs, kept across its calls (pass one to each).
    source_health: SourceHealth = field(default_factory=SourceHealth)
    #: The data files' scan (:class:`~airflow_doi.metadata.snapshot.scan.ScanStats`), when
    #: the run read any; and the keys it left to the APIs.
    snapshot: Any = None
    snapshot_keys: int = 0
    left_to_apis: int = 0
    #: The update streams' harvest (:class:`~airflow_doi.metadata.updates.StreamState` by
    #: source), and why it stopped before its end (None: it did not).
    updates: dict[str, Any] = field(default_factory=dict)  # by source name
    updates_error: str | None = None

    def summary(self) -> str:
        """The resolver's summary line, and what each source answered and cost."""
        line = super().summary()
        by_source = self.sources.summary()
        return f"{line}; {by_source}" if by_source else line
