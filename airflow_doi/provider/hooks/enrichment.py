"""Enrichment into ``doi_metadata``: its table and its step of the due-keys engine.

DOI content negotiation (:mod:`airflow_doi.metadata`) for the due keys of a catalogue; one row
per comparison key (``doi_key`` primary key) with the :data:`~airflow_doi.metadata.METADATA_COLUMNS`
an enrichment keeps by key: ``metadata_status``, the typed fields (``title``, ``csl_type``,
``issued``, ``year``, ``container_title``, ``publisher``, ``issn``, ``isbn``, ``volume``,
``issue``, ``page``, ``author_count``, ``first_author``, ``language``, ``license_url``,
``updated_by``, ``update_to``), ``source_host``, ``error``, ``attempts``, ``http_status``,
``fetched_at``, ``expires_at`` and the record itself in ``csl_json`` (a JSON column on
PostgreSQL, DuckDB and MySQL/MariaDB). The engine behind
:class:`~airflow_doi.provider.operators.enrich.DoiEnrichOperator`, usable from plain Python
too.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_doi.db.statements import StatementDialect, sibling_table
from airflow_doi.metadata import METADATA_COLUMNS, MetadataResult, MetadataStats
from airflow_doi.metadata.client import LANDING
from airflow_doi.metadata.sources import BATCH_SOURCES, SourceHealth
from airflow_doi.provider.hooks.doi_proxy import requests_counted
from airflow_doi.provider.hooks.due_keys import (
    DueKeysOptions,
    DueKeysSummary,
    KeyStep,
    default_lease,
    process_due_keys,
)
from airflow_doi.provider.hooks.tables import TableShape, keyed_columns
from airflow_doi.provider.progress import TaskLog
from airflow_doi.resolver.config import redact_url

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook
    from typing_extensions import Unpack

    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook
    from airflow_doi.resolver import ProgressEvent, ResolverStats

__all__ = [
    "METADATA_SHAPE",
    "METADATA_TABLE",
    "METADATA_TABLE_COLUMNS",
    "enrich_due_keys",
    "enrichment_step",
    "ensure_metadata_table",
    "metadata_types",
]

#: The metadata table's default name, beside the catalogue.
METADATA_TABLE = "doi_metadata"
#: The columns of ``doi_metadata``, in order: the enrichment's by key (not the input cell).
METADATA_TABLE_COLUMNS: tuple[str, ...] = keyed_columns(METADATA_COLUMNS)
_INTEGERS = frozenset({"year", "author_count", "attempts", "http_status"})
_STAMPS = frozenset({"fetched_at", "expires_at"})


def metadata_types(dialect: StatementDialect) -> tuple[str, ...]:
    """SQL types of :data:`METADATA_TABLE_COLUMNS`, in order."""
    types = []
    for column in METADATA_TABLE_COLUMNS:
        if column == "doi_key":
            types.append(dialect.key_text)
        elif column in _INTEGERS:
            types.append(dialect.integer_type)
        elif column in _STAMPS:
            types.append(dialect.timestamp_type)
        elif column == "csl_json":
            types.append(dialect.json_text)
        else:
            types.append(dialect.text_type)
    return tuple(types)


METADATA_SHAPE = TableShape(
    METADATA_TABLE_COLUMNS, metadata_types, not_null=("doi", "metadata_status"),
    kind="metadata table", writer="one DoiEnrichOperator wrote", parameter="metadata_table",
    purpose="write the metadata elsewhere",
    added=("agency", "metadata_source", "registry_type"),
)


def ensure_metadata_table(cursor: Any, dialect: StatementDialect, results_table: str) -> None:
    """``CREATE TABLE IF NOT EXISTS`` the metadata table, ``doi_key`` its primary key.

    Rows are replaced by key, so a table of the same name that is not one of ours (a user's
    ``doi_metadata``) is refused before any write, untouched.
    """
    METADATA_SHAPE.ensure(cursor, dialect, results_table)


def _fetch(proxy_hook: DoiProxyHook, log: TaskLog, dois: list[str],
           progress: Callable[[ProgressEvent], None], stats: ResolverStats,
           known: dict[str, Any]) -> list[MetadataResult]:
    """The metadata of ``dois`` (``known``: the agency an earlier run found, by key); a
    warning when the proxy sent a whole batch to landing pages."""
    results = proxy_hook.fetch_metadata(dois, progress=progress, stats=stats, agencies=known)
    if len(results) >= 4 and all((r.error or "").startswith(LANDING) for r in results):
        warn = getattr(log, "warning", log.info)
        warn(
            "The proxy sent all %d DOIs of this batch to landing pages, none to a metadata "
            "host: if the connection's metadata_hosts extra does not name the agencies' "
            "hosts, correct it; these keys are not asked again for negative_ttl seconds",
            len(results))
    return results


def enrichment_step(proxy_hook: DoiProxyHook, log: TaskLog) -> KeyStep:
    """Registry metadata, as a :class:`KeyStep`: Crossref's and DataCite's keys through their
    batch APIs where the allowlist has them (``source="auto"``), the others by content
    negotiation through the proxy (two requests a key, so a claim lasts twice a batch's time at
    the slower of the two rates). The agency an earlier run found for a key is read back from
    the table (its ``agency`` column), so that Which RA? is asked only about new keys."""
    config = proxy_hook.get_metadata_config()
    hosts = ", ".join(config.metadata_hosts)
    single = (f"{config.agency_rate:.1f}/s" if config.agency_rate is not None else
              f"Crossref's {config.pool} pool's pace, 2/s elsewhere")
    lists = (f"{config.list_rate:g}/s" if config.list_rate is not None else
             f"Crossref's {config.pool} pool's pace, 1/s at DataCite")
    description = (f"{config.safe_base_url} at {config.rate:.1f} requests/s and each "
                   f"metadata host at {single} (concurrency "
                   f"{config.concurrency}; metadata hosts: {hosts})")
    batch_apis = [redact_url(getattr(config, s.url_field)) for s in BATCH_SOURCES
                  if config.batch_origin(getattr(config, s.url_field))]
    if config.source == "auto" and batch_apis:
        description += (f"; Crossref's and DataCite's keys by list queries of "
                        f"{config.list_size} DOIs at {lists} "
                        f"({', '.join(batch_apis)})")
    return KeyStep(
        verb="enrich", gerund="Enriching", past="enriched", service="DOI content negotiation",
        description=description, shape=METADATA_SHAPE, status_field="metadata_status",
        ask=partial(_fetch, proxy_hook, log),
        # One for every batch of the task: a batch API given up on is not asked again.
        new_stats=partial(MetadataStats, source_health=SourceHealth()),
        lease=partial(default_lease, config, rate=min(config.rate, config.agency_rate or 2.0),
                      requests_per_key=2),
        counted=partial(requests_counted, config),
        known="agency",
    )


def enrich_due_keys(
    db_hook: DbApiHook,
    proxy_hook: DoiProxyHook,
    *,
    table: str,
    metadata_table: str | None = None,
    log: TaskLog,
    **options: Unpack[DueKeysOptions],
) -> DueKeysSummary:
    """Fetch the registry metadata of the due keys of ``table`` into ``metadata_table``
    (default ``doi_metadata`` beside it): :func:`~airflow_doi.provider.hooks.due_keys.
    process_due_keys` (whose ``options`` these are; ``batch_size`` 500 by default) with the
    enrichment step."""
    options.setdefault("batch_size", 500)
    return process_due_keys(
        db_hook, enrichment_step(proxy_hook, log), table=table,
        results_table=metadata_table or sibling_table(table, METADATA_TABLE), log=log,
        **options,
    )
