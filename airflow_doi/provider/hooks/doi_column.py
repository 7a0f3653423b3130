"""A catalogue's DOI column in SQL: normalized into four columns, or counted by invalid reason.

Each runs in the database, or page by page in the worker.

Where the engine has the rules in SQL (:mod:`airflow_doi.provider.pushdown`), normalizing is
one ``UPDATE`` and counting one ``GROUP BY``. Otherwise work is per *distinct* source value,
so a catalogue where every DOI appears ten times costs a tenth: the distinct values are
numbered once into a session TEMPORARY table (:func:`~airflow_doi.db.statements.distinct_pages`)
and read page by page, each value judged in Python by :func:`airflow_doi.native.validate` (the
one implementation of the rules). Normalized pages go to a second temporary table with bound
parameters, applied at the end with one set-based ``UPDATE``, so the table is scanned twice,
not once per page. Worker memory stays bounded by the batch size.

Source values are grouped, ordered and matched byte-wise (``COLLATE BINARY`` on SQLite,
``COLLATE "C"`` on PostgreSQL): under a case-insensitive column collation ``10.1000/abc`` and
``10.1000/ABC`` stay two values, and each row gets the DOI of its own value, case kept.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from airflow_doi.db.install import normalized_columns
from airflow_doi.db.statements import (
    StatementDialect,
    add_missing_columns,
    distinct_pages,
    insert_values,
    native_cursor,
    quote_identifier,
)
from airflow_doi.native import validate
from airflow_doi.provider.progress import ProgressMeter, TaskLog
from airflow_doi.provider.pushdown import FUNCTIONS, column_sql
from airflow_doi.syntax import Decode, Validation

__all__ = ["DoiColumn", "ReasonCounts", "ValuePages", "normalized_columns"]

#: Prefix of the per-run staging table: a TEMPORARY table with a random suffix, so it can never
#: be (or shadow) a table of the user's, and is only ever emptied and dropped by that name.
_STAGE_PREFIX = "doi_normalize_stage_"
_EXAMPLES_PER_REASON = 3
_EXAMPLE_WIDTH = 80


def _validate_cell(value: object, decode: Decode = "auto") -> Validation:
    # A DOI column should be text; a number or a date in it is reported, never a crash.
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
                        aggregate: tuple[str, str] | None = None) -> ValuePages:
        """The column's distinct non-NULL values (with ``aggregate`` beside each), ``batch_size``
        at a time, counted on the ``verb`` progress line."""
        return ValuePages(self, verb, batch_size, aggregate)

    def add_columns(self, columns: tuple[str, str, str, str]) -> None:
        """Add the four normalized columns where missing."""
        text, boolean = self.dialect.text_type, self.dialect.boolean_type
        added = add_missing_columns(
            self.conn, self.cursor, self.table,
            dict(zip(columns, (text, text, boolean, text), strict=True)),
            case_sensitive=self.dialect.case_sensitive_identifiers,
            if_not_exists=self.dialect.name in ("postgres", "duckdb"),
        )
        if added:
            self.log.info("Added columns %s to %s", ", ".join(added), self.table)

    def lock_for_update(self) -> None:
        """Take the engine's lock for an ``UPDATE`` of every row, if it has one (a second
        normalize of the table, another run's, waits here until this one commits)."""
        lock = self.dialect.whole_table_update_lock
        if lock:
            native_cursor(self.cursor).execute(lock.format(table=self.dialect.quote(self.table)))

    def normalize_in_database(
        self, columns: tuple[str, str, str, str], functions_schema: str | None,
    ) -> dict[str, int]:
        """One ``UPDATE`` of every row, the rules inlined (see :mod:`.pushdown`)."""
        dialect, cursor = self.dialect, self.cursor
        table, source = self.quoted
        self.add_columns(columns)
        exprs = column_sql(self.conn, dialect, self.name, functions_schema)
        assignments = ", ".join(
            f"{dialect.quote(target)} = {exprs[name]}"
            for target, name in zip(columns, FUNCTIONS, strict=True)
        )
        # Written in the engine's own dialect (the generated bodies are): no translation.
        # WHERE 1 = 1: BigQuery refuses an UPDATE without a WHERE clause.
        self.lock_for_update()
        native_cursor(cursor).execute(
            f"UPDATE {dialect.quote(self.table)} SET {assignments} WHERE 1 = 1")
        self.conn.commit()
        valid = quote_identifier(columns[2])
        cursor.execute(
            f"SELECT COUNT(DISTINCT {self.binary}), "
            f"COUNT(DISTINCT CASE WHEN {valid} THEN {self.binary} END), "
            f"COUNT(*) - COUNT({source}) FROM {table}"
        )
        distinct, valid_values, null_rows = (int(n or 0) for n in cursor.fetchone())
        return {"distinct_values": distinct, "valid_values": valid_values,
                "null_rows": null_rows}

    def normalize_in_worker(
        self, columns: tuple[str, str, str, str], decode: Decode, batch_size: int,
    ) -> dict[str, int]:
        """Page by page: distinct values judged here, staged, applied with one ``UPDATE``."""
        dialect, cursor, conn = self.dialect, self.cursor, self.conn
        table, source = self.quoted
        doi, key, valid, reason = (quote_identifier(c) for c in columns)
        text, boolean = dialect.text_type, dialect.boolean_type
        self.add_columns(columns)
        stage = f"{_STAGE_PREFIX}{uuid.uuid4().hex[:16]}"
        cursor.execute(
            f"CREATE TEMPORARY TABLE {stage} (raw {text}{dialect.stage_key}, doi {text}, "
            f"doi_key {text}, doi_valid {boolean}, doi_reason {text})"
        )
        if dialect.stage_index:
            native_cursor(cursor).execute(dialect.stage_index.format(stage=stage))
        conn.commit()
        pages = self.distinct_values("normalize", batch_size)
        valid_values = 0
        for page in pages:
            rows = []
            for (raw,) in page:
                result = _validate_cell(raw, decode)
                valid_values += result.valid
                rows.append((raw, result.doi, result.key, result.valid, result.reason))
            insert_values(cursor, dialect, f"INSERT INTO {stage}", rows,
                          types=(text, text, text, boolean, text))
            conn.commit()
        # One pass over the table for every page at once, as the push-down's UPDATE does.
        self.lock_for_update()
        cursor.execute(_apply_statement(dialect, table, self.binary, (doi, key, valid, reason),
                                        stage))
        cursor.execute(
            f"UPDATE {table} SET {doi} = NULL, {key} = NULL, {valid} = {dialect.marks()}, "
            f"{reason} = {dialect.marks()} WHERE {source} IS NULL",
            (False, "empty"),
        )
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {source} IS NULL")
        (null_rows,) = cursor.fetchone()
        cursor.execute(f"DROP TABLE {stage}")
        conn.commit()
        if pages.progress is not None:
            pages.progress.report(force=True)
        return {
            "distinct_values": pages.progress.done if pages.progress is not None else 0,
            "valid_values": valid_values,
            "null_rows": int(null_rows),
        }

    def count_reasons_in_database(self, functions_schema: str | None) -> ReasonCounts:
        """One ``GROUP BY`` over the rule's reason, two example values per reason."""
        # In the engine's own dialect, as the generated body is: no translation.
        dialect = self.dialect
        source, table = dialect.quote(self.name), dialect.quote(self.table)
        reason = column_sql(self.conn, dialect, self.name, functions_schema)["doi_reason"]
        cursor = native_cursor(self.cursor)
        cursor.execute(
            f"SELECT r, COUNT(*), MIN(v), MAX(v) FROM (SELECT {reason} AS r, "
            f"{source}{dialect.binary_collation} AS v FROM {table}) AS doi_reasons GROUP BY r"
        )
        reasons: Counter[str] = Counter()
        examples: dict[str, list[str]] = {}
        total_rows = 0
        for name, count, low, high in cursor.fetchall():
            total_rows += int(count)
            if name is None:
                continue
            reasons[str(name)] += int(count)
            shown = [repr(v)[:_EXAMPLE_WIDTH] for v in dict.fromkeys((low, high)) if v is not None]
            examples[str(name)] = shown or ["NULL"]
        return ReasonCounts(total_rows, reasons, examples)

    def count_reasons_in_worker(self, batch_size: int) -> ReasonCounts:
        """Page by page in the worker: distinct values and their row counts, judged here."""
        table, source = self.quoted
        cursor = self.cursor
        reasons: Counter[str] = Counter()
        examples: dict[str, list[str]] = {}
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        (total_rows,) = (int(n) for n in cursor.fetchone())
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {source} IS NULL")
        (null_rows,) = cursor.fetchone()
        if null_rows:
            reasons["empty"] += int(null_rows)
            examples["empty"] = ["NULL"]
        aggregate = ("COUNT(*)", self.dialect.integer_type)
        for page in self.distinct_values("validate", batch_size, aggregate):
            for value, count in page:
                reason = _validate_cell(value).reason
                if reason is None:
                    continue
                reasons[reason] += int(count)
                shown = examples.setdefault(reason, [])
                if len(shown) < _EXAMPLES_PER_REASON:
                    shown.append(repr(value)[:_EXAMPLE_WIDTH])
        return ReasonCounts(total_rows, reasons, examples)


class ValuePages:
    """The distinct values of a :class:`DoiColumn`, page by page; each page is counted on a
    progress line (made when the first page says how many there are) once the caller is done
    with it."""

    def __init__(self, column: DoiColumn, verb: str, batch_size: int,
                 aggregate: tuple[str, str] | None) -> None:
        self.column, self.verb = column, verb
        self.batch_size, self.aggregate = batch_size, aggregate
        self.progress: ProgressMeter | None = None

    def __iter__(self) -> Iterator[list[tuple[Any, ...]]]:
        column = self.column
        table, source = column.quoted
        for total, page in distinct_pages(
            column.cursor, column.dialect, value=column.binary, source=table,
            where=f"{source} IS NOT NULL", batch_size=self.batch_size, aggregate=self.aggregate,
        ):
            if self.progress is None:
                self.progress = ProgressMeter(f"{self.verb} {column.table}", total, column.log,
                                              unit="values")
            yield page
            self.progress.advance(len(page))


def _apply_statement(
    dialect: StatementDialect, table: str, source: str, targets: tuple[str, str, str, str],
    stage: str,
) -> str:
    """Copy the staged values onto the catalogue rows whose source value matches.

    ``source`` is the quoted source column with the dialect's binary collation, which takes
    precedence over the column's own in the comparison.
    """
    stage_columns = ("doi", "doi_key", "doi_valid", "doi_reason")
    if dialect.update_from:
        assignments = ", ".join(
            f"{target} = m.{staged}"
            for target, staged in zip(targets, stage_columns, strict=True)
        )
        return (
            f"UPDATE {table} SET {assignments} FROM {stage} AS m "
            f"WHERE {table}.{source} = m.raw"
        )
    assignments = ", ".join(
        f"{target} = (SELECT m.{staged} FROM {stage} AS m WHERE {table}.{source} = m.raw)"
        for target, staged in zip(targets, stage_columns, strict=True)
    )
    return f"UPDATE {table} SET {assignments} WHERE {source} IN (SELECT raw FROM {stage})"
