"""The agencies' data files into ``doi_metadata``: the catalogue's due keys found there.

:func:`fill_from_snapshots` reads the catalogue's due keys (valid, no fresh row in the
metadata table: the engine's own join), scans the data files for them
(:mod:`airflow_doi.metadata.snapshot`, in parallel over members) and upserts each found key's
row, many at once (arrays bound as one statement on PostgreSQL and DuckDB). A table beside the
metadata table, ``<metadata_table>_sources``, records each finished member with its rows, in
the same commit: a task killed halfway is retried from the members it had not finished, and
once every member of the files is finished, later runs do not read them again for the keys
that become due afterwards: those go to the APIs, by the operator's next step.

With ``source="snapshot"`` no API is ever asked, so the files are the only place those keys can
be found: ``<metadata_table>_sources_keys`` records the keys each read of the files looked for
(committed before the read starts), and a run that finds due keys with no row that no read of
these files looked for (keys the catalogue gained since) reads the files again for just those
keys, resumable member by member like the first read; a run with no such key reads nothing.
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_doi.db.statements import (
    StatementDialect,
    bulk_upsert,
    quote_identifier,
    require_columns,
)
from airflow_doi.provider.hooks.due_keys import DueKeys, Store, answer_row
from airflow_doi.provider.hooks.enrichment import METADATA_SHAPE
from airflow_doi.provider.hooks.sql import dialect_of
from airflow_doi.provider.hooks.tables import TableShape
from airflow_doi.provider.progress import TaskLog, format_duration

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook

    from airflow_doi.metadata.config import MetadataConfig
    from airflow_doi.metadata.result import MetadataResult
    from airflow_doi.metadata.snapshot.records import MemberScan

__all__ = ["KEYS_SHAPE", "SOURCES_SHAPE", "SnapshotSummary", "fill_from_snapshots",
           "keys_table_of", "sources_table_of"]

#: The table of what filled a metadata table: one row per data file member read (and, for
#: the update streams, per harvest), ``id`` its primary key.
_SOURCE_COLUMNS = ("id", "scan", "member", "finished_at", "records", "found", "detail")


def _source_types(dialect: StatementDialect) -> tuple[str, ...]:
    text = dialect.text_type
    return (dialect.key_text, text, text, dialect.timestamp_type, dialect.integer_type,
            dialect.integer_type, text)


SOURCES_SHAPE = TableShape(
    _SOURCE_COLUMNS, _source_types, not_null=("scan", "member", "finished_at"),
    kind="sources table", writer="one DoiEnrichOperator wrote", parameter="metadata_table",
    purpose="keep the metadata (and what filled it) elsewhere",
)


#: The keys the reads of the data files looked for (``source="snapshot"``): one row per key
#: (its primary key, so that the engine finds a key's row by its index), ``scan`` the files'
#: scan (a key looked for in other files since is looked for in these again), ``lookup`` the
#: read's number (0: the first).
_KEY_COLUMNS = ("doi_key", "scan", "lookup", "asked_at")


def _key_types(dialect: StatementDialect) -> tuple[str, ...]:
    return (dialect.key_text, dialect.text_type, dialect.integer_type, dialect.timestamp_type)


KEYS_SHAPE = TableShape(
    _KEY_COLUMNS, _key_types, not_null=("scan", "lookup", "asked_at"),
    kind="keys table", writer="one DoiEnrichOperator wrote", parameter="metadata_table",
    purpose="keep the metadata (and what filled it) elsewhere",
)


def _row_id(scan: str, identity: str) -> str:
    """A sources row's key: a digest (a member's name may be thousands of characters, and
    an index entry has a size limit)."""
    return "files:" + hashlib.sha256(f"{scan}\0{identity}".encode("utf-8", "surrogatepass")
                                     ).hexdigest()[:40]


def prepare_metadata_tables(store: Store, table: str, metadata_table: str,
                            columns: dict[str, str]) -> None:
    """Check the catalogue's ``columns`` (parameter -> column) and create the metadata and
    sources tables where missing (refusing tables of those names that are not ours)."""
    dialect = store.dialect
    sources_table = sources_table_of(metadata_table)

    def prepare(cursor: Any) -> None:
        require_columns(cursor, table, columns, case_sensitive=dialect.case_sensitive_identifiers)
        METADATA_SHAPE.ensure(cursor, dialect, metadata_table)
        SOURCES_SHAPE.ensure(cursor, dialect, sources_table)

    store.transaction(prepare)


def sources_table_of(metadata_table: str) -> str:
    """``s.doi_metadata`` -> ``s.doi_metadata_sources``."""
    name = f"{metadata_table}_sources"
    quote_identifier(name)
    return name


def keys_table_of(metadata_table: str) -> str:
    """``s.doi_metadata`` -> ``s.doi_metadata_sources_keys``."""
    name = f"{metadata_table}_sources_keys"
    quote_identifier(name)
    return name


@dataclass
class SnapshotSummary:
    """What the data files gave: the operator's XCom ``snapshot`` entry."""

    due_keys: int = 0
    found_keys: int = 0
    left_to_apis: int = 0
    members: int = 0
    members_resumed: int = 0
    records: int = 0
    seconds: float = 0.0
    skipped: dict[str, int] = field(default_factory=dict)
    #: True when every member had been read by an earlier run: nothing was read.
    already_read: bool = False
    #: The files' date (their newest member's), where the update streams may start.
    date: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"due_keys": self.due_keys, "found_keys": self.found_keys,
                "left_to_apis": self.left_to_apis, "members": self.members,
                "members_resumed": self.members_resumed, "records": self.records,
                "seconds": round(self.seconds, 3), "skipped": self.skipped,
                "already_read": self.already_read,
                "date": self.date.isoformat() if self.date else None}


class _TableStore:
    """The :class:`~airflow_doi.metadata.snapshot.source.MemberStore` of a metadata table:
    finished members' rows and the members themselves, flushed together every few thousand
    rows or seconds (a kill re-reads only the members not flushed). A thread of its own, on a
    connection of its own, writes each flush while the scan goes on: the workers never wait
    for the database (two batches at most wait for it)."""

    rows_per_flush = 5000
    seconds_per_flush = 10.0

    def __init__(self, store: Store, metadata_table: str, sources_table: str,
                 date: datetime | None = None) -> None:
        self.store = store
        #: The files' date, kept with each member (the update streams start from it).
        self.date = date
        self.dialect = store.dialect
        self.metadata_table = metadata_table
        self.sources_table = sources_table
        self.rows: dict[str, tuple[Any, ...]] = {}
        self.members: list[tuple[Any, ...]] = []
        self.flushed = time.monotonic()
        self.stored = 0
        self._batches: queue.Queue[tuple[list[Any], list[Any]] | None] = queue.Queue(2)
        self._writer: threading.Thread | None = None
        self._failure: BaseException | None = None

    def finished_members(self, scan: str) -> set[str]:
        return _finished_members(self.store, self.sources_table, scan)

    def store_member(self, scan: str, member: MemberScan,
                     results: list[MetadataResult]) -> None:
        for result in results:
            key = result.key or ""
            self.rows[key] = answer_row(key, result.doi or "", result, METADATA_SHAPE.columns,
                                        self.dialect)
        detail = json.dumps({"date": self.date.isoformat() if self.date else None,
                             "newest": member.newest, "problems": dict(member.problems)},
                            sort_keys=True)
        self.members.append((_row_id(scan, member.identity), scan, member.identity,
                             self.dialect.timestamp(datetime.now(timezone.utc)), member.records,
                             len(results), detail))
        if (len(self.rows) >= self.rows_per_flush
                or time.monotonic() - self.flushed >= self.seconds_per_flush):
            self.flush()

    def flush(self) -> None:
        """Hand the rows and the members held to the writer (one transaction); raises what
        the writer met with an earlier batch."""
        if self._failure is not None:
            raise self._failure
        if not self.members and not self.rows:
            return
        batch = (list(self.rows.values()), list(self.members))
        self.rows.clear()
        self.members.clear()
        self.flushed = time.monotonic()
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_all, name="doi-snapshot-writer",
                                            daemon=True)
            self._writer.start()
        self._batches.put(batch)

    def close(self, *, flush: bool = True) -> None:
        """Wait until every batch handed over is written (with ``flush``, what is held too);
        raise what the writer met."""
        try:
            if flush:
                self.flush()
        finally:
            if self._writer is not None:
                self._batches.put(None)
                self._writer.join()
                self._writer = None
        if self._failure is not None:
            raise self._failure

    def _write_all(self) -> None:
        dialect = self.dialect
        try:
            with Store(self.store.db_hook, dialect) as store:
                while True:
                    batch = self._batches.get()
                    if batch is None:
                        return
                    if self._failure is not None:
                        continue  # drained, not written: the task fails with the first error
                    rows, members = batch

                    def write(cursor: Any, rows: list[Any] = rows,
                              members: list[Any] = members) -> None:
                        bulk_upsert(cursor, dialect, self.metadata_table,
                                    METADATA_SHAPE.columns, rows, key="doi_key",
                                    types=METADATA_SHAPE.types(dialect))
                        bulk_upsert(cursor, dialect, self.sources_table, SOURCES_SHAPE.columns,
                                    members, key="id", types=SOURCES_SHAPE.types(dialect))

                    try:
                        store.transaction(write)
                        self.stored += len(rows)
                    except BaseException as error:
                        self._failure = error
        except BaseException as error:  # its own connection failed: the scan must not wait
            self._failure = self._failure or error
            while self._batches.get() is not None:  # drained until close() says done
                pass


def _finished_members(store: Store, sources_table: str, scan: str) -> set[str]:
    """The members the scan ``scan`` finished, as the sources table holds them."""
    found: set[str] = set()

    def read(cursor: Any) -> None:
        cursor.execute(f"SELECT {quote_identifier('member')} FROM "
                       f"{quote_identifier(sources_table)} WHERE "
                       f"{quote_identifier('scan')} = {store.dialect.marks()}", [scan])
        found.update(str(row[0]) for row in cursor.fetchall())

    store.transaction(read)
    return found


def _due_keys(store: Store, due: DueKeys, doi_column: str, also: str = "",
              values: Sequence[Any] = ()) -> dict[str, str]:
    """Every due key of the catalogue with its DOI as written (the first, in the engine's
    order), read in one statement: the engine joins the catalogue (``c``) to the metadata
    table (``r``); ``also`` (``" AND ..."``, bound to ``values``) narrows them."""
    dialect = store.dialect
    found: dict[str, str] = {}

    def read(cursor: Any) -> None:
        source, where, params = due.parts(datetime.now(timezone.utc), dialect, None, None)
        key = f"c.{quote_identifier(due.key_column)}"
        cursor.execute(f"SELECT {key}, MIN(c.{quote_identifier(doi_column)}) FROM {source} "
                       f"WHERE {where}{also} GROUP BY {key}", [*params, *values])
        while True:
            rows = cursor.fetchmany(50_000)
            if not rows:
                break
            found.update((str(k), str(d)) for k, d in rows)

    store.transaction(read)
    return found


class _Lookups:
    """The keys each read of one set of data files (``files``, their scan) looked for, in the
    keys table (``source="snapshot"``). Read 0 is the first, its members recorded under the
    files' own scan; read ``n`` records its members under ``files:n`` (those of the read before
    it deleted when it starts: a finished read needs none). A read's keys are committed before
    it reads anything, so that a retry goes on with the same keys, and a key is taken as looked
    up once a read that recorded it has finished every member."""

    def __init__(self, store: Store, table: str, sources_table: str, files: str,
                 due: DueKeys, doi_column: str) -> None:
        self.store, self.table, self.sources_table = store, table, sources_table
        self.files, self.due, self.doi_column = files, due, doi_column

    def scan_of(self, number: int) -> str:
        return self.files if number == 0 else f"{self.files}:{number}"

    def latest(self) -> int | None:
        """The number of the last read whose keys are recorded (None: none is)."""
        found: list[Any] = []

        def read(cursor: Any) -> None:
            cursor.execute(f"SELECT MAX({quote_identifier('lookup')}) FROM "
                           f"{quote_identifier(self.table)} WHERE {quote_identifier('scan')} = "
                           f"{self.store.dialect.marks()}", [self.files])
            found.extend(cursor.fetchall())

        self.store.transaction(read)
        return int(found[0][0]) if found and found[0][0] is not None else None

    def _asked(self, exists: str, condition: str) -> str:
        key = f"c.{quote_identifier(self.due.key_column)}"
        return (f" AND {exists} (SELECT 1 FROM {quote_identifier(self.table)} AS k WHERE "
                f"k.{quote_identifier('doi_key')} = {key} AND k.{quote_identifier('scan')} = "
                f"{self.store.dialect.marks()}{condition})")

    def keys_of(self, number: int) -> dict[str, str]:
        """The keys read ``number`` looked for that are due still."""
        also = self._asked("EXISTS", f" AND k.{quote_identifier('lookup')} = "
                                     f"{self.store.dialect.marks()}")
        return _due_keys(self.store, self.due, self.doi_column, also, [self.files, number])

    def never_looked_up(self) -> dict[str, str]:
        """The due keys without a row that no read of these files looked for."""
        also = ' AND r."doi_key" IS NULL' + self._asked("NOT EXISTS", "")
        return _due_keys(self.store, self.due, self.doi_column, also, [self.files])

    def record(self, number: int, keys: Mapping[str, str], drop: int | None = None) -> None:
        """``keys`` as read ``number``'s, in one commit (with read ``drop``'s members)."""
        dialect = self.store.dialect
        now = dialect.timestamp(datetime.now(timezone.utc))
        rows = [(key, self.files, number, now) for key in keys]

        def write(cursor: Any) -> None:
            if drop is not None and drop > 0:
                cursor.execute(f"DELETE FROM {quote_identifier(self.sources_table)} WHERE "
                               f"{quote_identifier('scan')} = {dialect.marks()}",
                               [self.scan_of(drop)])
            bulk_upsert(cursor, dialect, self.table, KEYS_SHAPE.columns, rows, key="doi_key",
                        types=KEYS_SHAPE.types(dialect))

        self.store.transaction(write)


def _read_whole(finished: set[str], index: Any) -> bool:
    """Whether every member of the files is among ``finished``."""
    return bool(len(index)) and len(finished) >= len(index) and all(
        m.identity in finished for m in index.members)


def fill_from_snapshots(
    db_hook: DbApiHook, config: MetadataConfig, *, table: str, metadata_table: str,
    key_column: str = "doi_key", doi_column: str = "doi", valid_column: str = "doi_valid",
    log: TaskLog,
) -> SnapshotSummary:
    """Store the rows of the catalogue's due keys that ``config.snapshot``'s data files hold
    (the module docstring); ``ValueError`` for files that cannot be used, before any write."""
    from airflow_doi.metadata.snapshot.records import RowSettings
    from airflow_doi.metadata.snapshot.source import answer_from_snapshots, scan_digest
    from airflow_doi.metadata.sources import SNAPSHOT
    from airflow_doi.resolver.result import expires_after

    for name in (table, metadata_table, key_column, doi_column, valid_column):
        quote_identifier(name)
    summary = SnapshotSummary()
    started = time.monotonic()
    index = _indexed(config.snapshot)
    summary.date = index.date
    # The files themselves name the scan: a retry of this task resumes it, and once it is
    # finished later runs leave the files be (but for keys never looked up, source snapshot).
    scan_id = scan_digest((m.identity for m in [*index.members, *index.streams]), "files")
    dialect = dialect_of(db_hook)
    sources_table = sources_table_of(metadata_table)
    members = len(index)
    now = datetime.now(timezone.utc)
    settings = RowSettings(index.date or now, expires_after(now, config.metadata_ttl),
                           config.max_csl_bytes)

    def read(store: Store, scan: str, due: dict[str, str]) -> set[str]:
        """The files read for ``due`` under ``scan``, counted in the summary; the members
        the scan has finished (this run's and earlier ones')."""
        target = _TableStore(store, metadata_table, sources_table, index.date)
        try:
            answers = answer_from_snapshots(
                config.snapshot, due, settings=settings,
                workers=config.snapshot_workers or None, store=target, scan_id=scan,
                progress=_Meter(log), index=index, keep=False)
        except BaseException:
            target.close(flush=False)  # what was handed over is written; the rest read again
            raise
        target.close()
        _tally(summary, answers.stats, len(due), log, time.monotonic() - started,
               metadata_table, config.source == SNAPSHOT)
        return _finished_members(store, sources_table, scan)

    with Store(db_hook, dialect) as store:
        prepare_metadata_tables(store, table, metadata_table, {
            "key_column": key_column, "doi_column": doi_column, "valid_column": valid_column})
        due_keys = DueKeys(table, metadata_table, key_column, valid_column)
        lookups = None
        if config.source == SNAPSHOT:  # no API will ask for what the files are not asked
            keys_table = keys_table_of(metadata_table)
            store.transaction(lambda cursor: KEYS_SHAPE.ensure(cursor, dialect, keys_table))
            lookups = _Lookups(store, keys_table, sources_table, scan_id, due_keys, doi_column)
        finished = _finished_members(store, sources_table, scan_id)
        if not _read_whole(finished, index):  # the first read of the files, or its retry
            due = _due_keys(store, due_keys, doi_column)
            if not due:
                log.info("Nothing due in %s: the data files are not read", table)
                return summary
            if lookups is not None and not finished:  # its keys, before anything is read
                lookups.record(0, due)
            log.info("Reading %d members (%s) of %s for %d due keys of %s", members,
                     _size(index.total_bytes), ", ".join(config.snapshot), len(due), table)
            if not _read_whole(read(store, scan_id, due), index):
                lookups = None  # members left for the next run: it goes on with them
        elif lookups is None:
            summary.already_read = True
            log.info("The data files (%d members) were read into %s before: keys due now are "
                     "left to the APIs", members, metadata_table)
            return summary
        if lookups is not None:
            _look_up_new_keys(store, lookups, index, read, table, log)
            if not summary.due_keys:
                summary.already_read = True
                log.info("The data files (%d members) were read into %s before, for every due "
                         "key of %s without a row: nothing to read", members, metadata_table,
                         table)
    summary.seconds = time.monotonic() - started
    return summary


def _indexed(paths: Sequence[str]) -> Any:
    """The data files' index (:func:`~airflow_doi.metadata.snapshot.index_snapshots`);
    ``ValueError`` when the paths hold none."""
    from airflow_doi.metadata.snapshot import index_snapshots

    index = index_snapshots(paths)
    if not len(index):
        reasons = "; ".join(f"{s.shown}: {s.detail}" for s in index.skipped[:5]) or "empty"
        raise ValueError(f"snapshot {', '.join(paths)}: no data file found ({reasons})")
    return index


def _tally(summary: SnapshotSummary, stats: Any, due: int, log: TaskLog, seconds: float,
           metadata_table: str, snapshot_only: bool) -> None:
    """One read of the files for ``due`` keys, added to ``summary`` and said in the log."""
    summary.due_keys += due
    summary.found_keys += stats.found
    summary.left_to_apis += due - stats.found
    summary.members += stats.members
    summary.members_resumed += stats.resumed
    summary.records += stats.records
    for reason, count in stats.problems.items():
        summary.skipped[reason] = summary.skipped.get(reason, 0) + count
    log.info("Data files: %d members read (%d by an earlier try), %d records in %s; %d of "
             "%d keys found and stored in %s, %d %s%s", stats.members, stats.resumed,
             stats.records, format_duration(seconds), stats.found, due, metadata_table,
             due - stats.found, "not in the files (source snapshot: no API is asked)"
             if snapshot_only else "left to the APIs",
             "; skipped: " + ", ".join(f"{n} {r}" for r, n in stats.problems.most_common())
             if stats.problems else "")
    for name, detail in stats.stopped[:10]:
        log.warning("Data file member %s: %s", name, detail)


def _look_up_new_keys(store: Store, lookups: _Lookups, index: Any,
                      read: Callable[[Store, str, dict[str, str]], set[str]], table: str,
                      log: TaskLog) -> None:
    """With the first read finished (``source="snapshot"``): the last later read finished
    if a kill stopped it, then one more for the due keys without a row that no read of the
    files looked for (the catalogue's new keys)."""
    latest = lookups.latest()
    if latest:  # a later read: finished, or gone on with
        scan = lookups.scan_of(latest)
        finished = _finished_members(store, lookups.sources_table, scan)
        if not _read_whole(finished, index):
            # Its own keys only: a key come due since waits for a read of its own (another
            # task may be reading members for these keys alone right now).
            keys = lookups.keys_of(latest)
            if keys:
                log.info("Going on with read %d of the data files (%d members finished) for "
                         "the %d of its keys still due", latest, len(finished), len(keys))
                if not _read_whole(read(store, scan, keys), index):
                    return  # members left for the next run: it goes on with them
    new = lookups.never_looked_up()
    if not new:
        return
    number = (latest or 0) + 1
    log.info("%d due keys of %s have no row and were never looked up in these data files (%s): "
             "source snapshot asks no API, so the files are read again for just these keys",
             len(new), table, "added to the catalogue since the files were read"
             if latest is not None else "no record of the keys the files were read for: read "
             "before that record was kept, or with another source")
    lookups.record(number, new, drop=latest)
    read(store, lookups.scan_of(number), new)


class _Meter:
    """Progress lines for the task log, at most every 30 seconds."""

    def __init__(self, log: TaskLog) -> None:
        self.log = log
        self.last = float("-inf")

    def __call__(self, event: Any) -> None:
        now = time.monotonic()
        if now - self.last < 30 and event.bytes_done < event.bytes_total:
            return
        self.last = now
        self.log.info("Data files: %d/%d members, %s of %s (%.1f%%), %d records, %d keys found, "
                      "ETA %s", event.members_done, event.members, _size(event.bytes_done),
                      _size(event.bytes_total),
                      100 * event.bytes_done / event.bytes_total if event.bytes_total else 100,
                      event.records, event.found, format_duration(event.eta))


def _size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if count < 1000 or unit == "TB":
            return f"{count:,.1f} {unit}" if unit != "B" else f"{int(count)} B"
        count /= 1000
    return f"{count} B"

