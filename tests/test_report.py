"""``airflow-doi report``: figures, sources (files, SQLite, DuckDB, PostgreSQL), safety, CLI."""

from __future__ import annotations

import argparse
import csv
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import airflow_doi
from airflow_doi.cli import report as report_cli
from airflow_doi.report import build_report, write_report
from airflow_doi.report.figures import compute_figures, forms_of
from airflow_doi.report.html import cell
from tests.conftest import ROOT, syntax_vectors

SAMPLE = ROOT / "examples" / "data" / "catalogue.csv"
MESSY = ROOT / "examples" / "data" / "messy_dois.csv"
COLUMN = "doi_raw"


def sample_cells(path: Path = SAMPLE) -> list[str]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [row[COLUMN] for row in csv.DictReader(handle)]


def resolution_run(base_url: str) -> list[dict[str, Any]]:
    """Resolve and ask Which RA? for the sample over loopback: one row per cell, with ``ra``.

    The proxy knows every valid sample DOI except ``10.1109/CVPR.2016.90`` and those of the
    test prefix ``10.5555`` (not_found); the sample's ``10.1000`` DOIs are registered with
    mEDRA, the rest with DataCite.
    """
    from airflow_doi import resolve
    from airflow_doi.resolver import ResolverConfig
    from airflow_doi.resolver.batch import which_ra

    config = ResolverConfig(rate=200, concurrency=4, backoff_base=0.02, timeout=5)
    cells = sample_cells()
    results = resolve(cells, config=config, base_url=base_url)
    agencies = which_ra(cells, config=config, base_url=base_url)
    rows = []
    for result, agency in zip(results, agencies, strict=True):
        row = result.as_row()
        row["ra"] = agency["ra"]
        rows.append(row)
    return rows


def sample_proxy_records() -> dict[str, Any]:
    from airflow_doi.resolver.simulator import make_records

    dois = {d.doi for d in map(airflow_doi.validate, sample_cells()) if d.valid and d.doi}
    dois = {d for d in dois if d != "10.1109/CVPR.2016.90" and not d.startswith("10.5555/")}
    records = make_records(sorted(d for d in dois if not d.startswith("10.1000/")))
    records.update(make_records(sorted(d for d in dois if d.startswith("10.1000/")), ra="mEDRA"))
    return records


@pytest.fixture(scope="module")
def sample_resolution() -> list[dict[str, Any]]:
    from airflow_doi.resolver.simulator import ProxySimulator

    with ProxySimulator(sample_proxy_records()) as proxy:
        return resolution_run(proxy.url)


# --- figures -------------------------------------------------------------------------------


def scalar_headline(cells: list[str]) -> tuple[int, ...]:
    """Rows, valid, distinct keys, duplicated keys, keys written more than one way: by the
    scalar functions, one cell at a time (the reference the vectorized figures must meet)."""
    verdicts = [airflow_doi.validate(c) for c in cells]
    spellings: dict[str, set[str]] = {}
    rows: dict[str, int] = {}
    for value, verdict in zip(cells, verdicts, strict=True):
        if verdict.key is not None:
            spellings.setdefault(verdict.key, set()).add(value)
            rows[verdict.key] = rows.get(verdict.key, 0) + 1
    return (
        len(cells), sum(v.valid for v in verdicts), len(rows),
        sum(n > 1 for n in rows.values()), sum(len(s) > 1 for s in spellings.values()),
    )


def headline(figures: Any) -> tuple[int, ...]:
    return (figures.rows, figures.valid, figures.distinct_keys, figures.duplicate_keys,
            figures.hidden_keys)


def test_sample_headline_figures_match_the_scalar_functions():
    cells = sample_cells()
    figures = compute_figures(pa.array(cells), source="catalogue.csv", column=COLUMN)
    assert headline(figures) == scalar_headline(cells)
    verdicts = [airflow_doi.validate(c) for c in cells]
    keys = [v.key for v in verdicts if v.doi is not None]
    reasons: dict[str, int] = {}
    for verdict in verdicts:
        if verdict.reason:
            reasons[verdict.reason] = reasons.get(verdict.reason, 0) + 1
    assert {r.reason: r.rows for r in figures.reasons} == reasons
    assert figures.with_doi == len(keys)
    assert figures.duplicate_rows == len(keys) - len(set(keys))
    # The sample's duplicates are all written in more than one way: GROUP BY doi misses them.
    assert figures.hidden_keys == figures.duplicate_keys >= 7
    groups = {g.key: g for g in figures.groups}
    assert dict(groups["10.1038/171737A0"].spellings) == {
        "https://doi.org/10.1038/171737a0": 1, "doi:10.1038/171737A0": 1,
    }
    # The key upper-cases ASCII only: Straße and straße are one DOI, not STRASSE.
    assert groups["10.1000/STRAßE"].rows == 2
    assert "10.1000/STRASSE" not in groups
    assert figures.prefixes[0] == ("10.1000", 9)
    forms: dict[str, int] = {}
    for value in cells:
        try:
            form = airflow_doi.parse(value).form
        except airflow_doi.InvalidDoiError:
            continue
        forms[form] = forms.get(form, 0) + 1
    assert {f: n for f, n in figures.forms.items() if n} == forms


def test_forms_agree_with_parse_on_every_vector_and_the_messy_sample():
    values = [v["input"] for v in syntax_vectors() if isinstance(v["input"], str)]
    values += sample_cells(MESSY) + sample_cells()
    forms = forms_of(pa.array(values, pa.large_string())).to_pylist()
    checked = 0
    for value, form in zip(values, forms, strict=True):
        try:
            expected = airflow_doi.parse(value).form
        except airflow_doi.InvalidDoiError:
            continue
        assert form == expected, value
        checked += 1
    assert checked > 300


def test_messy_sample_figures_match_the_scalar_functions():
    cells = sample_cells(MESSY)
    figures = compute_figures(pa.array(cells))
    assert headline(figures) == scalar_headline(cells)
    reasons: dict[str, int] = {}
    for verdict in map(airflow_doi.validate, cells):
        if verdict.reason:
            reasons[verdict.reason] = reasons.get(verdict.reason, 0) + 1
    assert {r.reason: r.rows for r in figures.reasons} == reasons


def test_malformed_csv_rows_are_counted_not_dropped(tmp_path):
    source = tmp_path / "ragged.csv"
    source.write_text("id,doi\n1,10.1000/a\n2,10.1000/A,extra\n3\n4,doi:10.1000/a\n")
    _, figures = build_report(source, "doi")
    assert figures.rows == 4
    assert figures.valid == 2
    assert {r.reason: r.rows for r in figures.reasons} == {"malformed_row": 2}


def test_cells_show_invisible_characters_and_edge_spaces():
    marked = '<code class="cell"><span class="mark">U+200B</span>10.1/x</code>'
    assert cell("\u200b10.1/x") == marked
    assert cell(" 10.1/a b ").count("␣") == 2  # the edges, not the inner space
    assert "(empty)" in cell("")
    assert "characters)" in cell("10.1/" + "x" * 5000)


# --- resolution ----------------------------------------------------------------------------


def test_a_resolve_run_over_loopback_fills_the_resolution_section(sample_resolution):
    page, figures = build_report(SAMPLE, COLUMN, resolution=sample_resolution)
    resolution = figures.resolution
    cells = sample_cells()
    known = {airflow_doi.comparison_key(doi) for doi in sample_proxy_records()}
    verdicts = [airflow_doi.validate(c) for c in cells]
    found = sum(v.valid and v.doi in sample_proxy_records() for v in verdicts)
    invalid = sum(not v.valid for v in verdicts)
    medra = len({k for k in known if k.startswith("10.1000/")} & {v.key for v in verdicts})
    # One basis: the distinct keys looked up; cells that are not valid DOIs never count.
    keys = {v.key for v in verdicts if v.valid}
    assert resolution.rows == len(cells) and resolution.not_sent == invalid
    assert resolution.looked_up == len(keys)
    assert resolution.resolved == len(keys & known) < found
    assert resolution.statuses == {
        "resolved": len(keys & known), "not_found": len(keys - known),
    }
    assert resolution.agencies == {"DataCite": len(keys & known) - medra, "mEDRA": medra}
    assert resolution.failures == len(keys - known) >= 1
    failed = {doi: n for doi, status, _, n in resolution.failure_examples if status == "not_found"}
    assert failed["10.1109/CVPR.2016.90"] == 1  # rows of the column holding it
    assert "Registration agency (Which RA?)" in page
    assert "DOIs by resolution status" in page
    assert (f"{len(keys)} DOIs (distinct comparison keys) looked up, {len(keys & known)} "
            f"resolved; read from {len(cells)} rows in the resolution table, of which "
            f"{invalid} rows never sent (not a valid DOI).") in page


def test_resolution_file_with_repairs(tmp_path):
    results = tmp_path / "repaired.csv"
    results.write_text(
        "input,doi,status,error,doi_suggestion,doi_suggestion_rule,doi_suggestion_verified\n"
        "10.1000/x.,10.1000/x.,not_found,,10.1000/x,trailing_punctuation,true\n"
        "10.100O/1,,invalid,,10.1000/1,ocr_digit,false\n"
        "10.1000/ok,10.1000/ok,resolved,,,,\n"
        "10.1000/down,10.1000/down,error,HTTP 500 after 6 attempts,,,\n"
    )
    page, figures = build_report(SAMPLE, COLUMN, resolution=results)
    resolution = figures.resolution
    assert resolution.repairs_proposed == 2 and resolution.repairs_verified == 1
    assert resolution.repair_examples[0] == (
        "10.1000/x.", "10.1000/x", "trailing_punctuation", True
    )
    assert resolution.failure_reasons == {"HTTP 500 after 6 attempts": 1}
    assert "Repairs: 2 proposed, 1 verified by the proxy" in page


# --- safety --------------------------------------------------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    '10.1000/"><img src=x onerror=alert(1)>',
    "10.1000/<script>alert(2)</script>",
    "10.1000/<script>alert(2)</script>",
    "javascript:alert(3)",
    "10.1000/$\\frac{1}{2}$",
    "10.1000/&amp;",
]


def hostile_resolution() -> list[dict[str, str]]:
    return [
        {"input": "javascript:alert(4)", "doi": "javascript:alert(4)", "status": "error",
         "url": "javascript:alert(5)", "error": "<script>alert(6)</script>",
         "ra": "<b onmouseover=alert(7)>$x$</b>", "doi_suggestion": "javascript:alert(8)",
         "doi_suggestion_rule": "<i>", "doi_suggestion_verified": "true"},
        {"input": "10.1000/<x>", "doi": "10.1000/<x>", "status": "<script>alert(9)</script>",
         "url": "https://evil.example/x", "error": "", "ra": "DataCite"},
    ]


def check_inert(page: str) -> None:
    """Nothing in ``page`` can run or fetch: no script, no handler, only safe URLs."""
    assert not re.search(r"<\s*script", page, re.IGNORECASE)
    assert not re.search(r"<[^>]*\son[a-z]+\s*=", page, re.IGNORECASE)  # no event handler
    assert "<img src=x" not in page and "<b " not in page and "<i>" not in page
    urls = re.findall(r'\b(href|src)\s*=\s*"([^"]*)"', page, re.IGNORECASE)
    assert urls, "the page has no link or image at all"
    for attribute, url in urls:
        if attribute.lower() == "src":
            assert url.startswith("data:image/svg+xml;base64,"), url
        else:
            assert url.startswith("https://doi.org/10."), url
    assert "http-equiv=\"Content-Security-Policy\"" in page
    assert "default-src 'none'" in page


def test_hostile_cells_are_shown_as_text_never_as_markup(tmp_path):
    source = tmp_path / "hostile.parquet"
    pq.write_table(pa.table({"doi": HOSTILE}), source)
    page, figures = build_report(source, "doi", resolution=hostile_resolution())
    check_inert(page)
    # ... and still shown, escaped: a person sees what the cell holds.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "javascript:alert(8)" in page  # as text, and never as a link
    assert figures.groups[0].key == "10.1000/<SCRIPT>ALERT(2)</SCRIPT>"
    # The charts are SVG images, whose labels come from the data: escaped there too.
    for encoded in re.findall(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)", page):
        import base64

        svg = base64.b64decode(encoded).decode("utf-8")
        assert "<script" not in svg.lower() and "<b " not in svg


def test_page_needs_no_network(tmp_path):
    page, _ = build_report(SAMPLE, COLUMN)
    check_inert(page)
    assert not re.search(r"(src|href)\s*=\s*[\"']?\s*(https?:)?//", page.replace(
        'href="https://doi.org/', ""), re.IGNORECASE)
    assert "<link" not in page and "@import" not in page and "url(" not in page


# --- sources -------------------------------------------------------------------------------


def test_sqlite_table(tmp_path):
    database = tmp_path / "catalogue.db"
    with sqlite3.connect(database) as con:
        con.execute('create table works (id integer, "doi_raw" text)')
        con.executemany("insert into works values (?, ?)", list(enumerate(sample_cells())))
    before = database.read_bytes()
    _, figures = build_report(f"sqlite:///{database}", COLUMN, table="works")
    assert headline(figures) == scalar_headline(sample_cells())
    assert database.read_bytes() == before  # read-only


def test_duckdb_table_with_resolution_table(tmp_path):
    import duckdb

    database = tmp_path / "catalogue.duckdb"
    with duckdb.connect(str(database)) as con:
        con.execute("create table works (id integer, doi_raw varchar)")
        con.executemany("insert into works values (?, ?)", list(enumerate(sample_cells())))
        con.execute("create table doi_resolution (doi_key varchar, doi varchar, status varchar)")
        con.execute("insert into doi_resolution values ('10.1000/182', '10.1000/182', "
                    "'resolved'), ('10.1000/X', '10.1000/x', 'not_found')")
    _, figures = build_report(
        f"duckdb:///{database}", COLUMN, table="works", resolution_table="doi_resolution"
    )
    assert headline(figures) == scalar_headline(sample_cells())
    assert figures.resolution.statuses == {"resolved": 1, "not_found": 1}


def test_postgres_table(postgres_dsn, postgres_schema):
    import psycopg

    table = f"{postgres_schema}.works"
    with psycopg.connect(postgres_dsn, autocommit=True) as con:
        con.execute(f'create table "{postgres_schema}".works (id int, doi_raw text)')
        with con.cursor() as cursor:
            cursor.executemany(
                f'insert into "{postgres_schema}".works values (%s, %s)',
                list(enumerate(sample_cells())),
            )
    _, figures = build_report(postgres_dsn, COLUMN, table=table)
    assert headline(figures) == scalar_headline(sample_cells())
    assert figures.source.endswith(f"table {table}")


def test_identifiers_are_checked_not_interpolated(tmp_path):
    database = tmp_path / "x.db"
    sqlite3.connect(database).close()
    with pytest.raises(Exception, match="not a plain SQL identifier"):
        build_report(f"sqlite:///{database}", 'doi"; drop table works; --', table="works")


def test_write_report_replaces_the_file_whole(tmp_path):
    target = tmp_path / "out" / "report.html"
    path = write_report(target, SAMPLE, COLUMN)
    assert path == target.resolve()
    assert path.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert [p.name for p in path.parent.iterdir()] == ["report.html"]


# --- command line --------------------------------------------------------------------------


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    report_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["report", *argv])
    return int(args.func(args))


def test_cli_writes_the_page(tmp_path, capsys):
    target = tmp_path / "r.html"
    assert cli(str(SAMPLE), "--column", COLUMN, "-o", str(target)) == 0
    assert str(target) in capsys.readouterr().err
    assert "Duplicates by comparison key" in target.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["missing.csv", "--column", "doi"], "missing.csv: no such file"),
        ([str(SAMPLE), "--column", "nope"], "no column 'nope'"),
        (["--column", "doi"], "give either IN"),
        (["sqlite:///nowhere.db", "--column", "doi", "--table", "t"], "no such database file"),
        ([str(SAMPLE), "--column", "doi_raw", "--resolution", str(SAMPLE)],
         "no status, ra or doi_suggestion column"),
        ([str(SAMPLE), "--column", "doi_raw", "--resolution-table", "t"],
         "needs a database input"),
    ],
)
def test_cli_input_errors_exit_2_with_a_plain_message(tmp_path, capsys, argv, said):
    target = tmp_path / "r.html"
    assert cli(*argv, "-o", str(target)) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert err.splitlines()[-1].startswith("airflow-doi report: error: ")
    assert not target.exists()


def test_cli_database_column_table_and_output_errors_exit_2(tmp_path, capsys):
    """Found in a new-user trial: a misspelt column of a SQLite table printed only
    ``error: 'nope'`` (SQLite reads an unknown quoted name as text, so every row would have
    been that text), and an unwritable -o printed a raw errno naming a temporary file."""
    db = tmp_path / "w.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE works (id INTEGER, doi_raw TEXT)")
    con.execute("INSERT INTO works VALUES (1, '10.1000/x')")
    con.commit()
    con.close()
    url, target = f"sqlite:///{db}", tmp_path / "r.html"
    for argv, said in [
        ([url, "--table", "works", "--column", "nope", "-o", str(target)],
         "--column 'nope' is not a column of works; its columns are id, doi_raw"),
        ([url, "--table", "workz", "--column", "doi_raw", "-o", str(target)],
         "table 'workz' cannot be read on this connection (no such table: workz)"),
        ([url, "--table", "works", "--column", "doi_raw", "-o", "/proc/r.html"],
         "/proc/r.html: cannot be written"),
    ]:
        assert cli(*argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("airflow-doi report: error: ") and said in err, err
        assert ".r.html." not in err and "Traceback" not in err
    assert not target.exists()
    assert cli(url, "--table", "works", "--column", "doi_raw", "-o", str(target)) == 0


def test_cli_postgres_error_hides_the_password(tmp_path, capsys):
    url = "postgresql://someone:s3cret@127.0.0.1:1/none"
    assert cli(url, "--column", "doi", "--table", "t", "-o", str(tmp_path / "r.html")) == 2
    err = capsys.readouterr().err
    assert "cannot connect" in err and "s3cret" not in err



def test_readme_quality_report_block(tmp_path, monkeypatch, sample_resolution):
    """Each line of the README's report block, as written, in a folder holding its inputs."""
    import shlex

    from tests.test_readme_blocks import block_under, commands

    (tmp_path / "examples" / "data").mkdir(parents=True)
    (tmp_path / "examples" / "data" / "catalogue.csv").write_bytes(SAMPLE.read_bytes())
    with sqlite3.connect(tmp_path / "catalogue.db") as con:
        con.execute('create table works (id integer, "doi_raw" text)')
        con.executemany("insert into works values (?, ?)", list(enumerate(sample_cells())))
    pq.write_table(pa.Table.from_pylist(sample_resolution), tmp_path / "resolved.parquet")
    with (tmp_path / "resolved.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(sample_resolution[0]))
        writer.writeheader()
        writer.writerows(sample_resolution)
    monkeypatch.chdir(tmp_path)
    lines = commands(block_under("bash", "Quality report"))
    assert len(lines) == 2
    for line in lines:
        words = shlex.split(line)
        assert words[:2] == ["airflow-doi", "report"]
        assert cli(*words[2:]) == 0, line
        page = (tmp_path / "report.html").read_text(encoding="utf-8")
        assert "Duplicates by comparison key" in page
    assert "DOIs by resolution status" in page  # the second line gave a resolution file


def test_airflow_connection(tmp_path, monkeypatch):
    """``conn_id``: the table is read through the connection's own DB-API hook."""
    database = tmp_path / "catalogue.db"
    with sqlite3.connect(database) as con:
        con.execute('create table works (id integer, "doi_raw" text)')
        con.executemany("insert into works values (?, ?)", list(enumerate(sample_cells())))
    monkeypatch.setenv("AIRFLOW_CONN_REPORT_CATALOGUE",
                       json.dumps({"conn_type": "sqlite", "host": str(database)}))
    target = write_report(tmp_path / "r.html", None, COLUMN, table="works",
                          conn_id="report_catalogue")
    page = target.read_text(encoding="utf-8")
    assert "connection report_catalogue table works" in page
    _, figures = build_report(None, COLUMN, table="works", conn_id="report_catalogue")
    assert headline(figures) == scalar_headline(sample_cells())


def test_cli_warns_about_cells_that_were_not_utf8(tmp_path, capsys, caplog):
    """Found in a new-user trial: normalize and resolve warn about a Latin-1 file and name
    --encoding; report wrote its page and said nothing."""
    import logging

    source = tmp_path / "latin.csv"
    source.write_bytes(b"doi\n10.1000/caf\xe9\n10.1000/x\n")
    with caplog.at_level(logging.WARNING, logger="airflow_doi"):
        assert cli(str(source), "--column", "doi", "--encoding", "utf-8",
                   "-o", str(tmp_path / "r.html")) == 0
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "1 cell of column doi was not UTF-8" in said and "--encoding latin-1" in said
    caplog.clear()
    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="airflow_doi"):  # found from the file
        assert cli(str(source), "--column", "doi", "-o", str(tmp_path / "r.html")) == 0
    assert not [r for r in caplog.records if "UTF-8" in r.getMessage()]
    assert "note: read as cp1252" in capsys.readouterr().err
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="airflow_doi"):
        assert cli(str(source), "--column", "doi", "--encoding", "latin-1",
                   "-o", str(tmp_path / "r.html")) == 0
    assert not [r for r in caplog.records if "UTF-8" in r.getMessage()]


@pytest.mark.parametrize(("updated", "note"), [
    (0, "no work updated by a notice"), (1, "1 work updated by a notice"),
    (2, "2 works updated by a notice"),
])
def test_cards_say_one_and_none_in_words(updated, note):
    """Issue 34: the cards said "1 works" and "0 works updated by a notice"."""
    from airflow_doi.report.figures import Figures
    from airflow_doi.report.html import render_html
    from airflow_doi.report.metadata import MetadataFigures
    from airflow_doi.report.resolution import ResolutionFigures

    figures = Figures(source="x.csv", column="doi", rows=1, valid=1, distinct_keys=1,
                      duplicate_keys=1, duplicate_rows=1, hidden_keys=1, damaged=1)
    figures.resolution = ResolutionFigures(rows=1, statuses={"resolved": 1}, looked_up=1,
                                           resolved=1)
    figures.metadata = MetadataFigures(rows=1, keys=1, statuses={"ok": 1}, updated=updated,
                                       retracted=min(updated, 1))
    page = render_html(figures)
    notes = re.findall(r'<div class="note">(.*?)</div>', page)
    assert notes == [
        "1 row", "0.0% of rows", "valid, but a repair rule changes it", "by comparison key",
        "1 extra row", "DOI spelled more than one way", "1 of 1 DOI looked up", "1 of 1 DOI",
        note,
    ]
