"""Verified repair suggestions for a catalogue's damaged cells, stored beside the table.

Run by :class:`~airflow_doi.provider.operators.resolve.DoiResolveOperator` with
``repair_column`` set, after the resolutions are stored: every distinct raw cell whose row is
invalid, or whose key the proxy answered ``not_found``, goes through
:func:`airflow_doi.repair.verify.repair` (the value's own DOI first: one that exists is
never repaired) with the same proxy settings.

Why a table of its own (``doi_repair``, keyed by the raw cell) rather than columns of
``doi_resolution``: an invalid cell has no ``doi_key``, so it cannot be a row there, and the
same key can be written differently in two cells that need different repairs. Only cells not
in ``doi_repair`` yet are sent, so a re-run asks nothing; the table is created by us and a
table of that name that we did not write is refused, untouched.
"""

from __future__ import annotations

from contextlib import closing
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from airflow_doi.db.statements import (
    StatementDialect,
    quote_identifier,
    require_columns,
    sibling_table,
    upsert_rows,
)
from airflow_doi.provider.hooks.sql import connect, dialect_of
from airflow_doi.provider.hooks.tables import TableShape
from airflow_doi.provider.progress import TaskLog
from airflow_doi.repair import REPAIR_COLUMNS
from airflow_doi.repair.verify import RepairStats, repair

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook

    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook

__all__ = ["REPAIR_SHAPE", "REPAIR_TABLE", "REPAIR_TABLE_COLUMNS", "repair_types", "store_repairs"]

#: The table's default name, beside the catalogue.
REPAIR_TABLE = "doi_repair"
#: Its columns: the raw cell (the key), the suggestion, the rule chain, whether the proxy
#: confirmed it (null: not decided), why a row was left undecided, and when it was checked.
REPAIR_TABLE_COLUMNS = ("raw_value", *REPAIR_COLUMNS, "error", "checked_at")


def repair_types(dialect: StatementDialect) -> tuple[str, ...]:
    """SQL types of :data:`REPAIR_TABLE_COLUMNS`, in order."""
    text = dialect.text_type
    return (dialect.key_text, text, text, dialect.boolean_type, text, dialect.timestamp_type)


REPAIR_SHAPE = TableShape(
    REPAIR_TABLE_COLUMNS, repair_types, not_null=(), kind="repair table",
    writer="one DoiResolveOperator wrote", parameter="repair_table",
    purpose="write the suggestions elsewhere",
)


def store_repairs(
    db_hook: DbApiHook,
    proxy_hook: DoiProxyHook,
    *,
    table: str,
    raw_column: str,
    results_table: str,
    repair_table: str | None = None,
    key_column: str = "doi_key",
    valid_column: str = "doi_valid",
    log: TaskLog,
) -> dict[str, int]:
    """Suggest and verify repairs for the due damaged cells of ``table``; counts for XCom."""
    repair_table = repair_table or sibling_table(table, REPAIR_TABLE)
    for name in (table, raw_column, results_table, repair_table, key_column, valid_column):
        quote_identifier(name)
    dialect = dialect_of(db_hook)
    raw = f"c.{quote_identifier(raw_column)}"
    with closing(connect(db_hook)) as conn:
        cursor = dialect.cursor(conn)
        require_columns(cursor, table, {"repair_column": raw_column},
                        case_sensitive=dialect.case_sensitive_identifiers)
        REPAIR_SHAPE.ensure(cursor, dialect, repair_table)
        conn.commit()
        cursor.execute(
            f"SELECT DISTINCT {raw} FROM {quote_identifier(table)} AS c "
            f"LEFT JOIN {quote_identifier(results_table)} AS r "
            f'ON r."doi_key" = c.{quote_identifier(key_column)} '
            f'LEFT JOIN {quote_identifier(repair_table)} AS p ON p."raw_value" = {raw} '
            f'WHERE {raw} IS NOT NULL AND p."raw_value" IS NULL '
            f"AND (c.{quote_identifier(valid_column)} = {dialect.marks()} "
            f"OR r.\"status\" = {dialect.marks()})",
            [False, "not_found"],
        )
        cells = [row[0] for row in cursor.fetchall()]
        log.info("Repair: %d damaged or unknown cells of %s to check", len(cells), table)
        stats = RepairStats()
        results = repair(cells, verify=True, config=proxy_hook.get_config(), stats=stats)
        now = dialect.timestamp(datetime.now(timezone.utc))
        rows = [(cell, *r.as_row().values(), r.error, now)
                for cell, r in zip(cells, results, strict=True)]
        upsert_rows(cursor, dialect, repair_table, REPAIR_TABLE_COLUMNS, rows, key="raw_value",
                    types=repair_types(dialect))
        conn.commit()
    verified = sum(r.verified is True for r in results)
    log.info("Repair: stored %d cells in %s (%d verified suggestions); %s",
             len(rows), repair_table, verified, stats.summary())
    return {"repair_cells": len(rows), "repair_verified": verified}
