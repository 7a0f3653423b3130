"""The native core over Arrow arrays: one C pass per value, the GIL released, threads.

:mod:`airflow_doi.native` finds the compiled module (or says why there is none); this
module feeds it Arrow string arrays through the C Data Interface, slice by slice on a thread
pool, and builds the answers from the buffers it returns. Where :func:`module` is ``None``,
callers take the pure-Arrow path of :mod:`airflow_doi.columns`, which gives the same answers
more slowly. The tests hold both paths to the scalar functions.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Literal, TypeVar

import numpy as np
import pyarrow as pa

from airflow_doi.native import DECODES, DISABLE_ENV, module, status
from airflow_doi.presentation import DEFAULT_BASE_URL
from airflow_doi.syntax import Decode

__all__ = ["CALL_ROWS", "DISABLE_ENV", "map_slices", "module", "run", "status"]

#: Rows per call into C: each slice runs on a worker thread with the GIL released.
CALL_ROWS: Final[int] = 1 << 16
Output = Literal["doi", "key", "url", "encode"]
_STRING: Final[pa.DataType] = pa.large_string()


T = TypeVar("T")
R = TypeVar("R")


def map_slices(function: Callable[[T], R], slices: list[T], threads: int | None = None) -> list[R]:
    """``function`` over ``slices`` in order, on a thread pool when there is more than one.

    The work inside releases the GIL (the C core, Arrow kernels). A pool per call rather than
    a shared one: a forked Airflow worker would inherit a shared pool without its threads.
    """
    workers = min(threads or os.cpu_count() or 1, len(slices))
    if workers <= 1:
        return [function(item) for item in slices]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(function, slices))


def _chunks(values: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    out = []
    for chunk in chunks:
        if not (pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type)):
            chunk = chunk.cast(_STRING)  # string_view, dictionary, null: read as text
        for start in range(0, len(chunk), CALL_ROWS):
            out.append(chunk.slice(start, CALL_ROWS))
    return out


def run(
    values: pa.Array | pa.ChunkedArray,
    decode: Decode = "auto",
    output: Output = "doi",
    *,
    base: str = DEFAULT_BASE_URL,
    threads: int | None = None,
) -> tuple[pa.ChunkedArray, np.ndarray[Any, np.dtype[np.int8]] | None]:
    """Every value through the C core: the ``output`` column and a reason code per row.

    ``output``: ``doi`` (normalized), ``key`` (comparison key), ``url`` (``base`` + the
    encoded DOI), or ``encode`` (the values are normalized DOIs already: URLs only, no codes).
    Codes index :data:`airflow_doi.syntax.REASONS`, ``-1`` where valid. Raises ``RuntimeError``
    when the module is not available: check :func:`module` first.
    """
    native = module()
    if native is None:
        raise RuntimeError(status())
    if decode not in DECODES:
        raise ValueError(f"decode must be 'auto', 'always' or 'never', not {decode!r}")
    what = {"doi": native.OUT_DOI, "key": native.OUT_KEY, "url": native.OUT_URL,
            "encode": native.OUT_ENCODE}[output]
    mode = DECODES[decode]
    base_bytes = base.encode("utf-8")

    def one(chunk: pa.Array) -> tuple[pa.Array, Any]:
        schema, array = chunk.__arrow_c_array__()
        validity, offsets, data, codes, nulls = native.run(schema, array, mode, what, base_bytes)
        buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(offsets),
                   pa.py_buffer(data)]
        text = pa.Array.from_buffers(_STRING, len(chunk), buffers, null_count=nulls)
        return text, codes

    results = map_slices(one, _chunks(values), threads)
    column = pa.chunked_array([text for text, _ in results], _STRING)
    if output == "encode":
        return column, None
    codes = (np.concatenate([np.frombuffer(c, np.int8) for _, c in results]) if results
             else np.zeros(0, np.int8))
    return column, codes
