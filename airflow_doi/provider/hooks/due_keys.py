"""The due-keys engine of resolve and enrich: keys asked a batch at a time, answers kept by key.

A results table beside the catalogue *is* the cache (one row per comparison key, ``doi_key``
primary key, with an ``expires_at``). A run asks only about the distinct valid keys of the
catalogue that have no row there yet, or whose row has expired (errors never get an expiry, so
they are asked again next run). Keys are taken in key order, a batch at a time, each batch
claimed first (:mod:`airflow_doi.provider.hooks.claims`), then upserted and committed: a task
that fails or is killed resumes on retry after the last stored batch, and tasks running at once
never ask for one key twice. What is asked, and where its answers go, is a :class:`KeyStep`
(:func:`~airflow_doi.provider.hooks.resolution.resolution_step`,
:func:`~airflow_doi.provider.hooks.enrichment.enrichment_step`).
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from airflow.sdk import get_current_context

from airflow_doi.db.statements import (
    StatementDialect,
    distinct_pages,
    quote_identifier,
    require_columns,
    upsert_rows,
)
from airflow_doi.provider.hooks.claims import Claim, KeyClaims, Staleness, claims_table_of
from airflow_doi.provider.hooks.sql import connect, dialect_of
from airflow_doi.provider.hooks.tables import TableShape
from airflow_doi.provider.progress import ProgressMeter, TaskLog, format_duration
from airflow_doi.words import plural

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook

    from airflow_doi.resolver import ProgressEvent, ResolverConfig, ResolverStats

__all__ = [
    "DueKeys",
    "DueKeysOptions",
    "DueKeysSummary",
    "KeyStep",
    "ProxyUnavailableError",
    "Store",
    "TaskLog",
    "answer_row",
    "default_lease",
    "key_range",
    "prepare_tables",
    "process_due_keys",
    "running_task",
    "task_owner",
    "unanswered",
]

T = TypeVar("T")

#: Pages of keys: ``(due keys in all, [(key, DOI), ...])``.
Pages = Iterable[tuple[int, list[tuple[Any, ...]]]]


def unanswered(status: str, http_status: int | None) -> bool:
    """An ``error`` the service said nothing final about: no answer, throttled, or 5xx."""
    return status == "error" and (http_status is None or http_status in (403, 429)
                                  or http_status >= 500)


def answer_row(key: str, doi: str, result: Any, columns: Sequence[str],
               dialect: StatementDialect) -> tuple[Any, ...]:
    """The results table row of one key: ``columns`` are ``doi_key``, ``doi`` (the answer's
    DOI, else the one asked), then attributes of ``result``; datetimes in UTC, bound as the
    dialect binds them."""
    values = (getattr(result, column) for column in columns[2:])
    return (key, result.doi or doi, *(
        dialect.timestamp(value.astimezone(timezone.utc)) if isinstance(value, datetime)
        else value for value in values))


@dataclass(frozen=True)
class KeyStep:
    """What a run asks about each key and where the answers go."""

    #: The verb of progress lines ("resolve"), its -ing and past forms for the log
    #: ("Resolving", "resolved").
    verb: str
    gerund: str
    past: str
    #: What failing is called in the error that ends the task ("the DOI proxy").
    service: str
    #: Where the requests go and how fast, for the first log line.
    description: str
    #: The results table (``doi_key`` first).
    shape: TableShape
    #: The attribute of a result that holds its status.
    status_field: str
    #: ``ask(dois, progress, stats, known)``: one result per DOI, in order; never raises for
    #: a DOI. ``known``: the stored value of :attr:`known` for the keys that have one.
    ask: Callable[[list[str], Callable[[ProgressEvent], None], ResolverStats, dict[str, Any]],
                  Sequence[Any]]
    #: Counters for one batch (``gave_up``, ``requests``, ``retries``).
    new_stats: Callable[[], ResolverStats]
    #: Seconds a claim on ``batch_size`` keys holds by default.
    lease: Callable[[int], float]
    #: The requests counted for this task so far, by every try (None: not counted).
    counted: Callable[[], int | None] = lambda: None
    #: A column of the results table whose stored value is passed on to ``ask`` for each key
    #: of a batch (enrichment: who registered the DOI, found by an earlier run); None: none.
    known: str | None = None
    #: When a stored answer is due again (by default: once expired).
    staleness: Staleness = field(default_factory=Staleness)

    def status(self, result: Any) -> str:
        """The status a result is counted under."""
        status: str = getattr(result, self.status_field)
        return status

    def unanswered(self, result: Any) -> bool:
        """True for an ``error`` the service said nothing final about."""
        return unanswered(self.status(result), result.http_status)

    def row(self, key: str, doi: str, result: Any, dialect: StatementDialect) -> tuple[Any, ...]:
        """The results table row of one key."""
        return answer_row(key, doi, result, self.shape.columns, dialect)


def default_lease(config: ResolverConfig, batch_size: int, *, rate: float | None = None,
                  requests_per_key: int = 1) -> float:
    """Seconds a claim holds its keys: twice the time a batch takes at ``rate`` (default: the
    configured rate), plus the breaker's give-up time and the retries of each key's requests,
    and at least 5 minutes."""
    per_request = config.timeout * config.max_attempts
    return max(300.0, 2 * batch_size / (rate or config.rate) + config.breaker_give_up
               + requests_per_key * per_request)


class ProxyUnavailableError(RuntimeError):
    """A whole batch failed: the task stops (and Airflow retries it) instead of grinding on."""


@dataclass
class DueKeysSummary:
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
    #: Requests the earlier tries of this task sent (failed or killed ones, whose own
    #: summaries are lost): counted in Redis with the connection's ``redis_url``, else 0.
    requests_by_earlier_tries: int = 0
    #: Keys answered and requests sent by each source (enrichment: ``crossref``,
    #: ``datacite``, ``negotiation``, ``which_ra``), where the step counts them.
    by_source: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "due_keys": self.due_keys,
            "stored_keys": self.stored_keys,
            "stored_elsewhere": self.stored_elsewhere,
            "waited_for": self.waited_for,
            "batches": self.batches,
            "requests": self.requests,
            "requests_by_earlier_tries": self.requests_by_earlier_tries,
            "retries": self.retries,
            "elapsed_seconds": round(self.elapsed, 3),
            "by_status": dict(self.by_status),
            **({"by_source": self.by_source} if self.by_source else {}),
        }


class DueKeysOptions(TypedDict, total=False):
    """The optional arguments of :func:`process_due_keys`, passed on by the steps' own
    functions (``resolve_due_keys(..., batch_size=100)``)."""

    key_column: str
    doi_column: str
    valid_column: str
    batch_size: int
    after: str | None
    upto: str | None
    owner: str | None
    lease: float | None


def key_range(key: str, dialect: StatementDialect, after: str | None,
              upto: str | None) -> tuple[str, list[str]]:
    """``" AND key > ? AND key <= ?"`` for the bounds given, and their values."""
    sql, values = "", []
    if after is not None:
        sql, values = f" AND {key} > {dialect.marks()}", [after]
    if upto is not None:
        sql, values = sql + f" AND {key} <= {dialect.marks()}", [*values, upto]
    return sql, values


@dataclass(frozen=True)
class DueKeys:
    """The query of the catalogue's valid keys that have no fresh row in the results table."""

    table: str
    results_table: str
    key_column: str
    valid_column: str
    staleness: Staleness = field(default_factory=Staleness)

    def parts(
        self, now: datetime, dialect: StatementDialect, after: str | None, upto: str | None
    ) -> tuple[str, str, list[Any]]:
        key = f"c.{quote_identifier(self.key_column)}"
        source = (
            f"{quote_identifier(self.table)} AS c LEFT JOIN {quote_identifier(self.results_table)}"
            f' AS r ON r."doi_key" = {key}'
        )
        stale, values = self.staleness.condition(dialect, now, "r.")
        where = (
            f"c.{quote_identifier(self.valid_column)} = {dialect.marks()} AND {key} IS NOT NULL "
            f'AND (r."doi_key" IS NULL OR {stale})'
        )
        in_range, bounds = key_range(key, dialect, after, upto)
        return source, where + in_range, [True, *values, *bounds]

    def count(self, cursor: Any, dialect: StatementDialect, now: datetime,
              after: str | None = None, upto: str | None = None) -> int:
        source, where, params = self.parts(now, dialect, after, upto)
        key = f"c.{quote_identifier(self.key_column)}"
        cursor.execute(f"SELECT COUNT(DISTINCT {key}) FROM {source} WHERE {where}", params)
        return int(cursor.fetchone()[0])


def running_task() -> str | None:
    """The running task as ``dag/run/task/map index`` (the same for each of its tries), or
    None outside a task."""
    try:
        ti = get_current_context()["ti"]
        return f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{ti.map_index}"
    except Exception:  # not in a task: plain Python
        return None


def task_owner() -> str:
    """Who claims keys: the running task (:func:`running_task`: a retry takes its killed
    try's claims back at once), else host and process."""
    return running_task() or f"{socket.gethostname()}:{os.getpid()}"


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
class Store:
    """The catalogue's database as the resolve step uses it.

    DuckDB lets one process hold a file: there each step opens the file, does its statements
    and closes it again, so that tasks resolving side by side take turns at it between their
    requests. Elsewhere one connection serves the whole task.
    """

    db_hook: DbApiHook
    dialect: StatementDialect
    _held: Any = None

    @property
    def per_step(self) -> bool:
        return self.dialect.name == "duckdb"

    def __enter__(self) -> Store:
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


def process_due_keys(
    db_hook: DbApiHook,
    step: KeyStep,
    *,
    table: str,
    results_table: str,
    key_column: str = "doi_key",
    doi_column: str = "doi",
    valid_column: str = "doi_valid",
    extra_columns: dict[str, str] | None = None,
    batch_size: int = 1000,
    after: str | None = None,
    upto: str | None = None,
    owner: str | None = None,
    lease: float | None = None,
    log: TaskLog,
) -> DueKeysSummary:
    """Ask ``step`` about the due keys of ``table`` (optionally only ``after < key <= upto``)
    and store its answers in ``results_table``, one row per key.

    Each batch's keys are claimed first (:mod:`airflow_doi.provider.hooks.claims`), as ``owner``
    (default :func:`task_owner`) for ``lease`` seconds (default: the step's): keys another
    task holds are put off and waited for at the end, so tasks running at once never ask for
    one key twice. When the service fails (a breaker gives up, or no key of a batch got an
    answer), the answers already in are stored, the keys without one stay due (no ``error``
    row), and :class:`ProxyUnavailableError` ends the task at once. ``extra_columns`` are
    further catalogue columns checked before anything is asked.
    """
    for name in (table, results_table, key_column, doi_column, valid_column):
        quote_identifier(name)
    dialect = dialect_of(db_hook)
    due = DueKeys(table, results_table, key_column, valid_column, step.staleness)
    claims = KeyClaims(claims_table_of(results_table), results_table, dialect,
                       owner or task_owner(), lease or step.lease(batch_size), step.staleness)
    run = _Run(step, claims, table, results_table, batch_size, log)
    log.info("%s %s through %s", step.gerund, table, step.description)
    # Read before this try sends anything: what is counted already is the earlier tries'.
    run.summary.requests_by_earlier_tries = step.counted() or 0
    # extra columns too: checked now, not after hours of requests.
    columns = {"key_column": key_column, "doi_column": doi_column,
               "valid_column": valid_column, **(extra_columns or {})}
    with Store(db_hook, dialect) as store:
        store.transaction(lambda cursor: prepare_tables(
            cursor, dialect, table, {k: v for k, v in columns.items() if v}, step.shape, claims))
        with _due_pages(store, due, doi_column, batch_size, after, upto) as pages:
            for due_keys, page in pages:
                if run.progress.total == 0:
                    run.started(due_keys)
                run.batch(store, page)
        run.wait_for_elsewhere(store)
    if run.summary.due_keys == 0:
        _say_nothing_due(store, due, table, results_table, after, upto, log, step.past)
    run.finished()
    return run.summary


def prepare_tables(cursor: Any, dialect: StatementDialect, table: str, columns: dict[str, str],
                   shape: TableShape, claims: KeyClaims) -> None:
    """Check the catalogue's columns; create the results and claims tables if missing."""
    require_columns(cursor, table, columns, case_sensitive=dialect.case_sensitive_identifiers)
    shape.ensure(cursor, dialect, claims.results_table)
    claims.ensure(cursor)


@contextmanager
def _due_pages(store: Store, due: DueKeys, doi_column: str, batch_size: int,
               after: str | None, upto: str | None) -> Iterator[Pages]:
    """The due keys with a DOI each, ``batch_size`` at a time.

    They are selected once, in the database, and numbered; pages are ranges of that number (no
    re-scan of the catalogue per page, and a key stored by an earlier page is not met again).
    The numbered list is dropped on leaving, even on a raise.
    """
    dialect = store.dialect
    with store.session() as (conn, cursor):
        source, where, params = due.parts(datetime.now(timezone.utc), dialect, after, upto)
        numbered = distinct_pages(
            cursor, dialect, value=f"c.{quote_identifier(due.key_column)}", source=source,
            where=where, params=params, batch_size=batch_size,
            aggregate=(f"MIN(c.{quote_identifier(doi_column)})", dialect.text_type),
            # Committed once numbered: a claim rolled back (contention) must not take the
            # list with it, and SQLite must not hold a read lock while others write.
            filled=conn.commit,
        )
        # Where the file is let go of between steps, the list comes along.
        pages: Pages = list(numbered) if store.per_step else numbered
    with closing(numbered):
        yield pages


#: Keys a batch needs for "none of them answered" to mean that the proxy is down.
_FAILED_BATCH = 4


class _LeaseRenewal:
    """Renews a claim's lease every third of it while its requests run (a slow proxy, a
    shared rate or long backoffs must not let the keys go to another task mid-batch), on a
    connection of its own."""

    def __init__(self, db_hook: DbApiHook, claims: KeyClaims, claim: Claim) -> None:
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
    """One call of :func:`process_due_keys`: claims, requests, stores, counts."""

    #: Seconds between two looks at keys another task holds.
    poll = 2.0

    def __init__(self, step: KeyStep, claims: KeyClaims, table: str,
                 results_table: str, batch_size: int, log: TaskLog) -> None:
        self.step = step
        self.batch_size = batch_size
        self.claims = claims
        self.results_table = results_table
        self.log = log
        self.summary = DueKeysSummary()
        self.progress = ProgressMeter(f"{step.verb} {table}", 0, log, unit="keys", every=10.0)
        self.elsewhere: dict[str, str] = {}
        self.clock = time.monotonic()
        #: Whether the service has answered any request of this run (see ResolverStats).
        self.answered = False

    def started(self, due_keys: int) -> None:
        self.summary.due_keys = self.progress.total = due_keys
        self.progress.report(force=True)

    def batch(self, store: Store, page: Sequence[tuple[Any, ...]]) -> None:
        """Claim the page's keys, ask about those that are ours, store them, let go."""
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
                self._ask(store, mine, claim)
        except BaseException:
            # Let go of the keys at once (a kill leaves them to the lease): they stay due.
            with contextlib.suppress(Exception):
                store.transaction(lambda cursor: self.claims.finish(cursor, claim))
            raise

    def _ask(self, store: Store, mine: list[tuple[str, str]], claim: Claim) -> None:
        base = self.progress.done

        def on_progress(event: ProgressEvent) -> None:
            self.progress.done = base + event.done
            self.progress.report()

        step = self.step
        stats = step.new_stats()
        known = self._known(store, [k for k, _ in mine]) if step.known else {}
        stats.answered = self.answered  # a proxy that answered an earlier batch is waited for
        with _LeaseRenewal(store.db_hook, self.claims, claim):
            results = step.ask([d for _, d in mine], on_progress, stats, known)
        self.answered = self.answered or stats.answered
        # The service failed: a breaker gave up, or a batch of a few keys got no answer for
        # any of them (a lone key that keeps failing is stored as an error, not a failure).
        failed = stats.gave_up is not None or (
            len(results) >= _FAILED_BATCH and all(step.unanswered(r) for r in results))
        # Keys the service answered nothing about get no error row (errors are due anyway),
        # so the next try asks them as if never asked; its final answers are kept.
        kept = [(k, d, r) for (k, d), r in zip(mine, results, strict=True)
                if not (failed and step.unanswered(r))]
        dialect = self.claims.dialect
        rows = [step.row(k, d, r, dialect) for k, d, r in kept]

        def store_answers(cursor: Any) -> None:
            upsert_rows(cursor, dialect, self.results_table, step.shape.columns, rows,
                        key="doi_key", types=step.shape.types(dialect))
            self.claims.finish(cursor, claim)

        store.transaction(store_answers)
        self._count(stats, [r for _, _, r in kept], base + len(mine))
        if failed:
            reason = stats.gave_up or (results[-1].error if results else None)
            raise ProxyUnavailableError(
                f"{step.service} failed ({reason}); {self.summary.stored_keys} keys stored, "
                f"{len(mine) - len(rows)} keys of this batch and the ones not reached yet stay "
                "due for the next try, which asks only for those"
            )

    def _known(self, store: Store, keys: list[str]) -> dict[str, Any]:
        """The stored :attr:`KeyStep.known` of ``keys`` that have one (an expired row's too)."""
        column = quote_identifier(self.step.known or "")
        dialect = self.claims.dialect
        found: dict[str, Any] = {}

        def read(cursor: Any) -> None:
            for start in range(0, len(keys), dialect.max_params):
                chunk = keys[start:start + dialect.max_params]
                cursor.execute(
                    f'SELECT "doi_key", {column} FROM {quote_identifier(self.results_table)} '
                    f'WHERE {column} IS NOT NULL AND "doi_key" IN ({dialect.marks(len(chunk))})',
                    chunk)
                found.update((str(k), v) for k, v in cursor.fetchall())

        store.transaction(read)
        return found

    def _count(self, stats: ResolverStats, stored: list[Any], done: int) -> None:
        """Add a stored batch to the summary and the progress line."""
        summary = self.summary
        summary.batches += 1
        summary.stored_keys += len(stored)
        summary.requests += stats.requests
        summary.retries += stats.retries
        for name, count in getattr(getattr(stats, "sources", None), "as_dict", dict)().items():
            total = summary.by_source.setdefault(name, {"keys": 0, "requests": 0})
            total["keys"] += count["keys"]
            total["requests"] += count["requests"]
        summary.by_status.update(self.step.status(r) for r in stored)
        self.progress.done = done
        self.progress.report()

    def wait_for_elsewhere(self, store: Store) -> None:
        """Keys another task held when their turn came: wait until they are stored there, or
        claim and resolve them when that task lets go of them (or its lease runs out)."""
        if not self.elsewhere:
            return
        self.log.info(
            "%d due keys are being %s by another task; waiting for them (a claim "
            "holds for at most %s)", len(self.elsewhere), self.step.past,
            format_duration(self.claims.lease))
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
        # Read again at the end: a killed earlier try's last requests may be counted after
        # this try began (its process outlives the kill by a moment), and every request that
        # left is in the count, so the earlier tries' are the count less this try's own.
        counted = self.step.counted()
        if counted is not None:
            summary.requests_by_earlier_tries = max(
                summary.requests_by_earlier_tries, counted - summary.requests)
        statuses = ", ".join(f"{s}={n}" for s, n in sorted(summary.by_status.items()))
        self.log.info(
            "Stored %s in %s in %s (%s); %s, %s, %s stored by another task meanwhile, %s "
            "(%.1f keys/s)", plural(summary.stored_keys, "key"), self.results_table,
            plural(summary.batches, "batch", "batches"), statuses or "none",
            plural(summary.requests, "request"), plural(summary.retries, "retry", "retries"),
            plural(summary.stored_elsewhere, "key"), format_duration(summary.elapsed),
            summary.stored_keys / summary.elapsed if summary.elapsed else 0.0,
        )
        if summary.by_source:
            self.log.info("By source: %s", "; ".join(
                f"Which RA? {plural(c['requests'], 'request')}" if name == "which_ra"
                else f"{name} {plural(c['keys'], 'key')} in {plural(c['requests'], 'request')}"
                for name, c in summary.by_source.items()))


def _say_nothing_due(store: Store, due: DueKeys, table: str, results_table: str,
                     after: str | None, upto: str | None, log: TaskLog, past: str) -> None:
    """Why nothing was due: every valid key already has a fresh row (perhaps stored for
    another table: the results table is a cache by key, shared by the tables beside it)."""
    dialect = store.dialect
    key = quote_identifier(due.key_column)
    in_range, bounds = key_range(key, dialect, after, upto)
    with store.session() as (_, cursor):
        cursor.execute(f"SELECT COUNT(DISTINCT {key}) FROM {quote_identifier(table)} WHERE "
                       f"{quote_identifier(due.valid_column)} = {dialect.marks()} AND {key} IS NOT "
                       f"NULL{in_range}", [True, *bounds])
        valid = int(cursor.fetchone()[0])
    scope = "" if after is None and upto is None else " in this key range"
    log.info(
        "Nothing due in %s%s: %s; %s is a cache by key, shared by every table whose keys it "
        "holds, so keys %s for another table are not asked again until they expire",
        table, scope,
        f"all {valid} valid keys already have a fresh row in {results_table}" if valid
        else "it has no valid keys (run the normalize step first)", results_table, past,
    )
