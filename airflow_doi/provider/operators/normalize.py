"""``DoiNormalizeOperator``: add the normalized DOI columns to a catalogue table.

For a source column ``doi_column`` it writes ``doi`` (the normalized DOI, case kept),
``doi_key`` (the comparison key), ``doi_valid`` and ``doi_reason`` (why not, per
:data:`airflow_doi.syntax.REASONS`); the prefix ``doi`` is configurable.

Where the engine has the rules in SQL (:mod:`.pushdown`), all of it is one ``UPDATE`` in the
database. Otherwise (``mode="python"``, or an engine without generated SQL) work is per
*distinct* source value, page by page in the worker, applied at the end with one set-based
``UPDATE`` (:class:`~airflow_doi.provider.hooks.doi_column.DoiColumn`). A re-run (after a
failure or not) recomputes every value from the source column; the result is the same however
often it runs. Source values are matched byte-wise: each row gets the DOI of its own value,
case kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from airflow_doi.provider.hooks.doi_column import normalized_columns
from airflow_doi.provider.lineage import dataset, operator_lineage
from airflow_doi.provider.operators.base import DoiColumnOperator, check_batch_size
from airflow_doi.syntax import Decode

__all__ = ["DoiNormalizeOperator"]

_DECODE_CHOICES: tuple[str, ...] = get_args(Decode)


def _decode_choice(decode: object) -> Decode:
    """``decode`` checked against :data:`~airflow_doi.syntax.Decode` (may come from a template)."""
    if decode not in _DECODE_CHOICES:
        raise ValueError(f"decode must be one of {', '.join(_DECODE_CHOICES)}, not {decode!r}")
    return decode  # type: ignore[return-value]


class DoiNormalizeOperator(DoiColumnOperator):
    """Add/update ``doi``, ``doi_key``, ``doi_valid`` and ``doi_reason`` on ``table``.

    :param doi_column: the column holding the DOIs as found (any presentation form).
    :param output_prefix: name of the normalized DOI column; the others get suffixes.
    :param decode: percent-decoding rule of :func:`airflow_doi.syntax.validate`
        (``auto``, ``always`` or ``never``); templated.
    :param mode: ``auto`` (default): one ``UPDATE`` in the database where the engine has the
        rules (DuckDB, PostgreSQL, SQLite), else page by page in the worker; ``sql``: in the
        database or fail; ``python``: always in the worker. Templated. See
        :mod:`airflow_doi.provider.pushdown`.
    :param functions_schema: MariaDB only: a database in which the operator may create (or
        replace) the generated ``doi_*`` functions.
    """

    template_fields: Sequence[str] = (
        *DoiColumnOperator.template_fields, "output_prefix", "decode",
    )

    def __init__(self, *, output_prefix: str = "doi", decode: str = "auto",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_prefix = output_prefix
        self.decode = decode
        if "{{" not in str(decode):
            _decode_choice(decode)  # fail at parse time when it is not templated

    def execute(self, context: Any) -> dict[str, int]:
        decode = _decode_choice(self.decode)
        columns = normalized_columns(self.output_prefix)
        with self.open_column("Normalizing", decode, columns) as (column, where, functions):
            if where.in_database:
                summary = column.normalize_in_database(columns, functions)
            else:
                summary = column.normalize_in_worker(
                    columns, decode, check_batch_size(self.batch_size))
        self.log.info(
            "Normalized %s: %d distinct values (%d valid), %d empty rows",
            self.table, summary["distinct_values"], summary["valid_values"], summary["null_rows"],
        )
        self.emit_assets(context, self.table)
        return summary

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table``, writes the four columns of ``table``, each from ``doi_column``."""
        hook, connection = self.lineage_source()
        source = dataset(hook, connection, self.table)
        columns = normalized_columns(self.output_prefix)
        target = dataset(hook, connection, self.table, {c: [self.doi_column] for c in columns},
                         (source.namespace, source.name))
        return operator_lineage([source], [target])
