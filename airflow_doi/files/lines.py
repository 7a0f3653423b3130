"""A CSV file's physical lines, as the csv module pulls them, bounded: both the sniffer's
header reading (:mod:`.sniff`) and the lenient reader (:mod:`.read`) take records through
:class:`Lines`, so a record longer than :data:`~airflow_doi.files.MAX_LINE_CHARS` is cut at
the same place on both. Standard library only."""

from __future__ import annotations

import csv
from collections import deque
from typing import IO, NoReturn

from airflow_doi.files import MAX_LINE_CHARS

__all__ = ["Lines", "Overlong", "as_text", "unclosed"]

#: How much of the rest of a line cut at MAX_LINE_CHARS is read at a time to skip it.
_SKIP_CHARS = 1 << 20


class Overlong(Exception):
    """The record being read is longer than :data:`MAX_LINE_CHARS` (see :class:`Lines`)."""


class Lines:
    """The file's physical lines, remembering those of the record being read: the csv module
    pulls one line at a time, so after each record ``taken`` holds exactly its lines.

    A record is bounded (:data:`MAX_LINE_CHARS`): a longer line is cut there (the rest of it
    skipped when the next line is asked for), and a line that is cut, or that takes the
    record's lines past the bound, raises :class:`Overlong` once it is in ``taken``, before
    the csv module sees it. :meth:`new_record` starts the count again."""

    def __init__(self, handle: IO[str]) -> None:
        self._handle = handle
        self.taken: list[str] = []
        self._again: deque[str] = deque()  # lines given back, read before the file's next
        self._size = 0
        self._skip = False  # the rest of a cut line is still to be skipped
        self._cr = False  # a piece that filled its limit ended in a CR

    def new_record(self) -> None:
        self.taken, self._size = [], 0

    def again(self, lines: list[str]) -> None:
        """Read ``lines`` (taken already, and within the bound) again, before the rest."""
        self._again.extendleft(reversed(lines))

    @property
    def replaying(self) -> bool:
        """Whether lines given back are still to be read again (the next record starts on
        one of them)."""
        return bool(self._again)

    def __iter__(self) -> Lines:
        return self

    def __next__(self) -> str:
        if self._again:
            line = self._again.popleft()
            self.taken.append(line)
            self._size += len(line)
            return line
        if self._skip:
            self._skip_rest()
        line = self._handle.readline(MAX_LINE_CHARS + 1)
        if self._cr:
            self._cr = False
            if line == "\n":  # the end of a CRLF that the limit split, not a line
                line = self._handle.readline(MAX_LINE_CHARS + 1)
        if len(line) > MAX_LINE_CHARS:
            self._long(line)
        if not line:
            raise StopIteration
        self.taken.append(line)
        self._size += len(line)
        if self._size > MAX_LINE_CHARS:
            raise Overlong
        return line

    def _long(self, line: str) -> NoReturn:
        """A line of more than MAX_LINE_CHARS characters read: taken, cut there if it goes on
        (the rest skipped next), and :class:`Overlong` raised."""
        if line[-1] == "\r":
            self._cr = True  # it may be a CRLF's CR: a line feed alone next is not a line
        elif line[-1] != "\n":
            line, self._skip = line[:MAX_LINE_CHARS], True
        self.taken.append(line)
        self._size += len(line)
        raise Overlong

    def _skip_rest(self) -> None:
        """Read past the rest of a line cut at MAX_LINE_CHARS, a piece at a time."""
        self._skip = False
        while piece := self._handle.readline(_SKIP_CHARS):
            if piece[-1] in "\r\n":
                self._cr = len(piece) == _SKIP_CHARS and piece[-1] == "\r"
                return


def unclosed(lines: list[str], delimiter: str) -> bool:
    """Whether a record read over several lines is a quote left open rather than a quoted
    cell holding line breaks: read strictly, it does not parse (a quote closes it before
    other text, or the file ends inside it). Both readers leave such a record to this one."""
    try:
        for _ in csv.reader(iter(lines), delimiter=delimiter, strict=True):
            pass
    except csv.Error:
        return True
    return False


def as_text(name: str) -> str:
    """A header cell as text (a non-UTF-8 byte shows as U+FFFD)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
