"""Enrichment without a network: CSL-JSON to typed columns, the allowlist, one hop's answer."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from airflow_doi.metadata import FIELDS, METADATA_COLUMNS, MetadataConfig, typed_fields
from airflow_doi.metadata.config import DEFAULT_METADATA_HOSTS, origin_of
from airflow_doi.metadata.csl import CslError, clean_text, kept_json, read_document

NOW = datetime(2026, 11, 26, tzinfo=timezone.utc)

ARTICLE = {
    "DOI": "10.5555/abc.1",
    "type": "article-journal",
    "title": ["A study of\n things  "],
    "container-title": "Journal of Examples",
    "publisher": "Example Press",
    "ISSN": ["1234-5678", "8765-4321", "1234-5678"],
    "issued": {"date-parts": [[2019, 5]]},
    "volume": 12,
    "issue": "3",
    "page": "101-119",
    "author": [{"family": "Okafor", "given": "Ada", "sequence": "first"}, {"literal": "Lab X"}],
    "language": "en",
    "license": [
        {"URL": "https://example.org/tdm", "content-version": "tdm"},
        {"URL": "https://creativecommons.org/licenses/by/4.0/", "content-version": "vor"},
    ],
    "updated-by": [{"type": "retraction", "DOI": "10.5555/notice.9"},
                   {"type": "correction", "DOI": "10.5555/fix.2"}],
    "reference": [{"key": "r1"}] * 50,
}


def test_a_crossref_article_becomes_typed_columns() -> None:
    fields, ignored = typed_fields(ARTICLE)
    assert ignored == []
    assert set(fields) == set(FIELDS)
    assert fields == {
        "title": "A study of things", "csl_type": "article-journal",
        "registry_type": "article-journal", "issued": "2019-05", "year": 2019,
        "container_title": "Journal of Examples", "publisher": "Example Press",
        "issn": "1234-5678, 8765-4321", "isbn": None, "volume": "12", "issue": "3",
        "page": "101-119", "author_count": 2, "first_author": "Okafor, Ada", "language": "en",
        "license_url": "https://creativecommons.org/licenses/by/4.0/",
        "updated_by": "retraction:10.5555/notice.9; correction:10.5555/fix.2",
        "update_to": None,
    }


@pytest.mark.parametrize(("issued", "text", "year"), [
    ({"date-parts": [[2019]]}, "2019", 2019),
    ({"date-parts": [["2019", "7", "4"]]}, "2019-07-04", 2019),
    ({"date-parts": [[2019, 13, 1]]}, "2019", 2019),  # no month 13: the year only
    ({"date-parts": [[None]]}, None, None),
    ({"literal": "Spring 2021"}, "Spring 2021", 2021),
    ({"raw": "n.d."}, "n.d.", None),
    ("2019", None, None),
])
def test_partial_dates_are_kept_as_given(issued: object, text: str | None,
                                         year: int | None) -> None:
    fields, _ = typed_fields({"issued": issued})
    assert (fields["issued"], fields["year"]) == (text, year)


def test_wrong_types_leave_their_columns_empty_and_are_named() -> None:
    fields, ignored = typed_fields({
        "title": 42, "author": "Smith", "issued": ["2019"], "ISSN": {"print": "1234-5678"},
        "publisher": "Fine Press", "volume": True,
    })
    assert ignored == ["ISSN", "author", "issued", "title", "volume"]
    assert fields["publisher"] == "Fine Press"
    assert fields["title"] is None and fields["author_count"] is None
    assert fields["issn"] is None and fields["issued"] is None and fields["volume"] is None


def test_server_text_is_cleaned_and_bounded() -> None:
    assert clean_text("a\u202eb\x00c\r\nd\u200b") == "abc d"
    assert len(clean_text("x" * 5000, 1000) or "") == 1000
    fields, _ = typed_fields({"title": "=HYPERLINK(\"x\")\x1b[31m",
                              "license": "javascript:alert(1)"})
    assert fields["title"] == '=HYPERLINK("x")[31m'
    assert fields["license_url"] is None  # only an absolute http(s) URL is handed on


def test_first_author_forms() -> None:
    assert typed_fields({"author": [{"family": "Ng"}]})[0]["first_author"] == "Ng"
    assert typed_fields({"author": [{"literal": "The Consortium"}]})[0]["first_author"] == (
        "The Consortium")
    assert typed_fields({"author": []})[0] == {**typed_fields({})[0], "author_count": 0}


def test_read_document_reasons() -> None:
    assert read_document(b'{"title": "x"}') == {"title": "x"}
    cases = {
        b"<!DOCTYPE html><html>": "HTML",
        b'{"title": "x': "cut short",
        "{\"title\": \"caf\u00e9\"}".encode("cp1252"): "not UTF-8",
        b"[1, 2]": "list",
        b"[" * 100_000 + b"]" * 100_000: "nested too deep",
    }
    for body, reason in cases.items():
        with pytest.raises(CslError, match=reason):
            read_document(body)
    assert read_document(b'{"volume": NaN}') == {"volume": None}


def test_kept_json_drops_references_and_what_jsonb_refuses() -> None:
    text = kept_json({**ARTICLE, "note": "a\x00b\ud800c"}, 65536)
    assert text is not None
    kept = json.loads(text)
    assert "reference" not in kept and kept["note"] == "abc"
    assert kept_json({"title": "x" * 70_000}, 65536) is None


def test_config_allowlist() -> None:
    config = MetadataConfig(metadata_hosts=("api.crossref.org", "http://127.0.0.1:8081"))
    assert config.allowed_origins == {
        "https://api.crossref.org", "http://127.0.0.1:8081", "https://doi.org"}
    assert MetadataConfig().metadata_hosts == DEFAULT_METADATA_HOSTS
    assert MetadataConfig(metadata_hosts="a.example, b.example").metadata_hosts == (
        "a.example", "b.example")
    for bad in ("ftp://x.example", "https://x.example/path", "user:pw@x.example"):
        with pytest.raises(ValueError, match="metadata_hosts"):
            MetadataConfig(metadata_hosts=(bad,))
    with pytest.raises(ValueError, match="agency_rate"):
        MetadataConfig(agency_rate=0)
    assert "secret" not in repr(MetadataConfig(base_url="https://u:secret@proxy.example"))
    assert origin_of("HTTPS://API.Crossref.org:443/v1") == "https://api.crossref.org"


def test_agency_hosts_get_their_own_limits() -> None:
    config = MetadataConfig(rate=40, agency_rate=20, redis_url="redis://127.0.0.1:6379/0")
    agency = config.host_config("https://api.crossref.org")
    # One shared pace per host and contact address (none here: the public one).
    assert (agency.rate, agency.limit_namespace) == (20, "airflow-doi:api.crossref.org:public")
    assert config.host_config("https://doi.org") is config
    assert config.limit_namespace == "airflow-doi:doi.org"


def test_columns_of_a_result_row() -> None:
    assert METADATA_COLUMNS[:4] == ("input", "doi", "key", "metadata_status")
    assert METADATA_COLUMNS[-1] == "csl_json"


def test_one_hop_answers() -> None:
    from airflow_doi.metadata.client import interpret_hop
    from airflow_doi.resolver.client import ProxyError, RetryableError

    assert interpret_hop(302, b"", {"Location": "https://x/y"}, NOW, "doi.org").kind == "redirect"
    assert interpret_hop(404, b"", {}, NOW, "doi.org").kind == "not_found"
    for status in (204, 406, 415):
        assert interpret_hop(status, b"", {}, NOW, "h").kind == "no_metadata"
    assert interpret_hop(200, b"  ", {}, NOW, "h").kind == "no_metadata"
    with pytest.raises(RetryableError) as throttled:
        interpret_hop(429, b"", {"Retry-After": "7"}, NOW, "h")
    assert throttled.value.retry_after == 7
    with pytest.raises(ProxyError, match="not complete JSON"):
        interpret_hop(200, b'{"a": ', {}, NOW, "h")  # a complete answer: asking again is moot
    with pytest.raises(ProxyError, match="HTML"):
        interpret_hop(200, b"<html>", {}, NOW, "h")
    with pytest.raises(ProxyError, match="Location"):
        interpret_hop(301, b"", {}, NOW, "h")


def test_records_no_rule_foresaw_never_take_the_batch_down() -> None:
    """Review findings: a superscript digit or a 5,000-digit "year", and numbers JSON allows
    but PostgreSQL's json and MariaDB's JSON refuse (1e400 is Infinity)."""
    assert typed_fields({"issued": {"date-parts": [["\u00b2"]]}})[0]["issued"] is None
    assert typed_fields({"issued": {"date-parts": [["9" * 5000]]}})[0]["year"] is None
    document = read_document(b'{"score": 1e400, "low": -1e400, "n": NaN, "title": "x"}')
    assert document == {"score": None, "low": None, "n": None, "title": "x"}
    assert kept_json({"x": float("inf")}, 65536) is None  # never "Infinity" in csl_json


def test_an_empty_allowlist_is_refused() -> None:
    with pytest.raises(ValueError, match="metadata_hosts is empty"):
        MetadataConfig(metadata_hosts=())
    with pytest.raises(ValueError, match="metadata_hosts is empty"):
        MetadataConfig(metadata_hosts=" , ")
    assert repr(MetadataConfig()).startswith("MetadataConfig(")
