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
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_doi.provider.operators.base import DoiSqlOperator, dialect_of, sql_hook
from airflow_doi.provider.operators.progress import Progress, TaskLog, format_duration
from airflow_doi.provider.sql import (
    Dialect,
    distinct_pages,
    keyset_pages,
    missing_columns,
    quote_identifier,
    require_columns,
    sibling_table,
    upsert_rows,
)

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook

    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook
    from airflow_doi.resolver import ProgressEvent, ResolutionResult

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
]

RESOLUTION_TABLE = "doi_resolution"


class ProxyUnavailableError(RuntimeError):
    """A whole batch failed: the task stops (and Airflow retries it) instead of grinding on."""

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


@dataclass
class ResolveSummary:
    """What one run did: the XCom value of the operator and of each mapped task."""

    due_keys: int = 0
    stored_keys: int = 0
    batches: int = 0
    requests: int = 0
    retries: int = 0
    elapsed: float = 0.0
    by_status: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "due_keys": self.due_keys,
            "stored_keys": self.stored_keys,
            "batches": self.batches,
            "requests": self.requests,
            "retries": self.retries,
            "elapsed_seconds": round(self.elapsed, 3),
            "by_status": dict(self.by_status),
        }


def resolution_types(dialect: Dialect) -> tuple[str, ...]:
    """SQL types of :data:`RESOLUTION_COLUMNS`, in order."""
    text, integer, stamp = dialect.text_type, dialect.integer_type, dialect.timestamp_type
    return (text, text, text, text, integer, integer, integer, text, stamp, stamp)


#: The columns that make an existing table one this module wrote (its first version's).
_OWN_COLUMNS = RESOLUTION_COLUMNS[:10]


def ensure_resolution_table(cursor: Any, dialect: Dialect, results_table: str) -> None:
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


@dataclass(frozen=True)
class _DueKeys:
    """The query of the catalogue's valid keys that have no fresh row in the results table."""

    table: str
    results_table: str
    key_column: str
    valid_column: str

    def parts(
        self, now: datetime, dialect: Dialect, after: str | None, upto: str | None
    ) -> tuple[str, str, list[Any]]:
        key = f"c.{quote_identifier(self.key_column)}"
        source = (
            f"{quote_identifier(self.table)} AS c LEFT JOIN {quote_identifier(self.results_table)}"
            f' AS r ON r."doi_key" = {key}'
        )
        where = (
            f"c.{quote_identifier(self.valid_column)} = {dialect.p()} AND {key} IS NOT NULL "
            'AND (r."doi_key" IS NULL OR r."expires_at" IS NULL '
            f'OR r."expires_at" <= {dialect.p()})'
        )
        params: list[Any] = [True, dialect.timestamp(now)]
        if after is not None:
            where += f" AND {key} > {dialect.p()}"
            params.append(after)
        if upto is not None:
            where += f" AND {key} <= {dialect.p()}"
            params.append(upto)
        return source, where, params

    def count(self, cursor: Any, dialect: Dialect, now: datetime,
              after: str | None = None, upto: str | None = None) -> int:
        source, where, params = self.parts(now, dialect, after, upto)
        key = f"c.{quote_identifier(self.key_column)}"
        cursor.execute(f"SELECT COUNT(DISTINCT {key}) FROM {source} WHERE {where}", params)
        return int(cursor.fetchone()[0])


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)


def _row(key: str, doi: str, result: ResolutionResult, dialect: Dialect) -> tuple[Any, ...]:
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
    log: TaskLog,
) -> ResolveSummary:
    """Resolve the due keys of ``table`` (optionally only ``after < key <= upto``); when the
    caller will repair ``repair_column`` afterwards, that column is checked first too.

    The engine behind the operator and the mapped tasks; usable from plain Python too.
    """
    from airflow_doi.provider.hooks.doi_proxy import redact_url
    from airflow_doi.resolver import ResolverStats

    results_table = results_table or sibling_table(table, RESOLUTION_TABLE)
    for name in (table, results_table, key_column, doi_column, valid_column):
        quote_identifier(name)
    dialect = dialect_of(db_hook)
    due = _DueKeys(table, results_table, key_column, valid_column)
    summary = ResolveSummary()
    started = time.monotonic()
    now = datetime.now(timezone.utc)
    config = proxy_hook.get_config()
    log.info("Resolving %s through %s at %.1f requests/s (concurrency %d)",
             table, redact_url(config.base_url), config.rate, config.concurrency)
    with closing(db_hook.get_conn()) as conn:
        cursor = dialect.cursor(conn)
        # repair_column too: checked now, not after hours of resolving.
        columns = {"key_column": key_column, "doi_column": doi_column,
                   "valid_column": valid_column, "repair_column": repair_column}
        require_columns(cursor, table, {k: v for k, v in columns.items() if v},
                        case_sensitive=dialect.case_sensitive_identifiers)
        ensure_resolution_table(cursor, dialect, results_table)
        conn.commit()
        source, where, params = due.parts(now, dialect, after, upto)
        key = f"c.{quote_identifier(key_column)}"
        # The due keys are selected once, in the database, and numbered; pages are ranges of
        # that number (no re-scan of the catalogue per page, and a key stored by an earlier
        # page is not met again).
        pages = distinct_pages(
            cursor, dialect, value=key, source=source, where=where, params=params,
            page_size=batch_size,
            aggregate=(f"MIN(c.{quote_identifier(doi_column)})", dialect.text_type),
        )
        progress = Progress(f"resolve {table}", 0, log, unit="keys", every=10.0)
        with closing(pages):  # closed (its table dropped) even on a raise
            for due_keys, page in pages:
                if summary.batches == 0:
                    summary.due_keys = progress.total = due_keys
                    progress.report(force=True)
                base = progress.done

                def on_progress(event: ProgressEvent, base: int = base) -> None:
                    progress.done = base + event.done
                    progress.report()

                stats = ResolverStats()
                results = proxy_hook.resolve([doi for _, doi in page], progress=on_progress,
                                             stats=stats)
                rows = [_row(k, d, r, dialect) for (k, d), r in zip(page, results, strict=True)]
                upsert_rows(cursor, dialect, results_table, RESOLUTION_COLUMNS, rows, key="doi_key",
                            types=resolution_types(dialect))
                conn.commit()
                summary.batches += 1
                summary.stored_keys += len(rows)
                summary.requests += stats.requests
                summary.retries += stats.retries
                summary.by_status.update(r.status for r in results)
                progress.done = base + len(page)
                progress.report(force=True)
                if results and all(r.status == "error" for r in results):
                    # Every key of the page failed after its retries: the proxy is down or
                    # refusing us. Going on would wait out the breaker page after page; failing
                    # now lets Airflow retry the task later. The errors are stored (no expiry), so
                    # the next try asks for exactly these keys and the ones not reached yet.
                    raise ProxyUnavailableError(
                        f"every one of {len(results)} keys in a batch failed "
                        f"(last: {results[-1].error}); {summary.stored_keys} keys stored, "
                        f"the rest stay due for the next try"
                    )
    summary.elapsed = time.monotonic() - started
    statuses = ", ".join(f"{s}={n}" for s, n in sorted(summary.by_status.items())) or "nothing due"
    log.info(
        "Stored %d keys in %s in %d batches (%s); %d requests, %d retries, %s (%.1f keys/s)",
        summary.stored_keys, results_table, summary.batches, statuses, summary.requests,
        summary.retries, format_duration(summary.elapsed),
        summary.stored_keys / summary.elapsed if summary.elapsed else 0.0,
    )
    return summary


def _hooks(conn_id: str, doi_proxy_conn_id: str,
           resolver_options: dict[str, Any] | None) -> tuple[DbApiHook, DoiProxyHook]:
    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook

    return sql_hook(conn_id), DoiProxyHook(doi_proxy_conn_id, **(resolver_options or {}))


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
    due = _DueKeys(table, results_table, key_column, valid_column)
    ranges: list[dict[str, str | None]] = []
    with closing(db_hook.get_conn()) as conn:
        cursor = dialect.cursor(conn)
        require_columns(cursor, table, {"key_column": key_column, "valid_column": valid_column},
                        case_sensitive=dialect.case_sensitive_identifiers)
        ensure_resolution_table(cursor, dialect, results_table)
        conn.commit()
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
    doi_proxy_conn_id: str = "doi_proxy_default",
    results_table: str | None = None,
    key_column: str = "doi_key",
    doi_column: str = "doi",
    valid_column: str = "doi_valid",
    batch_size: int = 1000,
    resolver_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Resolve the due keys with ``after < key <= upto`` (one mapped task's share).

    ``upto=None`` means no upper bound; requests and commits go ``batch_size`` keys at a time
    however wide the range is.
    """
    import logging

    db_hook, proxy_hook = _hooks(conn_id, doi_proxy_conn_id, resolver_options)
    summary = resolve_due_keys(
        db_hook, proxy_hook, table=table, results_table=results_table, key_column=key_column,
        doi_column=doi_column, valid_column=valid_column, batch_size=batch_size,
        after=after, upto=upto, log=logging.getLogger(__name__),
    )
    return summary.as_dict()


class DoiResolveOperator(DoiSqlOperator):
    """Resolve the new or expired DOI keys of ``table`` into ``results_table``.

    :param doi_proxy_conn_id: the ``doi_proxy`` connection (rate, concurrency, ...).
    :param results_table: defaults to ``doi_resolution`` in the catalogue's schema.
    :param key_column, doi_column, valid_column: the columns written by the normalize step.
    :param resolver_options: :class:`~airflow_doi.resolver.ResolverConfig` fields that win over
        the connection (e.g. ``{"rate": 10}``).
    :param batch_size: keys per request batch and per commit (the most a kill can lose).
    :param repair_column: the raw DOI column (e.g. ``doi_raw``); when given, the cells of rows
        that are invalid or whose key is ``not_found`` get verified repair suggestions in
        ``repair_table`` (default ``doi_repair`` beside the table, keyed by the raw cell; see
        :mod:`airflow_doi.provider.operators.repairs`). Off by default.
    """

    template_fields: Sequence[str] = (
        "conn_id", "table", "batch_size", "hook_params", "results_table", "doi_proxy_conn_id",
        "resolver_options", "repair_column", "repair_table", "key_column", "doi_column",
        "valid_column",
    )

    def __init__(
        self,
        *,
        doi_proxy_conn_id: str = "doi_proxy_default",
        results_table: str | None = None,
        key_column: str = "doi_key",
        doi_column: str = "doi",
        valid_column: str = "doi_valid",
        resolver_options: dict[str, Any] | None = None,
        batch_size: int | str = 1000,
        repair_column: str | None = None,
        repair_table: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(batch_size=batch_size, **kwargs)
        self.repair_column = repair_column
        self.repair_table = repair_table
        self.doi_proxy_conn_id = doi_proxy_conn_id
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
            DoiProxyHook(self.doi_proxy_conn_id, **(self.resolver_options or {})),
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
            from airflow_doi.provider.operators.repairs import store_repairs

            outcome.update(store_repairs(
                self.get_db_hook(),
                DoiProxyHook(self.doi_proxy_conn_id, **(self.resolver_options or {})),
                table=self.table, raw_column=self.repair_column, results_table=results_table,
                repair_table=self.repair_table, key_column=self.key_column,
                valid_column=self.valid_column, log=self.log,
            ))
        return outcome

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table`` (key, DOI, valid flag), writes ``doi_resolution`` keyed by the key
        column (and ``doi_repair`` from ``repair_column`` when asked)."""
        from airflow_doi.provider.operators.lineage import dataset, operator_lineage

        hook, connection = self.lineage_source()
        source = dataset(hook, connection, self.table)
        origin = (source.namespace, source.name)
        results_table = self.results_table or sibling_table(self.table, RESOLUTION_TABLE)
        outputs = [dataset(hook, connection, results_table,
                           {"doi_key": [self.key_column], "doi": [self.doi_column]}, origin)]
        if self.repair_column:
            from airflow_doi.provider.operators.repairs import REPAIR_TABLE

            repair_table = self.repair_table or sibling_table(self.table, REPAIR_TABLE)
            outputs.append(dataset(hook, connection, repair_table,
                                   {"raw_value": [self.repair_column]}, origin))
        return operator_lineage([source], outputs)
