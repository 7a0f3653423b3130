"""Hostile and unusual input files (issue #42, items 4 and 5).

Item 4: ``--escape-formulas`` reaches every text column of a file, whatever its Arrow type: a
Parquet dictionary column (a pandas ``Categorical``), ``string_view``, the binary types written
as text; in every command that writes CSV. Item 5: one huge field, or a gzip file that
inflates without end, costs bounded memory: the line is cut at
:data:`~airflow_doi.files.MAX_LINE_CHARS` (its row kept and flagged ``malformed_row``),
and a gzip stream that inflates more than :data:`~airflow_doi.files.inflate.MAX_INFLATION`
times is refused. Peak memory is measured on the real command, in a subprocess.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_doi.files import MAX_LINE_CHARS
from airflow_doi.files.inflate import MAX_INFLATION, open_gzip
from airflow_doi.files.jobs import normalize_file
from airflow_doi.files.read import TableInputError, TableReader, read_table
from airflow_doi.files.write import FORMULA_STARTS, escape_formulas
from airflow_doi.resolver.datafiles import jsonl_gz
from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked
from tests.conftest import ROOT, read_output_csv

CLI = [sys.executable, "-m", "airflow_doi"]


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return forked.run([*CLI, *map(str, args)], capture_output=True, text=True,
                      timeout=300, cwd=ROOT)


def escaped(cell: str) -> str:
    """A cell as ``--escape-formulas`` writes it."""
    return "'" + cell if cell[:1] and cell[0] in FORMULA_STARTS else cell


# -- item 4: every text column is escaped, whatever its Arrow type ---------------------------

CELLS = ["=HYPERLINK(\"http://evil.example\",\"10.1000/1\")", "=1+2", "+1", "-2", "@SUM(A1)",
         "\tx", "\rx", "plain", "", None]
#: Every Arrow type a text column can come as, from Parquet or pandas.
TEXT_TYPES = [
    pa.string(), pa.large_string(), pa.string_view(), pa.binary(), pa.large_binary(),
    pa.binary_view(), pa.dictionary(pa.int8(), pa.string()),
    pa.dictionary(pa.int32(), pa.large_string()), pa.dictionary(pa.int16(), pa.binary()),
]


def _column(cells: list[str | None], kind: pa.DataType) -> pa.Array:
    if pa.types.is_dictionary(kind):
        return pa.array(cells, kind.value_type).dictionary_encode().cast(kind)
    if kind in (pa.binary(), pa.large_binary(), pa.binary_view()):
        return pa.array([None if c is None else c.encode() for c in cells], kind)
    return pa.array(cells, kind)


def _texts(values: pa.Array) -> list[str | None]:
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    return [c.decode() if isinstance(c, bytes) else c for c in values.to_pylist()]


@pytest.mark.parametrize("kind", TEXT_TYPES, ids=str)
def test_escape_formulas_escapes_every_text_type_and_keeps_it(kind: pa.DataType) -> None:
    values = _column(CELLS, kind)
    result = escape_formulas(values)
    assert result.type == kind
    assert _texts(result) == [None if c is None else escaped(c) for c in CELLS]
    # nothing to escape: the same array back
    assert escape_formulas(_column(["a", "b", None], kind)).equals(_column(["a", "b", None], kind))


def test_escape_formulas_leaves_other_columns_alone() -> None:
    for values in (pa.array([-1, 2]), pa.array([-1.5]), pa.array([True]),
                   pa.array([-1, 2]).dictionary_encode(), pa.array([[1]]),
                   pa.array([b"=1" * 8], pa.binary(16))):
        assert escape_formulas(values) is values


def _hostile_parquet(path: Path) -> None:
    """A file as pandas writes one (the DOI column a Categorical: dictionary-encoded) with a
    string_view, a binary_view and another dictionary column beside it."""
    import pandas as pd  # the [pandas] extra, installed for the tests

    frame = pd.DataFrame({
        "doi": pd.Categorical(["=HYPERLINK(\"http://evil.example\",\"x\")", "10.1000/1",
                               "=1+2"]),
        "note": pd.Categorical(["@SUM(A1)", "fine", "-2"]),
    })
    frame.to_parquet(path)
    table = pq.read_table(path)
    assert pa.types.is_dictionary(table.schema.field("doi").type)
    table = table.append_column("view", pa.array(["=1+2", "+x", "ok"], pa.string_view()))
    table = table.append_column("bytes", pa.array([b"-1", b"ok", b"@x"], pa.binary_view()))
    pq.write_table(table, path)
    assert pq.ParquetFile(path).schema_arrow.field("view").type == pa.string_view()


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    with ProxySimulator(auto_records=True) as simulator:
        yield simulator.url


def test_every_command_escapes_dictionary_and_view_columns(tmp_path: Path, proxy: str) -> None:
    source = tmp_path / "pandas.parquet"
    _hostile_parquet(source)
    dois = ["=HYPERLINK(\"http://evil.example\",\"x\")", "10.1000/1", "=1+2"]
    other = {"note": ["@SUM(A1)", "fine", "-2"], "view": ["=1+2", "+x", "ok"],
             "bytes": ["-1", "ok", "@x"]}

    run = cli("normalize", source, "--column", "doi", "-o", tmp_path / "n.csv",
              "--escape-formulas")
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(tmp_path / "n.csv", raw=True)
    assert [r["doi"] for r in rows] == [escaped(d) for d in dois]
    for name, cells in other.items():
        assert [r[name] for r in rows] == [escaped(c) for c in cells], name

    run = cli("repair", source, "--column", "doi", "-o", tmp_path / "p.csv", "--no-verify",
              "--escape-formulas")
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(tmp_path / "p.csv", raw=True)
    assert [r["doi"] for r in rows] == [escaped(d) for d in dois]  # repair's DOI column
    for name, cells in other.items():
        assert [r[name] for r in rows] == [escaped(c) for c in cells], name

    run = cli("resolve", source, "--column", "doi", "-o", tmp_path / "r.csv", "--base-url",
              proxy, "--rate", "200")
    assert run.returncode == 0, run.stderr
    assert [r["input"] for r in read_output_csv(tmp_path / "r.csv")] == [
        escaped(d) for d in dois]

    snapshot = jsonl_gz(tmp_path / "snapshot.jsonl.gz", [{"DOI": "10.1000/1", "title": ["T"]}])
    run = cli("enrich", source, "--column", "doi", "-o", tmp_path / "e.csv", "--snapshot",
              snapshot, "--source", "snapshot", "--workers", "1")
    assert run.returncode == 0, run.stderr
    assert [r["input"] for r in read_output_csv(tmp_path / "e.csv")] == [
        escaped(d) for d in dois]


# The property: whatever a text column holds, and whatever its type in Parquet, or as a CSV
# cell, --escape-formulas writes it back escaped and otherwise unchanged.
_ALPHABET = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_CELL = st.one_of(
    st.text(_ALPHABET, max_size=12),
    st.builds(lambda first, rest: first + rest, st.sampled_from(list(FORMULA_STARTS)),
              st.text(_ALPHABET, max_size=8)),
)


def _written_cells(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [row["note"] for row in csv.DictReader(handle)]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(_CELL, min_size=1, max_size=8), kind=st.sampled_from(TEXT_TYPES))
@example(cells=["=1+2", "-x", "plain"], kind=pa.dictionary(pa.int8(), pa.string()))
@example(cells=["=1+2", "\rx"], kind=pa.string_view())
def test_property_any_parquet_text_column_is_escaped(tmp_path: Path, cells: list[str],
                                                     kind: pa.DataType) -> None:
    source, target = tmp_path / "in.parquet", tmp_path / "out.csv"
    dois = pa.array(["10.1000/1"] * len(cells))
    pq.write_table(pa.table({"doi": dois, "note": _column(cells, kind)}), source)
    normalize_file(source, target, column="doi", escape_formulas=True)
    assert _written_cells(target) == [escaped(cell) for cell in cells]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(_CELL, min_size=1, max_size=8))
@example(cells=["=1+2", "@x", "\tx"])
def test_property_any_csv_text_column_is_escaped(tmp_path: Path, cells: list[str]) -> None:
    source, target = tmp_path / "in.csv", tmp_path / "out.csv"
    text = io.StringIO(newline="")
    writer = csv.writer(text, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(["doi", "note"])
    writer.writerows(["10.1000/1", cell] for cell in cells)
    source.write_text(text.getvalue(), encoding="utf-8", newline="")
    normalize_file(source, target, column="doi", escape_formulas=True)
    assert _written_cells(target) == [escaped(cell) for cell in cells]


# -- item 5: a huge field, or a gzip file that inflates without end, costs bounded memory ----

#: Peak resident memory a command may reach on the hostile files below (the interpreter,
#: pyarrow and numpy take about 100 MiB of it before a byte is read; these files take ~220).
PEAK_MIB = 300


def _peak_mib(*args: str | Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """``airflow-doi ARGS`` and its peak RSS (MiB), measured by a wrapper that is its only
    child (``RUSAGE_CHILDREN``)."""
    wrapper = ("import json, resource, subprocess, sys; done = subprocess.run(sys.argv[1:], "
               "capture_output=True, text=True); print(json.dumps([done.returncode, "
               "done.stdout, done.stderr, resource.getrusage(resource.RUSAGE_CHILDREN)"
               ".ru_maxrss]))")
    done = subprocess.run([sys.executable, "-c", wrapper, *CLI, *map(str, args)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    code, out, err, peak = json.loads(done.stdout)
    return subprocess.CompletedProcess(args, code, out, err), peak / 1024


def _gzipped(path: Path, head: bytes, fill: bytes, size: int, tail: bytes,
             level: int = 6) -> Path:
    """A gzip file of ``head``, ``size`` bytes of ``fill`` repeated, ``tail``: written a MiB
    at a time, so the test never holds the text."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    block = (fill * ((1 << 20) // len(fill) + 1))[: 1 << 20]
    with path.open("wb") as out:
        out.write(compressor.compress(head))
        for _ in range(size >> 20):
            out.write(compressor.compress(block))
        out.write(compressor.compress(tail) + compressor.flush())
    return path


def test_the_issue_file_a_400_mib_field_in_a_400_kb_gzip_costs_bounded_memory(
        tmp_path: Path) -> None:
    source = _gzipped(tmp_path / "bomb.csv.gz", b"doi,note\n10.1000/1,", b"a", 400 << 20,
                      b"\n10.1000/2,after\n")
    assert source.stat().st_size < 500_000
    target = tmp_path / "out.csv"
    run, peak = _peak_mib("normalize", source, "--column", "doi", "-o", target)
    assert peak < PEAK_MIB, f"peak RSS {peak:.0f} MiB"
    assert run.returncode == 2, run.stderr
    assert f"{source}: inflates more than {MAX_INFLATION:,} times" in run.stderr
    assert "decompress it (gunzip)" in run.stderr and "Traceback" not in run.stderr
    assert not target.exists()


def test_a_huge_field_is_cut_its_row_kept_and_flagged_in_bounded_memory(tmp_path: Path) -> None:
    source = tmp_path / "huge.csv"
    head = "id,doi,note\n1,10.1000/1,"
    with source.open("w", encoding="utf-8") as out:
        out.write(head)
        for _ in range(40):
            out.write("x" * (1 << 20))  # a 40 MiB cell
        out.write("\n2,10.1000/2,after\n")
    target = tmp_path / "out.csv"
    run, peak = _peak_mib("normalize", source, "--column", "doi", "-o", target)
    assert peak < PEAK_MIB, f"peak RSS {peak:.0f} MiB"
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert [r["id"] for r in rows] == ["1", "2"]  # every row kept, in order
    assert rows[0]["note"] == "x" * (MAX_LINE_CHARS - len("1,10.1000/1,"))
    assert [r["doi_reason"] for r in rows] == ["malformed_row", ""]
    assert rows[1]["note"] == "after" and rows[1]["doi"] == "10.1000/2"
    assert f"1 CSV row was part of a record longer than {MAX_LINE_CHARS:,} characters" in (
        run.stderr)
    assert "e.g. '1,10.1000/1,xxx" in run.stderr and "x" * 300 not in run.stderr


def test_resolve_and_repair_flag_the_row_of_a_huge_field(tmp_path: Path, proxy: str) -> None:
    source = tmp_path / "huge.csv"
    source.write_text("doi,note\n10.1000/1," + "y" * (MAX_LINE_CHARS + 5) + "\n10.1000/2,b\n",
                      encoding="utf-8")
    run = cli("resolve", source, "--column", "doi", "-o", tmp_path / "r.csv", "--base-url",
              proxy, "--rate", "200")
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(tmp_path / "r.csv")
    assert [(r["status"], r["error"]) for r in rows] == [("invalid", "malformed_row"),
                                                         ("resolved", "")]
    run = cli("repair", source, "--column", "doi", "-o", tmp_path / "p.csv", "--no-verify")
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(tmp_path / "p.csv")
    assert [r["doi_suggestion_error"] for r in rows] == ["malformed_row", ""]
    assert len(rows[0]["note"]) == MAX_LINE_CHARS - len("10.1000/1,")


def test_a_huge_field_in_a_gzip_file_of_ordinary_ratio_is_cut_and_kept(tmp_path: Path) -> None:
    source = tmp_path / "huge.csv.gz"
    with gzip.open(source, "wb", compresslevel=1) as out:
        out.write(b"doi,note\n10.1000/1,")
        for _ in range(24):
            out.write(os.urandom(1 << 19).hex().encode())  # 24 MiB, inflating ~2 times
        out.write(b"\n10.1000/2,after\n")
    target = tmp_path / "out.csv"
    run, peak = _peak_mib("normalize", source, "--column", "doi", "-o", target)
    assert peak < PEAK_MIB, f"peak RSS {peak:.0f} MiB"
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(target)
    assert [r["doi_reason"] for r in rows] == ["malformed_row", ""]
    assert len(rows[0]["note"]) == MAX_LINE_CHARS - len("10.1000/1,")
    assert rows[1]["note"] == "after"


def test_a_record_too_long_over_several_lines_is_kept_line_by_line(tmp_path: Path) -> None:
    source = tmp_path / "lines.csv"
    half = "y" * (9 << 20)
    source.write_text(f'id,doi,note\n1,10.1000/1,"{half}\n{half}\n"\n2,10.1000/2,after\n',
                      encoding="utf-8")
    run = cli("normalize", source, "--column", "doi", "-o", tmp_path / "out.csv")
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(tmp_path / "out.csv")
    # Each line of the record a row of its own, flagged: nothing is lost.
    assert [r["id"] for r in rows] == ["1", half, '"', "2"]
    assert rows[0]["note"] == '"' + half
    assert [r["doi_reason"] for r in rows] == ["malformed_row"] * 3 + [""]
    assert rows[3]["doi"] == "10.1000/2"
    assert "2 CSV rows were part of a record longer than" in run.stderr


def test_a_line_of_exactly_the_bound_and_a_crlf_is_one_row(tmp_path: Path) -> None:
    source = tmp_path / "crlf.csv"
    body = "a" * MAX_LINE_CHARS
    source.write_bytes(f"doi\r\n{body}\r\n10.1000/1\r\n".encode())
    run = cli("normalize", source, "--column", "doi", "-o", tmp_path / "out.csv")
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(tmp_path / "out.csv")
    assert [r["doi"] for r in rows] == [body, "10.1000/1"]  # no row from the CRLF's LF
    assert [r["doi_reason"] for r in rows] == ["malformed_row", ""]


def test_a_header_longer_than_the_bound_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "long.csv"
    source.write_text("doi," + "h" * (MAX_LINE_CHARS + 1) + "\n10.1000/1,x\n", encoding="utf-8")
    run = cli("normalize", source, "--column", "doi", "-o", tmp_path / "out.csv")
    assert run.returncode == 2
    assert f"{source}: the header is longer than {MAX_LINE_CHARS:,} characters" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "out.csv").exists()


def test_the_fast_reader_refuses_a_bomb_of_short_rows(tmp_path: Path) -> None:
    source = _gzipped(tmp_path / "rows.csv.gz", b"doi\n", b"x\n", 200 << 20, b"")

    def count(reader: TableReader) -> int:
        return sum(batch.num_rows for batch in reader.batches)

    with pytest.raises(TableInputError, match=f"inflates more than {MAX_INFLATION:,} times"):
        read_table(source, "csv", count, chunk_rows=100_000)


def test_legit_repetitive_gzip_files_are_read_whole(tmp_path: Path) -> None:
    """The most compressible files of rows (one DOI on every row, rows of empty columns, rows
    of five bytes) inflate less than MAX_INFLATION times, however long."""
    for name, head, fill in (("same.csv.gz", b"doi\n", b"10.1000/182\n"),
                             ("empty.csv.gz", b"doi" + b",x" * 50 + b"\n",
                              b"10.1000/182" + b"," * 50 + b"\n"),
                             ("short.csv.gz", b"doi\n", b"abcd\n")):
        source = _gzipped(tmp_path / name, head, fill, 96 << 20, b"", level=9)
        text = 0
        with open_gzip(source) as stream:
            while chunk := stream.read(1 << 20):
                text += len(chunk)
        assert text == len(head) + (96 << 20), name
