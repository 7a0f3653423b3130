"""A circuit breaker that pauses the whole batch while the proxy keeps failing.

Per-DOI retries alone would let a large batch hammer a proxy that is down: every DOI would
spend its whole retry budget. The breaker counts consecutive failures across all DOIs; once
``threshold`` is reached it opens and no request leaves for ``cooldown`` seconds. Then a
single probe request is let through (half-open): success closes the breaker, failure reopens
it with the cooldown doubled. When the proxy has kept failing for ``give_up`` seconds every
waiting request raises :class:`CircuitOpenError`, so the batch finishes (as ``error`` rows)
instead of waiting forever.

A proxy that was never there is told apart from one that fails: when no request of the run
has ever been answered (every one refused, its host name unknown, its connection timed out)
and ``threshold`` requests in a row could not even connect, the breaker gives up at once,
naming the target and the give-up time it did not wait for: a wrong base URL or a proxy that
is not running fails in seconds, not after ``give_up``. Once anything has answered, even with
an error (a 503, a 429), the bounded wait above applies: a proxy that dies mid-run is waited
for as long as before.

The same gate carries global pauses asked for by the server (``Retry-After`` on 429/403):
one throttled answer holds back every request, not just the DOI that received it. A pause
never outlives the give-up time: a server asking for a longer one (``Retry-After: 999999``,
a date a year ahead) makes the breaker give up at once, since waiting could only end in
giving up anyway; the rows end as ``error`` saying so.

Each opening and the giving up are logged as one WARNING line on the
``airflow_doi.resolver.breaker`` logger, so a dead proxy is loud even off a terminal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

__all__ = ["NEVER_ANSWERED", "CircuitBreaker", "CircuitOpenError"]

log = logging.getLogger(__name__)
#: The attribute of the give-up log record: true when nothing was ever answered.
NEVER_ANSWERED = "doi_never_answered"


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
        target: str = "the proxy",
    ) -> None:
        self.threshold = threshold
        #: What is failing, as log lines name it (a base URL without credentials).
        self.target = target
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
        #: Set once the breaker has given up for good (a pause past the give-up time).
        self._gave_up: str | None = None
        #: Whether any request has been answered (an HTTP answer of any status).
        self.answered = False
        #: Set when it gave up because nothing was ever answered (see the module docstring).
        self.never_answered = False

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _check_give_up(self, now: float) -> None:
        if self._gave_up is None and self.state != "closed" and self._failing_since is not None:
            failing_for = now - self._failing_since
            if failing_for >= self.give_up:
                self._give_up(
                    f"circuit breaker open: {self.target} kept failing for {failing_for:.1f}s; "
                    f"last error: {self.last_reason}"
                )
        if self._gave_up is not None:
            raise CircuitOpenError(self._gave_up)

    def _give_up(self, reason: str) -> None:
        """Refuse every further request, say so once in the log, wake every waiter."""
        if self._gave_up is not None:
            return
        self._gave_up = reason
        log.warning(
            "giving up on %s: %s; no more requests are sent, and the keys not answered yet "
            "come back as error, unanswered: nothing is stored for them (no cache entry; "
            "the Airflow operators write no row), so a re-run asks only for those",
            self.target, reason,
            # A command line says a proxy never there in its own words when the run ends.
            extra={NEVER_ANSWERED: self.never_answered},
        )
        self._notify()

    @property
    def gave_up(self) -> bool:
        """True once every further request is refused."""
        return self._gave_up is not None

    @property
    def gave_up_reason(self) -> str | None:
        return self._gave_up

    def _deadline(self) -> float | None:
        """When the breaker gives up if nothing succeeds before (None while healthy)."""
        if self._failing_since is None or self.state == "closed":
            return None
        return self._failing_since + self.give_up

    async def sleep(self, seconds: float) -> None:
        """A retry's backoff, cut short when the breaker gives up meanwhile.

        Without this a DOI sleeping off a long backoff would only learn after waking that
        the batch was given up on, so the run would outlive ``give_up``.
        """
        end = self._clock() + seconds
        while True:
            now = self._clock()
            if self._gave_up is not None or now >= end:
                return
            deadline = self._deadline()
            if deadline is not None and now >= deadline:
                return
            wake = min(end, deadline) if deadline is not None else end
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), max(0.0, wake - now))
            except asyncio.TimeoutError:
                pass

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
        """Hold every request back for ``seconds`` (a server's ``Retry-After``).

        A pause that would end after the give-up deadline (``give_up`` seconds after the
        failures began, or from now if the proxy was healthy) makes the breaker give up now:
        no request could leave before giving up anyway.
        """
        now = self._clock()
        until = now + seconds
        deadline = (self._failing_since if self._failing_since is not None else now) + self.give_up
        if until > deadline:
            self._give_up(
                f"the proxy asked for a pause of {seconds:g}s (Retry-After), longer than the "
                f"{self.give_up:g}s the resolver may keep waiting (breaker give-up time)"
            )
            return
        if until > self._pause_until:
            self._pause_until = until

    def record_success(self) -> None:
        """The proxy answered (whatever the handle's status): close the breaker."""
        self.answered = True
        was_open = self.state != "closed"
        self._failures = 0
        self._failing_since = None
        self._cooldown = self.base_cooldown
        self._probe_in_flight = False
        self.state = "closed"
        if was_open:
            self._notify()

    def record_failure(
        self, reason: str, *, probe: bool = False, answered: bool = False,
        unreachable: bool = False,
    ) -> None:
        """A retryable failure: count it, and open (or reopen) the breaker when due.

        ``answered``: an HTTP answer came back (a 5xx, a 429): the proxy is there. With
        ``unreachable`` (no connection could be made) while nothing has ever been answered,
        the ``threshold``-th failure in a row gives up at once.
        """
        now = self._clock()
        self.last_reason = reason
        self.answered = self.answered or answered
        self._failures += 1
        if self._failing_since is None:
            self._failing_since = now
        if unreachable and not self.answered and self._failures >= self.threshold:
            self.never_answered = True
            self._give_up(
                f"no request was ever answered ({reason}, {self._failures} times in a row): "
                f"stopped at once, not after breaker_give_up ({self.give_up:g}s), which is "
                "for a proxy that stops answering mid-run"
            )
            return
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
            left = (self._failing_since or now) + self.give_up - now
            log.warning(
                "%s failed %d time(s) in a row (last error: %s); pausing requests for %gs, "
                "giving up in %.0fs if it keeps failing",
                self.target, self._failures, self.last_reason, self._cooldown, max(0.0, left),
            )
        self.state = "open"
        self._open_until = now + self._cooldown
        self._notify()
