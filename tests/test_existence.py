"""Existence a batch at a time (issue 40, item 4): doi.org's Which RA? answers about 50 DOIs a
request, so a key that does not exist needs no handle request, and an existence-only pass
(``urls=False``, ``resolve --existence-only``) costs a request per 50 keys."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from airflow_doi.resolver import ResolverStats, resolve
from airflow_doi.resolver.simulator import ProxySimulator, make_records, record_url
from tests.test_cli_resolve import cli

#: 600 keys, one in twenty never registered; a few with characters the Which RA? path encodes.
DOIS = [f"10.5555/ex.{i}{',' if i % 7 == 0 else ''}{'#' if i % 11 == 0 else ''}"
        for i in range(600)]
MISSING = set(DOIS[::20])
REGISTERED = [d for d in DOIS if d not in MISSING]


def _options(sim: ProxySimulator) -> dict[str, object]:
    return {"base_url": sim.url, "rate": 500, "concurrency": 4}


def test_existence_only_answers_from_which_ra_batches_alone() -> None:
    with ProxySimulator(make_records(REGISTERED)) as sim:
        stats = ResolverStats()
        results = resolve(DOIS, urls=False, stats=stats, **_options(sim))
        seen = sim.stats()
    assert seen["by_key"] == {}  # not one handle request
    assert seen["requests"] == seen["ra_requests"] == stats.which_ra_requests
    assert stats.requests <= math.ceil(len(DOIS) / 40)  # ~50 a request, under a URL's length
    assert stats.requests / len(DOIS) <= 0.03
    by_doi = {r.doi: r for r in results}
    assert {by_doi[d].status for d in MISSING} == {"not_found"}
    assert {by_doi[d].status for d in REGISTERED} == {"registered"}
    assert {by_doi[d].agency for d in REGISTERED} == {"DataCite"}
    assert all(r.url is None and r.attempts == 0 for r in results)
    assert "Which RA? request" in stats.summary() and "registered=570" in stats.summary()


def test_existence_first_sends_no_handle_request_for_a_missing_doi() -> None:
    with ProxySimulator(make_records(REGISTERED)) as sim:
        stats = ResolverStats()
        results = resolve(DOIS, existence_first=True, stats=stats, **_options(sim))
        seen = sim.stats()
    assert set(seen["by_key"]) == {d.upper() for d in REGISTERED}
    assert stats.requests == len(REGISTERED) + stats.which_ra_requests
    assert stats.requests == sum(r.attempts for r in results) + stats.which_ra_requests
    by_doi = {r.doi: r for r in results}
    assert {by_doi[d].status for d in MISSING} == {"not_found"}
    assert all(by_doi[d].url == record_url(d) and by_doi[d].agency == "DataCite"
               for d in REGISTERED)


def test_the_statuses_agree_with_the_handle_path_and_the_urls_come_later(
        tmp_path: Path) -> None:
    """Existence-only, then URLs on the same cache: the registered keys' handles are asked
    (a cached ``registered`` does not serve a run that wants URLs), the missing ones never."""
    cache = tmp_path / "cache.sqlite"
    with ProxySimulator(make_records(REGISTERED)) as sim:
        handle = resolve(DOIS, **_options(sim))
        sim.reset_counts()
        existence = resolve(DOIS, urls=False, cache=cache, **_options(sim))
        sim.reset_counts()
        later = resolve(DOIS, cache=cache, **_options(sim))
        seen = sim.stats()
        sim.reset_counts()
        again = resolve(DOIS, urls=False, cache=cache, **_options(sim))  # all cached
        assert sim.stats()["requests"] == 0
    found = {"resolved": "registered", "not_found": "not_found"}
    assert [found[r.status] for r in handle] == [r.status for r in existence]
    assert set(seen["by_key"]) == {d.upper() for d in REGISTERED} and seen["ra_requests"] == 0
    assert [(r.status, r.url) for r in later] == [(r.status, r.url) for r in handle]
    assert [(r.status, r.url) for r in again] == [(r.status, r.url) for r in handle]


def test_which_ra_undecided_keys_are_asked_of_their_handle() -> None:
    """A registered DOI Which RA? calls ``Invalid DOI`` (the proxy reads it otherwise): its
    handle decides, in either mode; a missing one is still not asked."""
    faults = {"which_ra_invalid_every": 10}
    for urls in (False, True):
        with ProxySimulator(make_records(REGISTERED), faults=faults) as sim:
            results = resolve(DOIS, urls=urls, existence_first=True, **_options(sim))
            seen = sim.stats()
        by_doi = {r.doi: r for r in results}
        undecided = {d.upper() for d in DOIS[9::10]}
        asked = set(seen["by_key"])
        if urls:
            assert asked == {d.upper() for d in REGISTERED} | (undecided & {
                d.upper() for d in MISSING})
        else:
            assert asked == undecided
            assert {by_doi[d].status for d in REGISTERED if d.upper() not in undecided} == {
                "registered"}
        assert {by_doi[d].status for d in MISSING} == {"not_found"}
        assert {by_doi[d].status for d in REGISTERED if d.upper() in undecided} == {"resolved"}


def test_cli_existence_only(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    with source.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([["doi"], *([d] for d in DOIS)])
    output = tmp_path / "out.csv"
    with ProxySimulator(make_records(REGISTERED)) as sim:
        done = cli("resolve", source, "-o", output, "--base-url", sim.url, "--rate", "100",
                   "--existence-only", "--no-progress")
        seen = sim.stats()
    assert done.returncode == 0, done.stderr
    assert seen["by_key"] == {} and seen["requests"] <= math.ceil(len(DOIS) / 40)
    with output.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(DOIS)
    assert {r["resolution_status"] for r in rows} == {"registered", "not_found"}
    assert sum(r["resolution_status"] == "not_found" for r in rows) == len(MISSING)
    assert {r["resolution_agency"] for r in rows if r["resolution_status"] == "registered"} == {
        "DataCite"}
    assert "Which RA? request" in done.stderr
    both = cli("resolve", source, "--existence-only", "--existence-first")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
