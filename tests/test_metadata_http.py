"""Enrichment over real HTTP on loopback: the proxy simulator and its simulated agencies.

Every record is compared with the simulator's own description of the work (not with our
parser's reading of the CSL), every hostile answer ends as a per-key status, and no request
ever reaches a host off the allowlist.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_doi.metadata import MetadataStats, fetch
from airflow_doi.resolver.agencies import HOSTILE_WORKS, SHOWCASE_WORKS, work_for
from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked
from tests.conftest import read_output_csv

FAST = {"rate": 200.0, "agency_rate": 200.0, "concurrency": 8, "max_attempts": 3,
        "backoff_base": 0.05}
CONTACT = "catalogue-team@lib.example-uni.edu"


@pytest.fixture(scope="module")
def sim() -> ProxySimulator:
    with ProxySimulator(auto_records=True) as simulator:
        yield simulator


def _fetch(sim: ProxySimulator, values: list[object], **options: object) -> list:
    # Content negotiation for every key, the agencies' REST APIs named as a deployment names
    # them (so that an answer's host says whose it is).
    settings = {**FAST, "base_url": sim.url, "metadata_hosts": sim.metadata_hosts,
                "source": "negotiation", "crossref_url": sim.crossref_url,
                "datacite_url": sim.datacite_url, **options}
    return fetch(values, **settings)  # type: ignore[arg-type]


def test_every_showcase_record_matches_the_work(sim: ProxySimulator) -> None:
    dois = [w.doi for w in SHOWCASE_WORKS]
    results = _fetch(sim, dois)
    for work, result in zip(SHOWCASE_WORKS, results, strict=True):
        expected = sim.expected_metadata(work.doi)
        if expected is None:
            assert result.metadata_status == "no_metadata"
            assert "406" in result.error
            continue
        assert result.metadata_status == "ok", result.error
        assert result.fields == expected
        assert result.source_host == sim.agency_url(work.agency).removeprefix("http://")
        assert result.attempts == 2 and result.http_status == 200
        assert result.expires_at > result.fetched_at
        assert "\"reference\":" not in (result.csl_json or "")
    by_doi = {r.doi: r for r in results}
    assert by_doi["10.5555/showcase.retracted"].updated_by == (
        "retraction:10.5555/showcase.notice")
    assert by_doi["10.5555/showcase.notice"].update_to == "retraction:10.5555/showcase.retracted"
    assert by_doi["10.5555/showcase.chapter"].isbn == "9781234567897"


def test_many_generated_works_of_every_agency_match(sim: ProxySimulator) -> None:
    dois = [f"10.5555/gen.{i}" for i in range(120)]
    assert {work_for(d).agency for d in dois} == {"crossref", "datacite", "medra", "nocn"}
    results = _fetch(sim, dois)
    for doi, result in zip(dois, results, strict=True):
        expected = sim.expected_metadata(doi)
        if expected is None:
            assert result.metadata_status == "no_metadata"
        else:
            assert (result.metadata_status, result.fields) == ("ok", expected), doi


def test_one_request_pair_per_key_and_the_rest_local(sim: ProxySimulator) -> None:
    sim.reset_counts()
    values = ["10.5555/Pair.1", "doi:10.5555/pair.1", "https://doi.org/10.5555/PAIR.1",
              "10.5555/nobody-registered", None, "not a doi"]
    with ProxySimulator() as empty:  # knows no DOI at all
        results = _fetch(empty, values)
        assert [r.metadata_status for r in results] == [
            "not_found", "not_found", "not_found", "not_found", "invalid", "invalid"]
        assert empty.cn_requests == 2 and sum(empty.agency_requests.values()) == 0
    results = _fetch(sim, values[:3])
    assert {r.metadata_status for r in results} == {"ok"}
    assert sim.cn_requests == 1 and sum(sim.agency_requests.values()) == 1


def test_the_doi_enters_the_path_percent_encoded(sim: ProxySimulator) -> None:
    doi = '10.5555/odd#part?x=1 %25 "q" <a>'
    sim.reset_counts()
    (result,) = _fetch(sim, [doi])
    assert result.metadata_status == "ok", result.error
    assert result.fields == sim.expected_metadata(doi)
    key = next(iter(sim.cn_by_key))
    assert key == '10.5555/ODD#PART?X=1 %25 "Q" <A>'  # decoded at the proxy: the same DOI


@pytest.mark.parametrize(("fault", "status", "reason"), [
    ("html_200", "error", "HTML, not CSL-JSON"),
    ("truncated", "error", "not complete JSON"),
    ("latin1", "error", "not UTF-8"),
    ("wrong_types", "ok", "unexpected type: ISSN, author, issued, title"),
    ("huge", "error", "exceeds the 4194304-byte limit"),
    ("deep", "error", "nested too deep"),
    ("redirect_loop", "error", "redirect loop"),
    ("redirect_offlist", "error", "not on the metadata_hosts allowlist"),
    ("redirect_http", "no_metadata", "landing page"),
    ("not_json_object", "error", "JSON list, not a CSL object"),
    ("status_500", "error", "HTTP 500"),
    ("throttle", "ok", None),
])
def test_hostile_answers_end_as_a_per_key_status(sim: ProxySimulator, fault: str, status: str,
                                                 reason: str | None) -> None:
    sim.reset_counts()
    doi = HOSTILE_WORKS[fault].doi
    started = time.monotonic()
    (result,) = _fetch(sim, [doi])
    assert result.metadata_status == status
    if reason is None:
        assert result.error is None
    else:
        assert reason in result.error
    assert sim.elsewhere_requests == 0
    if fault == "wrong_types":
        assert result.title is None and result.publisher == "Fernleaf Academic"
    if fault == "throttle":  # 429 twice with Retry-After: 1, then the record
        assert result.attempts == 4 and time.monotonic() - started >= 2.0
        assert result.fields == sim.expected_metadata(doi)
    for text in (result.error or "", result.csl_json or ""):
        assert "\n" not in text and "<!DOCTYPE" not in text


def test_no_redirect_off_the_allowlist_or_to_http_is_followed(sim: ProxySimulator) -> None:
    """Acceptance 2: the other host counts zero requests, whatever the redirect."""
    sim.reset_counts()
    elsewhere_https = "https://" + sim.elsewhere_url.removeprefix("http://")
    dois = [HOSTILE_WORKS["redirect_offlist"].doi, HOSTILE_WORKS["redirect_http"].doi]
    offlist, downgrade = _fetch(
        sim, dois, metadata_hosts=(*sim.metadata_hosts, elsewhere_https), contact=CONTACT)
    assert offlist.metadata_status == "error"
    assert downgrade.metadata_status == "error" and "downgrade" in downgrade.error
    assert sim.elsewhere_requests == 0
    # With the default allowlist (the real agencies' hosts) no loopback agency is contacted.
    sim.reset_counts()
    results = fetch([w.doi for w in SHOWCASE_WORKS], base_url=sim.url, **FAST)
    assert {r.metadata_status for r in results} == {"no_metadata"}
    assert all("not a metadata host" in r.error for r in results)
    assert sum(sim.agency_requests.values()) == 0 and sim.elsewhere_requests == 0


def test_the_contact_address_and_credentials_go_to_no_other_host(sim: ProxySimulator) -> None:
    sim.reset_counts()
    with_credentials = sim.url.replace("http://", "http://team:s3cret@")
    results = _fetch(sim, [w.doi for w in SHOWCASE_WORKS[:3]]
                     + [HOSTILE_WORKS["redirect_offlist"].doi], base_url=with_credentials,
                     contact=CONTACT)
    assert [r.metadata_status for r in results] == ["ok", "ok", "ok", "error"]
    assert all(CONTACT in agent for agent in sim.agency_user_agents)  # polite pool
    assert sum(sim.agency_user_agents.values()) == 4
    assert not sim.agency_authorizations  # the proxy's credentials stay with the proxy
    assert sim.elsewhere_requests == 0 and not sim.elsewhere_user_agents
    assert all("s3cret" not in (r.error or "") for r in results)


def test_a_cache_resumes_and_errors_are_asked_again(sim: ProxySimulator, tmp_path: Path) -> None:
    cache = tmp_path / "metadata.sqlite"
    dois = ["10.5555/cache.1", "10.5555/cache.2", HOSTILE_WORKS["html_200"].doi]
    sim.reset_counts()
    first = _fetch(sim, dois, cache=cache)
    assert [r.metadata_status for r in first] == ["ok", "ok", "error"]
    sim.reset_counts()
    stats = MetadataStats()
    second = _fetch(sim, dois, cache=cache, stats=stats)
    assert [r.cached for r in second] == [True, True, False]
    assert [r.fields for r in second[:2]] == [r.fields for r in first[:2]]
    assert sim.cn_requests == 1 and stats.cache_hits == 2  # only the error was asked again
    assert "ok=2" in stats.summary() and "error=1" in stats.summary()


def test_a_dead_agency_ends_its_keys_as_error_within_the_give_up(sim: ProxySimulator) -> None:
    """An agency host that keeps failing: its keys end as error rows (asked again next run),
    the other agencies' keys are answered, and the run is not failed as if the proxy were
    down (only the proxy's breaker giving up stops a run)."""
    start = time.monotonic()
    stats = MetadataStats()
    results = _fetch(sim, [HOSTILE_WORKS["status_500"].doi, "10.5555/fine.1"],
                     breaker_give_up=2.0, max_attempts=20, breaker_threshold=2,
                     breaker_cooldown=0.2, stats=stats)
    assert [r.metadata_status for r in results] == ["error", "ok"]
    assert time.monotonic() - start < 30
    assert stats.gave_up is None


def test_malformed_json_is_not_retried_and_a_relative_redirect_keeps_no_credentials(
        sim: ProxySimulator) -> None:
    sim.reset_counts()
    (result,) = _fetch(sim, [HOSTILE_WORKS["truncated"].doi])
    assert result.metadata_status == "error" and result.attempts == 2  # one request each hop
    with_credentials = sim.url.replace("http://", "http://team:s3cret@")
    (result,) = _fetch(sim, [SHOWCASE_WORKS[0].doi], base_url=with_credentials)
    assert result.metadata_status == "ok" and not sim.agency_authorizations


def test_per_host_rates_are_kept() -> None:
    """The proxy at its rate, each agency at its own: no 429 from either simulator bucket."""
    dois = [f"10.5555/rate.{i}" for i in range(60)]
    with ProxySimulator(auto_records=True, rate_limit=40, agency_rate_limit=20) as sim:
        started = time.monotonic()
        results = fetch(dois, base_url=sim.url, metadata_hosts=sim.metadata_hosts, rate=40,
                        agency_rate=20, concurrency=8)
        elapsed = time.monotonic() - started
        assert sim.throttled == 0 and sim.agency_throttled == 0
    crossref = sum(work_for(d).agency == "crossref" for d in dois)
    assert elapsed >= (crossref - 1) / 20 * 0.9  # the busiest agency host set the pace
    assert all(r.metadata_status in ("ok", "no_metadata") for r in results)


# -- the command line --------------------------------------------------------------------------
def _cli(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return forked.run([sys.executable, "-m", "airflow_doi", *map(str, args)],
                      capture_output=True, text=True, timeout=300, check=False,
                      env={**os.environ, **(env or {})})


def test_enrich_command_on_an_excel_export(sim: ProxySimulator, tmp_path: Path) -> None:
    source = tmp_path / "apc.csv"
    source.write_bytes(
        "Institution;doi;euro\r\nZürich;10.5555/showcase.article;1.234,56\r\n"
        "Genève;NA;2.000,00\r\nBern;doi:10.5555/SHOWCASE.dataset;3\r\n"
        "Basel;10.5555/hostile.html_200;4\r\nLugano;not a doi;5\r\n".encode("cp1252"))
    out = tmp_path / "enriched.csv"
    run = _cli("enrich", source, "-o", out, "--base-url", sim.url, "--rate", 100,
               "--agency-rate", 100, "--max-attempts", 2, "--backoff-base", 0.05,
               "--contact", CONTACT,
               *[a for h in sim.metadata_hosts for a in ("--metadata-host", h)])
    assert run.returncode == 3, run.stderr  # 1 of 3 rows sent ended as error (> 10 %)
    assert "Traceback" not in run.stderr
    assert "1 of 3 rows sent ended in status error" in run.stderr
    # Written as it was read (';', and a BOM for Excel); ours named after the column doi.
    assert out.read_bytes().startswith(b"\xef\xbb\xbf")
    rows = read_output_csv(out)
    assert [r["input"] for r in rows] == [
        "10.5555/showcase.article", "NA", "doi:10.5555/SHOWCASE.dataset",
        "10.5555/hostile.html_200", "not a doi"]
    assert [r["metadata_status"] for r in rows] == ["ok", "invalid", "ok", "error", "invalid"]
    assert rows[0]["title"] == "Tidal Memory in Coastal Wetlands" and rows[0]["year"] == "2019"
    assert rows[2]["csl_type"] == "dataset"


def test_enrich_command_input_errors_say_what_to_do(sim: ProxySimulator,
                                                    tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text("identifier\n10.5555/a\n", encoding="utf-8")
    wrong_column = _cli("enrich", source, "-o", tmp_path / "out.csv", "--base-url", sim.url)
    assert wrong_column.returncode == 2 and "Traceback" not in wrong_column.stderr
    assert "identifier" in wrong_column.stderr and not (tmp_path / "out.csv").exists()
    bad_host = _cli("enrich", source, "--column", "identifier", "-o", tmp_path / "out.csv",
                    "--metadata-host", "ftp://x.example")
    assert bad_host.returncode == 2 and "--metadata-host" in bad_host.stderr


def test_enrich_command_against_a_dead_server(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text("doi\n10.5555/a\n10.5555/b\n", encoding="utf-8")
    run = _cli("enrich", source, "-o", tmp_path / "out.csv", "--base-url",
               "http://127.0.0.1:9", "--max-attempts", 2, "--backoff-base", 0.05,
               "--breaker-give-up", 2)
    assert run.returncode == 3 and "Traceback" not in run.stderr
    rows = read_output_csv(tmp_path / "out.csv")
    assert len(rows) == 2 and {r["metadata_status"] for r in rows} == {"error"}
    assert "connection refused" in rows[0]["error"]


def test_enrich_command_draws_a_progress_bar_on_a_terminal_only(sim: ProxySimulator,
                                                                 tmp_path: Path) -> None:
    import shlex
    import shutil

    assert shutil.which("script"), "util-linux script(1) is needed to give the command a tty"
    source = tmp_path / "in.csv"
    source.write_text("doi\n" + "".join(f"10.5555/tty.{i}\n" for i in range(30)),
                      encoding="utf-8")
    command = [sys.executable, "-m", "airflow_doi", "enrich", str(source), "-o",
               str(tmp_path / "out.csv"), "--base-url", sim.url, "--rate", "100",
               "--agency-rate", "100",
               *[a for h in sim.metadata_hosts for a in ("--metadata-host", h)]]
    tty = subprocess.run(["script", "-qec", shlex.join(command), "/dev/null"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert tty.returncode == 0, tty.stdout[-2000:]
    assert "30/30" in tty.stdout and "doi/s" in tty.stdout  # tqdm's bar, on the terminal
    piped = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert piped.returncode == 0 and "30/30" not in piped.stderr
    assert piped.stderr.count("\n") <= 3  # the summary line (and notes), no bar redraws


def test_a_shared_redis_limit_keeps_one_pace_per_host(redis_url: str) -> None:
    """With ``redis_url`` every worker shares one pace per host: the proxy's and each
    agency's, under their own rates (the agencies' at ``agency_rate``)."""
    import redis

    namespace = f"test-{os.getpid()}-{time.time_ns()}"
    client = redis.Redis.from_url(redis_url)
    shared: list[str] = []
    try:
        with ProxySimulator(auto_records=True) as sim:
            dois = [w.doi for w in SHOWCASE_WORKS[:3]]  # Crossref, DataCite, mEDRA works
            results = fetch(dois, base_url=sim.url, metadata_hosts=sim.metadata_hosts,
                            redis_url=redis_url, redis_namespace=namespace, rate=50,
                            agency_rate=7)
            assert [r.metadata_status for r in results] == ["ok", "ok", "ok"]
            agencies = [sim.agency_url(a).removeprefix("http://")
                        for a in ("crossref", "datacite", "medra")]
            # No contact: the agencies' paces are the public pool's, one per host.
            shared = [f"airflow-doi:{host}:public" for host in agencies]
            paces = {name: client.get(f"{name}:tat") for name in [namespace, *shared]}
        assert all(paces.values()), paces  # the proxy's own, and one per agency host
    finally:
        for key in [*client.keys(f"{namespace}*"), *(k for name in shared
                                                     for k in client.keys(f"{name}*"))]:
            client.delete(key)
        client.close()


def test_a_wrong_allowlist_is_said_and_not_trusted_once_corrected(sim: ProxySimulator,
                                                                  tmp_path: Path) -> None:
    """Stranger's trial: without --metadata-host every DOI went to a landing page, silently,
    and the cache then kept those answers for an hour after the flag was corrected."""
    source = tmp_path / "in.csv"
    source.write_text("doi\n10.5555/allow.1\n10.5555/allow.2\n", encoding="utf-8")
    common = ["enrich", source, "-o", tmp_path / "out.csv", "--base-url", sim.url,
              "--cache", tmp_path / "cache.sqlite", "--rate", 100, "--agency-rate", 100]
    forgot = _cli(*common)
    assert forgot.returncode == 0 and "landing page, none to a metadata host" in forgot.stderr
    fixed = _cli(*common, "--metadata-host", ",".join(sim.metadata_hosts))  # as printed
    assert fixed.returncode == 0, fixed.stderr
    assert "landing page" not in fixed.stderr
    rows = read_output_csv(tmp_path / "out.csv")
    assert [r["metadata_status"] for r in rows] == ["ok", "ok"]  # asked again, not cached
