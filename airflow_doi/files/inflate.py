"""Reading a gzip-compressed CSV without letting it inflate without bound.

Deflate, gzip's method, inflates at most about 1,032 times, and gets near that only on runs of
one to four repeated bytes: the 400 KB file whose one cell is 400 MiB of one letter, or
millions of blank lines. A CSV of catalogue rows stays far below, however repetitive: real
exports inflate 2 to 10 times, one DOI repeated on every row about 510 times, a row of empty
columns repeated about 350 times, any row of five bytes or more repeated at most about 690
times (a repeat further back costs deflate more bits). So a stream that has inflated more
than :data:`MAX_INFLATION` times the compressed bytes read, once past
:data:`INFLATION_FLOOR` bytes of text (small files and a file's head never count), is
refused with :class:`InflationError`: it is a decompression bomb, or at least not a file of
rows. A genuine one can be decompressed (``gunzip``) and passed as the CSV it holds.

The ratio is a cheap first line, not the bound on memory: the same runs compressed at gzip's
fastest levels inflate only about 230 times, and are read; what bounds memory, for any file,
is the reader's bound on a record (:data:`~airflow_doi.files.MAX_LINE_CHARS`).

Both CSV readers read gzip through :func:`open_gzip` (Python's ``gzip``, as fast as Arrow's
own reader here), so they refuse the same files.
"""

from __future__ import annotations

import gzip
import io
import os
from typing import Any, Final

__all__ = ["INFLATION_FLOOR", "MAX_INFLATION", "InflationError", "open_gzip"]

#: Text bytes per compressed byte read beyond which a gzip CSV is refused (see the module).
MAX_INFLATION: Final[int] = 750
#: Text read before the ratio counts.
INFLATION_FLOOR: Final[int] = 64 << 20


class InflationError(Exception):
    """A gzip stream inflated more than :data:`MAX_INFLATION` times (the message says what to
    do; the caller names the file)."""

    def __init__(self, inflated: int, compressed: int) -> None:
        super().__init__(
            f"inflates more than {MAX_INFLATION:,} times ({inflated:,} bytes of text from the "
            f"first {compressed:,} compressed bytes), as a decompression bomb does, so it is "
            "not read; if it is a genuine CSV, decompress it (gunzip) and pass the file it holds"
        )


class _Inflating(io.RawIOBase):
    """The text of a gzip file, counted against the compressed bytes read."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self._file = open(path, "rb")  # closed by close()
        self._gzip = gzip.GzipFile(fileobj=self._file, mode="rb")
        self._inflated = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self._gzip.readinto(buffer)
        self._inflated += count
        compressed = self._file.tell()
        if self._inflated > INFLATION_FLOOR and self._inflated > MAX_INFLATION * compressed:
            raise InflationError(self._inflated, compressed)
        return count

    def close(self) -> None:
        if not self.closed:
            self._gzip.close()
            self._file.close()
        super().close()


def open_gzip(path: str | os.PathLike[str]) -> io.BufferedReader:
    """The text bytes of the gzip file at ``path``; reading past :data:`MAX_INFLATION` raises
    :class:`InflationError` (and a damaged file ``EOFError``, ``zlib.error`` or
    ``gzip.BadGzipFile``, as ``gzip`` does)."""
    return io.BufferedReader(_Inflating(path), buffer_size=1 << 20)
