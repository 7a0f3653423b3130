"""#33: a key gets the same ``doi_metadata`` columns whichever source answered it.

The simulated agencies serve each work three ways (content negotiation's CSL-JSON, a record of
Crossref's list queries, a JSON:API record of DataCite's batch lookup) after the public schemas
and documentation; each is read into typed columns that must equal the work's, for the fixed
messy records (titles with markup and entities, an empty container list, ``[[null]]`` dates, an
organisation given only by ``name``, an ISSN without its hyphen, a notice linking to itself)
and for two thousand generated works.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_doi.metadata.crossref import (
    csl_of_item,
    csl_type_of,
    item_doi,
    list_batches,
    list_url,
    read_items,
)
from airflow_doi.metadata.csl import CslError, plain_text, typed_fields
from airflow_doi.metadata.datacite import csl_of_record, read_records, record_doi
from airflow_doi.metadata.datacite import list_batches as datacite_batches
from airflow_doi.metadata.datacite import list_url as datacite_url
from airflow_doi.metadata.sources import registry_type_for
from airflow_doi.resolver.agencies import (
    RA_NAMES,
    SHOWCASE_WORKS,
    Work,
    crossref_item_for,
    csl_for,
    datacite_record_for,
    expected_metadata,
    work_for,
    work_from_record,
)

WORKS = [*SHOWCASE_WORKS, *(work_for(f"10.5555/generated.{i}") for i in range(2000)),
         # Works of every kind under each agency: the renderings hold every field.
         *(work_from_record(f"10.5555/moved.{i}", {"agency": agency}) for i in range(300)
           for agency in ("crossref", "datacite", "medra"))]


def _columns(csl: dict, registry_type: str | None = None) -> dict:
    fields, ignored = typed_fields(csl, registry_type)
    assert ignored == [], ignored
    return fields


def _negotiated(work: Work) -> dict:
    """The columns of a work's content negotiation answer: the registry's word for its type
    read from the answer and the agency Which RA? names."""
    csl = csl_for(work)
    return _columns(csl, registry_type_for(csl["type"], RA_NAMES[work.agency]))


@pytest.mark.parametrize("source", ["negotiation", "crossref", "datacite"])
def test_every_source_gives_the_works_own_columns(source: str) -> None:
    read = {"negotiation": _negotiated,
            "crossref": lambda w: _columns(csl_of_item(crossref_item_for(w)),
                                           crossref_item_for(w)["type"]),
            "datacite": lambda w: _columns(
                csl_of_record(datacite_record_for(w)),
                datacite_record_for(w)["attributes"]["types"]["resourceTypeGeneral"])}[source]
    agency = {"negotiation": None, "crossref": "crossref", "datacite": "datacite"}[source]
    checked = 0
    for work in WORKS:
        expected = expected_metadata(work)
        if expected is None or (agency is not None and work.agency != agency):
            continue
        assert read(work) == expected, work.doi
        checked += 1
    assert checked > {"negotiation": 1500, "crossref": 1200, "datacite": 350}[source]


def test_the_messy_records_are_read_as_the_work() -> None:
    by_doi = {w.doi: w for w in SHOWCASE_WORKS}
    preprint = crossref_item_for(by_doi["10.5555/showcase.preprint"])
    assert preprint["container-title"] == [] and preprint["issued"] == {"date-parts": [[None]]}
    assert preprint["type"] == "posted-content" and "&amp;" in preprint["title"][0]
    assert preprint["author"][0] == {"name": "The Pretend Soil Consortium",
                                     "sequence": "first", "affiliation": []}
    fields = _columns(csl_of_item(preprint))
    assert fields["title"] == "Layered Soils & the Salinity of Markets"
    assert fields["csl_type"] == "article" and fields["container_title"] is None
    assert (fields["issued"], fields["year"]) == (None, None)
    assert fields["first_author"] == "The Pretend Soil Consortium"
    erratum = crossref_item_for(by_doi["10.5555/showcase.erratum"])
    assert erratum["ISSN"] == ["12345679"]
    assert any(link["DOI"] == "10.5555/showcase.erratum" for link in erratum["update-to"])
    fields = _columns(csl_of_item(erratum))
    assert fields["issn"] == "1234-5679"
    assert fields["update_to"] == "correction:10.5555/showcase.corrected"  # not itself


def test_titles_lose_their_markup_but_not_their_text() -> None:
    assert plain_text("Tidal <i>Memory</i> in <sub>2</sub>O &amp; p < 0.05") == (
        "Tidal Memory in 2O & p < 0.05")
    assert plain_text("<mml:math><mml:mi>x</mml:mi></mml:math>-rays") == "x-rays"
    assert typed_fields({"title": ["", "<i></i>", "Second"]})[0]["title"] == "Second"


def test_crossref_types_and_records_of_the_wrong_shape() -> None:
    assert csl_type_of("journal-article") == "article-journal"
    assert csl_type_of("proceedings-article") == "paper-conference"
    assert csl_type_of("article-journal") == "article-journal"  # a CSL name passes
    assert item_doi({"DOI": " 10.1/A "}) == "10.1/A"
    assert item_doi(["10.1/A"]) is None and item_doi({"DOI": 5}) is None
    fields, ignored = typed_fields(csl_of_item({"DOI": "10.1/a", "title": 7, "author": "x"}))
    assert ignored == ["author", "title"] and fields["title"] is None
    assert read_items(b'{"status": "ok", "message": {"items": []}}') == []
    with pytest.raises(CslError):
        read_items(b'{"status": "ok", "message": {"items": [')  # cut short
    with pytest.raises(CslError):
        read_items(b'{"status": "failed", "message": [{"type": "validation-failure"}]}')


def test_datacite_records_of_the_wrong_shape() -> None:
    assert record_doi({"id": "10.5061/x", "attributes": {}}) == "10.5061/x"
    assert record_doi({"attributes": {"doi": 3}}) is None and record_doi("x") is None
    assert read_records(b'{"data": [], "meta": {"total": 0}}') == []
    with pytest.raises(CslError):
        read_records(b'{"errors": [{"status": "400"}]}')
    csl = csl_of_record({"id": "10.5061/x", "attributes": {
        "titles": [{"title": "Sub", "titleType": "Subtitle"}, {"title": "Main"}],
        "publisher": {"name": "Pub"}, "publicationYear": "2019",
        "creators": [{"name": "Org only"}], "rightsList": [{"rightsUri": "https://x.org/l"}],
        "container": {"identifier": "1234-5679", "identifierType": "ISSN", "firstPage": "3"},
        "types": {"resourceTypeGeneral": "JournalArticle"}}})
    fields = _columns(csl)
    assert (fields["title"], fields["publisher"], fields["year"]) == ("Main", "Pub", 2019)
    assert fields["first_author"] == "Org only" and fields["license_url"] == "https://x.org/l"
    assert (fields["issn"], fields["page"], fields["csl_type"]) == (
        "1234-5679", "3", "article-journal")


def test_list_requests_stay_under_their_count_and_length() -> None:
    dois = [f"10.5555/batch.{i:05d}" for i in range(1000)]
    for batches, url in ((list_batches, list_url), (datacite_batches, datacite_url)):
        parts = batches(dois, "https://api.example.org", size=100, max_url=4000,
                        contact="me@lib.example-uni.edu")
        assert [d for part in parts for d in part] == dois
        assert all(len(part) <= 100 for part in parts)
        assert all(len(url("https://api.example.org", part, "me@lib.example-uni.edu")) <= 4000
                   for part in parts)
    url = list_url("https://api.crossref.org", ["10.1000/a&b", "10.1000/c#d"], "me@x.org")
    assert url == ("https://api.crossref.org/works?filter=doi:10.1000/a%26b,doi:10.1000/c%23d"
                   "&rows=2&mailto=me@x.org")
    query = datacite_url("https://api.datacite.org", ['10.5061/a"b'])
    assert "%22" in query and "%5C%22" in query and "page%5Bsize%5D=1" in query


# -- over HTTP, against the simulated agencies' batch APIs -----------------------------------
from collections import Counter  # noqa: E402

from airflow_doi.metadata import MetadataStats, fetch  # noqa: E402
from airflow_doi.resolver.simulator import ProxySimulator  # noqa: E402

FAST = {"rate": 200.0, "agency_rate": 200.0, "concurrency": 8, "max_attempts": 4,
        "backoff_base": 0.05, "list_rate": 50.0, "list_concurrency": 2, "list_size": 20,
        "contact": "catalogue-team@lib.example-uni.edu"}
#: Generated works: about 65% Crossref, 20% DataCite, the rest mEDRA and an agency without
#: content negotiation.
DOIS = [f"10.5555/source.{i}" for i in range(300)]


def _sources(sim: ProxySimulator, values: list[object], **options: object
             ) -> tuple[list, MetadataStats]:
    stats = MetadataStats()
    settings = {**FAST, "base_url": sim.url, "metadata_hosts": sim.metadata_hosts,
                "crossref_url": sim.crossref_url, "datacite_url": sim.datacite_url, **options}
    return fetch(values, stats=stats, **settings), stats  # type: ignore[arg-type]


def _agency(doi: str) -> str:
    return work_for(doi).agency


def test_each_key_from_its_agencys_batch_api_with_the_columns_of_negotiation() -> None:
    with ProxySimulator(auto_records=True) as sim:
        negotiated, _ = _sources(sim, DOIS, source="negotiation")
        sim.reset_counts()
        batched, stats = _sources(sim, DOIS, list_size=50)
        sent = sim.stats()
    by_source = Counter(r.metadata_source for r in batched)
    crossref = sum(_agency(d) == "crossref" for d in DOIS)
    datacite = sum(_agency(d) == "datacite" for d in DOIS)
    assert by_source == {"crossref": crossref, "datacite": datacite,
                         "negotiation": len(DOIS) - crossref - datacite}
    for slow, fast in zip(negotiated, batched, strict=True):
        assert (fast.metadata_status, fast.fields) == (slow.metadata_status, slow.fields), fast.doi
        assert fast.agency == {"crossref": "Crossref", "datacite": "DataCite",
                               "medra": "mEDRA", "nocn": "JaLC"}[_agency(fast.doi)]
    # Requests: Which RA? 50 a request, lists of 50: at most 0.05 a Crossref or DataCite key
    # at the list host, none of their DOIs negotiated.
    assert sent["list_requests"] == {"crossref": -(-crossref // 50),
                                     "datacite": -(-datacite // 50)}
    assert sum(sent["list_requests"].values()) / (crossref + datacite) <= 0.05
    assert sent["requests"] == -(-len(DOIS) // 50)  # Which RA?
    assert sent["cn_requests"] == len(DOIS) - crossref - datacite
    assert stats.sources.as_dict()["crossref"] == {"keys": crossref,
                                                   "requests": -(-crossref // 50)}
    assert "crossref" in stats.summary() and "Which RA? 6 requests" in stats.summary()


def test_known_agencies_skip_which_ra_and_unknown_dois_are_not_found() -> None:
    known = {d: None for d in DOIS[:40]}
    with ProxySimulator({**{d: {"values": []} for d in DOIS[:40]}}) as sim:
        agencies = {d.upper(): {"crossref": "Crossref", "datacite": "DataCite",
                                "medra": "mEDRA", "nocn": "JaLC"}[_agency(d)] for d in known}
        results, _ = _sources(sim, [*DOIS[:40], "10.5555/nobody.registered"],
                              agencies=agencies)
        sent = sim.stats()
    # The one key whose agency was not given was asked of Which RA?, which does not know it.
    assert sent["requests"] == 1
    assert results[-1].metadata_status == "not_found"
    assert results[-1].metadata_source == "which_ra" and results[-1].error.startswith("doi.org")
    assert sent["cn_requests"] == sum(_agency(d) in ("medra", "nocn") for d in DOIS[:40])
    assert all(r.metadata_status in ("ok", "no_metadata") for r in results[:40])


@pytest.mark.parametrize("fault", ["list_missing_every", "list_bad_record_every",
                                   "list_truncated_every"])
def test_a_faulty_batch_ends_in_per_key_statuses(fault: str) -> None:
    every = {"list_missing_every": 3, "list_bad_record_every": 4, "list_truncated_every": 2}
    with ProxySimulator(auto_records=True, faults={fault: every[fault]}) as sim:
        results, stats = _sources(sim, DOIS[:120])
        sent = sim.stats()
    expected = [sim.expected_metadata(d) for d in DOIS[:120]]
    assert [r.fields if r.metadata_status == "ok" else None for r in results] == expected
    listed = [r for r in results if r.agency in ("Crossref", "DataCite")]
    negotiated = sum(r.metadata_source == "negotiation" for r in listed)
    if fault == "list_truncated_every":  # asked again, answered whole: none negotiated
        assert negotiated == 0 and stats.retries >= 1
        assert sum(sent["list_requests"].values()) > sum(
            -(-sum(r.agency == a for r in listed) // 20) for a in ("Crossref", "DataCite"))
    else:  # a record left out or unreadable: that key by content negotiation
        assert negotiated >= 5
        assert sent["cn_requests"] == negotiated + sum(r.agency not in ("Crossref", "DataCite")
                                                       for r in results)


def test_a_429_on_list_queries_only_is_waited_for_and_an_announced_limit_kept() -> None:
    # The batch APIs answer 2 list queries a second; the client is told 20. DataCite says
    # nothing and answers 429 with Retry-After; Crossref announces its limit on the first
    # answer, and no query after it goes over.
    with ProxySimulator(auto_records=True, list_rate_limit=2) as sim:
        results, stats = _sources(sim, DOIS[:200], list_rate=20.0, list_size=10)
        sent = sim.stats()
    assert all(r.metadata_status in ("ok", "no_metadata") for r in results)
    assert sum(r.metadata_source == "negotiation" and r.agency in ("Crossref", "DataCite")
               for r in results) == 0
    assert sent["list_throttled"] >= 1 and stats.throttled >= 1  # DataCite's 429s
    assert sent["list_over_announced"] == 0  # Crossref's announced limit, never passed
    assert sent["throttled"] == 0  # the proxy's own limit untouched


def test_a_batch_api_that_never_answers_leaves_its_keys_to_negotiation() -> None:
    with ProxySimulator(auto_records=True) as sim:
        results, stats = _sources(
            sim, DOIS[:60], crossref_url="http://127.0.0.1:9",
            metadata_hosts=(*sim.metadata_hosts, "http://127.0.0.1:9"),
            max_attempts=2, breaker_give_up=5.0)
    assert [r.fields for r in results if r.metadata_status == "ok"] == [
        sim.expected_metadata(d) for d, r in zip(DOIS[:60], results, strict=True)
        if r.metadata_status == "ok"]
    crossref = [r for r in results if r.agency == "Crossref"]
    assert crossref and all(r.metadata_status == "ok" and r.metadata_source == "negotiation"
                            for r in crossref)
    assert stats.sources.as_dict()["crossref"]["keys"] == 0


def test_a_batch_api_given_up_on_is_not_asked_by_the_later_batches_of_the_run() -> None:
    """The operators call fetch once a batch with one MetadataStats: a host the breaker gave up
    on in the first is not sent a query by the next ones (it was, each batch ~9 s lost, when
    a deployment could not reach api.crossref.org)."""
    stats = MetadataStats()
    with ProxySimulator(auto_records=True) as sim:
        settings = {**FAST, "base_url": sim.url, "crossref_url": "http://127.0.0.1:9",
                    "metadata_hosts": (*sim.metadata_hosts, "http://127.0.0.1:9"),
                    "datacite_url": sim.datacite_url, "max_attempts": 2,
                    "breaker_give_up": 5.0}
        first = fetch(DOIS[:40], stats=stats, **settings)  # type: ignore[arg-type]
        sent_first = stats.sources.as_dict()["crossref"]["requests"]
        later = [fetch(DOIS[i:i + 40], stats=stats, **settings)  # type: ignore[arg-type]
                 for i in (40, 80)]
    assert sent_first >= 1 and "crossref" in stats.source_health.given_up
    assert "127.0.0.1:9" in stats.source_health.given_up["crossref"]
    assert stats.source_health.answered == {"datacite"}
    assert stats.sources.as_dict()["crossref"]["requests"] == sent_first
    crossref = [r for r in [*first, *later[0], *later[1]] if r.agency == "Crossref"]
    assert len(crossref) > 40 and all(r.metadata_source == "negotiation" and
                                      r.metadata_status == "ok" for r in crossref)
    assert stats.sources.as_dict()["datacite"]["keys"] > 0  # the other API still asked


def test_the_pace_of_list_queries_goes_on_across_the_calls_of_a_run() -> None:
    """An operator asks one batch of keys a call, each with a new client: the first list query
    of a call left at once, right after the last one of the call before, which put a query
    over Crossref's announced limit at every boundary (5 in the 100,000-key bench). With one
    MetadataStats the pace, at the announced limit, goes on from call to call."""
    stats = MetadataStats()
    with ProxySimulator(auto_records=True, list_rate_limit=4) as sim:
        settings = {**FAST, "base_url": sim.url, "metadata_hosts": sim.metadata_hosts,
                    "crossref_url": sim.crossref_url, "datacite_url": sim.datacite_url,
                    "list_rate": 50.0, "list_size": 5}
        for start in range(0, 120, 20):
            fetch(DOIS[start:start + 20], stats=stats, **settings)  # type: ignore[arg-type]
        sent = sim.stats()
    assert sent["list_requests"].get("crossref", 0) >= 12  # several queries a call
    assert sent["list_over_announced"] == 0
    assert sent["list_throttled"] == 0
    assert ("http://" + sim.crossref_url.split("://", 1)[1].rstrip("/"), "list") in (
        stats.source_health.paces)


def test_a_cache_keeps_each_source_and_a_second_run_asks_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "metadata.sqlite"
    with ProxySimulator(auto_records=True) as sim:
        first, _ = _sources(sim, DOIS[:100], cache=cache)
        sim.reset_counts()
        again, stats = _sources(sim, DOIS[:100], cache=cache)
        sent = sim.stats()
    assert sent["requests"] == 0 and sent["list_requests"] == {} and sent["cn_requests"] == 0
    assert [(r.metadata_source, r.agency, r.fields) for r in again] == [
        (r.metadata_source, r.agency, r.fields) for r in first]
    assert stats.cache_hits == 100
