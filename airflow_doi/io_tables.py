"""THE reading and writing module of both file commands (``normalize`` and ``resolve``).

One module, so the two commands accept the same files, refuse the same files with the same
words, and write alike. Nothing here ever holds a whole table: CSV is read with pyarrow's
streaming reader (or, for the files it cannot read, Python's ``csv`` module), Parquet with
``ParquetFile.iter_batches``; output goes to a temporary file beside the target, created with
the user's umask, and is renamed into place only when complete.

CSV rules, the same on both readers:

- cells are read as raw bytes, so ids like ``00123`` stay text; with the default UTF-8 a cell
  that is not UTF-8 cannot stop the run: it is written back with U+FFFD for the bad bytes and
  counted (:func:`text_column`), and the DOI column reports it as ``bad_encoding``. Any other
  ``encoding`` (``latin-1``, ``cp1252``) is decoded strictly; output is always UTF-8;
- a row with the wrong number of fields is kept, padded with nulls or cut to the header's
  width, and flagged; a blank line is an empty cell in a one-column file and nothing otherwise;
- a gzip file is read as the CSV it holds; other archives and Parquet under a CSV name are
  refused with a word on what to do; duplicated column names are refused.

The fast reader cannot keep a malformed row (it can only skip it) nor read a row larger than
its block, so when it meets either the whole read starts again on the lenient reader:
:func:`read_table` runs the caller's pass once more, which is why the pass must be restartable
(the temporary output file of :func:`writing` is).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import lzma
import os
import re
import secrets
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, Protocol, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

__all__ = [
    "MALFORMED_FLAG",
    "CsvOptions",
    "Format",
    "TableInputError",
    "TableReader",
    "detect_format",
    "escape_formulas",
    "open_csv_lenient",
    "open_table",
    "read_table",
    "require_column",
    "text_column",
    "writing",
]

Format = Literal["csv", "parquet"]
PARQUET_SUFFIXES: tuple[str, ...] = (".parquet", ".pq", ".parq")
#: CSV read size. pyarrow reads up to 32 blocks ahead of the consumer, so this bounds the
#: read-ahead at 64 MiB whatever the file size; a larger row sends the file to the lenient
#: reader, which has no such limit.
_BLOCK_BYTES = 2 << 20
#: Malformed CSV rows quoted back to the user (the count is always complete).
_KEEP_MALFORMED = 5
#: Name of the flag column that :func:`open_csv_lenient` appends to each batch.
MALFORMED_FLAG = "__airflow_doi_malformed__"
#: First bytes of files that are not CSV text, and what to tell the user about each.
_NOT_CSV: tuple[tuple[bytes, str], ...] = (
    (b"PAR1", "is a Parquet file: pass --input-format parquet (or name it .parquet)"),
    (b"PK\x03\x04", "is a zip archive: unzip it and pass the CSV inside"),
    (b"BZh", "is bzip2-compressed: decompress it (bunzip2) or recompress it with gzip"),
    (b"\xfd7zXZ\x00", "is xz-compressed: decompress it (unxz) or recompress it with gzip"),
    (b"\x28\xb5\x2f\xfd", "is zstd-compressed: decompress it (unzstd) or recompress with gzip"),
)
_GZIP_MAGIC = b"\x1f\x8b"
#: Characters that make a spreadsheet read a CSV cell as a formula (OWASP's list).
FORMULA_STARTS = "=+-@\t\r"

T = TypeVar("T")


class TableInputError(Exception):
    """The input cannot be used as asked (missing file or column, no header...): exit code 2."""


@dataclass(frozen=True)
class CsvOptions:
    """How to read CSV text: ``encoding`` (a Python codec name) and a one-character delimiter.

    UTF-8 (any spelling) is read leniently, bad bytes flagged per cell; any other encoding is
    decoded strictly, since the user named it.
    """

    encoding: str = "utf-8"
    delimiter: str = ","

    def __post_init__(self) -> None:
        try:
            codecs.lookup(self.encoding)
        except LookupError:
            raise TableInputError(
                f"unknown encoding {self.encoding!r}: use a name such as utf-8, latin-1 or "
                "cp1252"
            ) from None
        delimiter = {"tab": "\t", "\\t": "\t"}.get(self.delimiter.lower(), self.delimiter)
        if len(delimiter) != 1 or delimiter in "\"\r\n":
            raise TableInputError(
                f"delimiter {self.delimiter!r} cannot be used: give one character other than "
                "a quote or a line break, e.g. ';' or tab"
            )
        object.__setattr__(self, "delimiter", delimiter)

    @property
    def lenient_utf8(self) -> bool:
        """UTF-8 under any of its names: bad bytes are kept and flagged, not refused."""
        return codecs.lookup(self.encoding).name == "utf-8"


def detect_format(path: Path, explicit: str | None = None) -> Format:
    """``explicit`` if given, else Parquet for ``.parquet``/``.pq``/``.parq``, else CSV."""
    if explicit is not None:
        if explicit not in ("csv", "parquet"):
            raise TableInputError(f"unknown format {explicit!r}: use csv or parquet")
        return "parquet" if explicit == "parquet" else "csv"
    return "parquet" if path.suffix.lower() in PARQUET_SUFFIXES else "csv"


@dataclass
class TableReader:
    """Column names and a batch iterator; the malformed counts fill in while CSV is read.

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
    #: Fast CSV only: set by :func:`read_table`, which reads the file again on the lenient
    #: reader when the fast one cannot keep a row. Left False, the fast reader skips (and
    #: counts in ``malformed_count``) a row with the wrong number of fields, for callers that
    #: check the count after the pass and start again themselves.
    restartable: bool = False


class _ReadAgain(Exception):
    """The fast CSV reader met a row it cannot keep: the pass starts again, leniently."""


def read_table(
    path: Path,
    fmt: Format,
    consume: Callable[[TableReader], T],
    *,
    chunk_rows: int,
    options: CsvOptions | None = None,
    columns: list[str] | None = None,
) -> tuple[T, TableReader]:
    """``consume(reader)`` over ``path``, once more on the lenient reader if the fast one
    cannot keep every row. Returns the pass's result and the reader it used (whose
    ``malformed_count`` is complete). ``columns`` narrows a Parquet read."""
    options = options or CsvOptions()
    try:
        reader = open_table(path, fmt, chunk_rows=chunk_rows, options=options, columns=columns)
        reader.restartable = True
        try:
            return consume(reader), reader
        except _ReadAgain:
            lenient = open_csv_lenient(path, chunk_rows, options)
            return consume(lenient), lenient
    except (EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError) as error:
        raise TableInputError(
            f"{path}: the compressed file is damaged or cut short ({error}); check the file"
        ) from None
    except UnicodeError as error:
        if isinstance(error, UnicodeDecodeError):  # the readers word these themselves
            raise
        raise TableInputError(
            f"{path}: cannot be read as {options.encoding} ({error}); pass the file's real "
            "encoding with --encoding"
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
    return _open_csv(path, chunk_rows, options or CsvOptions())


def require_column(reader: TableReader, column: str, path: Path) -> None:
    """Refuse a column name the file does not have, listing the ones it has."""
    if column not in reader.names:
        listed = ", ".join(repr(name) for name in reader.names) or "none"
        hint = "pass one of them to --column"
        first = reader.names[0] if reader.names else ""
        if reader.all_text and first.lstrip().startswith(("{", "[")):
            hint = ("the file looks like JSON (Lines), which is not read: convert it to CSV "
                    "or Parquet with a header line naming the column")
        elif reader.all_text and len(reader.names) == 1 and re.search(r"10\.\d+/", first):
            hint = ("the first line is read as the header, and this one is a DOI: add a header "
                    "line naming the column (e.g. doi) at the top of the file")
        elif reader.all_text and len(reader.names) == 1:
            found = [mark for mark in ";\t|," if mark in first]
            if found:
                hint = f"is the file separated by {found[0]!r}? pass --delimiter {found[0]!r}"
        raise TableInputError(f"{path}: no column {column!r} (columns: {listed}); {hint}")


def _refuse_duplicates(path: Path, names: list[str]) -> None:
    twice = [name for name, count in Counter(names).items() if count > 1]
    if twice:
        listed = ", ".join(repr(name) for name in twice)
        raise TableInputError(
            f"{path}: column name(s) {listed} appear more than once, so a column cannot be "
            "told apart; rename the duplicates in the header"
        )


def _open_parquet(path: Path, chunk_rows: int, columns: list[str] | None) -> TableReader:
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError):
        raise TableInputError(
            f"{path}: not a readable Parquet file; if it is CSV, pass --input-format csv"
        ) from None
    schema = parquet.schema_arrow
    _refuse_duplicates(path, list(schema.names))
    wanted = None if columns is None else [name for name in columns if name in schema.names]
    batches = parquet.iter_batches(batch_size=chunk_rows, columns=wanted)
    return TableReader(list(schema.names), batches, schema)


def _compression(path: Path) -> str | None:
    """``"gzip"`` for a gzip file, None for plain text; refuses what cannot be CSV."""
    with path.open("rb") as handle:
        head = handle.read(8)
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    for magic, what in _NOT_CSV:
        if head.startswith(magic):
            raise TableInputError(f"{path}: {what}")
    return None


def _open_text(path: Path, options: CsvOptions, compression: str | None) -> IO[str]:
    """The file as text for Python's csv module (BOM dropped, bad UTF-8 kept as escapes)."""
    if options.lenient_utf8:
        encoding, errors = "utf-8-sig", "surrogateescape"
    else:
        encoding, errors = options.encoding, "strict"
    if compression == "gzip":
        import gzip

        return gzip.open(path, "rt", encoding=encoding, errors=errors, newline="")
    return path.open("r", encoding=encoding, errors=errors, newline="")


def _undecodable(path: Path, options: CsvOptions, error: UnicodeDecodeError) -> TableInputError:
    bad = error.object[error.start : error.end]
    return TableInputError(
        f"{path}: not {options.encoding} text (bytes {bad.hex(' ')} have no meaning in it); "
        "pass the file's real encoding with --encoding (latin-1 accepts every byte)"
    )


def _rows(path: Path, options: CsvOptions, handle: IO[str]) -> Iterator[list[str]]:
    """Python's csv rows, with its errors in our words."""
    csv.field_size_limit(2**31 - 1)  # one 5 MB cell is data, not an attack on memory
    rows = csv.reader(handle, delimiter=options.delimiter)
    try:
        yield from rows
    except UnicodeDecodeError as error:
        raise _undecodable(path, options, error) from None
    except csv.Error:
        raise TableInputError(
            f"{path}: line {rows.line_num} cannot be read as CSV (is the delimiter "
            f"{options.delimiter!r} right? pass --delimiter)"
        ) from None


def _header(path: Path, options: CsvOptions, compression: str | None) -> tuple[list[str], bool]:
    """The column names and whether any row follows them."""
    with _open_text(path, options, compression) as handle:
        rows = _rows(path, options, handle)
        names = next(rows, None)
        if names is None:
            raise TableInputError(f"{path}: empty file (no header row); a CSV needs a header")
        names = [_display(name) for name in names]
        _refuse_duplicates(path, names)
        width = len(names)
        for row in rows:
            if row or width == 1:
                return names, True
        return names, False


def _display(name: str) -> str:
    """A header cell as text (a non-UTF-8 byte shows as U+FFFD)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _open_csv(path: Path, chunk_rows: int, options: CsvOptions) -> TableReader:
    compression = _compression(path)
    names, has_rows = _header(path, options, compression)
    schema = pa.schema([(name, pa.large_string()) for name in names])
    if not has_rows:  # also a header without a final newline, which pyarrow refuses
        return TableReader(names, iter(()), schema, all_text=True)
    reader = TableReader(names, iter(()), schema, all_text=True)

    def on_invalid_row(row: Any) -> str:
        reader.malformed_count += 1  # seen: read_table starts again on the lenient reader
        if len(reader.malformed) < _KEEP_MALFORMED:
            reader.malformed.append(str(row.text))
        return "skip"

    source: Any = str(path)
    if compression:
        source = pa.input_stream(str(path), compression=compression)
    try:
        stream = pcsv.open_csv(
            source,
            # Threads would read blocks ahead of the consumer without bound: memory would then
            # grow with the file instead of staying at a few blocks.
            read_options=pcsv.ReadOptions(
                block_size=_BLOCK_BYTES,
                use_threads=False,
                encoding="utf8" if options.lenient_utf8 else options.encoding,
            ),
            parse_options=pcsv.ParseOptions(
                delimiter=options.delimiter,
                newlines_in_values=True,
                ignore_empty_lines=len(names) > 1,
                invalid_row_handler=on_invalid_row,
            ),
            convert_options=pcsv.ConvertOptions(
                column_types={name: pa.binary() for name in names},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except UnicodeDecodeError as error:
        raise _undecodable(path, options, error) from None
    except (pa.ArrowException, OSError):
        return open_csv_lenient(path, chunk_rows, options)
    if list(stream.schema.names) != names:  # the two parsers disagree: trust the lenient one
        stream.close()
        return open_csv_lenient(path, chunk_rows, options)
    reader.batches = _fast_batches(path, options, stream, reader, chunk_rows)
    return reader


def _fast_batches(
    path: Path, options: CsvOptions, stream: Any, reader: TableReader, chunk_rows: int
) -> Iterator[pa.RecordBatch]:
    """The fast reader's blocks as batches of ``chunk_rows``; :class:`_ReadAgain` as soon as
    a row had to be skipped or could not be read (a row larger than a block)."""

    def checked() -> Iterator[pa.RecordBatch]:
        while True:
            try:
                batch = stream.read_next_batch()
            except StopIteration:
                break
            except UnicodeDecodeError as error:
                raise _undecodable(path, options, error) from None
            except pa.ArrowException:
                if reader.restartable:
                    raise _ReadAgain from None
                raise TableInputError(
                    f"{path}: a row is too large for the fast CSV reader; read the file with "
                    "airflow_doi.io_tables.read_table, which falls back to one without limit"
                ) from None
            if reader.malformed_count and reader.restartable:
                raise _ReadAgain
            yield batch

    with stream:
        yield from rebatch(checked(), stream.schema, chunk_rows)


def open_csv_lenient(
    path: Path, chunk_rows: int, options: CsvOptions | None = None
) -> TableReader:
    """CSV through Python's csv module, keeping rows whose field count is wrong.

    The fast reader cannot align such a row with the header, so it can only skip it; this one
    pads a short row with nulls and cuts a long one to the header's width, and flags the row
    (in the ``MALFORMED_FLAG`` column) so the caller reports it instead of losing it. Slower,
    so it only reads the files the fast reader could not.
    """
    options = options or CsvOptions()
    compression = _compression(path)
    names, _ = _header(path, options, compression)
    handle = _open_text(path, options, compression)
    rows = _rows(path, options, handle)
    next(rows)  # the header
    width = len(names)
    schema = pa.schema([(name, pa.large_string()) for name in names])
    reader = TableReader(names, iter(()), schema, all_text=True, flags_malformed=True)

    def cell(value: str) -> bytes:
        return value.encode("utf-8", "surrogateescape")

    def batches() -> Iterator[pa.RecordBatch]:
        with handle:
            columns: list[list[bytes | None]] = [[] for _ in range(width)]
            flags: list[bool] = []
            for row in rows:
                if not row:
                    if width > 1:
                        continue  # a blank line between rows, as the fast reader skips it
                    row = [""]
                malformed = len(row) != width
                if malformed:
                    reader.malformed_count += 1
                    if len(reader.malformed) < _KEEP_MALFORMED:
                        reader.malformed.append(_display(options.delimiter.join(row)))
                flags.append(malformed)
                for index in range(width):
                    columns[index].append(cell(row[index]) if index < len(row) else None)
                if len(flags) == chunk_rows:
                    yield _lenient_batch(names, columns, flags)
                    columns, flags = [[] for _ in range(width)], []
            if flags:
                yield _lenient_batch(names, columns, flags)

    reader.batches = batches()
    return reader


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


def escape_formulas(values: pa.Array) -> pa.Array:
    """Text cells that a spreadsheet would run as a formula, with a ``'`` in front.

    A cell starting with ``= + - @``, tab or carriage return is what OWASP calls CSV
    injection; the apostrophe makes spreadsheets show it as text. Other cells, and non-text
    columns, are returned unchanged.
    """
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        return values
    pattern = "^[" + FORMULA_STARTS.replace("-", "\\-") + "]"
    risky = pc.match_substring_regex(values, pattern)
    if not pc.any(risky).as_py():
        return values
    empty = pa.scalar("", values.type)
    quoted = pc.binary_join_element_wise(pa.scalar("'", values.type), values, empty)
    return pc.if_else(risky, quoted, values)


class TableWriter(Protocol):
    def write_table(self, table: pa.Table) -> None: ...


@contextmanager
def writing(path: Path, fmt: Format, schema: pa.Schema) -> Iterator[TableWriter]:
    """A batch writer for ``path``; a regular file appears only if the block exits cleanly.

    The temporary file is created with mode 0666 less the umask, as any file the user's
    shell would create; CSV is written as UTF-8. A symlink is followed (its target is
    replaced, the link stays); a path that is not a regular file (``/dev/stdout``, a FIFO)
    is written straight through, never replaced by a file.
    """
    with replacing(path) as (target, _), _writer(target, fmt, schema) as writer:
        yield writer


@contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[tuple[str, Path]]:
    """(where to write, the output it becomes) for ``path`` (see :func:`output_target`): the
    output itself when it is written straight through, else a new file beside it that
    replaces it only if the block exits cleanly."""
    final, straight = output_target(path)
    if straight:
        yield str(final), final
        return
    temporary, handle = create_beside(final)
    os.close(handle)
    try:
        yield temporary, final
        os.replace(temporary, final)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _writer(target: str, fmt: Format, schema: pa.Schema) -> Any:
    if fmt == "parquet":
        return pq.ParquetWriter(target, schema)
    options = pcsv.WriteOptions(quoting_style="needed")
    return pcsv.CSVWriter(target, schema, write_options=options)


def refuse_same_file(source: Path, target: Path) -> None:
    """A command never writes over the file it is reading (it would lose the input)."""
    try:
        same = target.exists() and os.path.samefile(source, target)
    except OSError:
        same = False
    if same:
        raise TableInputError(
            f"{target}: is the input file itself; write to another --output (the input is "
            "read while the output is written, and would be lost)"
        )


def output_target(path: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Where an output goes, and whether it is written straight through (True) rather than
    beside and renamed: ``-`` is standard output; a path that exists and is no regular file
    (``/dev/stdout`` on a pipe or a terminal, a FIFO, a device) is written as it is, never
    replaced by a file; a symlink to a file is followed (its target is replaced, the link
    stays). A directory is refused."""
    if os.fspath(path) == "-":
        return Path("/dev/stdout"), True
    given = Path(path)
    if given.exists() and not given.is_file():
        if given.is_dir():
            raise TableInputError(f"{given}: is a directory; pass a file name to --output")
        return given, True
    return Path(os.path.realpath(given)), False


def create_beside(path: Path) -> tuple[str, int]:
    """A new, unique hidden file next to ``path`` (``tempfile`` would force mode 0600), its
    directory created; an error that says what to do when neither can be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            name = os.path.join(path.parent, f".{path.name}.{secrets.token_hex(4)}.tmp")
            try:
                return name, os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
    except OSError as error:
        raise TableInputError(
            f"{path}: cannot be written ({error.strerror or 'refused'}); pick another --output"
        ) from None
