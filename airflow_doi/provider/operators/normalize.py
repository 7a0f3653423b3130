"""``DoiNormalizeOperator``: add the normalized DOI columns to a catalogue table.

For a source column ``doi_column`` it writes ``doi`` (the normalized DOI, case kept),
``doi_key`` (the comparison key), ``doi_valid`` and ``doi_reason`` (why not, per
:data:`airflow_doi.syntax.REASONS`); the prefix ``doi`` is configurable.

Where the engine has the rules in SQL (:mod:`.pushdown`), all of it is one ``UPDATE`` in the
database. Otherwise (``mode="python"``, or an engine without generated SQL) work is per
*distinct* source value, so a catalogue where every DOI appears ten times costs a tenth: the
distinct values are numbered once into a session TEMPORARY table
(:func:`~airflow_doi.db.statements.distinct_pages`), read page by page, validated in Python by
:func:`airflow_doi.syntax.validate` (the one implementation of the rules), written to a second
temporary table with bound parameters, and applied at the end with one set-based ``UPDATE``,
so the table is scanned twice, not once per page. Worker memory stays bounded by the page
size. A re-run (after a failure or not) recomputes every value from the source column; the
result is the same however often it runs.

Source values are grouped, ordered and matched byte-wise (``COLLATE BINARY`` on SQLite,
``COLLATE "C"`` on PostgreSQL): under a case-insensitive column collation ``10.1000/abc`` and
``10.1000/ABC`` stay two values, and each row gets the DOI of its own value, case kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import closing
from typing import Any, get_args

from airflow_doi.db.statements import (
    StatementDialect,
    add_missing_columns,
    distinct_pages,
    fold_identifier,
    insert_values,
    native_cursor,
    quote_identifier,
    require_columns,
)
from airflow_doi.native import validate
from airflow_doi.provider.hooks.sql import connect, dialect_of
from airflow_doi.provider.operators.base import DoiSqlOperator
from airflow_doi.provider.progress import Progress
from airflow_doi.provider.pushdown import FUNCTIONS, check_mode, column_sql, plan
from airflow_doi.syntax import Decode, Validation

__all__ = ["DoiNormalizeOperator", "normalized_columns"]

#: Prefix of the per-run staging table: a TEMPORARY table with a random suffix, so it can never
#: be (or shadow) a table of the user's, and is only ever emptied and dropped by that name.
_STAGE_PREFIX = "doi_normalize_stage_"


def _stage_name() -> str:
    import uuid

    return f"{_STAGE_PREFIX}{uuid.uuid4().hex[:16]}"


def normalized_columns(prefix: str = "doi") -> tuple[str, str, str, str]:
    """The four output column names for a prefix: DOI, key, valid flag, reason."""
    return prefix, f"{prefix}_key", f"{prefix}_valid", f"{prefix}_reason"


_DECODE_CHOICES: tuple[str, ...] = get_args(Decode)


def _decode_choice(decode: object) -> Decode:
    """``decode`` checked against :data:`~airflow_doi.syntax.Decode` (may come from a template)."""
    if decode not in _DECODE_CHOICES:
        raise ValueError(f"decode must be one of {', '.join(_DECODE_CHOICES)}, not {decode!r}")
    return decode  # type: ignore[return-value]


def _validate_cell(value: object, decode: Decode = "auto") -> Validation:
    # A DOI column should be text; a number or a date in it is reported, never a crash.
    if value is not None and not isinstance(value, (str, bytes, bytearray)):
        value = str(value)
    return validate(value, decode=decode)


class DoiNormalizeOperator(DoiSqlOperator):
    """Add/update ``doi``, ``doi_key``, ``doi_valid`` and ``doi_reason`` on ``table``.

    :param doi_column: the column holding the DOIs as found (any presentation form).
    :param output_prefix: name of the normalized DOI column; the others get suffixes.
    :param decode: percent-decoding rule of :func:`airflow_doi.syntax.validate`
        (``auto``, ``always`` or ``never``); templated.
    :param mode: ``auto`` (default): one ``UPDATE`` in the database where the engine has the
        rules (DuckDB, PostgreSQL, SQLite), else page by page in the worker; ``sql``: in the
        database or fail; ``python``: always in the worker. Templated. See
        :mod:`airflow_doi.provider.pushdown`.
    """

    template_fields: Sequence[str] = (
        "conn_id", "table", "batch_size", "hook_params", "doi_column", "output_prefix", "decode",
        "mode",
        "functions_schema",
    )

    def __init__(
        self, *, doi_column: str, output_prefix: str = "doi", decode: str = "auto",
        mode: str = "auto", functions_schema: str | None = None, **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.functions_schema = functions_schema
        self.doi_column = doi_column
        self.output_prefix = output_prefix
        self.decode = decode
        self.mode = mode
        if "{{" not in str(decode):
            _decode_choice(decode)  # fail at parse time when it is not templated
        if "{{" not in str(mode):
            check_mode(mode)

    def execute(self, context: Any) -> dict[str, int]:
        decode = _decode_choice(self.decode)
        columns = normalized_columns(self.output_prefix)
        functions_schema = self.functions_schema or None
        self.check_identifiers(self.doi_column, *columns, *filter(None, [functions_schema]))
        hook = self.get_db_hook()
        dialect = dialect_of(hook)

        def fold(name: str) -> str:
            return fold_identifier(name, dialect.case_sensitive_identifiers)

        if fold(self.doi_column) in {fold(column) for column in columns}:
            raise ValueError(
                f"doi_column {self.doi_column!r} would be overwritten by the normalized columns "
                f"{columns}: choose another output_prefix"
            )
        where = plan(check_mode(self.mode), dialect.name, decode, functions_schema)
        self.log.info("Normalizing %s.%s %s", self.table, self.doi_column, where.why)
        with closing(connect(hook)) as conn:
            cursor = dialect.cursor(conn)
            require_columns(cursor, self.table, {"doi_column": self.doi_column},
                            case_sensitive=dialect.case_sensitive_identifiers)
            if where.in_database:
                summary = self._normalize_in_database(
                    conn, cursor, dialect, columns, functions_schema)
            else:
                summary = self._normalize(conn, cursor, dialect, columns, decode)
        self.log.info(
            "Normalized %s: %d distinct values (%d valid), %d empty rows",
            self.table, summary["distinct_values"], summary["valid_values"], summary["null_rows"],
        )
        self.emit_assets(context, self.table)
        return summary

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table``, writes the four columns of ``table``, each from ``doi_column``."""
        from airflow_doi.provider.lineage import dataset, operator_lineage

        hook, connection = self.lineage_source()
        source = dataset(hook, connection, self.table)
        columns = normalized_columns(self.output_prefix)
        target = dataset(hook, connection, self.table, {c: [self.doi_column] for c in columns},
                         (source.namespace, source.name))
        return operator_lineage([source], [target])

    def _add_columns(
        self, conn: Any, cursor: Any, dialect: StatementDialect, columns: tuple[str, ...]
    ) -> None:
        text, boolean = dialect.text_type, dialect.boolean_type
        added = add_missing_columns(
            conn, cursor, self.table, dict(zip(columns, (text, text, boolean, text), strict=True)),
            case_sensitive=dialect.case_sensitive_identifiers,
            if_not_exists=dialect.name in ("postgres", "duckdb"),
        )
        if added:
            self.log.info("Added columns %s to %s", ", ".join(added), self.table)

    def _normalize_in_database(
        self, conn: Any, cursor: Any, dialect: StatementDialect, columns: tuple[str, str, str, str],
        functions_schema: str | None,
    ) -> dict[str, int]:
        """One ``UPDATE`` of every row, the rules inlined (see :mod:`.pushdown`)."""
        table, source = quote_identifier(self.table), quote_identifier(self.doi_column)
        binary = f"{source}{dialect.binary_collation}"
        self._add_columns(conn, cursor, dialect, columns)
        exprs = column_sql(conn, dialect, self.doi_column, functions_schema)
        assignments = ", ".join(
            f"{dialect.quote(target)} = {exprs[name]}"
            for target, name in zip(columns, FUNCTIONS, strict=True)
        )
        # Written in the engine's own dialect (the generated bodies are): no translation.
        # WHERE 1 = 1: BigQuery refuses an UPDATE without a WHERE clause.
        self._lock_for_update(cursor, dialect)
        native_cursor(cursor).execute(
            f"UPDATE {dialect.quote(self.table)} SET {assignments} WHERE 1 = 1")
        conn.commit()
        valid = quote_identifier(columns[2])
        cursor.execute(
            f"SELECT COUNT(DISTINCT {binary}), "
            f"COUNT(DISTINCT CASE WHEN {valid} THEN {binary} END), "
            f"COUNT(*) - COUNT({source}) FROM {table}"
        )
        distinct, valid_values, null_rows = (int(n or 0) for n in cursor.fetchone())
        return {"distinct_values": distinct, "valid_values": valid_values,
                "null_rows": null_rows}

    def _normalize(
        self, conn: Any, cursor: Any, dialect: StatementDialect, columns: tuple[str, str, str, str],
        decode: Decode,
    ) -> dict[str, int]:
        table, source = quote_identifier(self.table), quote_identifier(self.doi_column)
        # Group, order, page and match on the bytes, whatever the column's collation.
        binary = f"{source}{dialect.binary_collation}"
        doi, key, valid, reason = (quote_identifier(c) for c in columns)
        text, boolean = dialect.text_type, dialect.boolean_type
        self._add_columns(conn, cursor, dialect, columns)
        stage = _stage_name()
        cursor.execute(
            f"CREATE TEMPORARY TABLE {stage} (raw {text}{dialect.stage_key}, doi {text}, "
            f"doi_key {text}, doi_valid {boolean}, doi_reason {text})"
        )
        if dialect.stage_index:
            native_cursor(cursor).execute(dialect.stage_index.format(stage=stage))
        conn.commit()
        progress: Progress | None = None
        valid_values = 0
        for total, page in distinct_pages(
            cursor, dialect, value=binary, source=table, where=f"{source} IS NOT NULL",
            page_size=self.page_size,
        ):
            if progress is None:
                progress = Progress(f"normalize {self.table}", total, self.log, unit="values")
            rows = []
            for (raw,) in page:
                result = _validate_cell(raw, decode)
                valid_values += result.valid
                rows.append((raw, result.doi, result.key, result.valid, result.reason))
            insert_values(cursor, dialect, f"INSERT INTO {stage}", rows,
                          types=(text, text, text, boolean, text))
            conn.commit()
            progress.advance(len(page))
        # One pass over the table for every page at once, as the push-down's UPDATE does.
        self._lock_for_update(cursor, dialect)
        cursor.execute(
            self._apply_statement(dialect, table, binary, (doi, key, valid, reason), stage))
        cursor.execute(
            f"UPDATE {table} SET {doi} = NULL, {key} = NULL, {valid} = {dialect.marks()}, "
            f"{reason} = {dialect.marks()} WHERE {source} IS NULL",
            (False, "empty"),
        )
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {source} IS NULL")
        (null_rows,) = cursor.fetchone()
        cursor.execute(f"DROP TABLE {stage}")
        conn.commit()
        if progress is not None:
            progress.report(force=True)
        return {
            "distinct_values": progress.done if progress is not None else 0,
            "valid_values": valid_values,
            "null_rows": int(null_rows),
        }

    def _lock_for_update(self, cursor: Any, dialect: StatementDialect) -> None:
        """Take the engine's lock for an ``UPDATE`` of every row, if it has one (a second
        normalize of the table, another run's, waits here until this one commits)."""
        if dialect.whole_table_update_lock:
            native_cursor(cursor).execute(
                dialect.whole_table_update_lock.format(table=dialect.quote(self.table)))

    @staticmethod
    def _apply_statement(
        dialect: StatementDialect, table: str, source: str, targets: tuple[str, str, str, str],
        stage: str,
    ) -> str:
        """Copy the staged page onto the catalogue rows whose source value matches.

        ``source`` is the quoted source column with the dialect's binary collation, which
        takes precedence over the column's own in the comparison.
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
