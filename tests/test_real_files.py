"""Catalogue files as people export them (issue #21): every row kept, read without flags.

Each shape below is a small synthetic file that reproduces what European Excel exports and
library systems write: ``;`` and tab separators, Windows-1252, a BOM, CRLF, a header on ``,``
above rows on ``;``, ragged rows, quotes left open, blank trailing columns, a ``doi`` column
already there, ``NA`` for a missing value. The commands run as a user runs them (``python -m
airflow_doi``, no flags but ``--column`` and ``-o``), and every check compares with what
Python's csv module reads from the same bytes, or with the scalar ``validate()``.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_doi import validate
from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked
from tests.conftest import ROOT, output_header, read_output_csv

ADDED = ["doi", "doi_key", "doi_valid", "doi_reason", "doi_url"]


def cli(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return forked.run(
        [sys.executable, "-m", "airflow_doi", *map(str, args)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env=None if env is None else {**os.environ, **env},
    )


def normalize(source: Path, *args: object, env: dict[str, str] | None = None
              ) -> tuple[subprocess.CompletedProcess[str], Path]:
    target = source.with_name(source.stem + ".out.csv")
    run = cli("normalize", source, "--column", "doi", "-o", target, *args, env=env)
    assert "Traceback" not in run.stderr, run.stderr
    return run, target


def written(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def python_rows(data: bytes, encoding: str, delimiter: str) -> list[list[str]]:
    """What Python's csv module reads, told the encoding and separator."""
    return list(csv.reader(io.StringIO(data.decode(encoding), newline=""), delimiter=delimiter))


# --- 1. No row is ever lost ------------------------------------------------------------------

def test_header_on_commas_above_rows_on_semicolons_keeps_every_row(tmp_path: Path) -> None:
    """The issue's repro: it came out with 0 data rows and exit 0."""
    source = written(tmp_path, "mixed.csv", b"a,doi,b\nx;10.1000/1;y\nx;10.1000/3;y\n")
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert [(r["a"], r["doi"], r["b"]) for r in rows] == [
        ("x", "10.1000/1", "y"), ("x", "10.1000/3", "y")]
    assert [r["doi_key"] for r in rows] == ["10.1000/1", "10.1000/3"]
    assert "2 rows: 2 valid, 0 not" in run.stderr
    assert "header ','-separated, rows ';'-separated" in run.stderr
    fixed = cli("repair", source, "--column", "doi", "-o", tmp_path / "p.csv", "--no-verify")
    assert fixed.returncode == 0, fixed.stderr
    assert len(read_output_csv(tmp_path / "p.csv")) == 2


@pytest.mark.parametrize("header", [b"id,doi,note", b"id,doi,note;;", b"id;doi;note"])
def test_blank_trailing_columns_and_a_quote_left_open_in_an_excel_export(
        tmp_path: Path, header: bytes) -> None:
    """A cp1252 ';' export whose rows end in blank columns (``;;``), under a header on its own
    separator, on ';', or typed into one cell (``id,doi,note;;``), with NA and one row whose
    quote is left open: every row is read on ';' (the sniffer used to give up: 0 DOIs)."""
    body = (b"1;10.1000/caf\xe9;x;;\r\n2;NA;;;\r\n3;\"10.1000/open;y;;\r\n"
            b"4;10.1000/4;z;;\r\n5;10.1000/5;;;\r\n")
    source = written(tmp_path, "excel.csv", header + b"\r\n" + body)
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert [r["id"] for r in rows] == ["1", "2", "3", "4", "5"]
    assert [r["doi_key"] for r in rows] == [  # the key folds ASCII a-z only
        "10.1000/CAF\u00e9", "", "", "10.1000/4", "10.1000/5"]
    assert [r["note"] for r in rows][3:] == ["z", ""]
    assert "1 CSV row had the wrong number of fields or a quote left open" in run.stderr
    assert "5 rows" in run.stderr


def test_a_file_of_only_ragged_rows_keeps_them_all(tmp_path: Path) -> None:
    """Not one well-formed row: the fast reader skipped them all and nothing was read again."""
    source = written(tmp_path, "ragged.csv", b"id,doi,note\n1,10.1000/1\n2\n3,10.1000/3\n")
    run, target = normalize(source, "--delimiter", ",")
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert [r["id"] for r in rows] == ["1", "2", "3"]
    assert {r["doi_reason"] for r in rows} == {"malformed_row"}
    assert "3 rows: 0 valid, 3 not (malformed_row=3)" in run.stderr


def test_surplus_fields_are_kept_in_the_last_cell_and_empty_ones_dropped(tmp_path: Path) -> None:
    source = written(tmp_path, "long.csv",
                     b"id;doi;note\n1;10.1000/1;a;b;c\n2;10.1000/2;z;;\n3;10.1000/3;q\n")
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert rows[0]["note"] == "a;b;c" and rows[0]["doi_reason"] == "malformed_row"
    # Excel's trailing separators: nothing is lost by dropping them, so the row is read.
    assert rows[1]["note"] == "z" and rows[1]["doi_valid"] == "true"
    assert rows[2]["doi_valid"] == "true"
    assert "1 CSV row had the wrong number of fields" in run.stderr


def test_a_quote_left_open_does_not_swallow_the_rows_after_it(tmp_path: Path) -> None:
    source = written(tmp_path, "open.csv",
                     b'id,doi\n1,"10.1000/1\n2,10.1000/2\n3,"10.1000/3"\n4,10.1000/4\n')
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert [r["id"] for r in rows] == ["1", "2", "3", "4"]
    assert [r["doi_valid"] for r in rows] == ["false", "true", "true", "true"]
    assert rows[0]["doi_reason"] == "malformed_row" and rows[0]["doi"] == '"10.1000/1'
    assert "quote left open" in run.stderr


def test_a_quoted_cell_over_lines_after_a_quote_left_open_stays_one_row(tmp_path: Path) -> None:
    """A new user's trial: the lines a quote left open swallowed were each made a row, so a
    properly quoted two-line title among them became two rows, its DOI moved to the title
    column of the second (4 rows out of 3 records, 3 flagged)."""
    source = written(tmp_path, "open_then_quoted.csv",
                     b'id,title,doi\n1,"open quote,10.1000/1\n2,"two\nlines",10.1000/2\n'
                     b"3,C,10.1000/3\n")
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert [[r["id"], r["title"], r["doi"], r["doi_reason"]] for r in rows] == [
        ["1", '"open quote', "10.1000/1", "malformed_row"],
        ["2", "two\nlines", "10.1000/2", ""],
        ["3", "C", "10.1000/3", ""],
    ]
    assert "3 rows: 2 valid, 1 not (malformed_row=1)" in run.stderr


def test_lines_that_each_leave_a_quote_open_are_read_in_linear_time(tmp_path: Path) -> None:
    """Review: ``a","`` leaves a quote open however the reader enters it, so each line read
    again after the one before would swallow the rest of the file in turn: 16,000 such lines
    took 21 s, 40,000 over two minutes. A line is read again once at most."""
    import time

    lines = 40_000
    source = written(tmp_path, "hostile.csv", b"doi,x\n" + b'a","\n' * lines)
    started = time.monotonic()
    run, target = normalize(source)
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stderr
    assert f"{lines:,} rows: 0 valid, {lines:,} not (malformed_row={lines:,})" in run.stderr
    assert len(read_output_csv(target)) == lines
    assert elapsed < 30, f"{elapsed:.1f} s"


def test_a_quote_left_open_to_the_end_of_the_file(tmp_path: Path) -> None:
    source = written(tmp_path, "open_end.csv", b'id,doi\n1,10.1000/1\n2,"10.1000/2\n3,10.1000/3\n')
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert [r["id"] for r in rows] == ["1", "2", "3"]
    assert [r["doi_valid"] for r in rows] == ["true", "false", "true"]


def test_a_quoted_cell_with_line_breaks_is_one_row(tmp_path: Path) -> None:
    data = b'id,title,doi\n1,"Part one,\npart two",10.1000/1\n2,plain,10.1000/2\n'
    source = written(tmp_path, "multiline.csv", data)
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    expected = python_rows(data, "utf-8", ",")[1:]
    assert [[r["id"], r["title"], r["doi"]] for r in rows] == expected
    assert "malformed" not in run.stderr


def test_a_quoted_cell_over_lines_that_closes_is_one_cell_whatever_it_holds(
    tmp_path: Path,
) -> None:
    """Found in review: a rule that split a cell whose inner line looked like a row split real
    addresses. A quoted cell that closes properly is one cell, as Python's csv reads it."""
    cases = {
        "addr.csv": b'doi,affiliation\n10.1000/a,"University of X\nLondon, UK"\n10.1000/b,Other\n',
        "one_column.csv": b'doi\n"10.1000/x\ny"\n10.1000/b\n',
        "header.csv": b'id,"doi\n(link)"\n1,10.1000/a\n',
    }
    for name, data in cases.items():
        source = written(tmp_path, name, data)
        column = "doi\n(link)" if name == "header.csv" else "doi"
        run, target = normalize(source, "--column", column)
        assert run.returncode == 0, (name, run.stderr)
        expected = python_rows(data, "utf-8", ",")
        out = list(csv.reader(io.StringIO(target.read_text(encoding="utf-8"), newline="")))
        assert [row[: len(expected[0])] for row in out] == expected, name
        assert "malformed" not in run.stderr, name


def test_a_quote_left_open_in_the_header_does_not_swallow_the_file(tmp_path: Path) -> None:
    source = written(tmp_path, "hq.csv", b'id;"title;doi\r\n1;a;10.1000/1\r\n2;b;10.1000/2\r\n')
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert [r["doi"] for r in rows] == ["10.1000/1", "10.1000/2"]
    assert output_header(target)[:3] == ["id", '"title', "doi"]


def test_blank_lines_above_the_header_are_skipped(tmp_path: Path) -> None:
    source = written(tmp_path, "blank.csv", b"\n\nid,doi\n1,10.1000/1\n2,10.1000/2\n")
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    assert [r["doi_key"] for r in read_output_csv(target)] == ["10.1000/1", "10.1000/2"]


def test_a_quoted_crlf_across_the_fast_readers_block_edge_is_kept(tmp_path: Path) -> None:
    """Arrow's reader drops the LF of a quoted CRLF that straddles two of its 2 MiB blocks
    (apache/arrow#51368): such a cell sends the file to Python's csv module."""
    head = b"a;b\n" + b"zzzzzzzz;yyyyyyyy\n" * 100_000
    pad = (2 << 20) - 1 - len(head) - len(b'q;"')
    data = head + b'q;"' + b"x" * pad + b'\r\ny"\nlast;row\n'
    assert data.index(b"\r") == (2 << 20) - 1
    source = written(tmp_path, "edge.csv", data)
    run = cli("normalize", source, "--column", "b", "-o", tmp_path / "o.csv")
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(tmp_path / "o.csv")
    assert rows[-2]["b"] == "x" * pad + "\r\ny" and rows[-1]["a"] == "last"
    assert len(rows) == 100_002


def test_straight_through_output_is_whole_even_when_the_read_starts_again(
    tmp_path: Path,
) -> None:
    """Found in review: a pass that starts again (a ragged row far in) wrote the first pass's
    rows to a pipe too; and -o - into a file opened for appending truncated it."""
    rows = [f"{i},10.1000/{i}" for i in range(30_000)] + ["bad,10.1/y,extra", "last,10.1000/z"]
    source = written(tmp_path, "late_ragged.csv", ("id,doi\n" + "\n".join(rows) + "\n").encode())
    log = tmp_path / "log.csv"
    log.write_text("kept\n")
    with log.open("a") as appended:
        run = subprocess.run(
            [sys.executable, "-m", "airflow_doi", "normalize", str(source), "--column", "doi",
             "-o", "-", "--chunk-size", "1000"], stdout=appended, stderr=subprocess.PIPE,
            cwd=ROOT, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "kept"  # appended, not truncated
    assert len(lines) == 1 + 1 + 30_002  # ours: one header, every row once


def test_wide_files_odd_separators_and_non_text_encodings(tmp_path: Path) -> None:
    names = ["doi", *(f"c{i}" for i in range(5000))]
    wide = written(tmp_path, "wide.csv",
                   (",".join(names) + "\n" + ",".join(["10.1000/1", *"x" * 5000]) + "\n").encode())
    run, target = normalize(wide)
    assert run.returncode == 0, run.stderr
    assert len(output_header(target)) == 5006
    odd = written(tmp_path, "odd.csv", "id§doi\n1§10.1000/1\n".encode())
    run, target = normalize(odd, "--delimiter", "§")
    assert run.returncode == 0, run.stderr
    out = list(csv.reader(io.StringIO(target.read_text(encoding="utf-8")), delimiter="§"))
    assert out[0][:3] == ["id", "doi", "doi_normalized"] and out[1][4] == "true"
    run, _ = normalize(odd, "--encoding", "hex")
    assert run.returncode == 2 and "unknown encoding 'hex'" in run.stderr


def test_a_utf8_file_with_one_damaged_cell_stays_utf8(tmp_path: Path) -> None:
    """An ASCII head, then good UTF-8, then one cp1252 byte: the damaged cell is flagged,
    the good ones are not turned into mojibake by reading the file as cp1252."""
    rows = [f"{i},10.1000/{i}" for i in range(60_000)]
    rows[40_000] = "40000,10.1000/café"
    rows[50_000] = "50000,10.1000/caf\udce9"
    data = ("id,doi\n" + "\n".join(rows) + "\n").encode("utf-8", "surrogateescape")
    source = written(tmp_path, "mixed.csv", data)
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    out = read_output_csv(target)
    assert out[40_000]["doi"] == "10.1000/café"
    assert out[50_000]["doi_reason"] == "bad_encoding"


@pytest.mark.parametrize(("name", "data", "ids"), [
    ("nul.csv", b"id,doi\n1,10.1000/a\x00b\n2,10.1000/2\n", ["1", "2"]),
    ("no_final_newline.csv", b"id,doi\n1,10.1000/1\n2,10.1000/2", ["1", "2"]),
    ("cr_only.csv", b"id,doi\r1,10.1000/1\r2,10.1000/2\r", ["1", "2"]),
])
def test_other_shapes_keep_every_row(tmp_path: Path, name: str, data: bytes,
                                     ids: list[str]) -> None:
    source = written(tmp_path, name, data)
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert [r["id"] for r in rows] == ids
    cells = [row[1] for row in python_rows(data, "utf-8", ",")[1:]]
    assert [r["doi"] for r in rows] == cells  # as Python's csv module reads them
    assert [r["doi_reason"] for r in rows] == [validate(c).reason or "" for c in cells]


def test_the_counts_on_stderr_add_up_to_the_rows_in_the_file(tmp_path: Path) -> None:
    data = (b"id;doi\r\n1;10.1000/1\r\n2;NA\r\n3;junk\r\n4\r\n5;10.1000/5;x;y\r\n"
            b"6;https://doi.org/10.1000/6\r\n")
    source = written(tmp_path, "counts.csv", data)
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    assert "6 rows: 2 valid, 4 not (bad_directory=1, empty=1, malformed_row=2)" in run.stderr
    assert len(read_output_csv(target)) == 6


# --- 2. Sniffing what people do not say --------------------------------------------------------

@pytest.mark.parametrize(("name", "data", "said"), [
    ("semicolon.csv", b"id;doi;title\n1;10.1000/1;Smith, J.\n2;10.1000/2;Doe, A.\n",
     "UTF-8, ';'-separated, LF"),
    ("tab.tsv", b"id\tdoi\n1\t10.1000/1\n2\t10.1000/2\n", "UTF-8, tab-separated, LF"),
    ("pipe.csv", b"id|doi\r\n1|10.1000/1\r\n2|10.1000/2\r\n", "UTF-8, '|'-separated, CRLF"),
    ("bom.csv", b"\xef\xbb\xbfid;doi\r\n1;10.1000/1\r\n2;10.1000/2\r\n",
     "UTF-8 with a BOM, ';'-separated, CRLF"),
    ("utf16.csv", "id\tdoi\r\n1\t10.1000/1\r\n2\t10.1000/é\r\n".encode("utf-16"),
     "UTF-16 with a BOM, tab-separated, CRLF"),
    ("cp1252.csv", "Institution;doi\r\nUniversität Zürich;10.1000/1\r\nSociété;10.1000/€\r\n"
     .encode("cp1252"), "cp1252, ';'-separated, CRLF"),
])
def test_encoding_and_separator_are_found_and_said(tmp_path: Path, name: str, data: bytes,
                                                   said: str) -> None:
    source = written(tmp_path, name, data)
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    assert f"note: read as {said}" in run.stderr
    rows = read_output_csv(target)
    assert len(rows) == 2 and all(r["doi_valid"] == "true" for r in rows)
    assert "U+FFFD" not in run.stderr and "\ufffd" not in target.read_text(encoding="utf-8")


def test_a_late_cp1252_byte_in_a_large_file_is_found(tmp_path: Path) -> None:
    """The sample is not only the head: windows further in are looked at too."""
    lines = [f"{i};10.1000/{i}" for i in range(120_000)]
    lines[100_000] = "100000;10.1000/caf\xe9"
    data = ("id;doi\n" + "\n".join(lines) + "\n").encode("cp1252")
    assert len(data) > 2 << 20
    source = written(tmp_path, "late.csv", data)
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    assert "read as cp1252" in run.stderr
    assert read_output_csv(target)[100_000]["doi"] == "10.1000/café"


def test_flags_still_override_what_is_found(tmp_path: Path) -> None:
    source = written(tmp_path, "latin.csv", "id;doi\n1;10.1000/caf\xe9\n".encode("latin-1"))
    run, target = normalize(source, "--encoding", "utf-8", "--delimiter", ";")
    assert run.returncode == 0, run.stderr
    assert read_output_csv(target)[0]["doi_reason"] == "bad_encoding"
    assert "--encoding latin-1" in run.stderr


# --- 3. Headers as people type them -------------------------------------------------------------

@pytest.mark.parametrize("header", [" doi", "DOI ", "doi\xa0", "Doi"])
def test_the_doi_column_is_found_trimmed_and_case_folded(tmp_path: Path, header: str) -> None:
    source = written(tmp_path, "h.csv", f"id;{header};x\n1;10.1000/1;y\n".encode())
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    assert f"--column 'doi' read the column {header!r}" in run.stderr
    rows = read_output_csv(target)
    assert rows[0][header] == "10.1000/1"
    assert sum(name.strip().casefold() == "doi" for name in output_header(target)) == 1


def test_two_columns_answering_to_the_name_is_an_error_naming_both(tmp_path: Path) -> None:
    source = written(tmp_path, "two.csv", b"id;DOI ; doi\n1;10.1000/1;10.1000/2\n")
    run, target = normalize(source)
    assert run.returncode == 2
    assert "'DOI '" in run.stderr and "' doi'" in run.stderr and str(source) in run.stderr
    assert not target.exists()


def test_blank_and_repeated_names_in_other_columns_are_fine(tmp_path: Path) -> None:
    data = b"id;doi;;;note;note\r\n1;10.1000/1;;;a;b\r\n2;10.1000/2;;;c;d\r\n"
    source = written(tmp_path, "excel.csv", data)
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    assert output_header(target) == ["id", "doi", "", "", "note", "note",
                                     "doi_normalized", "doi_key", "doi_valid", "doi_reason",
                                     "doi_url"]
    assert target.read_bytes().splitlines()[1].startswith(b"1;10.1000/1;;;a;b;10.1000/1;")
    report = cli("report", source, "--column", "doi", "-o", tmp_path / "r.html")
    assert report.returncode == 0, report.stderr
    parquet = tmp_path / "excel.parquet"
    assert cli("normalize", source, "--column", "doi", "-o", parquet).returncode == 0
    assert pq.read_table(parquet).column_names[:6] == ["id", "doi", "", ".1", "note", "note.1"]


# --- 4. The commonest layout works without flags -----------------------------------------------

def test_added_columns_are_named_after_the_doi_column_when_ours_are_taken(
    tmp_path: Path,
) -> None:
    import duckdb

    source = written(tmp_path, "has_doi.csv", b"id,DOI\n1,doi:10.1000/ABC\n")
    run, target = normalize(source, "--column", "DOI")
    assert run.returncode == 0, run.stderr
    names = output_header(target)
    assert names == ["id", "DOI", "DOI_normalized", "DOI_key", "DOI_valid", "DOI_reason",
                     "DOI_url"]
    assert "added columns are DOI_normalized" in run.stderr
    # No two names differ only in case: DuckDB reads every column under its own name.
    read = duckdb.sql(f"select * from read_csv('{target}', all_varchar=true)").columns
    assert read == names
    again = written(tmp_path, "has_both.csv", b"doi,doi_normalized,doi_key\n10.1000/1,x,y\n")
    run, target = normalize(again)
    assert run.returncode == 0, run.stderr
    assert output_header(target)[3:] == ["doi_normalized_2", "doi_key_2", "doi_valid_2",
                                         "doi_reason_2", "doi_url_2"]
    run, target = normalize(again, "--prefix", "clean_")
    assert run.returncode == 0 and output_header(target)[3] == "clean_doi"
    fixed = cli("repair", source, "--column", "DOI", "-o", tmp_path / "p.csv", "--no-verify")
    assert fixed.returncode == 0, fixed.stderr
    assert output_header(tmp_path / "p.csv")[2:] == [
        "doi_suggestion", "doi_suggestion_rule", "doi_suggestion_verified",
        "doi_suggestion_error"]


# --- 5. Missing-value markers -------------------------------------------------------------------

def test_missing_value_markers_read_as_missing_in_every_command(tmp_path: Path) -> None:
    data = b"id;doi\n1;10.1000/1\n2;NA\n3;N/A\n4;NULL\n5;-\n6;nan\n7;n/a\n"
    source = written(tmp_path, "na.csv", data)
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert [r["doi_reason"] for r in rows] == ["", *["empty"] * 6]
    assert [r["doi"] for r in rows][1:] == ["NA", "N/A", "NULL", "-", "nan", "n/a"]  # kept
    assert "6 cells were a missing-value marker (NA, N/A, NULL, ...): read as missing" in run.stderr
    assert validate("NA").reason == "bad_directory"  # the standard's reading is unchanged
    with ProxySimulator(auto_records=True) as proxy:
        resolved = cli("resolve", source, "--column", "doi", "-o", tmp_path / "r.csv",
                       "--base-url", proxy.url, "--rate", "200")
    assert resolved.returncode == 0, resolved.stderr
    out = read_output_csv(tmp_path / "r.csv")
    assert [r["error"] for r in out] == ["", *["empty"] * 6]
    # As read ("-" formula-escaped, as resolve's CSV output always guards its input column).
    assert [r["input"] for r in out][1:] == ["NA", "N/A", "NULL", "'-", "nan", "n/a"]
    assert [r["status"] for r in out] == ["resolved", *["invalid"] * 6]  # never sent
    report = cli("report", source, "--column", "doi", "-o", tmp_path / "r.html")
    assert report.returncode == 0 and "6 cells were a missing-value marker" in report.stderr


def test_na_values_changes_the_list(tmp_path: Path) -> None:
    source = written(tmp_path, "na.csv", b"id;doi\n1;NA\n2;missing\n")
    run, target = normalize(source, "--na-values", "missing")
    assert [r["doi_reason"] for r in read_output_csv(target)] == ["bad_directory", "empty"]
    run, target = normalize(source, "--na-values", "")
    assert run.returncode == 0, run.stderr
    assert [r["doi_reason"] for r in read_output_csv(target)] == ["bad_directory"] * 2
    assert "missing-value" not in run.stderr


# --- 6. The user's cells are left alone ---------------------------------------------------------

def test_cells_are_written_as_they_were_read(tmp_path: Path) -> None:
    data = (b'year;doi;title;cost\r\n2013;10.1000/1;"Smith; J.";NA\r\n'
            b'2014;10.1000/2;"say ""hi""";1.234,56\r\n')
    source = written(tmp_path, "cells.csv", data)
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    lines = target.read_bytes().split(b"\r\n")
    assert lines[1].startswith(b'2013;10.1000/1;"Smith; J.";NA;10.1000/1;')
    assert lines[2].startswith(b'2014;10.1000/2;"say ""hi""";1.234,56;')
    assert lines[-1] == b"" and b"\n" not in target.read_bytes().replace(b"\r\n", b"")


def test_the_arrow_path_writes_the_same_bytes_as_the_native_one(tmp_path: Path) -> None:
    data = ('id;doi;title\r\n1;10.1000/1;"a;b"\r\n2;"10.1000/""q""";x\r\n3;;\r\n'
            '4;10.1000/é;"two\nlines"\r\n').encode()
    source = written(tmp_path, "both.csv", data)
    _, native = normalize(source)
    native_bytes = native.read_bytes()
    _, arrow = normalize(source, env={"AIRFLOW_DOI_NATIVE": "0"})
    assert arrow.read_bytes() == native_bytes
    rows = list(csv.reader(io.StringIO(native_bytes.decode(), newline=""), delimiter=";"))
    assert [row[:3] for row in rows] == python_rows(data, "utf-8", ";")


def test_a_cell_larger_than_the_write_buffer(tmp_path: Path) -> None:
    big = "x" * (3 << 20)
    source = written(tmp_path, "big.csv", f'id,doi,note\n1,10.1000/1,"{big},"\n'.encode())
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    assert read_output_csv(target)[0]["note"] == big + ","


def test_parquet_keeps_its_types(tmp_path: Path) -> None:
    source = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"year": pa.array([2013, 2014], pa.int16()),
                             "doi": ["10.1000/1", "NA"]}), source)
    target = tmp_path / "out.parquet"
    run = cli("normalize", source, "--column", "doi", "-o", target)
    assert run.returncode == 0, run.stderr
    out = pq.read_table(target)
    assert out.schema.field("year").type == pa.int16()
    # A Parquet null is a null; the text "NA" in a typed file is data, not a CSV convention.
    assert out.column("doi_reason").to_pylist() == [None, "bad_directory"]


# --- 7. Errors: our words, exit 2, never a traceback --------------------------------------------

@pytest.mark.parametrize("command", ["normalize", "resolve", "repair", "report"])
def test_errors_name_the_file_and_say_what_to_do(tmp_path: Path, command: str) -> None:
    source = written(tmp_path, "bad.csv", b"id;d\xa0oi\n1;10.1000/\x81\n2\n")
    target = tmp_path / ("out.html" if command == "report" else "out.csv")
    extra = ["--base-url", "http://127.0.0.1:9"] if command in ("resolve", "repair") else []
    run = cli(command, source, "--column", "doi", "-o", target, "--encoding", "cp1252", *extra)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr
    assert str(source) in run.stderr and "--encoding" in run.stderr
    assert not target.exists()


def test_ragged_cp1252_read_as_utf8_leaks_no_traceback(tmp_path: Path) -> None:
    source = written(tmp_path, "ragged1252.csv",
                     b"id;doi;x\n1;10.1000/\xe9;a\n2;10.1000/2\n3;10.1000/\xe8;b;c\n")
    run, target = normalize(source, "--encoding", "utf-8")
    assert run.returncode == 0, run.stderr
    assert "Exception ignored" not in run.stderr and "UnicodeDecodeError" not in run.stderr
    assert len(read_output_csv(target)) == 3


def test_the_summary_of_a_cp1252_semicolon_export_with_na_and_a_doi_column(
    tmp_path: Path,
) -> None:
    """What the note of #21 quotes: the stderr of the field's commonest file."""
    data = ("Institution;Period;euro;doi;is_hybrid\r\n"
            "Universität Zürich;2019;1.234,56;10.1000/ÄBC;FALSE\r\n"
            "Université de Genève;2019;2.000,00;NA;TRUE\r\n"
            "ETH Zürich;2020;NA;https://doi.org/10.1000/xyz;FALSE\r\n").encode("cp1252")
    source = written(tmp_path, "apc_de.csv", data)
    run, target = normalize(source)
    assert run.returncode == 0, run.stderr
    said = run.stderr.replace(str(target), "OUT").replace(str(source), "IN")
    assert said.splitlines() == [
        "airflow-doi normalize: OUT: 3 rows: 2 valid, 1 not (empty=1)",
        "airflow-doi normalize: note: IN already has a column named as one of ours, so the "
        "added columns are doi_normalized, doi_key, doi_valid, doi_reason, doi_url (--prefix "
        "chooses others)",
        "airflow-doi normalize: note: read as cp1252, ';'-separated, CRLF line endings; "
        "written as UTF-8 with a BOM (for Excel; --output-encoding chooses), ';'-separated, "
        "CRLF line endings",
        "airflow-doi normalize: note: 1 cell was a missing-value marker (NA, N/A, NULL, ...): "
        "read as missing (reason empty); --na-values changes the list",
    ]
    rows = read_output_csv(target)
    assert rows[0]["Institution"] == "Universität Zürich" and rows[0]["euro"] == "1.234,56"
    assert rows[2]["euro"] == "NA"  # only the DOI column reads markers as missing


def test_ctrl_c_stops_at_once_and_leaves_no_file(tmp_path: Path) -> None:
    """Found in a stranger's trial: interrupted in its first second, normalize sometimes hung
    in Arrow's read-ahead or aborted ('terminate called without an active exception')."""
    import random
    import signal
    import time

    source = tmp_path / "big.csv"
    with source.open("w", encoding="cp1252", newline="") as handle:
        handle.write("id;title;doi\r\n")
        handle.writelines(f"{i};Universität {i}, Teil {i % 7};10.1000/{i}\r\n"
                          for i in range(400_000))
    chance = random.Random(21)
    for _ in range(6):
        target = tmp_path / "out.csv"
        target.unlink(missing_ok=True)
        child = subprocess.Popen(
            [sys.executable, "-m", "airflow_doi", "normalize", str(source), "--column", "doi",
             "-o", str(target)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30  # at work: its output file has been started
        while not list(tmp_path.glob(".out.csv.*.tmp")) and child.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(chance.uniform(0.0, 0.6))
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)  # never hangs
        # Stopped (130), or finished first (0): never aborted, never hung, never a traceback
        # (a Ctrl-C after the work is ignored on the way out).
        finished = child.returncode == 0 and b"400,000 rows" in err
        assert child.returncode == 130 or finished, (child.returncode, err)
        assert b"terminate called" not in err and b"Traceback" not in err
        if child.returncode == 130:
            assert not target.exists()
            # One line says what was and was not written.
            assert err.decode().splitlines()[-1] == (
                f"airflow-doi normalize: interrupted (Ctrl-C): {target} was not written (a "
                "file appears only once complete)"), err
        assert not list(tmp_path.glob(".out.csv.*.tmp"))  # no half-written file left
