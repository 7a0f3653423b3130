"""A scan worker: ``python -m airflow_doi.metadata.snapshot.worker``, fed over its pipes.

The parent (:mod:`.scan`) starts each worker as a fresh interpreter (never a fork of a
threaded process, never a re-import of the parent's ``__main__``), sends it the scan's
settings (and the members an earlier run finished) once, then members one at a time; each
answer is the member's
:class:`~airflow_doi.metadata.snapshot.records.MemberScan` list. Frames are an 8-byte length
and a pickle, on stdin and stdout (trusted: parent and worker are the same program). The
worker ignores Ctrl-C (the parent handles it and stops its workers), and ends when its stdin
closes.
"""

from __future__ import annotations

import signal
import sys

from airflow_doi.metadata.snapshot.frames import read_frame, write_frame

__all__ = ["main"]

def _die_with_parent() -> None:
    """On Linux, end with the parent (a parent killed by SIGTERM or SIGKILL leaves no worker
    reading on for itself)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    from airflow_doi.metadata.snapshot.records import RecordReader
    from airflow_doi.metadata.snapshot.scan import read_member, read_stream, task_failed

    source, sink = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the pipe
    try:
        wanted, limits, settings, finished = read_frame(source)
    except EOFError:
        return 0
    reader = RecordReader(wanted, limits, settings)
    while True:
        try:
            kind, member = read_frame(source)
        except EOFError:
            return 0
        try:
            if kind == "stream":
                results = list(read_stream(reader, member, finished))
            else:
                results = [read_member(reader, member)]
        except Exception as error:  # a bug of ours: the member is reported, the scan goes on
            results = [task_failed(member, f"the reader failed ({type(error).__name__}: "
                                           f"{error})")]
        write_frame(sink, results)


if __name__ == "__main__":
    sys.exit(main())
