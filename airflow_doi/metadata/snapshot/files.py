"""The agencies' data files on disk: which members they hold, and each member's bytes, read in
place.

A snapshot path is recognised by its content, never by its name:

* a **tar** (``ustar`` at byte 257; the agencies' files are plain tars), whose regular files
  are the members; nothing is ever extracted: a member is a byte range of the tar, read where
  it lies, so a member named ``../x`` or ``/etc/x`` is only ever a name in a message;
* a **gzip** file: a member itself (one ``.json.gz`` / ``.jsonl.gz``), or a gzipped tar
  (``.tar.gz``), whose members are then read in one pass, in order;
* a **JSON** file (an uncompressed member);
* a **folder**, walked in name order: each regular file in it is one of the above (symbolic
  links are not followed, hidden files and folders passed over; files of any other kind are
  listed as skipped, with the reason).

:func:`inflate` reads a member's bytes as a stream of chunks, decompressing gzip (several
gzip members one after the other too) under two bounds: the bytes it may produce in all, and
how many times its input it may grow (a gzip bomb stops at once, whatever its size). Standard
library only.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Final

from airflow_doi.resolver.text import server_text

__all__ = [
    "GZIP_MAGIC",
    "FileRange",
    "Limits",
    "Member",
    "MemberProblem",
    "Skipped",
    "SnapshotError",
    "SnapshotIndex",
    "check_paths",
    "content_chunks",
    "gzipped_tar_members",
    "index_snapshots",
    "inflate",
    "member_chunks",
]

GZIP_MAGIC: Final = b"\x1f\x8b"
#: Bytes read from a file at a time, and the most one decompression step may produce.
CHUNK: Final = 1 << 20
_TAR_MAGIC_AT: Final = 257


class SnapshotError(ValueError):
    """A snapshot path that cannot be used at all (missing, unreadable, holding no member)."""


class MemberProblem(Exception):
    """A member that stopped early: ``reason`` (a word: ``truncated_gzip``, ``damaged_gzip``,
    ``inflation_limit``, ``member_too_large``...) and what it means, in ``detail``. What was
    read before the problem is still used."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Limits:
    """The bounds every member is read under (defaults fit the agencies' real files, whose
    records are at most a few MB and whose gzip members grow 5 to 30 times)."""

    #: The longest record (a JSON line, or one record of a document) read; a longer one is
    #: skipped (``record_too_large``) without holding more than this in memory.
    max_record_bytes: int = 16 << 20
    #: The largest JSON document (``{"items": [...]}``) read whole; a larger member is skipped.
    max_document_bytes: int = 512 << 20
    #: The most bytes one member may inflate to, and how many times its compressed size it may
    #: grow once past ``ratio_floor`` bytes (a gzip bomb grows about 1,000 times; the
    #: agencies' files, 5 to 30).
    max_member_bytes: int = 64 << 30
    max_ratio: float = 200.0
    ratio_floor: int = 64 << 20

    def __post_init__(self) -> None:
        for name in ("max_record_bytes", "max_document_bytes", "max_member_bytes",
                     "ratio_floor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1024:
                raise ValueError(f"{name} must be an integer of at least 1024, not {value!r}")
        if not self.max_ratio >= 2:
            raise ValueError(f"max_ratio must be at least 2, not {self.max_ratio!r}")


@dataclass(frozen=True)
class Member:
    """One member of a snapshot: ``size`` bytes at ``offset`` of ``path`` (the whole file when
    it is a member itself). ``stream`` is set for a member of a gzipped tar, which is read in
    one pass with its siblings (:attr:`SnapshotIndex.streams`)."""

    #: The snapshot path the user gave (a file or a folder).
    source: str
    #: The file that holds the member's bytes.
    path: str
    #: The member's name: its name in the tar, or its path under the folder; for messages.
    name: str
    offset: int
    size: int
    mtime: float = 0.0
    #: The tar it is a member of, as messages name it ("" for a file of its own).
    container: str = ""

    @property
    def shown(self) -> str:
        """The name as messages show it (``crossref.tar:43.json.gz`` for a tar's member):
        escaped, bounded (a name is the file's, not ours)."""
        name = f"{self.container}:{self.name}" if self.container else self.name
        return server_text(name, 300)

    @property
    def identity(self) -> str:
        """What names this member across runs: the file's base name and size, the member's
        name, offset and size (a file copied elsewhere is the same snapshot)."""
        size = _size_of(self.path)
        return (f"{os.path.basename(self.path)}:{size}:{self.name}:{self.offset}:"
                f"{self.size}")


@dataclass(frozen=True)
class Skipped:
    """An entry of a snapshot path that is not a member, and why (a link, a device, a file of
    another kind, a damaged tar)."""

    source: str
    name: str
    reason: str
    detail: str

    @property
    def shown(self) -> str:
        return server_text(self.name, 300)


@dataclass
class SnapshotIndex:
    """Everything the snapshot paths hold: members read in place, gzipped tars read in one
    pass each, and what was skipped."""

    members: list[Member] = field(default_factory=list)
    #: Gzipped tars (``.tar.gz``): read front to back, one worker each.
    streams: list[Member] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    #: The newest modification time of the files and tar members: the snapshot's date.
    newest: float = 0.0

    @property
    def date(self) -> datetime | None:
        """The snapshot's date (its newest file or member), None when nothing was found."""
        return datetime.fromtimestamp(self.newest, timezone.utc) if self.newest else None

    @property
    def total_bytes(self) -> int:
        return sum(m.size for m in self.members) + sum(s.size for s in self.streams)

    def __len__(self) -> int:
        return len(self.members) + len(self.streams)


def _size_of(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def _head(path: str, size: int = 512) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(size)


def _gunzipped_head(path: str, size: int = 512) -> bytes:
    """The first bytes of a gzip file once decompressed (b"" when they cannot be read)."""
    decompressor = zlib.decompressobj(31)
    out = b""
    try:
        with open(path, "rb") as handle:
            while len(out) < size:
                data = handle.read(65536)
                if not data:
                    break
                out += decompressor.decompress(data, size - len(out))
                if decompressor.eof:
                    break
    except (zlib.error, OSError):
        return out
    return out


def _is_tar(head: bytes) -> bool:
    return head[_TAR_MAGIC_AT:_TAR_MAGIC_AT + 5] == b"ustar"


#: How JSON records begin: an object's first key (or an empty one), an array of them.
_JSON_START: Final = re.compile(rb'(?:\xef\xbb\xbf)?\s*(?:\{\s*["}]|\[\s*[{\]])')


def _looks_like_json(head: bytes) -> bool:
    """Whether a file begins as JSON records do (not a TOML ``[section]``, an INI file...)."""
    return _JSON_START.match(head) is not None


def index_snapshots(paths: Iterable[str | os.PathLike[str]]) -> SnapshotIndex:
    """The members of every snapshot path, in order (a folder in name order); raises
    :class:`SnapshotError` for a path that does not exist or cannot be read."""
    index = SnapshotIndex()
    for given in paths:
        source = os.fspath(given)
        if not os.path.lexists(source):
            raise SnapshotError(f"{source}: no such file or folder")
        if os.path.isdir(source):
            for folder, dirs, files in os.walk(source, onerror=_raise):
                # Hidden folders and files (.git, .DS_Store) are no one's data files.
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(f for f in files if not f.startswith(".")):
                    full = os.path.join(folder, name)
                    shown = os.path.relpath(full, source)
                    if os.path.islink(full):
                        index.skipped.append(Skipped(source, shown, "not_a_file",
                                                     "a symbolic link, not followed"))
                        continue
                    _index_file(index, source, full, shown)
            continue
        _index_file(index, source, source, os.path.basename(source))
    return index


def _raise(error: OSError) -> None:
    raise SnapshotError(f"{error.filename}: cannot be read ({error.strerror})")


def _kind(path: str) -> str:
    """What a file is, by its first bytes: ``tar``, ``gzipped_tar``, ``member`` (gzip or
    JSON), ``empty`` or ``other``."""
    head = _head(path)
    if _is_tar(head):
        return "tar"
    if head[:2] == GZIP_MAGIC:
        return "gzipped_tar" if _is_tar(_gunzipped_head(path)) else "member"
    if _looks_like_json(head):
        return "member"
    return "empty" if not head else "other"


#: Why a file of each kind that holds no records is skipped.
_OTHER: Final[dict[str, tuple[str, str]]] = {
    "empty": ("empty", "an empty file"),
    "other": ("not_a_data_file",
              "neither a tar, a gzip file nor JSON (a checksum list, a README...)"),
}


def _index_file(index: SnapshotIndex, source: str, path: str, shown: str) -> None:
    try:
        status = os.stat(path)
        if not os.path.isfile(path):
            index.skipped.append(Skipped(source, shown, "not_a_file",
                                         "not a regular file (a device, a pipe...)"))
            return
        kind = _kind(path)
    except OSError as error:
        raise SnapshotError(f"{path}: cannot be read ({error.strerror})") from None
    member = Member(source, path, shown, 0, status.st_size, status.st_mtime)
    if kind == "tar":
        _index_tar(index, source, path, status.st_mtime)
    elif kind in ("gzipped_tar", "member"):
        (index.streams if kind == "gzipped_tar" else index.members).append(member)
        index.newest = max(index.newest, status.st_mtime)
    else:
        index.skipped.append(Skipped(source, shown, *_OTHER[kind]))


def check_paths(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Raise :class:`SnapshotError` unless every path is a data file, or a folder holding at
    least one (its first bytes only are read: cheap, before any other work)."""
    advice = ("give Crossref's or DataCite's data file (a tar), .json.gz or .jsonl.gz files, "
              "or a folder of them")
    for given in paths:
        source = os.fspath(given)
        try:
            if not os.path.lexists(source):
                raise SnapshotError(f"{source}: no such file or folder")
            if os.path.isdir(source):
                for folder, dirs, files in os.walk(source, onerror=_raise):
                    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                    if any(os.path.isfile(os.path.join(folder, name))
                           and not os.path.islink(os.path.join(folder, name))
                           and _kind(os.path.join(folder, name)) not in _OTHER
                           for name in sorted(files)):
                        break
                else:
                    raise SnapshotError(f"{source}: the folder holds no data file; {advice}")
                continue
            if not os.path.isfile(source):
                raise SnapshotError(f"{source}: not a regular file; {advice}")
            kind = _kind(source)
        except OSError as error:
            raise SnapshotError(f"{source}: cannot be read ({error.strerror})") from None
        if kind in _OTHER:
            raise SnapshotError(f"{source}: not a data file ({_OTHER[kind][1]}); {advice}")


def _index_tar(index: SnapshotIndex, source: str, path: str, mtime: float) -> None:
    """The regular files of an uncompressed tar, as byte ranges of it."""
    size = _size_of(path)
    shown = os.path.basename(path)
    with open(path, "rb") as handle:
        try:
            with tarfile.open(fileobj=handle, mode="r:") as tar:
                for entry in _tar_entries(tar, source, path, index):
                    end = entry.offset_data + entry.size
                    if end > size:
                        index.skipped.append(Skipped(
                            source, f"{shown}:{entry.name}", "truncated_tar",
                            f"the tar ends {end - size:,} bytes before this member does"))
                        if entry.offset_data < size:  # what is there is still read
                            index.members.append(Member(
                                source, path, entry.name, entry.offset_data,
                                size - entry.offset_data, entry.mtime, shown))
                        break
                    index.members.append(Member(source, path, entry.name, entry.offset_data,
                                                entry.size, float(entry.mtime), shown))
                    index.newest = max(index.newest, float(entry.mtime) or mtime)
        except tarfile.TarError as error:
            index.skipped.append(Skipped(source, os.path.basename(path), "damaged_tar",
                                         f"the tar cannot be read ({error})"))


def _tar_entries(tar: tarfile.TarFile, source: str, path: str,
                 index: SnapshotIndex) -> Iterator[tarfile.TarInfo]:
    """The regular-file entries of a tar (a damaged header ends the listing, reported)."""
    listed = 0
    while True:
        try:
            entry = tar.next()
        except tarfile.TarError as error:
            index.skipped.append(Skipped(
                source, os.path.basename(path), "damaged_tar",
                f"a header after {listed:,} entries cannot be read ({error}); the members "
                "before it are used"))
            return
        if entry is None:
            _check_end(tar, source, path, listed, index)
            return
        listed += 1
        # A listing of 42,000 members need not be kept twice.
        tar.members.clear()  # type: ignore[attr-defined]
        if entry.isdir():
            continue
        if not entry.isreg():
            index.skipped.append(Skipped(source, f"{os.path.basename(path)}:{entry.name}",
                                         "not_a_file",
                                         "a link or a special file, not a regular file"))
            continue
        yield entry


def _check_end(tar: tarfile.TarFile, source: str, path: str, listed: int,
               index: SnapshotIndex) -> None:
    """tarfile ends a listing quietly at a damaged header: what follows the last member must
    be the tar's zero blocks, else the rest of the file is reported as not read."""
    end = tar.offset
    size = _size_of(path)
    with open(path, "rb") as handle:
        handle.seek(end)
        rest = handle.read(1 << 16)
    if not rest.strip(b"\x00"):
        return
    if not rest[:1024].strip(b"\x00"):  # the tar's two end blocks, then something else
        index.skipped.append(Skipped(
            source, os.path.basename(path), "trailing_data",
            f"{size - end - 1024:,} bytes follow the tar's end: not members, not read (every "
            f"member, {listed:,} entries, was)"))
        return
    index.skipped.append(Skipped(
        source, os.path.basename(path), "damaged_tar",
        f"a damaged header after {listed:,} entries: the last {size - end:,} bytes of the tar "
        "are not read; the members before it are used"))


class FileRange:
    """``size`` bytes at ``offset`` of ``path``, read in place (:meth:`read`, then
    :meth:`close`; a context manager)."""

    def __init__(self, path: str, offset: int, size: int) -> None:
        self._handle = open(path, "rb")
        self._handle.seek(offset)
        self._left = size

    def read(self, n: int) -> bytes:
        if self._left <= 0:
            return b""
        data = self._handle.read(min(n, self._left))
        self._left = self._left - len(data) if data else 0
        return data

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> FileRange:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def member_chunks(member: Member, limits: Limits) -> Iterator[bytes]:
    """A member's content, decompressed when it is gzip, in chunks of at most 1 MiB;
    :class:`MemberProblem` where it stops early (after yielding what could be read)."""
    with FileRange(member.path, member.offset, member.size) as source:
        yield from content_chunks(source.read, limits)


def content_chunks(read: Callable[[int], bytes], limits: Limits) -> Iterator[bytes]:
    """The content of a byte stream read by ``read(n)``: inflated when it starts as gzip, else
    as it is (bounded by ``max_member_bytes`` either way)."""
    first = read(CHUNK)
    if first[:2] == GZIP_MAGIC:
        yield from inflate(_prepend(first, read), limits)
        return
    produced = 0
    data = first
    while data:
        produced += len(data)
        if produced > limits.max_member_bytes:
            raise MemberProblem("member_too_large",
                                f"over {limits.max_member_bytes:,} bytes; the rest is skipped")
        yield data
        data = read(CHUNK)


def _prepend(first: bytes, read: Callable[[int], bytes]) -> Callable[[int], bytes]:
    pending = [first]

    def again(n: int) -> bytes:
        if pending:
            return pending.pop()
        return read(n)

    return again


def inflate(read: Callable[[int], bytes], limits: Limits, *,
            max_bytes: int | None = -1) -> Iterator[bytes]:
    """Decompress gzip from ``read(n)``: one gzip member after another (concatenated gzip),
    in chunks of at most 1 MiB, stopping with :class:`MemberProblem` at a cut or damaged
    stream (what came before is yielded) or past the bounds of ``limits``: ``max_bytes``
    produced (default ``limits.max_member_bytes``; None: no bound but the ratio) and
    ``max_ratio`` times the bytes read."""
    if max_bytes == -1:
        max_bytes = limits.max_member_bytes
    decompressor = zlib.decompressobj(31)
    consumed = produced = 0
    pending = b""
    started = False  # a gzip member has begun and not ended
    while True:
        if decompressor.unconsumed_tail:
            data = decompressor.unconsumed_tail
        elif pending:
            data, pending = pending, b""
        else:
            data = read(CHUNK)
            if not data:
                break
            consumed += len(data)
        try:
            out = decompressor.decompress(data, CHUNK)
        except zlib.error as error:
            raise MemberProblem("damaged_gzip", f"the gzip data is damaged ({error}); the "
                                "rest of the member is skipped") from None
        started = True
        if out:
            produced += len(out)
            if max_bytes is not None and produced > max_bytes:
                raise MemberProblem("member_too_large", f"inflates to over {max_bytes:,} "
                                    "bytes; the rest is skipped")
            if produced > limits.ratio_floor and produced > limits.max_ratio * consumed:
                raise MemberProblem(
                    "inflation_limit", f"inflates over {limits.max_ratio:g} times its size "
                    f"({produced:,} bytes from {consumed:,}): a gzip bomb; the rest is "
                    "skipped")
            yield out
        if decompressor.eof:
            rest = decompressor.unused_data
            decompressor = zlib.decompressobj(31)
            started = False
            if rest.strip(b"\x00"):  # another gzip member follows (concatenated gzip)
                # Its first byte alone may end this read: judged once its header is there.
                if not GZIP_MAGIC.startswith(rest[:2]):
                    raise MemberProblem("damaged_gzip", "bytes that are not gzip follow the "
                                        "compressed data; they are skipped")
                pending = rest
    if started:
        raise MemberProblem("truncated_gzip", "the gzip data ends early (a file cut short); "
                            "the records before the cut are used")


class _ChunkReader(io.RawIOBase):
    """A read-only file over an iterator of byte chunks (tarfile reads a stream through it)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._view = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not len(self._view):
            try:
                self._view = memoryview(next(self._chunks))
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._view))
        buffer[:size] = self._view[:size]
        self._view = self._view[size:]
        return size


def gzipped_tar_members(stream: Member,
                        limits: Limits) -> Iterator[tuple[Member, Callable[[int], bytes]]]:
    """The regular members of a gzipped tar, in order, each as a :class:`Member` (its
    ``offset`` is its place in the uncompressed tar) and a ``read(n)`` over its bytes: read in
    one pass, nothing extracted, the outer gzip under the ratio bound of ``limits``."""
    with FileRange(stream.path, 0, stream.size) as source, tarfile.open(
            fileobj=io.BufferedReader(_ChunkReader(inflate(source.read, limits, max_bytes=None)),
                                      CHUNK), mode="r|") as tar:
        for entry in tar:
            tar.members.clear()  # type: ignore[attr-defined]
            if not entry.isreg():
                continue
            extracted = tar.extractfile(entry)
            if extracted is None:
                continue
            member = Member(stream.source, stream.path, entry.name, entry.offset_data,
                            entry.size, float(entry.mtime), stream.name)
            yield member, extracted.read
