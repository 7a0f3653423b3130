"""The standard through the public scalar API: every conformance vector, plus the edges."""

from __future__ import annotations

import pytest

import airflow_doi
from airflow_doi import (
    REASONS,
    Doi,
    InvalidDoiError,
    comparison_key,
    normalize,
    parse,
    to_url,
    to_urn,
    validate,
)
from tests.conftest import syntax_vectors

VECTORS = syntax_vectors()


def _id(v: dict) -> str:
    return f"{v['input']!r}-{v['decode']}"


def test_vectors_are_loaded_from_both_files() -> None:
    assert len(VECTORS) > 100


@pytest.mark.parametrize("vector", VECTORS, ids=_id)
def test_validate_matches_vector(vector: dict) -> None:
    result = validate(vector["input"], decode=vector["decode"])
    assert (result.doi, result.valid, result.reason) == (
        vector["doi"],
        vector["valid"],
        vector["reason"],
    )
    assert result.key == vector.get("key")


@pytest.mark.parametrize("vector", VECTORS, ids=_id)
def test_normalize_and_key_match_vector(vector: dict) -> None:
    if vector["doi"] is None:
        with pytest.raises(InvalidDoiError) as raised:
            normalize(vector["input"], decode=vector["decode"])
        assert raised.value.reason == vector["reason"]
        with pytest.raises(InvalidDoiError):
            comparison_key(vector["input"], decode=vector["decode"])
    else:
        assert normalize(vector["input"], decode=vector["decode"]) == vector["doi"]
        assert comparison_key(vector["input"], decode=vector["decode"]) == vector["key"]


@pytest.mark.parametrize("vector", [v for v in VECTORS if "url" in v], ids=_id)
def test_url_and_urn_match_vector(vector: dict) -> None:
    assert to_url(vector["input"]) == vector["url"]
    assert to_urn(vector["input"]) == vector["urn"]
    assert normalize(vector["url"]) == vector["doi"] == normalize(vector["urn"])


def test_reason_order_is_the_documented_one() -> None:
    assert REASONS == (
        "empty",
        "bad_encoding",
        "bad_character",
        "short_doi",
        "bad_directory",
        "bad_registrant",
        "missing_suffix",
        "reserved_suffix",
    )


def test_invalid_doi_error_is_a_value_error_with_reason() -> None:
    with pytest.raises(ValueError) as raised:
        normalize("11.1000/1")
    assert isinstance(raised.value, InvalidDoiError)
    assert raised.value.reason == "bad_directory"
    assert "bad_directory" in str(raised.value)


def test_key_folds_ascii_only_where_str_upper_would_not() -> None:
    expected = {
        "straße": "STRAßE",  # str.upper() gives STRASSE
        "ﬁ": "ﬁ",  # str.upper() gives FI
        "ǆ": "ǆ",  # str.upper() gives Ǆ
        "ı": "ı",  # str.upper() gives I
        "é": "é",
        "\u212a": "\u212a",  # Kelvin sign: not the letter K
        "ſ": "ſ",  # long s: str.upper() gives S
        "İx": "İX",
    }
    for suffix, folded in expected.items():
        assert comparison_key(f"10.1000/{suffix}") == f"10.1000/{folded}"
    assert comparison_key("10.1000/abcxyz") == "10.1000/ABCXYZ"
    assert comparison_key("10.1000/straße") != "10.1000/straße".upper()
    assert comparison_key("10.1000/ß") != comparison_key("10.1000/SS")


def test_parsed_type_exposes_parts() -> None:
    doi = parse("https://doi.org/10.1000.10/AbC%2Fd")
    assert isinstance(doi, Doi)
    assert (doi.prefix, doi.registrant, doi.suffix) == ("10.1000.10", "1000.10", "AbC/d")
    assert doi.key == "10.1000.10/ABC/D"
    assert doi.form == "url"
    assert doi.valid
    assert str(doi) == "10.1000.10/AbC/d"
    assert not parse("10.1000/a/b").valid


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ("10.1/x", "bare"),
        ("doi:10.1/x", "doi"),
        ("https://doi.org/10.1/x", "url"),
        ("urn:doi:10.1:x", "urn"),
        ("https://doi.org/urn:doi:10.1:x", "urn"),
        ("info:doi/10.1/x", "info"),
    ],
)
def test_form_is_recognised(text: str, form: str) -> None:
    assert parse(text).form == form


def test_jama_and_sici_dois_survive_intact() -> None:
    jama = "10.1001/PUBS.JAMA(278)3,JOC7055-ABST:"
    sici = "10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI4>3.0.CO;2-0"
    for doi in (jama, sici):
        assert normalize(doi) == doi
        assert validate(doi).valid
        assert normalize(to_url(doi)) == doi == normalize(to_urn(doi))
        assert normalize(f"doi:{doi}") == doi


@pytest.mark.parametrize("missing", [None, float("nan"), b"", "", " \u200b "])
def test_missing_values_are_empty(missing: object) -> None:
    assert validate(missing).reason == "empty"


def test_pandas_missing_value_is_empty_without_importing_pandas_in_the_module() -> None:
    import pandas as pd  # a dev dependency; the standard module itself never imports it

    assert validate(pd.NA).reason == "empty"


def test_bytes_are_utf8() -> None:
    assert normalize("10.1000/é".encode()) == "10.1000/é"
    assert validate(b"10.1000/\xff").reason == "bad_encoding"


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (0, "bad_directory"),  # a number in a cell: read as "0"
        (10.1000, "missing_suffix"),  # "10.1": a directory and a registrant, no suffix
        (True, "bad_directory"),
        (10**30, "bad_directory"),
        (float("nan"), "empty"),
        (float("inf"), "bad_directory"),
        (b"\xff", "bad_encoding"),
        (bytearray(b"10.1000/x"), None),
        (None, "empty"),
        (object(), "bad_directory"),
        (["10.1000/x"], "bad_directory"),
        (_Unprintable(), "bad_encoding"),
    ],
    ids=lambda value: type(value).__name__,  # stable ids: object() reprs hold addresses
)
def test_validate_never_raises_and_reads_other_values_as_text(value: object, reason: str) -> None:
    result = validate(value)
    assert result.reason == reason
    assert result.valid is (reason is None)


def test_numbers_and_objects_are_judged_as_their_text() -> None:
    import decimal

    import numpy as np

    assert validate(Doi("10.1000/Abc")).doi == "10.1000/Abc"
    for missing in (np.float32("nan"), decimal.Decimal("NaN"), complex("nan"),
                    np.datetime64("NaT")):  # fmt: skip
        assert validate(missing).reason == "empty", missing
    assert validate(decimal.Decimal("sNaN")).reason == "bad_directory"  # "sNaN", no signal
    assert validate(np.int64(10)) == validate("10")
    # normalize and parse read the same text, and raise the documented error, not TypeError.
    with pytest.raises(InvalidDoiError) as raised:
        normalize(10.1000)
    assert raised.value.reason == "missing_suffix"
    with pytest.raises(InvalidDoiError, match="bad_encoding"):
        parse(_Unprintable())


def test_bad_decode_option_is_rejected() -> None:
    with pytest.raises(ValueError, match="decode"):
        normalize("10.1/x", decode="sometimes")  # type: ignore[arg-type]


def test_to_url_base_and_errors() -> None:
    assert to_url("10.1000/1", base="http://127.0.0.1:8080") == "http://127.0.0.1:8080/10.1000/1"
    with pytest.raises(InvalidDoiError):
        to_url("not a doi")


def test_import_is_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, airflow_doi; "
        "heavy = [m for m in ('airflow', 'pandas', 'aiohttp', 'sqlglot', 'pyarrow', 'duckdb') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert airflow_doi.__version__


def test_illegal_ranges_are_exactly_the_non_graphic_categories() -> None:
    """Z39.84 4.1: legal characters are Unicode's graphic characters (pinned to Unicode 14)."""
    import unicodedata

    from airflow_doi.syntax import ILLEGAL_RANGES, SURROGATES

    ranges = (*ILLEGAL_RANGES, SURROGATES)
    non_graphic = {"Cc", "Cf", "Cs", "Co", "Zl", "Zp"}
    pinned = set()
    for a, b in ranges:
        pinned.update(range(a, b + 1))
    for code in range(0x110000):
        category = unicodedata.category(chr(code))
        noncharacter = 0xFDD0 <= code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE
        if category == "Cn" and unicodedata.unidata_version != "14.0.0":
            continue  # a newer Unicode may have assigned it since; the pin stays at 14.0
        assert (code in pinned) == (category in non_graphic or noncharacter), hex(code)
    # The parser uses exactly this set: probe every range edge and its neighbours.
    for a, b in ranges:
        for code in (a - 1, a, b, b + 1):
            if 0 <= code <= 0x10FFFF:
                reason = validate(f"10.1/a{chr(code)}b").reason
                assert (reason == "bad_character") == (code in pinned), hex(code)


@pytest.mark.parametrize(("value", "handle"), [
    ("10/b6vnmd", "10/b6vnmd"), ("doi:10/B6VNMD", "10/B6VNMD"),
    ("https://doi.org/10/b6vnmd?x=1", "10/b6vnmd"), ("urn:doi:10:b6vnmd", "10/b6vnmd"),
    (b" 10/gfb4p ", "10/gfb4p"), ("10/182", None), ("10/b6v.nmd", None), (None, None),
])
def test_a_short_doi_is_named_never_guessed(value: object, handle: str | None) -> None:
    """Issue 34: a shortDOI is not a DOI (no DOI, no key: which one it aliases only the proxy
    knows) but gets a reason of its own; short_doi gives the handle as written."""
    from airflow_doi import short_doi

    assert short_doi(value) == handle
    assert short_doi("10.1000/x") is None
    check = validate(value)
    assert not check.valid and check.doi is None and check.key is None
    if handle is not None:
        assert check.reason == "short_doi"
        with pytest.raises(InvalidDoiError, match=r"not a DOI \(short_doi\)"):
            normalize(value)
