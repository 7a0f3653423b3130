"""Read, compute, render, write: the report in one call, for the CLI and for Airflow tasks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from airflow_doi._version import __version__
from airflow_doi.db.connect import is_database_url
from airflow_doi.files.read import CsvOptions, TableInputError
from airflow_doi.files.write import replacing
from airflow_doi.report.figures import Figures, compute_figures
from airflow_doi.report.html import render_html
from airflow_doi.report.metadata import READ_COLUMNS, MetadataTableError, metadata_figures
from airflow_doi.report.resolution import ResolutionTableError, resolution_figures
from airflow_doi.report.sources import Column, as_table, read_column, read_resolution_table
from airflow_doi.resolver.config import redact_url
from airflow_doi.syntax import Decode

__all__ = ["ReportInputError", "build_report", "write_report"]

log = logging.getLogger(__name__)

#: The input cannot be used as asked (no such file, table or column): exit code 2.
ReportInputError = TableInputError


def build_report(
    source: str | Path | None,
    column: str,
    *,
    table: str | None = None,
    conn_id: str | None = None,
    resolution: str | Path | Iterable[Any] | None = None,
    resolution_table: str | None = None,
    metadata: str | Path | Iterable[Any] | None = None,
    metadata_table: str | None = None,
    decode: Decode = "auto",
    input_format: str | None = None,
    encoding: str | None = None,
    delimiter: str | None = None,
    na_values: tuple[str, ...] | None = None,
    title: str | None = None,
    on_note: Callable[[str, str], None] | None = None,
) -> tuple[str, Figures]:
    """The report's HTML and its :class:`~airflow_doi.report.figures.Figures`.

    ``source`` is a CSV/Parquet path or a database URL (``sqlite:///x.db``,
    ``duckdb:///x.duckdb``, ``postgresql://...``; then ``table`` names the table), or ``None``
    with ``conn_id`` (an Airflow SQL connection) and ``table``. ``resolution`` is a resolution
    file (the output of ``airflow-doi resolve``), or rows in memory (``ResolutionResult``
    objects, dicts, an Arrow table); ``resolution_table`` is a table in the same database as
    the source (e.g. ``doi_resolution``). ``metadata`` and ``metadata_table`` are the same for
    a metadata table (the output of ``airflow-doi enrich``, ``MetadataResult`` objects, or
    ``doi_metadata`` written by ``DoiEnrichOperator``); each section is on the page only when
    its table is given. ``encoding`` and ``delimiter`` apply to CSV files, as for
    ``airflow-doi normalize`` (None: found from the file), and so do ``na_values`` (the DOI
    column's missing-value markers; None: pandas' defaults). ``on_note(kind, text)`` hears how
    a file was read (``note`` or ``warning``); by default it is logged.
    """
    if decode not in ("auto", "always", "never"):
        raise ReportInputError(f"decode must be auto, always or never, not {decode!r}")
    found = read_column(
        source, column, table=table, conn_id=conn_id, input_format=input_format,
        options=CsvOptions(encoding=encoding, delimiter=delimiter, na_values=na_values),
    )
    _tell(found, source, column, on_note)
    figures = compute_figures(
        found.values, source=f"{_label(source, conn_id)}{' table ' + table if table else ''}",
        column=column, decode=decode, overrides=found.overrides, malformed=found.malformed,
    )
    figures.resolution = _section(
        "resolution", _rows(source, conn_id, resolution, resolution_table),
        resolution_table or resolution,
        lambda rows: resolution_figures(rows, figures.key_rows), ResolutionTableError,
    )
    figures.metadata = _section(
        "metadata", _rows(source, conn_id, metadata, metadata_table, keep=READ_COLUMNS),
        metadata_table or metadata, metadata_figures, MetadataTableError,
    )
    return render_html(figures, title=title, version=__version__), figures


def _tell(
    found: Column,
    source: str | Path | None,
    column: str,
    on_note: Callable[[str, str], None] | None,
) -> None:
    """Pass on how a file was read (to ``on_note``, else the log), and warn of cells that are
    not UTF-8 in a file (a database hands text over already decoded)."""
    for kind, text in found.notes:
        if on_note is not None:
            on_note(kind, text)
        else:
            log.log(logging.WARNING if kind == "warning" else logging.INFO, "%s: %s", source, text)
    if found.overrides and source is not None and not is_database_url(source):
        log.warning(
            "%s: %s of column %s %s not UTF-8 (the report counts them as bad_encoding); "
            "if the file is Latin-1 or Windows-1252, run again with --encoding latin-1 or "
            "--encoding cp1252", source, _cells(len(found.overrides)), column,
            "was" if len(found.overrides) == 1 else "were",
        )


def _rows(
    source: str | Path | None,
    conn_id: str | None,
    given: str | Path | Iterable[Any] | None,
    table: str | None,
    *,
    keep: tuple[str, ...] | None = None,
) -> pa.Table | None:
    """The rows of an optional section (resolution, metadata): ``table`` in the source's
    database, else ``given`` (a file, or rows in memory); None when neither is there."""
    if table is not None:
        return read_resolution_table(source, table=table, conn_id=conn_id, keep=keep)
    if isinstance(given, str | Path):
        return read_resolution_table(given, keep=keep)
    if given is not None:
        return as_table(given)
    return None


def _section(
    name: str,
    rows: pa.Table | None,
    given: str | Path | Iterable[Any] | None,
    figures_of: Callable[[pa.Table], Any],
    refusal: type[ValueError],
) -> Any:
    """The figures of a section's ``rows`` (None without rows); a table the section cannot
    use is a ``ReportInputError`` naming it (``given``: its table or file, if it has one)."""
    if rows is None:
        return None
    try:
        return figures_of(rows)
    except refusal as error:
        where = given if isinstance(given, str | Path) else ""
        raise ReportInputError(f"{where or name + ' rows'}: {error}") from None


def write_report(
    output: str | Path, source: str | Path | None, column: str, **options: Any
) -> Path:
    """Build the report (see :func:`build_report` for the options) and write it to ``output``.

    The file appears whole or not at all (written beside, then renamed), so a task that
    fails half-way never leaves a truncated page where the last good one was. Returns the
    path, absolute, so a task can log it.
    """
    page, figures = build_report(source, column, **options)
    with replacing(output) as (where, target), open(where, "w", encoding="utf-8") as stream:
        stream.write(page)
    log.info(
        "DOI report: %s (%s rows, %s valid, %s duplicated DOIs)",
        target, f"{figures.rows:,}", f"{figures.valid:,}", f"{figures.duplicate_keys:,}",
    )
    return target


def _cells(count: int) -> str:
    return f"{count:,} cell{'' if count == 1 else 's'}"


def _label(source: str | Path | None, conn_id: str | None) -> str:
    """How the page names its input: a file's name, a URL without its password, a connection."""
    if conn_id is not None:
        return f"connection {conn_id}"
    if source is not None and is_database_url(source):
        return redact_url(str(source))
    return Path(str(source)).name
