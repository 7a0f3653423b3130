"""A circuit breaker that pauses the whole batch while the proxy keeps failing.

Per-DOI retries alone would let a large batch hammer a proxy that is down: every DOI would
spend its whole retry budget. The breaker counts consecutive failures across all DOIs; once
``threshold`` is reached it opens and no request leaves for ``cooldown`` seconds. Then a
single probe request is let through (half-open): success closes the breaker, failure reopens
it with the cooldown doubled. When the proxy has kept failing for ``give_up`` seconds every
waiting request raises :class:`CircuitOpenError`, so the batch finishes (as ``error`` rows)
instead of waiting forever.

The same gate carries global pauses asked for by the server (``Retry-After`` on 429/403):
one throttled answer holds back every request, not just the DOI that received it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["CircuitBreaker", "CircuitOpenError"]


class CircuitOpenError(Exception):
    """The proxy has kept failing for longer than the breaker's give-up time."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CircuitBreaker:
    """Closed -> open (after ``threshold`` consecutive failures) -> half-open (one probe)."""

    def __init__(
        self,
        threshold: int = 5,
        cooldown: float = 2.0,
        cooldown_max: float = 60.0,
        give_up: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.base_cooldown = cooldown
        self.cooldown_max = cooldown_max
        self.give_up = give_up
        self._clock = clock
        self.state = "closed"
        self.opens = 0
        self.last_reason: str | None = None
        self._failures = 0
        self._failing_since: float | None = None
        self._cooldown = cooldown
        self._open_until = 0.0
        self._pause_until = 0.0
        self._probe_in_flight = False
        self._changed = asyncio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _check_give_up(self, now: float) -> None:
        if self.state != "closed" and self._failing_since is not None:
            failing_for = now - self._failing_since
            if failing_for >= self.give_up:
                raise CircuitOpenError(
                    f"circuit breaker open: proxy kept failing for {failing_for:.1f}s; "
                    f"last error: {self.last_reason}"
                )

    async def acquire(self) -> bool:
        """Wait until a request may leave; returns True when the caller is the probe.

        A probe must report back through :meth:`record_success`, :meth:`record_failure`
        or :meth:`release`, or the breaker stays half-open with its probe slot taken.
        """
        while True:
            now = self._clock()
            self._check_give_up(now)
            wait_until = self._pause_until if now < self._pause_until else 0.0
            if not wait_until:
                if self.state == "closed":
                    return False
                if self.state == "open" and now >= self._open_until:
                    self.state = "half_open"
                if self.state == "half_open" and not self._probe_in_flight:
                    self._probe_in_flight = True
                    return True
                wait_until = self._open_until if self.state == "open" else 0.0
            if self._failing_since is not None and self.state != "closed":
                give_up_at = self._failing_since + self.give_up
                wait_until = min(wait_until, give_up_at) if wait_until else give_up_at
            timeout = max(0.0, wait_until - now) if wait_until else None
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), timeout)
            except asyncio.TimeoutError:
                pass

    def pause(self, seconds: float) -> None:
        """Hold every request back for ``seconds`` (a server's ``Retry-After``)."""
        until = self._clock() + seconds
        if until > self._pause_until:
            self._pause_until = until

    def record_success(self) -> None:
        """The proxy answered (whatever the handle's status): close the breaker."""
        was_open = self.state != "closed"
        self._failures = 0
        self._failing_since = None
        self._cooldown = self.base_cooldown
        self._probe_in_flight = False
        self.state = "closed"
        if was_open:
            self._notify()

    def record_failure(self, reason: str, *, probe: bool = False) -> None:
        """A retryable failure: count it, and open (or reopen) the breaker when due."""
        now = self._clock()
        self.last_reason = reason
        self._failures += 1
        if self._failing_since is None:
            self._failing_since = now
        if probe or self.state == "half_open":
            self._probe_in_flight = False
            self._cooldown = min(self._cooldown * 2, self.cooldown_max)
            self._open(now)
        elif self.state == "closed" and self._failures >= self.threshold:
            self._open(now)

    def release(self) -> None:
        """A probe ended without a verdict (cancelled, or an unrelated error)."""
        if self._probe_in_flight:
            self._probe_in_flight = False
            self._notify()

    def _open(self, now: float) -> None:
        if self.state != "open":
            self.opens += 1
        self.state = "open"
        self._open_until = now + self._cooldown
        self._notify()
