"""Streaming CSV and Parquet input/output, one record batch at a time.

The CLI normalizes files larger than memory, so nothing here ever holds a whole table: CSV is
read with pyarrow's streaming reader and written with ``CSVWriter``; Parquet is read with
``ParquetFile.iter_batches`` and written with ``ParquetWriter``. Output goes to a temporary
file beside the target and is renamed into place only when complete.

CSV cells are read as raw bytes, so ids like ``00123`` stay text and a cell that is not UTF-8
cannot stop the run: such cells are written back with U+FFFD in place of the bad bytes, and the
DOI column reports them as ``bad_encoding`` (see :func:`text_column`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

__all__ = [
    "MALFORMED_FLAG",
    "Format",
    "TableInputError",
    "TableReader",
    "detect_format",
    "open_csv_lenient",
    "open_table",
    "text_column",
    "writing",
]

Format = Literal["csv", "parquet"]
PARQUET_SUFFIXES: tuple[str, ...] = (".parquet", ".pq", ".parq")
#: CSV read size. pyarrow reads up to 32 blocks ahead of the consumer, so this bounds the
#: read-ahead at 64 MiB whatever the file size; a single CSV row may not exceed it.
_BLOCK_BYTES = 2 << 20
#: Malformed CSV rows quoted back to the user (the count is always complete).
_KEEP_MALFORMED = 5


class TableInputError(Exception):
    """The input cannot be read as asked (missing file or column, no header): exit code 2."""


def detect_format(path: Path, explicit: str | None = None) -> Format:
    """``explicit`` if given, else Parquet for ``.parquet``/``.pq``/``.parq``, else CSV."""
    if explicit is not None:
        if explicit not in ("csv", "parquet"):
            raise TableInputError(f"unknown format {explicit!r}: use csv or parquet")
        return "parquet" if explicit == "parquet" else "csv"
    return "parquet" if path.suffix.lower() in PARQUET_SUFFIXES else "csv"


@dataclass
class TableReader:
    """Column names and a batch iterator; ``malformed`` fills in while CSV is read.

    ``schema`` is what the columns look like once read: for CSV every column is text (the
    batches carry raw bytes; :func:`text_column` turns each into text), for Parquet the
    file's own types.
    """

    names: list[str]
    batches: Iterator[pa.RecordBatch]
    schema: pa.Schema
    all_text: bool = False
    malformed: list[str] = field(default_factory=list)
    malformed_count: int = 0
    #: Lenient CSV only: each batch carries a last boolean column, true for a row whose
    #: number of fields did not match the header (padded with nulls or cut to fit).
    flags_malformed: bool = False


def open_table(path: Path, fmt: Format, *, chunk_rows: int) -> TableReader:
    """Open ``path`` for streaming in batches of at most ``chunk_rows`` rows."""
    if not path.is_file():
        raise TableInputError(f"{path}: no such file")
    if fmt == "parquet":
        return _open_parquet(path, chunk_rows)
    return _open_csv(path, chunk_rows)


def _open_parquet(path: Path, chunk_rows: int) -> TableReader:
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        raise TableInputError(f"{path}: not a readable Parquet file ({error})") from None
    schema = parquet.schema_arrow
    return TableReader(list(schema.names), parquet.iter_batches(batch_size=chunk_rows), schema)


def _open_csv(path: Path, chunk_rows: int) -> TableReader:
    if path.stat().st_size == 0:
        raise TableInputError(f"{path}: empty file (no header row)")
    reader = TableReader([], iter(()), pa.schema([]))

    def on_invalid_row(row: Any) -> str:
        # A row with the wrong number of fields cannot be aligned with the header; it is
        # counted and reported instead of stopping the run.
        reader.malformed_count += 1
        if len(reader.malformed) < _KEEP_MALFORMED:
            reader.malformed.append(str(row.text))
        return "skip"

    block = _BLOCK_BYTES
    parse = pcsv.ParseOptions(newlines_in_values=True, invalid_row_handler=on_invalid_row)
    try:
        probe_parse = pcsv.ParseOptions(
            newlines_in_values=True, invalid_row_handler=lambda row: "skip"
        )
        with pcsv.open_csv(  # only for the header: its rows are read again below
            path,
            read_options=pcsv.ReadOptions(block_size=block, use_threads=False),
            parse_options=probe_parse,
        ) as probe:
            names = list(probe.schema.names)
        stream = pcsv.open_csv(
            path,
            # Threads would read blocks ahead of the consumer without bound: memory would then
            # grow with the file instead of staying at a few blocks.
            read_options=pcsv.ReadOptions(block_size=block, use_threads=False),
            parse_options=parse,
            convert_options=pcsv.ConvertOptions(
                column_types={name: pa.binary() for name in names},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowException, OSError) as error:
        raise TableInputError(f"{path}: not a readable CSV file ({error})") from None
    reader.names = names
    reader.schema = pa.schema([(name, pa.large_string()) for name in names])
    reader.batches = _csv_batches(stream, chunk_rows)
    reader.all_text = True
    return reader


#: Name of the flag column that :func:`open_csv_lenient` appends to each batch.
MALFORMED_FLAG = "__airflow_doi_malformed__"


def open_csv_lenient(path: Path, chunk_rows: int) -> TableReader:
    """CSV through Python's csv module, keeping rows whose field count is wrong.

    The fast reader cannot align such a row with the header, so it can only skip it; this one
    pads a short row with nulls and cuts a long one to the header's width, and flags the row
    (:data:`MALFORMED_FLAG`) so the caller reports it instead of losing it. Slower, so it is
    only used for files where the fast reader met a malformed row.
    """
    import csv

    handle = path.open("r", encoding="utf-8", errors="surrogateescape", newline="")
    rows = csv.reader(handle)
    try:
        names = next(rows)
    except StopIteration:
        handle.close()
        raise TableInputError(f"{path}: empty file (no header row)") from None
    width = len(names)
    schema = pa.schema([(name, pa.large_string()) for name in names])

    def cell(value: str) -> bytes:
        return value.encode("utf-8", "surrogateescape")

    def batches() -> Iterator[pa.RecordBatch]:
        with handle:
            columns: list[list[bytes | None]] = [[] for _ in range(width)]
            flags: list[bool] = []
            for row in rows:
                flags.append(len(row) != width)
                for index in range(width):
                    columns[index].append(cell(row[index]) if index < len(row) else None)
                if len(flags) == chunk_rows:
                    yield _lenient_batch(names, columns, flags)
                    columns, flags = [[] for _ in range(width)], []
            if flags:
                yield _lenient_batch(names, columns, flags)

    return TableReader(names, batches(), schema, all_text=True, flags_malformed=True)


def _lenient_batch(
    names: list[str], columns: list[list[bytes | None]], flags: list[bool]
) -> pa.RecordBatch:
    arrays = [pa.array(values, pa.binary()) for values in columns]
    return pa.RecordBatch.from_arrays(
        [*arrays, pa.array(flags, pa.bool_())], [*names, MALFORMED_FLAG]
    )


def _csv_batches(stream: Any, chunk_rows: int) -> Iterator[pa.RecordBatch]:
    """Reader blocks (every column raw bytes) regrouped into batches of ``chunk_rows`` rows."""
    with stream:
        yield from rebatch(stream, stream.schema, chunk_rows)


def rebatch(
    batches: Iterable[pa.RecordBatch], schema: pa.Schema, rows: int
) -> Iterator[pa.RecordBatch]:
    """Regroup a stream of batches into batches of exactly ``rows`` rows (the last: fewer)."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        pending.append(batch)
        count += batch.num_rows
        while count >= rows:
            table = pa.Table.from_batches(pending, schema)
            yield from table.slice(0, rows).combine_chunks().to_batches()
            pending = table.slice(rows).to_batches()
            count -= rows
    if count:
        yield from pa.Table.from_batches(pending, schema).combine_chunks().to_batches()


def text_column(values: pa.Array) -> tuple[pa.Array, dict[int, object]]:
    """A column as ``large_string``, plus the cells whose text had to be repaired.

    Bytes that are not UTF-8 become U+FFFD in the returned text; the original bytes come back
    in the mapping (row -> bytes), so a DOI column can report them as ``bad_encoding``. Other
    types (a Parquet integer column) are cast to their text form.
    """
    if pa.types.is_large_string(values.type):
        return values, {}
    try:
        return values.cast(pa.large_string()), {}
    except pa.ArrowInvalid:
        if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
            raise
    texts: list[str | None] = []
    repaired: dict[int, object] = {}
    for row, cell in enumerate(values.to_pylist()):
        if cell is None:
            texts.append(None)
            continue
        try:
            texts.append(cell.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append(cell.decode("utf-8", "replace"))
            repaired[row] = cell
    return pa.array(texts, pa.large_string()), repaired


class TableWriter(Protocol):
    def write_table(self, table: pa.Table) -> None: ...


@contextmanager
def writing(path: Path, fmt: Format, schema: pa.Schema) -> Iterator[TableWriter]:
    """A batch writer for ``path``; the file appears only if the block exits cleanly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(handle)
    try:
        writer: Any
        if fmt == "parquet":
            writer = pq.ParquetWriter(temporary, schema)
        else:
            options = pcsv.WriteOptions(quoting_style="needed")
            writer = pcsv.CSVWriter(temporary, schema, write_options=options)
        with writer:
            yield writer
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
