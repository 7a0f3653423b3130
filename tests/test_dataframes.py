"""The Arrow API, Polars and Dask faces: every conformance vector equals the scalar answer, on
both vectorized engines (the native core and the pure-Arrow fallback); shapes are kept."""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import airflow_doi.pandas  # registers Series.doi, used by the Dask partitions
import airflow_doi.polars  # noqa: F401  (registers .doi)
from airflow_doi import arrow
from airflow_doi.presentation import to_url
from airflow_doi.syntax import ascii_upper, validate
from tests.conftest import syntax_vectors

DECODES = ("auto", "always", "never")


def _vectors(decode: str) -> list[dict[str, Any]]:
    return [v for v in syntax_vectors()
            if v["decode"] == decode and (v["input"] is None or isinstance(v["input"], str))]


def _expected(values: list[str | None], decode: str) -> dict[str, list[Any]]:
    """Each face's answer as the scalar functions give it."""
    outcomes = [validate(value, decode=decode) for value in values]
    return {
        "normalize": [o.doi for o in outcomes],
        "key": [None if o.doi is None else ascii_upper(o.doi) for o in outcomes],
        "valid": [o.valid for o in outcomes],
        "reason": [o.reason for o in outcomes],
        "url": [None if o.doi is None else to_url(o.doi) for o in outcomes],
        "validate": [{"valid": o.valid, "reason": o.reason, "doi": o.doi} for o in outcomes],
    }


FACES = ("normalize", "key", "valid", "reason", "url", "validate")


@pytest.mark.parametrize("decode", DECODES)
def test_every_vector_through_the_arrow_api(vector_engine: str, decode: str) -> None:
    vectors = _vectors(decode)
    assert vectors or decode == "never"
    values = [v["input"] for v in vectors]
    expected = _expected(values, decode)
    for face in FACES:
        got = getattr(arrow, face)(pa.array(values, pa.string()), decode=decode).to_pylist()
        assert got == expected[face], (vector_engine, face)
    # The vectors' own fields, beside the scalar functions': the contract itself.
    keys = arrow.key(pa.array(values, pa.string()), decode=decode).to_pylist()
    for vector, key in zip(vectors, keys, strict=True):
        if "key" in vector:
            assert key == vector["key"], vector


def test_chunked_input_stays_chunked_and_nulls_stay_null(vector_engine: str) -> None:
    values = [v["input"] for v in _vectors("auto")]
    chunked = pa.chunked_array([values[:7], [], [None, None], values[7:]], pa.large_string())
    for face in FACES:
        got = getattr(arrow, face)(chunked)
        assert isinstance(got, pa.ChunkedArray), face
        assert [len(c) for c in got.chunks] == [len(c) for c in chunked.chunks], face
        assert got.to_pylist() == _expected([*values[:7], None, None, *values[7:]], "auto")[face]
    key = arrow.key(chunked).to_pylist()
    assert key[7:9] == [None, None]
    assert arrow.valid(pa.array([None], pa.string())).to_pylist() == [False]
    assert arrow.reason(pa.array([None], pa.null())).to_pylist() == ["empty"]
    single = arrow.key(pa.array(["doi:10.1000/abc"]))
    assert isinstance(single, pa.Array) and single.to_pylist() == ["10.1000/ABC"]
    assert arrow.key(pa.array([], pa.string())).to_pylist() == []


def test_any_arrow_exporter_is_read(vector_engine: str) -> None:
    values = ["https://dx.doi.org/10.1000/456%23789", None, "doi:10.1000/ABC", "10.1000/x."]
    want = _expected(values, "auto")["key"]
    series = pl.Series("x", values)  # string_view, exported as a stream
    assert arrow.key(series).to_pylist() == want
    assert arrow.key(pa.array(values).dictionary_encode()).to_pylist() == want
    assert arrow.key(pa.array(values, pa.string_view())).to_pylist() == want
    relation = duckdb.sql("SELECT * FROM (VALUES ('doi:10.1000/ABC'), (NULL)) t(doi_raw)")
    assert arrow.key(relation).to_pylist() == ["10.1000/ABC", None]

    class OnlyTheCapsule:
        def __arrow_c_array__(self, requested_schema: Any = None) -> Any:
            return pa.array(values).__arrow_c_array__(requested_schema)

    assert arrow.key(OnlyTheCapsule()).to_pylist() == want


def test_a_column_that_cannot_be_read_is_refused_in_words() -> None:
    with pytest.raises(TypeError, match="not list"):
        arrow.key(["10.1000/a"])
    with pytest.raises(TypeError, match="cast it to string first"):
        arrow.key(pa.array([1, 2]))
    with pytest.raises(ValueError, match=r"expected one column, got 2 \(a, b\)"):
        arrow.key(duckdb.sql("SELECT 'x' AS a, 'y' AS b"))


@pytest.mark.parametrize("decode", DECODES)
def test_every_vector_through_polars(vector_engine: str, decode: str) -> None:
    values = [v["input"] for v in _vectors(decode)]
    expected = _expected(values, decode)
    frame = pl.DataFrame({"raw": values}, schema={"raw": pl.String})
    expressions = [getattr(pl.col("raw").doi, face)(decode=decode).alias(face) for face in FACES]
    eager = frame.select(expressions)
    streamed = frame.lazy().select(expressions).collect(engine="streaming")
    for face in FACES:
        assert eager[face].to_list() == expected[face], face
        assert streamed[face].to_list() == expected[face], face
        assert getattr(frame["raw"].doi, face)(decode=decode).to_list() == expected[face], face
    assert eager.schema["valid"] == pl.Boolean and eager.schema["key"] == pl.String


def test_polars_streams_a_lazy_scan_batch_by_batch(tmp_path: Any) -> None:
    values = ["doi:10.1000/ABC", None, "junk", "https://doi.org/10.1000/abc"] * 25_000
    path = tmp_path / "refs.parquet"
    pl.DataFrame({"raw": values}).write_parquet(path, row_group_size=7_000)
    query = (pl.scan_parquet(path)
             .with_columns(pl.col("raw").doi.key().alias("key"))
             .group_by("key").agg(pl.len().alias("rows")).sort("key", nulls_last=True))
    result = query.collect(engine="streaming")
    assert result.rows() == [("10.1000/ABC", 50_000), (None, 50_000)]


def test_dask_partitions_through_the_pandas_accessor(vector_engine: str) -> None:
    import dask.dataframe as dd

    values = [v["input"] for v in _vectors("auto")] * 3
    frame = dd.from_pandas(pd.DataFrame({"raw": pd.Series(values, dtype=object)}), npartitions=4)
    keyed = frame.map_partitions(
        lambda part: part.assign(key=part["raw"].doi.key(), valid=part["raw"].doi.validate().valid),
        meta={"raw": "object", "key": "string[pyarrow]", "valid": "bool"},
    ).compute()
    expected = _expected(values, "auto")
    assert [None if pd.isna(k) else k for k in keyed["key"]] == expected["key"]
    assert keyed["valid"].tolist() == expected["valid"]
    assert frame.npartitions == 4, vector_engine
