"""Reading tables: THE reader of the file commands (``normalize``, ``resolve``, ``repair``,
``enrich`` and ``report``).

One reader, so the commands accept the same files and refuse the same files with the same
words (:mod:`.write` writes them alike). Nothing here ever holds a whole table: CSV is read
with pyarrow's streaming reader (or, for the files it cannot read, Python's ``csv`` module),
Parquet with ``ParquetFile.iter_batches``.

CSV rules, the same on both readers:

- how the file was written (encoding, BOM, separators, line ending) is found from the file
  (:mod:`airflow_doi.files.sniff`) unless the user says; the header may even be on another
  separator than the rows;
- cells are read as raw bytes, so ids like ``00123`` stay text; in a UTF-8 file a cell that is
  not UTF-8 cannot stop the run: it is written back with U+FFFD for the bad bytes and counted
  (:func:`text_column`), and the DOI column reports it as ``bad_encoding``. Any other
  encoding (``cp1252``, ``utf-16``) is decoded strictly (the output's encoding is
  :func:`airflow_doi.files.write.csv_encoding`'s);
- no row is ever lost: a row with the wrong number of fields is kept (padded with nulls, or
  its surplus fields joined into its last cell) and flagged, a quote left open does not
  swallow the rows after it (see :func:`open_csv_lenient`); a blank line is an empty cell in
  a one-column file and nothing otherwise;
- blank and repeated header names are fine in the columns nobody reads; the DOI column is
  found after trimming and case-folding (:func:`require_column`), and its missing-value
  markers (``NA``, ``N/A``, ``NULL``...) read as missing (:meth:`TableReader.doi_cells`);
- a gzip file is read as the CSV it holds, unless it inflates like a decompression bomb
  (:mod:`airflow_doi.files.inflate`); other archives and Parquet under a CSV name are
  refused with a word on what to do;
- memory is bounded whatever the file: a record is read whole up to
  :data:`~airflow_doi.files.MAX_LINE_CHARS`, a longer line cut there (see :class:`_Lines`),
  its row kept and flagged.

The fast reader cannot keep a malformed row (it can only skip it), read a row larger than its
block, or tell a quote left open from a cell with line breaks, so when it meets any of them the
whole read starts again on the lenient reader: :func:`read_table` runs the caller's pass once
more, which is why the pass must be restartable (the temporary output file of :func:`writing`
is). Output CSV keeps the input's separator, line ending and BOM, and quotes a cell only when
it must (:class:`CsvWriter`).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import lzma
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from airflow_doi.files import MAX_LINE_CHARS, TableInputError
from airflow_doi.files.inflate import InflationError, open_gzip
from airflow_doi.files.lines import Lines, Overlong, as_text, unclosed
from airflow_doi.files.names import match_column
from airflow_doi.files.sniff import (
    NA_VALUES,
    CsvDialect,
    CsvLayout,
    csv_error,
    in_code_page,
    layout,
    open_text,
)
from airflow_doi.syntax import cell_text

__all__ = [
    "MALFORMED_FLAG",
    "CsvOptions",
    "Format",
    "TableInputError",
    "TableReader",
    "detect_format",
    "open_csv_lenient",
    "open_table",
    "read_table",
    "reading_notes",
    "require_column",
    "text_column",
]

Format = Literal["csv", "parquet"]
PARQUET_SUFFIXES: tuple[str, ...] = (".parquet", ".pq", ".parq")
#: CSV read size. pyarrow reads up to 32 blocks ahead of the consumer, so this bounds the
#: read-ahead at 64 MiB whatever the file size; a larger row sends the file to the lenient
#: reader, which reads one whole up to MAX_LINE_CHARS.
_BLOCK_BYTES = 2 << 20
#: Malformed CSV rows quoted back to the user (the count is always complete).
_KEEP_MALFORMED = 5
#: Characters of each quoted back.
_SHOWN_CHARS = 200
#: Name of the flag column that :func:`open_csv_lenient` appends to each batch.
MALFORMED_FLAG = "__airflow_doi_malformed__"
#: Characters that make a spreadsheet read a CSV cell as a formula (OWASP's list).

T = TypeVar("T")


@dataclass(frozen=True)
class CsvOptions:
    """How to read CSV text, as the user asked: each of ``encoding`` (a Python codec name) and
    ``delimiter`` (one character) is found from the file (:func:`airflow_doi.files.sniff.sniff`)
    when None. ``na_values``: the cells a DOI column reads as missing (``None``: pandas'
    defaults, :data:`~airflow_doi.files.sniff.NA_VALUES`; ``()``: none).

    UTF-8 (given or found) is read leniently, bad bytes flagged per cell; any other encoding
    is decoded strictly.
    """

    encoding: str | None = None
    delimiter: str | None = None
    na_values: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.encoding is not None:
            try:
                if not codecs.lookup(self.encoding)._is_text_encoding:
                    raise LookupError(self.encoding)  # hex, base64, zlib: not a text encoding
            except LookupError:
                raise TableInputError(
                    f"unknown encoding {self.encoding!r}: use a name such as utf-8, latin-1 "
                    "or cp1252 (or leave --encoding out: it is found from the file)"
                ) from None
        if self.delimiter is not None:
            delimiter = {"tab": "\t", "\\t": "\t"}.get(self.delimiter.lower(), self.delimiter)
            if len(delimiter) != 1 or delimiter in "\"\r\n":
                raise TableInputError(
                    f"delimiter {self.delimiter!r} cannot be used: give one character other "
                    "than a quote or a line break, e.g. ';' or tab (or leave --delimiter out: "
                    "it is found from the file)"
                )
            object.__setattr__(self, "delimiter", delimiter)

    @property
    def missing(self) -> tuple[str, ...]:
        """The missing-value markers in force."""
        return NA_VALUES if self.na_values is None else self.na_values


def detect_format(path: Path, explicit: str | None = None) -> Format:
    """``explicit`` if given, else Parquet for ``.parquet``/``.pq``/``.parq``, else CSV."""
    if explicit is not None:
        if explicit not in ("csv", "parquet"):
            raise TableInputError(f"unknown format {explicit!r}: use csv or parquet")
        return "parquet" if explicit == "parquet" else "csv"
    return "parquet" if path.suffix.lower() in PARQUET_SUFFIXES else "csv"


#: Names of spreadsheet workbooks, which an output is never written as (it is CSV or Parquet).
WORKBOOK_SUFFIXES: tuple[str, ...] = (".xlsx", ".xlsm", ".xlsb", ".xls", ".ods", ".numbers")


def output_format(path: Path, explicit: str | None = None) -> Format:
    """The format an output named ``path`` is written in (:func:`detect_format`); a name of a
    spreadsheet workbook is refused unless the format is given: a CSV named ``.xlsx`` is a file
    Excel says is damaged."""
    if explicit is None and path.suffix.lower() in WORKBOOK_SUFFIXES:
        raise TableInputError(
            f"{path}: outputs are CSV or Parquet, not {path.suffix} workbooks: name it "
            f"{path.stem}.csv (Excel opens it as it is written: UTF-8 with a BOM) or "
            f"{path.stem}.parquet")
    return detect_format(path, explicit)


@dataclass
class TableReader:
    """Column names and a batch iterator; the malformed counts fill in while CSV is read.

    ``schema`` is what the columns look like once read: for CSV every column is text (the
    batches carry raw bytes; :func:`text_column` turns each into text), for Parquet the
    file's own types. ``names`` may repeat or be blank in CSV (columns nobody reads);
    :func:`require_column` makes sure the one a command reads is not.
    """

    names: list[str]
    batches: Iterator[pa.RecordBatch]
    schema: pa.Schema
    all_text: bool = False
    malformed: list[str] = field(default_factory=list)
    malformed_count: int = 0
    #: Of those, rows of a record longer than :data:`MAX_LINE_CHARS` (cut, or split in lines).
    overlong_count: int = 0
    #: Lenient CSV only: each batch carries a last boolean column, true for a row whose
    #: number of fields did not match the header (padded with nulls, or its surplus fields
    #: joined into the last cell, so nothing is lost).
    flags_malformed: bool = False
    #: Set by :func:`read_table`, which reads the file again (on the lenient reader, or in
    #: the code page found further in) when a pass raises its private signal. Left False, a
    #: row the fast reader cannot keep is a :class:`TableInputError` instead.
    restartable: bool = False
    #: CSV only: how the file is laid out (found or given); its dialect the CSV output follows.
    layout: CsvLayout | None = None
    #: CSV only: cells of the DOI column that are a missing-value marker (:meth:`doi_cells`).
    na_values: tuple[str, ...] = ()
    na_count: int = 0
    #: (asked, found) when ``--column`` matched a header only after trimming and case-folding.
    matched: tuple[str, str] | None = None
    _marker_arrays: dict[pa.DataType, tuple[int, pa.Array]] = field(default_factory=dict,
                                                                     repr=False)

    @property
    def dialect(self) -> CsvDialect | None:
        """CSV only: how the file was written (found or given)."""
        return self.layout.dialect if self.layout else None

    def doi_cells(self, batch: pa.RecordBatch, column: str) -> pa.Array:
        """The DOI column of ``batch``, its missing-value markers (CSV only) as nulls."""
        return self.missing_as_null(batch.column(column))

    def _markers(self, kind: pa.DataType) -> tuple[int, pa.Array]:
        """The longest marker's length in bytes and the markers as an array of ``kind``,
        built once per column type."""
        if kind not in self._marker_arrays:
            encoded = [value.encode() for value in self.na_values]
            self._marker_arrays[kind] = (max(map(len, encoded)), _binary_array(encoded, kind))
        return self._marker_arrays[kind]

    def missing_as_null(self, values: pa.Array) -> pa.Array:
        """``values`` (cells of the DOI column, bytes or text) with the missing-value markers
        as nulls, counted in ``na_count``; unchanged for Parquet."""
        if not self.na_values or not self.all_text:
            return values
        longest, markers = self._markers(values.type)
        # Most cells are longer than any marker: only the short ones are looked up.
        lengths = np.diff(value_offsets(values))
        short = np.flatnonzero((lengths >= 1) & (lengths <= longest))
        if short.size == 0:
            return values
        indices = short.astype(np.int64)
        candidates = values.take(
            pa.Array.from_buffers(pa.int64(), indices.size, [None, pa.py_buffer(indices)]))
        found = pc.is_in(candidates, value_set=markers)
        hits = short[_bools(found)]
        if hits.size == 0:
            return values
        self.na_count += int(hits.size)
        mask = np.zeros(len(values), dtype=bool)
        mask[hits] = True
        flags = pa.Array.from_buffers(
            pa.bool_(), len(values), [None, pa.py_buffer(np.packbits(mask, bitorder="little"))])
        return pc.if_else(flags, pa.nulls(len(values), values.type), values)


def reading_notes(
    reader: TableReader, repaired: dict[str, int], *, written: str | None = None
) -> list[tuple[str, str]]:
    """What a user should hear about how a file was read, as (``note`` | ``warning``, text):
    how it was written (when not plain UTF-8 with commas; ``written``: how the CSV output is,
    said beside it, or alone when the input was plain), the header ``--column`` matched,
    missing-value markers, rows kept though malformed, and (``repaired``: column -> count)
    cells that were not UTF-8. Nothing when there is nothing to say."""
    notes: list[tuple[str, str]] = []
    dialect = reader.dialect
    if dialect is not None and not dialect.plain:
        also = f"; written as {written}" if written else ""
        notes.append(("note", f"read as {dialect.describe()}{also}"))
    elif written:
        notes.append(("note", f"written as {written}"))
    if reader.matched:
        asked, found = reader.matched
        notes.append(("note", f"--column {asked!r} read the column {found!r}"))
    if reader.na_count:
        cells = _cells(reader.na_count)
        shown = ", ".join(reader.na_values[:3]) + (", ..." if len(reader.na_values) > 3 else "")
        notes.append(("note", f"{cells} a missing-value marker ({shown}): read as missing "
                      "(reason empty); --na-values changes the list"))
    if reader.malformed_count:
        examples = "; ".join(repr(row) for row in reader.malformed[:3])
        other = reader.malformed_count - reader.overlong_count
        if other:
            rows = "row had" if other == 1 else "rows had"
            notes.append(("warning", f"{other:,} CSV {rows} the wrong number of fields or a "
                          f"quote left open (kept, flagged malformed_row), e.g. {examples}"))
        if reader.overlong_count:
            notes.append(("warning", _overlong_note(reader.overlong_count)
                          + ("" if other else f", e.g. {examples}")))
    if repaired:
        total = sum(repaired.values())
        columns = ", ".join(f"{name} ({count:,})" for name, count in repaired.items())
        hint = ("; if the file is Latin-1 or Windows-1252, run again with --encoding latin-1 "
                "or --encoding cp1252") if reader.all_text else ""
        notes.append(("warning", f"{_cells(total)} not UTF-8 and "
                      f"{'is' if total == 1 else 'are'} written with U+FFFD in place of the "
                      f"bad bytes, in column(s) {columns}{hint}"))
    return notes


def _overlong_note(count: int) -> str:
    """The warning on rows of a record longer than :data:`MAX_LINE_CHARS`."""
    rows = "row was" if count == 1 else "rows were"
    return (f"{count:,} CSV {rows} part of a record longer than {MAX_LINE_CHARS:,} characters "
            f"({MAX_LINE_CHARS >> 20} MiB, the most a row is read whole): a longer line is cut "
            "there, the rest of it dropped, and a longer record over several lines is kept line "
            "by line (kept, flagged malformed_row); if such a cell is genuine, shorten it, or "
            "pass the table as Parquet")


def _cells(count: int) -> str:
    return f"{count:,} cell was" if count == 1 else f"{count:,} cells were"


def value_offsets(values: pa.Array) -> np.ndarray[Any, Any]:
    """The offsets of a (large) string or binary array's rows (len(values) + 1 of them)."""
    large = pa.types.is_large_binary(values.type) or pa.types.is_large_string(values.type)
    offsets = values.buffers()[1]
    if offsets is None:
        return np.zeros(len(values) + 1, dtype=np.int64)
    raw = np.frombuffer(offsets, dtype=np.int64 if large else np.int32)
    return raw[values.offset : values.offset + len(values) + 1]


def _bools(values: pa.Array) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """A boolean array as numpy, null as false, from its bits (``to_numpy`` imports pandas)."""
    validity, bits = values.buffers()

    def unpack(buffer: pa.Buffer) -> np.ndarray[Any, np.dtype[np.bool_]]:
        every = np.unpackbits(np.frombuffer(buffer, dtype=np.uint8), bitorder="little")
        return every[values.offset : values.offset + len(values)].astype(bool)

    flags = unpack(bits)
    if validity is not None:
        flags &= unpack(validity)
    return flags


def _binary_array(values: list[bytes], kind: pa.DataType) -> pa.Array:
    """A small array of ``values`` as ``kind``, from its buffers: ``pa.array`` of a Python list
    imports pandas (0.15 s) just to check the list is no Series."""
    offsets = np.cumsum([0, *(len(value) for value in values)], dtype=np.int32)
    binary = pa.Array.from_buffers(
        pa.binary(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))])
    return binary if kind == pa.binary() else binary.cast(kind)


class _ReadAgain(Exception):
    """The pass starts again: on the lenient reader (the fast one met a row it cannot keep),
    or as ``dialect`` (bytes further in showed the file is not the UTF-8 its head looked)."""

    def __init__(self, dialect: CsvDialect | None = None) -> None:
        super().__init__()
        self.dialect = dialect


def read_table(
    path: Path,
    fmt: Format,
    consume: Callable[[TableReader], T],
    *,
    chunk_rows: int,
    options: CsvOptions | None = None,
    columns: list[str] | None = None,
) -> tuple[T, TableReader]:
    """``consume(reader)`` over ``path``, again on the lenient reader if the fast one cannot
    keep every row, and again in a code page if a file found UTF-8 from an ASCII sample shows
    otherwise further in (three passes at most). Returns the pass's result and the reader it
    used (whose ``malformed_count`` and ``na_count`` are complete). ``columns`` narrows a
    Parquet read."""
    options = options or CsvOptions()
    try:
        reader = open_table(path, fmt, chunk_rows=chunk_rows, options=options, columns=columns)
        lenient = False
        for _ in range(3):  # at most: in a code page, then leniently
            reader.restartable = True
            try:
                return consume(reader), reader
            except _ReadAgain as again:
                lenient = lenient or again.dialect is None
                found = reader.layout if again.dialect is None else layout(
                    path, dialect=again.dialect)  # the header read again in the code page
            assert found is not None  # only a CSV pass reads again
            reader = (open_csv_lenient(path, chunk_rows, options, found=found) if lenient
                      else _open_csv(path, chunk_rows, options, found))
        reader.restartable = False  # pragma: no cover (each reason is met once at most)
        return consume(reader), reader  # pragma: no cover
    except (EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError) as error:
        raise TableInputError(
            f"{path}: the compressed file is damaged or cut short ({error}); check the file"
        ) from None
    except InflationError as error:
        raise TableInputError(f"{path}: {error}") from None
    except UnicodeError as error:
        encoding = options.encoding or "the encoding found"
        if isinstance(error, UnicodeDecodeError):
            bad = error.object[error.start : error.end]
            raise TableInputError(
                f"{path}: not {encoding} text (bytes {bytes(bad).hex(' ')} have no meaning in "
                "it); pass the file's real encoding with --encoding (latin-1 accepts every byte)"
            ) from None
        raise TableInputError(
            f"{path}: cannot be read as {encoding} ({error}); pass the file's real encoding "
            "with --encoding"
        ) from None


def open_table(
    path: Path,
    fmt: Format,
    *,
    chunk_rows: int,
    options: CsvOptions | None = None,
    columns: list[str] | None = None,
) -> TableReader:
    """Open ``path`` for streaming in batches of at most ``chunk_rows`` rows."""
    if not path.exists():
        raise TableInputError(f"{path}: no such file; check the path")
    if not path.is_file():
        raise TableInputError(f"{path}: not a file; give the path of a CSV or Parquet file")
    if fmt == "parquet":
        return _open_parquet(path, chunk_rows, columns)
    options = options or CsvOptions()
    return _open_csv(path, chunk_rows, options,
                     layout(path, encoding=options.encoding, delimiter=options.delimiter))


def require_column(reader: TableReader, column: str, path: Path) -> str:
    """The header ``--column`` names (see :func:`match_column`), refusing a name the file
    does not have (listing the ones it has) or one that two columns answer to."""
    found = match_column(reader.names, column)
    if len(found) == 1:
        if found[0] != column:
            reader.matched = (column, found[0])
        return found[0]
    if found:
        listed = ", ".join(repr(name) for name in found)
        raise TableInputError(
            f"{path}: {len(found)} columns answer to --column {column!r} ({listed}), so the "
            "DOI column cannot be told apart; rename one in the header, or pass the exact name"
        )
    listed = ", ".join(repr(name) for name in reader.names) or "none"
    hint = "pass one of them to --column"
    first = reader.names[0] if reader.names else ""
    if reader.all_text and first.lstrip().startswith(("{", "[")):
        hint = ("the file looks like JSON (Lines), which is not read: convert it to CSV "
                "or Parquet with a header line naming the column")
    elif reader.all_text and len(reader.names) == 1 and re.search(r"10\.\d+/", first):
        hint = ("the first line is read as the header, and this one is a DOI: add a header "
                "line naming the column (e.g. doi) at the top of the file")
    elif reader.all_text and any(re.search(r"10\.\d+/", name) for name in reader.names):
        named = next(name for name in reader.names if re.search(r"10\.\d+/", name))
        hint = (f"the first line is read as the header, and {named!r} in it is a DOI, so the "
                "file seems to have no header line: add one naming the columns (e.g. doi for "
                "that one) at the top of the file, then pass the DOI column's name to --column")
    elif reader.all_text and len(reader.names) == 1:
        marks = [mark for mark in ";\t|," if mark in first]
        if marks:
            hint = f"is the file separated by {marks[0]!r}? pass --delimiter {marks[0]!r}"
    raise TableInputError(f"{path}: no column {column!r} (columns: {listed}); {hint}")


def _open_parquet(path: Path, chunk_rows: int, columns: list[str] | None) -> TableReader:
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError):
        raise TableInputError(
            f"{path}: not a readable Parquet file; if it is CSV, pass --input-format csv"
        ) from None
    schema = parquet.schema_arrow
    names = list(schema.names)
    wanted = None
    if columns is not None:
        wanted = [found for name in columns for found in dict.fromkeys(match_column(names, name))]
    batches = parquet.iter_batches(batch_size=chunk_rows, columns=wanted)
    return TableReader(names, batches, schema)


def _shown(row: str) -> str:
    """A malformed row as a message quotes it: as text, cut after its first characters."""
    cut = row[:_SHOWN_CHARS + 1]
    return as_text(cut if len(cut) <= _SHOWN_CHARS else cut[:_SHOWN_CHARS] + "...")


def _open_csv(path: Path, chunk_rows: int, options: CsvOptions, found: CsvLayout) -> TableReader:
    dialect, names, header_lines = found.dialect, found.names, found.header_lines
    schema = pa.schema([(name, pa.large_string()) for name in names])
    reader = TableReader(names, iter(()), schema, all_text=True, layout=found,
                         na_values=options.missing)
    if not found.has_rows:  # also a header without a final newline, which pyarrow refuses
        return reader

    source: Any = str(path)
    if found.compression:  # through the same bounded inflater as the lenient reader
        source = open_gzip(path)
    try:
        stream = pcsv.open_csv(
            source,
            # Threads would read blocks ahead of the consumer without bound: memory would then
            # grow with the file instead of staying at a few blocks.
            read_options=pcsv.ReadOptions(
                block_size=_BLOCK_BYTES,
                use_threads=False,
                encoding="utf8" if dialect.lenient_utf8 else dialect.encoding,
                # Our header (the csv module's reading, on its own separator): the same names
                # on both readers, blank and repeated ones included.
                column_names=names,
                skip_rows=header_lines,
            ),
            parse_options=pcsv.ParseOptions(
                delimiter=dialect.delimiter,
                newlines_in_values=True,
                ignore_empty_lines=len(names) > 1,
                # No handler for a row of the wrong width: it stops the fast reader, and the
                # lenient one reads the file again, keeping (and counting) every such row.
            ),
            convert_options=pcsv.ConvertOptions(
                column_types={name: pa.binary() for name in names},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except UnicodeDecodeError:
        _close(source)
        raise
    except (pa.ArrowException, OSError, ValueError):  # ValueError: a separator beyond ASCII
        _close(source)
        return open_csv_lenient(path, chunk_rows, options, found=found)
    reader.batches = _fast_batches(path, stream, reader, chunk_rows, source)
    return reader


def _close(source: Any) -> None:
    """Close a compressed input stream (a path needs nothing)."""
    if not isinstance(source, str):
        source.close()


def _fast_batches(
    path: Path, stream: Any, reader: TableReader, chunk_rows: int, source: Any
) -> Iterator[pa.RecordBatch]:
    """The fast reader's blocks as batches of ``chunk_rows``, every column as text where it is
    UTF-8 (raw bytes where not, for the caller to flag); :class:`_ReadAgain` as soon as a row
    has the wrong width or cannot be read (a row larger than a block), a quote left open
    swallowed rows (:func:`_suspect`: the lenient reader decides), or a file
    found UTF-8 from an ASCII head turns out to be in a code page."""

    def checked() -> Iterator[pa.RecordBatch]:
        last = None
        while True:
            try:
                batch = stream.read_next_batch()
            except StopIteration:
                break
            except pa.ArrowException:
                if reader.restartable:
                    raise _ReadAgain from None
                raise TableInputError(
                    f"{path}: a row has the wrong number of fields or is too large for the "
                    "fast CSV reader; read the file with airflow_doi.files.read.read_table, "
                    "which keeps every row"
                ) from None
            if reader.restartable and _suspect(batch):
                raise _ReadAgain
            last = batch
            yield batch
        if reader.restartable and _last_row_spans_lines(last):
            raise _ReadAgain

    try:
        with stream:
            for batch in rebatch(checked(), stream.schema, chunk_rows):
                yield _as_text(batch, reader)
    finally:
        _close(source)


def _as_text(batch: pa.RecordBatch, reader: TableReader) -> pa.RecordBatch:
    """``batch`` with each column as text where its bytes are UTF-8 (checked here, on the
    reader's thread); see :func:`_fast_batches`."""
    columns = []
    for values in batch.columns:
        try:
            columns.append(values.cast(pa.large_string()))
        except pa.ArrowInvalid:
            dialect = reader.dialect
            if reader.restartable and dialect is not None and dialect.may_be_code_page:
                cells = [cell for cell in values.to_pylist() if cell is not None]
                bad = [cell for cell in cells if not _is_utf8(cell)]
                # UTF-8 beyond ASCII beside them: a UTF-8 file with damaged cells, flagged as
                # such, rather than a code page that would garble the good cells.
                if not any(not cell.isascii() and _is_utf8(cell) for cell in cells):
                    raise _ReadAgain(in_code_page(dialect, bad[:2000])) from None
            columns.append(values)
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _is_utf8(cell: bytes) -> bool:
    try:
        cell.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _suspect(batch: pa.RecordBatch) -> bool:
    """Whether a cell of ``batch`` may hide a quote left open (see :func:`_line_rows`): then
    the lenient reader reads the file, and decides from its raw lines."""
    return any(_line_rows(values) is not None for values in batch.columns)


def _line_rows(values: pa.Array) -> np.ndarray[Any, np.dtype[np.bool_]] | None:
    """Per row: the cell holds a line break and a quote character (a quote left open that
    swallowed lines ends at the next quote, which the non-strict readers keep in the cell), or
    a carriage return without its line feed (Arrow's fast reader can drop the ``\n`` of a
    quoted CRLF that straddles two of its blocks); None when no cell does. The C core's
    ``line_rows`` where built, else a search of the column's bytes and Arrow kernels."""
    from airflow_doi.native import module

    buffers = values.buffers()
    data = buffers[2] if len(buffers) >= 3 else None
    if data is None or len(values) == 0:
        return None
    native = module()
    if native is not None:
        as_text = values
        if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
            # The same buffers, seen as text (the C core reads bytes; nothing is validated).
            as_text = values.view(pa.string() if pa.types.is_binary(values.type)
                                  else pa.large_string())
        flags = native.line_rows(*as_text.__arrow_c_array__())
        return None if flags is None else np.frombuffer(flags, dtype=np.bool_)
    raw = data.to_pybytes()  # memchr-fast find: most columns hold no line break at all
    if raw.find(b"\n") < 0 and raw.find(b"\r") < 0:
        return None
    binary = values.cast(pa.large_binary())
    broken = pc.or_(pc.match_substring(binary, "\n"), pc.match_substring(binary, "\r"))
    found = pc.or_(pc.and_(broken, pc.match_substring(binary, '"')),
                   pc.match_substring_regex(binary, "\r([^\n]|$)"))
    flags = _bools(found)
    return flags if flags.any() else None


def _last_row_spans_lines(batch: pa.RecordBatch | None) -> bool:
    """Whether the file's last row has a cell with a line break: a quote left open runs to
    the end of the file without a quote to end it, which the lenient reader sees."""
    if batch is None or batch.num_rows == 0:
        return False
    last = batch.slice(batch.num_rows - 1, 1)
    cells = [cell_text(cell) or "" for column in last.columns for cell in column.to_pylist()]
    return any("\n" in cell or "\r" in cell for cell in cells)


def open_csv_lenient(
    path: Path,
    chunk_rows: int,
    options: CsvOptions | None = None,
    *,
    found: CsvLayout | None = None,
) -> TableReader:
    """CSV through Python's csv module, keeping every row, as ``found`` (default: as
    :func:`~airflow_doi.files.sniff.layout` finds it).

    The fast reader cannot align a row of the wrong width with the header, so it can only
    skip it; this one keeps it: a short row is padded with nulls and a long one keeps its
    surplus fields joined (with the separator) into its last cell, both flagged in the
    ``MALFORMED_FLAG`` column so the caller reports them instead of losing them; surplus
    fields that are all empty (Excel's trailing separators) are dropped, and the row is not
    malformed. A quote left open can swallow the rows after it into one cell: a record over
    several lines that does not parse strictly (:func:`_unclosed`) is read again line by
    line, each line that reads cleanly a row and each other one kept as it stands, flagged;
    a quoted cell that holds line breaks and closes properly is one cell, as Python's csv
    module reads it. Slower, so it only reads the files the fast reader could not.
    """
    options = options or CsvOptions()
    found = found or layout(path, encoding=options.encoding, delimiter=options.delimiter)
    dialect, names, header_lines = found.dialect, found.names, found.header_lines
    handle = open_text(path, dialect, found.compression)
    width = len(names)
    schema = pa.schema([(name, pa.large_string()) for name in names])
    reader = TableReader(names, iter(()), schema, all_text=True, flags_malformed=True,
                         layout=found, na_values=options.missing)

    utf8_met = [False]  # UTF-8 beyond ASCII read already: a bad byte is then a damaged cell

    def cell(value: str) -> bytes:
        if not value.isascii() and reader.restartable and dialect.may_be_code_page:
            try:
                encoded = value.encode("utf-8")
            except UnicodeEncodeError:  # bytes that are not UTF-8: the file is in a code page
                raw = value.encode("utf-8", "surrogateescape")
                if not utf8_met[0]:
                    raise _ReadAgain(in_code_page(dialect, [raw])) from None
                return raw
            utf8_met[0] = True
            return encoded
        return value.encode("utf-8", "surrogateescape")

    def batches() -> Iterator[pa.RecordBatch]:
        with handle:
            columns: list[list[bytes | None]] = [[] for _ in range(width)]
            flags: list[bool] = []
            size = 0  # characters in the batch: a batch ends at chunk_rows or MAX_LINE_CHARS
            for row, malformed in _lenient_rows(path, dialect, handle, width, header_lines,
                                                reader):
                if malformed:
                    reader.malformed_count += 1
                    if len(reader.malformed) < _KEEP_MALFORMED:
                        reader.malformed.append(_shown(dialect.delimiter.join(row)))
                    if len(row) > width:
                        row = [*row[: width - 1], dialect.delimiter.join(row[width - 1 :])]
                flags.append(malformed)
                for index in range(width):
                    columns[index].append(cell(row[index]) if index < len(row) else None)
                size += sum(map(len, row))
                if len(flags) == chunk_rows or size >= MAX_LINE_CHARS:
                    yield _lenient_batch(names, columns, flags)
                    columns, flags, size = [[] for _ in range(width)], [], 0
            if flags:
                yield _lenient_batch(names, columns, flags)

    reader.batches = batches()
    return reader


def _lenient_rows(
    path: Path, dialect: CsvDialect, handle: IO[str], width: int, header_lines: int,
    reader: TableReader,
) -> Iterator[tuple[list[str], bool]]:
    """(fields, malformed) for every row after the header's ``header_lines`` lines (see
    :func:`open_csv_lenient`); a record longer than :data:`MAX_LINE_CHARS` is its lines, each
    a row, all flagged (and counted in ``reader.overlong_count``)."""
    csv.field_size_limit(2**31 - 1)  # one 5 MB cell is data, not an attack on memory
    lines = Lines(handle)
    try:
        for _ in range(header_lines):
            next(lines, None)
        rows = csv.reader(lines, delimiter=dialect.delimiter)
        while True:
            lines.new_record()
            again = lines.replaying  # the record starts on a line read once already
            try:
                row = next(rows)
            except StopIteration:
                return
            except Overlong:
                for line in lines.taken:
                    for fields, _ in _line_row(line, dialect, width):
                        reader.overlong_count += 1
                        yield fields, True
                continue
            taken = lines.taken
            if not row:
                if width > 1:
                    continue  # a blank line between rows, as the fast reader skips it
                row = [""]
            if len(taken) > 1 and unclosed(taken, dialect.delimiter):
                # The quote left open is on the record's first line: that line is a row of
                # its own, and the lines it swallowed are read again as records (one may be
                # a quoted cell over several lines, which closes properly). Once only: a
                # record that starts on a line read again and does not close either is its
                # lines, a row each (else every line of `a","` lines would swallow the rest
                # in turn: quadratic).
                if again:
                    for line in taken:
                        yield from _line_row(line, dialect, width)
                else:
                    yield from _line_row(taken[0], dialect, width)
                    lines.again(taken[1:])
                continue
            fitted = _fitted(row, width)
            yield (row, True) if fitted is None else (fitted, False)
    except csv.Error:
        raise csv_error(path, dialect) from None


def _clean(line: str, delimiter: str, width: int) -> list[str] | None:
    """``line`` as a row of ``width`` fields if it reads as one on its own, quotes closed."""
    text = line.rstrip("\r\n")
    if not text:
        return None
    try:
        row = next(csv.reader([text], delimiter=delimiter, strict=True))
    except csv.Error:
        return None
    return _fitted(row, width)


def _fitted(row: list[str], width: int) -> list[str] | None:
    """``row`` as ``width`` fields: as it is, or without extra fields that are all empty (a
    spreadsheet's blank trailing columns); None when it has another number of fields."""
    if len(row) == width:
        return row
    if len(row) > width and not any(row[width:]):
        return row[:width]
    return None


def _line_row(line: str, dialect: CsvDialect, width: int) -> Iterator[tuple[list[str], bool]]:
    """One physical line as its own row: as read when it reads cleanly, else split on the
    separator with quotes taken literally, and flagged."""
    row = _clean(line, dialect.delimiter, width)
    if row is not None:
        yield row, False
        return
    text = line.rstrip("\r\n")
    if not text and width > 1:
        return
    yield next(csv.reader([text], delimiter=dialect.delimiter, quoting=csv.QUOTE_NONE)), True


def _lenient_batch(
    names: list[str], columns: list[list[bytes | None]], flags: list[bool]
) -> pa.RecordBatch:
    arrays = [pa.array(values, pa.binary()) for values in columns]
    return pa.RecordBatch.from_arrays(
        [*arrays, pa.array(flags, pa.bool_())], [*names, MALFORMED_FLAG]
    )


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
    except pa.ArrowNotImplementedError:
        raise TableInputError(
            f"a column of type {values.type} cannot be read as text; pick a text column"
        ) from None
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
