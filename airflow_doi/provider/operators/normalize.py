"""``DoiNormalizeOperator``: add the normalized DOI columns to a catalogue table.

For a source column ``doi_column`` it writes ``doi`` (the normalized DOI, case kept),
``doi_key`` (the comparison key), ``doi_valid`` and ``doi_reason`` (why not, per
:data:`airflow_doi.syntax.REASONS`), and ``doi_fingerprint`` (what they were computed from);
the prefix ``doi`` is configurable.

Incremental by default: a run rewrites only the rows added or edited since the last one, the
rows written under other rules or another ``decode``, and rows whose columns someone emptied
(:mod:`airflow_doi.provider.hooks.normalize`); on an unchanged table it writes nothing.
``full_refresh=True`` rewrites every row, as the first run does. Where the engine has the rules
in SQL (:mod:`.pushdown`), all of it is one ``UPDATE`` in the database; otherwise
(``mode="python"``, or an engine without generated SQL) work is per *distinct* source value of
those rows, page by page in the worker, applied with one set-based ``UPDATE``. The result is
the same however often it runs, and the same as a full refresh. Source values are matched
byte-wise: each row gets the DOI of its own value, case kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from airflow_doi.db.incremental import NormalizedColumns
from airflow_doi.provider.hooks.normalize import NormalizeRun
from airflow_doi.provider.lineage import dataset, operator_lineage
from airflow_doi.provider.operators.base import DoiColumnOperator, check_batch_size
from airflow_doi.syntax import Decode

__all__ = ["DoiNormalizeOperator"]

_DECODE_CHOICES: tuple[str, ...] = get_args(Decode)


def _flag(name: str, value: object) -> bool:
    """A templated boolean: ``True``/``False`` or their rendered text (``"True"``, ``"false"``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", "", "none"):
        return False
    raise ValueError(f"{name} must be true or false, not {value!r}")


def _decode_choice(decode: object) -> Decode:
    """``decode`` checked against :data:`~airflow_doi.syntax.Decode` (may come from a template)."""
    if decode not in _DECODE_CHOICES:
        raise ValueError(f"decode must be one of {', '.join(_DECODE_CHOICES)}, not {decode!r}")
    return decode  # type: ignore[return-value]


class DoiNormalizeOperator(DoiColumnOperator):
    """Add/update ``doi``, ``doi_key``, ``doi_valid``, ``doi_reason`` and ``doi_fingerprint``
    on ``table``, in the rows that changed since the last run.

    :param doi_column: the column holding the DOIs as found (any presentation form).
    :param output_prefix: name of the normalized DOI column; the others get suffixes.
    :param full_refresh: rewrite every row, not only the stale ones (dbt's word); templated.
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
        *DoiColumnOperator.template_fields, "output_prefix", "decode", "full_refresh",
    )

    def __init__(self, *, output_prefix: str = "doi", decode: str = "auto",
                 full_refresh: bool | str = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_prefix = output_prefix
        self.decode = decode
        self.full_refresh = full_refresh
        if "{{" not in str(decode):
            _decode_choice(decode)  # fail at parse time when it is not templated
        if "{{" not in str(full_refresh):
            _flag("full_refresh", full_refresh)

    def execute(self, context: Any) -> dict[str, Any]:
        decode = _decode_choice(self.decode)
        full_refresh = _flag("full_refresh", self.full_refresh)
        columns = NormalizedColumns.of(self.doi_column, self.output_prefix)
        with self.open_column("Normalizing", decode, columns.written) as (column, where,
                                                                          functions):
            summary = NormalizeRun(column, columns, decode, full_refresh).run(
                in_database=where.in_database, functions_schema=functions,
                batch_size=check_batch_size(self.batch_size))
        if summary["full_refresh"]:
            self.log.info("Normalized %s: wrote %d rows (every row: a full refresh)",
                          self.table, summary["rows_written"])
        else:
            self.log.info("Normalized %s: wrote %d rows (new, edited or never normalized); "
                          "the others were current", self.table, summary["rows_written"])
        self.emit_assets(context, self.table)
        return summary

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table``, writes the five columns of ``table``, each from ``doi_column``."""
        hook, connection = self.lineage_source()
        source = dataset(hook, connection, self.table)
        columns = NormalizedColumns.of(self.doi_column, self.output_prefix).written
        target = dataset(hook, connection, self.table, {c: [self.doi_column] for c in columns},
                         (source.namespace, source.name))
        return operator_lineage([source], [target])
