"""The DOI quality report (``airflow-doi report``): write_report and build_report, lazily.

One self-contained HTML page on the state of a DOI column. Figures (:mod:`.figures`,
:mod:`.resolution`, :mod:`.metadata`) are computed on Arrow arrays with the project's
vectorized engine from inputs read by :mod:`.sources`; the page (:mod:`.html`) embeds its
charts (:mod:`.charts`) as SVG images and carries a Content-Security-Policy that forbids
scripts and every network fetch, so it opens offline and a hostile cell can only ever be shown
as text. :func:`write_report` is the one call a CLI command or an Airflow task needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from airflow_doi.report.build import ReportInputError, build_report, write_report

__all__ = ["ReportInputError", "build_report", "write_report"]


def __getattr__(name: str) -> Any:
    # Lazy: the CLI imports this package to register its subcommand even without the extra.
    if name in __all__:
        from airflow_doi.report import build

        return getattr(build, name)
    raise AttributeError(f"module 'airflow_doi.report' has no attribute {name!r}")
