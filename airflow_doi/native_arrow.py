"""The native core over Arrow arrays: one C pass per value, the GIL released, threads.

``airflow_doi._native`` (``native/doi_arrow.c`` over ``native/doi_core.h``) is compiled by
setuptools at install time when a C compiler is present. Where it is missing (no compiler at
install time), stale (its sources changed since it was built) or switched off
(``AIRFLOW_DOI_NATIVE=0``), :func:`module` returns ``None``, says why once in the log, and
every caller takes the pure-Arrow path of :mod:`airflow_doi._arrow`, which gives the same
answers more slowly. The tests hold both paths to the scalar functions.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from types import ModuleType
from typing import Any, Final, Literal

import numpy as np
import pyarrow as pa

from airflow_doi.presentation import DEFAULT_BASE_URL
from airflow_doi.syntax import Decode

__all__ = ["DISABLE_ENV", "SLICE_ROWS", "module", "run", "status"]

log = logging.getLogger(__name__)

#: Set to ``0`` to use the pure-Arrow path even where the native module is built.
DISABLE_ENV: Final[str] = "AIRFLOW_DOI_NATIVE"
#: Rows per call into C: each slice runs on a worker thread with the GIL released.
SLICE_ROWS: Final[int] = 1 << 16
#: The sources the module's SOURCE_DIGEST was computed from (setup.py computes the same).
SOURCES: Final[tuple[str, ...]] = ("doi_arrow.c", "doi_core.h", "doi_tables.h")
_DECODES: Final[dict[str, int]] = {"auto": 0, "always": 1, "never": 2}
Output = Literal["doi", "key", "url", "encode"]
_STRING: Final[pa.DataType] = pa.large_string()


def source_digest() -> str:
    """The digest of the installed C sources (``setup.py`` bakes the same into the module)."""
    root = resources.files("airflow_doi") / "native"
    sha = hashlib.sha256()
    for name in SOURCES:
        sha.update((root / name).read_bytes())
    return sha.hexdigest()[:16]


@functools.cache
def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return None, f"switched off ({DISABLE_ENV}=0)"
    try:
        from airflow_doi import _native
    except ImportError:
        return None, (
            "not built (pip found no C compiler when it installed airflow-doi); reinstall "
            "with gcc and the Python headers present (Debian: gcc python3-dev) for the fast path"
        )
    if _native.SOURCE_DIGEST != source_digest():
        return None, (
            "built from older sources than the installed ones; reinstall airflow-doi "
            "(pip install --force-reinstall --no-deps ...) to rebuild it"
        )
    return _native, "the native core (airflow_doi._native)"


@functools.cache
def module() -> ModuleType | None:
    """The compiled module, or ``None`` (logged once) when the pure-Arrow path must serve."""
    native, why = _load()
    if native is None:
        log.info("airflow-doi: native DOI core %s; using the slower pure-Arrow path", why)
    return native


def status() -> str:
    """One line: which engine serves the vectorized functions, and why."""
    native, why = _load()
    return f"native: {why}" if native is not None else f"pure Arrow: the native core is {why}"


def _chunks(values: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    out = []
    for chunk in chunks:
        if not (pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type)):
            chunk = chunk.cast(_STRING)  # string_view, dictionary, null: read as text
        for start in range(0, len(chunk), SLICE_ROWS):
            out.append(chunk.slice(start, SLICE_ROWS))
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
    if decode not in _DECODES:
        raise ValueError(f"decode must be 'auto', 'always' or 'never', not {decode!r}")
    what = {"doi": native.OUT_DOI, "key": native.OUT_KEY, "url": native.OUT_URL,
            "encode": native.OUT_ENCODE}[output]
    mode = _DECODES[decode]
    base_bytes = base.encode("utf-8")

    def one(chunk: pa.Array) -> tuple[pa.Array, Any]:
        schema, array = chunk.__arrow_c_array__()
        validity, offsets, data, codes, nulls = native.run(schema, array, mode, what, base_bytes)
        buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(offsets),
                   pa.py_buffer(data)]
        text = pa.Array.from_buffers(_STRING, len(chunk), buffers, null_count=nulls)
        return text, codes

    slices = _chunks(values)
    workers = min(threads or os.cpu_count() or 1, len(slices))
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(one, slices))
    else:
        results = [one(chunk) for chunk in slices]
    column = pa.chunked_array([text for text, _ in results], _STRING)
    if output == "encode":
        return column, None
    codes = (np.concatenate([np.frombuffer(c, np.int8) for _, c in results]) if results
             else np.zeros(0, np.int8))
    return column, codes
