"""The data files as the first source of an enrichment: every key they hold answered there.

:func:`answer_from_snapshots` scans the snapshot paths (:mod:`.scan`) for the keys asked and
returns their rows, the newest record winning where a key is in several files (Crossref's
``indexed`` date-time, DataCite's ``updated``). A :class:`MemberStore` (the enrichment's
cache file, the Airflow operator's tables) keeps each finished member's rows with the member
itself, in one commit: a scan killed halfway and started again under the same ``scan_id``
reads only the members it had not finished, and never writes a stored row again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from airflow_doi.metadata.result import MetadataResult
from airflow_doi.metadata.snapshot.files import Limits, SnapshotIndex, index_snapshots
from airflow_doi.metadata.snapshot.records import MemberScan, RowSettings
from airflow_doi.metadata.snapshot.scan import ScanStats, scan

__all__ = ["MemberStore", "SnapshotAnswers", "answer_from_snapshots", "scan_digest"]


class MemberStore(Protocol):
    """Where a scan's finished members and their rows are kept."""

    def finished_members(self, scan: str) -> set[str]:
        """The members the scan ``scan`` finished (their rows are stored)."""

    def store_member(self, scan: str, member: MemberScan,
                     results: list[MetadataResult]) -> None:
        """A finished member's rows and the member itself, in one commit."""


@dataclass
class SnapshotAnswers:
    """What the data files answered: rows by key, the scan's figures, the files' index."""

    results: dict[str, MetadataResult]
    stats: ScanStats
    index: SnapshotIndex


def scan_digest(keys: Iterable[str], *parts: str) -> str:
    """A scan's name from the keys it looks for (and ``parts``): the same input scanned again
    resumes the scan; another input starts its own."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    for key in sorted(keys):
        digest.update(key.encode("utf-8", "surrogatepass") + b"\n")
    return digest.hexdigest()[:32]


def _newer(stamp: str | None, than: str | None) -> bool:
    """Whether a record changed at ``stamp`` is newer than one changed at ``than`` (ISO text;
    a record without a stamp is the older)."""
    return stamp is not None and (than is None or stamp > than)


def answer_from_snapshots(
    paths: Iterable[str], todo: Mapping[str, str], *, settings: RowSettings,
    workers: int | None = None, limits: Limits | None = None,
    store: MemberStore | None = None, scan_id: str = "",
    progress: Callable[[Any], None] | None = None, index: SnapshotIndex | None = None,
    keep: bool = True,
) -> SnapshotAnswers:
    """The rows of the keys of ``todo`` (key -> the DOI as asked, which each row carries)
    that the data files at ``paths`` hold; with ``keep=False`` they go to ``store`` only (the
    answer holds none of them: memory is then a few dozen bytes a key found, whatever the
    files' size)."""
    index = index if index is not None else index_snapshots(paths)
    best: dict[str, tuple[str | None, MetadataResult | None]] = {}
    finished: Collection[str] = store.finished_members(scan_id) if store is not None else ()

    def on_member(member: MemberScan) -> None:
        kept: list[MetadataResult] = []
        for result, stamp in zip(member.found, member.stamps, strict=True):
            key = result.key or ""
            held = best.get(key)
            if held is not None and not _newer(stamp, held[0]):
                continue
            result = replace(result, doi=todo.get(key) or result.doi)
            best[key] = (stamp, result if keep else None)
            kept.append(result)
        if store is not None and not member.retry:
            store.store_member(scan_id, member, kept)

    def report(event: Any) -> None:  # keys found, each once (a key in several files too)
        if progress is not None:
            progress(replace(event, found=len(best)))

    stats = scan(index, set(todo), settings=settings, on_member=on_member, workers=workers,
                 limits=limits, finished=finished, progress=report)
    stats.found = len(best)  # distinct keys (a key in several files counts once)
    return SnapshotAnswers({key: result for key, (_, result) in best.items()
                            if result is not None}, stats, index)
