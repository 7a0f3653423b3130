"""A scan of the agencies' data files for a set of keys: each member read once, in parallel.

:func:`scan` reads every member of a :class:`~airflow_doi.metadata.snapshot.files.
SnapshotIndex` (those not already finished), each in a worker process of its own (``workers``,
default the cores; one worker reads in this process), streaming: a member's records are found
by their own DOI and only the wanted ones are mapped (:mod:`.records`). Each finished member
is handed to ``on_member`` in the calling thread as it comes in (any order), which stores its
rows and marks it finished, so that a scan killed halfway and started again reads only the
members it had not finished. A gzipped tar (``.tar.gz``) is one task: its members are read in
one pass.

Memory stays flat in the file's size: a worker holds one member's chunk (a JSON line at most
``max_record_bytes``, a document at most ``max_document_bytes``) and its found rows, and at
most twice as many members as workers are in flight.
"""

from __future__ import annotations

import collections
import contextlib
import io
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Container, Iterator
from dataclasses import dataclass, field
from typing import Any

from airflow_doi.metadata.snapshot.files import (
    Limits,
    Member,
    MemberProblem,
    SnapshotIndex,
    content_chunks,
    gzipped_tar_members,
    member_chunks,
)
from airflow_doi.metadata.snapshot.frames import read_frame, write_frame
from airflow_doi.metadata.snapshot.records import MemberScan, RecordReader, RowSettings

__all__ = [
    "ScanProgress", "ScanStats", "default_workers", "interruptible", "keep_buffers",
    "read_member", "read_stream", "scan", "task_failed",
]


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ScanProgress:
    """Where a scan stands: members and bytes read of all, records seen, keys found."""

    members_done: int
    members: int
    bytes_done: int
    bytes_total: int
    records: int
    found: int
    elapsed: float

    @property
    def rate(self) -> float:
        """Bytes read a second (of the files as stored, compressed)."""
        return self.bytes_done / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        left = self.bytes_total - self.bytes_done
        return left / self.rate if self.rate > 0 else None


@dataclass
class ScanStats:
    """What a scan did, for its summary."""

    members: int = 0
    #: Members finished by an earlier, interrupted scan and not read again.
    resumed: int = 0
    records: int = 0
    found: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    elapsed: float = 0.0
    workers: int = 1
    by_form: Counter[str] = field(default_factory=Counter)
    #: Records (and members) skipped, by reason; the first few members where each was met.
    problems: Counter[str] = field(default_factory=Counter)
    where: dict[str, list[str]] = field(default_factory=dict)
    #: The members that stopped early, with what happened (escaped names).
    stopped: list[tuple[str, str]] = field(default_factory=list)
    #: Entries of the paths that are not members: ``(name, reason, what it is)``.
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    #: When the newest record read last changed (ISO text), None when none says.
    newest: str | None = None

    def add(self, member: MemberScan) -> None:
        self.members += 1
        self.records += member.records
        self.found += len(member.found)
        self.bytes_in += member.bytes_in
        self.bytes_out += member.bytes_out
        self.by_form[member.form] += 1
        for reason, count in member.problems.items():
            self.problems[reason] += count
            places = self.where.setdefault(reason, [])
            if len(places) < 3:
                places.append(member.name)
        if member.newest is not None and (self.newest is None or member.newest > self.newest):
            self.newest = member.newest
        if member.detail is not None and len(self.stopped) < 20:
            self.stopped.append((member.name, member.detail))


# -- what a worker runs -----------------------------------------------------------------------
def task_failed(member: Member, detail: str, reason: str = "reader_failed") -> MemberScan:
    """The result of a member that could not be read at all, this time (read again by the
    next run)."""
    scanned = MemberScan(member.identity, member.shown, form="other", bytes_in=member.size,
                         retry=True)
    scanned.problems[reason] += 1
    scanned.detail = detail
    return scanned


def read_member(reader: RecordReader, member: Member) -> MemberScan:
    """One member read in place (never raises for what it holds: its problems are counted)."""
    try:
        return reader.scan(member.identity, member.shown, member_chunks(member, reader.limits),
                           member.size)
    except OSError as error:  # the file went away or became unreadable mid-scan
        return task_failed(member, f"cannot be read ({error.strerror or error}); read again "
                           "on the next run", "unreadable")


def read_stream(reader: RecordReader, stream: Member,
                finished: Collection[str]) -> Iterator[MemberScan]:
    """The members of a gzipped tar, in one pass (those in ``finished`` passed over)."""
    try:
        for member, read in gzipped_tar_members(stream, reader.limits):
            if member.identity in finished:
                continue
            yield reader.scan(member.identity, member.shown, content_chunks(read, reader.limits),
                              member.size)
    except MemberProblem as problem:  # the outer gzip: cut short, damaged, a bomb
        scanned = MemberScan(stream.identity, stream.shown, form="other", bytes_in=stream.size)
        scanned.problems[problem.reason] += 1
        scanned.detail = problem.detail
        yield scanned
    except (OSError, EOFError) as error:
        scanned = MemberScan(stream.identity, stream.shown, form="other", bytes_in=stream.size)
        scanned.problems["damaged_tar"] += 1
        scanned.detail = f"the gzipped tar cannot be read to its end ({error})"
        yield scanned
    except Exception as error:  # tarfile's own errors (a damaged header)
        scanned = MemberScan(stream.identity, stream.shown, form="other", bytes_in=stream.size)
        scanned.problems["damaged_tar"] += 1
        scanned.detail = f"the gzipped tar cannot be read to its end ({type(error).__name__})"
        yield scanned


# -- in the caller ----------------------------------------------------------------------------
def scan(index: SnapshotIndex, wanted: Container[str] | None, *, settings: RowSettings,
         on_member: Callable[[MemberScan], None], workers: int | None = None,
         limits: Limits | None = None, finished: Collection[str] = (),
         progress: Callable[[ScanProgress], None] | None = None) -> ScanStats:
    """Read every member of ``index`` not in ``finished`` (member identities) for the
    ``wanted`` keys (None: every record); ``on_member`` gets each member's
    :class:`~airflow_doi.metadata.snapshot.records.MemberScan` as it finishes."""
    limits = limits or Limits()
    workers = max(1, workers or default_workers())
    stats = ScanStats(skipped=[(s.shown, s.reason, s.detail) for s in index.skipped])
    todo = [m for m in index.members if m.identity not in finished]
    stats.resumed = len(index.members) - len(todo)
    tasks = [("member", m, m.size) for m in todo]
    tasks += [("stream", s, s.size) for s in index.streams]
    total_bytes = sum(size for _, _, size in tasks)
    started = time.monotonic()
    done_bytes = 0
    stats.workers = min(workers, max(1, len(tasks)))

    def handle(results: list[MemberScan], size: int) -> None:
        nonlocal done_bytes
        for result in results:
            stats.add(result)
            on_member(result)
        done_bytes += size
        if progress is not None:
            progress(ScanProgress(stats.members + stats.resumed, len(index) + _extra(stats, index),
                                  done_bytes, total_bytes, stats.records, stats.found,
                                  time.monotonic() - started))

    if progress is not None:
        progress(ScanProgress(stats.resumed, len(index), 0, total_bytes, 0, 0, 0.0))
    with interruptible():
        if stats.workers == 1:
            keep_buffers()
            reader = RecordReader(wanted, limits, settings)
            for kind, member, size in tasks:
                if kind == "stream":
                    handle(list(read_stream(reader, member, finished)), size)
                else:
                    handle([read_member(reader, member)], size)
        else:
            _in_pool(tasks, finished, stats.workers, (wanted, limits, settings), handle)
    stats.elapsed = time.monotonic() - started
    return stats


def _extra(stats: ScanStats, index: SnapshotIndex) -> int:
    """Members a gzipped tar held beyond the one it counts as before it is read."""
    return max(0, stats.members + stats.resumed - len(index))


#: glibc's allocator in the workers: buffers up to 32 MiB (a member's document, its chunks)
#: from the heap and kept there, not mapped afresh and handed back each time (a page fault per
#: 4 KiB of every member: with two workers, a third of their time went to the kernel).
_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C stops a scan at once: an event loop running the scan (``fetch`` is async) has
    its own SIGINT handler, which only cancels its task, and the task gets control back only
    when the scan ends, hours later on a registry's files. During the scan, in the main
    thread, Ctrl-C raises ``KeyboardInterrupt`` where the scan is: its workers are stopped,
    and the members it had finished stay finished."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:  # interrupts were switched off on purpose: leave them so
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def keep_buffers() -> None:
    """:data:`_MALLOC` for this process (glibc only; elsewhere nothing changes)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD


class _Worker:
    """One worker process (:mod:`.worker`) and the task it is reading (one at a time: it
    reads a task whole before it starts, and the parent never writes while the worker may be
    writing, so neither can wait on the other however large a frame is)."""

    def __init__(self, init: bytes) -> None:
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in sys.path if isinstance(p, str) and p), **_MALLOC}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "airflow_doi.metadata.snapshot.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment, bufsize=0)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.task: tuple[str, Member, int] | None = None
        self.alive = True
        try:
            view = memoryview(init)
            while view:
                view = view[self.stdin.write(view) or 0:]
        except OSError:  # died at once (out of memory, killed): found when its stdout ends
            self.alive = False

    def send(self, task: tuple[str, Member, int]) -> bool:
        """Give the worker its next member; False when it has died."""
        self.task = task
        kind, member, _ = task
        try:
            write_frame(self.stdin, (kind, member))
        except OSError:  # BrokenPipeError: the worker is gone
            self.alive = False
        return self.alive

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.stdin.close()
        with contextlib.suppress(Exception):
            self.process.kill()
        with contextlib.suppress(Exception):
            self.process.wait(5)
        with contextlib.suppress(Exception):
            self.stdout.close()


def _in_pool(tasks: list[tuple[str, Member, int]], finished: Collection[str], workers: int,
             initargs: tuple[Any, ...], handle: Callable[[list[MemberScan], int], None]) -> None:
    """The tasks in ``workers`` processes, each given its next member as soon as it hands back
    the last; results handed to ``handle`` here as they finish. A worker that dies (killed,
    out of memory) costs the member it was reading (reported, read again next run) and is
    replaced; on any error of ours (Ctrl-C included) every worker is stopped."""
    buffer = io.BytesIO()
    write_frame(buffer, (*initargs, set(finished)))
    init = buffer.getvalue()
    queue = collections.deque(tasks)
    selector = selectors.DefaultSelector()
    pool: list[_Worker] = []
    deaths = [0]  # workers in a row that died before handing back anything

    def start() -> None:
        worker = _Worker(init)
        pool.append(worker)
        selector.register(worker.stdout, selectors.EVENT_READ, worker)
        give(worker)

    def give(worker: _Worker) -> None:
        if queue and not worker.send(queue.popleft()):
            died(worker)

    def died(worker: _Worker) -> None:
        """Report the member it held, and let a new worker take on the others."""
        selector.unregister(worker.stdout)
        pool.remove(worker)
        worker.stop()
        code = worker.process.returncode
        deaths[0] += 1
        if deaths[0] > 2 * workers + 2:
            raise RuntimeError(f"the workers reading the data files keep dying (the last "
                               f"with exit status {code}): see the messages above; try "
                               "snapshot_workers=1 (--workers 1) to read in this process")
        if worker.task is not None:
            _, member, size = worker.task
            handle([task_failed(member, f"the worker reading it died (exit status {code}); "
                                "read again on the next run", "worker_died")], size)
        if queue:
            start()

    try:
        for _ in range(min(workers, len(queue))):
            start()
        while pool and any(worker.task is not None for worker in pool):
            for key, _ in selector.select():
                worker = key.data
                try:
                    results = read_frame(worker.stdout)
                except EOFError:
                    died(worker)
                    continue
                task, worker.task = worker.task, None
                deaths[0] = 0
                give(worker)  # its next member first: it reads while we store these
                assert task is not None
                handle(results, task[2])
    finally:
        selector.close()
        for worker in pool:
            worker.stop()
