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

import contextlib
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_doi.provider.claims import Claim, KeyClaims, claims_table_of
from airflow_doi.provider.operators.base import DoiSqlOperator, connect, dialect_of, sql_hook
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
    from airflow_doi.resolver import ProgressEvent, ResolutionResult, ResolverConfig

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
T = TypeVar("T")


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
    #: Due keys another task stored while this one ran (so not asked here).
    stored_elsewhere: int = 0
    #: Due keys another task held when their turn came (waited for at the end).
    waited_for: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "due_keys": self.due_keys,
            "stored_keys": self.stored_keys,
            "stored_elsewhere": self.stored_elsewhere,
            "waited_for": self.waited_for,
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


def key_range(key: str, dialect: Dialect, after: str | None,
              upto: str | None) -> tuple[str, list[str]]:
    """``" AND key > ? AND key <= ?"`` for the bounds given, and their values."""
    sql, values = "", []
    if after is not None:
        sql, values = f" AND {key} > {dialect.p()}", [after]
    if upto is not None:
        sql, values = sql + f" AND {key} <= {dialect.p()}", [*values, upto]
    return sql, values


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
        in_range, bounds = key_range(key, dialect, after, upto)
        return source, where + in_range, [True, dialect.timestamp(now), *bounds]

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


def task_owner() -> str:
    """Who claims keys: the running task (DAG, run, task, map index: the same for each of its
    tries, so a retry takes its killed try's claims back at once), else host and process."""
    try:
        from airflow.sdk import get_current_context

        ti = get_current_context()["ti"]
        return f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{ti.map_index}"
    except Exception:  # not in a task: plain Python
        import os
        import socket

        return f"{socket.gethostname()}:{os.getpid()}"


def default_lease(config: ResolverConfig, batch_size: int) -> float:
    """Seconds a claim holds its keys: twice the time a batch takes at the configured rate,
    plus the breaker's give-up time and one request's retries, and at least 5 minutes."""
    per_request = config.timeout * config.max_attempts
    return max(300.0, 2 * batch_size / config.rate + config.breaker_give_up + per_request)


_CONTENTION_TRIES = 8
_CONTENTION = ("deadlock", "could not serialize", "database is locked", "lock wait timeout",
               "conflict on", "transaction conflict", "write-write conflict",
               # PostgreSQL: two sessions creating one table at once ("IF NOT EXISTS" races).
               "pg_type_typname_nsp_index", "already exists")


def _contention(error: BaseException) -> bool:
    """True for an engine's "two writers met, try again" error (never our own refusals)."""
    if isinstance(error, ValueError):
        return False
    text = str(error).lower()
    return any(mark in text for mark in _CONTENTION)


@dataclass
class _Store:
    """The catalogue's database as the resolve step uses it.

    DuckDB lets one process hold a file: there each step opens the file, does its statements
    and closes it again, so that tasks resolving side by side take turns at it between their
    requests. Elsewhere one connection serves the whole task.
    """

    db_hook: DbApiHook
    dialect: Dialect
    _held: Any = None

    @property
    def per_step(self) -> bool:
        return self.dialect.name == "duckdb"

    def __enter__(self) -> _Store:
        if not self.per_step:
            self._held = connect(self.db_hook)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    def transaction(self, work: Callable[[Any], T]) -> T:
        """``work(cursor)`` in one transaction, committed; tried again (rolled back first)
        when the engine reports contention between concurrent writers (a deadlock on MariaDB,
        a serialization failure, a busy SQLite file, a DuckDB write conflict)."""
        for attempt in range(1, _CONTENTION_TRIES + 1):
            try:
                with self.session() as (conn, cursor):
                    try:
                        value = work(cursor)
                        conn.commit()
                        return value
                    except BaseException:
                        with contextlib.suppress(Exception):
                            conn.rollback()
                        raise
            except Exception as error:
                if attempt == _CONTENTION_TRIES or not _contention(error):
                    raise
                time.sleep(random.uniform(0.05, 0.25) * attempt)
        raise AssertionError("unreachable")

    @contextmanager
    def session(self) -> Iterator[tuple[Any, Any]]:
        """``(connection, cursor)`` for one step; the caller commits."""
        if self._held is not None:
            yield self._held, self.dialect.cursor(self._held)
            return
        with closing(connect(self.db_hook)) as conn:
            yield conn, self.dialect.cursor(conn)


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
    """Resolve the due keys of ``table`` (optionally only ``after < key <= upto``); when the
    caller will repair ``repair_column`` afterwards, that column is checked first too.

    Each batch's keys are claimed first (:mod:`airflow_doi.provider.claims`), as ``owner``
    (default :func:`task_owner`) for ``lease`` seconds (default :func:`default_lease`): keys
    another task holds are put off and waited for at the end, so tasks running at once never
    ask for one key twice. When the proxy fails (the breaker gives up, or every key of a batch
    ends ``error``), the answers already in are stored, the keys without one stay due (no
    ``error`` row), and :class:`ProxyUnavailableError` ends the task at once.

    The engine behind the operator and the mapped tasks; usable from plain Python too.
    """
    from airflow_doi.provider.hooks.doi_proxy import redact_url

    results_table = results_table or sibling_table(table, RESOLUTION_TABLE)
    for name in (table, results_table, key_column, doi_column, valid_column):
        quote_identifier(name)
    dialect = dialect_of(db_hook)
    due = _DueKeys(table, results_table, key_column, valid_column)
    config = proxy_hook.get_config()
    claims = KeyClaims(claims_table_of(results_table), results_table, dialect,
                       owner or task_owner(), lease or default_lease(config, batch_size))
    run = _Run(proxy_hook, claims, table, results_table, batch_size, log)
    log.info("Resolving %s through %s at %.1f requests/s (concurrency %d)",
             table, redact_url(config.base_url), config.rate, config.concurrency)
    with _Store(db_hook, dialect) as store:
        # repair_column too: checked now, not after hours of resolving.
        columns = {"key_column": key_column, "doi_column": doi_column,
                   "valid_column": valid_column, "repair_column": repair_column}
        store.transaction(lambda cursor: _prepare(
            cursor, dialect, table, {k: v for k, v in columns.items() if v}, claims))
        with store.session() as (conn, cursor):
            source, where, params = due.parts(datetime.now(timezone.utc), dialect, after, upto)
            key = f"c.{quote_identifier(key_column)}"
            # The due keys are selected once, in the database, and numbered; pages are ranges
            # of that number (no re-scan of the catalogue per page, and a key stored by an
            # earlier page is not met again).
            numbered = distinct_pages(
                cursor, dialect, value=key, source=source, where=where, params=params,
                page_size=batch_size,
                aggregate=(f"MIN(c.{quote_identifier(doi_column)})", dialect.text_type),
                # Committed once numbered: a claim rolled back (contention) must not take the
                # list with it, and SQLite must not hold a read lock while others write.
                filled=conn.commit,
            )
            # Where the file is let go of between steps, the list comes along.
            pages: Iterable[tuple[int, list[tuple[Any, ...]]]] = (
                list(numbered) if store.per_step else numbered)
        with closing(numbered):  # closed (its table dropped) even on a raise
            for due_keys, page in pages:
                if run.progress.total == 0:
                    run.started(due_keys)
                run.batch(store, page)
        run.wait_for_elsewhere(store)
    if run.summary.due_keys == 0:
        _say_nothing_due(store, due, table, results_table, after, upto, log)
    run.finished()
    return run.summary


def _prepare(cursor: Any, dialect: Dialect, table: str, columns: dict[str, str],
             claims: KeyClaims) -> None:
    """Check the catalogue's columns; create the results and claims tables if missing."""
    require_columns(cursor, table, columns, case_sensitive=dialect.case_sensitive_identifiers)
    ensure_resolution_table(cursor, dialect, claims.results_table)
    claims.ensure(cursor)


#: Keys a batch needs for "none of them answered" to mean that the proxy is down.
_FAILED_BATCH = 4


def _unanswered(result: ResolutionResult) -> bool:
    """An ``error`` the proxy said nothing final about: no answer, throttled, or 5xx."""
    status = result.http_status
    return result.status == "error" and (status is None or status in (403, 429)
                                         or status >= 500)


class _LeaseRenewal:
    """Renews a claim's lease every third of it while its requests run (a slow proxy, a
    shared rate or long backoffs must not let the keys go to another task mid-batch), on a
    connection of its own."""

    def __init__(self, db_hook: DbApiHook, claims: KeyClaims, claim: Claim) -> None:
        import threading

        self.db_hook, self.claims, self.claim = db_hook, claims, claim
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="doi-claim-lease", daemon=True)

    def __enter__(self) -> _LeaseRenewal:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        dialect = self.claims.dialect
        while not self._stop.wait(self.claims.lease / 3):
            try:
                with closing(connect(self.db_hook)) as conn:
                    self.claims.renew(dialect.cursor(conn), self.claim,
                                      datetime.now(timezone.utc))
                    conn.commit()
            except Exception:  # the next renewal, or the lease itself, covers a miss
                continue


class _Run:
    """One call of :func:`resolve_due_keys`: claims, requests, stores, counts."""

    #: Seconds between two looks at keys another task holds.
    poll = 2.0

    def __init__(self, proxy_hook: DoiProxyHook, claims: KeyClaims, table: str,
                 results_table: str, batch_size: int, log: TaskLog) -> None:
        self.proxy_hook = proxy_hook
        self.batch_size = batch_size
        self.claims = claims
        self.results_table = results_table
        self.log = log
        self.summary = ResolveSummary()
        self.progress = Progress(f"resolve {table}", 0, log, unit="keys", every=10.0)
        self.elsewhere: dict[str, str] = {}
        self.clock = time.monotonic()

    def started(self, due_keys: int) -> None:
        self.summary.due_keys = self.progress.total = due_keys
        self.progress.report(force=True)

    def batch(self, store: _Store, page: Sequence[tuple[Any, ...]]) -> None:
        """Claim the page's keys, resolve those that are ours, store them, let go."""
        dois = {str(k): str(d) for k, d in page}
        claim = store.transaction(
            lambda cursor: self.claims.claim(cursor, list(dois), datetime.now(timezone.utc)))
        if claim.mine:  # stored by another task just before our claim: let go, not asked
            store.transaction(
                lambda cursor: self.claims.drop_fresh(cursor, claim, datetime.now(timezone.utc)))
        self.summary.stored_elsewhere += len(claim.fresh)
        for key in claim.elsewhere:
            self.elsewhere[key] = dois[key]
        self.progress.done += len(claim.fresh)
        mine = [(k, d) for k, d in dois.items() if k in claim.mine]
        try:
            if mine:
                self._resolve(store, mine, claim)
        except BaseException:
            # Let go of the keys at once (a kill leaves them to the lease): they stay due.
            with contextlib.suppress(Exception):
                store.transaction(lambda cursor: self.claims.finish(cursor, claim))
            raise

    def _resolve(self, store: _Store, mine: list[tuple[str, str]], claim: Claim) -> None:
        from airflow_doi.resolver import ResolverStats

        base = self.progress.done

        def on_progress(event: ProgressEvent) -> None:
            self.progress.done = base + event.done
            self.progress.report()

        stats = ResolverStats()
        with _LeaseRenewal(store.db_hook, self.claims, claim):
            results = self.proxy_hook.resolve([d for _, d in mine], progress=on_progress,
                                              stats=stats)
        # The proxy failed: the breaker gave up, or a batch of a few keys got no answer for
        # any of them (a lone key that keeps failing is stored as an error, not a failure).
        failed = stats.gave_up is not None or (
            len(results) >= _FAILED_BATCH and all(_unanswered(r) for r in results))
        # Keys the proxy answered nothing about get no error row (errors are due anyway),
        # so the next try asks them as if never asked; its final answers are kept.
        kept = [(k, d, r) for (k, d), r in zip(mine, results, strict=True)
                if not (failed and _unanswered(r))]
        dialect = self.claims.dialect
        rows = [_row(k, d, r, dialect) for k, d, r in kept]

        def store_answers(cursor: Any) -> None:
            upsert_rows(cursor, dialect, self.results_table, RESOLUTION_COLUMNS, rows,
                        key="doi_key", types=resolution_types(dialect))
            self.claims.finish(cursor, claim)

        store.transaction(store_answers)
        summary = self.summary
        summary.batches += 1
        summary.stored_keys += len(rows)
        summary.requests += stats.requests
        summary.retries += stats.retries
        summary.by_status.update(r.status for _, _, r in kept)
        self.progress.done = base + len(mine)
        self.progress.report()
        if failed:
            reason = stats.gave_up or (results[-1].error if results else None)
            raise ProxyUnavailableError(
                f"the DOI proxy failed ({reason}); {summary.stored_keys} keys stored, "
                f"{len(mine) - len(rows)} keys of this batch and the ones not reached yet stay "
                "due for the next try, which asks only for those"
            )

    def wait_for_elsewhere(self, store: _Store) -> None:
        """Keys another task held when their turn came: wait until they are stored there, or
        claim and resolve them when that task lets go of them (or its lease runs out)."""
        if not self.elsewhere:
            return
        self.log.info(
            "%d due keys are being resolved by another task; waiting for them (a claim "
            "holds for at most %s)", len(self.elsewhere), format_duration(self.claims.lease))
        self.summary.waited_for = len(self.elsewhere)
        while self.elsewhere:
            time.sleep(self.poll)
            waiting = sorted(self.elsewhere.items())
            self.elsewhere = {}
            for start in range(0, len(waiting), self.batch_size):
                self.batch(store, waiting[start:start + self.batch_size])

    def finished(self) -> None:
        summary = self.summary
        summary.elapsed = time.monotonic() - self.clock
        statuses = ", ".join(f"{s}={n}" for s, n in sorted(summary.by_status.items()))
        self.log.info(
            "Stored %d keys in %s in %d batches (%s); %d requests, %d retries, %d keys "
            "stored by another task meanwhile, %s (%.1f keys/s)",
            summary.stored_keys, self.results_table, summary.batches, statuses or "none",
            summary.requests, summary.retries, summary.stored_elsewhere,
            format_duration(summary.elapsed),
            summary.stored_keys / summary.elapsed if summary.elapsed else 0.0,
        )


def _say_nothing_due(store: _Store, due: _DueKeys, table: str, results_table: str,
                     after: str | None, upto: str | None, log: TaskLog) -> None:
    """Why nothing was due: every valid key already has a fresh row (perhaps stored for
    another table: the results table is a cache by key, shared by the tables beside it)."""
    dialect = store.dialect
    key = quote_identifier(due.key_column)
    in_range, bounds = key_range(key, dialect, after, upto)
    with store.session() as (_, cursor):
        cursor.execute(f"SELECT COUNT(DISTINCT {key}) FROM {quote_identifier(table)} WHERE "
                       f"{quote_identifier(due.valid_column)} = {dialect.p()} AND {key} IS NOT "
                       f"NULL{in_range}", [True, *bounds])
        valid = int(cursor.fetchone()[0])
    scope = "" if after is None and upto is None else " in this key range"
    log.info(
        "Nothing due in %s%s: %s; %s is a cache by key, shared by every table whose keys it "
        "holds, so keys resolved for another table are not asked again until they expire",
        table, scope,
        f"all {valid} valid keys already have a fresh row in {results_table}" if valid
        else "it has no valid keys (run the normalize step first)", results_table,
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
    due = _DueKeys(table, results_table, key_column, valid_column)
    ranges: list[dict[str, str | None]] = []
    # The tables the mapped tasks share are created here, before they fan out.
    claims = KeyClaims(claims_table_of(results_table), results_table, dialect, task_owner(), 0)
    with _Store(db_hook, dialect) as store:
        store.transaction(lambda cursor: _prepare(
            cursor, dialect, table, {"key_column": key_column, "valid_column": valid_column},
            claims))
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
        :mod:`airflow_doi.provider.operators.repairs`). Off by default.
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
            from airflow_doi.provider.operators.repairs import store_repairs

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
