"""``DoiResolveOperator`` and its mapped-task functions: DOIs resolved into ``doi_resolution``.

The results table lives beside the catalogue and *is* the cache: one row per comparison key
(``doi_key`` primary key, ``doi``, ``status``, ``url``, ``response_code``, ``http_status``,
``attempts``, ``error``, ``resolved_at``, ``expires_at``). A run asks the proxy only about the
distinct valid keys of the catalogue that have no row yet, or whose row has expired (errors
never get an expiry, so they are retried on the next run). Keys are taken in key order, a
batch at a time, and each batch is upserted and committed before the next is requested: a
task that fails or is killed resumes, on retry, exactly after the last stored batch, and never
asks twice for a key it already stored (the engine: :mod:`airflow_doi.provider.hooks.resolution`).

The catalogue needs the columns written by
:class:`~airflow_doi.provider.operators.normalize.DoiNormalizeOperator` (``doi``, ``doi_key``,
``doi_valid``). For dynamic task mapping, :func:`plan_resolve_batches` splits the due keys
into key ranges and :func:`resolve_key_range` resolves one range::

    ranges = task(plan_resolve_batches)(conn_id="db", table="catalogue", batch_size=5000)
    task(resolve_key_range).partial(conn_id="db", table="catalogue").expand_kwargs(ranges)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.configuration import conf

from airflow_doi.db.statements import quote_identifier, sibling_table
from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook, renamed_conn_id
from airflow_doi.provider.hooks.due_keys import ProxyUnavailableError
from airflow_doi.provider.hooks.repairs import REPAIR_TABLE, store_repairs
from airflow_doi.provider.hooks.resolution import (
    RESOLUTION_TABLE,
    due_key_ranges,
    resolve_due_keys,
)
from airflow_doi.provider.hooks.sql import sql_hook
from airflow_doi.provider.operators.base import DoiDueKeysOperator, check_flag

__all__ = [
    "DoiResolveOperator",
    "ProxyUnavailableError",
    "plan_resolve_batches",
    "resolve_key_range",
]


def plan_resolve_batches(
    *,
    conn_id: str,
    table: str,
    results_table: str | None = None,
    key_column: str = "doi_key",
    valid_column: str = "doi_valid",
    range_size: int | None = None,
    max_ranges: int | None = None,
    batch_size: int | None = None,
    urls: bool = True,
) -> list[dict[str, str | None]]:
    """Key ranges ``{"after": k0, "upto": k1}`` covering the due keys, at most ``max_ranges``.

    A range holds ``range_size`` due keys (1000 by default; ``batch_size`` is its older name),
    or ``ceil(due / max_ranges)`` when that is more: Airflow refuses to expand more than
    ``[core] max_map_length`` mapped tasks (the default of ``max_ranges``). Feed them to
    :func:`resolve_key_range` with ``expand_kwargs``: it asks and commits its range by its own
    ``batch_size`` (keep that well under the range: a killed task asks again at most the batch
    it was in). A range resolved twice (a retried map index) asks only for the keys still due.
    ``urls=False`` plans an existence-only pass (give :func:`resolve_key_range`
    ``resolver_options={"urls": False}``): keys resolved already are not due.
    """
    if range_size is None:
        range_size = batch_size if batch_size is not None else 1000
    if max_ranges is None:
        max_ranges = conf.getint("core", "max_map_length", fallback=1024)
    if range_size < 1 or max_ranges < 1:
        raise ValueError("range_size and max_ranges must be at least 1")
    for name in (table, key_column, valid_column):
        quote_identifier(name)
    db_hook = sql_hook(conn_id)
    return due_key_ranges(
        db_hook, table=table, results_table=results_table or sibling_table(table, RESOLUTION_TABLE),
        key_column=key_column, valid_column=valid_column, batch_size=range_size,
        max_ranges=max_ranges, log=logging.getLogger(__name__), urls=urls,
    )


def resolve_key_range(
    *,
    conn_id: str,
    table: str,
    after: str | None = None,
    upto: str | None = None,
    resolver_conn_id: str = "doi_proxy_default",
    results_table: str | None = None,
    key_column: str = "doi_key",
    doi_column: str = "doi",
    valid_column: str = "doi_valid",
    batch_size: int = 100,
    resolver_options: dict[str, Any] | None = None,
    doi_proxy_conn_id: str | None = None,
) -> dict[str, Any]:
    """Resolve the due keys with ``after < key <= upto`` (one mapped task's share).

    ``upto=None`` means no upper bound; requests and commits go ``batch_size`` keys at a time
    (100 by default, a tenth of a default range) however wide the range is, so a task killed
    mid-range asks again at most the one batch it was in. ``resolver_conn_id`` is the
    ``doi_proxy`` connection (``doi_proxy_conn_id`` is its deprecated name).
    """
    resolver_conn_id = renamed_conn_id(resolver_conn_id, doi_proxy_conn_id, "resolve_key_range")
    summary = resolve_due_keys(
        sql_hook(conn_id), DoiProxyHook(resolver_conn_id, **(resolver_options or {})),
        table=table, results_table=results_table, key_column=key_column,
        doi_column=doi_column, valid_column=valid_column, batch_size=batch_size,
        after=after, upto=upto, log=logging.getLogger(__name__),
    )
    return summary.as_dict()


class DoiResolveOperator(DoiDueKeysOperator):
    """Resolve the new or expired DOI keys of ``table`` into ``results_table``.

    :param resolver_conn_id: the ``doi_proxy`` connection (rate, concurrency, ...);
        ``doi_proxy_conn_id`` is its deprecated name (Airflow shows that one as ``'***'``).
    :param results_table: defaults to ``doi_resolution`` in the catalogue's schema.
    :param key_column, doi_column, valid_column: the columns written by the normalize step.
    :param resolver_options: :class:`~airflow_doi.resolver.ResolverConfig` fields that win over
        the connection (e.g. ``{"rate": 10}``).
    :param batch_size: keys per request batch and per commit (the most a kill can lose).
    :param urls: False: existence only, from doi.org's Which RA? (about 50 DOIs a request
        instead of one): each key ``registered`` with its ``agency``, or ``not_found``; keys
        already ``resolved`` are left as they are. A later run with URLs (the default) asks
        the handles of the ``registered`` keys. Templated ("{{ params.urls }}").
    :param repair_column: the raw DOI column (e.g. ``doi_raw``); when given, the cells of rows
        that are invalid or whose key is ``not_found`` get verified repair suggestions in
        ``repair_table`` (default ``doi_repair`` beside the table, keyed by the raw cell; see
        :mod:`airflow_doi.provider.hooks.repairs`). Off by default.
    """

    template_fields: Sequence[str] = (
        *DoiDueKeysOperator.template_fields, "results_table", "repair_column", "repair_table",
        "urls",
    )

    def __init__(
        self,
        *,
        resolver_conn_id: str = "doi_proxy_default",
        results_table: str | None = None,
        batch_size: int | str = 1000,
        repair_column: str | None = None,
        repair_table: str | None = None,
        urls: bool | str = True,
        doi_proxy_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            batch_size=batch_size, resolver_conn_id=renamed_conn_id(
                resolver_conn_id, doi_proxy_conn_id, "DoiResolveOperator"), **kwargs)
        self.results_table = results_table
        self.repair_column = repair_column
        self.repair_table = repair_table
        self.urls = urls

    def get_proxy_hook(self) -> DoiProxyHook:
        """The connection's hook, ``urls`` (and ``resolver_options``) winning over it."""
        options = {**(self.resolver_options or {}), "urls": check_flag("urls", self.urls)}
        return DoiProxyHook(self.resolver_conn_id, **options)

    def execute(self, context: Any) -> dict[str, Any]:
        results_table = self.results_table_of(self.results_table, RESOLUTION_TABLE)
        if self.repair_column:
            self.check_identifiers(self.repair_column)
        summary = resolve_due_keys(
            self.get_db_hook(), self.get_proxy_hook(), table=self.table,
            results_table=results_table, repair_column=self.repair_column, log=self.log,
            **self.due_keys_options(),
        )
        self.emit_assets(context, results_table)
        outcome = summary.as_dict()
        if self.repair_column:
            outcome.update(store_repairs(
                self.get_db_hook(), self.get_proxy_hook(),
                table=self.table, raw_column=self.repair_column, results_table=results_table,
                repair_table=self.repair_table, key_column=self.key_column,
                valid_column=self.valid_column, log=self.log,
            ))
        return outcome

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table`` (key, DOI, valid flag), writes ``doi_resolution`` keyed by the key
        column (and ``doi_repair`` from ``repair_column`` when asked)."""
        results_table = self.results_table or sibling_table(self.table, RESOLUTION_TABLE)
        if not self.repair_column:
            return self.due_keys_lineage(results_table)
        repair_table = self.repair_table or sibling_table(self.table, REPAIR_TABLE)
        return self.due_keys_lineage(results_table,
                                     (repair_table, {"raw_value": [self.repair_column]}))
