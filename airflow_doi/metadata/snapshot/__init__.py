"""The agencies' public data files (snapshots) as a source of registry metadata.

Crossref's data file (a tar of gzipped ``{"items": [...]}`` files of ``/works`` records, or
gzipped JSON lines), DataCite's (a tar of ``dois/updated_YYYY-MM/part_NNNN.jsonl.gz``, JSON
lines of JSON:API records or of their attributes alone), a folder of either, or single files:
recognised by content (:mod:`.files`), read in place and in parallel over members
(:mod:`.scan`), each record found by its own DOI without parsing the rest, and the wanted ones
mapped to the same typed columns as the batch APIs' answers (:mod:`.records`). Needs
``msgspec`` (the ``resolve`` extra) for :mod:`.records` and :mod:`.scan`; :mod:`.files` is
standard library only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_doi._lazy import lazy_getattr

__all__ = [
    "REASONS",
    "Limits",
    "MemberScan",
    "RecordReader",
    "RowSettings",
    "ScanProgress",
    "ScanStats",
    "SnapshotError",
    "SnapshotIndex",
    "default_workers",
    "index_snapshots",
    "scan",
]

if TYPE_CHECKING:  # pragma: no cover
    from airflow_doi.metadata.snapshot.files import (
        Limits,
        SnapshotError,
        SnapshotIndex,
        index_snapshots,
    )
    from airflow_doi.metadata.snapshot.records import (
        REASONS,
        MemberScan,
        RecordReader,
        RowSettings,
    )
    from airflow_doi.metadata.snapshot.scan import ScanProgress, ScanStats, default_workers, scan

_LAZY: dict[str, str] = {
    "Limits": "airflow_doi.metadata.snapshot.files",
    "SnapshotError": "airflow_doi.metadata.snapshot.files",
    "SnapshotIndex": "airflow_doi.metadata.snapshot.files",
    "index_snapshots": "airflow_doi.metadata.snapshot.files",
    "REASONS": "airflow_doi.metadata.snapshot.records",
    "MemberScan": "airflow_doi.metadata.snapshot.records",
    "RecordReader": "airflow_doi.metadata.snapshot.records",
    "RowSettings": "airflow_doi.metadata.snapshot.records",
    "ScanProgress": "airflow_doi.metadata.snapshot.scan",
    "ScanStats": "airflow_doi.metadata.snapshot.scan",
    "default_workers": "airflow_doi.metadata.snapshot.scan",
    "scan": "airflow_doi.metadata.snapshot.scan",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())
