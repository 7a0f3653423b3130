"""``DoiValidateOperator``: a data-quality gate on the DOI column of a table.

It reads the column as it is (it does not need :class:`DoiNormalizeOperator` to have run),
one page of distinct values with their row counts at a time, checks each with
:func:`airflow_doi.syntax.validate`, and fails the task (or only warns) when the share of
invalid rows is above ``max_invalid_share``. The log names the most common reasons with a few
example values, which is what someone fixing the source needs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from contextlib import closing
from typing import Any, Literal

from airflow_doi.db.statements import (
    StatementDialect,
    distinct_pages,
    native_cursor,
    quote_identifier,
    require_columns,
)
from airflow_doi.native import validate
from airflow_doi.provider.hooks.sql import connect, dialect_of
from airflow_doi.provider.operators.base import DoiSqlOperator
from airflow_doi.provider.progress import Progress
from airflow_doi.provider.pushdown import check_mode, column_sql, plan

__all__ = ["DoiValidateOperator"]

_EXAMPLES_PER_REASON = 3
_EXAMPLE_WIDTH = 80


def _reason_of(value: object) -> str | None:
    if value is not None and not isinstance(value, (str, bytes, bytearray)):
        value = str(value)
    return validate(value).reason


class DoiValidateOperator(DoiSqlOperator):
    """Fail (or warn) when more than ``max_invalid_share`` of the rows hold no valid DOI.

    :param doi_column: the column to check.
    :param max_invalid_share: tolerated share of invalid rows, 0..1 (empty cells count as
        invalid unless ``allow_empty``).
    :param allow_empty: NULL / blank cells are not counted as invalid.
    :param on_breach: ``"fail"`` (the task fails without retries) or ``"warn"``.
    :param top: how many reasons to list in the log.
    :param mode: ``auto`` (default): one ``GROUP BY`` query in the database where the engine
        has the rules, else page by page in the worker; ``sql`` or ``python`` to insist.
        Templated. See :mod:`airflow_doi.provider.pushdown`.
    :param functions_schema: MariaDB only: a database in which the operator may create (or
        replace) the generated ``doi_*`` functions (see :class:`DoiNormalizeOperator`).
    """

    template_fields: Sequence[str] = (
        "conn_id", "table", "batch_size", "hook_params", "doi_column", "mode",
        "functions_schema",
    )

    def __init__(
        self,
        *,
        doi_column: str,
        max_invalid_share: float = 0.0,
        allow_empty: bool = False,
        on_breach: Literal["fail", "warn"] = "fail",
        top: int = 5,
        mode: str = "auto",
        functions_schema: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.functions_schema = functions_schema
        if not 0.0 <= max_invalid_share <= 1.0:
            raise ValueError("max_invalid_share must be between 0 and 1")
        if on_breach not in ("fail", "warn"):
            raise ValueError("on_breach must be 'fail' or 'warn'")
        self.doi_column = doi_column
        self.max_invalid_share = max_invalid_share
        self.allow_empty = allow_empty
        self.on_breach = on_breach
        self.top = top
        self.mode = mode
        if "{{" not in str(mode):
            check_mode(mode)

    def execute(self, context: Any) -> dict[str, Any]:
        functions_schema = self.functions_schema or None
        self.check_identifiers(self.doi_column, *filter(None, [functions_schema]))
        hook = self.get_db_hook()
        dialect = dialect_of(hook)
        where = plan(check_mode(self.mode), dialect.name, "auto", functions_schema)
        self.log.info("Validating %s.%s %s", self.table, self.doi_column, where.why)
        with closing(connect(hook)) as conn:
            cursor = dialect.cursor(conn)
            require_columns(cursor, self.table, {"doi_column": self.doi_column},
                            case_sensitive=dialect.case_sensitive_identifiers)
            if where.in_database:
                total_rows, reasons, examples = self._count_in_database(
                    conn, cursor, dialect, functions_schema)
            else:
                total_rows, reasons, examples = self._count(cursor, dialect)
        if self.allow_empty:
            reasons.pop("empty", None)
        invalid = sum(reasons.values())
        share = invalid / total_rows if total_rows else 0.0
        summary = {
            "rows": total_rows,
            "invalid_rows": invalid,
            "invalid_share": share,
            "reasons": dict(reasons.most_common()),
        }
        self.log.info(
            "%s.%s: %d rows, %d invalid (%.2f%%, threshold %.2f%%)",
            self.table, self.doi_column, total_rows, invalid, 100 * share,
            100 * self.max_invalid_share,
        )
        for reason, count in reasons.most_common(self.top):
            self.log.info("  %-16s %8d rows, e.g. %s", reason, count, ", ".join(examples[reason]))
        if share > self.max_invalid_share:
            message = (
                f"{100 * share:.2f}% of {self.table}.{self.doi_column} is not a valid DOI "
                f"(threshold {100 * self.max_invalid_share:.2f}%)"
            )
            if self.on_breach == "fail":
                from airflow.sdk.exceptions import AirflowFailException

                raise AirflowFailException(message)
            self.log.warning("%s", message)
        return summary

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table``; writes nothing."""
        from airflow_doi.provider.lineage import dataset, operator_lineage

        hook, connection = self.lineage_source()
        return operator_lineage([dataset(hook, connection, self.table)], [])

    def _count_in_database(
        self, conn: Any, cursor: Any, dialect: StatementDialect, functions_schema: str | None,
    ) -> tuple[int, Counter[str], dict[str, list[str]]]:
        """One ``GROUP BY`` over the rule's reason, two example values per reason."""
        # In the engine's own dialect, as the generated body is: no translation.
        source, table = dialect.quote(self.doi_column), dialect.quote(self.table)
        reason = column_sql(conn, dialect, self.doi_column, functions_schema)["doi_reason"]
        cursor = native_cursor(cursor)
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
        return total_rows, reasons, examples

    def _count(
        self, cursor: Any, dialect: StatementDialect
    ) -> tuple[int, Counter[str], dict[str, list[str]]]:
        """Page by page in the worker: distinct values and their row counts, checked here."""
        table, source = quote_identifier(self.table), quote_identifier(self.doi_column)
        # Byte-wise grouping: a case-insensitive collation must not merge distinct values.
        binary = f"{source}{dialect.binary_collation}"
        reasons: Counter[str] = Counter()
        examples: dict[str, list[str]] = {}
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        (total_rows,) = (int(n) for n in cursor.fetchone())
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {source} IS NULL")
        (null_rows,) = cursor.fetchone()
        if null_rows:
            reasons["empty"] += int(null_rows)
            examples["empty"] = ["NULL"]
        progress: Progress | None = None
        for distinct, page in distinct_pages(
            cursor, dialect, value=binary, source=table, where=f"{source} IS NOT NULL",
            page_size=self.page_size, aggregate=("COUNT(*)", dialect.integer_type),
        ):
            if progress is None:
                progress = Progress(f"validate {self.table}", distinct, self.log, unit="values")
            for value, count in page:
                reason = _reason_of(value)
                if reason is None:
                    continue
                reasons[reason] += int(count)
                shown = examples.setdefault(reason, [])
                if len(shown) < _EXAMPLES_PER_REASON:
                    shown.append(repr(value)[:_EXAMPLE_WIDTH])
            progress.advance(len(page))
        return total_rows, reasons, examples
