"""Resolution into ``doi_resolution``: its table, its step of the due-keys engine, key ranges.

The results table lives beside the catalogue and *is* the cache: one row per comparison key
(``doi_key`` primary key, then the :data:`~airflow_doi.resolver.result.COLUMNS` a resolution
keeps by key: ``doi``, ``status``, ``url``, ``response_code``, ``http_status``, ``attempts``,
``error``, ``resolved_at``, ``expires_at``). :func:`resolve_due_keys` asks the proxy about the
due keys (:mod:`airflow_doi.provider.hooks.due_keys`); :func:`due_key_ranges` splits them for
mapped tasks. The engine behind
:class:`~airflow_doi.provider.operators.resolve.DoiResolveOperator` and its task functions,
usable from plain Python too.
"""

from __future__ import annotations

import math
from contextlib import closing
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_doi.db.statements import (
    StatementDialect,
    keyset_pages,
    quote_identifier,
    sibling_table,
)
from airflow_doi.provider.hooks.claims import KeyClaims, Staleness, claims_table_of
from airflow_doi.provider.hooks.doi_proxy import requests_counted
from airflow_doi.provider.hooks.due_keys import (
    DueKeys,
    DueKeysOptions,
    DueKeysSummary,
    KeyStep,
    Store,
    default_lease,
    prepare_tables,
    process_due_keys,
    task_owner,
)
from airflow_doi.provider.hooks.sql import connect, dialect_of
from airflow_doi.provider.hooks.tables import TableShape, keyed_columns
from airflow_doi.provider.progress import TaskLog
from airflow_doi.resolver import ResolverStats
from airflow_doi.resolver.config import redact_url
from airflow_doi.resolver.result import COLUMNS

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook
    from typing_extensions import Unpack

    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook

__all__ = [
    "RESOLUTION_COLUMNS",
    "RESOLUTION_SHAPE",
    "RESOLUTION_TABLE",
    "ResolveSummary",
    "due_key_ranges",
    "ensure_resolution_table",
    "resolution_step",
    "resolution_types",
    "resolve_due_keys",
]

#: The results table's default name, beside the catalogue.
RESOLUTION_TABLE = "doi_resolution"
#: What one run did (the generic summary, under the name it always had).
ResolveSummary = DueKeysSummary
#: The results table's columns: the resolution's by key (not the input cell, not ``url_raw``).
RESOLUTION_COLUMNS: tuple[str, ...] = keyed_columns(COLUMNS, left_out=("url_raw",))


def resolution_types(dialect: StatementDialect) -> tuple[str, ...]:
    """SQL types of :data:`RESOLUTION_COLUMNS`, in order."""
    text, integer, stamp = dialect.text_type, dialect.integer_type, dialect.timestamp_type
    return (dialect.key_text, text, text, text, integer, integer, integer, text, stamp, stamp,
            text)


RESOLUTION_SHAPE = TableShape(
    RESOLUTION_COLUMNS, resolution_types, not_null=("doi", "status"), kind="results table",
    writer="one DoiResolveOperator wrote", parameter="results_table",
    purpose="write the resolutions elsewhere", added=("agency",),
)


def ensure_resolution_table(cursor: Any, dialect: StatementDialect, results_table: str) -> None:
    """``CREATE TABLE IF NOT EXISTS`` the results table with ``doi_key`` as primary key.

    Rows of the results table are replaced by key, so a table of the same name that is not
    one of ours (a user's ``doi_resolution``) is refused before any write, untouched.
    """
    RESOLUTION_SHAPE.ensure(cursor, dialect, results_table)


def resolution_step(proxy_hook: DoiProxyHook) -> KeyStep:
    """Resolution through the proxy REST API, as a :class:`KeyStep`."""
    config = proxy_hook.get_config()
    return KeyStep(
        verb="resolve", gerund="Resolving", past="resolved", service="the DOI proxy",
        description=(f"{redact_url(config.base_url)} at {config.rate:.1f} requests/s "
                     f"(concurrency {config.concurrency})"),
        shape=RESOLUTION_SHAPE, status_field="status",
        ask=lambda dois, progress, stats, known: proxy_hook.resolve(dois, progress=progress,
                                                                    stats=stats),
        new_stats=ResolverStats, lease=partial(default_lease, config),
        counted=partial(requests_counted, config), staleness=resolution_staleness(config.urls),
    )


def resolution_staleness(urls: bool) -> Staleness:
    """When a stored resolution is due again, for a run with URLs (an existence-only
    ``registered`` row at once) or without (never a ``resolved`` row: its URL stays)."""
    return Staleness(redo=("registered",)) if urls else Staleness(keep=("resolved",))


def resolve_due_keys(
    db_hook: DbApiHook,
    proxy_hook: DoiProxyHook,
    *,
    table: str,
    results_table: str | None = None,
    repair_column: str | None = None,
    log: TaskLog,
    **options: Unpack[DueKeysOptions],
) -> ResolveSummary:
    """Resolve the due keys of ``table`` (optionally only ``after < key <= upto``) into
    ``results_table`` (default ``doi_resolution`` beside it); when the caller will repair
    ``repair_column`` afterwards, that column is checked first too.

    :func:`~airflow_doi.provider.hooks.due_keys.process_due_keys` (whose ``options`` these
    are: columns, ``batch_size``, key range, claims) with the resolution step: claims, batches,
    fail-fast on a dead proxy (``ProxyUnavailableError``).
    """
    return process_due_keys(
        db_hook, resolution_step(proxy_hook), table=table,
        results_table=results_table or sibling_table(table, RESOLUTION_TABLE),
        extra_columns={"repair_column": repair_column} if repair_column else None,
        log=log, **options,
    )


def due_key_ranges(
    db_hook: DbApiHook, *, table: str, results_table: str, key_column: str, valid_column: str,
    batch_size: int, max_ranges: int, log: TaskLog, urls: bool = True,
) -> list[dict[str, str | None]]:
    """Key ranges ``{"after": k0, "upto": k1}`` covering the due keys of ``table``, each of
    ``batch_size`` keys or ``ceil(due / max_ranges)`` when that is more; the results and claims
    tables the ranges' tasks share are created first, before they fan out. ``urls``: whether
    the ranges' tasks ask URLs (see :func:`existence_statuses`)."""
    dialect = dialect_of(db_hook)
    staleness = resolution_staleness(urls)
    due = DueKeys(table, results_table, key_column, valid_column, staleness)
    claims = KeyClaims(claims_table_of(results_table), results_table, dialect, task_owner(), 0,
                       staleness)
    with Store(db_hook, dialect) as store:
        store.transaction(lambda cursor: prepare_tables(
            cursor, dialect, table, {"key_column": key_column, "valid_column": valid_column},
            RESOLUTION_SHAPE, claims))
    ranges: list[dict[str, str | None]] = []
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
                                 batch_size=per_range):
            ranges.append({"after": previous, "upto": page[-1][0]})
            previous = page[-1][0]
    if len(ranges) > max_ranges:  # keys became due between the count and the scan
        ranges = ranges[:max_ranges]
        ranges[-1]["upto"] = None  # the last range takes everything after its start
    log.info("%d due keys in %s: %d key ranges of up to %d keys", due_count, table,
             len(ranges), per_range)
    return ranges
