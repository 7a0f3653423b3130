"""A catalogue's DOI column in SQL: its distinct values page by page, its rows counted by reason.

Normalizing it is :mod:`airflow_doi.provider.hooks.normalize`, which reads the values through
here. Where the engine has the rules in SQL (:mod:`airflow_doi.provider.pushdown`), counting is
one ``GROUP BY``. Otherwise work is per *distinct* source value, so a catalogue where every DOI
appears ten times costs a tenth: the distinct values are numbered once into a session TEMPORARY
table (:func:`~airflow_doi.db.statements.distinct_pages`) and read page by page, each value
judged in Python by :func:`airflow_doi.native.validate` (the one implementation of the rules).
Worker memory stays bounded by the batch size.

Source values are grouped, ordered and matched byte-wise (``COLLATE BINARY`` on SQLite,
``COLLATE "C"`` on PostgreSQL): under a case-insensitive column collation ``10.1000/abc`` and
``10.1000/ABC`` stay two values, and each row gets the DOI of its own value, case kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from airflow_doi.db.statements import (
    StatementDialect,
    distinct_pages,
    native_cursor,
    quote_identifier,
)
from airflow_doi.native import validate
from airflow_doi.provider.progress import ProgressMeter, TaskLog
from airflow_doi.provider.pushdown import column_sql
from airflow_doi.syntax import Decode, Validation

__all__ = ["DoiColumn", "ReasonCounts", "StoredReasons", "ValuePages", "judge_cell"]

_EXAMPLES_PER_REASON = 3
_EXAMPLE_WIDTH = 80


def judge_cell(value: object, decode: Decode = "auto") -> Validation:
    """A cell of a DOI column judged: a number or a date in it is judged as its text, never a
    crash."""
    if value is not None and not isinstance(value, (str, bytes, bytearray)):
        value = str(value)
    return validate(value, decode=decode)


class ReasonCounts(NamedTuple):
    """Rows in all, invalid rows by reason, and a few example values of each reason."""

    total_rows: int
    reasons: Counter[str]
    examples: dict[str, list[str]]


@dataclass(frozen=True)
class DoiColumn:
    """The DOI column ``name`` of ``table`` on an open connection (``cursor`` is one of its
    cursors in ``dialect``), with the task log its progress lines go to."""

    conn: Any
    cursor: Any
    dialect: StatementDialect
    table: str
    name: str
    log: TaskLog

    @property
    def quoted(self) -> tuple[str, str]:
        """The table and the column, quoted."""
        return quote_identifier(self.table), quote_identifier(self.name)

    @property
    def binary(self) -> str:
        """The quoted column, compared byte-wise whatever its collation."""
        return f"{quote_identifier(self.name)}{self.dialect.binary_collation}"

    def distinct_values(self, verb: str, batch_size: int,
                        aggregate: tuple[str, str] | None = None,
                        where: str | None = None) -> ValuePages:
        """The column's distinct non-NULL values (of the rows ``where`` holds, ANSI), with
        ``aggregate`` beside each, ``batch_size`` at a time, counted on the ``verb`` progress
        line."""
        return ValuePages(self, verb, batch_size, aggregate, where)

    def lock_for_update(self) -> None:
        """Take the engine's lock for an ``UPDATE`` of every row, if it has one (a second
        normalize of the table, another run's, waits here until this one commits)."""
        lock = self.dialect.whole_table_update_lock
        if lock:
            native_cursor(self.cursor).execute(lock.format(table=self.dialect.quote(self.table)))

    def count_reasons_in_database(self, functions_schema: str | None,
                                  stored: StoredReasons | None = None) -> ReasonCounts:
        """One ``GROUP BY`` over the rule's reason, two example values per reason; with
        ``stored``, the stored reason of each current row (the rule only for stale ones)."""
        # In the engine's own dialect, as the generated body is: no translation.
        dialect = self.dialect
        source, table = dialect.quote(self.name), dialect.quote(self.table)
        reason = column_sql(self.conn, dialect, self.name, functions_schema)["doi_reason"]
        if stored is not None:
            reason = (f"CASE WHEN {dialect.translate(stored.stale)} THEN {reason} "
                      f"ELSE {dialect.translate(stored.reason)} END")
        cursor = native_cursor(self.cursor)
        cursor.execute(
            f"SELECT r, COUNT(*), MIN(v), MAX(v) FROM (SELECT {reason} AS r, "
            f"{source}{dialect.binary_collation} AS v FROM {table}) AS doi_reasons GROUP BY r"
        )
        counts = _Tally()
        for name, count, low, high in cursor.fetchall():
            counts.add_group(name, count, low, high)
        return counts.result()

    def count_reasons_in_worker(self, batch_size: int,
                                stored: StoredReasons | None = None) -> ReasonCounts:
        """Page by page in the worker: distinct values and their row counts, judged here;
        with ``stored``, only the stale rows' values, the current rows counted by their stored
        reason in one ``GROUP BY``."""
        table, source = self.quoted
        cursor = self.cursor
        counts = _Tally()
        stale = "1 = 1"
        if stored is not None:
            stale = stored.stale
            cursor.execute(
                f"SELECT {stored.reason}, COUNT(*), MIN({self.binary}), MAX({self.binary}) "
                f"FROM {table} WHERE NOT {stale} GROUP BY {stored.reason}"
            )
            for name, count, low, high in cursor.fetchall():
                counts.add_group(name, count, low, high)
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {stale}")
        counts.total_rows += int(cursor.fetchone()[0])
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {source} IS NULL AND {stale}")
        (null_rows,) = cursor.fetchone()
        if null_rows:
            counts.add("empty", int(null_rows), None)
        aggregate = ("COUNT(*)", self.dialect.integer_type)
        where = f"{source} IS NOT NULL AND {stale}"
        for page in self.distinct_values("validate", batch_size, aggregate, where):
            for value, count in page:
                reason = judge_cell(value).reason
                if reason is not None:
                    counts.add(reason, int(count), value)
        return counts.result()


@dataclass(frozen=True)
class StoredReasons:
    """The reason a normalize run stored in each row (``reason``, a quoted column) and which
    rows are stale (``stale``, a predicate: their stored reason is not to be trusted), ANSI."""

    reason: str
    stale: str


@dataclass
class _Tally:
    """Rows counted by reason, with a few examples of each."""

    total_rows: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, reason: str, count: int, value: object) -> None:
        """``count`` rows of ``reason``, ``value`` one of them (None: NULL)."""
        self.reasons[reason] += count
        shown = self.examples.setdefault(reason, [])
        example = "NULL" if value is None else repr(value)[:_EXAMPLE_WIDTH]
        if len(shown) < _EXAMPLES_PER_REASON and example not in shown:
            shown.append(example)

    def add_group(self, reason: object, count: object, low: object, high: object) -> None:
        """One row of a ``GROUP BY`` reason: its rows, its smallest and largest value."""
        self.total_rows += int(count)  # type: ignore[call-overload]
        if reason is None:
            return
        for value in dict.fromkeys((low, high)):
            self.add(str(reason), 0, value)
        self.reasons[str(reason)] += int(count)  # type: ignore[call-overload]

    def result(self) -> ReasonCounts:
        return ReasonCounts(self.total_rows, self.reasons, self.examples)


class ValuePages:
    """The distinct values of a :class:`DoiColumn`, page by page; each page is counted on a
    progress line (made when the first page says how many there are) once the caller is done
    with it."""

    def __init__(self, column: DoiColumn, verb: str, batch_size: int,
                 aggregate: tuple[str, str] | None, where: str | None = None) -> None:
        self.column, self.verb = column, verb
        self.batch_size, self.aggregate = batch_size, aggregate
        self.where = where
        self.progress: ProgressMeter | None = None

    def __iter__(self) -> Iterator[list[tuple[Any, ...]]]:
        column = self.column
        table, source = column.quoted
        for total, page in distinct_pages(
            column.cursor, column.dialect, value=column.binary, source=table,
            where=self.where or f"{source} IS NOT NULL", batch_size=self.batch_size,
            aggregate=self.aggregate,
        ):
            if self.progress is None:
                self.progress = ProgressMeter(f"{self.verb} {column.table}", total, column.log,
                                              unit="values")
            yield page
            self.progress.advance(len(page))
