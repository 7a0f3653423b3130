"""The resolver against hostile and dead servers on loopback (issue #14, issue #10 item 5).

:class:`Hostile` is a raw TCP server written here: each test gives it a function that reads
the request line and writes whatever bytes it likes (bad HTTP, endless bodies, resets, slow
drips, unsafe URL values, absurd ``Retry-After`` headers). Real sockets, no mocks. Every case
runs with small timeouts, so the whole file takes seconds.
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path

import pytest

from airflow_doi.resolver import ResolutionResult, ResolverConfig, ResolverStats, resolve
from airflow_doi.resolver.client import MAX_BODY_BYTES
from airflow_doi.resolver.simulator import ProxySimulator
from airflow_doi.resolver.text import server_text
from airflow_doi.resolver.urls import MAX_URL_CHARS, REFUSED_URL

#: Fast settings for loopback: short timeouts and backoff, a breaker that gives up soon.
FAST = ResolverConfig(
    rate=500, concurrency=4, timeout=1.0, backoff_base=0.01, backoff_max=0.05,
    breaker_cooldown=0.05, breaker_give_up=2.0, max_attempts=3,
)
#: Words only an HTTP library or a traceback would use: never in a row's error.
LIBRARY_WORDING = ("ssl:default", "ClientResponseError", "ClientOSError", "message=", "Errno",
                   "Traceback", "Connect call failed", "Bad status line", "payload")

Behaviour = Callable[["_Handler", str], None]


class _Handler(socketserver.BaseRequestHandler):
    server: Hostile

    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.request.recv(65536)
            if not chunk:
                return
            head += chunk
        self.head = head  # the request line and headers, for a server that echoes them
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        path = line.split(" ")[1] if line.count(" ") >= 2 else line
        with self.server.lock:
            self.server.paths.append(path)
        try:
            self.server.behaviour(self, path)
        except OSError:
            pass  # the client hung up: that is its right

    def send(self, data: bytes) -> None:
        self.request.sendall(data)

    def reset(self) -> None:
        """Close with RST instead of FIN: the client sees 'connection reset'."""
        self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.request.close()


class Hostile(socketserver.ThreadingTCPServer):
    """A misbehaving HTTP server; ``paths`` are the raw request targets it received."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, behaviour: Behaviour) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.lock = threading.Lock()
        self.paths: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    @property
    def requests(self) -> int:
        with self.lock:
            return len(self.paths)


@contextmanager
def hostile(behaviour: Behaviour) -> Iterator[Hostile]:
    server = Hostile(behaviour)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def answer(status: int, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """One HTTP/1.1 response with a Content-Length; the connection closes after it."""
    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def record(handle: str, *urls: str) -> bytes:
    values = [{"index": i + 1, "type": "URL", "data": {"format": "string", "value": u},
               "ttl": 600} for i, u in enumerate(urls)]
    return json.dumps({"responseCode": 1, "handle": handle, "values": values}).encode()


def handle_of(path: str) -> str:
    from urllib.parse import unquote

    return unquote(path.removeprefix("/api/handles/"))


def assert_own_words(results: list[ResolutionResult]) -> None:
    for result in results:
        assert result.error, result
        assert "\n" not in result.error and "\r" not in result.error
        for word in LIBRARY_WORDING:
            assert word not in result.error, result.error


def retries_in(results: list[ResolutionResult]) -> tuple[int, int]:
    """(requests, retries) the rows account for, one entry per distinct fetched key."""
    attempts = {r.key: r.attempts for r in results if r.key and not r.cached}
    return sum(attempts.values()), sum(max(a - 1, 0) for a in attempts.values())


# --- What already held: regression tests ------------------------------------------------------


def test_redirects_are_never_followed_not_one_request_reaches_the_target():
    with hostile(lambda h, p: h.send(answer(200, record(handle_of(p), "https://x/")))) as target:
        codes = [301, 302, 303, 307, 308]

        def redirect(handler: _Handler, path: str) -> None:
            # By the DOI asked for, not by arrival: requests run concurrently.
            code = codes[int(handle_of(path).rsplit("r", 1)[1])]
            handler.send(answer(code, b"", {"Location": f"{target.url}{path}"}))

        with hostile(redirect) as origin:
            results = resolve([f"10.1000/r{i}" for i in range(5)], config=FAST,
                              base_url=origin.url)
        assert target.requests == 0 and origin.requests == 5
    assert [r.http_status for r in results] == [301, 302, 303, 307, 308]
    assert all(r.status == "error" and r.attempts == 1 for r in results)
    assert all("not followed" in (r.error or "") for r in results)


def _fifty_megabytes_declared(handler: _Handler, path: str) -> None:
    handler.send(f"HTTP/1.1 200 OK\r\nContent-Length: {50 * 2**20}\r\n\r\n".encode())
    handler.send(b" " * 65536)


def _endless_chunked(handler: _Handler, path: str) -> None:
    handler.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"10000\r\n" + b" " * 65536 + b"\r\n"
    for _ in range(50 * 16):  # 50 MiB, bounded: the client must hang up long before
        handler.send(chunk)


@pytest.mark.parametrize("behaviour", [_fifty_megabytes_declared, _endless_chunked])
def test_huge_and_endless_bodies_stop_at_the_cap(behaviour):
    with hostile(behaviour) as server:
        started = time.monotonic()
        [result] = resolve(["10.1000/big"], config=FAST, base_url=server.url, timeout=10)
        elapsed = time.monotonic() - started
        assert server.requests == 1  # final, not retried
    assert (result.status, result.attempts, result.http_status) == ("error", 1, 200)
    assert f"{MAX_BODY_BYTES}-byte limit" in (result.error or "")
    assert elapsed < 5


def _drip(handler: _Handler, path: str) -> None:
    handler.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
    for _ in range(1000):
        handler.send(b" ")
        time.sleep(0.1)


def _html(handler: _Handler, path: str) -> None:
    handler.send(answer(200, b"<html><body>Welcome to the captive portal</body></html>",
                        {"Content-Type": "text/html"}))


def _reset(handler: _Handler, path: str) -> None:
    handler.reset()


def _bad_status_line(handler: _Handler, path: str) -> None:
    handler.send(b"HTTP/1.1 abc OK\r\n\r\n")


def _bad_chunks(handler: _Handler, path: str) -> None:
    handler.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n")


def _bad_gzip(handler: _Handler, path: str) -> None:
    handler.send(answer(200, b"not gzip", {"Content-Encoding": "gzip"}))


def _hostile_message(handler: _Handler, path: str) -> None:
    message = "line one\r\nSet-Cookie: x=1\x1b[31m" + "!" * 5000
    handler.send(answer(500, json.dumps({"responseCode": 2, "message": message}).encode()))


FAILING = {
    "slow drip": (_drip, "no complete answer within 0.5s"),
    "html with 200": (_html, "malformed JSON in HTTP 200 answer"),
    "reset": (_reset, "connection reset"),
    # Issue #14 item 7: these used to end as "unexpected ClientResponseError: 400,
    # message=..." with attempts=0 although every request had left.
    "bad status line": (_bad_status_line, "the server's answer is not valid HTTP"),
    "bad chunk size": (_bad_chunks, "the server's answer is not valid HTTP"),
    "bad gzip": (_bad_gzip, "the answer's body was cut short or could not be decoded"),
    "hostile 500 message": (_hostile_message, "HTTP 500 responseCode 2: line one\\r\\nSet-Co"),
}


@pytest.mark.parametrize("name", sorted(FAILING))
def test_broken_answers_end_as_error_rows_in_our_words_with_honest_attempts(name):
    behaviour, reason = FAILING[name]
    with hostile(behaviour) as server:
        stats = ResolverStats()
        results = resolve(["10.1000/a", "10.1000/b"], config=FAST, base_url=server.url,
                          timeout=0.5, breaker_threshold=100, stats=stats)
        served = server.requests
    assert [r.status for r in results] == ["error", "error"]
    assert all(reason in (r.error or "") for r in results), [r.error for r in results]
    assert [r.attempts for r in results] == [FAST.max_attempts] * 2  # each request counted
    assert served == stats.requests == sum(r.attempts for r in results)
    assert stats.retries == retries_in(results)[1] == 2 * (FAST.max_attempts - 1)
    assert_own_words(results)
    assert all(len(r.error or "") < 400 for r in results)  # 5000 '!' do not reach the row


BAD_RETRY_AFTER = ["garbage", "-5", "inf", "nan", "1e999", "", "Thu, 99 Foo 2024"]


@pytest.mark.parametrize("value", BAD_RETRY_AFTER)
def test_bad_retry_after_values_end_as_error_rows_quickly(value):
    with hostile(lambda h, p: h.send(answer(429, b"{}", {"Retry-After": value}))) as server:
        started = time.monotonic()
        [result] = resolve(["10.1000/t"], config=FAST, base_url=server.url)
        elapsed = time.monotonic() - started
    assert result.status == "error" and result.attempts == FAST.max_attempts
    assert result.error == f"gave up after {FAST.max_attempts} attempts: HTTP 429 (throttled)"
    assert elapsed < 2  # "inf" once meant a 300 s sleep (retry_after_max)


def test_dot_segments_query_and_fragment_never_change_the_handle_requested():
    dois = ["10.1000/ab/../cd", "10.1000/ab/%2e%2e/cd", "10.1000/x?y=1", "10.1000/x#y",
            "10.1000/xy/./c", "10.1000/.."]
    with hostile(lambda h, p: h.send(answer(200, record(handle_of(p), "https://x/")))) as server:
        results = resolve(dois, config=FAST, base_url=server.url)
        paths = list(server.paths)
    assert [r.status for r in results] == ["resolved"] * len(dois)
    assert sorted(handle_of(p) for p in paths) == sorted(dois)
    for path in paths:  # nothing a URL normaliser could collapse or cut reaches the wire
        target = path.removeprefix("/api/handles/")
        assert "?" not in path and "#" not in path
        assert "/../" not in target and "/./" not in target and not target.endswith("/..")


# --- Issue #14 item 3: a Retry-After never outlives the give-up time -----------------------


def _year_ahead() -> str:
    return format_datetime(datetime.now(timezone.utc) + timedelta(days=365), usegmt=True)


@pytest.mark.parametrize("retry_after", ["999999", "30", "year"])
def test_a_retry_after_longer_than_the_give_up_time_ends_the_batch_at_once(retry_after):
    header = _year_ahead() if retry_after == "year" else retry_after
    with hostile(lambda h, p: h.send(answer(429, b"{}", {"Retry-After": header}))) as server:
        stats = ResolverStats()
        started = time.monotonic()
        results = resolve([f"10.1000/p{i}" for i in range(10)], config=FAST,
                          base_url=server.url, breaker_give_up=10, stats=stats)
        elapsed = time.monotonic() - started
        served = server.requests
    assert elapsed < 3, elapsed  # was 602 s for 10 DOIs, 151 s for one
    assert [r.status for r in results] == ["error"] * 10
    assert all("the proxy asked for a pause of" in (r.error or "") for r in results)
    assert all("longer than the 10s the resolver may keep waiting" in (r.error or "")
               for r in results)
    assert served == stats.requests == sum(r.attempts for r in results) <= FAST.concurrency
    assert_own_words(results)


def test_a_retry_after_within_the_give_up_time_is_still_honoured():
    calls = []

    def once_throttled(handler: _Handler, path: str) -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            handler.send(answer(429, b"{}", {"Retry-After": "1"}))
        else:
            handler.send(answer(200, record(handle_of(path), "https://ok.example/")))

    with hostile(once_throttled) as server:
        [result] = resolve(["10.1000/w"], config=FAST, base_url=server.url, breaker_give_up=10)
    assert result.status == "resolved" and result.attempts == 2
    assert calls[1] - calls[0] >= 0.95


def test_a_long_backoff_is_cut_short_when_the_breaker_gives_up():
    """Backoff of 5-10 s per DOI, give-up 1 s: the rows end at the give-up time, not later."""
    with hostile(_reset) as server:
        started = time.monotonic()
        results = resolve([f"10.1000/b{i}" for i in range(4)], config=FAST, base_url=server.url,
                          backoff_base=5.0, backoff_max=10.0, breaker_give_up=1.0,
                          breaker_threshold=2, max_attempts=6)
        elapsed = time.monotonic() - started
    assert [r.status for r in results] == ["error"] * 4
    assert elapsed < 3, elapsed


# --- Issue #14 item 4: only URLs that are safe to pass on ----------------------------------

UNSAFE = [
    "javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "https://ok.example/\r\nSet-Cookie: a=b",
    '=HYPERLINK("http://evil.example/","click")',
    "+cmd|' /C calc'!A0",
    "/relative/path",
    "https:///no-host",
    "https://ok.example/\u202egnp.exe",
    "https://ok.example/ tab\there",
    "ftp://files.example/x",
]
SAFE = ["https://ok.example/a?b=c#d", "HTTP://OK.EXAMPLE/UPPER", "http://[::1]:8080/x"]


def _records(handler: _Handler, path: str) -> None:
    handle = handle_of(path)
    index = int(handle.rpartition("u")[2])
    handler.send(answer(200, record(handle, (UNSAFE + SAFE)[index])))


def test_unsafe_url_values_never_reach_url_and_are_kept_raw(tmp_path: Path):
    dois = [f"10.1000/u{i}" for i in range(len(UNSAFE) + len(SAFE))]
    cache = tmp_path / "cache.sqlite"
    with hostile(_records) as server:
        results = resolve(dois, config=FAST, base_url=server.url, cache=cache)
        again = resolve(dois, config=FAST, base_url=server.url, cache=cache)
        assert server.requests == len(dois)  # the second run came from the cache
    for result, raw in zip(results[: len(UNSAFE)], UNSAFE, strict=True):
        shown = server_text(raw, MAX_URL_CHARS)  # as sent, control characters escaped (#42)
        assert (result.status, result.url, result.url_raw) == ("no_values", None, shown)
        assert result.error == REFUSED_URL and result.response_code == 1
        assert result.as_row()["url_raw"] == shown
    for result, raw in zip(results[len(UNSAFE):], SAFE, strict=True):
        assert (result.status, result.url, result.url_raw, result.error) == (
            "resolved", raw, raw, None)
    assert [r.cached for r in again] == [True] * len(dois)
    assert [r.as_row() for r in again] == [r.as_row() for r in results]


def test_an_unsafe_url_cached_by_an_older_version_is_fetched_again(tmp_path: Path):
    import sqlite3

    cache = tmp_path / "cache.sqlite"
    with hostile(_records) as server:
        [first] = resolve(["10.1000/u0"], config=FAST, base_url=server.url, cache=cache)
        with sqlite3.connect(cache) as conn:  # what an older version stored
            conn.execute("update answers set status = 'resolved', url = ?", (UNSAFE[0],))
        [second] = resolve(["10.1000/u0"], config=FAST, base_url=server.url, cache=cache)
        assert server.requests == 2
    assert first.status == second.status == "no_values" and second.url is None
    assert not second.cached


# --- Issue #14 item 6: two processes, one cache ----------------------------------------------

WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from airflow_doi.resolver import ResolverStats, resolve
    base, cache, go, count = sys.argv[1:]
    dois = [f"10.4444/shared.{i}" for i in range(int(count))]
    while not os.path.exists(go):  # both processes start their batch together
        time.sleep(0.005)
    stats = ResolverStats()
    results = resolve(dois, base_url=base, cache=cache, rate=150, burst=4, concurrency=4,
                      backoff_base=0.02, stats=stats)
    print(json.dumps({"statuses": sorted({r.status for r in results}),
                      "requests": stats.requests, "retries": stats.retries,
                      "hits": stats.cache_hits,
                      "rows": [[r.key, r.attempts, r.cached] for r in results]}))
    """
)


def test_two_processes_on_one_cache_ask_each_key_once(tmp_path: Path):
    count = 240
    cache, go = tmp_path / "cache.sqlite", tmp_path / "go"
    with ProxySimulator(auto_records=True, latency=0.01) as sim:
        workers = [
            subprocess.Popen([sys.executable, "-c", WORKER, sim.url, str(cache), str(go),
                              str(count)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
            for _ in range(2)
        ]
        time.sleep(1.0)  # both have imported the resolver and wait for the signal
        go.touch()
        reports = []
        for worker in workers:
            out, err = worker.communicate(timeout=60)
            assert worker.returncode == 0, err
            reports.append(json.loads(out))
        served = sim.stats()
    assert [r["statuses"] for r in reports] == [["resolved"], ["resolved"]]
    retries = sum(r["retries"] for r in reports)
    assert served["requests"] == count + retries  # was 2 * count: each asked every key
    assert sum(r["requests"] for r in reports) == served["requests"]
    assert len(served["by_key"]) == count
    assert all(r["requests"] > 0 for r in reports), reports  # both really worked
    assert sum(r["hits"] for r in reports) >= count - retries  # one's answers served the other
    assert served["throttled"] == 0


def test_a_claim_of_a_killed_process_is_taken_over_and_a_live_one_is_not(tmp_path: Path):
    from airflow_doi.resolver.cache import ResolverCache

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    path = tmp_path / "c.sqlite"
    with ResolverCache(path) as mine, ResolverCache(path) as other:
        host = socket.gethostname()
        with mine._conn:
            mine._conn.execute(
                "insert into claims values (?, '', ?, ?)",
                ("10.1/DEAD", f"{host}\t{dead.stdout.strip()}\tx", time.time()))
        assert mine.claim("10.1/DEAD")  # its holder no longer runs
        assert other.claim("10.1/LIVE") and not mine.claim("10.1/LIVE")  # held by a live batch
        other.release("10.1/LIVE")
        assert mine.claim("10.1/LIVE")
        mine.release_all()
        assert other.claim("10.1/DEAD")


# --- Issue #10 item 5: a dead proxy is loud, counted honestly, and ends in bounded time ----


def _dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answer_once_then_die(handler: _Handler, path: str) -> None:
    """Answer the first request, then close the listening socket: connection refused.

    The socket closes *before* the answer goes out: the client asks again only after it, so a
    second request can never reach a listening socket about to close (it sat in the backlog
    and was reset, or waited out its timeout, on a loaded machine)."""
    handler.server.shutdown()
    handler.server.server_close()
    handler.send(answer(200, record(handle_of(path), "https://ok.example/")))


def test_a_proxy_that_dies_mid_run_logs_each_opening_and_gives_up_in_bounded_time(caplog):
    config = FAST.replace(breaker_give_up=1.5, breaker_threshold=3, max_attempts=6,
                          breaker_cooldown=0.2, concurrency=1)
    stats = ResolverStats()
    caplog.set_level(logging.WARNING, logger="airflow_doi.resolver")
    with hostile(_answer_once_then_die) as server:
        url = server.url
        started = time.monotonic()
        results = resolve([f"10.1000/d{i}" for i in range(20)], config=config, base_url=url,
                          stats=stats)
        elapsed = time.monotonic() - started
    assert [r.status for r in results] == ["resolved"] + ["error"] * 19
    # It answered once, so the bounded wait applies: the give-up time, plus at most one
    # request timeout; not a stop at once.
    assert config.breaker_give_up <= elapsed < config.breaker_give_up + config.timeout + 0.5
    assert stats.never_answered is None
    reason = f"could not connect to {url}/ (connection refused)"
    assert any(reason in (r.error or "") for r in results)
    assert_own_words(results[1:])
    lines = [r for r in caplog.records if r.name == "airflow_doi.resolver.breaker"]
    opened = [r.getMessage() for r in lines if "pausing requests for" in r.getMessage()]
    gave_up = [r.getMessage() for r in lines if r.getMessage().startswith("giving up on")]
    assert len(opened) == stats.breaker_opens >= 1
    assert all(r.levelno == logging.WARNING for r in lines)
    assert f"the proxy at {url} failed 3 time(s) in a row" in opened[0]
    assert reason in opened[0] and "giving up in " in opened[0]
    assert len(gave_up) == 1
    assert "keys not answered yet come back as error, unanswered" in gave_up[0]
    assert "the Airflow operators write no row" in gave_up[0]
    assert "kept failing for" in gave_up[0]
    assert all("\n" not in line for line in opened + gave_up)
    # The summary's counts agree with the rows.
    requests, retries = retries_in(results)
    assert (stats.requests, stats.retries) == (requests, retries)
    assert stats.by_status == {"resolved": 1, "error": 19}
    assert f"{stats.retries} retries" in stats.summary()


def test_a_proxy_never_there_is_given_up_on_at_once_naming_it(caplog):
    """Issue 34: every request refused, and the run still waited breaker_give_up (121 s with
    the defaults). Nothing ever answered: it stops after ``breaker_threshold`` failures."""
    port = _dead_port()
    config = FAST.replace(breaker_give_up=120.0, breaker_threshold=3, max_attempts=6,
                          breaker_cooldown=0.2)
    stats = ResolverStats()
    caplog.set_level(logging.WARNING, logger="airflow_doi.resolver")
    started = time.monotonic()
    results = resolve([f"10.1000/d{i}" for i in range(20)], config=config,
                      base_url=f"http://127.0.0.1:{port}", stats=stats)
    elapsed = time.monotonic() - started
    assert [r.status for r in results] == ["error"] * 20
    assert elapsed < 2.0, elapsed
    reason = f"could not connect to http://127.0.0.1:{port}/ (connection refused)"
    assert stats.never_answered == reason
    assert stats.gave_up == (
        f"no request was ever answered ({reason}, 3 times in a row): stopped at once, not "
        "after breaker_give_up (120s), which is for a proxy that stops answering mid-run")
    assert all(reason in (r.error or "") for r in results)
    assert_own_words(results)
    [line] = [r.getMessage() for r in caplog.records if r.name == "airflow_doi.resolver.breaker"]
    assert line.startswith(f"giving up on the proxy at http://127.0.0.1:{port}: no request")
    assert stats.breaker_opens == 0 and stats.requests <= 3 + config.concurrency


def test_a_proxy_that_answered_an_earlier_batch_of_the_run_is_waited_for():
    """A run in batches (the operators, repair's rounds) carries ``stats.answered`` from one
    batch to the next: a proxy that dies between two batches gets the bounded wait."""
    config = FAST.replace(breaker_give_up=1.5, breaker_threshold=3, breaker_cooldown=0.2,
                          max_attempts=50)
    first = ResolverStats()
    with ProxySimulator(auto_records=True) as simulator:
        url = simulator.url
        resolve(["10.1000/a"], config=config, base_url=url, stats=first)
    assert first.answered
    second = ResolverStats(answered=first.answered)  # the simulator is gone: refused
    started = time.monotonic()
    results = resolve(["10.1000/b", "10.1000/c"], config=config, base_url=url, stats=second)
    assert time.monotonic() - started >= config.breaker_give_up
    assert [r.status for r in results] == ["error", "error"]
    assert second.never_answered is None and "kept failing for" in (second.gave_up or "")
    fresh = ResolverStats()
    started = time.monotonic()
    resolve(["10.1000/b", "10.1000/c"], config=config, base_url=url, stats=fresh)
    assert time.monotonic() - started < config.breaker_give_up
    assert fresh.never_answered is not None and not fresh.answered


def test_stats_give_the_error_share_of_rows_sent():
    with hostile(lambda h, p: h.send(
        answer(200, record(handle_of(p), "https://ok.example/")) if p.endswith("ok")
        else answer(500, b"{}")
    )) as server:
        stats = ResolverStats()
        resolve(["10.1000/ok", "junk", "10.1000/bad", "10.1000/OK"], config=FAST,
                base_url=server.url, breaker_threshold=100, stats=stats)
    assert stats.by_status == {"resolved": 2, "invalid": 1, "error": 1}
    assert stats.sent_rows == 3 and stats.error_share == pytest.approx(1 / 3)


def test_credentials_never_reach_a_log_line(caplog):
    caplog.set_level(logging.WARNING, logger="airflow_doi.resolver")
    resolve(["10.1000/x"], config=FAST, breaker_threshold=1, breaker_give_up=0.3,
            base_url=f"http://user:s3cret@127.0.0.1:{_dead_port()}")
    assert caplog.records and not any("s3cret" in r.getMessage() for r in caplog.records)


