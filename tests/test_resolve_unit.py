"""Unit tests of the resolver's pure parts: answer mapping, expiry, limits, breaker, cache."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone

import pytest

from airflow_doi.resolver import STATUSES, ResolutionResult, ResolverConfig, ResolverStats
from airflow_doi.resolver.batch import _Batch, _check
from airflow_doi.resolver.breaker import CircuitBreaker, CircuitOpenError
from airflow_doi.resolver.cache import CachedAnswer, ResolverCache
from airflow_doi.resolver.client import (
    MAX_TTL_SECONDS,
    ProxyClient,
    ProxyError,
    RetryableError,
    expiry,
    interpret,
    parse_retry_after,
    which_ra_batches,
)
from airflow_doi.resolver.config import redact_url

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
KEY = "10.1000/ABC"


def _body(code: int, values: list | None = None, handle: str = "10.1000/abc") -> bytes:
    document: dict = {"responseCode": code, "handle": handle}
    if values is not None:
        document["values"] = values
    return json.dumps(document).encode()


def _url(index: int, url: str, ttl: object = 86400) -> dict:
    return {"index": index, "type": "URL", "data": {"format": "string", "value": url}, "ttl": ttl}


def test_resolved_takes_the_url_value_with_the_lowest_index():
    values = [_url(9, "https://late/", 50), _url(3, "https://early/", 7200)]
    answer = interpret(200, _body(1, values), {}, KEY, NOW, 3600)
    assert answer.status == "resolved"
    assert answer.url == "https://early/"
    assert answer.response_code == 1 and answer.http_status == 200
    assert answer.values == tuple(values)
    assert answer.expires_at == NOW + timedelta(seconds=50)  # the smallest ttl of all values


def test_code_1_without_a_url_value_and_code_200_are_no_values():
    admin = {"index": 100, "type": "HS_ADMIN", "data": {"format": "admin", "value": {}}, "ttl": 10}
    answer = interpret(200, _body(1, [admin]), {}, KEY, NOW, 3600)
    assert (answer.status, answer.url, answer.expires_at) == (
        "no_values",
        None,
        NOW + timedelta(seconds=10),
    )
    empty = interpret(200, _body(200), {}, KEY, NOW, 3600)
    assert (empty.status, empty.response_code) == ("no_values", 200)
    assert empty.expires_at == NOW + timedelta(seconds=3600)


def test_code_100_is_not_found_with_the_negative_ttl():
    answer = interpret(404, _body(100), {}, KEY, NOW, 120)
    assert answer.status == "not_found"
    assert answer.expires_at == NOW + timedelta(seconds=120)


def test_absolute_iso_ttl_is_an_expiry_time():
    values = [_url(1, "https://x/", "2030-05-01T00:00:00Z"), _url(2, "https://y/", 10**9)]
    assert expiry(values, NOW, 5) == datetime(2030, 5, 1, tzinfo=timezone.utc)
    assert expiry([], NOW, 5) == NOW + timedelta(seconds=5)


CAP = NOW + timedelta(seconds=MAX_TTL_SECONDS)


@pytest.mark.parametrize(
    "ttl",
    [
        10**12,  # 31,700 years: timedelta fits, now + timedelta does not
        10**400,  # no float can hold it
        1e300,
        float("inf"),
        "1e12",
        "inf",
        "9999-12-31T23:59:59-12:00",  # past datetime.max once in UTC
        "9999-12-31T23:59:59.999999",
    ],
)
def test_absurd_ttls_are_capped_never_raised(ttl):
    assert expiry([_url(1, "https://x/", ttl)], NOW, 60) == CAP
    # The cap is just a ceiling: a saner value next to the absurd one still wins.
    assert expiry([_url(1, "https://x/", ttl), _url(2, "https://y/", 60)], NOW, 5) == NOW + (
        timedelta(seconds=60)
    )


@pytest.mark.parametrize("ttl", ["-inf", -(10**400), "0001-01-01T00:00:00+14:00", -5])
def test_ttls_in_the_past_mean_already_stale(ttl):
    assert expiry([_url(1, "https://x/", ttl)], NOW, 60) == NOW


@pytest.mark.parametrize("ttl", [float("nan"), "nan", "soon", None, [1], True])
def test_unusable_ttls_fall_back_to_the_default(ttl):
    assert expiry([_url(1, "https://x/", ttl)], NOW, 60) == NOW + timedelta(seconds=60)


@pytest.mark.parametrize("negative_ttl", [1e12, 1e300, float("inf")])
def test_a_huge_negative_ttl_is_capped(negative_ttl):
    assert interpret(404, _body(100), {}, KEY, NOW, negative_ttl).expires_at == CAP
    assert interpret(200, _body(200), {}, KEY, NOW, negative_ttl).expires_at == CAP
    assert expiry([], NOW, negative_ttl) == CAP


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_retryable_with_the_reason(status):
    with pytest.raises(RetryableError) as caught:
        body = json.dumps({"responseCode": 2, "message": "boom"}).encode()
        interpret(status, body, {}, KEY, NOW, 1)
    assert caught.value.reason == f"HTTP {status} responseCode 2: boom"


@pytest.mark.parametrize("status", [429, 403])
def test_throttling_is_retryable_and_carries_retry_after(status):
    with pytest.raises(RetryableError) as caught:
        interpret(status, b"slow down", {"Retry-After": "7"}, KEY, NOW, 1)
    assert caught.value.throttled and caught.value.retry_after == 7.0


def test_retry_after_as_http_date():
    later = "Thu, 01 Jan 2026 00:00:30 GMT"
    assert parse_retry_after(later, NOW) == 30.0
    assert parse_retry_after("garbage", NOW) is None
    assert parse_retry_after(None, NOW) is None


def test_malformed_json_is_retryable():
    with pytest.raises(RetryableError, match="malformed JSON"):
        interpret(200, b'{"responseCode": 1, "han', {}, KEY, NOW, 1)


def test_redirects_and_foreign_handles_are_final_errors():
    with pytest.raises(ProxyError, match=r"redirect to https://evil\.example/ not followed"):
        interpret(302, b"", {"Location": "https://evil.example/"}, KEY, NOW, 1)
    with pytest.raises(ProxyError, match="another handle"):
        interpret(200, _body(1, [], handle="10.1000/other"), {}, KEY, NOW, 1)
    with pytest.raises(ProxyError, match="without a proxy JSON answer"):
        interpret(404, b"<html>", {}, KEY, NOW, 1)


def test_handle_url_is_encoded_once_and_never_normalized():
    config = ResolverConfig(base_url="http://127.0.0.1:9/proxy/", types=("URL",), auth=True)
    client = ProxyClient(config, session=None)  # type: ignore[arg-type]
    url = client.handle_url("10.1000/a/../b %25#?ß")
    assert url.raw_path == "/proxy/api/handles/10.1000/a/..%2Fb%20%2525%23%3F%C3%9F"
    assert url.raw_query_string == "type=URL&auth"
    assert str(client.which_ra_url(["10.1000/a,b", "10.1000/c"])).endswith(
        "/proxy/doiRA/10.1000/a%2Cb,10.1000/c"
    )


def test_which_ra_batches_respect_count_and_length():
    batches = which_ra_batches([f"10.1000/{i}" for i in range(120)])
    assert [len(b) for b in batches] == [50, 50, 20]
    long = ["10.1000/" + "x" * 700] * 5
    assert all(sum(len(d) + 1 for d in b) <= 1800 for b in which_ra_batches(long))


def test_config_defaults_are_polite_and_validated():
    config = ResolverConfig(contact="ops@lib.example-uni.edu")
    assert config.rate <= 5 and config.concurrency <= 4
    assert config.user_agent.startswith("airflow-doi/")
    assert config.user_agent.endswith(
        "(+https://pypi.org/project/airflow-doi/; mailto:ops@lib.example-uni.edu)"
    )
    with pytest.raises(TypeError, match="unknown resolver option"):
        config.replace(rat=3)
    with pytest.raises(ValueError, match="http"):
        ResolverConfig(base_url="ftp://doi.org")
    with pytest.raises(ValueError, match="rate"):
        ResolverConfig(rate=0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pending_per_slot", 0),  # Semaphore(0): the batch would wait for ever
        ("timeout", 0),  # aiohttp reads 0 as "no timeout"
        ("timeout", -1.0),
        ("timeout", float("inf")),
        ("rate", float("nan")),
        ("rate", float("inf")),
        ("rate", -3),
        ("backoff_base", -0.5),
        ("backoff_base", float("nan")),
        ("backoff_max", -1),
        ("negative_ttl", -1),
        ("negative_ttl", float("nan")),
        ("concurrency", 0),
        ("concurrency", 2.5),
        ("max_attempts", 0),
        ("burst", 0),
        ("burst", True),
        ("breaker_give_up", -1),
        ("rate", "3"),
    ],
)
def test_config_refuses_values_that_hang_or_break_naming_field_and_value(field, value):
    with pytest.raises(ValueError) as caught:
        ResolverConfig(**{field: value})
    assert field in str(caught.value) and repr(value) in str(caught.value)


def test_config_keeps_the_sane_edges():
    config = ResolverConfig(
        backoff_base=0, backoff_max=0, negative_ttl=0, pending_per_slot=1, breaker_give_up=1e9
    )
    assert config.negative_ttl == 0 and config.pending_per_slot == 1
    assert ResolverConfig(negative_ttl=float("inf")).negative_ttl == float("inf")  # = the cap


@pytest.mark.parametrize(
    ("url", "safe"),
    [
        ("https://user:pw@proxy.example:8443/doi/", "https://proxy.example:8443/doi/"),
        ("http://token@127.0.0.1:9", "http://127.0.0.1:9"),
        ("http://a@b:c@host/", "http://host/"),
        ("https://doi.org", "https://doi.org"),
    ],
)
def test_redact_url_strips_userinfo(url, safe):
    assert redact_url(url) == safe


def test_credentials_in_base_url_never_reach_messages_or_redis_keys():
    config = ResolverConfig(
        base_url="https://user:s3cret@proxy.example/", redis_url="redis://:s3cret@127.0.0.1:1/0"
    )
    assert config.safe_base_url == "https://proxy.example/"
    assert config.limit_namespace == "airflow-doi:proxy.example"
    assert "s3cret" not in repr(config) and "proxy.example" in repr(config)
    with pytest.raises(ValueError, match="ftp://host") as caught:
        ResolverConfig(base_url="ftp://user:s3cret@host/")
    assert "s3cret" not in str(caught.value)
    with pytest.raises(ProxyError) as redirected:
        interpret(302, b"", {"Location": "https://user:s3cret@evil.example/"}, KEY, NOW, 1)
    assert redirected.value.reason == "HTTP 302 redirect to https://evil.example/ not followed"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (10, (None, None, "bad_directory")),  # judged as "10", like the other faces
        (10.5, (None, None, "missing_suffix")),  # "10.5": a directory, no suffix
        (True, (None, None, "bad_directory")),
        (float("nan"), (None, None, "empty")),
        (b"10.1000/abc", ("10.1000/abc", "10.1000/ABC", None)),
        (b"\xff", (None, None, "bad_encoding")),
        # validate() never raises (issue #10): any other value is read as its str(), as the
        # pandas accessor reads the same cell.
        (["10.1000/abc"], (None, None, "bad_directory")),
        ({"doi": "10.1000/abc"}, (None, None, "bad_directory")),
    ],
)
def test_non_text_values_are_judged_like_every_other_face(value, expected):
    assert _check(value) == expected


class _BrokenClient:
    """A client whose answer trips an unforeseen bug while being read."""

    async def get_handle(self, doi: str, key: str) -> object:
        raise OverflowError("date value out of range")


def test_an_unforeseen_failure_reading_an_answer_costs_one_row_not_the_batch():
    async def scenario() -> ResolutionResult:
        batch = _Batch(ResolverConfig(rate=1000), None, None, ResolverStats())
        try:
            return await batch.resolve_key(_BrokenClient(), "10.1000/abc", KEY)
        finally:
            await batch.limiter.aclose()

    result = asyncio.run(scenario())
    assert (result.status, result.key) == ("error", KEY)
    # Our words, not the library's; and the request did leave, so it is counted (issue #14.7).
    assert result.error == "the proxy's answer could not be read (OverflowError while reading it)"
    assert result.attempts == 1


def test_result_row_has_the_documented_columns():
    result = ResolutionResult(
        input=" doi:10.1000/X ",
        doi="10.1000/X",
        key="10.1000/X",
        status="resolved",
        url="https://x/",
        response_code=1,
        http_status=200,
        attempts=2,
        resolved_at=NOW,
        expires_at=NOW + timedelta(hours=1),
    )
    row = result.as_row()
    assert list(row) == [
        "input",
        "doi",
        "key",
        "status",
        "url",
        "response_code",
        "http_status",
        "attempts",
        "error",
        "resolved_at",
        "expires_at",
        "url_raw",
        "agency",
    ]
    assert row["resolved_at"] == "2026-01-01T00:00:00+00:00"
    assert STATUSES == ("resolved", "registered", "no_values", "not_found", "invalid", "error")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_breaker_opens_probes_and_closes():
    async def scenario() -> None:
        clock = FakeClock()
        breaker = CircuitBreaker(threshold=3, cooldown=10, give_up=100, clock=clock)
        for _ in range(3):
            assert await breaker.acquire() is False
            breaker.record_failure("HTTP 500")
        assert breaker.state == "open" and breaker.opens == 1
        waiter = asyncio.ensure_future(breaker.acquire())
        await asyncio.sleep(0.01)
        assert not waiter.done()  # nobody passes while open
        clock.now = 10.0
        breaker._notify()
        assert await asyncio.wait_for(waiter, 1) is True  # the single probe
        second = asyncio.ensure_future(breaker.acquire())
        await asyncio.sleep(0.01)
        assert not second.done()  # one probe at a time
        breaker.record_failure("HTTP 500", probe=True)  # probe failed: cooldown doubles
        assert breaker.state == "open" and breaker._open_until == 30.0
        clock.now = 30.0
        breaker._notify()
        assert await asyncio.wait_for(second, 1) is True
        breaker.record_success()
        assert breaker.state == "closed"
        assert await breaker.acquire() is False

    asyncio.run(scenario())


def test_breaker_gives_up_at_once_on_a_target_that_never_answered():
    refused = "could not connect to http://127.0.0.1:9/ (connection refused)"

    async def scenario() -> None:
        never = CircuitBreaker(threshold=3, give_up=120.0, clock=FakeClock())
        for _ in range(2):
            never.record_failure(refused, unreachable=True)
        assert not never.gave_up and never.state == "closed"
        never.record_failure(refused, unreachable=True)
        assert never.gave_up and never.never_answered and never.opens == 0
        assert never.gave_up_reason == (
            f"no request was ever answered ({refused}, 3 times in a row): stopped at once, "
            "not after breaker_give_up (120s), which is for a proxy that stops answering "
            "mid-run")
        with pytest.raises(CircuitOpenError):
            await never.acquire()
        # Answered once (a 503 counts: a server is there): the bounded wait, as before.
        for first in ("success", "503"):
            once = CircuitBreaker(threshold=3, give_up=120.0, clock=FakeClock())
            if first == "success":
                once.record_success()
            else:
                once.record_failure("HTTP 503", answered=True)
            for _ in range(5):
                once.record_failure(refused, unreachable=True)
            assert once.state == "open" and not once.gave_up and not once.never_answered
        # Timeouts are not "unreachable": never given up on at once either.
        slow = CircuitBreaker(threshold=3, give_up=120.0, clock=FakeClock())
        for _ in range(5):
            slow.record_failure("no complete answer within 10s")
        assert slow.state == "open" and not slow.gave_up

    asyncio.run(scenario())


def test_breaker_gives_up_with_the_last_reason():
    async def scenario() -> None:
        clock = FakeClock()
        breaker = CircuitBreaker(threshold=1, cooldown=5, give_up=20, clock=clock)
        breaker.record_failure("HTTP 503 responseCode 2")
        clock.now = 21.0
        expected = r"kept failing for 21\.0s; last error: HTTP 503"
        with pytest.raises(CircuitOpenError, match=expected):
            await breaker.acquire()

    asyncio.run(scenario())


def test_cache_honours_expiry_and_refuses_errors(tmp_path):
    path = tmp_path / "cache.sqlite"
    answer = CachedAnswer(
        key="10.1000/ABC",
        doi="10.1000/abc",
        status="resolved",
        url="https://x/",
        response_code=1,
        http_status=200,
        attempts=1,
        values=({"index": 1, "ttl": 60},),
        resolved_at=NOW,
        expires_at=NOW + timedelta(seconds=60),
    )
    with ResolverCache(path) as cache:
        cache.store(answer)
        with pytest.raises(ValueError, match="never cached"):
            cache.store(CachedAnswer(**{**answer.__dict__, "key": "E", "status": "error"}))
    with ResolverCache(path) as cache:  # persisted across connections
        assert cache.fresh(["10.1000/ABC"], NOW + timedelta(seconds=59)) == {"10.1000/ABC": answer}
        assert cache.fresh(["10.1000/ABC"], NOW + timedelta(seconds=60)) == {}
    with ResolverCache(path, query="type=URL") as filtered:  # another filter, another entry
        assert filtered.fresh(["10.1000/ABC"], NOW) == {}
