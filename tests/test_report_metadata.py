"""The report's metadata section: figures of a metadata table, the page, DuckDB, CLI, Chromium.

The table comes in the two shapes the enrichment writes: ``doi_metadata`` of
``DoiEnrichOperator`` (one row per ``doi_key``, typed columns) and the output of
``airflow-doi enrich`` (``input``, ``doi``, ``key``: one row per input cell, so a key repeats
and a cell that is not a DOI has no key). Titles, journals and publishers are server-supplied
text, so the page must show them escaped and nothing else.
"""

from __future__ import annotations

import base64
import csv
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_doi.report import ReportInputError, build_report, write_report
from airflow_doi.report.metadata import (
    READ_COLUMNS,
    TOP_NAMES,
    MetadataFigures,
    UpdatedWork,
    metadata_figures,
)
from airflow_doi.report.sources import read_resolution_table
from tests import test_report_browser
from tests.test_report import COLUMN, SAMPLE, check_inert, cli, sample_cells

#: The columns of ``airflow-doi enrich`` output, in order.
CLI_COLUMNS = [
    "input", "doi", "key", "metadata_status", "title", "csl_type", "issued", "year",
    "container_title", "publisher", "issn", "isbn", "volume", "issue", "page", "author_count",
    "first_author", "language", "license_url", "updated_by", "update_to", "source_host",
    "error", "attempts", "http_status", "fetched_at", "expires_at", "csl_json",
]
HOSTILE_TITLE = "<script>alert(1)</script> & friends"


def cli_row(cell: str, key: str | None, status: str, **values: Any) -> dict[str, Any]:
    """One row of ``airflow-doi enrich`` output: the DOI is the cell, lower-cased."""
    row: dict[str, Any] = dict.fromkeys(CLI_COLUMNS)
    row.update(input=cell, doi=key.lower() if key else None, key=key, metadata_status=status,
               attempts=1, http_status=200 if status == "ok" else 404)
    row.update(values)
    if status == "ok":
        row["csl_json"] = json.dumps({"title": row["title"], "type": row["csl_type"]})
    return row


def cli_rows() -> list[dict[str, Any]]:
    """Seven input rows: five distinct keys (one written twice), one cell that is no DOI."""
    journal, publisher = "Journal of Tests", "Test Press"
    return [
        cli_row("10.1000/A", "10.1000/A", "ok", title="First", csl_type="article-journal",
                issued="2019-05-03", year=2019, container_title=journal, publisher=publisher),
        cli_row("doi:10.1000/a", "10.1000/A", "ok", title="First", csl_type="article-journal",
                issued="2019-05-03", year=2019, container_title=journal, publisher=publisher),
        cli_row("10.1000/B", "10.1000/B", "ok", title="Second", csl_type="article-journal",
                issued="2020", year=2020, container_title=journal, publisher=publisher,
                updated_by="correction:10.5555/fix.1"),
        cli_row("10.1000/C", "10.1000/C", "ok", title=HOSTILE_TITLE, csl_type="book",
                issued="2020-11", year=None, publisher="<b>Evil</b> Press",
                updated_by="correction:10.5555/fix.2; retraction:10.5555/notice.1"),
        cli_row("10.5555/NOTICE.1", "10.5555/NOTICE.1", "ok", title="Retraction: Third",
                csl_type="article-journal", issued=None, year=None, container_title=journal,
                publisher=publisher, update_to="retraction:10.1000/c"),
        cli_row("10.1000/GONE", "10.1000/GONE", "not_found"),
        cli_row("not a doi", None, "invalid"),
    ]


def as_arrow(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CLI_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def section(page: str) -> str:
    """The HTML of the metadata section alone."""
    found = re.search(r"<section><h2>Metadata</h2>.*?</section>", page, re.DOTALL)
    assert found, "no metadata section"
    return found.group(0)


# --- figures -------------------------------------------------------------------------------


def test_figures_of_the_cli_output_count_distinct_keys():
    figures = metadata_figures(as_arrow(cli_rows()))
    assert figures.rows == 7
    assert figures.keys == 5  # 10.1000/A is on two rows; "not a doi" has no key
    assert figures.rows_without_key == 1
    assert figures.statuses == {"ok": 4, "not_found": 1}
    assert figures.ok == 4 and figures.ok_share == pytest.approx(0.8)
    assert figures.types == {"article-journal": 3, "book": 1}
    # year where it is, else the start of issued (10.1000/C: 2020-11); the notice has neither.
    assert figures.years == {2019: 1, 2020: 2}
    assert figures.no_year == 1
    assert figures.containers == [("Journal of Tests", 3)]
    assert figures.publishers == [("Test Press", 3), ("<b>Evil</b> Press", 1)]
    assert figures.distinct_publishers == 2
    assert figures.updated == 2 and figures.retracted == 1
    assert figures.update_types == {"correction": 2, "retraction": 1}
    # Retracted first, whatever the DOI order; each notice's type and DOI kept.
    assert figures.updated_works == [
        UpdatedWork("10.1000/c", HOSTILE_TITLE,
                    (("correction", "10.5555/fix.2"), ("retraction", "10.5555/notice.1"))),
        UpdatedWork("10.1000/b", "Second", (("correction", "10.5555/fix.1"),)),
    ]
    assert figures.notices == 1 and figures.notice_types == {"retraction": 1}


def test_figures_of_the_operator_table_with_typed_columns():
    table = pa.table({
        "doi_key": ["10.1/A", "10.1/B", "10.1/C", "10.1/D"],
        "doi": ["10.1/a", "10.1/b", "10.1/c", "10.1/d"],
        "metadata_status": ["ok", "ok", "no_metadata", "error"],
        "csl_type": ["dataset", "dataset", None, None],
        "year": pa.array([1999, 2001, None, None], pa.int32()),
        "updated_by": pa.array([None, None, None, None], pa.string()),
        "update_to": pa.array([None, None, None, None], pa.string()),
        "fetched_at": [datetime(2025, 1, 1, tzinfo=timezone.utc)] * 4,
    })
    figures = metadata_figures(table)
    assert (figures.rows, figures.keys, figures.rows_without_key) == (4, 4, 0)
    assert figures.statuses == {"ok": 2, "no_metadata": 1, "error": 1}
    assert figures.years == {1999: 1, 2001: 1}
    assert figures.updated == 0 and figures.retracted == 0 and figures.updated_works == []
    assert figures.notices == 0
    # Columns the table lacks: their figures are absent, not zero.
    assert figures.containers is None and figures.publishers is None


def test_top_names_are_cut_and_many_years_go_by_decade():
    rows = [
        {"key": f"10.1/{n}", "metadata_status": "ok", "publisher": f"P{n % 12:02d}",
         "year": str(1900 + n)}
        for n in range(60)
    ]
    figures = metadata_figures(pa.Table.from_pylist(rows))
    assert figures.distinct_publishers == 12
    assert figures.publishers is not None and len(figures.publishers) == TOP_NAMES
    assert figures.publishers[0] == ("P00", 5)
    assert len(figures.years or {}) == 60
    page = build_report(SAMPLE, COLUMN, metadata=rows)[0]
    assert "Publishers (top 10 of 12)" in page
    assert "DOIs by decade issued" in page and "Years (1900–1959)" in page


@pytest.mark.parametrize(
    ("columns", "missing"),
    [
        (["doi", "status", "title"], "no column doi_key (or key) and no column metadata_status"),
        (["doi_key", "doi", "status"], "no column metadata_status ("),
        (["input", "metadata_status"], "no column doi_key (or key) ("),
    ],
)
def test_a_table_without_the_needed_columns_is_refused_by_name(tmp_path, columns, missing):
    path = tmp_path / "not_metadata.csv"
    path.write_text(",".join(columns) + "\n" + ",".join("x" for _ in columns) + "\n")
    with pytest.raises(ReportInputError) as raised:
        build_report(SAMPLE, COLUMN, metadata=path)
    said = str(raised.value)
    assert said.startswith(f"{path}: ") and missing in said
    assert f"columns: {', '.join(columns)}" in said
    with pytest.raises(ReportInputError, match=r"^metadata rows: .*no column metadata_status"):
        build_report(SAMPLE, COLUMN, metadata=[{"key": "10.1/x"}])


# --- the page ------------------------------------------------------------------------------


def test_section_shows_the_figures_and_escapes_server_text(tmp_path):
    path = write_csv(tmp_path / "enriched.csv", cli_rows())
    page, figures = build_report(SAMPLE, COLUMN, metadata=path)
    assert isinstance(figures.metadata, MetadataFigures) and figures.metadata.keys == 5
    check_inert(page)
    html = section(page)
    assert "5 DOIs (distinct comparison keys)" in html and "4 (80.0%) with metadata" in html
    assert "Read from 7 rows; 1 row without a valid DOI left out." in html
    assert "With metadata but no year: 1." in html
    assert "Retracted or corrected works: 2 (1 retracted)" in html
    assert "Notices: 1" in html
    # The hostile title and publisher are shown, escaped, and are nowhere markup.
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; friends" in html
    assert "&lt;b&gt;Evil&lt;/b&gt; Press" in html
    assert HOSTILE_TITLE not in page and "<b>Evil" not in page
    # The retracted work comes first, its notice DOIs are doi.org links.
    assert html.index("10.1000/c") < html.index("10.1000/b")
    assert 'href="https://doi.org/10.5555/notice.1"' in html
    assert '<span class="retraction">retraction</span>' in html
    charts = {alt for alt in re.findall(r'<img alt="([^"]*)"', html)}
    assert {"DOIs by metadata status", "CSL types", "DOIs by year issued"} <= charts
    # Chart labels come from the data too: drawn as text inside the SVG, never markup.
    for encoded in re.findall(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)", html):
        svg = base64.b64decode(encoded).decode("utf-8")
        assert "<script" not in svg.lower()
    cards = re.findall(r'<div class="label">([^<]*)</div><div class="value">([^<]*)</div>', page)
    assert ("With metadata", "80.0%") in cards and ("Retracted", "1") in cards


def test_no_metadata_table_no_section():
    page, figures = build_report(SAMPLE, COLUMN)
    assert figures.metadata is None
    assert "<h2>Metadata</h2>" not in page and "With metadata" not in page


@dataclass
class FakeResult:
    """Stands for ``MetadataResult``: a dataclass of the CLI's columns, no ``as_row``."""

    input: str
    doi: str | None
    key: str | None
    metadata_status: str
    title: str | None = None
    year: int | None = None
    fetched_at: datetime | None = None


def test_result_objects_in_memory():
    from airflow_doi.metadata import MetadataResult

    when = datetime(2025, 1, 1, tzinfo=timezone.utc)
    results = [
        MetadataResult("10.1/a", "10.1/a", "10.1/A", "ok", fetched_at=when,
                       fields={"title": "T", "year": 2001, "updated_by": "retraction:10.1/n"}),
        MetadataResult("x", None, None, "invalid"),
    ]
    _, figures = build_report(SAMPLE, COLUMN, metadata=results)  # through as_row()
    assert figures.metadata.keys == 1 and figures.metadata.years == {2001: 1}
    assert figures.metadata.retracted == 1 and figures.metadata.rows_without_key == 1
    rows = [FakeResult("10.1/a", "10.1/a", "10.1/A", "ok", "T", 1999, when),
            FakeResult("x", None, None, "invalid")]
    _, figures = build_report(SAMPLE, COLUMN, metadata=rows)  # dataclass fields
    assert figures.metadata.keys == 1 and figures.metadata.years == {1999: 1}


# --- a table in the source's database --------------------------------------------------------


def test_duckdb_doi_metadata_table(tmp_path):
    import duckdb

    database = tmp_path / "catalogue.duckdb"
    with duckdb.connect(str(database)) as con:
        con.execute("create table works (id integer, doi_raw varchar)")
        con.executemany("insert into works values (?, ?)", list(enumerate(sample_cells())))
        con.execute(
            "create table doi_metadata (doi_key varchar primary key, doi varchar, "
            "metadata_status varchar, title varchar, csl_type varchar, issued varchar, "
            "year integer, container_title varchar, publisher varchar, updated_by varchar, "
            "update_to varchar, attempts integer, fetched_at timestamptz, csl_json json)"
        )
        con.execute(
            "insert into doi_metadata values "
            "('10.1000/182', '10.1000/182', 'ok', ?, 'report', '2005', 2005, null, "
            "'DOI Foundation', 'retraction:10.5555/r.1', null, 1, now(), '{\"a\": 1}'), "
            "('10.1038/171737A0', '10.1038/171737a0', 'ok', 'Molecular structure', "
            "'article-journal', '1953-04-25', 1953, 'Nature', 'Springer', null, null, 1, "
            "now(), '{}'), "
            "('10.1000/X', '10.1000/x', 'not_found', null, null, null, null, null, null, "
            "null, null, 3, now(), null)",
            [HOSTILE_TITLE],
        )
        con.execute("create table doi_resolution (doi_key varchar, status varchar)")
    page, figures = build_report(
        f"duckdb:///{database}", COLUMN, table="works", metadata_table="doi_metadata"
    )
    metadata = figures.metadata
    assert metadata.keys == 3 and metadata.statuses == {"ok": 2, "not_found": 1}
    assert metadata.years == {1953: 1, 2005: 1}
    assert metadata.containers == [("Nature", 1)]
    assert [w.doi for w in metadata.updated_works] == ["10.1000/182"]
    assert metadata.retracted == 1
    assert figures.resolution is None  # only the section asked for
    check_inert(page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(page)
    # The large csl_json column is never selected: it comes back empty, by name only.
    read = read_resolution_table(f"duckdb:///{database}", table="doi_metadata",
                                 keep=READ_COLUMNS)
    assert read.column_names[-3:] == ["attempts", "fetched_at", "csl_json"]
    assert read["csl_json"].null_count == 3 and read["doi_key"].null_count == 0
    with pytest.raises(ReportInputError) as raised:
        build_report(f"duckdb:///{database}", COLUMN, table="works",
                     metadata_table="doi_resolution")
    assert str(raised.value).startswith("doi_resolution: the metadata table has no column "
                                        "metadata_status (columns: doi_key, status)")


# --- command line --------------------------------------------------------------------------


def test_cli_metadata_file(tmp_path, capsys):
    enriched = write_csv(tmp_path / "enriched.csv", cli_rows())
    target = tmp_path / "r.html"
    assert cli(str(SAMPLE), "--column", COLUMN, "--metadata", str(enriched),
               "-o", str(target)) == 0
    html = section(target.read_text(encoding="utf-8"))
    assert "Retracted or corrected works: 2 (1 retracted)" in html
    not_metadata = tmp_path / "resolved.csv"
    not_metadata.write_text("input,doi,key,status\n10.1/a,10.1/a,10.1/A,resolved\n")
    assert cli(str(SAMPLE), "--column", COLUMN, "--metadata", str(not_metadata),
               "-o", str(tmp_path / "bad.html")) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("airflow-doi report: error: ")
    assert f"{not_metadata}: the metadata table has no column metadata_status" in err
    assert not (tmp_path / "bad.html").exists()
    assert cli(str(SAMPLE), "--column", COLUMN, "--metadata-table", "doi_metadata",
               "-o", str(tmp_path / "bad.html")) == 2
    assert "--metadata-table needs a database input" in capsys.readouterr().err


# --- in a browser --------------------------------------------------------------------------

browser = test_report_browser.browser


def test_metadata_section_in_chromium(browser, tmp_path):
    enriched = write_csv(tmp_path / "enriched.csv", cli_rows())
    page_path = write_report(tmp_path / "report.html", SAMPLE, COLUMN, metadata=enriched)
    with test_report_browser.open_page(browser, page_path) as page:
        state = json.loads(page.evaluate("""(() => {
          const section = [...document.querySelectorAll('section')]
            .find(s => s.querySelector('h2')?.textContent === 'Metadata');
          return JSON.stringify({
            pwned: window.__pwned === undefined ? null : window.__pwned,
            scripts: document.scripts.length,
            text: section ? section.innerText : null,
            charts: section ? [...section.querySelectorAll('figure.chart img')].map(i => [
              i.complete, i.naturalWidth, i.getBoundingClientRect().width]) : [],
            links: section ? [...section.querySelectorAll('a')].map(a => a.href) : [],
          });
        })()"""))
        assert page.problems() == []
    assert state["scripts"] == 0 and state["text"] is not None
    assert HOSTILE_TITLE in state["text"]  # shown as text
    assert "Retracted or corrected works: 2 (1 retracted)" in state["text"]
    assert len(state["charts"]) >= 3
    for complete, natural_width, shown_width in state["charts"]:
        assert complete and natural_width > 200 and shown_width > 200
    assert "https://doi.org/10.5555/notice.1" in state["links"]


def test_a_cell_never_asked_is_no_doi_of_the_table_even_with_a_key(tmp_path):
    """Issue 34: the CLI's output gives a reserved suffix (10.1000/a/b) a key but never asks
    for it (invalid); doi_metadata has no row for it. Both count the same DOIs."""
    rows = [*cli_rows(), cli_row("10.1000/a/b", "10.1000/A/B", "invalid")]
    figures = metadata_figures(as_arrow(rows))
    assert (figures.keys, figures.rows_without_key) == (5, 2)
    assert "invalid" not in figures.statuses
