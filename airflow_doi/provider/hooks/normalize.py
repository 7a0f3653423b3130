"""One normalize run over a table: which rows it rewrites, and how, in the database or the worker.

A run writes the DOI, its key, its valid flag, its reason and the fingerprint
(:mod:`airflow_doi.db.incremental`) of only the *stale* rows: rows added or edited since the
last run, rows written under other rules or another ``decode``, rows whose columns someone
emptied. A run on an unchanged table reads it once and writes nothing; ``full_refresh``
rewrites every row, as the first run does.

In the database (:mod:`airflow_doi.provider.pushdown`) it is one ``UPDATE`` of the stale rows,
which parses each cell once where the engine can bind a value per row: the DOI is computed
first and the key, the flag and the reason follow from it (the reason is parsed again only
where there is no DOI):

* PostgreSQL: a row-valued ``SET (...) = (SELECT ...)`` over one-row derived tables
  (``OFFSET 0`` keeps the planner from copying the DOI's expression into each use). The stale
  rows are found first, without a lock (``ctid`` s into a temporary table); the ``UPDATE``
  then takes ``SHARE ROW EXCLUSIVE`` (two runs on one table take turns; readers pass) only to
  rewrite those rows, so the catalogue's own writers wait for the small write, not for the scan;
* DuckDB: ``UPDATE ... FROM`` a derived table of the stale rows joined on ``rowid``;
* MariaDB: one ``UPDATE`` whose assignments read the DOI assigned before them (MariaDB assigns
  left to right unless ``SIMULTANEOUS_ASSIGNMENT`` is set; then each column is computed from the
  source); the task's session writes under ``READ COMMITTED`` (both paths), so that the rows
  an ``UPDATE`` scans but leaves are not locked;
* SQLite: its registered functions share each row's parse (:mod:`airflow_doi.db.sqlite`);
* warehouses: the four generated bodies, only over the stale rows.

In the worker, the distinct values of the stale rows are judged page by page
(:class:`~airflow_doi.provider.hooks.doi_column.DoiColumn`) into a staging table and applied
to the stale rows with one set-based ``UPDATE``. Both write the same values, and the engine
computes the fingerprint in both.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Final

from airflow_doi.db.incremental import (
    NormalizedColumns,
    fingerprint_sql,
    fingerprint_tag,
    stale_sql,
)
from airflow_doi.db.statements import (
    StatementDialect,
    add_missing_columns,
    insert_values,
    native_cursor,
    quote_identifier,
)
from airflow_doi.provider.hooks.doi_column import DoiColumn, judge_cell
from airflow_doi.provider.pushdown import FUNCTIONS, column_sql, from_normalized
from airflow_doi.syntax import Decode

__all__ = ["NormalizeRun"]

#: Prefix of the per-run staging table: a TEMPORARY table with a random suffix, so it can never
#: be (or shadow) a table of the user's, and is only ever emptied and dropped by that name.
_STAGE_PREFIX = "doi_normalize_stage_"
#: Prefix of the PostgreSQL run's list of stale rows (``ctid``s), a TEMPORARY table as well.
_STALE_PREFIX = "doi_stale_rows_"
#: Above this many stale rows, PostgreSQL rewrites them in one scan of the table instead of by
#: their ``ctid``s (a first run, a full refresh, a new release's rules): the write is the whole
#: table then, and so is the lock.
_CTID_ROWS: Final[int] = 200_000
#: Engines where a run first looks for one stale row (a scan that stops at the first), so that a
#: run on an unchanged table neither builds nor sends its ``UPDATE``. Not the warehouses, which
#: bill each scan: there the ``UPDATE`` of no row costs what the look would.
_LOOK_FIRST: Final[frozenset[str]] = frozenset({"duckdb", "sqlite", "mysql"})
#: The alias of the table an ``UPDATE`` rewrites, where its columns must be told apart from a
#: derived table's.
_T = "doi__t"
#: MariaDB's sql_mode flag that makes the assignments of an ``UPDATE`` read the old values.
_SIMULTANEOUS = "SIMULTANEOUS_ASSIGNMENT"


@dataclass(frozen=True)
class _Rows:
    """Which rows a statement rewrites: the stale ones (``stale``, ANSI; None: every row), by
    their ``ctid``s where PostgreSQL listed them first (the TEMPORARY table ``listed``), and how
    many when that is known (PostgreSQL), else None."""

    stale: str | None
    listed: str | None = None
    count: int | None = None


class NormalizeRun:
    """Normalize the DOI column of a :class:`DoiColumn` into ``columns``, writing only the
    stale rows unless ``full_refresh``."""

    def __init__(self, column: DoiColumn, columns: NormalizedColumns, decode: Decode,
                 full_refresh: bool) -> None:
        self.column, self.columns, self.decode = column, columns, decode
        self.dialect: StatementDialect = column.dialect
        self.fingerprint = self._fingerprint()
        self.full = full_refresh or self.fingerprint is None
        #: The table had no fingerprints: every row is stale, no need to look for them first.
        self.new_fingerprints = False

    # --- the run ----------------------------------------------------------------------------

    def run(self, *, in_database: bool, functions_schema: str | None,
            batch_size: int) -> dict[str, Any]:
        """Add the columns where missing, find the stale rows, rewrite them; the summary
        (``rows_written``, ``full_refresh``, ``other_settings_rows``)."""
        log = self.column.log
        if self.fingerprint is None:
            log.warning("%s has no hash known to the operator, so no row can be told current: "
                        "every run rewrites every row", self.dialect.name)
        self.new_fingerprints = self._add_columns()
        if self.dialect.name == "mysql":
            self._read_committed()
        with self._stale_rows() as rows:
            # Rows written under other settings are stale: none when no row is (a run with
            # nothing to do scans the table once).
            other = (0 if self.full or self.new_fingerprints or rows.count == 0
                     else self._rows_under_other_settings())
            if other:
                log.info("%d rows of %s were normalized under other rules or another decode: "
                         "they are rewritten", other, self.column.table)
            if rows.count == 0:
                written = 0
            elif in_database:
                written = self._in_database(rows, functions_schema)
            else:
                written = self._in_worker(rows, batch_size)
        return {"rows_written": written, "full_refresh": self.full,
                "other_settings_rows": other}

    def _add_columns(self) -> bool:
        """Add the columns where missing; whether the fingerprint was among them."""
        text, boolean = self.dialect.text_type, self.dialect.boolean_type
        types = dict(zip(self.columns.written, (text, text, boolean, text, text), strict=True))
        if self.fingerprint is None:
            types.pop(self.columns.fingerprint)
        added = add_missing_columns(
            self.column.conn, self.column.cursor, self.column.table, types,
            case_sensitive=self.dialect.case_sensitive_identifiers,
            if_not_exists=self.dialect.name in ("postgres", "duckdb"),
        )
        if added:
            self.column.log.info("Added columns %s to %s", ", ".join(added), self.column.table)
        return self.columns.fingerprint in added

    def _rows_under_other_settings(self) -> int:
        """Rows whose fingerprint names other rules or another ``decode`` (a scan that reads
        one short column: no hash)."""
        cursor = self.column.cursor
        fingerprint = quote_identifier(self.columns.fingerprint)
        cursor.execute(
            f"SELECT COUNT(*) FROM {quote_identifier(self.column.table)} WHERE {fingerprint} "
            f"IS NOT NULL AND {fingerprint} NOT LIKE {self.dialect.marks()}",
            (f"{fingerprint_tag(self.decode)}%",),
        )
        (count,) = cursor.fetchone()
        self.column.conn.commit()
        return int(count or 0)

    @contextmanager
    def _stale_rows(self) -> Iterator[_Rows]:
        """The rows this run rewrites. PostgreSQL lists them first, without a lock (a scan
        that reads the source and the five columns): the ``UPDATE`` then rewrites only those,
        so the lock it takes lasts as long as its write; no stale row, no lock at all."""
        if self.full:
            yield _Rows(None)
            return
        stale = stale_sql(self.columns.quoted(), self._known_fingerprint())
        if self.new_fingerprints:
            # Every row is stale, unless another run filled them meanwhile (two first runs at
            # once): the UPDATE's own condition tells, without a look or a list first.
            yield _Rows(stale)
            return
        if self.dialect.name in _LOOK_FIRST:
            cursor = self.column.cursor
            cursor.execute(f"SELECT 1 FROM {quote_identifier(self.column.table)} "
                           f"WHERE {stale} LIMIT 1")
            found = cursor.fetchall()
            self.column.conn.commit()
            yield _Rows(stale, count=None if found else 0)
            return
        if self.dialect.name != "postgres":
            yield _Rows(stale)
            return
        listed = f"{_STALE_PREFIX}{uuid.uuid4().hex[:16]}"
        cursor = native_cursor(self.column.cursor)
        # The planner reckons that nearly every row passes the fingerprint's "<>", so it
        # never reads the table in parallel for fear of passing them all back; on a nightly
        # run almost none do. Passing a row back is costed at nothing for this statement
        # alone: the server's own max_parallel_workers_per_gather still decides (a million
        # rows after a full rewrite: 0.28 s -> 0.17 s on two cores).
        cursor.execute("SET LOCAL parallel_tuple_cost = 0")
        cursor.execute(f"CREATE TEMPORARY TABLE {listed} AS SELECT ctid AS tid "
                       f"FROM {quote_identifier(self.column.table)} WHERE {stale}")
        count = int(cursor.rowcount)
        self.column.conn.commit()
        try:
            yield _Rows(stale, listed if count <= _CTID_ROWS else None, count)
        finally:
            with suppress(Exception):  # a broken session: its TEMPORARY table ends with it
                cursor.execute(f"DROP TABLE IF EXISTS {listed}")
                self.column.conn.commit()

    def _fingerprint(self, qualifier: str | None = None) -> str | None:
        """The fingerprint of each row's source (ANSI), its column after ``qualifier.``."""
        source = self.columns.quoted(qualifier).source
        return fingerprint_sql(self.dialect, source, self.decode)

    def _known_fingerprint(self, qualifier: str | None = None) -> str:
        fingerprint = self._fingerprint(qualifier)
        assert fingerprint is not None  # only asked for where the engine has one
        return fingerprint

    def _where(self, rows: _Rows, qualifier: str | None = None) -> str:
        """``rows`` as a condition (ANSI) over the table, its columns after ``qualifier.``."""
        if rows.stale is None:
            return "1 = 1"
        stale = stale_sql(self.columns.quoted(qualifier), self._known_fingerprint(qualifier))
        if rows.listed is None:
            return stale
        target = qualifier or quote_identifier(self.column.table)
        return f"{target}.ctid = ANY(ARRAY(SELECT tid FROM {rows.listed})) AND {stale}"

    # --- in the database -------------------------------------------------------------------

    def _in_database(self, rows: _Rows, functions_schema: str | None) -> int:
        engine = self.dialect.name
        if engine == "postgres":
            statement = self._postgres(rows)
        elif engine == "duckdb":
            statement = self._duckdb(rows)
        elif engine == "mysql":
            statement = self._mariadb(rows, functions_schema)
        else:
            statement = self._each_from_source(rows, functions_schema)
        cursor = native_cursor(self.column.cursor)
        if engine == "postgres":
            # JIT compiles the statement's large expressions for each run (a million rows: the
            # first run 5.8-6.2 s without, 6.2-8.9 s with; the hand-written UPDATE the same).
            cursor.execute("SET LOCAL jit = off")
        self.column.lock_for_update()
        cursor.execute(statement)
        written = _rows_written(cursor, self.dialect)
        self.column.conn.commit()
        return written

    def _assigned(self) -> list[str]:
        """The five columns as the engine names them in ``SET`` (the fingerprint last, when
        there is one)."""
        names = self.columns.written if self.fingerprint is not None else self.columns.written[:4]
        return [self.dialect.quote(name) for name in names]

    def _native(self, ansi: str) -> str:
        return self.dialect.translate(ansi)

    def _postgres(self, rows: _Rows) -> str:
        """``SET (...) = (SELECT ...)``: the DOI once per row, the rest from it."""
        d = self.dialect
        exprs = column_sql(self.column.conn, d, self.columns.source, qualifier=_T)
        derived = from_normalized("postgres", "doi__n")
        assert derived is not None
        key, reserved = derived
        fingerprint = self._known_fingerprint(_T)
        return (
            f"UPDATE {d.quote(self.column.table)} AS {_T} SET ({', '.join(self._assigned())}) = "
            f"(SELECT doi__n, {key}, doi__r IS NULL, doi__r, {fingerprint} FROM "
            f"(SELECT doi__n, CASE WHEN doi__n IS NULL THEN {exprs['doi_reason']} "
            f"WHEN {reserved} THEN 'reserved_suffix' END AS doi__r FROM "
            f"(SELECT {exprs['doi_normalize']} AS doi__n OFFSET 0) AS doi__a OFFSET 0) AS doi__b)"
            f" WHERE {self._where(rows, _T)}"
        )

    def _duckdb(self, rows: _Rows) -> str:
        """``UPDATE ... FROM`` the stale rows' DOIs, computed once each, joined on ``rowid``."""
        d = self.dialect
        table = d.quote(self.column.table)
        source = column_sql(self.column.conn, d, self.columns.source)
        reason = column_sql(self.column.conn, d, self.columns.source, qualifier=_T)["doi_reason"]
        derived = from_normalized("duckdb", "doi__n", "doi__s")
        assert derived is not None
        key, reserved = derived
        doi, key_col, valid, why, fingerprint = self._assigned()
        return (
            f"UPDATE {table} AS {_T} SET {doi} = doi__s.doi__n, {key_col} = {key}, "
            f"{valid} = (doi__s.doi__n IS NOT NULL AND NOT {reserved}), "
            f"{why} = CASE WHEN doi__s.doi__n IS NULL THEN {reason} "
            f"WHEN {reserved} THEN 'reserved_suffix' END, {fingerprint} = doi__s.doi__fp "
            f"FROM (SELECT rowid AS doi__rid, {source['doi_normalize']} AS doi__n, "
            f"{self._known_fingerprint()} AS doi__fp FROM {table} WHERE {self._where(rows)}) "
            f"AS doi__s WHERE {_T}.rowid = doi__s.doi__rid"
        )

    def _read_committed(self) -> None:
        """MariaDB: this task's session writes under ``READ COMMITTED``, so that the rows its
        ``UPDATE`` scans and leaves are not locked (InnoDB's semi-consistent read): the
        catalogue's writers wait for the rows written, not for the scan. Not where binary logs
        are statement-based (they need ``REPEATABLE READ``)."""
        cursor = native_cursor(self.column.cursor)
        cursor.execute("SELECT @@GLOBAL.log_bin, @@SESSION.binlog_format")
        log_bin, binlog_format = cursor.fetchone()
        self.column.conn.commit()
        if not (int(log_bin or 0) and str(binlog_format).upper() == "STATEMENT"):
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")

    def _mariadb(self, rows: _Rows, functions_schema: str | None) -> str:
        """Left to right: the DOI, then the reason and the rest from it; under
        ``SIMULTANEOUS_ASSIGNMENT`` each from the source."""
        cursor = native_cursor(self.column.cursor)
        cursor.execute("SELECT @@SESSION.sql_mode")
        (sql_mode,) = cursor.fetchone()
        self.column.conn.commit()
        if _SIMULTANEOUS in str(sql_mode).upper():
            return self._each_from_source(rows, functions_schema)
        d = self.dialect
        exprs = column_sql(self.column.conn, d, self.columns.source, functions_schema)
        doi, key_col, valid, reason, fingerprint = self._assigned()
        derived = from_normalized("mysql", self.columns.doi)
        assert derived is not None
        key, reserved = derived
        return (
            f"UPDATE {d.quote(self.column.table)} SET {doi} = {exprs['doi_normalize']}, "
            f"{reason} = CASE WHEN {doi} IS NULL THEN {exprs['doi_reason']} "
            f"WHEN {reserved} THEN 'reserved_suffix' END, {valid} = ({reason} IS NULL), "
            f"{key_col} = {key}, {fingerprint} = {self._native(self._known_fingerprint())} "
            f"WHERE {self._native(self._where(rows))}"
        )

    def _each_from_source(self, rows: _Rows, functions_schema: str | None) -> str:
        """Each column from the source (SQLite's functions share the parse; warehouses)."""
        d = self.dialect
        exprs = column_sql(self.column.conn, d, self.columns.source, functions_schema)
        assigned = self._assigned()
        assignments = [f"{target} = {exprs[name]}"
                       for target, name in zip(assigned[:4], FUNCTIONS, strict=True)]
        if self.fingerprint is not None:
            assignments.append(f"{assigned[4]} = {self._native(self._known_fingerprint())}")
        # WHERE 1 = 1 when every row is rewritten: BigQuery refuses an UPDATE without WHERE.
        return (f"UPDATE {d.quote(self.column.table)} SET {', '.join(assignments)} "
                f"WHERE {self._native(self._where(rows))}")

    # --- in the worker ---------------------------------------------------------------------

    def _in_worker(self, rows: _Rows, batch_size: int) -> int:
        """The stale rows' distinct values judged here, staged, applied with one ``UPDATE``."""
        column, dialect, cursor, conn = self.column, self.dialect, self.column.cursor, \
            self.column.conn
        text, boolean = dialect.text_type, dialect.boolean_type
        stage = f"{_STAGE_PREFIX}{uuid.uuid4().hex[:16]}"
        cursor.execute(
            f"CREATE TEMPORARY TABLE {stage} (raw {text}{dialect.stage_key}, doi {text}, "
            f"doi_key {text}, doi_valid {boolean}, doi_reason {text})"
        )
        if dialect.stage_index:
            native_cursor(cursor).execute(dialect.stage_index.format(stage=stage))
        conn.commit()
        source = quote_identifier(self.columns.source)
        pages = column.distinct_values("normalize", batch_size,
                                       where=f"{source} IS NOT NULL AND {self._where(rows)}")
        for page in pages:
            staged = []
            for (raw,) in page:
                result = judge_cell(raw, self.decode)
                staged.append((raw, result.doi, result.key, result.valid, result.reason))
            insert_values(cursor, dialect, f"INSERT INTO {stage}", staged,
                          types=(text, text, text, boolean, text))
            conn.commit()
        table = quote_identifier(column.table)
        column.lock_for_update()
        cursor.execute(self._apply(stage, rows))
        written = _rows_written(cursor, dialect)
        fingerprint = (f", {quote_identifier(self.columns.fingerprint)} = "
                       f"{self._known_fingerprint(table)}" if self.fingerprint is not None else "")
        c = self.columns.quoted()
        cursor.execute(
            f"UPDATE {table} SET {c.doi} = NULL, {c.key} = NULL, {c.valid} = {dialect.marks()}, "
            f"{c.reason} = {dialect.marks()}{fingerprint} "
            f"WHERE {source} IS NULL AND {self._where(rows, table)}",
            (False, "empty"),
        )
        written += _rows_written(cursor, dialect)
        cursor.execute(f"DROP TABLE {stage}")
        conn.commit()
        if pages.progress is not None:
            pages.progress.report(force=True)
        return written

    def _apply(self, stage: str, rows: _Rows) -> str:
        """Copy the staged values onto the stale rows whose source value matches, byte-wise
        (the binary collation takes precedence over the column's own in the comparison)."""
        dialect = self.dialect
        table = quote_identifier(self.column.table)
        source = f"{table}.{self.column.binary}"
        c = self.columns.quoted()
        staged = ("doi", "doi_key", "doi_valid", "doi_reason")
        targets = (c.doi, c.key, c.valid, c.reason)
        fingerprint = (f", {c.fingerprint} = {self._known_fingerprint(table)}"
                       if self.fingerprint is not None else "")
        where = self._where(rows, table)
        if dialect.update_from:
            assignments = ", ".join(f"{target} = m.{name}"
                                    for target, name in zip(targets, staged, strict=True))
            return (f"UPDATE {table} SET {assignments}{fingerprint} FROM {stage} AS m "
                    f"WHERE {source} = m.raw AND {where}")
        assignments = ", ".join(
            f"{target} = (SELECT m.{name} FROM {stage} AS m WHERE {source} = m.raw)"
            for target, name in zip(targets, staged, strict=True)
        )
        return (f"UPDATE {table} SET {assignments}{fingerprint} "
                f"WHERE {quote_identifier(self.column.name)} IN (SELECT raw FROM {stage}) "
                f"AND {where}")


def _rows_written(cursor: Any, dialect: StatementDialect) -> int:
    """The rows the last ``UPDATE`` wrote (DuckDB answers with a row holding the count)."""
    if dialect.name == "duckdb":
        row = native_cursor(cursor).fetchone()
        return int(row[0]) if row else 0
    return max(int(cursor.rowcount), 0)
