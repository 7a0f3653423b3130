"""Writing tables: the one writer of the file commands (``normalize``, ``resolve``, ``repair``).

Output goes to a temporary file beside the target, created with the user's umask, and is
renamed into place only when complete (:func:`writing`, :func:`replacing`). CSV keeps the
input's separator and line ending, and quotes a cell only when it must (:class:`CsvWriter`);
it is UTF-8, with a BOM when the input was an Excel-style export, or the encoding the user
chose (:func:`csv_encoding`); a cell a spreadsheet would run as a formula can be escaped
(:func:`escape_formulas`). Parquet is written as it came.
"""

from __future__ import annotations

import codecs
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_doi.files import BEFORE_PUT_IN_PLACE
from airflow_doi.files.read import Format, TableInputError, value_offsets
from airflow_doi.files.sniff import (
    CsvDialect,
    display_delimiter,
    display_encoding,
    line_ending,
)

__all__ = [
    "FORMULA_STARTS",
    "CsvEncoding",
    "CsvWriter",
    "ReadFile",
    "TableWriter",
    "check_output",
    "create_beside",
    "csv_encoding",
    "describe_csv_output",
    "escape_formulas",
    "output_target",
    "refuse_same_file",
    "replacing",
    "writing",
]

#: What a cell starts with when a spreadsheet would run it as a formula (OWASP: CSV injection).
FORMULA_STARTS = "=+-@\t\r"


#: Text types Arrow's string kernels do not take, and the type the escape is computed in.
_COMPUTED_AS: dict[pa.DataType, pa.DataType] = {
    pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}


def escape_formulas(values: pa.Array) -> pa.Array:
    """Text cells that a spreadsheet would run as a formula, with a ``'`` in front.

    A cell starting with ``= + - @``, tab or carriage return is what OWASP calls CSV
    injection; the apostrophe makes spreadsheets show it as text. Every column that is
    written as text is escaped, its type kept: ``string``, ``large_string``, ``string_view``,
    the binary types (their bytes are written as text), a dictionary of any of them (a pandas
    ``Categorical``: only its dictionary is rewritten) and an extension type stored as one.
    Other cells, and other columns (numbers, nested types, which CSV does not hold), are
    returned unchanged.
    """
    kind = values.type
    if pa.types.is_dictionary(kind):
        words = escape_formulas(values.dictionary)
        if words is values.dictionary:
            return values
        return pa.DictionaryArray.from_arrays(values.indices, words, ordered=kind.ordered)
    if isinstance(kind, pa.BaseExtensionType):
        storage = escape_formulas(values.storage)
        return values if storage is values.storage else pa.ExtensionArray.from_storage(
            kind, storage)
    computed = _COMPUTED_AS.get(kind, kind)
    if not (pa.types.is_string(computed) or pa.types.is_large_string(computed)
            or pa.types.is_binary(computed) or pa.types.is_large_binary(computed)):
        return values
    text = values.cast(computed) if computed != kind else values
    pattern = "^[" + FORMULA_STARTS.replace("-", "\\-") + "]"
    risky = pc.match_substring_regex(text, pattern)
    if not pc.any(risky).as_py():
        return values
    empty = pa.scalar("", computed)
    quoted = pc.binary_join_element_wise(pa.scalar("'", computed), text, empty)
    escaped = pc.if_else(risky, quoted, text)
    return escaped if computed == kind else escaped.cast(kind)


@dataclass(frozen=True)
class CsvEncoding:
    """How CSV output is encoded: a Python codec, and whether a UTF-8 BOM starts the file
    (``utf-16`` and ``utf-32`` write their own)."""

    codec: str = "utf-8"
    bom: bool = False
    #: Chosen by the user (``--output-encoding``), not by the input.
    asked: bool = False

    @property
    def utf8(self) -> bool:
        return codecs.lookup(self.codec).name == "utf-8"

    def describe(self) -> str:
        """``UTF-8 with a BOM``, ``cp1252``...: the encoding in one phrase."""
        return display_encoding(self.codec) + (" with a BOM" if self.bom else "")


def csv_encoding(dialect: CsvDialect | None, asked: str | None = None) -> CsvEncoding:
    """The encoding of a CSV output: ``asked`` (``--output-encoding``: any Python codec name;
    ``utf-8-sig`` is UTF-8 with a BOM), else UTF-8 with a BOM when the input was an
    Excel-style export (a code page such as cp1252, or any BOM: Excel knows a UTF-8 file only
    by its BOM, and reads one without it in the machine's code page), else UTF-8."""
    if asked is not None:
        try:
            info = codecs.lookup(asked)
        except LookupError:
            info = None
        if info is None or not info._is_text_encoding:
            raise TableInputError(
                f"unknown output encoding {asked!r}: use a name such as utf-8, utf-8-sig (UTF-8 "
                "with a BOM, as Excel reads it), cp1252 or latin-1"
            )
        if info.name == "utf-8-sig":
            return CsvEncoding("utf-8", bom=True, asked=True)
        return CsvEncoding(asked, asked=True)
    if dialect is None or (dialect.lenient_utf8 and not dialect.bom):
        return CsvEncoding()
    return CsvEncoding("utf-8", bom=True)


def describe_csv_output(dialect: CsvDialect | None, encoding: CsvEncoding) -> str:
    """``UTF-8 with a BOM (for Excel; --output-encoding chooses), ';'-separated, CRLF line
    endings``: a CSV output in one phrase (why a BOM, when the input chose it)."""
    dialect = dialect or CsvDialect()
    why = " (for Excel; --output-encoding chooses)" if encoding.bom and not encoding.asked else ""
    return (f"{encoding.describe()}{why}, {display_delimiter(dialect.delimiter)}-separated, "
            f"{line_ending(dialect.line_ending)} line endings")


class TableWriter(Protocol):
    def write_table(self, table: pa.Table) -> None: ...


@contextmanager
def writing(
    path: Path, fmt: Format, schema: pa.Schema, dialect: CsvDialect | None = None,
    encoding: CsvEncoding | None = None,
) -> Iterator[TableWriter]:
    """A batch writer for ``path``; a regular file appears only if the block exits cleanly.

    CSV is written with minimal quoting (a cell is quoted only when it holds the separator, a
    quote or a line break), on the separator and line ending of ``dialect`` (the input's, so a
    ``;``-separated CRLF export comes back as one), in ``encoding`` (default: what
    :func:`csv_encoding` chooses for ``dialect``); without a dialect, ``,`` and LF. Parquet
    keeps the columns' types (a repeated column name gets ``.1``, ``.2``... there, as pandas
    reads it).

    The temporary file is created with mode 0666 less the umask, as any file the user's
    shell would create. A symlink is followed (its target is replaced, the link stays); a
    path that is not a regular file (``/dev/stdout``, a FIFO) is written straight through,
    never replaced by a file.
    """
    chosen = encoding or csv_encoding(dialect)
    with replacing(path) as (target, _), _writer(target, fmt, schema, dialect, chosen,
                                                 _shown(path)) as writer:
        yield writer


def _shown(path: str | os.PathLike[str]) -> str:
    """An output as messages name it: as the user gave it, ``-`` as standard output."""
    return "standard output" if os.fspath(path) == "-" else os.fspath(path)


def _putting_in_place() -> None:
    for hook in BEFORE_PUT_IN_PLACE:
        hook()


@contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[tuple[str, Path]]:
    """(where to write, the output it becomes) for ``path`` (see :func:`output_target`): the
    output itself when it is written straight through, else a new file beside it that
    replaces it only if the block exits cleanly."""
    final, straight = output_target(path)
    if straight:
        # Standard output, a FIFO, a device: what is written there cannot be taken back, and
        # a pass may start again (read_table), so the output is made whole in a temporary
        # file first, then copied out.
        handle, temporary = tempfile.mkstemp(prefix="airflow-doi-", suffix=".tmp")
        os.close(handle)
        try:
            yield temporary, final
            _putting_in_place()
            with open(temporary, "rb") as made:
                if os.fspath(path) == "-" or _is_stdout(final):
                    sys.stdout.flush()
                    shutil.copyfileobj(made, sys.stdout.buffer)
                    sys.stdout.buffer.flush()
                else:
                    with open(final, "wb") as out:
                        shutil.copyfileobj(made, out)
        finally:
            os.unlink(temporary)
        return
    temporary, handle = create_beside(final)
    os.close(handle)
    try:
        yield temporary, final
        _putting_in_place()
        try:
            os.replace(temporary, final)
        except OSError as error:  # a file of another user's in a sticky folder, a read-only mount
            raise TableInputError(
                f"{final}: cannot be replaced ({error.strerror or 'refused'}); the output was "
                "made but not put there, and the file was left as it was: pick another "
                "--output, or one this user may replace") from None
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _writer(target: str, fmt: Format, schema: pa.Schema, dialect: CsvDialect | None,
            encoding: CsvEncoding, shown: str) -> Any:
    if fmt == "parquet":
        return _ParquetWriter(target, schema)
    return CsvWriter(target, schema, dialect or CsvDialect(), encoding, shown=shown)


def _unique(names: list[str]) -> list[str]:
    """``names`` with a repeated one numbered ``.1``, ``.2``... (pandas' rule)."""
    seen: set[str] = set()
    unique = []
    for name in names:
        chosen, number = name, 0
        while chosen in seen:
            number += 1
            chosen = f"{name}.{number}"
        seen.add(chosen)
        unique.append(chosen)
    return unique


class _ParquetWriter:
    """Parquet, its repeated column names made unique (readers refuse them)."""

    def __init__(self, target: str, schema: pa.Schema) -> None:
        self._names = _unique(list(schema.names))
        renamed = pa.schema([item.with_name(name) for item, name in zip(schema, self._names,
                                                                        strict=True)])
        self._writer = pq.ParquetWriter(target, renamed)

    def write_table(self, table: pa.Table) -> None:
        self._writer.write_table(table.rename_columns(self._names))

    def __enter__(self) -> _ParquetWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._writer.close()


class CsvWriter:
    """CSV text with minimal quoting, a whole batch at a time: by the C core where it is
    built (``airflow_doi.native._core.csv_write``), else by Arrow kernels, the same bytes.

    Arrow's own CSV writer quotes every text cell (``2013`` comes back ``"2013"``) and has
    only LF line endings; this one leaves a cell as it was unless it must be quoted, as
    Python's ``csv.QUOTE_MINIMAL`` does, and ends lines as the input did. A null is an empty
    cell; booleans are ``true``/``false``. On the Arrow path, which cells need quotes is found
    from the column's bytes in one vectorized pass.

    In an encoding other than UTF-8 the text is encoded strictly: a cell the encoding cannot
    hold stops the write (:class:`TableInputError` naming its row and column), so no
    character is ever replaced without the user knowing.
    """

    def __init__(self, target: str, schema: pa.Schema, dialect: CsvDialect,
                 encoding: CsvEncoding | None = None, *, shown: str | None = None) -> None:
        self._encoding = encoding or CsvEncoding()
        self._encoder = None if self._encoding.utf8 else codecs.getincrementalencoder(
            self._encoding.codec)("strict")
        self._names = list(schema.names)
        self._shown = shown or target  # the output as the user named it, for messages
        self._rows = 0  # written so far, to name the row of a cell that cannot be encoded
        self._delimiter = dialect.delimiter
        self._ending = dialect.line_ending
        special = '"\r\n' + self._delimiter
        self._pattern = "[" + re.escape(special) + "]"
        self._table: np.ndarray[Any, np.dtype[np.bool_]] | None = None
        if len(self._delimiter.encode("utf-8")) == 1:  # else the regular expression decides
            self._table = np.zeros(256, dtype=bool)
            self._table[list(special.encode("utf-8"))] = True
        self._handle = open(target, "wb")  # closed by __exit__
        if self._encoding.bom:
            self._handle.write(codecs.BOM_UTF8)
        header = [self._quoted_text(name) for name in schema.names]
        self._write_text(self._delimiter.join(header) + self._ending, None)

    def _quoted_text(self, text: str) -> str:
        if re.search(self._pattern, text):
            return '"' + text.replace('"', '""') + '"'
        return text

    def _needs_quotes(self, values: pa.Array) -> pa.Array | np.ndarray[Any, Any] | None:
        """Which cells hold the separator, a quote or a line break (None: no cell does)."""
        if self._table is None:
            found = pc.match_substring_regex(values, self._pattern)
            return found if pc.any(found).as_py() else None
        data = values.buffers()[2]
        if data is None or len(values) == 0:
            return None
        bounds = value_offsets(values)
        text = np.frombuffer(data, dtype=np.uint8)[bounds[0] : bounds[-1]]
        at = np.flatnonzero(self._table[text])
        if at.size == 0:
            return None
        mask = np.zeros(len(values), dtype=bool)
        mask[np.searchsorted(bounds, at + bounds[0], side="right") - 1] = True
        return mask

    def _cells(self, values: pa.Array | pa.ChunkedArray) -> pa.Array:
        values = self._text(values)
        special = self._needs_quotes(values)
        if special is None:
            return values
        doubled = pc.replace_substring(values, '"', '""')
        quote, empty = pa.scalar('"', pa.large_string()), pa.scalar("", pa.large_string())
        quoted = pc.binary_join_element_wise(quote, doubled, quote, empty)
        return pc.if_else(special, quoted, values)

    def _write_text(self, text: str, table: pa.Table | None) -> None:
        """``text`` (the header, or ``table``'s rows) in the output's encoding."""
        if self._encoder is None:
            self._handle.write(text.encode("utf-8"))
            return
        try:
            self._handle.write(self._encoder.encode(text))
        except UnicodeEncodeError as error:
            raise self._unencodable(error, table) from None

    def _unencodable(self, error: UnicodeEncodeError, table: pa.Table | None) -> TableInputError:
        """Which cell ``error`` is in, in the user's words."""
        bad = error.object[error.start : error.end]
        where = "the header"
        if table is None:
            where = "the header" + next(
                (f", column {name!r}" for name in self._names if bad in name), "")
        else:
            for name, column in zip(self._names, table.columns, strict=True):
                cells = self._text(column).to_pylist()
                row = next((index for index, cell in enumerate(cells) if cell and bad in cell),
                           None)
                if row is not None:
                    where = f"row {self._rows + row + 1:,}, column {name!r}"
                    break
        shown = ", ".join(f"{char!r} (U+{ord(char):04X})" for char in dict.fromkeys(bad))
        return TableInputError(
            f"{self._shown}: {where} holds {shown}, which {self._encoding.codec} "
            "(--output-encoding) cannot hold, so nothing was written: choose utf-8-sig (UTF-8 "
            "with a BOM, which Excel opens) or an encoding that has it"
        )

    def write_table(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        from airflow_doi.native import module

        native = module()
        if native is not None and self._table is not None and self._encoder is None:
            self._write_native(native, table)
            self._rows += table.num_rows
            return
        cells = [self._cells(column) for column in table.columns]
        text = pa.large_string()
        cells[-1] = pc.binary_join_element_wise(  # the line ending, after the last cell
            pc.fill_null(cells[-1], ""), pa.scalar(self._ending, text), pa.scalar("", text))
        lines = pc.binary_join_element_wise(
            *cells, pa.scalar(self._delimiter, text),
            null_handling="replace", null_replacement="",
        )
        data = lines.buffers()[2]
        bounds = value_offsets(lines)
        text = memoryview(data)[int(bounds[0]) : int(bounds[-1])]
        if self._encoder is None:
            self._handle.write(text)
        else:
            self._write_text(bytes(text).decode("utf-8"), table)
        self._rows += table.num_rows

    def _write_native(self, native: Any, table: pa.Table) -> None:
        """The C core writes the rows straight to the file (``csv_write``), the GIL released."""
        columns = [self._text(column).__arrow_c_array__() for column in table.columns]
        self._handle.flush()  # the header, and anything written before, go first
        native.csv_write(self._handle.fileno(), columns, self._delimiter.encode("utf-8"),
                         self._ending.encode("utf-8"))

    @staticmethod
    def _text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
        """A column as one large_string array (booleans ``true``/``false``, numbers as text)."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        if pa.types.is_large_string(values.type):
            return values
        try:
            return values.cast(pa.large_string())
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            raise TableInputError(
                f"a column of type {values.type} cannot be written to CSV; write Parquet "
                "(an output name ending in .parquet) instead"
            ) from None

    def __enter__(self) -> CsvWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()


#: A file a command reads, as the user would know it: what it is (``the input file``,
#: ``the --cache file``) and its path.
ReadFile = tuple[str, "str | os.PathLike[str]"]


def check_output(source: Path | None, target: str | os.PathLike[str], *,
                 mkdir: bool = True, reads: Iterable[ReadFile] = ()) -> None:
    """Refuse, before any work, an output that cannot be written: a directory, the input
    file ``source`` or any other file of ``reads`` (see :func:`refuse_same_file`), or, unless
    ``mkdir``, one whose folder does not exist (a typo in a path should not become a new
    folder; ``--mkdir`` asks for it)."""
    final, straight = output_target(target)  # a directory is refused here
    named: list[ReadFile] = [("the input file", source)] if source is not None else []
    refuse_same_file([*named, *reads], Path(target))
    if not mkdir and not straight and not final.parent.is_dir():
        missing = Path(os.fspath(target)).parent
        raise TableInputError(
            f"{target}: the folder {missing} does not exist; create it, correct the path, or "
            "pass --mkdir to have it created"
        )


def refuse_same_file(reads: Iterable[ReadFile], target: Path) -> None:
    """A command never writes over a file it reads (it would lose it): the same path, the
    same file through a symlink or a hard link, or a path neither is at yet (a new --cache
    the run would create, then write its output over)."""
    for what, path in reads:
        if _same_file(Path(path), target):
            raise TableInputError(
                f"{target}: is {what} itself; write to another --output ({what} is read while "
                "the output is written, and would be lost)"
            )


def _same_file(source: Path, target: Path) -> bool:
    try:
        if source.exists() and target.exists():
            return os.path.samefile(source, target)
        return os.path.realpath(source) == os.path.realpath(target)
    except (OSError, ValueError):
        return False


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


def _is_stdout(path: Path) -> bool:
    """``/dev/stdout`` (or ``/dev/fd/1``, ``/proc/self/fd/1``): written through our own
    standard output, so ``>>`` appends instead of being truncated by a new open."""
    return os.fspath(path) in ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


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
