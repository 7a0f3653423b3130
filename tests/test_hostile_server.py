"""Issue #42 item 1: one bad server answer costs its own key, never the run.

A ``302`` whose ``Location`` holds bytes that are not UTF-8, a handle value with a lone
surrogate (``"https://x/\\udcff"``), BEL and ESC in a header: each used to stop ``resolve``
with exit 2 (blaming the user's file), or the cache, or to land raw in the ``error`` column.
The raw TCP server of :mod:`tests.test_hostile` serves them on every path: the handles API,
Which RA?, content negotiation and the agencies' list queries. What reaches a row, the
cache, a table or a log line is safe text: controls and surrogates escaped, lengths bounded.

The property test at the end sends fuzzed status lines, headers and bodies: every key ends
with one of the statuses, the run never raises.
"""

from __future__ import annotations

import io
import json
import sqlite3
import tempfile
import unicodedata
from collections.abc import Callable, Iterable
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_doi.cli import main
from airflow_doi.metadata import METADATA_STATUSES, MetadataResult, MetadataStats, fetch
from airflow_doi.resolver import STATUSES, ResolverConfig, ResolverStats, resolve, which_ra
from airflow_doi.resolver.text import server_text
from airflow_doi.resolver.urls import MAX_URL_CHARS, REFUSED_URL
from tests.conftest import read_output_csv
from tests.test_hostile import Hostile, _Handler, hostile

#: Fast settings for loopback, as in test_hostile (for the resolver and the metadata fetcher).
FAST_OPTIONS: dict[str, Any] = {
    "rate": 500, "concurrency": 4, "timeout": 1.0, "backoff_base": 0.01, "backoff_max": 0.05,
    "breaker_cooldown": 0.05, "breaker_give_up": 2.0, "max_attempts": 2}
FAST = ResolverConfig(**FAST_OPTIONS)
#: The metadata fetcher's own: the agencies' pace and list queries as fast.
FAST_METADATA: dict[str, Any] = {**FAST_OPTIONS, "agency_rate": 500.0, "list_rate": 500.0}
#: The issue's Location: bytes that are not UTF-8 (a lone surrogate's UTF-8 form among them).
LOCATION_BYTES = b"https://evil.example/\xff\xfe\xed\xa0\x80"
#: BEL and ESC (a terminal's colour and clear-screen sequences) in a Location.
LOCATION_CONTROLS = b"https://evil.example/\x07\x1b[31mred\x1b[2J"
#: A handle value with a lone surrogate, as JSON writes it (an escape: the body is ASCII).
SURROGATE_URL = "https://x/\udcff"
#: Characters that must never reach a cell, a table or a log line as they are.
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

# --- The hostile servers -----------------------------------------------------------------


def reply(status: bytes, body: bytes = b"", headers: Iterable[tuple[bytes, bytes]] = ()) -> bytes:
    """One HTTP/1.1 answer, byte for byte as given (``status``: the status line's tail)."""
    lines = [b"HTTP/1.1 " + status, b"Content-Length: " + str(len(body)).encode(),
             b"Connection: close", *(name + b": " + value for name, value in headers)]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def as_json(document: object) -> bytes:
    """JSON as a server writes it: ASCII, a lone surrogate as its ``\\udcff`` escape."""
    return json.dumps(document).encode("ascii")


def handle_record(handle: str, url: str, *more: tuple[str, str]) -> bytes:
    values = [{"index": 1, "type": "URL", "data": {"format": "string", "value": url},
               "ttl": 600}]
    values += [{"index": 2 + i, "type": kind, "data": {"format": "string", "value": text},
                "ttl": 600} for i, (kind, text) in enumerate(more)]
    return as_json({"responseCode": 1, "handle": handle, "values": values})


def redirect(location: bytes) -> bytes:
    return reply(b"302 Found", headers=[(b"Location", location)])


#: The handles API's answers, by the DOI's suffix (any other DOI: a plain record).
HANDLES: dict[str, Callable[[str], bytes]] = {
    "loc-bytes": lambda doi: redirect(LOCATION_BYTES),
    "loc-bel": lambda doi: redirect(LOCATION_CONTROLS),
    "url-sur": lambda doi: reply(b"200 OK", handle_record(doi, SURROGATE_URL)),
    "value-sur": lambda doi: reply(b"200 OK", handle_record(
        doi, "https://ok.example/v", ("EMAIL", "\udcff\x1b[31m@x"), ("HS_X", "\x00\u202e"))),
    "long": lambda doi: reply(b"200 OK", handle_record(doi, "https://ok.example/" + "a" * 5000)),
    "msg-sur": lambda doi: reply(b"500 X", as_json(
        {"responseCode": 2, "message": "down \udcff\x07\x1b[2J"})),
}
#: Which RA?'s word by the DOI's suffix (any other DOI: Crossref).
AGENCIES = {
    "ra-sur": {"RA": "Cross\udcffref\x1b[31m"},
    "ra-bel": {"RA": "\x07DataCite\x00"},
    "status-sur": {"status": "\udcff\x1b[2J"},
}


def _suffix(doi: str) -> str:
    return doi.rpartition("/")[2].lower()


def proxy_behaviour(agency_url: str | None = None) -> Callable[[_Handler, str], None]:
    """The proxy: handles, Which RA? and content negotiation (a redirect to ``agency_url``,
    or the hostile one the DOI names)."""

    def behave(handler: _Handler, path: str) -> None:
        if path.startswith("/api/handles/"):
            doi = unquote(path.removeprefix("/api/handles/").partition("?")[0])
            make = HANDLES.get(_suffix(doi))
            body = make(doi) if make else reply(
                b"200 OK", handle_record(doi, f"https://ok.example/{_suffix(doi)}"))
            handler.send(body)
        elif path.startswith("/doiRA/"):
            dois = [unquote(d) for d in path.removeprefix("/doiRA/").split(",")]
            entries = [{"DOI": doi, **AGENCIES.get(_suffix(doi), {"RA": _agency(doi)})}
                       for doi in dois]
            entries.append({"DOI": "10.1000/\udcff", "RA": "\x1b]0;title\x07"})
            handler.send(reply(b"200 OK", as_json(entries)))
        else:  # content negotiation: GET /{doi}
            doi = unquote(path.lstrip("/"))
            suffix = _suffix(doi)
            if suffix == "loc-bytes":
                handler.send(redirect(LOCATION_BYTES))
            elif suffix == "loc-bel":
                handler.send(redirect(LOCATION_CONTROLS))
            else:
                handler.send(redirect(f"{agency_url}/{doi}".encode()))

    return behave


def _agency(doi: str) -> str:
    """Who registered a DOI of these tests: ``cr-`` Crossref, ``dc-`` DataCite, others mEDRA
    (content negotiation)."""
    return {"cr": "Crossref", "dc": "DataCite"}.get(_suffix(doi)[:2], "mEDRA")


#: Server text with every kind of trouble in it.
HOSTILE_TEXT = "T\udcff\x07\x1b[31m\u202e\x00"
#: Agency headers with BEL, ESC and bytes that are not UTF-8 (one of them is logged).
HOSTILE_HEADERS = [(b"x-api-pool", b"polite\x1b[31m\xff\xfe"), (b"x-rate-limit-limit", b"\xff"),
                   (b"x-rate-limit-interval", b"1s\x07")]


def csl(doi: str) -> dict[str, object]:
    return {"DOI": doi, "type": "journal-article", "title": f"{doi} {HOSTILE_TEXT}",
            "author": [{"family": HOSTILE_TEXT, "given": "\udcff"}], "publisher": HOSTILE_TEXT,
            "container-title": [HOSTILE_TEXT], "issued": {"date-parts": [[2020]]}}


def agency_behaviour(handler: _Handler, path: str) -> None:
    """The agencies: CSL-JSON by content negotiation, Crossref's and DataCite's list queries,
    every text hostile, hostile headers on every answer."""
    target = urlsplit(path)
    if "from-update-date" in target.query or "updated%3A" in target.query:
        body = update_page(target.path, parse_qs(target.query))
    elif target.path == "/works":
        filters = parse_qs(target.query)["filter"][0].split(",")
        dois = [unquote(f.removeprefix("doi:")) for f in filters]
        items = [{**csl(doi), "type": "journal-article", "title": [HOSTILE_TEXT]} for doi in dois]
        items.append({"DOI": "10.1000/\udcff", "title": [HOSTILE_TEXT]})
        body = as_json({"status": "ok", "message": {"items": items}})
    elif target.path == "/dois":
        query = parse_qs(target.query)["query"][0]
        dois = [part.strip('"') for part in query.removeprefix("doi:(").rstrip(")").split(" OR ")]
        data = [{"id": doi.lower(), "attributes": {
            "doi": doi, "titles": [{"title": HOSTILE_TEXT}], "publisher": HOSTILE_TEXT,
            "creators": [{"name": HOSTILE_TEXT}], "types": {"citeproc": "dataset"},
            "publicationYear": 2021}} for doi in dois]
        body = as_json({"data": data})
    else:
        body = as_json(csl(unquote(target.path.lstrip("/"))))
    handler.send(reply(b"200 OK", body, HOSTILE_HEADERS))


#: The update streams' DOIs: each stream's first page holds its record, and a cursor for the
#: next page that no request can carry.
UPDATED = {"/works": "10.1000/cr-up", "/dois": "10.1000/dc-up"}


def update_page(where: str, query: dict[str, list[str]]) -> bytes:
    doi = UPDATED[where]
    if where == "/works":  # Crossref: the cursor as sent, a lone surrogate and ESC in it
        return as_json({"status": "ok", "message": {
            "items": [{**csl(doi), "title": [HOSTILE_TEXT]}], "total-results": 1,
            "next-cursor": "\udcff\x1b[2J"}})
    if query.get("page[cursor]") != ["1"]:  # DataCite: a page after the first is empty
        return as_json({"data": []})
    return as_json({"data": [{"id": doi, "attributes": {
        "doi": doi, "titles": [{"title": HOSTILE_TEXT}], "types": {"citeproc": "dataset"}}}],
        "links": {"next": "https://api.example/dois?page%5Bcursor%5D=%1B%07next"}})


# --- What every row must be ------------------------------------------------------------


def assert_safe(text: object, where: str) -> None:
    """``text`` can be written anywhere: UTF-8, no control, format or surrogate character."""
    if text is None or not isinstance(text, str):
        return
    text.encode("utf-8")  # raises for a surrogate
    bad = [c for c in text if unicodedata.category(c) in UNSAFE_CATEGORIES]
    assert not bad, (where, text)


def assert_rows_safe(rows: Iterable[dict[str, Any]]) -> None:
    for row in rows:
        for name, value in row.items():
            assert_safe(value, name)


def timeless(result: Any) -> dict[str, object]:
    """A result's row without the times of its request (a key asked again differs there)."""
    row: dict[str, object] = result.as_row()
    for name in ("resolved_at", "expires_at", "fetched_at"):
        row.pop(name, None)
    return row


def by_suffix(results: list[Any]) -> dict[str, Any]:
    return {_suffix(r.doi or r.input): r for r in results}


DOIS = [f"10.1000/{name}" for name in ("ok", *HANDLES)]


# --- The handles API: the resolver's Python API, with and without a cache ----------------


@pytest.mark.parametrize("cached", [False, True], ids=["no-cache", "cache"])
def test_the_resolver_api_ends_each_bad_answer_as_its_own_key_with_safe_text(
        tmp_path: Path, cached: bool) -> None:
    cache = tmp_path / "cache.sqlite" if cached else None
    with hostile(proxy_behaviour()) as server:
        stats = ResolverStats()
        results = resolve(DOIS, config=FAST, base_url=server.url, cache=cache, stats=stats)
        again = resolve(DOIS, config=FAST, base_url=server.url, cache=cache)
    assert len(results) == len(DOIS)
    assert_rows_safe(r.as_row() for r in results)
    got = by_suffix(results)
    assert (got["ok"].status, got["ok"].url) == ("resolved", "https://ok.example/ok")
    # The 302s: the key alone ends in error, the Location escaped (and bounded) in its reason.
    for name in ("loc-bytes", "loc-bel"):
        assert got[name].status == "error" and got[name].http_status == 302, got[name]
        assert "not followed" in got[name].error
    assert "https://evil.example/\\udcff\\udcfe" in got["loc-bytes"].error
    assert "\\x07\\x1b[31mred\\x1b[2J" in got["loc-bel"].error
    # A lone surrogate in the URL value: refused, shown escaped in url_raw.
    surrogate = got["url-sur"]
    assert (surrogate.status, surrogate.url, surrogate.error) == ("no_values", None, REFUSED_URL)
    assert surrogate.url_raw == "https://x/\\udcff"
    # Another value with a surrogate: the URL still resolves, and the answer is cached.
    assert (got["value-sur"].status, got["value-sur"].url) == ("resolved", "https://ok.example/v")
    # A URL longer than we keep: refused, its reason says so, url_raw bounded and marked.
    long = got["long"]
    assert (long.status, long.url) == ("no_values", None)
    assert f"longer than the {MAX_URL_CHARS:,} characters kept" in long.error
    assert long.url_raw == ("https://ok.example/" + "a" * 5000)[:MAX_URL_CHARS] + "..."
    assert got["msg-sur"].status == "error" and "down \\udcff\\x07\\x1b[2J" in got["msg-sur"].error
    assert stats.by_status == {"resolved": 2, "no_values": 2, "error": 3}
    # The second run: from the cache (every answer that is not an error), the same rows.
    if cache is not None:
        assert [r.cached for r in again] == [r.status != "error" for r in results]
        with sqlite3.connect(cache) as conn:  # the cache holds safe text only
            for row in conn.execute("select * from answers"):
                assert_rows_safe([{str(i): cell for i, cell in enumerate(row)}])
        # ... and gives the values back as they came: the surrogate's escape reads back as it.
        kept = by_suffix(again)["value-sur"].values
        assert kept == got["value-sur"].values
        emails = [v["data"]["value"] for v in kept if v["type"] == "EMAIL"]
        assert emails == ["\udcff\x1b[31m@x"]
    assert [timeless(r) for r in again] == [timeless(r) for r in results]


def test_server_text_is_the_one_escape_and_keeps_safe_text_as_it_is() -> None:
    assert server_text("https://ok.example/a b") == "https://ok.example/a b"
    assert server_text("a\udcff\x07\x1b\u202e\n") == "a\\udcff\\x07\\x1b\\u202e\\n"
    assert server_text("x" * 300) == "x" * 200 + "..."
    assert server_text(server_text("\udcff\x07" * 300)) == server_text("\udcff\x07" * 300)


# --- The command line: every row written, with and without --cache ------------------------


@pytest.mark.parametrize("cached", [False, True], ids=["no-cache", "cache"])
def test_the_cli_writes_every_row_and_exits_normally(tmp_path: Path, cached: bool) -> None:
    source = tmp_path / "u.csv"
    source.write_text("doi\n" + "".join(f"{doi}\n" for doi in DOIS))
    out = tmp_path / "out.csv"
    cache = ["--cache", str(tmp_path / "cache.sqlite")] if cached else []
    with hostile(proxy_behaviour()) as server:
        for _ in range(2 if cached else 1):  # with a cache: the second run reads it
            stderr = io.StringIO()
            with redirect_stderr(stderr):
                code = main(["resolve", str(source), "--column", "doi", "-o", str(out),
                             "--base-url", server.url, "--rate", "500", "--timeout", "1",
                             "--backoff-base", "0.01", "--max-attempts", "2",
                             "--max-error-share", "1", "--no-progress", *cache])
            said = stderr.getvalue()
            assert code == 0, said
            assert "cannot be read as" not in said  # the input was never at fault
            assert_safe(said.replace("\n", " "), "stderr")
            rows = read_output_csv(out)
            assert [row["doi"] for row in rows] == DOIS
            assert_rows_safe(rows)
            got = {_suffix(row["doi"]): row for row in rows}
            assert got["ok"]["status"] == "resolved"
            assert got["loc-bytes"]["status"] == "error"
            assert "https://evil.example/\\udcff" in got["loc-bytes"]["error"]
            assert "\\x07\\x1b[31m" in got["loc-bel"]["error"]
            assert got["url-sur"]["url_raw"] == "https://x/\\udcff"
            assert got["value-sur"]["status"] == "resolved"


# --- doi_resolution: what DoiResolveOperator stores, in PostgreSQL --------------------------


class _Log:
    def info(self, message: str, *args: object) -> None:
        assert_safe(message % args, "log line")

    warning = info


def test_doi_resolution_stores_every_key_of_a_hostile_proxy(
        postgres_dsn: str, postgres_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's engine: every key stored, the bad ones as errors in safe text (each
    try used to fail the same way, on the first surrogate PostgreSQL was handed)."""
    import psycopg

    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook
    from airflow_doi.provider.hooks.resolution import resolve_due_keys
    from airflow_doi.provider.hooks.sql import sql_hook

    table = f"{postgres_schema}.catalogue"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f'create table "{postgres_schema}".catalogue (doi text, doi_key text, '
                     "doi_valid boolean)")
        with conn.cursor() as cursor:
            cursor.executemany(f'insert into "{postgres_schema}".catalogue values (%s, %s, true)',
                               [(doi, doi.upper()) for doi in DOIS])
    url = urlsplit(postgres_dsn)
    monkeypatch.setenv("AIRFLOW_CONN_CAT", json.dumps({
        "conn_type": "postgres", "host": url.hostname, "port": url.port or 5432,
        "login": url.username, "password": url.password or "", "schema": url.path.lstrip("/")}))
    with hostile(proxy_behaviour()) as server:
        monkeypatch.setenv("AIRFLOW_CONN_DOI_PROXY_DEFAULT", json.dumps({
            "conn_type": "doi_proxy", "host": server.url, "extra": {
                "rate": 500, "concurrency": 4, "timeout": 1, "backoff_base": 0.01,
                "max_attempts": 2}}))
        summary = resolve_due_keys(sql_hook("cat"), DoiProxyHook(), table=table, log=_Log())
    assert summary.stored_keys == len(DOIS)
    with psycopg.connect(postgres_dsn) as conn:
        stored = conn.execute(f'select doi_key, status, error from "{postgres_schema}".'
                              "doi_resolution order by doi_key").fetchall()
    got = {key.rpartition("/")[2].lower(): (status, error) for key, status, error in stored}
    assert set(got) == {_suffix(doi) for doi in DOIS}
    assert got["ok"] == ("resolved", None)
    assert got["loc-bytes"][0] == "error" and "evil.example/\\udcff" in got["loc-bytes"][1]
    assert got["url-sur"] == ("no_values", REFUSED_URL)
    assert_rows_safe({"error": error} for _, error in got.values())


# --- Which RA?: existence first, existence only, which_ra ----------------------------------

WHICH_DOIS = [f"10.1000/{name}" for name in ("ok", *AGENCIES)]


@pytest.mark.parametrize("mode", ["existence_first", "existence_only"])
def test_which_ra_answers_become_safe_agencies(tmp_path: Path, mode: str) -> None:
    options: dict[str, Any] = (
        {"existence_first": True} if mode == "existence_first" else {"urls": False})
    with hostile(proxy_behaviour()) as server:
        results = resolve(WHICH_DOIS, config=FAST, base_url=server.url,
                          cache=tmp_path / "cache.sqlite", **options)
        listed = which_ra(WHICH_DOIS, config=FAST, base_url=server.url)
    assert_rows_safe(r.as_row() for r in results)
    assert_rows_safe(listed)
    got = by_suffix(results)
    assert got["ra-sur"].agency == "Cross\\udcffref\\x1b[31m"
    assert got["ra-bel"].agency == "\\x07DataCite\\x00"
    done = "registered" if mode == "existence_only" else "resolved"
    assert [got[n].status for n in ("ok", "ra-sur", "ra-bel")] == [done] * 3
    by_doi = {_suffix(row["doi"]): row for row in listed}
    assert by_doi["ra-sur"]["ra"] == "Cross\\udcffref\\x1b[31m"
    assert by_doi["status-sur"] == {**by_doi["status-sur"], "ra": None,
                                    "error": "\\udcff\\x1b[2J"}


# --- Content negotiation and the agencies' list queries ------------------------------------

META_DOIS = [f"10.1000/{name}" for name in ("loc-bytes", "loc-bel", "neg-ok", "cr-1", "dc-1")]


def _fetch(proxy: Hostile, agency: Hostile, cache: Path | None,
           stats: MetadataStats) -> list[MetadataResult]:
    return fetch(META_DOIS, base_url=proxy.url, metadata_hosts=(agency.url,),
                 crossref_url=agency.url, datacite_url=agency.url, cache=cache, stats=stats,
                 **FAST_METADATA)


def test_metadata_fetch_ends_each_bad_answer_as_its_own_key(tmp_path: Path) -> None:
    cache = tmp_path / "metadata.sqlite"
    with hostile(agency_behaviour) as agency, hostile(proxy_behaviour(agency.url)) as proxy:
        stats = MetadataStats()
        results = _fetch(proxy, agency, cache, stats)
        again = _fetch(proxy, agency, cache, MetadataStats())
    assert_rows_safe(r.as_row() for r in results)
    got = by_suffix(results)
    for name in ("loc-bytes", "loc-bel"):
        assert got[name].metadata_status == "error", got[name]
        assert "redirected to an unusable address" in got[name].error
    assert "https://evil.example/\\udcff" in got["loc-bytes"].error
    assert "\\x07\\x1b[31m" in got["loc-bel"].error
    for name, source in (("neg-ok", "negotiation"), ("cr-1", "crossref"), ("dc-1", "datacite")):
        assert (got[name].metadata_status, got[name].metadata_source) == ("ok", source)
        assert got[name].title and "\\" not in got[name].title  # controls dropped, as before
    assert [r.cached for r in again] == [r.metadata_status == "ok" for r in results]
    assert [timeless(r) for r in again] == [timeless(r) for r in results]
    assert stats.source_health.pools  # the pool the agencies announced, as safe text
    for said in stats.source_health.pools.values():
        assert_safe(said, "x-api-pool")
        assert "\\x1b[31m" in said


def test_an_update_stream_stops_at_a_cursor_no_request_can_carry(tmp_path: Path) -> None:
    """The page's rows are kept and the stream says why it stopped; the run goes on."""
    dois = [*UPDATED.values(), "10.1000/neg-ok"]
    with hostile(agency_behaviour) as agency, hostile(proxy_behaviour(agency.url)) as proxy:
        stats = MetadataStats()
        results = fetch(dois, base_url=proxy.url, metadata_hosts=(agency.url,),
                        crossref_url=agency.url, datacite_url=agency.url,
                        cache=tmp_path / "metadata.sqlite", stats=stats,
                        updates_since="2024-01-01", **FAST_METADATA)
    assert [(r.metadata_status, r.metadata_source) for r in results] == [
        ("ok", "crossref_updates"), ("ok", "datacite_updates"), ("ok", "negotiation")]
    assert_rows_safe(r.as_row() for r in results)
    for name in ("crossref", "datacite"):
        state = stats.updates[name]
        assert (state.pages, state.found, state.finished) == (1, 1, False), state
        assert "the next page cannot be asked for" in (state.error or "")
        assert_safe(state.error, "error")
    assert "(\\udcff\\x1b[2J) holds control characters" in stats.updates["crossref"].error
    assert "(\\x1b\\x07next) holds control characters" in stats.updates["datacite"].error
    assert "the next page cannot be asked for" in (stats.updates_error or "")


def test_the_enrich_cli_logs_the_announced_pool_as_safe_text(tmp_path: Path) -> None:
    source = tmp_path / "u.csv"
    source.write_text("doi\n" + "".join(f"{doi}\n" for doi in META_DOIS))
    out = tmp_path / "out.csv"
    with hostile(agency_behaviour) as agency, hostile(proxy_behaviour(agency.url)) as proxy:
        stderr = io.StringIO()
        with redirect_stderr(stderr):
            code = main(["enrich", str(source), "--column", "doi", "-o", str(out),
                         "--base-url", proxy.url, "--metadata-host", agency.url,
                         "--crossref-url", agency.url, "--datacite-url", agency.url,
                         "--rate", "500", "--agency-rate", "500", "--list-rate", "500",
                         "--timeout", "1", "--backoff-base", "0.01", "--max-attempts", "2",
                         "--max-error-share", "1", "--no-progress"])
    said = stderr.getvalue()
    assert code == 0, said
    assert_safe(said.replace("\n", " "), "stderr")
    assert "x-api-pool: polite\\x1b[31m" in said
    rows = read_output_csv(out)
    assert [row["doi"] for row in rows] == META_DOIS
    assert_rows_safe(rows)


# --- The property: any bytes from a server end as a per-key status -------------------------

_TEXT = (st.text(st.characters(exclude_categories=()), max_size=12)  # surrogates included
         | st.sampled_from([HOSTILE_TEXT, "\udcff", SURROGATE_URL, "\x1b[2J\x07"]))
_HEADER_NAMES = st.sampled_from([
    b"Location", b"Content-Type", b"Retry-After", b"x-api-pool", b"x-rate-limit-limit",
    b"x-rate-limit-interval", b"Content-Encoding", b"Transfer-Encoding", b"X-Other"])
_BYTES = st.binary(max_size=40)


def _json_body(handle: str) -> st.SearchStrategy[bytes]:
    """A JSON body of one of the answers the paths read (a handle record, Which RA?'s list, a
    CSL record, a list query's page), its texts fuzzed."""
    value = st.fixed_dictionaries({
        "index": st.integers(-2, 3) | _TEXT, "type": st.sampled_from(["URL", "EMAIL"]) | _TEXT,
        "data": st.fixed_dictionaries({"value": st.just(SURROGATE_URL) | _TEXT}),
        "ttl": st.integers(-10, 10**12) | _TEXT})
    handle_answer = st.fixed_dictionaries({
        "responseCode": st.sampled_from([1, 1, 2, 100, 200]), "handle": st.just(handle) | _TEXT,
        "values": st.lists(value, min_size=1, max_size=3), "message": _TEXT})
    which = st.lists(st.fixed_dictionaries({"DOI": st.just(handle) | _TEXT, "RA": _TEXT,
                                            "status": _TEXT}), max_size=3)
    record = st.fixed_dictionaries({"DOI": st.just(handle) | _TEXT, "title": _TEXT,
                                    "type": _TEXT, "author": st.lists(
                                        st.fixed_dictionaries({"family": _TEXT}), max_size=2)})
    lists = st.fixed_dictionaries({"status": st.just("ok"), "message": st.fixed_dictionaries(
        {"items": st.lists(record, max_size=2), "next-cursor": _TEXT})})
    documents = handle_answer | which | record | lists
    return documents.map(lambda d: json.dumps(d).encode("ascii"))


#: Status codes, the commonest answers (and the redirects of the issue) more often.
_CODES = [200, 200, 200, 302, 302, 301, 204, 400, 403, 404, 406, 410, 429, 500, 503, 599, 101,
          100]


@st.composite
def answers(draw: st.DrawFn) -> bytes:
    """A whole answer: a status line (well formed or not), headers (any bytes: a hostile
    ``Location`` often) and a body (fuzzed JSON of the right shape, or any bytes)."""
    code = draw(st.sampled_from(_CODES))
    well_formed = st.just(f"HTTP/1.1 {code} X".encode())
    status = draw(well_formed | well_formed | well_formed | st.builds(
        lambda tail: f"HTTP/1.1 {code} ".encode() + tail, _BYTES) | _BYTES)
    location = st.sampled_from([LOCATION_BYTES, LOCATION_CONTROLS]) | _BYTES
    headers = draw(st.lists(st.tuples(_HEADER_NAMES, _BYTES | location), max_size=3))
    headers += draw(st.lists(st.tuples(st.just(b"Location"), location), max_size=1))
    body = draw(_json_body("10.1000/P1") | _json_body("10.1000/P1") | _BYTES)
    length = draw(st.sampled_from([None, len(body), len(body), len(body) + 5]))
    lines = [status, *(name + b": " + value for name, value in headers)]
    if length is not None:
        lines.append(b"Content-Length: " + str(length).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


#: Three keys, three ways in: P1's agency unknown (Which RA?, then content negotiation; the
#: handles API for the resolver), CR-2 Crossref's and DC-3 DataCite's (their list queries).
FUZZ_DOIS = ["10.1000/P1", "10.1000/cr-2", "10.1000/dc-3"]
FUZZ_AGENCIES = {"10.1000/CR-2": "Crossref", "10.1000/DC-3": "DataCite"}


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(answer=answers())
def test_any_bytes_from_a_server_end_as_a_per_key_status(answer: bytes) -> None:
    """The same answer on every path of both runs, each with a cache: every key ends with a
    status of its own, in safe text, and neither run raises."""
    def behave(handler: _Handler, path: str) -> None:
        handler.send(answer)

    with hostile(behave) as server, tempfile.TemporaryDirectory() as folder:
        # No breaker pause, no long Retry-After: the runs' paths are tried, not their patience.
        quick: dict[str, Any] = {"base_url": server.url, "breaker_threshold": 100,
                                 "retry_after_max": 0.05}
        resolved = resolve(FUZZ_DOIS, cache=Path(folder, "r.sqlite"), existence_first=True,
                           **FAST_OPTIONS, **quick)
        assert [r.status in STATUSES for r in resolved] == [True] * len(FUZZ_DOIS)
        assert_rows_safe(r.as_row() for r in resolved)
        fetched = fetch(FUZZ_DOIS, metadata_hosts=(server.url,), crossref_url=server.url,
                        datacite_url=server.url, cache=Path(folder, "m.sqlite"),
                        agencies=FUZZ_AGENCIES, **FAST_METADATA, **quick)
        assert [r.metadata_status in METADATA_STATUSES for r in fetched] == [True] * 3
        assert_rows_safe(r.as_row() for r in fetched)


# --- Item 3 on every path: a server that echoes the credentials it was sent ---------------

SECRET = "TopSecret42"


def echoed(handler: _Handler) -> str:
    """What a careless server says back: its request line and its Authorization decoded."""
    import base64

    head = handler.head.decode("latin-1")
    said = ""
    for line in head.split("\r\n"):
        if line.lower().startswith("authorization: basic "):
            said += "credentials " + base64.b64decode(line.split()[-1]).decode("latin-1") + " "
    return said + head


def echo_behaviour(handler: _Handler, path: str) -> None:
    """Handles, Which RA?, negotiation and the list queries all fail, echoing the request."""
    message = echoed(handler)
    if path.startswith("/api/handles/"):
        handler.send(reply(b"500 X", as_json({"responseCode": 2, "message": message})))
    else:
        handler.send(reply(b"500 " + message[:200].encode("latin-1", "replace"),
                           message.encode("latin-1", "replace")))


def test_credentials_a_server_echoes_never_reach_a_row_the_cache_or_stderr(
        tmp_path: Path) -> None:
    """#42 item 3, served on every path: a proxy URL with a password (sent as Basic auth),
    and a server that echoes it in its messages; nothing the run writes or says holds it."""
    source = tmp_path / "u.csv"
    source.write_text("doi\n10.1000/cr-1\n10.1000/dc-1\n10.1000/neg-1\n", encoding="utf-8")
    with hostile(echo_behaviour) as server:
        host = server.url.removeprefix("http://")
        for command, extra in (("resolve", []), ("resolve", ["--existence-first"]),
                               # the agencies' URLs refuse credentials: none to echo
                               ("enrich", ["--metadata-host", server.url, "--crossref-url",
                                           server.url, "--datacite-url", server.url])):
            out, cache = tmp_path / f"{command}.csv", tmp_path / f"{command}.sqlite"
            stderr = io.StringIO()
            with redirect_stderr(stderr):
                code = main([command, str(source), "--column", "doi", "-o", str(out),
                             "--base-url", f"http://user:{SECRET}@{host}", "--rate", "500",
                             "--timeout", "1", "--backoff-base", "0.01", "--max-attempts", "1",
                             "--max-error-share", "1", "--no-progress", "--cache", str(cache),
                             *extra])
            said = stderr.getvalue()
            assert code in (0, 3), said
            written = out.read_bytes() + cache.read_bytes()
            assert SECRET.encode() not in written and SECRET not in said, (command, said)
            assert b"error" in out.read_bytes()  # the servers' failures are in the rows
        assert server.requests > 0
