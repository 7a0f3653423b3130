"""#33: a key gets the same ``doi_metadata`` columns whichever source answered it.

The simulated agencies serve each work three ways (content negotiation's CSL-JSON, a record of
Crossref's list queries, a JSON:API record of DataCite's batch lookup) after the public schemas
and documentation; each is read into typed columns that must equal the work's, for the fixed
messy records (titles with markup and entities, an empty container list, ``[[null]]`` dates, an
organisation given only by ``name``, an ISSN without its hyphen, a notice linking to itself)
and for two thousand generated works.
"""

from __future__ import annotations

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
from airflow_doi.resolver.agencies import (
    SHOWCASE_WORKS,
    crossref_item_for,
    csl_for,
    datacite_record_for,
    expected_metadata,
    work_for,
)

WORKS = [*SHOWCASE_WORKS, *(work_for(f"10.5555/generated.{i}") for i in range(2000))]


def _columns(csl: dict) -> dict:
    fields, ignored = typed_fields(csl)
    assert ignored == [], ignored
    return fields


@pytest.mark.parametrize("source", ["negotiation", "crossref", "datacite"])
def test_every_source_gives_the_works_own_columns(source: str) -> None:
    read = {"negotiation": lambda w: csl_for(w),
            "crossref": lambda w: csl_of_item(crossref_item_for(w)),
            "datacite": lambda w: csl_of_record(datacite_record_for(w))}[source]
    agency = {"negotiation": None, "crossref": "crossref", "datacite": "datacite"}[source]
    checked = 0
    for work in WORKS:
        expected = expected_metadata(work)
        if expected is None or (agency is not None and work.agency != agency):
            continue
        assert _columns(read(work)) == expected, work.doi
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
                        contact="me@example.org")
        assert [d for part in parts for d in part] == dois
        assert all(len(part) <= 100 for part in parts)
        assert all(len(url("https://api.example.org", part, "me@example.org")) <= 4000
                   for part in parts)
    url = list_url("https://api.crossref.org", ["10.1000/a&b", "10.1000/c#d"], "me@x.org")
    assert url == ("https://api.crossref.org/works?filter=doi:10.1000/a%26b,doi:10.1000/c%23d"
                   "&rows=2&mailto=me@x.org")
    query = datacite_url("https://api.datacite.org", ['10.5061/a"b'])
    assert "%22" in query and "%5C%22" in query and "page%5Bsize%5D=1" in query
