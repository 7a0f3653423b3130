"""Request pacing: requests spaced evenly, in this process or across processes through Redis.

A :class:`Pace` says how fast one kind of request may go to one host: ``rate`` requests per
second, at most ``burst`` of them back to back, and optionally at most ``concurrency`` in
flight. A :class:`Pacer` keeps it with GCRA (the generic cell rate algorithm: a leaky bucket
kept as one number, the theoretical arrival time ``tat`` of the next request). A request may
leave at ``tat - (burst - 1) / rate`` (or now, if that is past); taking that place moves
``tat`` on by ``1 / rate``, and the request sleeps until its place comes (a place reserved,
not polled for: a wake-up a little late delays that request, never the pace). So
requests are spaced ``1 / rate`` apart, never more than ``burst`` at once, and no window of
any length holds more than ``burst + rate * length`` of them: a server whose own bucket
allows ``burst`` back to back never refuses us (a moving window of "20 per second" let all
20 out in the first 250 ms).

Without ``redis_url`` the pace is kept in this process. With it, every process using the same
namespace and kind shares one pace, kept by one Lua script that runs atomically in Redis on
Redis's own clock (machines whose clocks disagree still space their requests): N workers on
N machines together stay under ``rate``, not each of them.

Kinds: each host has its pace per kind of request (``""``, the single-record requests every
client sends; a list query of a metadata API would be another kind, with a slower rate and a
concurrency cap of its own). The rate can be lowered while a batch runs (:meth:`Pacer.lower`),
when a server announces its limit (``x-rate-limit-limit`` / ``x-rate-limit-interval``,
:func:`announced_rate`); in Redis the lower rate holds for every process sharing the pace.

With ``count_key`` every request is also counted in Redis as it leaves (after its wait,
just before it is sent): the provider counts a task's requests there, so that those of a try
killed mid-batch are still in the run's summary. Counted before the send, never after: the count
is never below what the server saw, and a SIGKILL between a count and its send makes it higher
by at most the requests in flight (the concurrency).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from airflow_doi.resolver.config import ResolverConfig

__all__ = ["Pace", "PaceState", "Pacer", "RateLimiter", "Slot", "announced_rate"]

#: Seconds between two looks at a concurrency cap that is full (a slot's holder gives it back
#: with no signal to the waiters).
CAP_POLL: Final = 0.02
#: How long a lowered rate holds by default, in seconds, unless announced again.
LOWERED_FOR: Final = 600.0
#: How long a request counter lives in Redis after its last request, in seconds.
COUNT_TTL: Final = 7 * 24 * 3600

# KEYS: tat, lowered rate, in-flight set
# ARGV: rate, burst, concurrency cap (0: none), slot token, slot lease (s)
# Returns {1, seconds}: the place is taken, the request leaves in that many seconds; or
# {0, ""}: the concurrency cap is full, ask again.
_RESERVE: Final = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local rate = tonumber(ARGV[1])
local lowered = tonumber(redis.call('GET', KEYS[2]) or '')
if lowered and lowered > 0 and lowered < rate then rate = lowered end
local interval = 1 / rate
local tat = tonumber(redis.call('GET', KEYS[1]) or '') or now
if tat < now then tat = now end
local wait = tat - (tonumber(ARGV[2]) - 1) * interval - now
if wait < 0 then wait = 0 end
local cap = tonumber(ARGV[3])
if cap > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if redis.call('ZCARD', KEYS[3]) >= cap then return {0, ''} end
  local lease = wait + tonumber(ARGV[5])
  redis.call('ZADD', KEYS[3], now + lease, ARGV[4])
  redis.call('PEXPIRE', KEYS[3], math.ceil(lease * 1000))
end
tat = tat + interval
redis.call('SET', KEYS[1], string.format('%.6f', tat), 'PX',
           math.ceil((tat - now) * 1000) + 60000)
return {1, string.format('%.6f', wait)}
"""


@dataclass(frozen=True)
class Pace:
    """How fast one kind of request may go to one host (all processes together when shared).

    :param rate: requests per second.
    :param burst: how many may leave back to back (1: each ``1 / rate`` after the last).
    :param concurrency: requests in flight at most, over every process sharing the pace
        (None: no cap but each process's own ``concurrency``).
    """

    rate: float
    burst: int = 1
    concurrency: int | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.rate, (int, float)) and math.isfinite(self.rate)
                and self.rate > 0):
            raise ValueError(f"rate must be a finite number above 0, not {self.rate!r}")
        for name in ("burst", "concurrency"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"{name} must be an integer of at least 1, not {value!r}")


@dataclass(frozen=True)
class Slot:
    """A request's place under a pace: given back (:meth:`Pacer.release`) once answered."""

    token: str
    capped: bool


_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def announced_rate(headers: Mapping[str, str]) -> float | None:
    """The rate a server announces, requests per second, or None.

    Crossref's form: ``x-rate-limit-limit: 50`` and ``x-rate-limit-interval: 1s`` (``ms``,
    ``m`` and ``h`` read too; an interval without a unit is seconds). Anything unreadable,
    zero or negative is None: a broken header must never stop a batch.
    """
    limit = headers.get("x-rate-limit-limit") or headers.get("X-Rate-Limit-Limit")
    interval = headers.get("x-rate-limit-interval") or headers.get("X-Rate-Limit-Interval")
    if not limit:
        return None
    try:
        amount = float(limit)
    except ValueError:
        return None
    seconds = 1.0
    if interval:
        found = _INTERVAL.match(interval)
        if not found:
            return None
        seconds = float(found.group(1)) * _UNITS[found.group(2)]
    if not (math.isfinite(amount) and amount > 0 and seconds > 0):
        return None
    return amount / seconds


@dataclass(frozen=True)
class PaceState:
    """Where an in-process pace stands: its next free place (``time.monotonic()``) and a rate
    it was lowered to (with until when). A run that opens a new client for each batch keeps
    it between them (:meth:`Pacer.state`, :meth:`Pacer.resume`), so that the first request of
    a batch keeps the pace of the last one's instead of leaving at once."""

    tat: float
    lowered: tuple[float, float] | None


class Pacer:
    """Keeps one :class:`Pace`: in this process, or shared in Redis under ``namespace``.

    :param redis_url: ``redis://host:port/db``; None keeps the pace in this process.
    :param namespace: where the shared pace lives (one per host; ``kind`` is appended).
    :param kind: the kind of request (``""``: single records).
    :param count_key: a Redis key counting every request that leaves (shared pace only).
    :param lease: seconds a crashed holder keeps a concurrency slot (a request's timeout).
    """

    def __init__(self, pace: Pace, *, redis_url: str | None = None,
                 namespace: str = "airflow-doi", kind: str = "",
                 count_key: str | None = None, lease: float = 60.0) -> None:
        self.pace = pace
        self.namespace = f"{namespace}:{kind}" if kind else namespace
        self.count_key = count_key
        self.lease = lease
        #: Requests let through by this pacer (in this process).
        self.taken = 0
        self._lowered: tuple[float, float] | None = None  # (rate, until) in this process
        self._published: tuple[float, float] | None = None  # the one shared in Redis
        self._lock = asyncio.Lock()
        self._tat = 0.0
        self._in_flight = 0
        self._redis: Any = None
        self._script: Any = None
        if redis_url:
            from redis.asyncio import Redis  # the resolve extra

            self._redis = Redis.from_url(redis_url)
            self._script = self._redis.register_script(_RESERVE)

    @property
    def shared(self) -> bool:
        return self._redis is not None

    def keys(self) -> tuple[str, str, str]:
        """The Redis keys of the shared pace: ``tat``, the lowered rate, the in-flight set."""
        return (f"{self.namespace}:tat", f"{self.namespace}:lowered",
                f"{self.namespace}:in-flight")

    def rate(self, now: float | None = None) -> float:
        """The rate in force in this process: the pace's, or lower while lowered."""
        now = time.monotonic() if now is None else now
        if self._lowered is not None and now < self._lowered[1]:
            return min(self.pace.rate, self._lowered[0])
        return self.pace.rate

    async def acquire(self) -> Slot:
        """Wait until a request may leave under the pace; its place taken (and counted)."""
        # One request per process at a time takes its place and waits for it: first come,
        # first served, and each process holds at most one place it has not used yet.
        async with self._lock:
            slot = Slot(uuid.uuid4().hex, self.pace.concurrency is not None)
            while True:
                wait = await self._reserve_shared(slot) if self.shared else self._reserve()
                if wait is not None:
                    break
                await asyncio.sleep(CAP_POLL)  # the concurrency cap is full
            # The place is ours: its time comes in ``wait`` seconds. Reserved, not polled
            # for, so a wake-up a little late delays this request only, not the pace.
            due = time.monotonic() + wait
            if wait > 0:
                await asyncio.sleep(wait)
            late = time.monotonic() - due
            if late > 0 and self.pace.burst == 1 and not self.shared:
                # Without a burst two requests must never leave closer than one interval: a
                # late one (a busy event loop) moves the next place too, or the two would
                # arrive together (a server counting in windows sees one too many).
                self._tat += late
            if self.shared and self.count_key:  # counted as it leaves, not when reserved
                await self._redis.pipeline(transaction=False).incr(self.count_key).expire(
                    self.count_key, COUNT_TTL).execute()
            self.taken += 1
            return slot

    def _reserve(self) -> float | None:
        """This process's place: seconds until it, or None when the cap is full."""
        now = time.monotonic()
        cap = self.pace.concurrency
        if cap is not None and self._in_flight >= cap:
            return None
        if cap is not None:
            self._in_flight += 1
        interval = 1 / self.rate(now)
        tat = max(self._tat, now)
        self._tat = tat + interval
        return max(0.0, tat - (self.pace.burst - 1) * interval - now)

    async def _reserve_shared(self, slot: Slot) -> float | None:
        """The shared place (one atomic script in Redis): seconds until it, or None."""
        if self._lowered is not None and self._lowered != self._published:
            rate, until = self._lowered  # announced here: shared while it holds
            left = until - time.monotonic()
            if left > 0:
                await self._redis.set(self.keys()[1], f"{rate:.6f}", px=math.ceil(left * 1000))
            self._published = self._lowered
        taken, wait = await self._script(
            keys=list(self.keys()),
            args=[f"{self.pace.rate:.6f}", self.pace.burst, self.pace.concurrency or 0,
                  slot.token, f"{self.lease:.3f}"])
        if not int(taken):
            return None
        return max(0.0, float(wait.decode() if isinstance(wait, bytes) else wait))

    async def release(self, slot: Slot) -> None:
        """Give back a request's concurrency slot (nothing to do without a cap)."""
        if not slot.capped:
            return
        if self.shared:
            await self._redis.zrem(self.keys()[2], slot.token)
        else:
            self._in_flight = max(0, self._in_flight - 1)

    def lower(self, rate: float, *, hold: float = LOWERED_FOR) -> None:
        """Go no faster than ``rate`` for ``hold`` seconds (a server announced its limit);
        a rate above the pace's own changes nothing. Shared with every process of the pace
        on the next request."""
        if not (math.isfinite(rate) and rate > 0) or rate >= self.rate():
            return
        # The next place was set one old interval after the last request: set it one new
        # interval after, so that the request just sent counts at the new rate too.
        self._tat += 1 / rate - 1 / self.rate()
        self._lowered = (rate, time.monotonic() + hold)

    def state(self) -> PaceState:
        """Where this pace stands in this process (see :class:`PaceState`)."""
        return PaceState(self._tat, self._lowered)

    def resume(self, state: PaceState) -> None:
        """Go on from ``state``: no place before its next one, its lowered rate while it
        holds (the shared pace in Redis keeps its own)."""
        self._tat = max(self._tat, state.tat)
        if state.lowered is not None and state.lowered[1] > time.monotonic():
            self._lowered = state.lowered

    async def count(self) -> int:
        """The requests counted under ``count_key`` so far, by every process (0 if none)."""
        if not self.shared or not self.count_key:
            return 0
        return int(await self._redis.get(self.count_key) or 0)

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()


def _lease(config: ResolverConfig) -> float:
    """How long a request can hold a concurrency slot: its timeout, and a margin."""
    return config.timeout + 5.0


class RateLimiter:
    """The gate every request of a batch passes: the pace of its host (and kind).

    Built from a :class:`ResolverConfig`: ``rate`` and ``burst``, shared through
    ``redis_url`` under ``limit_namespace`` when set, every request counted under
    ``request_count_key`` when set.
    """

    def __init__(self, config: ResolverConfig, *, kind: str = "",
                 pace: Pace | None = None) -> None:
        self.pacer = Pacer(
            pace or Pace(config.rate, config.burst), redis_url=config.redis_url,
            namespace=config.limit_namespace, kind=kind,
            count_key=config.request_count_key if config.redis_url else None,
            lease=_lease(config),
        )

    async def acquire(self) -> Slot:
        return await self.pacer.acquire()

    async def release(self, slot: Slot) -> None:
        await self.pacer.release(slot)

    def lower(self, rate: float) -> None:
        self.pacer.lower(rate)

    async def aclose(self) -> None:
        await self.pacer.aclose()

