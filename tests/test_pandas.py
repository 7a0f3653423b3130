"""``Series.doi``: the vectorized engine must give exactly what the scalar functions give."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import airflow_doi.pandas  # noqa: F401  (registers the accessor)
from airflow_doi import columns as _arrow
from airflow_doi import to_url, validate
from airflow_doi.pandas import STRING_DTYPE
from airflow_doi.syntax import ascii_upper
from tests.conftest import syntax_vectors

DECODES = ("auto", "always", "never")

#: Every test runs on the native core and on the pure-Arrow fallback.
pytestmark = pytest.mark.usefixtures("vector_engine")


def _none(value: Any) -> Any:
    return None if value is pd.NA or value is None else value


def scalar_row(value: object, decode: str = "auto", base: str = "https://doi.org/") -> tuple:
    """What the scalar API says about one cell: (doi, key, valid, reason, url).

    The cell goes to the scalar functions as it is: they read a number as its ``str()`` and
    a NaN as missing, and the accessor must agree with them, not with a copy of that rule.
    """
    result = validate(value, decode=decode)  # type: ignore[arg-type]
    url = None if result.doi is None else to_url(value, base, decode=decode)  # type: ignore[arg-type]
    return result.doi, result.key, result.valid, result.reason, url


def vector_rows(series: pd.Series, decode: str = "auto", base: str = "https://doi.org/") -> list:
    frame = series.doi.validate(decode=decode)
    urls = series.doi.url(base, decode=decode)
    return [
        (_none(d), _none(k), bool(v), _none(r), _none(u))
        for d, k, v, r, u in zip(frame.doi, frame.key, frame.valid, frame.reason, urls, strict=True)
    ]


def assert_same_as_scalar(values: list, decode: str = "auto", dtype: Any = object) -> None:
    series = pd.Series(values, dtype=dtype)
    expected = [scalar_row(v, decode) for v in values]
    assert vector_rows(series, decode) == expected


# -- the conformance vectors ------------------------------------------------------------------


@pytest.mark.parametrize("decode", DECODES)
def test_every_vector_through_the_accessor(decode: str) -> None:
    vectors = [v for v in syntax_vectors() if v["decode"] == decode]
    assert vectors or decode == "never"
    series = pd.Series([v["input"] for v in vectors], dtype=object)
    frame = series.doi.validate(decode=decode)
    normalized = series.doi.normalize(decode=decode)
    keys = series.doi.key(decode=decode)
    urls = series.doi.url(decode=decode)
    for i, vector in enumerate(vectors):
        context = f"vector {vector}"
        assert _none(frame.doi.iloc[i]) == vector["doi"], context
        assert _none(normalized.iloc[i]) == vector["doi"], context
        assert bool(frame.valid.iloc[i]) is vector["valid"], context
        assert _none(frame.reason.iloc[i]) == vector["reason"], context
        if "key" in vector:
            assert keys.iloc[i] == vector["key"] == frame.key.iloc[i], context
        if "url" in vector:
            assert urls.iloc[i] == vector["url"], context
        if vector["doi"] is None:
            assert keys.iloc[i] is pd.NA and urls.iloc[i] is pd.NA, context


def test_vectors_in_the_default_string_dtype_too() -> None:
    vectors = [v for v in syntax_vectors() if v["decode"] == "auto"]
    values = [v["input"] for v in vectors]
    assert_same_as_scalar(values, dtype=pd.StringDtype("pyarrow"))
    assert_same_as_scalar(values, dtype=pd.ArrowDtype(pa.string()))
    assert_same_as_scalar(values, dtype=pd.StringDtype("python"))


# -- output shape -----------------------------------------------------------------------------


def test_output_dtypes_index_and_name() -> None:
    series = pd.Series(
        ["10.1000/a", None, "junk"], index=pd.Index([7, 3, 5], name="row"), name="ref"
    )
    frame = series.doi.validate()
    assert list(frame.columns) == ["doi", "key", "valid", "reason"]
    assert frame.index.equals(series.index)
    assert frame.dtypes.to_dict() == {
        "doi": STRING_DTYPE, "key": STRING_DTYPE, "valid": np.dtype(bool), "reason": STRING_DTYPE
    }
    for method in (series.doi.normalize, series.doi.key, series.doi.url):
        result = method()
        assert result.dtype == STRING_DTYPE
        assert result.index.equals(series.index)
        assert result.name == "ref"
        assert result.iloc[1] is pd.NA


def test_empty_series() -> None:
    frame = pd.Series([], dtype=object).doi.validate()
    assert len(frame) == 0 and list(frame.columns) == ["doi", "key", "valid", "reason"]
    assert len(pd.Series([], dtype="str").doi.url()) == 0


# -- nulls and odd cells ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [object, "str", STRING_DTYPE, pd.ArrowDtype(pa.string())])
def test_missing_values_come_out_null_with_reason_empty(dtype: Any) -> None:
    series = pd.Series([None, "10.1000/x", np.nan, pd.NA, ""], dtype=dtype)
    frame = series.doi.validate()
    assert frame.valid.tolist() == [False, True, False, False, False]
    assert frame.reason.tolist() == ["empty", pd.NA, "empty", "empty", "empty"]
    assert frame.doi.isna().tolist() == [True, False, True, True, True]


def test_non_text_cells_are_judged_as_their_text() -> None:
    values = [10.5, 12, True, "10.1000/1", b"10.1000/bytes", b"10.1000/\xff", "10.1/\ud800", None]
    assert_same_as_scalar(values)
    frame = pd.Series(values, dtype=object).doi.validate()
    assert frame.reason.tolist()[:3] == ["missing_suffix", "bad_directory", "bad_directory"]
    assert frame.reason.iloc[5] == "bad_encoding"
    assert frame.reason.iloc[6] == "bad_character"
    assert frame.doi.iloc[4] == "10.1000/bytes"


def test_object_column_of_numbers_and_objects_agrees_with_scalar_validate() -> None:
    import decimal

    values = [0, -1, 10**30, 10.1, 1e-7, float("inf"), float("nan"), np.float32("nan"),
              np.int64(7), np.float64(10.5), np.bool_(False), decimal.Decimal("10.1000"),
              decimal.Decimal("NaN"), complex(1, 2), np.datetime64("NaT"), pd.NaT, object(),
              ["10.1000/x"], "10.1000/x"]  # fmt: skip
    assert_same_as_scalar(values)
    reasons = pd.Series(values, dtype=object).doi.validate().reason.tolist()
    assert reasons[:3] == ["bad_directory", "bad_directory", "bad_directory"]
    assert reasons[3] == "missing_suffix" and reasons[6] == reasons[7] == "empty"


@pytest.mark.parametrize("dtype", ["int64", "float64", "Int64", "category"])
def test_numeric_and_categorical_columns(dtype: str) -> None:
    values = [1, 2, 3] if dtype != "category" else ["10.1000/a", "x", "10.1000/a"]
    series = pd.Series(values, dtype=dtype)
    if dtype == "Int64":
        series.iloc[1] = pd.NA
    expected = [scalar_row(v) for v in series.astype(object).tolist()]
    assert vector_rows(series) == expected


def test_decode_must_be_known() -> None:
    with pytest.raises(ValueError, match="decode"):
        pd.Series(["10.1000/1"]).doi.key(decode="sometimes")  # type: ignore[arg-type]


# -- the key never folds anything but ASCII a-z --------------------------------------------------


def test_arrow_ascii_upper_is_byte_wise_on_utf8() -> None:
    texts = ["10.1000/aßéﬁİıǆ\u212ak日z", "10.1000/ſtraße", "abc\u00e0\u00ff"]
    arrow = pa.array(texts, pa.large_string())
    assert _arrow.pc.ascii_upper(arrow).to_pylist() == [ascii_upper(t) for t in texts]
    keys = pd.Series(texts).doi.key().tolist()
    assert keys[0] == "10.1000/Aßéﬁİıǆ\u212aK日Z"
    assert keys[1] == "10.1000/ſTRAßE"


def test_wrapper_look_alikes_are_not_folded() -> None:
    # RE2's (?i) would accept these; the scalar parser (re.ASCII) does not.
    values = ["httpſ://doi.org/10.1000/1", "doi\u212a:10.1000/1", "ſ10.1000/1", "DOİ:10.1000/1"]
    assert_same_as_scalar(values)
    assert not pd.Series(values).doi.validate().valid.any()


# -- tiers agree with each other and with the scalar code -----------------------------------------


MIXED = [
    "10.1000/182", "  https://doi.org/10.1000/ABC \n", "doi:   10.1/x", "DOI:10.1/x",
    "https://doi.org/10.1002/%28SICI%291097-4571%28199806%2949%3A8%3C693%3A%3AAID-ASI4%3E3.0.CO%3B2-0",
    "https://doi.org/10.1000/a%2Fb", "https://doi.org/10.1000/%2F", "https://doi.org/10.1000/x%00y",
    "https://doi.org/10.1000/%7e%7E%25%2525", "info:doi/10.1000/%41%42", "urn:doi:10.1000:a%2Fb",
    "URN:DOI:10.1000:x:y", "urn:doi:10.1000/a:b", "https://doi.org/urn:doi:10.1:a", "urn:doi:10.1:",
    "https://doi.org/10.1000%2Fabc", "https://dx.doi.org/10.1000/a/b", "https://doi.org/10.1000/a%ZZ",
    "https://doi.org/10.1000/%C3%A9", "10.1000/a%2Fb", "doi:10.1000/a%2Fb", "10.1000/x?y#z",
    "n/a", "PMID:123", "", "-", "10.1000", "10.abc/x", "11.1/x", "doi:\u300010.1000/1",
    "doi:\t10.1000/1", "10.1000/a\u00adb", "10.1000/a\u0085b", "10.1000/\ue000", "10.1/\U0010ffff",
    "https://www.doi.org/10.1000/1", "http://hdl.handle.net/10.1000/1", "dx.doi.org/10.1/1",
    "www.doi.org/10.1/1", "https://doi.org/", "https://doi.org/?x", "info:doi/", "doi:10.1000/ a",
    "%31%30.1000/x", "https://doi.org/%31%30.1000/x", "10.1000/ab/../c", "10.1000/./x", "10.1/a b",
]


@pytest.mark.parametrize("decode", DECODES)
def test_mixed_forms_agree_with_scalar(decode: str) -> None:
    assert_same_as_scalar(MIXED, decode)


@pytest.mark.parametrize("decode", DECODES)
def test_rows_keep_their_order_when_wrapper_lengths_differ(decode: str) -> None:
    # The engine groups rows by wrapper length; a longer wrapper first must not swap rows.
    values = [
        "DOI:10.0/%21", "10.0/%20", "https://doi.org/10.0/%41", "info:doi/10.0/%42", "10.0/%43",
        "urn:doi:10.0:%44", "https://doi.org/urn:doi:10.0:x", "urn:doi:10.0:y",
        "  https://doi.org/10.0/a ", " doi:10.0/b", " 10.0/c",
    ]
    assert_same_as_scalar(values, decode)
    assert_same_as_scalar(values[::-1], decode)


def test_slices_and_threads_agree_with_one_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    values = MIXED * 40 + [None] * 7
    single = vector_rows(pd.Series(values))
    monkeypatch.setattr(_arrow, "SLICE_ROWS", 64)
    assert vector_rows(pd.Series(values)) == single
    assert single == [scalar_row(v) for v in values]


def test_url_base_without_slash_and_custom_base() -> None:
    values = ["10.1000/a b", "10.1000/x", "junk"]
    series = pd.Series(values)
    for base in ("https://example.test/resolve", "https://example.test/"):
        expected = [
            to_url(v, base) if validate(v).doi else pd.NA for v in values
        ]
        assert series.doi.url(base).tolist() == expected


# -- properties -------------------------------------------------------------------------------

WRAPPERS = [
    "", "doi:", "DOI: ", "doi:  ", "https://doi.org/", "HTTP://DX.DOI.ORG/", "https://www.doi.org/",
    "http://hdl.handle.net/", "doi.org/", "dx.doi.org/", "info:doi/", "urn:doi:",
    "https://doi.org/urn:doi:", "https://example.org/", "httpſ://doi.org/",
]
TRICKY = "%#?/:.;()<>[]{}|\\+ \"'ßéﬁİı\u212a日\u00a0\u200b\u00ad\x00\x85\ue000aAzZ09"
suffix = st.text(alphabet=st.sampled_from(TRICKY) | st.characters(codec="utf-8"), max_size=12)
escape = st.sampled_from(
    ["%2F", "%2f", "%25", "%41", "%3A", "%C3%A9", "%E2%84%AA", "%0A", "%7", "%"]
)
registrant = st.sampled_from(["1000", "1002.5", "1", "abc", "", "1..2", "12345"])
space = st.sampled_from(["", " ", "\t", "\u3000", "\ufeff", "\u200b", "\n "])


@st.composite
def doi_like(draw: st.DrawFn) -> str:
    body = f"10.{draw(registrant)}{draw(st.sampled_from(['/', ':', '', '/']))}"
    body += "".join(draw(st.lists(suffix | escape, max_size=4)))
    if draw(st.booleans()):
        body = "".join(c.upper() if draw(st.booleans()) else c for c in body)
    return draw(space) + draw(st.sampled_from(WRAPPERS)) + body + draw(space)


cells = st.none() | st.text() | doi_like()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(cells, max_size=30), decode=st.sampled_from(DECODES))
def test_vectorized_equals_scalar(values: list[str | None], decode: str) -> None:
    assert_same_as_scalar(values, decode)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(doi_like(), min_size=1, max_size=30))
def test_vectorized_equals_scalar_in_arrow_dtype(values: list[str]) -> None:
    assert_same_as_scalar(values, dtype=STRING_DTYPE)


def test_suggest_without_verify_sends_nothing_and_agrees_with_suggest_repairs() -> None:
    from airflow_doi.repair import suggest_repairs

    cells = ["10.3748/wjg.v10.i5.707.", "10.1037/0021–9010.93.3.602", None, "10.1000/ok",
             "1038/nature14129", "10.3748/wjg.v10.i5.707."]
    frame = pd.Series(cells, index=list("abcdef")).doi.suggest()
    assert list(frame.index) == list("abcdef")
    assert list(frame.columns) == ["doi_suggestion", "doi_suggestion_rule",
                                   "doi_suggestion_verified"]
    assert frame["doi_suggestion_verified"].isna().all()
    for cell, (doi, rule) in zip(cells, frame[["doi_suggestion", "doi_suggestion_rule"]]
                                 .itertuples(index=False), strict=True):
        shown = next((c for c in suggest_repairs(cell) if not c.verify_only), None)
        assert (None if pd.isna(doi) else doi) == (shown.doi if shown else None), cell
        assert (None if pd.isna(rule) else rule) == (shown.rule if shown else None), cell
    assert frame.loc["a", "doi_suggestion"] == "10.3748/wjg.v10.i5.707"
    assert frame.loc["b", "doi_suggestion_rule"] == "unicode_dash"


def test_suggest_with_verify_keeps_only_what_the_proxy_knows() -> None:
    from airflow_doi.resolver.simulator import ProxySimulator

    exists = {"10.3748/wjg.v10.i5.707": "https://example.org/a", "10.1000/own": "https://e.org/b"}
    records = {doi: [{"index": 1, "type": "URL", "data": {"format": "string", "value": url}}]
               for doi, url in exists.items()}
    with ProxySimulator(records) as sim:
        frame = pd.Series(["10.3748/wjg.v10.i5.707.", "10.1000/own", "10.9999/nothing."]) \
            .doi.suggest(verify=True, base_url=sim.url, rate=100)
    assert frame["doi_suggestion"].tolist()[:2] == ["10.3748/wjg.v10.i5.707", pd.NA]
    assert frame["doi_suggestion_verified"].tolist()[:2] == [True, pd.NA]
    assert frame["doi_suggestion_verified"].tolist()[2] is False
