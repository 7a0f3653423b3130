"""``airflow-doi normalize`` end to end, in a subprocess, on CSV and Parquet files."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_doi import to_url, validate
from tests import forked
from tests.conftest import ROOT, read_output_csv

ADDED = ["doi", "doi_key", "doi_valid", "doi_reason", "doi_url"]
CELLS = [
    "https://doi.org/10.1000/ABC",
    "doi: 10.1000/x",
    "",
    "junk, with a comma",
    'quote " inside',
    "line\nbreak",
    "https://doi.org/10.1002/%28SICI%29",
    "10.1000/a/b",
    "  10.1000/182\t",
    "10.1000/ß",
]


#: Every test runs on the native core and on the pure-Arrow fallback.
pytestmark = pytest.mark.usefixtures("vector_engine")

def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return forked.run(
        [sys.executable, "-m", "airflow_doi", *map(str, args)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )


def write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def read_csv(path: Path) -> list[dict[str, str]]:
    return read_output_csv(path)


def expected(cell: str | None) -> dict[str, str]:
    """The added columns as CSV text, from the scalar API."""
    result = validate(cell)
    return {
        "doi": result.doi or "",
        "doi_key": result.key or "",
        "doi_valid": "true" if result.valid else "false",
        "doi_reason": result.reason or "",
        "doi_url": to_url(cell) if result.doi else "",
    }


@pytest.fixture()
def sample_rows() -> list[dict[str, str]]:
    rows = []
    for i in range(53):  # not a multiple of the chunk size used below
        rows.append({"id": f"{i:05d}", "ref": CELLS[i % len(CELLS)], "note": f"n{i},x"})
    return rows


@pytest.mark.parametrize("chunk", ["7", "100000"])
def test_csv_keeps_rows_and_columns_and_adds_the_doi_columns(
    tmp_path: Path, sample_rows: list[dict[str, str]], chunk: str
) -> None:
    source, target = tmp_path / "in.csv", tmp_path / "out" / "result.csv"
    write_csv(source, sample_rows)
    run = cli("normalize", source, "--column", "ref", "--output", target, "--chunk-size", chunk,
              "--mkdir")  # out/ is new
    assert run.returncode == 0, run.stderr
    out = read_csv(target)
    assert list(out[0]) == ["id", "ref", "note", *ADDED]
    assert len(out) == len(sample_rows)
    for row, original in zip(out, sample_rows, strict=True):
        assert {k: row[k] for k in original} == original  # ids like 00012 stay text
        assert {k: row[k] for k in ADDED} == expected(original["ref"])
    valid = sum(validate(r["ref"]).valid for r in sample_rows)
    assert f"53 rows: {valid} valid, {53 - valid} not (" in run.stderr
    assert "empty=" in run.stderr and "bad_directory=" in run.stderr


def test_parquet_in_and_out_keeps_types(tmp_path: Path) -> None:
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    table = pa.table({
        "n": pa.array(range(25), pa.int64()),
        "ref": pa.array([CELLS[i % len(CELLS)] if i % 6 else None for i in range(25)]),
    })
    pq.write_table(table, source, row_group_size=4)
    run = cli("normalize", source, "--column", "ref", "--output", target, "--chunk-size", "3")
    assert run.returncode == 0, run.stderr
    out = pq.read_table(target)
    assert out.column_names == ["n", "ref", *ADDED]
    assert out.column("n").to_pylist() == list(range(25))
    assert out.schema.field("doi_valid").type == pa.bool_()
    for cell, doi, reason in zip(
        table.column("ref").to_pylist(), out.column("doi").to_pylist(),
        out.column("doi_reason").to_pylist(), strict=True,
    ):
        assert (doi, reason) == (validate(cell).doi, validate(cell).reason)


def test_csv_to_parquet_by_flag(tmp_path: Path, sample_rows: list[dict[str, str]]) -> None:
    source, target = tmp_path / "in.csv", tmp_path / "out.data"
    write_csv(source, sample_rows)
    run = cli("normalize", source, "--column", "ref", "-o", target, "--format", "parquet")
    assert run.returncode == 0, run.stderr
    out = pq.read_table(target)
    assert out.num_rows == 53 and out.column("id").to_pylist()[:2] == ["00000", "00001"]


def test_bad_utf8_cell_is_reported_not_fatal(tmp_path: Path) -> None:
    source, target = tmp_path / "bad.csv", tmp_path / "out.csv"
    source.write_bytes(
        b"id,ref,other\n1,10.1000/\xff\xfe,ok\n2,10.1000/fine,caf\xe9\n3,\x80,x\n"
        b"4,https://doi.org/10.1000/\xff,y\n"
    )
    # Said, so not found from the file (which would read these bytes as cp1252).
    run = cli("normalize", source, "--column", "ref", "--output", target, "--encoding", "utf-8")
    assert run.returncode == 0, run.stderr
    out = read_csv(target)
    assert [r["id"] for r in out] == ["1", "2", "3", "4"]
    assert [r["doi_reason"] for r in out] == ["bad_encoding", "", "bad_encoding", "bad_encoding"]
    assert [r["doi_valid"] for r in out] == ["false", "true", "false", "false"]
    assert out[3]["doi"] == out[3]["doi_key"] == out[3]["doi_url"] == ""
    assert out[0]["ref"] == "10.1000/\ufffd\ufffd"  # bad bytes kept visible as U+FFFD
    assert out[1]["other"] == "caf\ufffd"


def test_malformed_rows_are_kept_and_flagged_never_lost(tmp_path: Path) -> None:
    source, target = tmp_path / "ragged.csv", tmp_path / "out.csv"
    source.write_bytes(
        b'id,ref,note\n1,10.1000/1,a\n2\n3,10.1000/3,b,extra\n4,"10.1000/4",\xff\n'
        b'5,"10.1000/x\ny",c\n'
    )
    run = cli("normalize", source, "--column", "ref", "--output", target, "--chunk-size", "2",
              "--encoding", "utf-8")
    assert run.returncode == 0, run.stderr
    out = read_csv(target)
    assert [r["id"] for r in out] == ["1", "2", "3", "4", "5"]  # every input row, in order
    assert [r["doi_reason"] for r in out] == [
        "", "malformed_row", "malformed_row", "", "bad_character"
    ]
    assert [r["doi_valid"] for r in out] == ["true", "false", "false", "true", "false"]
    assert out[2]["ref"] == "10.1000/3" and out[2]["doi"] == ""
    assert out[2]["note"] == "b,extra"  # the surplus field kept, in the last cell
    assert out[1]["ref"] == ""  # padded
    assert out[3]["note"] == "\ufffd"  # bad bytes still kept visible in the lenient pass
    assert "2 CSV rows had the wrong number of fields" in run.stderr
    assert "malformed_row=2" in run.stderr


def test_header_only_file_gives_header_only_output(tmp_path: Path) -> None:
    source, target = tmp_path / "empty.csv", tmp_path / "out.csv"
    source.write_text("id,ref\n")
    run = cli("normalize", source, "--column", "ref", "--output", target)
    assert run.returncode == 0, run.stderr
    assert target.read_text().splitlines() == [
        "id,ref,doi,doi_key,doi_valid,doi_reason,doi_url"  # quoted only where needed
    ]
    assert "0 rows" in run.stderr


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (b"id,ref\n1,10.1000/1\n", ["--column", "missing"], "no column 'missing'"),
        (b"", ["--column", "ref"], "empty file"),
        (b"id,doi,n_doi\n1,10.1000/1,x\n", ["--column", "doi", "--prefix", "n_"],
         "pick another --prefix"),
    ],
)
def test_input_errors_exit_2_with_a_clear_message(
    tmp_path: Path, content: bytes, args: list[str], message: str
) -> None:
    source, target = tmp_path / "in.csv", tmp_path / "out.csv"
    source.write_bytes(content)
    run = cli("normalize", source, *args, "--output", target)
    assert run.returncode == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr
    assert not target.exists()


def test_missing_input_file(tmp_path: Path) -> None:
    run = cli("normalize", tmp_path / "nope.csv", "--column", "doi", "-o", tmp_path / "o.csv")
    assert run.returncode == 2 and "no such file" in run.stderr


def test_prefix_avoids_a_clash(tmp_path: Path) -> None:
    source, target = tmp_path / "in.csv", tmp_path / "out.csv"
    source.write_text("id,doi\n1,DOI:10.1000/x\n")
    run = cli("normalize", source, "--column", "doi", "--prefix", "clean_", "-o", target)
    assert run.returncode == 0, run.stderr
    row = read_csv(target)[0]
    assert row["doi"] == "DOI:10.1000/x" and row["clean_doi"] == "10.1000/x"
    assert row["clean_doi_key"] == "10.1000/X"


def test_decode_option_is_passed_through(tmp_path: Path) -> None:
    source, target = tmp_path / "in.csv", tmp_path / "out.csv"
    source.write_text("ref\n10.1000/456%23789\n")
    run = cli("normalize", source, "--column", "ref", "-o", target, "--decode", "always")
    assert run.returncode == 0, run.stderr
    assert read_csv(target)[0]["doi"] == "10.1000/456#789"


def test_valid_but_likely_damaged_cells_are_noted_with_examples(tmp_path: Path) -> None:
    """Issue 34: cells valid per the standard but with text glued on are counted apart, with
    the repair a rule offers, and the note points at ``airflow-doi repair``."""
    source = tmp_path / "in.csv"
    write_csv(source, [{"id": str(i), "doi": cell} for i, cell in enumerate([
        "10.1000/182 (retracted)", "10.1038/nature12373Accessed 2019",
        "10.1371/journal. pone.0123456", "10.1000/182 (retracted)", "10.1000/182",
        "https://doi.org/10.1038/nature12373", "not a doi",
    ])])
    result = cli("normalize", source, "--column", "doi", "-o", tmp_path / "out.csv")
    assert result.returncode == 0, result.stderr
    assert "6 valid, 1 not" in result.stderr  # still valid: the standard's verdict stands
    [note] = [line for line in result.stderr.splitlines() if "look damaged" in line]
    assert note.startswith("airflow-doi normalize: note: 4 valid cells look damaged")
    assert "'10.1000/182 (retracted)' (likely 10.1000/182, appended_text)" in note
    assert "(likely 10.1038/nature12373, glued_tail)" in note
    assert "(likely 10.1371/journal.pone.0123456, split_number)" in note
    assert f"airflow-doi repair {source} --column doi" in note


def test_no_damage_note_for_clean_dois(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    write_csv(source, [{"doi": "10.1000/182"}, {"doi": "10.1002/(SICI)1097-4571(199806)49:8"
                                                        "<693::AID-ASI4>3.0.CO;2-0"}])
    result = cli("normalize", source, "--column", "doi", "-o", tmp_path / "out.csv")
    assert result.returncode == 0 and "damaged" not in result.stderr, result.stderr


@pytest.mark.parametrize("command", ["normalize", "repair", "report", "resolve", "enrich"])
def test_every_file_command_reads_the_doi_column_by_default(tmp_path: Path, command: str) -> None:
    """--column defaults to doi on every command (it was required on three of them); a file
    without one is told its columns, exit 2."""
    missing = tmp_path / "urls.csv"
    missing.write_text("id,url\n1,10.1000/x\n", encoding="utf-8")
    target = tmp_path / ("out.html" if command == "report" else "out.csv")
    run = cli(command, missing, "-o", target)
    assert run.returncode == 2, run.stderr
    assert "no column 'doi' (columns: 'id', 'url'); pass one of them to --column" in run.stderr
    assert "Traceback" not in run.stderr and not target.exists()
    if command in ("normalize", "repair", "report"):  # the others would ask the network
        source = tmp_path / "works.csv"
        source.write_text("id,DOI\n1,doi:10.1000/x\n", encoding="utf-8")
        run = cli(command, source, "-o", target)
        assert run.returncode == 0, run.stderr
        assert target.exists()
        if command == "normalize":
            assert "10.1000/X" in target.read_text(encoding="utf-8")
