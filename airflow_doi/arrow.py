"""The DOI standard over Arrow data: ``key``, ``normalize``, ``validate``, ``url`` and friends
for a whole column, from any library that speaks the Arrow C data interface.

Each function takes one column: a ``pyarrow.Array`` or ``ChunkedArray``, or any object that
exports ``__arrow_c_array__`` or ``__arrow_c_stream__`` (a Polars Series, a DuckDB relation of
one column, nanoarrow...), of strings (``string``, ``large_string``, ``string_view``, a
dictionary of strings, or all nulls). It answers with Arrow data, row for row what the scalar
functions of :mod:`airflow_doi` give: an ``Array`` for an array, a ``ChunkedArray`` with the
same chunk lengths for chunked data or a stream. A null stays null (its reason is ``empty``,
as ``validate(None)`` says). Text comes back as ``large_string``.

The work is :mod:`airflow_doi.columns`' (the native core where it is built, Arrow kernels
otherwise); this module only reads the many shapes of a column and gives the answer the
shape of the question. Needs ``pyarrow`` (a base dependency).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from airflow_doi.columns import Analysis, analyse, keys
from airflow_doi.presentation import DEFAULT_BASE_URL
from airflow_doi.syntax import Decode

__all__ = ["VALIDATION", "key", "normalize", "reason", "url", "valid", "validate"]

#: The type :func:`validate` answers with: the fields of :class:`airflow_doi.Validation`.
VALIDATION: pa.StructType = pa.struct(
    [("valid", pa.bool_()), ("reason", pa.large_string()), ("doi", pa.large_string())]
)


def key(values: Any, *, decode: Decode = "auto") -> pa.Array | pa.ChunkedArray:
    """The comparison key of every row: null where the value is not a DOI."""
    column, lengths = _read(values)
    return _shaped(keys(column, decode), lengths)


def normalize(values: Any, *, decode: Decode = "auto") -> pa.Array | pa.ChunkedArray:
    """The normalized DOI of every row: null where the value is not a DOI."""
    return _answer(values, decode, lambda analysis: analysis.doi)


def valid(values: Any, *, decode: Decode = "auto") -> pa.Array | pa.ChunkedArray:
    """Whether each row is a valid DOI (``false`` for a null)."""
    return _answer(values, decode, lambda analysis: analysis.valid_array)


def reason(values: Any, *, decode: Decode = "auto") -> pa.Array | pa.ChunkedArray:
    """Why each row is not a valid DOI (one of :data:`airflow_doi.REASONS`); null when valid."""
    return _answer(values, decode, lambda analysis: analysis.reason)


def url(values: Any, *, decode: Decode = "auto",
        base: str = DEFAULT_BASE_URL) -> pa.Array | pa.ChunkedArray:
    """The resolvable URL of every DOI, percent-encoded per the IDF tables; null otherwise."""
    return _answer(values, decode, lambda analysis: analysis.url(base))


def validate(values: Any, *, decode: Decode = "auto") -> pa.Array | pa.ChunkedArray:
    """:func:`airflow_doi.validate` of every row, as a struct of ``valid``, ``reason`` and
    ``doi`` (:data:`VALIDATION`)."""

    def fields(analysis: Analysis) -> pa.Array:
        return pa.StructArray.from_arrays(
            [analysis.valid_array, _whole(analysis.reason), _whole(analysis.doi)],
            fields=list(VALIDATION),
        )

    return _answer(values, decode, fields)


def _answer(values: Any, decode: Decode,
            take: Callable[[Analysis], pa.Array | pa.ChunkedArray]) -> pa.Array | pa.ChunkedArray:
    column, lengths = _read(values)
    return _shaped(take(analyse(column, decode)), lengths)


def _read(values: Any) -> tuple[pa.ChunkedArray, list[int] | None]:
    """The column as a chunked array, and its chunk lengths (None for a single array)."""
    if isinstance(values, pa.ChunkedArray):
        column, chunked = values, True
    elif isinstance(values, pa.Array):
        column, chunked = pa.chunked_array([values]), False
    elif hasattr(values, "__arrow_c_array__"):
        column, chunked = pa.chunked_array([pa.array(values)]), False
    elif hasattr(values, "__arrow_c_stream__"):
        column, chunked = pa.chunked_array(values), True
    else:
        raise TypeError(
            f"expected one column of Arrow data (a pyarrow Array or ChunkedArray, or an object "
            f"with __arrow_c_array__ or __arrow_c_stream__, such as a Polars Series or a DuckDB "
            f"relation), not {type(values).__name__}"
        )
    column = _one_column(column)
    kind = column.type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_string_view(kind) or pa.types.is_null(kind)):
        raise TypeError(
            f"expected a column of strings, not {column.type}: cast it to string first (a "
            "number's text in Arrow is not always Python's str(), so it is not done silently)"
        )
    return column, [len(chunk) for chunk in column.chunks] if chunked else None


def _one_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A table's stream (a DuckDB relation, a record batch) read as its one column."""
    if not pa.types.is_struct(column.type):
        return column
    if column.type.num_fields != 1:
        names = ", ".join(field.name for field in column.type)
        raise ValueError(
            f"expected one column, got {column.type.num_fields} ({names}): select the column "
            "that holds the DOIs"
        )
    return pa.chunked_array([chunk.field(0) for chunk in column.chunks], column.type.field(0).type)


def _whole(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    return values


def _shaped(result: pa.Array | pa.ChunkedArray,
            lengths: list[int] | None) -> pa.Array | pa.ChunkedArray:
    """``result`` as the question was asked: one array, or chunks of the input's lengths."""
    if lengths is None:
        return _whole(result)
    if isinstance(result, pa.Array):
        result = pa.chunked_array([result])
    if [len(chunk) for chunk in result.chunks] == lengths:
        return result
    pieces, start = [], 0
    for length in lengths:
        pieces.append(_whole(result.slice(start, length)))
        start += length
    return pa.chunked_array(pieces, result.type)
