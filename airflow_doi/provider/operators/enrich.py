"""``DoiEnrichOperator``: registry metadata of a catalogue's DOIs into ``doi_metadata``.

DOI content negotiation (:mod:`airflow_doi.metadata`) for the distinct valid keys of the
catalogue that have no row in ``doi_metadata`` yet, or whose row has expired; one row per
comparison key (``doi_key`` primary key) with typed columns: ``metadata_status``, ``title``,
``csl_type``, ``issued``, ``year``, ``container_title``, ``publisher``, ``issn``, ``isbn``,
``volume``, ``issue``, ``page``, ``author_count``, ``first_author``, ``language``,
``license_url``, ``updated_by``, ``update_to``, ``source_host``, ``error``, ``attempts``,
``http_status``, ``fetched_at``, ``expires_at`` and the record itself in ``csl_json`` (a JSON
column on PostgreSQL, DuckDB and MySQL/MariaDB). Join it to anything on ``doi_key``.

The engine is resolution's (:mod:`airflow_doi.provider.hooks.due_keys`): batches upserted
and committed one at a time, claims so that tasks running at once never ask for one key
twice, a retry that asks only what is still due, and :class:`ProxyUnavailableError` as soon as
the proxy (or an agency host) fails. The ``doi_proxy`` connection serves both steps; its
extras ``agency_rate`` and ``metadata_hosts`` tune this one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_doi.db.statements import (
    StatementDialect,
    missing_columns,
    quote_identifier,
    sibling_table,
)
from airflow_doi.metadata.csl import FIELDS
from airflow_doi.provider.hooks.due_keys import (
    DueKeysSummary,
    ProxyUnavailableError,
    process_due_keys,
    unanswered,
)
from airflow_doi.provider.operators.base import DoiSqlOperator
from airflow_doi.provider.progress import TaskLog

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook

    from airflow_doi.metadata import MetadataConfig, MetadataResult
    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook
    from airflow_doi.resolver import ProgressEvent, ResolverStats

__all__ = [
    "METADATA_TABLE",
    "METADATA_TABLE_COLUMNS",
    "DoiEnrichOperator",
    "ProxyUnavailableError",
    "enrich_due_keys",
    "ensure_metadata_table",
    "metadata_types",
]

METADATA_TABLE = "doi_metadata"
#: The columns of ``doi_metadata``, in order.
METADATA_TABLE_COLUMNS: tuple[str, ...] = (
    "doi_key", "doi", "metadata_status", *FIELDS, "source_host", "error", "attempts",
    "http_status", "fetched_at", "expires_at", "csl_json",
)
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


def ensure_metadata_table(cursor: Any, dialect: StatementDialect, results_table: str) -> None:
    """``CREATE TABLE IF NOT EXISTS`` the metadata table, ``doi_key`` its primary key.

    Rows are replaced by key, so a table of the same name that is not one of ours (a user's
    ``doi_metadata``) is refused before any write, untouched.
    """
    declared = ", ".join(
        f"{quote_identifier(column)} {sql_type}"
        + (" NOT NULL PRIMARY KEY" if column == "doi_key" else "")
        + (" NOT NULL" if column in ("doi", "metadata_status") else "")
        for column, sql_type in zip(METADATA_TABLE_COLUMNS, metadata_types(dialect), strict=True)
    )
    cursor.execute(f"CREATE TABLE IF NOT EXISTS {quote_identifier(results_table)} ({declared})")
    missing = missing_columns(cursor, results_table, METADATA_TABLE_COLUMNS,
                              case_sensitive=dialect.case_sensitive_identifiers)
    if missing:
        raise ValueError(
            f"the metadata table {results_table} already exists and is not one "
            f"DoiEnrichOperator wrote (no column {', '.join(missing)}); it was left untouched: "
            "pass metadata_table='another_name' to write the metadata elsewhere"
        )


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)


class _EnrichStep:
    """Content negotiation through the proxy, as a :class:`KeyStep`."""

    verb = "enrich"
    gerund = "Enriching"
    past = "enriched"
    service = "DOI content negotiation"
    columns = METADATA_TABLE_COLUMNS

    def __init__(self, proxy_hook: DoiProxyHook, log: TaskLog) -> None:
        self.proxy_hook = proxy_hook
        self.log = log
        self.config: MetadataConfig = proxy_hook.get_metadata_config()

    def describe(self) -> str:
        config = self.config
        return (f"{config.safe_base_url} at {config.rate:.1f} requests/s and each metadata host "
                f"at {config.agency_rate:.1f}/s (concurrency {config.concurrency}; metadata "
                f"hosts: {', '.join(config.metadata_hosts)})")

    def lease(self, batch_size: int) -> float:
        """Twice a batch's time at the slower of the two rates (two requests a key), plus
        the give-up time and two requests' retries; at least 5 minutes."""
        config = self.config
        per_request = config.timeout * config.max_attempts
        slowest = min(config.rate, config.agency_rate)
        return max(300.0, 2 * batch_size / slowest + config.breaker_give_up + 2 * per_request)

    def types(self, dialect: StatementDialect) -> tuple[str, ...]:
        return metadata_types(dialect)

    def ensure_table(self, cursor: Any, dialect: StatementDialect, results_table: str) -> None:
        ensure_metadata_table(cursor, dialect, results_table)

    def new_stats(self) -> ResolverStats:
        from airflow_doi.metadata import MetadataStats

        return MetadataStats()

    def ask(self, dois: list[str], progress: Callable[[ProgressEvent], None],
            stats: ResolverStats) -> list[MetadataResult]:
        from airflow_doi.metadata.client import LANDING

        results = self.proxy_hook.fetch_metadata(dois, progress=progress, stats=stats)
        if len(results) >= 4 and all((r.error or "").startswith(LANDING) for r in results):
            warn = getattr(self.log, "warning", self.log.info)
            warn(
                "The proxy sent all %d DOIs of this batch to landing pages, none to a metadata "
                "host: if the connection's metadata_hosts extra does not name the agencies' "
                "hosts, correct it; these keys are not asked again for negative_ttl seconds",
                len(results))
        return results

    def row(self, key: str, doi: str, result: MetadataResult,
            dialect: StatementDialect) -> tuple[Any, ...]:
        fields = result.fields or {}
        return (
            key, result.doi or doi, result.metadata_status,
            *(fields.get(name) for name in FIELDS),
            result.source_host, result.error, result.attempts, result.http_status,
            dialect.timestamp(_utc(result.fetched_at)), dialect.timestamp(_utc(result.expires_at)),
            result.csl_json,
        )

    def status(self, result: MetadataResult) -> str:
        return result.metadata_status

    def unanswered(self, result: MetadataResult) -> bool:
        return unanswered(result.metadata_status, result.http_status)


def enrich_due_keys(
    db_hook: DbApiHook,
    proxy_hook: DoiProxyHook,
    *,
    table: str,
    metadata_table: str | None = None,
    key_column: str = "doi_key",
    doi_column: str = "doi",
    valid_column: str = "doi_valid",
    batch_size: int = 500,
    after: str | None = None,
    upto: str | None = None,
    owner: str | None = None,
    lease: float | None = None,
    log: TaskLog,
) -> DueKeysSummary:
    """Fetch the registry metadata of the due keys of ``table`` into ``metadata_table``
    (default ``doi_metadata`` beside it); the engine of :class:`DoiEnrichOperator`, usable
    from plain Python too."""
    return process_due_keys(
        db_hook, _EnrichStep(proxy_hook, log), table=table,
        results_table=metadata_table or sibling_table(table, METADATA_TABLE),
        key_column=key_column, doi_column=doi_column, valid_column=valid_column,
        batch_size=batch_size, after=after, upto=upto, owner=owner, lease=lease, log=log,
    )


class DoiEnrichOperator(DoiSqlOperator):
    """Fetch registry metadata (CSL-JSON, typed) for the new or expired keys of ``table``.

    :param resolver_conn_id: the ``doi_proxy`` connection (proxy rate, ``agency_rate``,
        ``metadata_hosts``, ``contact``...), shared with :class:`DoiResolveOperator`.
    :param metadata_table: defaults to ``doi_metadata`` in the catalogue's schema.
    :param key_column, doi_column, valid_column: the columns written by the normalize step.
    :param resolver_options: :class:`~airflow_doi.metadata.MetadataConfig` fields that win over
        the connection (e.g. ``{"agency_rate": 5}``).
    :param batch_size: keys per request batch and per commit (the most a kill can lose).
    """

    template_fields: Sequence[str] = (
        "conn_id", "table", "batch_size", "hook_params", "metadata_table", "resolver_conn_id",
        "resolver_options", "key_column", "doi_column", "valid_column",
    )

    def __init__(
        self,
        *,
        resolver_conn_id: str = "doi_proxy_default",
        metadata_table: str | None = None,
        key_column: str = "doi_key",
        doi_column: str = "doi",
        valid_column: str = "doi_valid",
        resolver_options: dict[str, Any] | None = None,
        batch_size: int | str = 500,
        **kwargs: Any,
    ) -> None:
        super().__init__(batch_size=batch_size, **kwargs)
        self.resolver_conn_id = resolver_conn_id
        self.metadata_table = metadata_table
        self.key_column = key_column
        self.doi_column = doi_column
        self.valid_column = valid_column
        self.resolver_options = resolver_options

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook

        metadata_table = self.metadata_table or sibling_table(self.table, METADATA_TABLE)
        self.check_identifiers(metadata_table, self.key_column, self.doi_column,
                               self.valid_column)
        summary = enrich_due_keys(
            self.get_db_hook(),
            DoiProxyHook(self.resolver_conn_id, **(self.resolver_options or {})),
            table=self.table, metadata_table=metadata_table, key_column=self.key_column,
            doi_column=self.doi_column, valid_column=self.valid_column,
            batch_size=self.page_size, log=self.log,
        )
        self.emit_assets(context, metadata_table)
        return summary.as_dict()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table`` (key, DOI, valid flag), writes ``doi_metadata`` keyed by the key
        column."""
        from airflow_doi.provider.lineage import dataset, operator_lineage

        hook, connection = self.lineage_source()
        source = dataset(hook, connection, self.table)
        origin = (source.namespace, source.name)
        metadata_table = self.metadata_table or sibling_table(self.table, METADATA_TABLE)
        outputs = [dataset(hook, connection, metadata_table,
                           {"doi_key": [self.key_column], "doi": [self.doi_column]}, origin)]
        return operator_lineage([source], outputs)

