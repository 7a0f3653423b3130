"""``DoiEnrichOperator``: registry metadata of a catalogue's DOIs into ``doi_metadata``.

DOI content negotiation (:mod:`airflow_doi.metadata`) for the distinct valid keys of the
catalogue that have no row in ``doi_metadata`` yet, or whose row has expired; one row per
comparison key (``doi_key`` primary key) with typed columns (see
:mod:`airflow_doi.provider.hooks.enrichment`) and the record itself in ``csl_json``. Join it
to anything on ``doi_key``.

The engine is resolution's (:mod:`airflow_doi.provider.hooks.due_keys`): batches upserted
and committed one at a time, claims so that tasks running at once never ask for one key
twice, a retry that asks only what is still due, and :class:`ProxyUnavailableError` as soon as
the proxy (or an agency host) fails. The ``doi_proxy`` connection serves both steps; its
extras ``agency_rate`` and ``metadata_hosts`` tune this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_doi.db.statements import sibling_table
from airflow_doi.provider.hooks.due_keys import ProxyUnavailableError
from airflow_doi.provider.hooks.enrichment import METADATA_TABLE, enrich_due_keys
from airflow_doi.provider.operators.base import DoiDueKeysOperator

__all__ = ["DoiEnrichOperator", "ProxyUnavailableError"]


class DoiEnrichOperator(DoiDueKeysOperator):
    """Fetch registry metadata (CSL-JSON, typed) for the new or expired keys of ``table``.

    :param resolver_conn_id: the ``doi_proxy`` connection (proxy rate, ``agency_rate``,
        ``metadata_hosts``, ``contact``...), shared with :class:`DoiResolveOperator`.
    :param metadata_table: defaults to ``doi_metadata`` in the catalogue's schema.
    :param key_column, doi_column, valid_column: the columns written by the normalize step.
    :param resolver_options: :class:`~airflow_doi.metadata.MetadataConfig` fields that win over
        the connection (e.g. ``{"agency_rate": 5}``).
    :param batch_size: keys per request batch and per commit (the most a kill can lose).
    """

    template_fields: Sequence[str] = (*DoiDueKeysOperator.template_fields, "metadata_table")

    def __init__(
        self, *, metadata_table: str | None = None, batch_size: int | str = 500, **kwargs: Any,
    ) -> None:
        super().__init__(batch_size=batch_size, **kwargs)
        self.metadata_table = metadata_table

    def execute(self, context: Any) -> dict[str, Any]:
        metadata_table = self.results_table_of(self.metadata_table, METADATA_TABLE)
        summary = enrich_due_keys(
            self.get_db_hook(), self.get_proxy_hook(), table=self.table,
            metadata_table=metadata_table, log=self.log, **self.due_keys_options(),
        )
        self.emit_assets(context, metadata_table)
        return summary.as_dict()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table`` (key, DOI, valid flag), writes ``doi_metadata`` keyed by the key
        column."""
        return self.due_keys_lineage(
            self.metadata_table or sibling_table(self.table, METADATA_TABLE))
