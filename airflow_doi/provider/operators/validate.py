"""``DoiValidateOperator``: a data-quality gate on the DOI column of a table.

It reads the column as it is (it does not need :class:`DoiNormalizeOperator` to have run),
counts its invalid rows by reason (:class:`~airflow_doi.provider.hooks.doi_column.DoiColumn`:
one ``GROUP BY`` in the database, or page by page with :func:`airflow_doi.syntax.validate`),
and fails the task (or only warns) when the share of invalid rows is above
``max_invalid_share``. The log names the most common reasons with a few example values, which
is what someone fixing the source needs.
"""

from __future__ import annotations

from typing import Any, Literal

from airflow.sdk.exceptions import AirflowFailException

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
    """

    def __init__(
        self,
        *,
        max_invalid_share: float = 0.0,
        allow_empty: bool = False,
        on_breach: Literal["fail", "warn"] = "fail",
        top: int = 5,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
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
            if where.in_database:
                total_rows, reasons, examples = column.count_reasons_in_database(
                    functions_schema)
            else:
                total_rows, reasons, examples = column.count_reasons_in_worker(
                    check_batch_size(self.batch_size))
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

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table``; writes nothing."""
        hook, connection = self.lineage_source()
        return operator_lineage([dataset(hook, connection, self.table)], [])
