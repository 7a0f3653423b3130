"""``pl.col("x").doi``: the DOI standard for Polars columns, eager, lazy and streaming.

``import airflow_doi.polars`` registers the ``doi`` namespace on Polars expressions and
Series::

    >>> import polars as pl
    >>> import airflow_doi.polars  # noqa: F401  (registers .doi)
    >>> frame = pl.DataFrame({"doi_raw": ["https://doi.org/10.1000/ABC", "doi: 10.1000/abc", None]})
    >>> frame.select(pl.col("doi_raw").doi.key()).to_series().to_list()
    ['10.1000/ABC', '10.1000/ABC', None]

``key``, ``normalize``, ``valid``, ``reason``, ``url`` and ``validate`` (a struct of ``valid``,
``reason`` and ``doi``) answer row for row what the scalar functions of :mod:`airflow_doi`
give. Each batch goes to :mod:`airflow_doi.arrow` through the Arrow C data interface, on the
native core where it is built; the functions are elementwise, so they run in lazy frames and
in the streaming engine batch by batch. Needs ``polars`` (the ``polars`` extra).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_doi._install import pip_install

try:
    import polars as pl
except ModuleNotFoundError as error:  # the namespace is the [polars] extra's
    raise ModuleNotFoundError(
        f"airflow_doi.polars needs polars: {pip_install('polars')}", name=error.name
    ) from None

from airflow_doi import arrow
from airflow_doi.presentation import DEFAULT_BASE_URL
from airflow_doi.syntax import Decode

__all__ = ["DoiExpr", "DoiSeries"]

#: The Polars type of :func:`validate`'s struct (:data:`airflow_doi.arrow.VALIDATION`).
VALIDATION: pl.DataType = pl.Struct({"valid": pl.Boolean, "reason": pl.String, "doi": pl.String})


def _on_series(function: Callable[..., Any], **options: Any) -> Callable[[pl.Series], pl.Series]:
    """``function`` of :mod:`airflow_doi.arrow` over one Polars Series, as a Series."""

    def run(series: pl.Series) -> pl.Series:
        return pl.Series(series.name, function(series.to_arrow(), **options))

    return run


class _Doi:
    """What the expression and Series namespaces share: one method per scalar function."""

    def _apply(self, function: Callable[..., Any], kind: Any, **options: Any) -> Any:
        raise NotImplementedError

    def key(self, decode: Decode = "auto") -> Any:
        """The comparison key (null where the value is not a DOI)."""
        return self._apply(arrow.key, pl.String, decode=decode)

    def normalize(self, decode: Decode = "auto") -> Any:
        """The normalized DOI (null where the value is not a DOI)."""
        return self._apply(arrow.normalize, pl.String, decode=decode)

    def valid(self, decode: Decode = "auto") -> Any:
        """Whether the value is a valid DOI (false for a null)."""
        return self._apply(arrow.valid, pl.Boolean, decode=decode)

    def reason(self, decode: Decode = "auto") -> Any:
        """Why the value is not a valid DOI; null when it is."""
        return self._apply(arrow.reason, pl.String, decode=decode)

    def url(self, decode: Decode = "auto", base: str = DEFAULT_BASE_URL) -> Any:
        """The resolvable URL, percent-encoded per the IDF tables (null where not a DOI)."""
        return self._apply(arrow.url, pl.String, decode=decode, base=base)

    def validate(self, decode: Decode = "auto") -> Any:
        """``valid``, ``reason`` and ``doi`` in one struct, from one pass."""
        return self._apply(arrow.validate, VALIDATION, decode=decode)


@pl.api.register_expr_namespace("doi")
class DoiExpr(_Doi):
    """``pl.col("x").doi``: elementwise, so lazy and streaming queries run it batch by batch."""

    def __init__(self, expr: pl.Expr) -> None:
        self._expr = expr

    def _apply(self, function: Callable[..., Any], kind: Any, **options: Any) -> pl.Expr:
        return self._expr.map_batches(
            _on_series(function, **options), return_dtype=kind, is_elementwise=True
        )


@pl.api.register_series_namespace("doi")
class DoiSeries(_Doi):
    """``series.doi``: the same functions on an eager Series."""

    def __init__(self, series: pl.Series) -> None:
        self._series = series

    def _apply(self, function: Callable[..., Any], kind: Any, **options: Any) -> pl.Series:
        return _on_series(function, **options)(self._series).cast(kind)
