"""Writes the small input files in this folder; run it again after changing a case.

Each file is one way a real export goes wrong (or merely differs), read by both file commands
in ``tests/test_cli_files.py``. ``EXPECTED_ROWS`` there says how many rows each must give.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent

CSV_FILES: dict[str, bytes] = {
    # Latin-1 export: a DOI with an e-acute and a note column a library system wrote.
    "latin1.csv": b"id,doi,note\n1,10.1000/caf\xe9,Universit\xe9\n2,10.1000/plain,ok\n",
    # Windows-1252: the euro sign (0x80) and curly quotes (0x93 0x94).
    "cp1252.csv": b"id,doi,note\n1,10.1000/x,\x80 5\n2,10.1000/y,\x93quoted\x94\n",
    # One short row, one long row, then a good one: none may be lost.
    "ragged.csv": b"id,doi,note\n1,10.1000/1,a\n2\n3,10.1000/3,b,extra\n4,10.1000/4,c\n",
    # Two columns called doi: neither command may guess which one is meant.
    "duplicate_columns.csv": b"id,doi,doi\n1,10.1000/a,10.1000/b\n",
    # A header and no final newline (and no rows).
    "header_only_no_newline.csv": b"id,doi",
    # Semicolons, as Excel writes them in many locales.
    "semicolon.csv": b"id;doi;note\n1;10.1000/a;x,y\n2;doi:10.1000/B;z\n",
    # A UTF-8 byte order mark before the header.
    "bom.csv": b"\xef\xbb\xbfid,doi\n1,10.1000/bom\n",
    # Cells a spreadsheet would run as formulas.
    "formulas.csv": (
        b"id,doi,note\n1,=HYPERLINK(\"http://x\"),=1+1\n2,+10.1000/a,@SUM(A1)\n"
        b"3,-10.1000/b,-2\n4,\t10.1000/c,plain\n5,10.1000/ok,fine\n"
    ),
    # A one-column file whose blank line is an empty cell, not nothing.
    "one_column_blank_line.csv": b"doi\n10.1000/a\n\n10.1000/b\n",
    # Blank lines between rows of a wider file are not rows.
    "blank_lines.csv": b"id,doi\n1,10.1000/a\n\n2,10.1000/b\n\n",
}
ROWS_GZ = b"id,doi\n1,10.1000/gz1\n2,https://doi.org/10.1000/GZ2\n3,junk\n"


def main() -> None:
    for name, content in CSV_FILES.items():
        (HERE / name).write_bytes(content)
    (HERE / "gzipped.csv.gz").write_bytes(gzip.compress(ROWS_GZ, mtime=0))
    (HERE / "gzip_named_plain.csv").write_bytes(gzip.compress(ROWS_GZ, mtime=0))
    binary = pa.table({
        "n": pa.array([1, 2, 3], pa.int64()),
        "doi": pa.array([b"10.1000/a", b"10.1000/\xff", None], pa.binary()),
    })
    pq.write_table(binary, HERE / "binary_column.parquet")
    duplicate = pa.Table.from_arrays(
        [pa.array(["10.1000/a"]), pa.array(["10.1000/b"])], names=["doi", "doi"]
    )
    pq.write_table(duplicate, HERE / "duplicate_columns.parquet")


if __name__ == "__main__":
    main()
