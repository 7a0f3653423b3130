"""``DoiValidateOperator``: a data-quality gate on the DOI column of a table.

It reads the column as it is (it does not need :class:`DoiNormalizeOperator` to have run),
counts its invalid rows by reason (:class:`~airflow_doi.provider.hooks.doi_column.DoiColumn`:
one ``GROUP BY`` in the database, or page by page with :func:`airflow_doi.syntax.validate`;
where :class:`DoiNormalizeOperator` stored the reasons, the current rows' stored reason is
read instead of parsed again, and only rows added or edited since are judged),
and fails the task (or only warns) when the share of invalid rows is above
``max_invalid_share``. The log names the most common reasons with a few example values, which
is what someone fixing the source needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from airflow.sdk.exceptions import AirflowFailException

from airflow_doi.db.incremental import NormalizedColumns, fingerprint_sql, stale_sql
from airflow_doi.db.statements import missing_columns
from airflow_doi.provider.hooks.doi_column import DoiColumn, StoredReasons
from airflow_doi.provider.lineage import dataset, operator_lineage
from airflow_doi.provider.operators.base import DoiColumnOperator, check_batch_size

__all__ = ["DoiValidateOperator"]


class DoiValidateOperator(DoiColumnOperator):
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
    :param normalized_prefix: the ``output_prefix`` of a :class:`DoiNormalizeOperator` on the
        same column: where its five columns are there, the reasons it stored are read for the
        rows that are current (same rules, ``decode="auto"``, cell unchanged) and only the
        others are judged; None: always judge every row. Templated.
    """

    template_fields: Sequence[str] = (*DoiColumnOperator.template_fields, "normalized_prefix")

    def __init__(
        self,
        *,
        max_invalid_share: float = 0.0,
        allow_empty: bool = False,
        on_breach: Literal["fail", "warn"] = "fail",
        top: int = 5,
        normalized_prefix: str | None = "doi",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.normalized_prefix = normalized_prefix
        if not 0.0 <= max_invalid_share <= 1.0:
            raise ValueError("max_invalid_share must be between 0 and 1")
        if on_breach not in ("fail", "warn"):
            raise ValueError("on_breach must be 'fail' or 'warn'")
        self.max_invalid_share = max_invalid_share
        self.allow_empty = allow_empty
        self.on_breach = on_breach
        self.top = top

    def execute(self, context: Any) -> dict[str, Any]:
        with self.open_column("Validating") as (column, where, functions_schema):
            stored = self._stored_reasons(column)
            if where.in_database:
                total_rows, reasons, examples = column.count_reasons_in_database(
                    functions_schema, stored)
            else:
                total_rows, reasons, examples = column.count_reasons_in_worker(
                    check_batch_size(self.batch_size), stored)
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
                raise AirflowFailException(message)
            self.log.warning("%s", message)
        return summary

    def _stored_reasons(self, column: DoiColumn) -> StoredReasons | None:
        """The reasons the normalize step stored, where its five columns are all there (and
        the engine has a fingerprint to tell the current rows)."""
        if not self.normalized_prefix:
            return None
        columns = NormalizedColumns.of(self.doi_column, self.normalized_prefix)
        self.check_identifiers(*columns.written)
        quoted = columns.quoted()
        fingerprint = fingerprint_sql(column.dialect, quoted.source, "auto")
        if fingerprint is None or missing_columns(
                column.cursor, self.table, list(columns.written),
                case_sensitive=column.dialect.case_sensitive_identifiers):
            column.conn.commit()
            return None
        column.conn.commit()
        self.log.info("Reading the reasons stored in %s by the normalize step for the rows "
                      "unchanged since; judging only the others", quoted.reason)
        return StoredReasons(quoted.reason, stale_sql(quoted, fingerprint))

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table``; writes nothing."""
        hook, connection = self.lineage_source()
        return operator_lineage([dataset(hook, connection, self.table)], [])
