"""Property tests: the invariants every caller relies on, over arbitrary input."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from airflow_doi import (
    InvalidDoiError,
    comparison_key,
    find_dois,
    normalize,
    to_url,
    to_urn,
    validate,
)
from airflow_doi.syntax import ascii_upper

REALWORLD = Path(__file__).parent / "data" / "realworld"

registrants = st.lists(st.from_regex(r"[0-9]{1,5}", fullmatch=True), min_size=1, max_size=3).map(
    ".".join
)
suffix_chars = st.characters(
    blacklist_categories=("Cs",),
    blacklist_characters=[chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]],
)
TRICKY_CHARS = "%#?\"<>{}^[]`|\\+ ,;:'/.ßéﬁİıǆ\u212a日\u00a0\u200b"
tricky = st.sampled_from([*TRICKY_CHARS, "/../", "/./"])
suffixes = st.lists(st.one_of(suffix_chars, tricky), min_size=1, max_size=20).map("".join)
candidate_dois = st.builds(lambda r, s: f"10.{r}/{s}", registrants, suffixes)
wrappers = st.sampled_from(
    ["", "doi:", "DOI: ", "https://doi.org/", "HTTP://DX.DOI.ORG/", "info:doi/", "  ", "\ufeff"]
)


def _valid(d: str) -> bool:
    result = validate(d)
    return result.valid and result.doi == d


@settings(max_examples=400)
@given(st.text())
def test_arbitrary_text_only_ever_raises_invalid_doi_error(text: str) -> None:
    for function in (normalize, comparison_key, to_url, to_urn):
        try:
            function(text)
        except InvalidDoiError:
            pass
    validate(text)
    find_dois(text)


@settings(max_examples=400)
@given(st.builds(lambda w, d: w + d, wrappers, st.one_of(st.text(), candidate_dois)))
def test_wrapped_values_only_ever_raise_invalid_doi_error(text: str) -> None:
    for decode in ("auto", "always", "never"):
        result = validate(text, decode=decode)
        assert result.valid == (result.reason is None)
        if result.doi is None:
            assert result.reason is not None and result.reason != "reserved_suffix"


@settings(max_examples=500)
@given(candidate_dois)
def test_url_and_urn_round_trip_for_every_valid_doi(d: str) -> None:
    if not _valid(d):
        return
    assert normalize(to_url(d)) == d == normalize(to_urn(d))
    assert normalize(to_url(d, base="http://dx.doi.org/")) == d


@settings(max_examples=500)
@given(st.one_of(candidate_dois, st.text()))
def test_key_is_idempotent_and_folds_ascii_only(value: str) -> None:
    result = validate(value)
    if result.doi is None:
        return
    key = comparison_key(value)
    assert comparison_key(key) == key
    assert len(key) == len(result.doi)
    for before, after in zip(result.doi, key, strict=True):
        if "a" <= before <= "z":
            assert after == chr(ord(before) - 32)
        else:
            assert after == before  # never changes a non-ASCII (or any other) character


@given(st.text())
def test_ascii_upper_never_changes_length_or_non_ascii(text: str) -> None:
    out = ascii_upper(text)
    assert len(out) == len(text)
    assert all(a == b for a, b in zip(text, out, strict=True) if not ("a" <= a <= "z"))


@settings(max_examples=300)
@given(candidate_dois, st.sampled_from(["See ", "(", "doi: ", "ref. https://doi.org/"]))
def test_find_dois_finds_a_valid_doi_written_in_text(d: str, before: str) -> None:
    if not _valid(d) or any(c.isspace() or c in "\u200b\ufeff" for c in d):
        return
    if d[-1] in ".,;:!?'\")]}>" or "%" in d:
        return  # trailing punctuation is dropped by design; bare % is not URL-encoded
    if "doi.org" not in before and (
        any(c in d for c in '"<>') or unicodedata.category(d[-1])[0] == "P"
    ):
        return  # bare, markup ends a DOI and trailing punctuation of any script is dropped
    if before == "(" and _closes_early(d):
        return  # a DOI right after "(" ends at the ")" that closes it, by design
    text = before + (to_url(d)[len("https://doi.org/"):] if "doi.org" in before else d) + " end"
    assert d in find_dois(text)


def _closes_early(doi: str) -> bool:
    """Whether a ")" in ``doi`` would close a "(" written before it (depth below zero)."""
    depth = 0
    for char in doi:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return True
    return False


def test_a_doi_after_a_bracket_ends_at_its_closer() -> None:
    # Found by hypothesis: "(10.0/)0" ends at the ")" that closes the "(", leaving "10.0/",
    # which is no DOI; the property above leaves such DOIs out.
    assert find_dois("(10.0/)0 end") == []
    assert find_dois("(10.1000/(a)b) end") == ["10.1000/(a)b"]


def test_real_crossref_dois_are_valid_and_round_trip() -> None:
    dois = (REALWORLD / "crossref_dois.txt").read_text().split()
    assert len(dois) == 5000
    for d in dois:
        assert validate(d).valid, d
        assert normalize(to_url(d)) == d == normalize(to_urn(d))
        assert comparison_key(d.upper()) == comparison_key(d)  # Crossref DOIs are ASCII


# -- issue #14: normalize is idempotent; no URL parser can drop a segment of a DOI URL ---------

#: What decoding, a cut query or a wrapper can leave at the edge of a DOI.
EDGE_NOISE = ["", " ", "\t", "\u200b", "%20", "%09", "%0A", "%C2%A0", "%E2%80%8B", "%E3%80%80",
              "%E2%80%A8", " ?q=1", "%20#f", "%20%20"]  # fmt: skip
edge_wrappers = st.sampled_from(
    ["", "doi:", "doi:\u200b", "urn:doi:", "info:doi/", "https://doi.org/",
     "\n\thttps://www.doi.org/", "https://doi.org/urn:doi:", "%20"]
)  # fmt: skip
noisy_values = st.builds(
    lambda wrapper, lead, body, tail: wrapper + lead + body + tail,
    edge_wrappers,
    st.sampled_from(EDGE_NOISE),
    st.one_of(candidate_dois, st.text(max_size=8)),
    st.sampled_from(EDGE_NOISE),
)


@settings(max_examples=1500)
@given(st.one_of(noisy_values, st.text()))
@example("\n\thttps://www.doi.org/10.1/%20")  # the cases of issue #14, always tried
@example("https://doi.org/10.1000/abc%20")
@example("https://doi.org/10.1000/abc ?q")
def test_normalize_is_idempotent_and_agrees_with_validate(value: str) -> None:
    result = validate(value)
    if result.doi is None:
        return
    once = normalize(value)
    assert normalize(once) == once
    again = validate(once)
    assert (again.valid, again.reason) == (result.valid, result.reason)
    assert comparison_key(once) == result.key


BASE = "https://doi.org/"


def _dot_segment(segment: str) -> bool:
    """A WHATWG single- or double-dot segment (``%2e`` counts as a dot there)."""
    return segment.lower().replace("%2e", ".") in (".", "..")


@settings(max_examples=800)
@given(candidate_dois, st.sampled_from(["", "/.", "/..", "/./x", "/../x", "/x/..", "/../.", "/.."]))
@example("10.1/ab", "/..")
@example("10.1/xy", "/.")
def test_no_url_parser_can_drop_a_segment_of_a_doi_url(d: str, tail: str) -> None:
    result = validate(d + tail)
    if result.doi is None:
        return
    url = to_url(result.doi)
    # (urljoin is no oracle here: it also merges "//", which is no dot segment.)
    assert not any(_dot_segment(s) for s in url[len(BASE):].split("/")), url
    assert normalize(url) == result.doi
