"""``DoiResolveOperator``: resolve a catalogue's DOIs into the table ``doi_resolution``.

The results table lives beside the catalogue and *is* the cache: one row per comparison key
(``doi_key`` primary key, ``doi``, ``status``, ``url``, ``response_code``, ``http_status``,
``attempts``, ``error``, ``resolved_at``, ``expires_at``). A run asks the proxy only about the
distinct valid keys of the catalogue that have no row yet, or whose row has expired (errors
never get an expiry, so they are retried on the next run). Keys are taken in key order, a
batch at a time, and each batch is upserted and committed before the next is requested: a
task that fails or is killed resumes, on retry, exactly after the last stored batch, and never
asks twice for a key it already stored.

The catalogue needs the columns written by
:class:`~airflow_doi.provider.operators.normalize.DoiNormalizeOperator` (``doi``, ``doi_key``,
``doi_valid``). For dynamic task mapping, :func:`plan_resolve_batches` splits the due keys
into key ranges and :func:`resolve_key_range` resolves one range::

    ranges = task(plan_resolve_batches)(conn_id="db", table="catalogue", batch_size=5000)
    task(resolve_key_range).partial(conn_id="db", table="catalogue").expand_kwargs(ranges)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import closing
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_doi.db.statements import (
    StatementDialect,
    keyset_pages,
    missing_columns,
    quote_identifier,
    require_columns,
    sibling_table,
)
from airflow_doi.provider.hooks.claims import KeyClaims, claims_table_of
from airflow_doi.provider.hooks.due_keys import (
    DueKeys,
    DueKeysSummary,
    ProxyUnavailableError,
    Store,
    TaskLog,
    process_due_keys,
    task_owner,
    unanswered,
)
from airflow_doi.provider.hooks.sql import connect, dialect_of, sql_hook
from airflow_doi.provider.operators.base import DoiSqlOperator

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook

    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook
    from airflow_doi.resolver import (
        ProgressEvent,
        ResolutionResult,
        ResolverConfig,
        ResolverStats,
    )

__all__ = [
    "RESOLUTION_COLUMNS",
    "DoiResolveOperator",
    "ProxyUnavailableError",
    "ResolveSummary",
    "ensure_resolution_table",
    "plan_resolve_batches",
    "resolution_types",
    "resolve_due_keys",
    "resolve_key_range",
    "task_owner",
]

RESOLUTION_TABLE = "doi_resolution"
#: What one run did (the generic summary, under the name it always had).
ResolveSummary = DueKeysSummary

RESOLUTION_COLUMNS: tuple[str, ...] = (
    "doi_key",
    "doi",
    "status",
    "url",
    "response_code",
    "http_status",
    "attempts",
    "error",
    "resolved_at",
    "expires_at",
)




def resolution_types(dialect: StatementDialect) -> tuple[str, ...]:
    """SQL types of :data:`RESOLUTION_COLUMNS`, in order."""
    text, integer, stamp = dialect.text_type, dialect.integer_type, dialect.timestamp_type
    return (text, text, text, text, integer, integer, integer, text, stamp, stamp)


#: The columns that make an existing table one this module wrote (its first version's).
_OWN_COLUMNS = RESOLUTION_COLUMNS[:10]


def ensure_resolution_table(cursor: Any, dialect: StatementDialect, results_table: str) -> None:
    """``CREATE TABLE IF NOT EXISTS`` the results table with ``doi_key`` as primary key.

    Rows of the results table are replaced by key, so a table of the same name that is not
    one of ours (a user's ``doi_resolution``) is refused before any write, untouched.
    """
    text, integer, stamp = dialect.text_type, dialect.integer_type, dialect.timestamp_type
    cursor.execute(
        f"CREATE TABLE IF NOT EXISTS {quote_identifier(results_table)} ("
        f'"doi_key" {dialect.key_text} NOT NULL PRIMARY KEY, "doi" {text} NOT NULL, '
        f'"status" {text} NOT NULL, '
        f'"url" {text}, "response_code" {integer}, "http_status" {integer}, '
        f'"attempts" {integer}, "error" {text}, "resolved_at" {stamp}, "expires_at" {stamp})'
    )
    missing = missing_columns(cursor, results_table, _OWN_COLUMNS,
                              case_sensitive=dialect.case_sensitive_identifiers)
    if missing:
        raise ValueError(
            f"the results table {results_table} already exists and is not one DoiResolveOperator "
            f"wrote (no column {', '.join(missing)}); it was left untouched: pass "
            "results_table='another_name' to write the resolutions elsewhere"
        )


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)


def _row(
    key: str, doi: str, result: ResolutionResult, dialect: StatementDialect
) -> tuple[Any, ...]:
    return (
        key,
        result.doi or doi,
        result.status,
        result.url,
        result.response_code,
        result.http_status,
        result.attempts,
        result.error,
        dialect.timestamp(_utc(result.resolved_at)),
        dialect.timestamp(_utc(result.expires_at)),
    )


def default_lease(config: ResolverConfig, batch_size: int) -> float:
    """Seconds a claim holds its keys: twice the time a batch takes at the configured rate,
    plus the breaker's give-up time and one request's retries, and at least 5 minutes."""
    per_request = config.timeout * config.max_attempts
    return max(300.0, 2 * batch_size / config.rate + config.breaker_give_up + per_request)



class _ResolveStep:
    """Resolution through the proxy REST API, as a :class:`KeyStep`."""

    verb = "resolve"
    gerund = "Resolving"
    past = "resolved"
    service = "the DOI proxy"
    columns = RESOLUTION_COLUMNS

    def __init__(self, proxy_hook: DoiProxyHook) -> None:
        self.proxy_hook = proxy_hook
        self.config = proxy_hook.get_config()

    def describe(self) -> str:
        from airflow_doi.resolver.config import redact_url

        config = self.config
        return (f"{redact_url(config.base_url)} at {config.rate:.1f} requests/s "
                f"(concurrency {config.concurrency})")

    def lease(self, batch_size: int) -> float:
        return default_lease(self.config, batch_size)

    def types(self, dialect: StatementDialect) -> tuple[str, ...]:
        return resolution_types(dialect)

    def ensure_table(self, cursor: Any, dialect: StatementDialect, results_table: str) -> None:
        ensure_resolution_table(cursor, dialect, results_table)

    def new_stats(self) -> ResolverStats:
        from airflow_doi.resolver import ResolverStats

        return ResolverStats()

    def ask(self, dois: list[str], progress: Callable[[ProgressEvent], None],
            stats: ResolverStats) -> list[ResolutionResult]:
        return self.proxy_hook.resolve(dois, progress=progress, stats=stats)

    def row(self, key: str, doi: str, result: ResolutionResult,
            dialect: StatementDialect) -> tuple[Any, ...]:
        return _row(key, doi, result, dialect)

    def status(self, result: ResolutionResult) -> str:
        return result.status

    def unanswered(self, result: ResolutionResult) -> bool:
        return unanswered(result.status, result.http_status)


def resolve_due_keys(
    db_hook: DbApiHook,
    proxy_hook: DoiProxyHook,
    *,
    table: str,
    results_table: str | None = None,
    key_column: str = "doi_key",
    doi_column: str = "doi",
    valid_column: str = "doi_valid",
    repair_column: str | None = None,
    batch_size: int = 1000,
    after: str | None = None,
    upto: str | None = None,
    owner: str | None = None,
    lease: float | None = None,
    log: TaskLog,
) -> ResolveSummary:
    """Resolve the due keys of ``table`` (optionally only ``after < key <= upto``) into
    ``results_table`` (default ``doi_resolution`` beside it); when the caller will repair
    ``repair_column`` afterwards, that column is checked first too.

    :func:`~airflow_doi.provider.hooks.due_keys.process_due_keys` with the resolution
    step: claims, batches, fail-fast on a dead proxy (:class:`ProxyUnavailableError`); the
    engine behind the operator and the mapped tasks, usable from plain Python too.
    """
    return process_due_keys(
        db_hook, _ResolveStep(proxy_hook), table=table,
        results_table=results_table or sibling_table(table, RESOLUTION_TABLE),
        key_column=key_column, doi_column=doi_column, valid_column=valid_column,
        extra_columns={"repair_column": repair_column} if repair_column else None,
        batch_size=batch_size, after=after, upto=upto, owner=owner, lease=lease, log=log,
    )


def _hooks(conn_id: str, resolver_conn_id: str,
           resolver_options: dict[str, Any] | None) -> tuple[DbApiHook, DoiProxyHook]:
    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook

    return sql_hook(conn_id), DoiProxyHook(resolver_conn_id, **(resolver_options or {}))


def plan_resolve_batches(
    *,
    conn_id: str,
    table: str,
    results_table: str | None = None,
    key_column: str = "doi_key",
    valid_column: str = "doi_valid",
    batch_size: int = 1000,
    max_ranges: int | None = None,
) -> list[dict[str, str | None]]:
    """Key ranges ``{"after": k0, "upto": k1}`` covering the due keys, at most ``max_ranges``.

    A range holds ``batch_size`` due keys, or ``ceil(due / max_ranges)`` when that is more:
    Airflow refuses to expand more than ``[core] max_map_length`` mapped tasks (the default of
    ``max_ranges``), and :func:`resolve_key_range` pages through a wide range by its own
    ``batch_size`` anyway. Feed them to :func:`resolve_key_range` with ``expand_kwargs``; a
    range that is resolved twice (a retried map index) asks only for the keys still due.
    """
    import logging

    if max_ranges is None:
        from airflow.configuration import conf

        max_ranges = conf.getint("core", "max_map_length", fallback=1024)
    if batch_size < 1 or max_ranges < 1:
        raise ValueError("batch_size and max_ranges must be at least 1")
    for name in (table, key_column, valid_column):
        quote_identifier(name)
    db_hook = sql_hook(conn_id)
    results_table = results_table or sibling_table(table, RESOLUTION_TABLE)
    dialect = dialect_of(db_hook)
    due = DueKeys(table, results_table, key_column, valid_column)
    ranges: list[dict[str, str | None]] = []
    # The tables the mapped tasks share are created here, before they fan out.
    claims = KeyClaims(claims_table_of(results_table), results_table, dialect, task_owner(), 0)

    def prepare(cursor: Any) -> None:
        require_columns(cursor, table, {"key_column": key_column, "valid_column": valid_column},
                        case_sensitive=dialect.case_sensitive_identifiers)
        ensure_resolution_table(cursor, dialect, results_table)
        claims.ensure(cursor)

    with Store(db_hook, dialect) as store:
        store.transaction(prepare)
    with closing(connect(db_hook)) as conn:
        cursor = dialect.cursor(conn)
        now = datetime.now(timezone.utc)
        due_count = due.count(cursor, dialect, now)
        per_range = max(batch_size, math.ceil(due_count / max_ranges))
        source, where, params = due.parts(now, dialect, None, None)
        key = f"c.{quote_identifier(key_column)}"
        previous: str | None = None
        for page in keyset_pages(cursor, dialect, select=f"{key} FROM {source}", key=key,
                                 where=where, params=params, group_by=True,
                                 page_size=per_range):
            ranges.append({"after": previous, "upto": page[-1][0]})
            previous = page[-1][0]
    if len(ranges) > max_ranges:  # keys became due between the count and the scan
        ranges = ranges[:max_ranges]
        ranges[-1]["upto"] = None  # the last range takes everything after its start
    logging.getLogger(__name__).info(
        "%d due keys in %s: %d key ranges of up to %d keys", due_count, table, len(ranges),
        per_range,
    )
    return ranges


def resolve_key_range(
    *,
    conn_id: str,
    table: str,
    after: str | None = None,
    upto: str | None = None,
    resolver_conn_id: str = "doi_proxy_default",
    results_table: str | None = None,
    key_column: str = "doi_key",
    doi_column: str = "doi",
    valid_column: str = "doi_valid",
    batch_size: int = 1000,
    resolver_options: dict[str, Any] | None = None,
    doi_proxy_conn_id: str | None = None,
) -> dict[str, Any]:
    """Resolve the due keys with ``after < key <= upto`` (one mapped task's share).

    ``upto=None`` means no upper bound; requests and commits go ``batch_size`` keys at a time
    however wide the range is. ``resolver_conn_id`` is the ``doi_proxy`` connection
    (``doi_proxy_conn_id`` is its deprecated name).
    """
    import logging

    from airflow_doi.provider.hooks.doi_proxy import renamed_conn_id

    resolver_conn_id = renamed_conn_id(resolver_conn_id, doi_proxy_conn_id, "resolve_key_range")
    db_hook, proxy_hook = _hooks(conn_id, resolver_conn_id, resolver_options)
    summary = resolve_due_keys(
        db_hook, proxy_hook, table=table, results_table=results_table, key_column=key_column,
        doi_column=doi_column, valid_column=valid_column, batch_size=batch_size,
        after=after, upto=upto, log=logging.getLogger(__name__),
    )
    return summary.as_dict()


class DoiResolveOperator(DoiSqlOperator):
    """Resolve the new or expired DOI keys of ``table`` into ``results_table``.

    :param resolver_conn_id: the ``doi_proxy`` connection (rate, concurrency, ...);
        ``doi_proxy_conn_id`` is its deprecated name (Airflow shows that one as ``'***'``).
    :param results_table: defaults to ``doi_resolution`` in the catalogue's schema.
    :param key_column, doi_column, valid_column: the columns written by the normalize step.
    :param resolver_options: :class:`~airflow_doi.resolver.ResolverConfig` fields that win over
        the connection (e.g. ``{"rate": 10}``).
    :param batch_size: keys per request batch and per commit (the most a kill can lose).
    :param repair_column: the raw DOI column (e.g. ``doi_raw``); when given, the cells of rows
        that are invalid or whose key is ``not_found`` get verified repair suggestions in
        ``repair_table`` (default ``doi_repair`` beside the table, keyed by the raw cell; see
        :mod:`airflow_doi.provider.hooks.repairs`). Off by default.
    """

    template_fields: Sequence[str] = (
        "conn_id", "table", "batch_size", "hook_params", "results_table", "resolver_conn_id",
        "resolver_options", "repair_column", "repair_table", "key_column", "doi_column",
        "valid_column",
    )

    def __init__(
        self,
        *,
        resolver_conn_id: str = "doi_proxy_default",
        results_table: str | None = None,
        key_column: str = "doi_key",
        doi_column: str = "doi",
        valid_column: str = "doi_valid",
        resolver_options: dict[str, Any] | None = None,
        batch_size: int | str = 1000,
        repair_column: str | None = None,
        repair_table: str | None = None,
        doi_proxy_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        from airflow_doi.provider.hooks.doi_proxy import renamed_conn_id

        super().__init__(batch_size=batch_size, **kwargs)
        self.repair_column = repair_column
        self.repair_table = repair_table
        self.resolver_conn_id = renamed_conn_id(resolver_conn_id, doi_proxy_conn_id,
                                                "DoiResolveOperator")
        self.results_table = results_table
        self.key_column = key_column
        self.doi_column = doi_column
        self.valid_column = valid_column
        self.resolver_options = resolver_options

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook

        results_table = self.results_table or sibling_table(self.table, RESOLUTION_TABLE)
        self.check_identifiers(results_table, self.key_column, self.doi_column, self.valid_column)
        if self.repair_column:
            self.check_identifiers(self.repair_column)
        summary = resolve_due_keys(
            self.get_db_hook(),
            DoiProxyHook(self.resolver_conn_id, **(self.resolver_options or {})),
            table=self.table,
            results_table=results_table,
            key_column=self.key_column,
            doi_column=self.doi_column,
            valid_column=self.valid_column,
            repair_column=self.repair_column,
            batch_size=self.page_size,
            log=self.log,
        )
        self.emit_assets(context, results_table)
        outcome = summary.as_dict()
        if self.repair_column:
            from airflow_doi.provider.hooks.repairs import store_repairs

            outcome.update(store_repairs(
                self.get_db_hook(),
                DoiProxyHook(self.resolver_conn_id, **(self.resolver_options or {})),
                table=self.table, raw_column=self.repair_column, results_table=results_table,
                repair_table=self.repair_table, key_column=self.key_column,
                valid_column=self.valid_column, log=self.log,
            ))
        return outcome

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table`` (key, DOI, valid flag), writes ``doi_resolution`` keyed by the key
        column (and ``doi_repair`` from ``repair_column`` when asked)."""
        from airflow_doi.provider.lineage import dataset, operator_lineage

        hook, connection = self.lineage_source()
        source = dataset(hook, connection, self.table)
        origin = (source.namespace, source.name)
        results_table = self.results_table or sibling_table(self.table, RESOLUTION_TABLE)
        outputs = [dataset(hook, connection, results_table,
                           {"doi_key": [self.key_column], "doi": [self.doi_column]}, origin)]
        if self.repair_column:
            from airflow_doi.provider.hooks.repairs import REPAIR_TABLE

            repair_table = self.repair_table or sibling_table(self.table, REPAIR_TABLE)
            outputs.append(dataset(hook, connection, repair_table,
                                   {"raw_value": [self.repair_column]}, origin))
        return operator_lineage([source], outputs)
