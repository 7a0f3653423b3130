"""The simulated agencies' public data files: the same works as their APIs serve, as files.

Written after the agencies' descriptions of their files, with made-up works
(:mod:`airflow_doi.resolver.agencies`):

* **Crossref**: a plain tar of gzipped JSON files, each ``{"items": [...]}`` of ``/works``
  records (:func:`~airflow_doi.resolver.agencies.crossref_item_for`), named ``0.json.gz``,
  ``1.json.gz``...; or, as Crossref's newer tools write it, gzipped JSON lines, one record a
  line (``form="jsonl"``);
* **DataCite**: a plain tar holding ``dois/updated_YYYY-MM/part_NNNN.jsonl.gz`` (JSON lines of
  JSON:API records, :func:`~airflow_doi.resolver.agencies.datacite_record_for`, or of their
  attributes alone) and a ``dois/updated_YYYY-MM.csv.gz`` list of each month's DOIs.

Used by the tests, the benchmark, the demo and ``airflow-doi simulator --data-files``.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import tarfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from airflow_doi.resolver.agencies import Work, crossref_item_for, datacite_record_for

__all__ = [
    "CROSSREF_PER_FILE",
    "DATACITE_PER_PART",
    "DATA_FILES",
    "add_member",
    "crossref_tar",
    "datacite_tar",
    "jsonl_gz",
    "write_data_files",
]

#: The files :func:`write_data_files` writes.
DATA_FILES: Final[tuple[str, ...]] = ("crossref.tar", "crossref.jsonl.gz", "datacite.tar")
#: Records per gzipped JSON file of Crossref's tar (its files hold about 3,000) and per
#: DataCite part (its parts hold up to 10,000).
CROSSREF_PER_FILE: Final = 3000
DATACITE_PER_PART: Final = 10000


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def add_member(tar: tarfile.TarFile, name: str, data: bytes, mtime: float | None = None) -> None:
    """Add ``data`` to ``tar`` as a regular file ``name``."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(mtime if mtime is not None else time.time())
    tar.addfile(info, io.BytesIO(data))


def _dumps(record: Any) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def crossref_tar(path: str | os.PathLike[str], records: Iterable[Any], *,
                 per_file: int = CROSSREF_PER_FILE, mtime: float | None = None,
                 level: int = 6) -> Path:
    """Crossref's data file: a plain tar of gzipped ``{"items": [...]}`` files."""
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for number, batch in enumerate(_chunks(records, per_file)):
            body = b'{"items":[' + b",".join(_dumps(r) for r in batch) + b"]}"
            add_member(tar, f"{number}.json.gz", gzip.compress(body, level, mtime=0), mtime)
    return Path(path)


def jsonl_gz(path: str | os.PathLike[str], records: Iterable[Any], *, level: int = 6) -> Path:
    """Gzipped JSON lines, one record a line (Crossref's newer form, a DataCite part)."""
    with gzip.open(path, "wb", compresslevel=level) as out:
        for record in records:
            out.write(_dumps(record) + b"\n")
    return Path(path)


def datacite_tar(path: str | os.PathLike[str], records: Iterable[tuple[str, Any]], *,
                 per_part: int = DATACITE_PER_PART, mtime: float | None = None,
                 attributes_only: bool = False, level: int = 6) -> Path:
    """DataCite's data file: ``(month 'YYYY-MM', record)`` pairs as a plain tar of
    ``dois/updated_YYYY-MM/part_NNNN.jsonl.gz`` parts and a ``.csv.gz`` list per month."""
    by_month: dict[str, list[Any]] = {}
    for month, record in records:
        by_month.setdefault(month, []).append(record)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for month in sorted(by_month):
            listing = io.StringIO()
            writer = csv.writer(listing)
            writer.writerow(["doi", "state", "client_id", "updated"])
            for number, batch in enumerate(_chunks(by_month[month], per_part)):
                lines = []
                for record in batch:
                    attributes = record.get("attributes", {})
                    writer.writerow([attributes.get("doi"), attributes.get("state"),
                                     "example.repo", attributes.get("updated")])
                    lines.append(_dumps(attributes if attributes_only else record))
                body = b"\n".join(lines) + b"\n"
                add_member(tar, f"dois/updated_{month}/part_{number:04d}.jsonl.gz",
                           gzip.compress(body, level, mtime=0), mtime)
            add_member(tar, f"dois/updated_{month}.csv.gz",
                       gzip.compress(listing.getvalue().encode("utf-8"), level, mtime=0), mtime)
    return Path(path)


def write_data_files(folder: str | os.PathLike[str], works: Iterable[Work], *,
                     month: str = "2025-01", mtime: float | None = None) -> dict[str, Path]:
    """The agencies' data files of ``works`` in ``folder``: ``crossref.tar`` (Crossref's
    works), ``crossref.jsonl.gz`` (the same, as JSON lines) and ``datacite.tar`` (DataCite's
    works, updated in ``month``), dated ``mtime`` (files and members; default now). Works of
    other agencies are in neither, as in the field."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    works = list(works)
    crossref = [crossref_item_for(w) for w in works if w.agency == "crossref" and not w.fault]
    datacite = [(month, datacite_record_for(w)) for w in works
                if w.agency == "datacite" and not w.fault]
    written = {
        "crossref": crossref_tar(target / "crossref.tar", crossref, mtime=mtime),
        "crossref_jsonl": jsonl_gz(target / "crossref.jsonl.gz", crossref),
        "datacite": datacite_tar(target / "datacite.tar", datacite, mtime=mtime),
    }
    if mtime is not None:  # the files dated as their members are: the release's date
        for path in written.values():
            os.utime(path, (mtime, mtime))
    return written
