"""``Series.doi``: the DOI standard for whole pandas columns.

``import airflow_doi.pandas`` registers the accessor::

    >>> import pandas as pd
    >>> import airflow_doi.pandas  # noqa: F401
    >>> pd.Series(["https://doi.org/10.1000/ABC", "doi: 10.1000/abc", None]).doi.key().tolist()
    ['10.1000/ABC', '10.1000/ABC', <NA>]

Every method gives, row for row, what the scalar function of :mod:`airflow_doi.syntax` or
:mod:`airflow_doi.presentation` gives for that cell (invalid -> null instead of an exception).
The work happens in :mod:`airflow_doi.columns` on pyarrow compute kernels; only rows outside
the common case visit the scalar code.

Missing values (``None``, ``NaN``, ``pd.NA``) come out null with reason ``empty``. Cells that
are neither text nor missing (numbers, booleans) are judged as ``str(value)``; ``bytes`` are
read as UTF-8 (``bad_encoding`` when they are not), exactly as the scalar functions read them.

Output dtypes: text columns are ``pd.StringDtype("pyarrow")`` (``"string[pyarrow]"``, missing
values are ``pd.NA``); ``valid`` is numpy ``bool``. The index and name of the input are kept.
"""

from __future__ import annotations

from typing import Any, Final

import pyarrow as pa

from airflow_doi._install import pip_install

try:
    import pandas as pd
except ModuleNotFoundError as error:  # the accessor is the [pandas] extra's
    raise ModuleNotFoundError(
        f"airflow_doi.pandas needs pandas: {pip_install('pandas')}", name=error.name
    ) from None

from airflow_doi.columns import Analysis, analyse, keys
from airflow_doi.presentation import DEFAULT_BASE_URL
from airflow_doi.syntax import Decode, is_missing

__all__ = ["STRING_DTYPE", "DoiAccessor"]

#: dtype of every text column the accessor returns.
STRING_DTYPE: Final[pd.StringDtype] = pd.StringDtype("pyarrow")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: Arrow cannot hold them
        return False
    return True


def _to_arrow(series: pd.Series[Any]) -> tuple[pa.Array | pa.ChunkedArray, dict[int, object]]:
    """The column as Arrow text, plus the cells only the scalar path can judge.

    Arrow-backed string columns (pandas' default ``str`` dtype when pyarrow is installed) are
    used without a copy; anything else goes through Python objects once.
    """
    dtype = series.dtype
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        return pa.array(series.array), {}
    if isinstance(dtype, pd.ArrowDtype) and (
        pa.types.is_string(dtype.pyarrow_dtype) or pa.types.is_large_string(dtype.pyarrow_dtype)
    ):
        return pa.array(series.array), {}
    cells = series.to_numpy(dtype=object, na_value=None)
    try:
        return pa.array(cells, type=pa.large_string(), from_pandas=True), {}
    except (pa.ArrowException, UnicodeError):
        pass  # mixed types, bytes that are not UTF-8, lone surrogates: sort them cell by cell
    texts: list[str | None] = []
    overrides: dict[int, object] = {}
    for row, cell in enumerate(cells):
        if is_missing(cell):
            texts.append(None)
            continue
        if isinstance(cell, (bytes, bytearray)):
            text: object = cell  # the scalar path decodes it or reports bad_encoding
        else:
            text = cell if isinstance(cell, str) else str(cell)
            if _encodable(text):
                texts.append(text)
                continue
        texts.append(None)
        overrides[row] = text
    return pa.array(texts, type=pa.large_string()), overrides


def _text(values: pa.ChunkedArray, like: pd.Series[Any], name: object) -> pd.Series[Any]:
    return pd.Series(
        pd.arrays.ArrowStringArray(values), index=like.index, name=name, copy=False
    )


@pd.api.extensions.register_series_accessor("doi")
class DoiAccessor:
    """Vectorized :mod:`airflow_doi` for a Series of DOIs in any form."""

    def __init__(self, series: pd.Series[Any]) -> None:
        self._series = series

    def _analyse(self, decode: Decode) -> Analysis:
        values, overrides = _to_arrow(self._series)
        return analyse(values, decode, overrides)

    def normalize(self, *, decode: Decode = "auto") -> pd.Series[Any]:
        """:func:`airflow_doi.normalize` per row; null where it would raise."""
        return _text(self._analyse(decode).doi, self._series, self._series.name)

    def key(self, *, decode: Decode = "auto") -> pd.Series[Any]:
        """:func:`airflow_doi.comparison_key` per row; null where it would raise."""
        values, overrides = _to_arrow(self._series)
        return _text(keys(values, decode, overrides), self._series, self._series.name)

    def url(self, base: str = DEFAULT_BASE_URL, *, decode: Decode = "auto") -> pd.Series[Any]:
        """:func:`airflow_doi.to_url` per row; null where it would raise."""
        return _text(self._analyse(decode).url(base), self._series, self._series.name)

    def suggest(self, *, verify: bool = False, **resolver_options: Any) -> pd.DataFrame:
        """Suggested repairs of damaged DOIs: ``doi_suggestion``, ``doi_suggestion_rule``,
        ``doi_suggestion_verified`` per row, as ``airflow-doi repair`` writes them.

        Without ``verify`` nothing is sent: each distinct value gets its likeliest candidate
        from :func:`airflow_doi.repair.suggest_repairs` (verified is null; rules that are only
        ever accepted once the proxy confirms them are left out). With ``verify=True`` the
        candidates go through the resolver (the ``[resolve]`` extra; ``resolver_options`` are
        :func:`airflow_doi.repair.verify.repair`'s: ``base_url=``, ``rate=``, ``cache=``...)
        and a value whose own DOI exists is never repaired.
        """
        values = [None if _missing(v) else v for v in self._series.tolist()]
        if verify:
            from airflow_doi.repair.verify import repair, repair_columns

            columns = repair_columns(repair(values, verify=True, **resolver_options))
        else:
            from airflow_doi.repair.rules import suggest_repairs

            best: dict[object, tuple[str | None, str | None]] = {}
            for value in values:
                if value not in best:
                    shown = next((c for c in suggest_repairs(value) if not c.verify_only), None)
                    best[value] = (shown.doi, shown.rule) if shown else (None, None)
            columns = {
                "doi_suggestion": [best[v][0] for v in values],
                "doi_suggestion_rule": [best[v][1] for v in values],
                "doi_suggestion_verified": [None] * len(values),
            }
        index = self._series.index
        return pd.DataFrame(
            {
                "doi_suggestion": pd.Series(columns["doi_suggestion"], index=index,
                                            dtype=STRING_DTYPE),
                "doi_suggestion_rule": pd.Series(columns["doi_suggestion_rule"], index=index,
                                                 dtype=STRING_DTYPE),
                "doi_suggestion_verified": pd.Series(columns["doi_suggestion_verified"],
                                                     index=index, dtype="boolean"),
            },
            index=index,
        )

    def validate(self, *, decode: Decode = "auto") -> pd.DataFrame:
        """:func:`airflow_doi.validate` per row: columns ``doi``, ``key``, ``valid``, ``reason``."""
        result = self._analyse(decode)
        index = self._series.index
        return pd.DataFrame(
            {
                "doi": _text(result.doi, self._series, "doi"),
                "key": _text(result.key(), self._series, "key"),
                "valid": pd.Series(result.valid, index=index, name="valid"),
                "reason": _text(result.reason, self._series, "reason"),
            },
            index=index,
        )


def _missing(value: object) -> bool:
    """None, NaN, NaT and pd.NA: a cell with nothing in it."""
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # list-likes
        return False
