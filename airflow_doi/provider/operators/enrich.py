"""``DoiEnrichOperator``: registry metadata of a catalogue's DOIs into ``doi_metadata``.

DOI content negotiation (:mod:`airflow_doi.metadata`) for the distinct valid keys of the
catalogue that have no row in ``doi_metadata`` yet, or whose row has expired; one row per
comparison key (``doi_key`` primary key) with typed columns (see
:mod:`airflow_doi.provider.hooks.enrichment`) and the record itself in ``csl_json``. Join it
to anything on ``doi_key``.

With ``snapshot`` (the agencies' public data files: Crossref's tar or JSON-lines files,
DataCite's tar, or folders of them), the due keys are first looked for there
(:mod:`airflow_doi.provider.hooks.snapshots`: in parallel, read in place, resumable member by
member), and only the keys the files lack go to the APIs; ``resolver_options={"source":
"snapshot"}`` sends no request at all. Once every member of the files has been read into the
table, later runs leave the files be: the keys due then go to the APIs (with ``source=
"snapshot"``, the keys without a row that the files were never asked for are looked up in them
again, by a read for just those keys).

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
from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook
from airflow_doi.provider.hooks.due_keys import ProxyUnavailableError
from airflow_doi.provider.hooks.enrichment import METADATA_TABLE, enrich_due_keys
from airflow_doi.provider.hooks.snapshots import fill_from_snapshots
from airflow_doi.provider.hooks.updates import refresh_from_streams
from airflow_doi.provider.lineage import file_dataset
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
    :param snapshot: the agencies' data files (a path, or a list of paths) to read first;
        templated. Each worker that may run the task must see them at these paths.
    :param snapshot_workers: processes reading them at once (default: one per core).
    :param updates: harvest the agencies' update streams before the APIs are asked
        (:mod:`airflow_doi.provider.hooks.updates`): ``True`` since the last harvest into the
        metadata table (else the data files' date), or a date ``"YYYY-MM-DD"``; templated.
    """

    template_fields: Sequence[str] = (
        *DoiDueKeysOperator.template_fields, "metadata_table", "snapshot", "updates")

    def __init__(
        self, *, metadata_table: str | None = None, batch_size: int | str = 500,
        snapshot: str | Sequence[str] | None = None, snapshot_workers: int | None = None,
        updates: bool | str = False, **kwargs: Any,
    ) -> None:
        super().__init__(batch_size=batch_size, **kwargs)
        self.metadata_table = metadata_table
        self.snapshot = snapshot
        self.snapshot_workers = snapshot_workers
        self.updates = updates

    def get_proxy_hook(self, **more: Any) -> DoiProxyHook:
        """The ``doi_proxy`` connection's hook, ``resolver_options`` and the data files
        winning over it (and ``more`` over those)."""
        options = dict(self.resolver_options or {})
        if self.snapshot:
            paths = [self.snapshot] if isinstance(self.snapshot, str) else list(self.snapshot)
            options["snapshot"] = tuple(str(path) for path in paths if str(path).strip())
        if self.snapshot_workers is not None:
            options["snapshot_workers"] = int(self.snapshot_workers)
        return DoiProxyHook(self.resolver_conn_id, **{**options, **more})

    def execute(self, context: Any) -> dict[str, Any]:
        metadata_table = self.results_table_of(self.metadata_table, METADATA_TABLE)
        config = self.get_proxy_hook().get_metadata_config()
        result: dict[str, Any] = {}
        columns = {"key_column": self.key_column, "doi_column": self.doi_column,
                   "valid_column": self.valid_column}
        files_date = None
        if config.snapshot:
            filled = fill_from_snapshots(
                self.get_db_hook(), config, table=self.table, metadata_table=metadata_table,
                log=self.log, **columns)
            result["snapshot"] = filled.as_dict()
            files_date = filled.date
        since = _since(self.updates)
        if since is not None:
            result["updates"] = refresh_from_streams(
                self.get_db_hook(), config, table=self.table, metadata_table=metadata_table,
                since=since, files_date=files_date, log=self.log, **columns)
            stopped = {name: s["error"] for name, s in result["updates"].items() if s["error"]}
            if stopped:  # a retry goes on from the page each stream reached
                raise ProxyUnavailableError(
                    "update streams stopped before their end: " + "; ".join(
                        f"{name}: {error}" for name, error in stopped.items())
                    + "; the pages read are stored, and a retry goes on from there")
        if config.source != "snapshot":
            # The APIs' step never reads the files again (each of its batches would).
            summary = enrich_due_keys(
                self.get_db_hook(), self.get_proxy_hook(snapshot=()), table=self.table,
                metadata_table=metadata_table, log=self.log, **self.due_keys_options(),
            )
            result = {**summary.as_dict(), **result}
        self.emit_assets(context, metadata_table)
        return result

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Reads ``table`` (key, DOI, valid flag) and the data files, writes ``doi_metadata``
        keyed by the key column."""
        lineage = self.due_keys_lineage(
            self.metadata_table or sibling_table(self.table, METADATA_TABLE))
        paths = [self.snapshot] if isinstance(self.snapshot, str) else list(self.snapshot or ())
        lineage.inputs.extend(file_dataset(str(p)) for p in paths if str(p).strip())
        return lineage


def _since(updates: bool | str) -> str | None:
    """``updates`` as a harvest's start: ``"auto"`` for True (or "true"), a date as it is,
    None for False (or an empty template)."""
    if isinstance(updates, bool):
        return "auto" if updates else None
    text = str(updates).strip()
    if text.lower() in ("", "false", "none", "0"):
        return None
    return "auto" if text.lower() in ("true", "auto", "1") else text
