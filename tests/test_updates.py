"""The agencies' update streams (#39): a refresh asks pages, not keys, stays under the limits
the servers announce, and goes on after a kill from the page it had reached, an expired
Crossref cursor included, never writing a stored row again."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_doi.metadata import MetadataStats, fetch
from airflow_doi.metadata.crossref import read_updates as crossref_page
from airflow_doi.metadata.datacite import read_updates as datacite_page
from airflow_doi.metadata.datacite import updates_url
from airflow_doi.resolver.agencies import work_for
from airflow_doi.resolver.simulator import ProxySimulator, make_records
from tests.conftest import record_figure

pytestmark = pytest.mark.xdist_group("updates")


def _registry(count: int, revised: int) -> tuple[list[str], dict[str, Any], list[str]]:
    """``count`` DOIs of Crossref and DataCite works, the first ``revised`` of them changed in
    June 2025."""
    dois = [d for d in (f"10.5555/up.{i}" for i in range(count * 2))
            if work_for(d).agency in ("crossref", "datacite")][:count]
    return dois, make_records(dois), dois[:revised]


def _revise(sim: ProxySimulator, dois: list[str]) -> None:
    for number, doi in enumerate(dois):
        sim.revise(doi, f"2025-06-{1 + number % 28:02d}T08:00:00Z", title=f"Revised {number}")


def _options(sim: ProxySimulator, **more: Any) -> dict[str, Any]:
    return {"base_url": sim.url, "metadata_hosts": sim.metadata_hosts,
            "crossref_url": sim.crossref_url, "datacite_url": sim.datacite_url,
            "rate": 1000, "agency_rate": 1000, "list_rate": 20, **more}


def test_a_refresh_asks_pages_not_keys_and_stays_under_the_announced_limit() -> None:
    dois, records, revised = _registry(4000, 3000)
    with ProxySimulator(records, list_rate_limit=3) as sim:
        _revise(sim, revised)
        catalogue = dois[:500] + dois[3000:3500]  # 500 changed keys, 500 unchanged
        stats = MetadataStats()
        # Under both servers' limits of 3 a second (Crossref announces its own, DataCite
        # none): no page may be refused.
        results = fetch(catalogue, updates_since="2025-06-01", stats=stats,
                        **_options(sim, list_rate=2.5))
        seen = sim.stats()
    changed = {r.key for r in results if r.metadata_source in (
        "crossref_updates", "datacite_updates")}
    assert changed == {d.upper() for d in dois[:500]}
    assert all(r.title.startswith("Revised") for r in results if r.key in changed)
    pages = sum(seen["stream_pages"].values())
    per_record = pages / len(revised)
    record_figure({"figure": "update_stream_requests", "updated_records": len(revised),
                   "pages": pages, "requests_per_updated_record": round(per_record, 4),
                   "over_announced": seen["list_over_announced"]})
    assert per_record <= 0.01, seen
    assert seen["list_over_announced"] == 0 and seen["list_throttled"] == 0, seen
    assert {s.finished for s in stats.updates.values()} == {True}
    # The 500 unchanged keys were asked of the batch APIs, the changed ones never.
    assert not {d.upper() for d in dois[:500]} & set(sim.list_dois_by_key)


KILLED = """
import sys, time
from airflow_doi.metadata import fetch
from airflow_doi.metadata.cache import MetadataCache
store = MetadataCache.store_page
def slow(self, state, answers):
    store(self, state, answers)
    if state.source == "crossref" and state.pages >= 2:
        time.sleep(120)  # killed here
MetadataCache.store_page = slow
options = dict(base_url=sys.argv[1], crossref_url=sys.argv[2], datacite_url=sys.argv[3],
               metadata_hosts=sys.argv[4].split(","), rate=1000, agency_rate=1000,
               list_rate=50)
fetch(open(sys.argv[5]).read().split(), cache=sys.argv[6], updates_since="2025-06-01",
      **options)
"""


# The cursor lives 4 s where it must expire (the pause outlives it), and a minute where it must
# not: under load, killing the child and starting again took more than a second, and a 1 s
# cursor expired between two pages of the harvest that followed as well.
@pytest.mark.parametrize(("pause", "cursor_ttl"), [(0.0, 60.0), (5.0, 4.0)],
                         ids=["cursor_alive", "cursor_expired"])
def test_a_killed_harvest_goes_on_from_its_page_and_never_rewrites_a_row(
        tmp_path: Path, pause: float, cursor_ttl: float) -> None:
    dois, records, revised = _registry(3000, 3000)
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("\n".join(dois))
    cache = tmp_path / "cache.sqlite"
    with ProxySimulator(records, cursor_ttl=cursor_ttl) as sim:
        _revise(sim, revised)
        child = subprocess.Popen(
            [sys.executable, "-c", KILLED, sim.url, sim.crossref_url, sim.datacite_url,
             ",".join(sim.metadata_hosts), str(keys_file), str(cache)])
        stored: list[tuple[str, int]] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not stored and child.poll() is None:
            time.sleep(0.2)
            try:
                with sqlite3.connect(cache) as connection:
                    pages = connection.execute("select pages from update_streams where source ="
                                               " 'crossref'").fetchone()
                    if pages and pages[0] >= 2:
                        stored = connection.execute(
                            "select key, rowid from metadata where metadata_source = "
                            "'crossref_updates'").fetchall()
            except sqlite3.OperationalError:
                continue
        child.kill()
        child.wait()
        assert len(stored) >= 1000, "the child never stored two pages"
        time.sleep(pause)  # past the cursor's life: the stream is read again from its start
        before = sim.stats()["stream_pages"].get("crossref", 0)
        stats = MetadataStats()
        results = fetch(dois, cache=cache, updates_since="2025-06-01", stats=stats,
                        **_options(sim, list_rate=50))
        seen = sim.stats()
    state = stats.updates["crossref"]
    assert state.finished
    if pause:
        # DataCite's stream may have been mid-cursor when the child died as well.
        assert state.restarts >= 1  # at least the cursor the kill left behind
        assert seen["expired_cursors"] == sum(s.restarts for s in stats.updates.values())
    else:  # went on from the third page: no page asked twice
        assert seen["expired_cursors"] == 0 and state.restarts == 0
        assert seen["stream_pages"]["crossref"] - before == state.pages - 2
    assert {r.metadata_status for r in results} == {"ok"}
    assert sum(r.title.startswith("Revised") for r in results) == len(revised)
    with sqlite3.connect(cache) as connection:
        after = dict(connection.execute("select key, rowid from metadata").fetchall())
    assert all(after[key] == rowid for key, rowid in stored)  # never written again


def test_a_page_names_its_next_cursor_and_no_other_host() -> None:
    body = (b'{"data": [], "meta": {"total": 7}, "links": {"next": '
            b'"https://evil.example/dois?page%5Bcursor%5D=abc%2B%2F%3D&page%5Bsize%5D=1000"}}')
    records, cursor, total = datacite_page(body)
    assert (records, cursor, total) == ([], "abc+/=", 7)
    url = updates_url("https://api.datacite.org", "2025-01-02", cursor)
    assert url.startswith("https://api.datacite.org/dois?") and "evil" not in url
    assert "page%5Bcursor%5D=abc%2B%2F%3D" in url  # the cursor percent-encoded
    page = crossref_page(b'{"status": "ok", "message": {"items": [], "next-cursor": '
                         b'"AoJ+/x=", "total-results": 3}}')
    assert page == ([], "AoJ+/x=", 3)
