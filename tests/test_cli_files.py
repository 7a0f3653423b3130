"""The file commands read, fail and write alike: every fixture of ``tests/data/files`` goes
through ``normalize``, ``resolve`` (against the bundled simulator, over loopback) and
``repair`` (``--no-verify``: nothing sent), and no row may be lost; the files none can use give
all three the same message and exit code 2.
"""

from __future__ import annotations

import gzip
import os
import shlex
import stat
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_doi.cli.repair import added_columns
from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked
from tests.conftest import ROOT, output_header, read_output_csv

FILES = ROOT / "tests" / "data" / "files"
REPAIR_ADDED = added_columns()
#: Fixture -> (extra arguments, rows both commands must write, input values (as text) in order).
READABLE: dict[str, tuple[list[str], int]] = {
    "latin1.csv": ([], 2),
    "cp1252.csv": ([], 2),
    "ragged.csv": ([], 4),
    "header_only_no_newline.csv": ([], 0),
    "semicolon.csv": ([], 2),  # the separator is found: no --delimiter needed
    "bom.csv": ([], 1),
    "formulas.csv": ([], 5),
    "one_column_blank_line.csv": ([], 3),
    "blank_lines.csv": ([], 2),
    "gzipped.csv.gz": ([], 3),
    "gzip_named_plain.csv": ([], 3),
    "binary_column.parquet": ([], 3),
}


def cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return forked.run(
        [sys.executable, "-m", "airflow_doi", *map(str, args)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )


def read_csv(path: Path) -> list[dict[str, str]]:
    return read_output_csv(path)


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    with ProxySimulator(auto_records=True) as simulator:
        yield simulator.url


def normalize(source: Path, target: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("normalize", source, "--column", "doi", "--prefix", "n_", "-o", target, *args)


def resolve(
    source: Path, target: Path, proxy: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return cli("resolve", source, "--column", "doi", "-o", target, "--base-url", proxy,
               "--rate", "200", *args)


def repair(source: Path, target: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("repair", source, "--column", "doi", "-o", target, "--no-verify", *args)


def input_names(source: Path, args: list[str]) -> list[str]:
    """The input's column names, as the reader sees them."""
    from airflow_doi.files.read import CsvOptions, detect_format, open_table

    options = CsvOptions(delimiter=args[1]) if args[:1] == ["--delimiter"] else None
    return open_table(source, detect_format(source), chunk_rows=10, options=options).names


def test_fixtures_are_what_the_generator_writes(tmp_path: Path) -> None:
    """The committed files are reproducible from make_fixtures.py (CSV and gzip bytes)."""
    from tests.data.files import make_fixtures

    for name, content in make_fixtures.CSV_FILES.items():
        assert (FILES / name).read_bytes() == content, name
    assert gzip.decompress((FILES / "gzipped.csv.gz").read_bytes()) == make_fixtures.ROWS_GZ


@pytest.mark.parametrize("name", sorted(READABLE))
def test_both_commands_keep_every_row_of_every_fixture(
    tmp_path: Path, proxy: str, name: str
) -> None:
    args, rows = READABLE[name]
    source = FILES / name
    normalized, resolved = tmp_path / "n.csv", tmp_path / "r.csv"
    first = normalize(source, normalized, *args)
    second = resolve(source, resolved, proxy, *args)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert "Traceback" not in first.stderr + second.stderr
    out_n, out_r = read_csv(normalized), read_csv(resolved)
    assert len(out_n) == len(out_r) == rows
    # The same cell, row for row: both commands read the file the same way.
    assert [row["doi"] for row in out_n] == [row["input"].lstrip("'") for row in out_r]
    # repair keeps every row and every input column, cell for cell as normalize does.
    third = repair(source, tmp_path / "p.csv", *args)
    assert third.returncode == 0, third.stderr
    assert "Traceback" not in third.stderr
    out_p = read_csv(tmp_path / "p.csv")
    assert len(out_p) == rows
    names = input_names(source, args)
    assert output_header(tmp_path / "p.csv") == [*names, *REPAIR_ADDED]
    assert [{k: r[k] for k in names} for r in out_p] == [{k: r[k] for k in names} for r in out_n]
    # ...and judge it the same way.
    for n_row, r_row in zip(out_n, out_r, strict=True):
        assert (n_row["n_doi_valid"] == "true") == (r_row["status"] == "resolved"), r_row
        if n_row["n_doi_reason"] not in ("", "reserved_suffix"):
            assert r_row["status"] == "invalid"
            assert r_row["error"] == n_row["n_doi_reason"]


def test_ragged_rows_are_flagged_alike(tmp_path: Path, proxy: str) -> None:
    normalize(FILES / "ragged.csv", tmp_path / "n.csv")
    run = resolve(FILES / "ragged.csv", tmp_path / "r.csv", proxy)
    out = read_csv(tmp_path / "r.csv")
    assert [r["status"] for r in out] == ["resolved", "invalid", "invalid", "resolved"]
    assert [r["error"] for r in out] == ["", "malformed_row", "malformed_row", ""]
    assert out[2]["input"] == "10.1000/3"  # the cell is kept, the row is never sent
    assert [r["n_doi_reason"] for r in read_csv(tmp_path / "n.csv")] == [
        "", "malformed_row", "malformed_row", ""
    ]
    assert "2 CSV rows had the wrong number of fields" in run.stderr
    fixed = repair(FILES / "ragged.csv", tmp_path / "p.csv")
    assert fixed.returncode == 0, fixed.stderr
    out = read_csv(tmp_path / "p.csv")
    assert [r["doi_suggestion_error"] for r in out] == ["", "malformed_row", "malformed_row", ""]
    assert out[2]["doi"] == "10.1000/3"  # kept, and not looked at
    assert "2 CSV rows had the wrong number of fields" in fixed.stderr


def test_a_latin1_cell_read_as_utf8_is_flagged_per_row_with_a_hint(
    tmp_path: Path, proxy: str
) -> None:
    utf8 = ("--encoding", "utf-8")  # said, so not found from the file (that reads it right)
    for command in ("normalize", "resolve", "repair"):
        target = tmp_path / f"{command}.csv"
        run = (normalize(FILES / "latin1.csv", target, *utf8) if command == "normalize"
               else repair(FILES / "latin1.csv", target, *utf8) if command == "repair"
               else resolve(FILES / "latin1.csv", target, proxy, *utf8))
        assert run.returncode == 0, run.stderr
        assert "--encoding latin-1" in run.stderr and "not UTF-8" in run.stderr
        first = read_csv(target)[0]
        assert first["input" if command == "resolve" else "doi"] == "10.1000/caf\ufffd"
    repaired = read_csv(tmp_path / "repair.csv")
    assert [r["doi_suggestion_error"] for r in repaired] == ["bad_encoding", ""]
    assert repaired[0]["doi_suggestion"] == ""  # never "repaired" by dropping the bad byte
    assert read_csv(tmp_path / "resolve.csv")[0]["error"] == "bad_encoding"
    assert read_csv(tmp_path / "normalize.csv")[0]["n_doi_reason"] == "bad_encoding"


@pytest.mark.parametrize(("name", "encoding", "note"), [
    ("latin1.csv", "latin-1", "Université"),
    ("cp1252.csv", "cp1252", "€ 5"),
])
def test_encoding_reads_every_column_as_text_and_writes_utf8(
    tmp_path: Path, proxy: str, name: str, encoding: str, note: str
) -> None:
    target = tmp_path / "n.csv"
    run = normalize(FILES / name, target, "--encoding", encoding)
    assert run.returncode == 0, run.stderr
    assert f"read as {encoding}, ','-separated, LF line endings; written as UTF-8" in run.stderr
    assert "U+FFFD" not in run.stderr
    rows = read_csv(target)
    assert rows[0]["note"] == note  # the same characters, in UTF-8
    assert all(row["n_doi_valid"] == "true" for row in rows)
    resolved = tmp_path / "r.csv"
    assert resolve(FILES / name, resolved, proxy, "--encoding", encoding).returncode == 0
    assert [r["status"] for r in read_csv(resolved)] == ["resolved", "resolved"]
    if encoding == "latin-1":
        assert read_csv(resolved)[0]["input"] == "10.1000/café"
    fixed = repair(FILES / name, tmp_path / "p.csv", "--encoding", encoding)
    assert fixed.returncode == 0, fixed.stderr
    assert f"read as {encoding}, ','-separated, LF line endings; written as UTF-8" in fixed.stderr
    rows = read_csv(tmp_path / "p.csv")
    assert rows[0]["note"] == note
    assert [r["doi_suggestion_error"] for r in rows] == ["", ""]


def test_utf8_said_warns_instead_of_silently_rewriting_other_columns(
    tmp_path: Path,
) -> None:
    run = normalize(FILES / "cp1252.csv", tmp_path / "n.csv", "--encoding", "utf-8")
    assert run.returncode == 0
    assert "2 cells were not UTF-8" in run.stderr and "note (2)" in run.stderr
    assert "--encoding cp1252" in run.stderr


def test_without_flags_a_cp1252_file_is_read_as_cp1252(tmp_path: Path) -> None:
    run = normalize(FILES / "cp1252.csv", tmp_path / "n.csv")
    assert run.returncode == 0, run.stderr
    assert "read as cp1252, ','-separated, LF line endings; written as UTF-8" in run.stderr
    assert "U+FFFD" not in run.stderr
    assert read_csv(tmp_path / "n.csv")[0]["note"] == "€ 5"


def test_a_row_larger_than_a_read_block_is_read(tmp_path: Path, proxy: str) -> None:
    source = tmp_path / "big.csv"
    big = "x" * 5_000_000
    source.write_text(f"id,doi,note\n1,10.1000/a,{big}\n2,10.1000/b,short\n", encoding="utf-8")
    run = normalize(source, tmp_path / "n.csv")
    assert run.returncode == 0, run.stderr
    rows = read_csv(tmp_path / "n.csv")
    assert [r["n_doi"] for r in rows] == ["10.1000/a", "10.1000/b"]
    assert rows[0]["note"] == big
    run = resolve(source, tmp_path / "r.csv", proxy)
    assert run.returncode == 0, run.stderr
    assert [r["status"] for r in read_csv(tmp_path / "r.csv")] == ["resolved", "resolved"]
    run = repair(source, tmp_path / "p.csv")
    assert run.returncode == 0, run.stderr
    rows = read_csv(tmp_path / "p.csv")
    assert [r["doi"] for r in rows] == ["10.1000/a", "10.1000/b"] and rows[0]["note"] == big


def test_parquet_binary_column_is_text_in_input(tmp_path: Path, proxy: str) -> None:
    run = resolve(FILES / "binary_column.parquet", tmp_path / "r.parquet", proxy)
    assert run.returncode == 0, run.stderr
    table = pq.read_table(tmp_path / "r.parquet")
    assert table.column("resolution_input").to_pylist() == ["10.1000/a", "10.1000/\ufffd", None]
    assert table.column("resolution_status").to_pylist() == ["resolved", "invalid", "invalid"]
    assert table.column("resolution_error").to_pylist()[1] == "bad_encoding"
    assert table.schema.field("doi").type == pa.binary()  # the user's column, kept as it was
    # normalize keeps the column's type in Parquet output and writes it as text in CSV
    assert normalize(FILES / "binary_column.parquet", tmp_path / "n.parquet").returncode == 0
    assert pq.read_table(tmp_path / "n.parquet").schema.field("doi").type == pa.binary()
    assert normalize(FILES / "binary_column.parquet", tmp_path / "n.csv").returncode == 0
    assert read_csv(tmp_path / "n.csv")[0]["doi"] == "10.1000/a"
    # repair too, and flags the cell that is not UTF-8 instead of repairing it
    assert repair(FILES / "binary_column.parquet", tmp_path / "p.parquet").returncode == 0
    fixed = pq.read_table(tmp_path / "p.parquet")
    assert fixed.schema.field("doi").type == pa.binary()
    assert fixed.column("doi_suggestion_error").to_pylist() == [None, "bad_encoding", None]
    run = repair(FILES / "binary_column.parquet", tmp_path / "p.csv")
    assert run.returncode == 0, run.stderr
    assert [r["doi"] for r in read_csv(tmp_path / "p.csv")] == ["10.1000/a", "10.1000/\ufffd", ""]


def _zip(tmp_path: Path) -> Path:
    path = tmp_path / "archive.csv"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("inner.csv", "doi\n10.1000/a\n")
    return path


def _xlsx(tmp_path: Path) -> Path:
    """A workbook as Excel writes one (the entries that make it one), named as people name it."""
    path = tmp_path / "catalogue.xlsx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("xl/workbook.xml", "<workbook/>")
        archive.writestr("xl/worksheets/sheet1.xml", "<worksheet/>")
    return path


def _xls(tmp_path: Path) -> Path:
    path = tmp_path / "catalogue.xls"
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    return path


def _bad_cp1252(tmp_path: Path) -> Path:
    path = tmp_path / "bad.csv"
    path.write_bytes(b"id,doi\n1,10.1000/\x81\n")
    return path


def _written(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


#: (how to make the input, extra arguments, words both messages must contain)
REFUSED = {
    "missing file": (lambda tmp: tmp / "nope.csv", [], ["nope.csv: no such file"]),
    "misspelt column": (
        lambda tmp: FILES / "bom.csv", ["--column", "doi_rwa"],
        ["no column 'doi_rwa'", "'id', 'doi'"],
    ),
    "duplicate columns csv": (
        lambda tmp: FILES / "duplicate_columns.csv", [], ["2 columns answer to --column 'doi'"],
    ),
    "duplicate columns parquet": (
        lambda tmp: FILES / "duplicate_columns.parquet", [], ["2 columns answer to --column 'doi'"],
    ),
    "wrong delimiter": (lambda tmp: FILES / "semicolon.csv", ["--delimiter", "|"],
                        ["--delimiter ';'"]),
    "no header line": (
        lambda tmp: _written(tmp / "dois.txt", "10.1127/nos/2/1972/149\n10.1000/x\n"), [],
        ["first line is read as the header, and this one is a DOI", "add a header line"],
    ),
    # A new user's trial: "pass one of them to --column" had them name a DOI of the first row.
    "no header line, several columns": (
        lambda tmp: _written(tmp / "nh.csv", "0001;10.1000/1;Title\r\n0002;10.1000/2;T2\r\n"),
        [], ["columns: '0001', '10.1000/1', 'Title'", "'10.1000/1' in it is a DOI, so the file "
             "seems to have no header line: add one naming the columns"],
    ),
    "json lines": (
        lambda tmp: _written(tmp / "dois.jsonl", '{"row": 1, "doi": "10.1000/x"}\n'), [],
        ["looks like JSON (Lines), which is not read"],
    ),
    "zip archive": (_zip, [], ["zip archive"]),
    # A new user's trial: an .xlsx was told to be unzipped for "the CSV inside".
    "excel workbook": (_xlsx, [], ["is an Excel workbook (.xlsx), not CSV", "CSV UTF-8",
                                   "Save As"]),
    "excel 97 workbook": (_xls, [], ["Excel 97-2003 workbook", "Save As"]),
    "not the named encoding": (_bad_cp1252, ["--encoding", "cp1252"], ["not cp1252", "81"]),
    "unknown encoding": (lambda tmp: FILES / "bom.csv", ["--encoding", "klingon"],
                         ["unknown encoding 'klingon'"]),
    "empty file": (lambda tmp: tmp / "empty.csv", [], ["empty file"]),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_both_commands_refuse_alike(tmp_path: Path, proxy: str, case: str) -> None:
    make, args, words = REFUSED[case]
    (tmp_path / "empty.csv").write_bytes(b"")
    source = make(tmp_path)
    outputs = []
    for command in ("normalize", "resolve", "repair"):
        target = tmp_path / f"{command}.csv"
        line = {
            "normalize": [command, source, "-o", target, "--prefix", "n_"],
            "resolve": [command, source, "-o", target, "--base-url", proxy],
            "repair": [command, source, "-o", target, "--base-url", proxy],
        }[command]
        if "--column" not in args:
            line += ["--column", "doi"]
        run = cli(*line, *args)
        assert run.returncode == 2, (command, run.stderr)
        assert "Traceback" not in run.stderr and not target.exists()
        for word in words:
            assert word in run.stderr, (command, run.stderr)
        outputs.append(run.stderr.split(": error: ", 1)[1])
    assert outputs[0] == outputs[1] == outputs[2]  # the very same message from each command


@pytest.mark.parametrize("command", ["normalize", "resolve", "repair", "enrich"])
def test_an_output_named_as_a_workbook_is_refused(tmp_path: Path, proxy: str,
                                                  command: str) -> None:
    """``-o out.xlsx`` wrote a CSV under a workbook's name (Excel then calls it damaged)."""
    target = tmp_path / "out.xlsx"
    line = [command, FILES / "bom.csv", "-o", target, "--column", "doi"]
    if command != "normalize":
        line += ["--base-url", proxy]
    run = cli(*line)
    assert run.returncode == 2, run.stderr
    assert "outputs are CSV or Parquet, not .xlsx workbooks: name it out.csv" in run.stderr
    assert "Traceback" not in run.stderr and not target.exists()
    explicit = cli(*line, "--format", "csv")  # asked for by name: written as asked
    assert explicit.returncode == 0, explicit.stderr
    assert target.read_bytes().startswith(b"\xef\xbb\xbf")


def test_outputs_get_the_users_umask(tmp_path: Path, proxy: str) -> None:
    old = os.umask(0o027)
    try:
        assert normalize(FILES / "bom.csv", tmp_path / "n.csv").returncode == 0
        assert resolve(FILES / "bom.csv", tmp_path / "r.csv", proxy).returncode == 0
        assert repair(FILES / "bom.csv", tmp_path / "p.csv").returncode == 0
    finally:
        os.umask(old)
    for name in ("n.csv", "r.csv", "p.csv"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640, name


def test_resolve_escapes_formulas_in_raw_and_server_columns(tmp_path: Path, proxy: str) -> None:
    run = resolve(FILES / "formulas.csv", tmp_path / "r.csv", proxy)
    assert run.returncode == 0, run.stderr
    inputs = [r["input"] for r in read_csv(tmp_path / "r.csv")]
    assert inputs == ["'=HYPERLINK(\"http://x\")", "'+10.1000/a", "'-10.1000/b",
                      "'\t10.1000/c", "10.1000/ok"]
    unescaped = resolve(FILES / "formulas.csv", tmp_path / "raw.csv", proxy,
                        "--no-escape-formulas")
    assert unescaped.returncode == 0
    assert read_csv(tmp_path / "raw.csv")[0]["input"] == '=HYPERLINK("http://x")'
    # Parquet is not a spreadsheet format: nothing is changed there.
    assert resolve(FILES / "formulas.csv", tmp_path / "r.parquet", proxy).returncode == 0
    # (ours are named resolution_... there: the file has a column doi)
    assert pq.read_table(tmp_path / "r.parquet").column("resolution_input")[1].as_py() == (
        "+10.1000/a")


def test_an_unsafe_url_value_reaches_the_csv_only_raw_and_escaped(tmp_path: Path) -> None:
    """A server's ``=HYPERLINK(...)`` URL value: never ``url``, and a plain cell in url_raw."""
    hostile = '=HYPERLINK("javascript:alert(1)","click")'
    records = {"10.1000/evil": [{"index": 1, "type": "URL",
                                 "data": {"format": "string", "value": hostile}}]}
    source = tmp_path / "in.csv"
    source.write_text("doi\n10.1000/evil\n", encoding="utf-8")
    with ProxySimulator(records) as simulator:
        run = resolve(source, tmp_path / "r.csv", simulator.url)
    assert run.returncode == 0, run.stderr
    (row,) = read_csv(tmp_path / "r.csv")
    assert row["status"] == "no_values" and row["url"] == ""
    assert row["url_raw"] == "'" + hostile


def test_normalize_leaves_user_columns_alone_unless_asked(tmp_path: Path) -> None:
    assert normalize(FILES / "formulas.csv", tmp_path / "plain.csv").returncode == 0
    plain = read_csv(tmp_path / "plain.csv")
    assert [r["note"] for r in plain] == ["=1+1", "@SUM(A1)", "-2", "plain", "fine"]
    run = normalize(FILES / "formulas.csv", tmp_path / "safe.csv", "--escape-formulas")
    assert run.returncode == 0, run.stderr
    safe = read_csv(tmp_path / "safe.csv")
    assert [r["note"] for r in safe] == ["'=1+1", "'@SUM(A1)", "'-2", "plain", "fine"]
    # the DOI analysis still saw the cell as written
    assert [r["n_doi_reason"] for r in safe] == [r["n_doi_reason"] for r in plain]


def test_a_gzip_file_is_read_and_other_archives_are_named(tmp_path: Path) -> None:
    run = normalize(FILES / "gzipped.csv.gz", tmp_path / "n.csv")
    assert run.returncode == 0, run.stderr
    assert [r["n_doi"] for r in read_csv(tmp_path / "n.csv")] == [
        "10.1000/gz1", "10.1000/GZ2", ""
    ]
    bz = tmp_path / "in.csv.bz2"
    import bz2

    bz.write_bytes(bz2.compress(b"doi\n10.1000/a\n"))
    run = normalize(bz, tmp_path / "o.csv")
    assert run.returncode == 2 and "bzip2-compressed" in run.stderr


# -- --output never replaces what is not a regular file, nor the input --------------------------

SMALL = "id,doi_raw\n1,doi:10.1000/ABC\n2,n/a\n"


def test_output_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text(SMALL, encoding="utf-8")
    real = tmp_path / "data" / "real.csv"
    real.parent.mkdir()
    real.write_text("old\n", encoding="utf-8")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    done = cli("normalize", source, "--column", "doi_raw", "-o", link)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and link.resolve() == real
    assert "10.1000/ABC" in real.read_text(encoding="utf-8")
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_output_to_a_fifo_is_written_through(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text(SMALL, encoding="utf-8")
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    child = subprocess.Popen(
        [sys.executable, "-m", "airflow_doi", "normalize", str(source), "--column", "doi_raw",
         "-o", str(fifo)], stderr=subprocess.PIPE, text=True, cwd=ROOT)
    with fifo.open(encoding="utf-8") as reader:  # blocks until the CLI opens the FIFO
        received = reader.read()
    assert child.wait(timeout=120) == 0, child.stderr.read() if child.stderr else ""
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still a FIFO, not a file put in its place
    assert "doi_key" in received and "10.1000/ABC" in received


@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
@pytest.mark.parametrize("command", ["normalize", "report"])
def test_output_to_standard_output_through_a_pipe(tmp_path: Path, command: str,
                                                   target: str) -> None:
    """Found in a new-user trial: ``-o /dev/stdout`` into a pipe failed (the link leads to
    ``pipe:[...]``, no path), and ``-o -`` wrote a file named ``-``."""
    source = tmp_path / "in.csv"
    source.write_text(SMALL, encoding="utf-8")
    done = subprocess.run(
        f"{shlex.quote(sys.executable)} -m airflow_doi {command} {shlex.quote(str(source))} "
        f"--column doi_raw -o {target} | cat", shell=True, capture_output=True, text=True,
        cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert ("10.1000/ABC" if command == "normalize" else "<!doctype html>") in done.stdout
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]  # no file named "-"


@pytest.mark.parametrize("command", ["normalize", "repair"])
def test_output_that_is_the_input_is_refused(tmp_path: Path, command: str) -> None:
    source = tmp_path / "in.csv"
    source.write_text(SMALL, encoding="utf-8")
    alias = tmp_path / "alias.csv"
    alias.symlink_to(source)
    for target in (source, alias):
        done = cli(command, source, "--column", "doi_raw", "-o", target)
        assert done.returncode == 2, done.stderr
        assert "is the input file itself" in done.stderr and "Traceback" not in done.stderr
    assert source.read_text(encoding="utf-8") == SMALL


def test_output_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text(SMALL, encoding="utf-8")
    done = cli("normalize", source, "--column", "doi_raw", "-o", tmp_path)
    assert done.returncode == 2, done.stderr
    assert "is a directory" in done.stderr and "Traceback" not in done.stderr


def test_a_wrong_multibyte_encoding_and_a_cut_gzip_are_input_errors(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text(SMALL, encoding="utf-8")
    done = cli("normalize", source, "--column", "doi_raw", "-o", tmp_path / "o.csv",
               "--encoding", "utf-16")
    assert done.returncode == 2, done.stderr
    assert f"{source}: cannot be read as utf-16" in done.stderr and "--encoding" in done.stderr
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(gzip.compress(SMALL.encode() * 50)[:40])
    done = cli("normalize", cut, "--column", "doi_raw", "-o", tmp_path / "o.csv")
    assert done.returncode == 2, done.stderr
    assert f"{cut}: the compressed file is damaged or cut short" in done.stderr
    assert "Traceback" not in done.stderr
