"""The agencies' data files into ``doi_metadata``: the catalogue's due keys found there.

:func:`fill_from_snapshots` reads the catalogue's due keys (valid, no fresh row in the
metadata table: the engine's own join), scans the data files for them
(:mod:`airflow_doi.metadata.snapshot`, in parallel over members) and upserts each found key's
row, many at once (arrays bound as one statement on PostgreSQL and DuckDB). A table beside the
metadata table, ``<metadata_table>_sources``, records each finished member with its rows, in
the same commit: a task killed halfway is retried from the members it had not finished, and
once every member of the files is finished, later runs do not read them again (the keys that
become due afterwards go to the APIs, by the operator's next step).
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
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

__all__ = ["SOURCES_SHAPE", "SnapshotSummary", "fill_from_snapshots", "sources_table_of"]

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
        found: set[str] = set()

        def read(cursor: Any) -> None:
            cursor.execute(f"SELECT {quote_identifier('member')} FROM "
                           f"{quote_identifier(self.sources_table)} WHERE "
                           f"{quote_identifier('scan')} = {self.dialect.marks()}", [scan])
            found.update(str(row[0]) for row in cursor.fetchall())

        self.store.transaction(read)
        return found

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


def _due_keys(store: Store, due: DueKeys, doi_column: str) -> dict[str, str]:
    """Every due key of the catalogue with its DOI as written (the first, in the engine's
    order), read in one statement: the engine joins the catalogue to the metadata table."""
    dialect = store.dialect
    found: dict[str, str] = {}

    def read(cursor: Any) -> None:
        source, where, params = due.parts(datetime.now(timezone.utc), dialect, None, None)
        key = f"c.{quote_identifier(due.key_column)}"
        cursor.execute(f"SELECT {key}, MIN(c.{quote_identifier(doi_column)}) FROM {source} "
                       f"WHERE {where} GROUP BY {key}", params)
        while True:
            rows = cursor.fetchmany(50_000)
            if not rows:
                break
            found.update((str(k), str(d)) for k, d in rows)

    store.transaction(read)
    return found


def fill_from_snapshots(
    db_hook: DbApiHook, config: MetadataConfig, *, table: str, metadata_table: str,
    key_column: str = "doi_key", doi_column: str = "doi", valid_column: str = "doi_valid",
    log: TaskLog,
) -> SnapshotSummary:
    """Store the rows of the catalogue's due keys that ``config.snapshot``'s data files hold
    (see the module docstring); raises ``ValueError`` (a
    :class:`~airflow_doi.metadata.snapshot.files.SnapshotError`) for files that cannot be
    used, before anything is written."""
    from airflow_doi.metadata.snapshot import index_snapshots
    from airflow_doi.metadata.snapshot.records import RowSettings
    from airflow_doi.metadata.snapshot.source import answer_from_snapshots, scan_digest
    from airflow_doi.resolver.result import expires_after

    for name in (table, metadata_table, key_column, doi_column, valid_column):
        quote_identifier(name)
    summary = SnapshotSummary()
    started = time.monotonic()
    index = index_snapshots(config.snapshot)
    summary.date = index.date
    if not len(index):
        reasons = "; ".join(f"{s.shown}: {s.detail}" for s in index.skipped[:5]) or "empty"
        raise ValueError(f"snapshot {', '.join(config.snapshot)}: no data file found ({reasons})")
    # The files themselves name the scan: a retry of this task resumes it, and once it is
    # finished later runs leave the files be.
    scan_id = scan_digest((m.identity for m in [*index.members, *index.streams]), "files")
    dialect = dialect_of(db_hook)
    sources_table = sources_table_of(metadata_table)
    with Store(db_hook, dialect) as store:
        prepare_metadata_tables(store, table, metadata_table, {
            "key_column": key_column, "doi_column": doi_column, "valid_column": valid_column})
        target = _TableStore(store, metadata_table, sources_table, index.date)
        finished = target.finished_members(scan_id)
        members = len(index)
        if members and len(finished) >= members and all(
                m.identity in finished for m in index.members):
            summary.already_read = True
            log.info("The data files (%d members) were read into %s before: keys due now are "
                     "left to the APIs", members, metadata_table)
            return summary
        due = _due_keys(store, DueKeys(table, metadata_table, key_column, valid_column),
                        doi_column)
        summary.due_keys = len(due)
        if not due:
            log.info("Nothing due in %s: the data files are not read", table)
            return summary
        log.info("Reading %d members (%s) of %s for %d due keys of %s", members,
                 _size(index.total_bytes), ", ".join(config.snapshot), len(due), table)
        now = datetime.now(timezone.utc)
        settings = RowSettings(index.date or now, expires_after(now, config.metadata_ttl),
                               config.max_csl_bytes)
        meter = _Meter(log)
        try:
            answers = answer_from_snapshots(
                config.snapshot, due, settings=settings,
                workers=config.snapshot_workers or None, store=target, scan_id=scan_id,
                progress=meter, index=index, keep=False)
        except BaseException:
            target.close(flush=False)  # what was handed over is written; the rest read again
            raise
        target.close()
    stats = answers.stats
    summary.found_keys = stats.found
    summary.left_to_apis = len(due) - summary.found_keys
    summary.members, summary.members_resumed = stats.members, stats.resumed
    summary.records = stats.records
    summary.skipped = dict(stats.problems)
    summary.seconds = time.monotonic() - started
    log.info("Data files: %d members read (%d by an earlier try), %d records in %s; %d of %d "
             "due keys found and stored in %s, %d left to the APIs%s", stats.members,
             stats.resumed, stats.records, format_duration(summary.seconds), summary.found_keys,
             len(due), metadata_table, summary.left_to_apis,
             "; skipped: " + ", ".join(f"{n} {r}" for r, n in stats.problems.most_common())
             if stats.problems else "")
    for name, detail in stats.stopped[:10]:
        log.warning("Data file member %s: %s", name, detail)
    return summary


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

