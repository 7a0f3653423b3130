"""The frames a scan's parent and its workers exchange over pipes: an 8-byte length and a
pickle (trusted: parent and worker are the same program)."""

from __future__ import annotations

import pickle
import struct
from typing import IO, Any

__all__ = ["read_frame", "write_frame"]

_LENGTH = struct.Struct("<Q")


def write_frame(stream: IO[bytes], value: Any) -> None:
    """One pickled value, its length first; flushed (``stream`` buffered or raw)."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        written = stream.write(view)
        view = view[written if written is not None else len(view):]
    stream.flush()


def _exactly(stream: IO[bytes], size: int) -> bytes:
    """``size`` bytes (a raw pipe may give fewer a read), or ``EOFError``."""
    parts = []
    while size:
        data = stream.read(size)
        if not data:
            raise EOFError("the pipe closed")
        parts.append(data)
        size -= len(data)
    return b"".join(parts)


def read_frame(stream: IO[bytes]) -> Any:
    """The next value, or ``EOFError`` when the other end has gone. The parent reads its
    workers' pipes unbuffered: a buffer reading ahead would hide a second frame from
    ``select``."""
    size = _LENGTH.unpack(_exactly(stream, _LENGTH.size))[0]
    return pickle.loads(_exactly(stream, size))
