"""The native core (``airflow_doi.native._core`` over ``native/doi_core.h``) against the scalar API.

The C core is the project's second implementation of the standard, so it is held to the
scalar functions value by value: every conformance vector in the three decode modes, random
mixtures, every two-byte escape, every boundary of the illegal table, hypothesis text, NULLs,
sliced and chunked arrays with offsets, the three Arrow string types, long values and NUL
bytes. It must also be what a plain install gives (built by setup.py, current), and when it
is missing the fallback says so once.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_doi import columns as _arrow
from airflow_doi import native as native_core
from airflow_doi.native import arrow as native_arrow
from airflow_doi.native import tables as native_tables
from airflow_doi.presentation import DEFAULT_BASE_URL, encode_path
from airflow_doi.sqlgen.conformance import mixtures
from airflow_doi.syntax import ILLEGAL_RANGES, REASONS, ascii_upper, validate
from tests.conftest import syntax_vectors

ROOT = Path(__file__).resolve().parents[1]
DECODES = ("auto", "always", "never")
BASE = "https://hdl.handle.net/"


def scalar(value: str | None, decode: str, base: str = DEFAULT_BASE_URL) -> tuple:
    result = validate(value, decode=decode)  # type: ignore[arg-type]
    doi = result.doi
    return (
        doi,
        None if doi is None else ascii_upper(doi),
        None if doi is None else base + encode_path(doi),
        -1 if result.reason is None else REASONS.index(result.reason),
    )


def native(values: pa.Array | pa.ChunkedArray, decode: str, base: str = DEFAULT_BASE_URL) -> list:
    doi, codes = native_arrow.run(values, decode, "doi")  # type: ignore[arg-type]
    key, key_codes = native_arrow.run(values, decode, "key")  # type: ignore[arg-type]
    url, url_codes = native_arrow.run(values, decode, "url", base=base)  # type: ignore[arg-type]
    encoded, none = native_arrow.run(doi, "never", "encode", base=base)
    assert none is None
    assert encoded.to_pylist() == url.to_pylist()  # encode(doi) is url(value)
    assert codes is not None and key_codes is not None and url_codes is not None
    assert codes.dtype == np.int8
    assert list(codes) == list(key_codes) == list(url_codes)
    return list(zip(doi.to_pylist(), key.to_pylist(), url.to_pylist(), codes.tolist(),
                    strict=True))


def assert_agrees(values: list[str | None], decode: str = "auto", base: str = DEFAULT_BASE_URL,
                  kind: pa.DataType | None = None) -> None:
    array = pa.array(values, kind or pa.large_string())
    assert native(array, decode, base) == [scalar(v, decode, base) for v in values]


# -- what an install gives -----------------------------------------------------------------------


def test_the_install_built_the_native_core_from_the_current_sources() -> None:
    # bootstrap's `pip install -e .` ran setup.py: a missing or stale module fails here, so the
    # suite never silently tests only the fallback.
    assert native_arrow.module() is not None, native_arrow.status()
    assert native_arrow.status().startswith("native:")


def test_c_tables_are_generated_from_the_python_constants() -> None:
    assert native_tables.HEADER.read_text(encoding="utf-8") == native_tables.render(), (
        "airflow_doi/native/doi_tables.h is stale: run python -m airflow_doi.native.tables"
    )
    assert native_tables.main(["--check"]) == 0


# -- the same answers as the scalar API -----------------------------------------------------------


@pytest.mark.parametrize("decode", DECODES)
def test_every_vector_in_every_decode_mode(decode: str) -> None:
    inputs = [v["input"] for v in syntax_vectors()]
    assert len(inputs) > 100
    assert_agrees([*inputs, None], decode)
    assert_agrees(inputs, decode, BASE)


@pytest.mark.parametrize("decode", DECODES)
def test_random_mixtures(decode: str) -> None:
    assert_agrees(mixtures(5000, seed=11), decode)


def test_every_two_byte_escape_and_some_longer_ones() -> None:
    values = [f"https://doi.org/10.1000/a%{b:02X}b" for b in range(256)]
    values += [f"urn:doi:10.1000:%{b:02x}" for b in range(256)]
    rng = random.Random(3)
    for _ in range(2000):
        raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        values.append("info:doi/10.1/" + "".join(f"%{b:02X}" for b in raw))
    for decode in DECODES:
        assert_agrees(values, decode)


def test_every_illegal_range_boundary() -> None:
    values = []
    for low, high in ILLEGAL_RANGES:
        for cp in {low - 1, low, high, high + 1}:
            if 0 < cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF:
                values += [f"10.1000/a{chr(cp)}b", f"{chr(cp)}10.1000/x{chr(cp)}"]
    assert_agrees(values)


def test_nulls_empty_long_values_and_nul_bytes() -> None:
    long = "10.1000/" + "x" * 1_000_000
    values = [None, "", " ", "\x00", "10.1000/a\x00b", long, " " + long.upper() + "\u200b",
              "https://doi.org/" + "%41" * 300_000, "%" * 10_000, None]
    for decode in DECODES:
        assert_agrees(values, decode)


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(), pa.string_view()])
def test_every_arrow_string_type(kind: pa.DataType) -> None:
    assert_agrees(["doi:10.1000/ABC", None, "x", "https://doi.org/10.1/%C3%A9"], kind=kind)


def test_sliced_and_chunked_arrays_keep_their_offsets() -> None:
    values = mixtures(3000, seed=5) + [None] * 7
    random.Random(1).shuffle(values)
    whole = pa.array(values, pa.string())
    chunked = pa.chunked_array([whole.slice(0, 1000), whole.slice(1000, 1), whole.slice(1001)])
    sliced = whole.slice(17, 2000)
    assert native(chunked, "auto") == [scalar(v, "auto") for v in values]
    assert native(sliced, "auto") == [scalar(v, "auto") for v in values[17:2017]]
    empty = pa.chunked_array([], pa.string())
    doi, codes = native_arrow.run(empty, "auto", "doi")
    assert len(doi) == 0 and codes is not None and len(codes) == 0


def test_many_slices_on_many_threads_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    values = mixtures(4000, seed=9)
    expected = native(pa.array(values), "auto")
    monkeypatch.setattr(native_arrow, "CALL_ROWS", 97)
    doi, _ = native_arrow.run(pa.array(values), "auto", "doi", threads=4)
    assert doi.num_chunks == -(-len(values) // 97)
    assert native(pa.array(values), "auto") == expected


text_without_surrogates = st.text(st.characters(exclude_categories=("Cs",)))
noisy = st.builds(
    lambda w, body, tail: w + body + tail,
    st.sampled_from(["", "doi:", " DOI: ", "https://doi.org/", "HTTP://DX.DOI.ORG/", "urn:doi:",
                     "info:doi/", "\ufeff", "doi.org/"]),
    st.one_of(st.builds(lambda r, s: f"10.{r}/{s}", st.from_regex(r"[0-9]{1,5}(\.[0-9]{1,3})?",
                                                                 fullmatch=True),
                        text_without_surrogates),
              text_without_surrogates),
    st.sampled_from(["", " ", "%20", "?x", "#y", "\u200b", "/..", "%2F"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), noisy, text_without_surrogates), max_size=40),
       st.sampled_from(DECODES), st.integers(0, 5))
def test_hypothesis_native_equals_scalar(values: list[str | None], decode: str, cut: int) -> None:
    array = pa.array(values, pa.string())
    assert native(array.slice(min(cut, len(values))), decode) == [
        scalar(v, decode) for v in values[cut:]
    ]


def test_cells_arrow_cannot_hold_go_to_the_scalar_path() -> None:
    # Lone surrogates and bytes reach the engine as overrides: the scalar answer is patched in.
    values = ["10.1000/a", None, "10.1000/b"]
    overrides = {1: "10.1000/\udc80x", 2: b"doi:10.1000/\xff"}
    result = _arrow.analyse(pa.array(values), "auto", overrides)
    assert result.doi.to_pylist() == ["10.1000/a", None, None]
    assert [REASONS[c] if c >= 0 else None for c in result.reason_codes] == [
        None, "bad_character", "bad_encoding",
    ]
    assert _arrow.keys(pa.array(values), "auto", {0: "DOI:10.1000/q"}).to_pylist() == [
        "10.1000/Q", None, "10.1000/B",
    ]


def test_scalar_entry_point_for_one_value_at_a_time() -> None:
    module = native_arrow.module()
    assert module is not None
    for value in [*mixtures(500, seed=2), *(v["input"] for v in syntax_vectors())]:
        doi, code = module.scalar(value, 0)
        result = validate(value)
        assert (doi, code) == (result.doi, -1 if result.reason is None else
                               REASONS.index(result.reason))


# -- when it is missing ----------------------------------------------------------------------------

SNIPPET = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
import pandas as pd
import airflow_doi.pandas
s = pd.Series(["doi:10.1000/abc", "x"] * 5)
for _ in range(3):
    assert [None if pd.isna(k) else k for k in s.doi.key()][:2] == ["10.1000/ABC", None]
    s.doi.validate()
from airflow_doi.native import arrow as native_arrow
print(native_arrow.status())
"""


def test_switched_off_it_falls_back_and_says_so_once() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SNIPPET], capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**__import__("os").environ, native_arrow.DISABLE_ENV: "0"},
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "native DOI core" in line]
    assert len(lines) == 1, done.stderr
    assert "switched off (AIRFLOW_DOI_NATIVE=0)" in lines[0]
    assert "pure-Arrow" in lines[0]
    assert done.stdout.startswith("pure Arrow:")


@pytest.mark.parametrize("setting", ["0", "false", "OFF", "no"])
def test_every_spelling_of_off_switches_it_off(monkeypatch: pytest.MonkeyPatch,
                                               setting: str) -> None:
    native_core._load.cache_clear()
    monkeypatch.setenv(native_core.DISABLE_ENV, setting)
    try:
        module, why = native_core._load()
        assert module is None and why == f"switched off (AIRFLOW_DOI_NATIVE={setting})"
    finally:
        native_core._load.cache_clear()


def test_the_scalar_entry_point_takes_text_only() -> None:
    module = native_arrow.module()
    assert module is not None
    with pytest.raises(TypeError, match="str or None"):
        module.scalar(b"10.1000/\xff", 0)  # type: ignore[arg-type]
    with pytest.raises(UnicodeEncodeError):
        module.scalar("10.1000/\udc80", 0)
    assert module.scalar(None, 0) == (None, REASONS.index("empty"))


def test_a_stale_build_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    native_core._load.cache_clear()
    monkeypatch.setattr(native_core, "source_digest", lambda: "0" * 16)
    try:
        module, why = native_core._load()
        assert module is None
        assert "older sources" in why and "reinstall" in why
    finally:
        native_core._load.cache_clear()


@pytest.mark.parametrize("decode", DECODES)
def test_value_at_a_time_validate_equals_the_python_parser(decode: str) -> None:
    values: list[object] = [v["input"] for v in syntax_vectors()] + mixtures(2000, seed=4)
    values += [None, "10.1000/\udc80", b"doi:10.1000/\xc3\xa9", b"\xff", 1234, 10.5, ""]
    for value in values:
        assert native_core.validate(value, decode=decode) == validate(value, decode=decode), (  # type: ignore[arg-type]
            value
        )
    with pytest.raises(ValueError, match="decode"):
        native_core.validate("10.1/x", decode="sometimes")  # type: ignore[arg-type]


def test_sqlite_functions_answer_through_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from airflow_doi.db.sqlite import register

    values = [v["input"] for v in syntax_vectors() if v["decode"] == "auto"] + mixtures(500)
    answers = {}
    for engine in ("native", "python"):
        if engine == "python":
            monkeypatch.setattr(native_core, "module", lambda: None)
        con = sqlite3.connect(":memory:")
        register(con)
        con.execute("CREATE TABLE t (i INTEGER, x TEXT)")
        con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(values)))
        answers[engine] = con.execute(
            "SELECT doi_normalize(x), doi_key(x), doi_is_valid(x), doi_reason(x), doi_url(x) "
            "FROM t ORDER BY i").fetchall()
    assert answers["native"] == answers["python"]
    assert answers["native"] == [
        (s[0], s[1], int(s[3] == -1), None if s[3] == -1 else REASONS[s[3]], s[2])
        for s in (scalar(v, "auto") for v in values)
    ]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(st.characters(exclude_categories=())), noisy),
                max_size=30))
def test_hypothesis_with_lone_surrogates_through_the_accessor(values: list[str | None]) -> None:
    # Arrow cannot hold a lone surrogate: such cells reach the scalar parser as overrides and
    # the native answers for the rest are patched around them.
    import pandas as pd

    import airflow_doi.pandas  # noqa: F401

    series = pd.Series(values, dtype=object)
    keys = [None if pd.isna(k) else k for k in series.doi.key()]
    frame = series.doi.validate()
    expected = [validate(v) for v in values]
    assert keys == [e.key for e in expected]
    assert [None if pd.isna(r) else r for r in frame.reason] == [e.reason for e in expected]
