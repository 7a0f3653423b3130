"""Dot segments (issue #14): a DOI whose suffix holds a ``.`` or ``..`` path segment must reach
the proxy as itself, even through servers and proxies that remove dot segments from paths.

Every engine's ``doi_url`` is checked against the same forms through the conformance vectors
(``tests/vectors/project_vectors.jsonl``); here: the Python rule, what URL parsers make of its
output, and the resolver over real loopback HTTP behind a path-normalising server.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from urllib.parse import unquote, urljoin

import pytest
import yarl

from airflow_doi import normalize, to_url
from airflow_doi.presentation import encode_path, encode_which_ra
from airflow_doi.resolver import ResolverConfig, resolve
from airflow_doi.resolver.simulator import make_records, record_url

BASE = "https://doi.org/"

#: (input, to_url): trailing, bare, leading and decoded dot segments, one rule for all.
FORMS = [
    ("10.1/ab/..", "https://doi.org/10.1/ab%2F.."),
    ("10.1/..", "https://doi.org/10.1%2F.."),
    ("10.1/.", "https://doi.org/10.1%2F."),
    ("10.1/xy/.", "https://doi.org/10.1/xy%2F."),
    ("https://doi.org/10.1/ab/%2e%2e", "https://doi.org/10.1/ab%2F.."),
    ("10.1/../x", "https://doi.org/10.1/..%2Fx"),
    ("10.1/ab/../.", "https://doi.org/10.1/ab/..%2F."),
    ("10.1/ab/...", "https://doi.org/10.1/ab/..."),  # "..." is no dot segment
]


def _normalised_by_parsers(url: str) -> set[str]:
    """``url`` as an RFC 3986 resolver (urllib) and a WHATWG-style parser (yarl) rewrite it."""
    return {urljoin(BASE, url[len(BASE):]), str(yarl.URL(url))}


@pytest.mark.parametrize(("value", "url"), FORMS)
def test_to_url_encodes_a_slash_of_every_dot_segment(value: str, url: str) -> None:
    assert to_url(value) == url
    assert _normalised_by_parsers(url) == {url}  # no parser can drop a segment of it
    assert normalize(url) == normalize(value)


def test_which_ra_lists_follow_the_same_rule() -> None:
    assert encode_which_ra("10.1/a,b/..") == "10.1/a%2Cb%2F.."
    assert encode_path("10.1/a,b/..") == "10.1/a,b%2F.."


class _NormalisingProxy(http.server.BaseHTTPRequestHandler):
    """Answers ``/api/handles/`` like the proxy, after removing dot segments from the path as
    an RFC 3986 front end (or a careless reverse proxy) does: the handle it looks up is the
    one the normalised path names."""

    records = make_records(["10.1/ab/..", "10.1/..", "10.1/xy/.", "10.1/"])

    def do_GET(self) -> None:
        path = urljoin("http://proxy/", self.path.partition("?")[0])[len("http://proxy"):]
        handle = unquote(path[len("/api/handles/"):])
        record = self.records.get(handle)
        document = {"responseCode": 1 if record else 100, "handle": handle}
        if record:
            document["values"] = record["values"]
        body = json.dumps(document).encode()
        self.send_response(200 if record else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def normalising_proxy() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NormalisingProxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("doi", ["10.1/ab/..", "10.1/..", "10.1/xy/."])
def test_resolver_reaches_the_dot_segment_doi_behind_a_normalising_proxy(
    normalising_proxy: str, doi: str
) -> None:
    config = ResolverConfig(rate=100, timeout=5, max_attempts=1)
    [result] = resolve([doi], config=config, base_url=normalising_proxy)
    # Before the fix the proxy looked up "10.1/" (or "10.1/xy/") and the echo check failed.
    assert result.status == "resolved", result
    assert result.url == record_url(doi)
