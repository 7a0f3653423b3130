"""Request-rate limits: a leaky bucket in this process, optionally a window shared in Redis.

The in-process limit (``aiolimiter``) smooths requests to ``rate`` per second with at most
``burst`` back to back. With ``redis_url`` every process that uses the same namespace also
takes a slot from a moving window kept in Redis by the ``limits`` library, so N workers on N
machines together stay under ``rate`` rather than each of them.
"""

from __future__ import annotations

import asyncio
import time
from fractions import Fraction
from typing import Any

from aiolimiter import AsyncLimiter

from airflow_doi.resolver.config import ResolverConfig

__all__ = ["RateLimiter", "SharedLimit", "window_for"]

#: Never sleep less than this between two tries at a full shared window (no busy loop).
_MIN_SLEEP = 0.005


def window_for(rate: float, burst: int) -> tuple[int, int]:
    """``(amount, seconds)`` with ``amount / seconds <= rate``, as close as whole numbers allow.

    The ``limits`` library counts whole requests per whole seconds; ``rate=2.5`` becomes five
    per two seconds. The window is at least ``burst`` requests wide where the rate allows it
    and never more permissive than ``rate``.
    """
    best = Fraction(rate).limit_denominator(60)
    if best > Fraction(rate):  # round down: never more permissive than asked
        amount = max(1, int(rate * best.denominator))
        best = Fraction(amount, best.denominator)
    amount, seconds = best.numerator, best.denominator
    if amount == 0:
        amount, seconds = 1, max(1, round(1 / rate))
    return amount, seconds


class SharedLimit:
    """A moving-window limit in Redis, shared by every process using the same namespace."""

    def __init__(self, redis_url: str, namespace: str, rate: float, burst: int) -> None:
        from limits import RateLimitItemPerSecond
        from limits.aio.strategies import MovingWindowRateLimiter
        from limits.storage import storage_from_string

        uri = redis_url if redis_url.startswith("async+") else f"async+{redis_url}"
        self._storage: Any = storage_from_string(uri, implementation="redispy")
        self._limiter = MovingWindowRateLimiter(self._storage)
        amount, seconds = window_for(rate, burst)
        self._item = RateLimitItemPerSecond(amount, seconds, namespace="airflow-doi")
        self._identity = namespace

    async def acquire(self) -> None:
        """Wait until the shared window has room, then take one slot."""
        while not await self._limiter.hit(self._item, self._identity):
            stats = await self._limiter.get_window_stats(self._item, self._identity)
            await asyncio.sleep(max(_MIN_SLEEP, stats.reset_time - time.time()))

    async def aclose(self) -> None:
        """Close the Redis connection pool (``limits`` exposes no public close)."""
        client = getattr(getattr(self._storage, "bridge", None), "storage", None)
        close = getattr(client, "aclose", None)
        if close is not None:
            await close()


class RateLimiter:
    """The gate every request passes: local leaky bucket, then the shared window if any."""

    def __init__(self, config: ResolverConfig) -> None:
        self._local = AsyncLimiter(config.burst, config.burst / config.rate)
        self._shared = (
            SharedLimit(config.redis_url, config.limit_namespace, config.rate, config.burst)
            if config.redis_url
            else None
        )

    async def acquire(self) -> None:
        await self._local.acquire()
        if self._shared is not None:
            await self._shared.acquire()

    async def aclose(self) -> None:
        if self._shared is not None:
            await self._shared.aclose()
