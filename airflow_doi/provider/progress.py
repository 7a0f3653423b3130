"""Task-log progress lines (:class:`ProgressMeter`), the :class:`TaskLog` they go to, durations.

A meter logs done/total, rate and ETA, at most every few seconds.

The meter is not :data:`airflow_doi.resolver.batch.Progress`, the resolver's progress callback
type: a resolve task feeds that callback's events to a meter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["ProgressMeter", "TaskLog", "format_duration"]


class TaskLog(Protocol):
    """Anything with a logging-style ``info`` and ``warning`` (a ``Logger``, a task's
    ``self.log``)."""

    def info(self, msg: Any, /, *args: Any, **kwargs: Any) -> Any: ...

    def warning(self, msg: Any, /, *args: Any, **kwargs: Any) -> Any: ...


def format_duration(seconds: float | None) -> str:
    """``3725`` -> ``1h02m05s``; ``None`` -> ``?``."""
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "?"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class ProgressMeter:
    """Counts units of work and logs ``label: done/total (pct), rate/s, ETA`` lines."""

    def __init__(
        self,
        label: str,
        total: int,
        log: TaskLog,
        *,
        unit: str = "rows",
        every: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.every = every
        self._log = log
        self._clock = clock
        self.started = clock()
        self._last_logged = float("-inf")

    @property
    def elapsed(self) -> float:
        return self._clock() - self.started

    @property
    def rate(self) -> float:
        elapsed = self.elapsed
        return self.done / elapsed if elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        rate = self.rate
        return (self.total - self.done) / rate if rate > 0 else None

    def line(self) -> str:
        share = f" ({100 * self.done / self.total:.1f}%)" if self.total else ""
        return (
            f"{self.label}: {self.done}/{self.total} {self.unit}{share}, "
            f"{self.rate:.1f} {self.unit}/s, ETA {format_duration(self.eta)}"
        )

    def advance(self, count: int, *, force: bool = False) -> None:
        """Add ``count`` finished units; log a line if ``every`` seconds have passed."""
        self.done += count
        self.report(force=force)

    def report(self, *, force: bool = False) -> None:
        now = self._clock()
        if force or now - self._last_logged >= self.every:
            self._last_logged = now
            self._log.info("%s", self.line())
