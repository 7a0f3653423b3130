"""One DOI's request with its retry budget: backoff with jitter, Retry-After, the breaker.

Every attempt passes, in order, the concurrency slot, the circuit breaker and the rate
limiter, so a retry is as polite as a first request. Between attempts the DOI sleeps outside
its slot (exponential backoff plus jitter, at least the server's ``Retry-After``), letting
other DOIs use the bandwidth; that sleep ends early when the breaker gives up, so no DOI
outlives the give-up time. ``tenacity`` drives the loop; this module only decides what is
retryable and how long to wait.

Counting is honest: ``attempts`` is every request that left for the DOI, whatever came of it
(an answer that could not be read included), and a retry is counted when its request leaves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from airflow_doi.resolver.breaker import CircuitBreaker, CircuitOpenError
from airflow_doi.resolver.client import ProxyError, RetryableError
from airflow_doi.resolver.config import ResolverConfig, scrub
from airflow_doi.resolver.limits import RateLimiter
from airflow_doi.resolver.result import ResolverStats

__all__ = ["GaveUpError", "RetryPolicy"]

T = TypeVar("T")


class GaveUpError(Exception):
    """The DOI's retry budget is spent, or the breaker gave up on the proxy."""

    def __init__(self, reason: str, attempts: int, http_status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts
        self.http_status = http_status


class RetryPolicy:
    """Runs request callables under the batch's shared gates and retry budget."""

    def __init__(
        self,
        config: ResolverConfig,
        breaker: CircuitBreaker,
        limiter: RateLimiter,
        stats: ResolverStats,
    ) -> None:
        self.config = config
        self.breaker = breaker
        self.limiter = limiter
        self.stats = stats
        self._slots = asyncio.Semaphore(config.concurrency)
        # base * 2**(n-1), capped, plus up to one base of jitter so that DOIs failed by
        # the same outage do not come back in lockstep.
        self._backoff = wait_exponential(
            multiplier=config.backoff_base, max=config.backoff_max
        ) + wait_random(0, config.backoff_base)

    def _wait(self, state: RetryCallState) -> float:
        delay = float(self._backoff(state))
        error = state.outcome.exception() if state.outcome else None
        retry_after = getattr(error, "retry_after", None)
        if retry_after is not None:
            delay = max(delay, min(float(retry_after), self.config.retry_after_max))
        return delay

    async def _attempt(self, call: Callable[[], Awaitable[T]], sent: list[int]) -> T:
        async with self._slots:
            probe = await self.breaker.acquire()
            try:
                slot = await self.limiter.acquire()
                sent[0] += 1
                self.stats.requests += 1
                if sent[0] > 1:
                    self.stats.retries += 1
                try:
                    result = await _read(call)
                finally:
                    await self.limiter.release(slot)
            except (RetryableError, ProxyError) as error:
                self._scrubbed(error)
                if isinstance(error, ProxyError):
                    self.breaker.record_success()  # the proxy is up; the answer is just final
                    raise
                self.breaker.record_failure(
                    error.reason, probe=probe, answered=error.http_status is not None,
                    unreachable=error.unreachable)
                if error.throttled:
                    self.stats.throttled += 1
                    pause = (
                        error.retry_after
                        if error.retry_after is not None
                        else self.config.backoff_base
                    )
                    self.breaker.pause(min(pause, self.config.retry_after_max))
                    if self.breaker.gave_up:  # the pause asked for outlives the give-up time
                        raise CircuitOpenError(
                            f"HTTP {error.http_status} (throttled): {self.breaker.gave_up_reason}"
                        ) from None
                raise
            except BaseException:
                if probe:
                    self.breaker.release()
                raise
            self.breaker.record_success()
            return result

    def _scrubbed(self, error: RetryableError | ProxyError) -> None:
        """``error``'s reason without the credentials of the configured URLs: a server may
        echo what it was sent (the request's URL, its Authorization header decoded), and the
        reason goes to a row, a table and log lines (:func:`~.config.scrub`)."""
        clean = scrub(error.reason, self.config.base_url, self.config.redis_url)
        if clean != error.reason:
            error.reason = clean
            error.args = (clean,)

    async def run(self, call: Callable[[], Awaitable[T]]) -> tuple[T, int]:
        """``(result, requests sent)``; raises :class:`GaveUpError` or :class:`ProxyError`."""
        sent = [0]
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.config.max_attempts),
            wait=self._wait,
            sleep=self.breaker.sleep,
            retry=retry_if_exception_type(RetryableError),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    result = await self._attempt(call, sent)
        except RetryableError as error:
            raise GaveUpError(
                f"gave up after {sent[0]} attempt{'s' if sent[0] != 1 else ''}: {error.reason}",
                sent[0],
                error.http_status,
            ) from None
        except CircuitOpenError as error:
            raise GaveUpError(error.reason, sent[0]) from None
        except ProxyError as error:
            error.attempts = sent[0]
            raise
        except Exception as error:  # e.g. the shared limit's Redis went away: not the proxy
            raise GaveUpError(
                f"stopped before an answer arrived: {type(error).__name__} in the resolver",
                sent[0],
            ) from error
        return result, sent[0]


async def _read(call: Callable[[], Awaitable[T]]) -> T:
    """Send and read one answer; a failure nobody foresaw while reading is a final error.

    Final because the proxy would send the same answer again; counted as an attempt because
    the request did leave (it used to come back as ``attempts=0``).
    """
    try:
        return await call()
    except (RetryableError, ProxyError):
        raise
    except Exception as error:
        raise ProxyError(
            f"the proxy's answer could not be read ({type(error).__name__} while reading it)"
        ) from error
