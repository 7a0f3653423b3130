"""What the file commands write (#34 items 2 and 3): a file that goes back to Excel as it
came (UTF-8 with a BOM after an Excel-style export, --output-encoding to choose, a cell the
encoding cannot hold refused by its row and column), and resolve and enrich carrying the
user's columns through, one output row per input row, in order.

Every command runs as a person runs it (``python -m airflow_doi``), against the bundled
simulator over loopback where it asks the proxy.
"""

from __future__ import annotations

import codecs
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked
from tests.conftest import ROOT, output_header, read_output_csv

#: An export from a German Excel: cp1252, ';', CRLF; a Müller, a NA, a formula-looking id.
EXCEL_ROWS = [
    ["ID", "Name", "Betrag", "doi"],
    ["00017", "Müller", "1.234,56", "10.1000/ÄBC"],
    ["00018", "Zoë Ørsted", "-2,00", "doi:10.1000/xyz"],
    ["00019", "Straße", "NA", "NA"],
]


def excel_file(path: Path, rows: list[list[str]] = EXCEL_ROWS) -> Path:
    path.write_bytes("".join(";".join(row) + "\r\n" for row in rows).encode("cp1252"))
    return path


def as_excel_opens(path: Path) -> list[list[str]]:
    """A CSV as Excel opens it on a Western-European Windows: UTF-8 when it starts with a
    BOM, else the machine's code page (cp1252); cells split on ';' (the list separator
    there), lines on CRLF."""
    data = path.read_bytes()
    if data.startswith(codecs.BOM_UTF8):
        text = data.decode("utf-8-sig")
    else:
        text = data.decode("cp1252", errors="replace")
    return [line.split(";") for line in text.split("\r\n") if line]


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxySimulator]:
    with ProxySimulator(auto_records=True) as simulator:
        yield simulator


def run(command: str, source: Path, target: Path, proxy: ProxySimulator,
        *args: str) -> subprocess.CompletedProcess[str]:
    extra = {
        "normalize": [], "repair": ["--no-verify"],
        "resolve": ["--base-url", proxy.url, "--rate", "100"],
        "enrich": ["--base-url", proxy.url, "--rate", "100", "--agency-rate", "100",
                   "--metadata-host", ",".join(proxy.metadata_hosts)],
    }[command]
    return forked.run(
        [sys.executable, "-m", "airflow_doi", command, str(source), "--column", "doi", "-o",
         str(target), *extra, *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


COMMANDS = ["normalize", "resolve", "enrich", "repair"]


@pytest.mark.parametrize("command", COMMANDS)
def test_an_excel_export_goes_back_to_excel(tmp_path: Path, proxy: ProxySimulator,
                                            command: str) -> None:
    """The cp1252 ';' CRLF file with Müller, read back as Excel reads a CSV: rows in equal
    rows out, every cell of the user's as it was, and stderr says how the output is."""
    source = excel_file(tmp_path / "apc.csv")
    target = tmp_path / "out.csv"
    done = run(command, source, target, proxy)
    assert done.returncode == 0, done.stderr
    assert target.read_bytes().startswith(codecs.BOM_UTF8 + b"ID;Name;Betrag;doi;")
    opened = as_excel_opens(target)
    assert len(opened) == len(EXCEL_ROWS)  # rows in == rows out (and the header)
    assert [row[:4] for row in opened] == EXCEL_ROWS  # Müller, not MÃ¼ller; 00017 as it was
    assert (f"airflow-doi {command}: note: read as cp1252, ';'-separated, CRLF line endings; "
            "written as UTF-8 with a BOM (for Excel; --output-encoding chooses), "
            "';'-separated, CRLF line endings") in done.stderr.splitlines()


@pytest.mark.parametrize("command", COMMANDS)
def test_output_encoding_cp1252_round_trips(tmp_path: Path, proxy: ProxySimulator,
                                            command: str) -> None:
    source = excel_file(tmp_path / "apc.csv")
    target = tmp_path / "out.csv"
    done = run(command, source, target, proxy, "--output-encoding", "cp1252")
    assert done.returncode == 0, done.stderr
    data = target.read_bytes()
    assert not data.startswith(codecs.BOM_UTF8)
    assert data.startswith("ID;Name;Betrag;doi;".encode("cp1252"))
    assert [row[:4] for row in as_excel_opens(target)] == EXCEL_ROWS
    assert "written as cp1252, ';'-separated, CRLF line endings" in done.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_a_cell_the_encoding_cannot_hold_is_refused_by_row_and_column(
        tmp_path: Path, proxy: ProxySimulator, command: str) -> None:
    rows = [*EXCEL_ROWS[:2], ["00020", "Ωmega", "1", "10.1000/1"]]
    source = tmp_path / "in.csv"
    source.write_text("".join(";".join(row) + "\r\n" for row in rows), encoding="utf-8")
    target = tmp_path / "out.csv"
    target.write_text("the user's earlier file\n", encoding="utf-8")
    done = run(command, source, target, proxy, "--output-encoding", "latin-1")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"airflow-doi {command}: error: {target}: row 2, column 'Name' holds 'Ω' (U+03A9), "
        "which latin-1 (--output-encoding) cannot hold, so nothing was written: choose "
        "utf-8-sig (UTF-8 with a BOM, which Excel opens) or an encoding that has it")
    assert target.read_text(encoding="utf-8") == "the user's earlier file\n"  # untouched
    assert not list(tmp_path.glob(".out.csv.*"))


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unknown_output_encoding_is_refused_before_any_work(
        tmp_path: Path, proxy: ProxySimulator, command: str) -> None:
    source = excel_file(tmp_path / "apc.csv")
    before = proxy.request_count + proxy.cn_requests
    done = run(command, source, tmp_path / "out.csv", proxy, "--output-encoding", "klingon")
    assert done.returncode == 2
    assert done.stderr == (f"airflow-doi {command}: error: unknown output encoding "
                           "'klingon': use a name such as utf-8, utf-8-sig (UTF-8 with a BOM, "
                           "as Excel reads it), cp1252 or latin-1\n")
    assert proxy.request_count + proxy.cn_requests == before
    assert not (tmp_path / "out.csv").exists()


def test_plain_utf8_stays_plain_and_utf16_gets_one_bom_across_batches(
        tmp_path: Path, proxy: ProxySimulator) -> None:
    source = tmp_path / "plain.csv"
    source.write_text("id,doi\n" + "".join(f"{i},10.1000/{i}é\n" for i in range(25)),
                      encoding="utf-8")
    plain = run("normalize", source, tmp_path / "plain.out.csv", proxy)
    assert plain.returncode == 0, plain.stderr
    assert (tmp_path / "plain.out.csv").read_bytes().startswith(b"id,doi,doi_normalized,")
    # No BOM, and nothing to say about plain UTF-8 with commas.
    assert "read as" not in plain.stderr and "written as" not in plain.stderr
    wide = run("normalize", source, tmp_path / "wide.csv", proxy, "--output-encoding",
               "utf-16", "--chunk-size", "4")
    assert wide.returncode == 0, wide.stderr
    data = (tmp_path / "wide.csv").read_bytes()
    assert data.count(codecs.BOM_UTF16_LE) == 1 and data.startswith(codecs.BOM_UTF16_LE)
    lines = data.decode("utf-16").split("\n")
    assert len([line for line in lines if line]) == 26
    assert lines[25].startswith("24,10.1000/24é,10.1000/24é,10.1000/24é,true")


# --- Keep my columns ----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["resolve", "enrich"])
def test_resolve_and_enrich_carry_every_column_through_by_default(
        tmp_path: Path, proxy: ProxySimulator, command: str) -> None:
    """As normalize does: the user's columns first, as they were; ours after them, named
    after the DOI column because the file has a column doi (stderr says so); one row out
    per row in, in order."""
    source = excel_file(tmp_path / "apc.csv")
    target = tmp_path / "out.csv"
    done = run(command, source, target, proxy)
    assert done.returncode == 0, done.stderr
    from airflow_doi.metadata.result import METADATA_COLUMNS
    from airflow_doi.resolver.result import COLUMNS

    ours = COLUMNS if command == "resolve" else METADATA_COLUMNS
    stem = "resolution" if command == "resolve" else "metadata"
    renamed = [name if name.startswith(f"{stem}_") else f"{stem}_{name}" for name in ours]
    assert output_header(target) == ["ID", "Name", "Betrag", "doi", *renamed]
    rows = read_output_csv(target, raw=True)
    assert [[row[name] for name in EXCEL_ROWS[0]] for row in rows] == EXCEL_ROWS[1:]
    status = f"{stem}_status"
    ok = "resolved" if command == "resolve" else "ok"
    assert [row[status] for row in rows] == [ok, ok, "invalid"]
    assert [row[f"{stem}_input"] for row in rows] == ["10.1000/ÄBC", "doi:10.1000/xyz", "NA"]
    assert (f"airflow-doi {command}: note: {source} already has a column named as one of "
            f"ours, so ours are named {', '.join(renamed)} (--prefix chooses others)"
            ) in done.stderr.splitlines()


@pytest.mark.parametrize("command", ["resolve", "enrich"])
def test_keep_columns_chooses_and_prefix_names_ours(tmp_path: Path, proxy: ProxySimulator,
                                                    command: str) -> None:
    source = excel_file(tmp_path / "apc.csv")
    target = tmp_path / "out.csv"
    done = run(command, source, target, proxy, "--keep-columns", "name, ID")
    assert done.returncode == 0, done.stderr
    header = output_header(target)
    assert header[:3] == ["ID", "Name", "input"]  # the file's order; no clash, our names
    assert "already has a column" not in done.stderr
    rows = read_output_csv(target, raw=True)
    assert [(row["ID"], row["Name"]) for row in rows] == [(r[0], r[1]) for r in EXCEL_ROWS[1:]]
    none = run(command, source, tmp_path / "none.csv", proxy, "--keep-columns", "",
               "--prefix", "r_")
    assert none.returncode == 0, none.stderr
    assert output_header(tmp_path / "none.csv")[:2] == ["r_input", "r_doi"]


@pytest.mark.parametrize("command", ["resolve", "enrich"])
def test_a_column_to_keep_that_is_not_there_is_refused_before_any_request(
        tmp_path: Path, proxy: ProxySimulator, command: str) -> None:
    source = excel_file(tmp_path / "apc.csv")
    before = proxy.request_count + proxy.cn_requests
    done = run(command, source, tmp_path / "out.csv", proxy, "--keep-columns", "ID,Titel")
    assert done.returncode == 2
    assert done.stderr == (f"airflow-doi {command}: error: {source}: no column 'Titel' "
                           "(--keep-columns; columns: 'ID', 'Name', 'Betrag', 'doi'); give "
                           "each column's exact name, comma-separated\n")
    assert proxy.request_count + proxy.cn_requests == before


def test_parquet_keeps_its_types_and_the_rows_their_order(tmp_path: Path,
                                                          proxy: ProxySimulator) -> None:
    import pyarrow as pa

    source = tmp_path / "works.parquet"
    refs = [f"10.1000/{i % 4}" for i in range(30)]
    pq.write_table(pa.table({"n": list(range(30)), "ref": refs}), source)
    done = forked.run(
        [sys.executable, "-m", "airflow_doi", "resolve", str(source), "--column", "ref", "-o",
         str(tmp_path / "out.parquet"), "--base-url", proxy.url, "--rate", "100"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.column_names[:3] == ["n", "ref", "input"]
    assert out.schema.field("n").type == pa.int64()
    assert out.column("n").to_pylist() == list(range(30))
    assert out.column("key").to_pylist() == [f"10.1000/{i % 4}" for i in range(30)]


def test_the_report_reads_a_resolve_output_whose_columns_were_renamed(
        tmp_path: Path, proxy: ProxySimulator) -> None:
    source = excel_file(tmp_path / "apc.csv")
    done = run("resolve", source, tmp_path / "resolved.csv", proxy)
    assert done.returncode == 0, done.stderr
    report = forked.run(
        [sys.executable, "-m", "airflow_doi", "report", str(source), "--column", "doi",
         "--resolution", str(tmp_path / "resolved.csv"), "-o", str(tmp_path / "r.html")],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert report.returncode == 0, report.stderr
    from airflow_doi.report.resolution import resolution_figures
    from airflow_doi.report.sources import read_resolution_table

    figures = resolution_figures(read_resolution_table(tmp_path / "resolved.csv"))
    assert figures.statuses is not None and figures.statuses["resolved"] == 2


@pytest.mark.parametrize("command", ["resolve", "enrich"])
def test_a_kept_cell_that_is_not_utf8_is_said(tmp_path: Path, proxy: ProxySimulator,
                                              command: str) -> None:
    """A UTF-8 file with one Latin-1 cell in a column carried through: kept with U+FFFD and
    counted on stderr, as normalize counts it."""
    source = tmp_path / "in.csv"
    source.write_bytes(b"id,note,doi\n1,caf\xe9,10.1000/a\n2,ok \xc3\xa9,10.1000/b\n")
    target = tmp_path / "out.csv"
    done = run(command, source, target, proxy)
    assert done.returncode == 0, done.stderr
    assert [row["note"] for row in read_output_csv(target, raw=True)] == ["caf\ufffd", "ok é"]
    assert (f"airflow-doi {command}: warning: 1 cell was not UTF-8 and is written with U+FFFD "
            "in place of the bad bytes, in column(s) note (1); if the file is Latin-1 or "
            "Windows-1252, run again with --encoding latin-1 or --encoding cp1252"
            ) in done.stderr.splitlines()
