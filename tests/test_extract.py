"""find_dois: the shared vectors, the project's, and real reference strings."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_doi import comparison_key, find_dois, to_url
from tests.conftest import find_vectors

REALWORLD = Path(__file__).parent / "data" / "realworld"


@pytest.mark.parametrize("vector", find_vectors(), ids=lambda v: repr(v["find_in"])[:60])
def test_find_vectors(vector: dict) -> None:
    assert find_dois(vector["find_in"]) == vector["found"]


def test_none_and_empty() -> None:
    assert find_dois(None) == []
    assert find_dois("") == []


def test_real_reference_strings() -> None:
    rows = [
        json.loads(line)
        for line in (REALWORLD / "reference_strings_sample.jsonl").read_text().splitlines()
    ]
    with_doi = [r for r in rows if r["doi"]]
    assert len(with_doi) >= 60
    for row in with_doi:
        keys = [comparison_key(d) for d in find_dois(row["text"])]
        # Found, and nothing else: no markup glued on (the JATS <ext-link> row found
        # "…2011.06.013</ext-link></comment>" beside the DOI before markup ended a DOI).
        assert set(keys) == {comparison_key(row["doi"])}, row["text"]
    assert all(find_dois(r["text"]) == [] for r in rows if not r["doi"])


def test_real_crossref_dois_in_html_cjk_and_quotes() -> None:
    dois = (REALWORLD / "crossref_dois.txt").read_text().split()
    assert sum("<" in d for d in dois) >= 20  # the SICI DOIs are there
    for d in dois:
        url = to_url(d)
        for text, times in (
            (f'<a href="{url}">{d}</a>', 2),
            (f"<a href='{url}'>link</a><doi>{d}</doi>", 2),
            (f"\u8be6\u89c1{d}\u3002", 1),
            (f"as \u201c{d}\u201d. Next", 1),
        ):
            assert find_dois(text) == [d] * times, text
        if "#" not in d:  # a raw "#" in another site's URL starts its fragment
            assert find_dois(f"https://onlinelibrary.wiley.com/doi/{d}?af=R") == [d], d


#: Each rule of "Finding DOIs in free text" and its edges, beyond the shared vectors.
EDGES: list[tuple[str, list[str]]] = [
    # A label that is not followed by a DOI hides nothing.
    ("doi:", []),
    ("DOI: ", []),
    ("doi: none, see 10.1000/1", ["10.1000/1"]),
    ("doi:(10.1000/xyz).", ["10.1000/xyz"]),
    ("doi:\u201c10.1000/xyz\u201d", ["10.1000/xyz"]),
    ("https://doi.org/(10.1000/xyz)", ["10.1000/xyz"]),
    ("urn:doi:(10.1000/xyz)", ["10.1000/xyz"]),
    # Wrapper labels match ASCII case-insensitively only: no long s, no dotless i.
    ("http\u017f://hdl.handle.net/10.1000/a%23b", ["10.1000/a%23b"]),
    # Markup: a double quote, a "</", and a ">" that closes no "<" (a tag's end).
    ("<a href='https://doi.org/10.1000/abc'>link</a>", ["10.1000/abc"]),
    ("<a href='10.1000/abc'>10.1000/def</a>", ["10.1000/abc", "10.1000/def"]),
    ("<a href=https://doi.org/10.1000/abc>", ["10.1000/abc"]),
    ('<a href="https://aip.org/doi/10.1063/1.88?x=1">', ["10.1063/1.88"]),
    ("<doi>10.1000/abc</doi><doi>10.1000/def</doi>", ["10.1000/abc", "10.1000/def"]),
    # A "<" inside a SICI DOI is not markup; its "</" is.
    (
        "<doi>10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI4>3.0.CO;2-0</doi>",
        ["10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI4>3.0.CO;2-0"],
    ),
    (
        "<a href='10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI4>3.0.CO;2-0'>x</a>",
        ["10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI4>3.0.CO;2-0"],
    ),
    ("10.1000/a<b>", ["10.1000/a<b>"]),
    # Another site's URL: its query and fragment are not the DOI.
    ("https://aip.org/doi/10.1063/1.881498#abstract", ["10.1063/1.881498"]),
    ("https://example.com/resolve?doi=10.1000/x#top", ["10.1000/x"]),
    ("https://example.com:8080/doi/abs/10.1000/x?via=y.", ["10.1000/x"]),
    ("https://web.archive.org/web/2020/https://aip.org/doi/10.1063/1?x", ["10.1063/1"]),
    ("https://example.com/abc10.1000/x", []),
    # ... but a doi.org URL is the DOI's own: percent-decoded, and its ?/# go as they always did.
    ("https://doi.org/10.1000/a%23b?noredirect", ["10.1000/a#b"]),
    ("https://doi.org/10.1000/a?b", ["10.1000/a"]),
    # ... and outside any URL, "?" and "#" are part of the DOI.
    ("10.1000/a#b?c", ["10.1000/a#b?c"]),
    # Glued text: only an ASCII letter or digit in front blocks a DOI.
    ("\u53c2\u89c110.1000/a\u3001 \u548c\u300c10.1000/b\u300d", ["10.1000/a", "10.1000/b"]),
    ("\uff1a10.1000/a", ["10.1000/a"]),
    ("Z10.1000/a 910.1000/b", []),
    # Trailing non-ASCII punctuation and quotes, also mixed with ASCII ones.
    ("see \u201c10.1000/abc\u201d.", ["10.1000/abc"]),
    ("\u00ab10.1000/abc\u00bb,", ["10.1000/abc"]),
    ("\u201810.1000/abc\u2019", ["10.1000/abc"]),
    ("\u300c10.1000/abc\u300d\u3002", ["10.1000/abc"]),
    ("(see 10.1000/abc\u2026)", ["10.1000/abc"]),
    ("10.1000/abc\u2014", ["10.1000/abc"]),
    # Fullwidth brackets are non-ASCII punctuation: dropped at the end whatever their balance.
    ("\uff0810.1000/xyz\uff09", ["10.1000/xyz"]),
    ("\uff3b10.1000/xyz\uff3d\u3002", ["10.1000/xyz"]),
    ("(10.1000/xyz\uff09)", ["10.1000/xyz"]),
    # Non-ASCII punctuation inside a DOI stays; a trailing symbol is not punctuation.
    ("10.1000/a\u3002b", ["10.1000/a\u3002b"]),
    ("10.1000/a\u2122", ["10.1000/a\u2122"]),
]


@pytest.mark.parametrize(("text", "expected"), EDGES, ids=[repr(t)[:60] for t, _ in EDGES])
def test_find_edges(text: str, expected: list[str]) -> None:
    assert find_dois(text) == expected


def test_large_text_is_linear() -> None:
    dois = [f"10.{1000 + i % 9000}/j.x.{i}" for i in range(20_000)]
    parts = [f'<a href="https://doi.org/{d}">({d}),</a> lorem ipsum dolor sit amet.' for d in dois]
    text = " ".join(parts)
    assert len(text) > 1_000_000
    started = time.perf_counter()
    found = find_dois(text)
    elapsed = time.perf_counter() - started
    assert found == [d for d in dois for _ in (1, 2)]
    assert elapsed < 2.0, f"{elapsed:.2f} s"


@pytest.mark.parametrize(
    "text",
    [
        "a://" * 125_000,  # many schemes in one token, no DOI after any of them
        "x" * 500_000,  # one huge token
        "https://example.com/" + "a/" * 250_000,  # a long URL without a DOI
        "https://doi.org/" * 30_000,  # labels, none followed by a DOI
        "<" * 250_000 + ">" * 250_000,
    ],
    ids=["schemes", "token", "url", "labels", "brackets"],
)
def test_pathological_text_is_linear(text: str) -> None:
    # Half a megabyte each: linear work takes a fraction of a second, a rescan per position hours.
    started = time.perf_counter()
    assert find_dois(text) == []
    assert time.perf_counter() - started < 2.0
