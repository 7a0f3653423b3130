"""The resolver against the proxy simulator over real loopback HTTP."""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import pytest

from airflow_doi.resolver import ResolverConfig, ResolverStats, aresolve, resolve, which_ra
from airflow_doi.resolver.client import MAX_BODY_BYTES, MAX_TTL_SECONDS
from airflow_doi.resolver.simulator import ProxySimulator, make_records, record_url
from airflow_doi.syntax import ascii_upper

HANDLES = Path(__file__).parent / "data" / "handles.json"
#: Fast but otherwise default settings for a loopback simulator.
FAST = ResolverConfig(
    rate=200, concurrency=4, backoff_base=0.02, backoff_max=0.2, timeout=5, breaker_cooldown=0.1
)


@pytest.fixture(scope="module")
def proxy():
    with ProxySimulator(HANDLES) as simulator:
        yield simulator


# Acceptance 2: each awkward character class reaches its own record, not the decoy a
# careless client (unencoded, re-normalized, str.upper-folded) would hit.
CHARACTER_CLASSES = {
    "dot-segment": ("10.1000/xy/../zz", "10.1000/zz"),
    "hash": ("10.1000/frag#ment", "10.1000/frag"),
    "question-mark": ("10.1000/query?x=1", "10.1000/query"),
    "percent": ("10.1000/100%", "10.1000/100"),
    "percent-escape-literal": ("10.1000/%5A", "10.1000/Z"),
    "space": ("10.1000/a b", "10.1000/a"),
    "plus": ("10.1000/a+b", "10.1000/a b"),
    "double-quote": ('10.1000/"quoted"', None),
    "angle-brackets": ("10.1000/<angle>", None),
    "non-ascii": ("10.1000/straße", "10.1000/STRASSE"),
    "ligature": ("10.1000/ﬁle", "10.1000/FILE"),
    "comma": ("10.1000/a,b", None),
}


@pytest.mark.parametrize("name", sorted(CHARACTER_CLASSES))
def test_awkward_characters_reach_their_own_record(proxy, name):
    doi, decoy = CHARACTER_CLASSES[name]
    before = proxy.stats()["by_key"]
    [result] = resolve([doi], config=FAST, base_url=proxy.url)
    after = proxy.stats()["by_key"]
    assert result.status == "resolved", result
    assert result.url == record_url(doi)
    assert after.get(ascii_upper(doi), 0) - before.get(ascii_upper(doi), 0) == 1
    if decoy is not None:
        assert after.get(ascii_upper(decoy), 0) == before.get(ascii_upper(decoy), 0)


def test_look_up_is_ascii_case_insensitive_and_echo_checked(proxy):
    results = resolve(
        ["10.1000/mixedcase", "https://doi.org/10.1000/STRA%C3%9FE", "10.1000/STRAßE"],
        config=FAST,
        base_url=proxy.url,
    )
    assert [r.status for r in results] == ["resolved", "resolved", "resolved"]
    assert results[0].url == record_url("10.1000/MixedCase")
    assert results[1].url == record_url("10.1000/straße")
    # Only ASCII folds: STRAßE and STRASSE are different DOIs.
    assert results[1].key == results[2].key == "10.1000/STRAßE"


def test_statuses_order_dedupe_and_invalid_never_sent(proxy):
    proxy_before = proxy.stats()["requests"]
    values = [
        "10.1000/two-urls",
        "not a doi",
        "doi:10.1000/TWO-URLS",
        None,
        "10.1000/no-url",
        "https://doi.org/10.1000/two-urls",
        "10.1000/empty",
        "10.1000/missing",
        "10.1000/a/b",  # reserved suffix: normalizes, but invalid
        42,
        "10.1000/absolute-expiry",
    ]
    stats = ResolverStats()
    results = resolve(values, config=FAST, base_url=proxy.url, stats=stats)
    assert [r.input for r in results] == values
    assert [r.status for r in results] == [
        "resolved",
        "invalid",
        "resolved",
        "invalid",
        "no_values",
        "resolved",
        "no_values",
        "not_found",
        "invalid",
        "invalid",
        "resolved",
    ]
    assert [r.error for r in results if r.status == "invalid"] == [
        "bad_directory",
        "empty",
        "reserved_suffix",
        "bad_directory",  # 42 is judged as "42", as pandas, the CLI and SQL judge it
    ]
    assert results[0].url == "https://first.example/"  # lowest index wins
    assert results[2].doi == "10.1000/TWO-URLS" and results[2].key == "10.1000/TWO-URLS"
    assert results[6].response_code == 200 and results[7].http_status == 404
    # An absolute ttl of 2099-01-01 is honoured only up to the ten-year cap.
    assert results[10].expires_at is not None and results[10].resolved_at is not None
    lifetime = results[10].expires_at - results[10].resolved_at
    assert lifetime.total_seconds() == MAX_TTL_SECONDS
    assert results[0].expires_at is not None and results[0].resolved_at is not None
    assert (results[0].expires_at - results[0].resolved_at).total_seconds() == 600
    # One request per distinct valid key; invalid values never left the process.
    assert proxy.stats()["requests"] - proxy_before == 5 == stats.requests
    assert stats.by_status == {"resolved": 4, "invalid": 4, "no_values": 2, "not_found": 1}


def test_type_and_index_filters_reach_the_proxy(proxy):
    [only_admin] = resolve(["10.1000/zz"], config=FAST, base_url=proxy.url, types=["HS_ADMIN"])
    assert only_admin.status == "no_values"
    assert [v["type"] for v in only_admin.values] == ["HS_ADMIN"]
    [by_index] = resolve(["10.1000/zz"], config=FAST, base_url=proxy.url, indexes=[1], auth=True)
    assert by_index.status == "resolved" and [v["index"] for v in by_index.values] == [1]
    [nothing] = resolve(["10.1000/zz"], config=FAST, base_url=proxy.url, types=["EMAIL"])
    assert (nothing.status, nothing.response_code) == ("no_values", 200)


def test_which_ra_batches_with_encoded_commas(proxy):
    answers = which_ra(
        ["10.1000/two-urls", "10.1000/a,b", "junk", "10.1000/missing", "10.1000/TWO-URLS"],
        config=FAST,
        base_url=proxy.url,
    )
    assert [a["ra"] for a in answers] == ["mEDRA", "DataCite", None, None, "mEDRA"]
    assert [a["error"] for a in answers] == [
        None,
        None,
        "bad_directory",
        "DOI does not exist",
        None,
    ]


def test_retries_on_faults_leave_every_row_correct():
    dois = [f"10.5555/f{i}" for i in range(40)]
    faults = {
        "error_every": 5,
        "drop_every": 7,
        "bad_json_every": 11,
        "slow_every": 13,
        "slow_seconds": 0.3,
    }
    with ProxySimulator(make_records(dois), faults=faults) as sim:
        stats = ResolverStats()
        results = resolve(dois, config=FAST, base_url=sim.url, timeout=2, stats=stats)
        served = sim.stats()
    assert [(r.url, r.error) for r in results] == [(record_url(d), None) for d in dois]
    assert served["errors"] and served["dropped"] and served["bad_json"] and served["slow"]
    assert stats.retries == served["errors"] + served["dropped"] + served["bad_json"]
    assert stats.requests == served["requests"]  # no hidden re-sends by the HTTP library
    assert sum(r.attempts for r in results) == served["requests"]


def test_bad_json_is_retried():
    with ProxySimulator(make_records(["10.5555/j"]), faults={"bad_json_every": 1}) as sim:
        [result] = resolve(["10.5555/j"], config=FAST, base_url=sim.url, max_attempts=3)
        assert sim.bad_json == 3
    assert result.status == "error" and result.attempts == 3
    assert result.error == "gave up after 3 attempts: malformed JSON in HTTP 200 answer"


def test_retry_after_is_honoured_by_the_whole_batch():
    dois = [f"10.5555/r{i}" for i in range(4)]
    with ProxySimulator(make_records(dois), rate_limit=1.0, rate_burst=1) as sim:
        stats = ResolverStats()
        results = resolve(dois, config=FAST, base_url=sim.url, concurrency=1, stats=stats)
        log, throttled = list(sim.request_log), list(sim.throttled_times)
    assert all(r.status == "resolved" for r in results)
    assert throttled and stats.throttled == len(throttled)
    for moment in throttled:  # Retry-After: 1 -> nothing at all for the next second
        later = [t for t, _ in log if moment < t < moment + 0.95]
        assert later == [], (moment, later)


def test_cache_honours_ttl_and_never_stores_errors(tmp_path):
    cache = tmp_path / "answers.sqlite"
    records = make_records(["10.5555/short"], ttl=1)
    records.update(make_records(["10.5555/long"], ttl=3600))
    values = ["10.5555/short", "10.5555/long", "10.5555/gone"]
    with ProxySimulator(records) as sim:
        first = resolve(values, config=FAST, base_url=sim.url, cache=cache, negative_ttl=60)
        assert sim.request_count == 3
        stats = ResolverStats()
        second = resolve(values, config=FAST, base_url=sim.url, cache=cache, stats=stats)
        assert sim.request_count == 3 and stats.cache_hits == 3
        assert [r.cached for r in second] == [True, True, True]
        assert [r.as_row() for r in second] == [r.as_row() for r in first]
        time.sleep(1.1)  # the short ttl passes; the others are still fresh
        resolve(values, config=FAST, base_url=sim.url, cache=cache)
        assert sim.requests_by_key["10.5555/SHORT"] == 2
        assert sim.requests_by_key["10.5555/LONG"] == sim.requests_by_key["10.5555/GONE"] == 1
    with ProxySimulator(records, faults={"always_500": True}) as down:
        [failed] = resolve(
            ["10.5555/new"], config=FAST, base_url=down.url, cache=cache, max_attempts=2
        )
        assert failed.status == "error"
    with ProxySimulator(make_records(["10.5555/new"])) as up:
        [fixed] = resolve(["10.5555/new"], config=FAST, base_url=up.url, cache=cache)
        assert fixed.status == "resolved" and up.request_count == 1  # the error was not cached


def test_a_proxy_answering_only_500_ends_every_row_as_error_without_hammering():
    """Acceptance 4, on a scaled clock: a 30 s outage, a 2 s breaker give-up."""
    dois = [f"10.5555/down{i}" for i in range(60)]
    config = FAST.replace(
        breaker_threshold=5, breaker_cooldown=0.2, breaker_give_up=2.0, max_attempts=6
    )
    with ProxySimulator(make_records(dois), faults={"outage_seconds": 30}) as sim:
        stats = ResolverStats()
        started = time.monotonic()
        results = resolve(dois, config=config, base_url=sim.url, stats=stats)
        elapsed = time.monotonic() - started
        requests = sim.request_count
    assert [r.status for r in results] == ["error"] * len(dois)
    assert all("HTTP 500 responseCode 2: Simulated failure" in (r.error or "") for r in results)
    assert any("circuit breaker open" in (r.error or "") for r in results)
    # Threshold + those already in flight + one probe per (doubling) cooldown in 2 s.
    assert requests <= 5 + config.concurrency + 6, requests
    assert requests < len(dois) * config.max_attempts / 10
    assert stats.breaker_opens >= 1
    assert elapsed < 10


def test_the_batch_recovers_when_the_outage_ends():
    dois = [f"10.5555/back{i}" for i in range(20)]
    config = FAST.replace(breaker_cooldown=0.2, breaker_give_up=20, max_attempts=20)
    with ProxySimulator(make_records(dois), faults={"outage_seconds": 1.0}) as sim:
        stats = ResolverStats()
        results = resolve(dois, config=config, base_url=sim.url, stats=stats)
        requests = sim.request_count
    assert [r.url for r in results] == [record_url(d) for d in dois]
    assert stats.breaker_opens >= 1
    assert requests < len(dois) + 20  # paused, not hammering, during the outage


class _Redirector(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", "http://127.0.0.2:9/elsewhere")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_redirects_to_other_hosts_are_never_followed():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        [result] = resolve(
            ["10.1000/x"], config=FAST, base_url=f"http://127.0.0.1:{server.server_port}"
        )
    finally:
        server.shutdown()
    assert result.status == "error" and result.attempts == 1 and result.http_status == 302
    assert result.error == "HTTP 302 redirect to http://127.0.0.2:9/elsewhere not followed"


def test_async_twin_and_progress_events(proxy):
    import asyncio

    events = []
    results = asyncio.run(
        aresolve(
            ["10.1000/zz", "10.1000/frag", "10.1000/ZZ"],
            config=FAST,
            base_url=proxy.url,
            progress=events.append,
        )
    )
    assert [r.status for r in results] == ["resolved"] * 3
    assert events[0].done == 0 and events[-1].done == events[-1].total == 2


def test_timeouts_are_retried():
    dois = [f"10.5555/t{i}" for i in range(6)]
    faults = {"slow_every": 2, "slow_seconds": 1.0}
    with ProxySimulator(make_records(dois), faults=faults) as sim:
        stats = ResolverStats()
        results = resolve(dois, config=FAST, base_url=sim.url, timeout=0.3, stats=stats)
        assert sim.slow >= 3
    assert [r.url for r in results] == [record_url(d) for d in dois]
    assert stats.retries >= 3


def test_sync_resolve_works_inside_a_running_event_loop(proxy):
    import asyncio

    async def caller() -> list:
        return resolve(["10.1000/zz"], config=FAST, base_url=proxy.url)

    [result] = asyncio.run(caller())
    assert result.url == record_url("10.1000/zz")


def test_simulator_side_doors_count_and_reset():
    import json
    import urllib.request

    with ProxySimulator(make_records(["10.5555/s"])) as sim:
        resolve(["10.5555/s", "10.5555/S"], config=FAST, base_url=sim.url)
        with urllib.request.urlopen(f"{sim.url}/_simulator/stats?times=1") as response:
            stats = json.load(response)
        assert stats["requests"] == 1 and stats["by_key"] == {"10.5555/S": 1}
        assert len(stats["times"]) == 1
        reset = urllib.request.Request(f"{sim.url}/_simulator/reset", method="POST")
        with urllib.request.urlopen(reset) as response:
            assert json.load(response) == {"reset": True}
        assert sim.request_count == 0 and sim.stats()["by_key"] == {}


def test_requests_name_the_tool_and_the_contact():
    with ProxySimulator(make_records(["10.5555/ua"])) as sim:
        resolve(["10.5555/ua"], config=FAST, base_url=sim.url, contact="ops@lib.example-uni.edu")
        [agent] = list(sim.user_agents)
    assert agent.startswith("airflow-doi/") and agent.endswith("mailto:ops@lib.example-uni.edu)")


def test_absurd_ttls_and_negative_ttl_are_capped_and_the_batch_survives(tmp_path):
    """Each of these raised OverflowError once, and took every other row down with it."""
    absurd = {
        "10.5555/ttl-1e12": 10**12,
        "10.5555/ttl-huge-int": 10**400,
        "10.5555/ttl-inf": float("inf"),  # served as the JSON extension ``Infinity``
        "10.5555/ttl-year-9999": "9999-12-31T23:59:59-12:00",
    }
    records = make_records(["10.5555/fine"], ttl=600)
    for doi, ttl in absurd.items():
        records.update(make_records([doi], ttl=ttl))  # type: ignore[arg-type]
    values = [*absurd, "10.5555/fine", "10.5555/gone"]
    cache = tmp_path / "answers.sqlite"
    with ProxySimulator(records) as sim:
        results = resolve(values, config=FAST, base_url=sim.url, cache=cache, negative_ttl=1e12)
        again = resolve(values, config=FAST, base_url=sim.url, cache=cache)
        assert sim.request_count == len(values)  # the capped answers were cached and reused
    assert [r.status for r in results] == ["resolved"] * 5 + ["not_found"]
    lifetimes = [(r.expires_at - r.resolved_at).total_seconds() for r in results]  # type: ignore[operator]
    assert lifetimes == [MAX_TTL_SECONDS] * 4 + [600, MAX_TTL_SECONDS]
    assert [r.cached for r in again] == [True] * len(values)
    assert [r.expires_at for r in again] == [r.expires_at for r in results]


def test_an_oversized_body_is_a_final_error_for_its_row_only():
    huge = "https://records.example/" + "x" * (MAX_BODY_BYTES + 1)
    records = make_records(["10.5555/small"])
    records["10.5555/huge"] = [{"index": 1, "type": "URL", "data": {"value": huge}, "ttl": 60}]
    with ProxySimulator(records) as sim:
        big, small = resolve(["10.5555/huge", "10.5555/small"], config=FAST, base_url=sim.url)
        assert sim.request_count == 2  # not retried: the proxy would send the same again
    assert (big.status, big.attempts, big.http_status) == ("error", 1, 200)
    assert big.error is not None and f"exceeds the {MAX_BODY_BYTES}-byte limit" in big.error
    assert small.url == record_url("10.5555/small")


class _EndlessBody(http.server.BaseHTTPRequestHandler):
    """HTTP/1.0, no Content-Length: the body ends when the server closes the connection."""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        chunk = b" " * 65536
        try:
            for _ in range(MAX_BODY_BYTES // len(chunk) * 4):  # 16 MiB, bounded
                self.wfile.write(chunk)
        except OSError:
            pass  # the client hung up once it had read past the limit

    def log_message(self, *args):
        pass


def test_a_body_without_length_is_cut_at_the_limit():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EndlessBody)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        [result] = resolve(
            ["10.1000/x"], config=FAST, base_url=f"http://127.0.0.1:{server.server_port}"
        )
    finally:
        server.shutdown()
    assert (result.status, result.attempts, result.http_status) == ("error", 1, 200)
    assert result.error == f"response body exceeds the {MAX_BODY_BYTES}-byte limit"


def test_credentials_in_base_url_stay_out_of_row_errors():
    closed = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirector)
    port = closed.server_port
    closed.server_close()  # nothing listens there any more
    [result] = resolve(
        ["10.1000/x"], config=FAST, base_url=f"http://user:s3cret@127.0.0.1:{port}", max_attempts=1
    )
    assert result.status == "error" and result.attempts == 1
    assert result.error == (
        f"gave up after 1 attempt: could not connect to http://127.0.0.1:{port}/"
        " (connection refused)"
    )


# --- shortDOIs (issue 34): expanded through the proxy's REST API, cached like any answer ----

SHORT_TARGET = "10.1016/S0933-3657(96)00367-3"


def test_short_dois_are_expanded_through_the_proxy_and_cached(tmp_path: Path) -> None:
    records = make_records([SHORT_TARGET, "10.1000/other"])
    records["10/bad1x"] = [{"index": 1, "type": "HS_ALIAS",
                            "data": {"format": "string", "value": "urn:isbn:0451450523"}}]
    with ProxySimulator(records) as sim:
        short = sim.short_doi(SHORT_TARGET)
        cells = [short, f"doi:{short.upper()}", f"https://doi.org/{short}",
                 SHORT_TARGET.lower(), "10/nothere1", "10/bad1x", "10/182"]
        cache = tmp_path / "cache.sqlite"
        # A type filter for the DOIs' values does not hide a shortDOI's alias.
        config = FAST.replace(types=("URL",))
        stats = ResolverStats()
        first = resolve(cells, config=config, base_url=sim.url, cache=cache, stats=stats)
        asked = dict(sim.requests_by_key)
        sim.reset_counts()
        again = resolve(cells, config=config, base_url=sim.url, cache=cache)
        assert sim.request_count == 0  # the aliases and the DOI, all from the cache
    rows = [(r.input, r.doi, r.key, r.status) for r in first]
    assert rows[:4] == [(cell, SHORT_TARGET, ascii_upper(SHORT_TARGET), "resolved")
                        for cell in cells[:3]] + [
        (cells[3], cells[3], ascii_upper(SHORT_TARGET), "resolved")]
    assert first[0].url == record_url(SHORT_TARGET)
    assert rows[4] == ("10/nothere1", None, None, "not_found")
    assert first[4].error == "the shortDOI 10/nothere1 does not exist"
    assert rows[5][3] == "no_values" and first[5].error == (
        "the shortDOI 10/bad1x names 'urn:isbn:0451450523', which is not a valid DOI "
        "(bad_directory)")
    assert (first[6].status, first[6].error) == ("invalid", "bad_directory")  # digits alone
    # One request per shortDOI (whatever its spelling) and one for the DOI they share.
    assert asked == {ascii_upper(short): 1, "10/NOTHERE1": 1, "10/BAD1X": 1,
                     ascii_upper(SHORT_TARGET): 1}
    assert (stats.short_dois, stats.short_doi_requests, stats.requests) == (3, 3, 4)
    assert "3 shortDOIs looked up through the proxy (3 of the requests)" in stats.summary()
    assert [(r.doi, r.status) for r in again] == [(r.doi, r.status) for r in first]


def test_a_short_doi_while_the_proxy_fails_ends_as_error_with_the_reason() -> None:
    with ProxySimulator(make_records([SHORT_TARGET]), faults={"always_500": True}) as sim:
        short = sim.short_doi(SHORT_TARGET)
        [result] = resolve([short], config=FAST, base_url=sim.url, max_attempts=2)
    assert (result.input, result.doi, result.status, result.attempts) == (
        short, None, "error", 2)
    assert result.error.startswith(f"the shortDOI {short} could not be expanded: gave up after "
                                   "2 attempts: HTTP 500")
