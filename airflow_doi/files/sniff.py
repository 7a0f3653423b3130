"""How a CSV file was written, read from its first bytes: encoding, separators, line ending.

People export catalogues from Excel and library systems without saying how: ``;`` or tab
separated, Windows-1252 or UTF-8 with a byte order mark, CRLF line endings, and now and then
a header line written with ``,`` above rows written with ``;``. :func:`sniff` finds out from a
sample of the file, so the file commands read such files without flags; the user's
``--encoding`` / ``--delimiter`` still win. :func:`airflow_doi.files.read.read_table` uses it,
so ``normalize``, ``resolve``, ``repair`` and ``report`` read every file alike.

The rules, in order:

- **encoding**: a byte order mark decides (UTF-8, UTF-16, UTF-32), and every other byte NUL
  means UTF-16 without one. Else the sample (the
  first MiB and, for a large plain file, windows spread through it) is UTF-8 if it decodes as
  UTF-8 (or UTF-8 with a few damaged cells: at least as many characters beyond ASCII
  decode as UTF-8 as there are bad bytes); else the lines holding other bytes go to
  ``charset-normalizer``, limited to the code
  pages catalogues are exported in (:data:`CODE_PAGES`), and among its equally good answers
  the one earliest in that list wins (Windows-1252 first: what Excel writes in Western Europe
  and the Americas). A sample of plain ASCII says little: if a byte further in turns out not
  to be UTF-8, the reader asks again with that byte's line (:attr:`CsvDialect.may_be_code_page`);
- **separators**: of ``,`` ``;`` tab ``|``, the one that splits the header into two or more
  fields and the most of the following rows into as many; if none does for most rows, a
  header on one separator above rows on another that split into as many fields; else ``,``;
- **line ending**: the first one in the file (``\\r\\n``, ``\\n`` or a lone ``\\r``), which
  the output keeps.

Standard library only, apart from ``charset-normalizer`` for a file that is not UTF-8.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import itertools
import os
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Final

from airflow_doi.files import MAX_LINE_CHARS, TableInputError
from airflow_doi.files.inflate import open_gzip
from airflow_doi.files.lines import Lines, Overlong, as_text, unclosed

__all__ = [
    "CODE_PAGES", "DELIMITERS", "NA_VALUES", "CsvDialect", "CsvLayout", "compression_of",
    "csv_error", "detect_code_page", "display_delimiter", "display_encoding", "in_code_page",
    "layout", "line_ending", "sniff",
]

#: Separators tried, in the order that breaks a tie.
DELIMITERS: Final[tuple[str, ...]] = (",", ";", "\t", "|")
#: Code pages a file that is not UTF-8 may be in, in the order that breaks a tie: the Windows
#: pages Excel exports with, their ISO cousins, then the CJK pages of Japanese, Chinese and
#: Korean catalogues. DOS and Mac pages are left out: on a short sample of names they win by
#: chance and turn every accent into another letter.
CODE_PAGES: Final[tuple[str, ...]] = (
    "cp1252", "cp1250", "cp1251", "cp1253", "cp1254", "cp1257", "iso8859_15", "latin_1",
    "iso8859_2", "koi8_r", "cp932", "shift_jis", "euc_jp", "gb18030", "big5", "euc_kr",
)
#: Cells that mean "no value" in CSV files (pandas' defaults, and ``-``): a file convention,
#: not a DOI, so the DOI column reads them as missing (reason ``empty``). An empty cell is
#: ``empty`` by the standard's own reading, so it is not counted as a marker.
NA_VALUES: Final[tuple[str, ...]] = (
    "NA", "N/A", "NULL", "n/a", "null", "-", "NaN", "nan", "None", "<NA>", "#N/A", "#N/A N/A",
    "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
)
#: Bytes sampled from the start of the file, and from each of up to :data:`_WINDOWS` places
#: further in (a plain file only: a gzip stream cannot be entered in the middle).
_HEAD_BYTES: Final[int] = 1 << 20
_WINDOW_BYTES: Final[int] = 64 << 10
_WINDOWS: Final[int] = 8
#: Records looked at to choose the separator, and non-UTF-8 bytes handed to the detector.
_SNIFF_RECORDS: Final[int] = 200
#: ...within the first characters of the head (a record cut there is still counted).
_SNIFF_CHARS: Final[int] = 64 << 10
_DETECT_BYTES: Final[int] = 64 << 10
_BOMS: Final[tuple[tuple[bytes, str], ...]] = (
    (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
)
#: What to do with a spreadsheet workbook.
_SAVE_AS_CSV = ("open it in Excel (or LibreOffice) and save the sheet as \"CSV UTF-8 (Comma "
                "delimited)\" (File > Save As), then pass that file")
#: A zip's entry that makes it a workbook, and what kind.
_WORKBOOKS: tuple[tuple[str, str], ...] = (
    ("xl/workbook.xml", "an Excel workbook (.xlsx)"),
    ("xl/workbook.bin", "an Excel binary workbook (.xlsb)"),
    ("content.xml", "an OpenDocument file (.ods)"),
)
#: First bytes of files that are not CSV text, and what to tell the user about each.
_NOT_CSV: tuple[tuple[bytes, str], ...] = (
    (b"PAR1", "is a Parquet file: pass --input-format parquet (or name it .parquet)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "is an Excel 97-2003 workbook (or another "
     f"Office file), not CSV: {_SAVE_AS_CSV}"),
    (b"PK\x03\x04", "is a zip archive: unzip it and pass the CSV inside"),
    (b"BZh", "is bzip2-compressed: decompress it (bunzip2) or recompress it with gzip"),
    (b"\xfd7zXZ\x00", "is xz-compressed: decompress it (unxz) or recompress it with gzip"),
    (b"\x28\xb5\x2f\xfd", "is zstd-compressed: decompress it (unzstd) or recompress with gzip"),
)
_GZIP_MAGIC = b"\x1f\x8b"
_ENDINGS: Final[dict[str, str]] = {"\r\n": "CRLF", "\n": "LF", "\r": "CR"}


@dataclass(frozen=True)
class CsvDialect:
    """What a CSV file is, found by :func:`sniff` or given by the user."""

    #: A Python codec name (``utf-8``, ``utf-16``, ``cp1252``...); a BOM is part of the file.
    encoding: str = "utf-8"
    bom: bool = False
    #: The rows' separator, and the header line's (the same, but for a mixed file).
    delimiter: str = ","
    header_delimiter: str = ","
    line_ending: str = "\n"
    encoding_sniffed: bool = False
    #: Found UTF-8 from a sample holding characters beyond ASCII (or a BOM): a bad byte
    #: further in is then a damaged cell, not a sign that the file is in a code page.
    utf8_seen: bool = False

    @property
    def may_be_code_page(self) -> bool:
        """Found UTF-8 from an ASCII-only sample: a byte that is not UTF-8 further in means
        the file is in a code page after all (:func:`detect_code_page`)."""
        return self.encoding_sniffed and self.lenient_utf8 and not self.utf8_seen

    @property
    def lenient_utf8(self) -> bool:
        """UTF-8: a cell with bytes that are not UTF-8 is kept and flagged, not refused."""
        return codecs.lookup(self.encoding).name == "utf-8"

    @property
    def python_encoding(self) -> str:
        """The codec that reads the text with Python, skipping a UTF-8 BOM."""
        return "utf-8-sig" if self.lenient_utf8 else self.encoding

    @property
    def plain(self) -> bool:
        """UTF-8 without a BOM, ``,``-separated: nothing worth saying."""
        return (self.lenient_utf8 and not self.bom and self.delimiter == ","
                and self.header_delimiter == ",")

    def describe(self) -> str:
        """``cp1252, ';'-separated, CRLF line endings`` (what was read, in one phrase)."""
        shown = display_encoding(self.encoding)
        if not self.encoding_sniffed and not shown.startswith("UTF-"):
            shown = self.encoding  # as the user spelt it
        encoding = shown + (" with a BOM" if self.bom else "")
        if self.header_delimiter == self.delimiter:
            separated = f"{display_delimiter(self.delimiter)}-separated"
        else:
            separated = (f"header {display_delimiter(self.header_delimiter)}-separated, rows "
                         f"{display_delimiter(self.delimiter)}-separated")
        return f"{encoding}, {separated}, {line_ending(self.line_ending)} line endings"


def display_encoding(name: str) -> str:
    """An encoding as stderr names it: ``UTF-8``, ``UTF-16``, else the codec's own name."""
    canonical = codecs.lookup(name).name
    return {"utf-8": "UTF-8", "utf-16": "UTF-16", "utf-32": "UTF-32", "utf-16-le": "UTF-16LE",
            "utf-16-be": "UTF-16BE"}.get(canonical, canonical)


def line_ending(ending: str) -> str:
    """``CRLF``, ``LF`` or ``CR``: a line ending as people name it."""
    return _ENDINGS.get(ending, "LF")


def display_delimiter(delimiter: str) -> str:
    """A separator as stderr names it: ``tab``, or its quoted character."""
    return "tab" if delimiter == "\t" else repr(delimiter)


@dataclass(frozen=True)
class CsvLayout:
    """All that is decided about a CSV file before its rows are read: how it was written
    (:class:`CsvDialect`), its compression, and its header (the names, the physical lines they
    take, and whether any row follows them). :func:`layout` decides; the readers of
    :mod:`airflow_doi.files.read` only read by it."""

    dialect: CsvDialect
    compression: str | None
    names: list[str]
    header_lines: int
    has_rows: bool


def layout(
    path: Path,
    *,
    encoding: str | None = None,
    delimiter: str | None = None,
    dialect: CsvDialect | None = None,
) -> CsvLayout:
    """The layout of the CSV file at ``path``: its dialect found (:func:`sniff`; a given
    ``encoding``/``delimiter`` kept) unless ``dialect`` is given, then its header read by it.
    Refuses (:class:`~airflow_doi.files.TableInputError`) what cannot be read as CSV."""
    compression = compression_of(path)
    if dialect is None:
        try:
            dialect = sniff(path, compression, encoding=encoding, delimiter=delimiter)
        except LookupError as error:
            raise TableInputError(f"{path}: {error}; pass --encoding") from None
    names, header_lines, has_rows = _header(path, dialect, compression)
    return CsvLayout(dialect, compression, names, header_lines, has_rows)


def sniff(
    path: Path,
    compression: str | None,
    *,
    encoding: str | None = None,
    delimiter: str | None = None,
) -> CsvDialect:
    """The dialect of the CSV file at ``path``; a given ``encoding``/``delimiter`` is kept."""
    head, windows, whole = _samples(path, compression)
    bom_encoding, bom_size = _bom(head)
    if encoding is not None:
        chosen = encoding
        bom = bom_size > 0 and codecs.lookup(encoding).name == codecs.lookup(bom_encoding).name
        if not bom and codecs.lookup(encoding).name in ("utf-16", "utf-32"):
            bom = bom_size > 0
    elif bom_size:
        chosen, bom = bom_encoding, True
    elif (wide := _utf16_without_bom(head)) is not None:
        chosen, bom = wide, False
    elif all(_is_utf8(sample, first=index == 0, last=whole and index == 0)
             for index, sample in enumerate([head, *windows])) or _utf8_with_damage(
                 [head, *windows]):
        chosen, bom = "utf-8", False
    else:
        chosen, bom = detect_code_page([head, *windows]), False
    utf8_seen = bom or not all(sample.isascii() for sample in [head, *windows])
    text = _decode_head(head, chosen, bom_size if bom else 0, whole)
    ending = _line_ending(text)
    if delimiter is not None:
        header_delimiter = body_delimiter = delimiter
    else:
        header_delimiter, body_delimiter = _delimiters(text)
    return CsvDialect(
        encoding=chosen, bom=bom, delimiter=body_delimiter, header_delimiter=header_delimiter,
        line_ending=ending, encoding_sniffed=encoding is None, utf8_seen=utf8_seen,
    )


def _samples(path: Path, compression: str | None) -> tuple[bytes, list[bytes], bool]:
    """The first bytes, windows from further in, and whether the head is the whole file."""
    if compression == "gzip":

        with gzip.open(path, "rb") as stream:
            head = stream.read(_HEAD_BYTES + 1)
        return head[:_HEAD_BYTES], [], len(head) <= _HEAD_BYTES
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(_HEAD_BYTES)
        windows = []
        if size > 2 * _HEAD_BYTES:
            step = (size - _HEAD_BYTES) // _WINDOWS
            for index in range(1, _WINDOWS + 1):
                handle.seek(min(_HEAD_BYTES + index * step, size) - _WINDOW_BYTES)
                windows.append(handle.read(_WINDOW_BYTES))
    return head, windows, size <= _HEAD_BYTES


def _bom(head: bytes) -> tuple[str, int]:
    for mark, name in _BOMS:
        if head.startswith(mark):
            return name, len(mark)
    return "utf-8", 0


def _utf16_without_bom(head: bytes) -> str | None:
    """``utf-16-le`` / ``utf-16-be`` for text of mostly ASCII characters written in two bytes
    each without a BOM (every other byte NUL), else None."""
    sample = head[:4096]
    if len(sample) < 8:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) > 0.6 * len(odd) and even.count(0) < 0.1 * len(even):
        return "utf-16-le"
    if even.count(0) > 0.6 * len(even) and odd.count(0) < 0.1 * len(odd):
        return "utf-16-be"
    return None


def _utf8_with_damage(samples: list[bytes]) -> bool:
    """Whether bytes that are not all UTF-8 are still UTF-8 text with a few damaged cells:
    at least as many characters beyond ASCII decode as UTF-8 as there are bad bytes (text in
    a code page seldom forms a UTF-8 sequence: an capital letter with an accent followed by
    a punctuation byte), so the good cells are not garbled by reading them in a code page."""
    good = bad = 0
    for sample in samples:
        text = sample.decode("utf-8", "replace")
        bad += text.count("\ufffd")
        good += sum(1 for char in text if char > "\x7f" and char != "\ufffd")
    return good >= bad > 0


def _is_utf8(sample: bytes, *, first: bool, last: bool) -> bool:
    """Whether ``sample`` is UTF-8, allowing a character cut at either edge of a window."""
    if not first:  # a window may start inside a character: skip its continuation bytes
        start = 0
        while start < min(3, len(sample)) and 0x80 <= sample[start] < 0xC0:
            start += 1
        sample = sample[start:]
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        decoder.decode(sample, final=last)
    except UnicodeDecodeError:
        return False
    return True


def detect_code_page(samples: list[bytes]) -> str:
    """The code page of bytes that are not UTF-8 (see the module's rules)."""
    lines = [line for sample in samples for line in sample.splitlines() if not line.isascii()]
    sample = b"\n".join(lines)[:_DETECT_BYTES]
    try:
        from charset_normalizer import from_bytes
    except ModuleNotFoundError:  # a broken install: the commonest page, said on stderr
        matches = []
    else:
        matches = list(from_bytes(sample, cp_isolation=list(CODE_PAGES)))
    if matches:
        least = min(match.chaos for match in matches)
        calm = [match for match in matches if match.chaos <= least + 0.005]
        most = max(match.coherence for match in calm)
        best = [match for match in calm if match.coherence >= most - 0.01]
        equivalent = {name for match in best for name in [match.encoding,
                                                          *match.could_be_from_charset]}
        for name in CODE_PAGES:
            if name in equivalent and _decodes(sample, name):
                return name
    for name in ("cp1252", "latin_1"):  # latin_1 decodes every byte
        if _decodes(sample, name):
            return name
    return "latin_1"


def _decodes(sample: bytes, encoding: str) -> bool:
    try:
        sample.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def _decode_head(head: bytes, encoding: str, bom_size: int, whole: bool) -> str:
    """The head as text, cut after its last line break unless it is the whole file."""
    text = codecs.decode(head[bom_size:], encoding, "replace") if head else ""
    if bom_size == 0 and text.startswith("\ufeff"):
        text = text[1:]
    if not whole:
        cut = max(text.rfind("\n"), text.rfind("\r"))
        if cut > 0:
            text = text[: cut + 1]
    return text


def _line_ending(text: str) -> str:
    for index, char in enumerate(text):
        if char == "\n":
            return "\n"
        if char == "\r":
            return "\r\n" if text[index + 1 : index + 2] == "\n" else "\r"
    return os.linesep if os.linesep in _ENDINGS else "\n"


def _records(text: str, delimiter: str) -> list[tuple[int, int]]:
    """(fields, fields up to the last non-empty one) of the first records of ``text`` split on
    ``delimiter`` (blank lines out): ``1;x;;`` is (4, 2)."""
    if len(text) > _SNIFF_CHARS:  # whole lines only
        head = text[:_SNIFF_CHARS]
        cut = max(head.rfind("\n"), head.rfind("\r"))
        text = head[: cut + 1] if cut > 0 else head
    lines = text.splitlines(keepends=True)
    rows = csv.reader(lines, delimiter=delimiter)
    counts = []
    try:
        start = 0
        for row in itertools.islice(rows, _SNIFF_RECORDS * 2):
            if rows.line_num == len(lines) and rows.line_num - start > 1:
                # A quote left open ran to the end of the sample: read its lines one by one,
                # quotes as they stand (the reader keeps such a row apart, flagged).
                for line in lines[start:]:
                    counts += _record_counts(next(csv.reader(
                        [line.rstrip("\r\n")], delimiter=delimiter, quoting=csv.QUOTE_NONE)))
                break
            start = rows.line_num
            counts += _record_counts(row)
            if len(counts) > _SNIFF_RECORDS:
                break
    except csv.Error:
        pass
    return counts


def _record_counts(row: list[str]) -> list[tuple[int, int]]:
    """``[(fields, fields up to the last non-empty one)]`` of a row; ``[]`` for a blank line."""
    if not row:
        return []
    filled = len(row)
    while filled > 1 and not row[filled - 1].strip():
        filled -= 1
    return [(len(row), filled)]


def _delimiters(text: str) -> tuple[str, str]:
    """(header separator, rows' separator) by the module's rules.

    A row fits a header of ``width`` names when it has that many fields, or more whose extra
    ones are empty (blank trailing columns of a spreadsheet export: ``1;x;y;;`` under
    ``id;doi;note``, as the reader takes it). A header splits on a separator only when it
    gives two names or more before its own blank trailing ones: ``id,doi,note;;;;`` (the
    names typed into one cell) is a ``,``-separated header over ``;``-separated rows.
    """
    counts = {mark: _records(text, mark) for mark in DELIMITERS}
    header = {mark: found[0] if found else (1, 1) for mark, found in counts.items()}
    body = {mark: found[1:] for mark, found in counts.items()}

    def share(rows: list[tuple[int, int]], width: int) -> float:
        fits = sum(fields == width or filled <= width < fields for fields, filled in rows)
        return fits / len(rows) if rows else 1.0

    scored = [(share(body[mark], header[mark][0]), header[mark][0], -index, mark)
              for index, mark in enumerate(DELIMITERS) if header[mark][1] >= 2]
    best = max(scored, default=None)
    if best is not None and best[0] >= 0.9:
        return best[3], best[3]
    mixed = [(share(body[rows], header[head][0]), -index, head, rows)
             for index, (head, rows) in enumerate(itertools.permutations(DELIMITERS, 2))
             if header[head][1] >= 2 and body[rows]]
    top = max(mixed, default=None)
    if top is not None and top[0] >= 0.9 and (best is None or top[0] > best[0]):
        return top[2], top[3]
    if best is not None and best[0] > 0:
        return best[3], best[3]
    return ",", ","


def open_text(path: Path, dialect: CsvDialect, compression: str | None) -> IO[str]:
    """The file as text for Python's csv module (BOM dropped, bad UTF-8 kept as escapes)."""
    errors = "surrogateescape" if dialect.lenient_utf8 else "strict"
    if compression == "gzip":  # read through open_gzip, which refuses a decompression bomb
        return io.TextIOWrapper(open_gzip(path), encoding=dialect.python_encoding,
                                errors=errors, newline="")
    return path.open("r", encoding=dialect.python_encoding, errors=errors, newline="")


def compression_of(path: Path) -> str | None:
    """``"gzip"`` for a gzip file, None for plain text; refuses what cannot be CSV."""
    with path.open("rb") as handle:
        head = handle.read(8)
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head.startswith(b"PK\x03\x04"):
        workbook = _workbook_kind(path)
        if workbook is not None:
            raise TableInputError(f"{path}: is {workbook}, not CSV: {_SAVE_AS_CSV}")
    for magic, what in _NOT_CSV:
        if head.startswith(magic):
            raise TableInputError(f"{path}: {what}")
    return None


def _workbook_kind(path: Path) -> str | None:
    """What kind of spreadsheet workbook the zip archive ``path`` is, or None."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return None
    for entry, kind in _WORKBOOKS:
        if entry in names:
            return kind
    return None


def csv_error(path: Path, dialect: CsvDialect) -> TableInputError:
    """The refusal of a line no CSV reading can take, naming the delimiter it was read on."""
    return TableInputError(
        f"{path}: a line cannot be read as CSV (is the delimiter "
        f"{display_delimiter(dialect.delimiter)} right? pass --delimiter)"
    )


def _header(
    path: Path, dialect: CsvDialect, compression: str | None
) -> tuple[list[str], int, bool]:
    """The column names, the physical lines they take, and whether any row follows them."""
    csv.field_size_limit(2**31 - 1)  # one 5 MB cell is data, not an attack on memory
    with open_text(path, dialect, compression) as handle:
        lines = Lines(handle)
        try:
            header = csv.reader(lines, delimiter=dialect.header_delimiter)
            names = next(header, None)
            blank = 0
            while names == []:  # blank lines above the header (some exports start so)
                blank = len(lines.taken)
                names = next(header, None)
            if names is None:
                raise TableInputError(
                    f"{path}: empty file (no header row); a CSV needs a header"
                )
            header_lines = len(lines.taken)
            own = lines.taken[blank:]  # the header record's own lines
            if len(own) > 1 and unclosed(own, dialect.header_delimiter):
                # A quote left open in the header would swallow the rows: its first line is
                # the header, its quotes taken as they stand.
                names = next(csv.reader([own[0].rstrip("\r\n")],
                                        delimiter=dialect.header_delimiter,
                                        quoting=csv.QUOTE_NONE))
                header_lines = blank + 1
                lines.taken = own[1:]
                for row in csv.reader(lines.taken, delimiter=dialect.delimiter):
                    if row or len(names) == 1:
                        return [as_text(name) for name in names], header_lines, True
            names = _without_body_separators(names, dialect)
            lines.new_record()
            try:
                for row in csv.reader(lines, delimiter=dialect.delimiter):
                    if row or len(names) == 1:
                        return [as_text(name) for name in names], header_lines, True
            except Overlong:  # a row too long to read whole: a row still (the reader cuts it)
                return [as_text(name) for name in names], header_lines, True
        except csv.Error:
            raise csv_error(path, dialect) from None
        except Overlong:
            raise TableInputError(
                f"{path}: the header is longer than {MAX_LINE_CHARS:,} characters, so it is not "
                "read; is it a CSV file? A CSV starts with a line naming its columns"
            ) from None
        return [as_text(name) for name in names], header_lines, False


def _without_body_separators(names: list[str], dialect: CsvDialect) -> list[str]:
    """A header on another separator than its rows keeps the rows' separators of its blank
    trailing cells on its last name (``id,doi,note;;;;``): they are not part of it."""
    if dialect.header_delimiter == dialect.delimiter or not names:
        return names
    return [*names[:-1], names[-1].rstrip(dialect.delimiter + " ")]


def in_code_page(dialect: CsvDialect, cells: Iterable[bytes]) -> CsvDialect:
    """``dialect`` in the code page that ``cells`` (not UTF-8) are written in."""
    found = detect_code_page([b"\n".join(cells)])
    return replace(dialect, encoding=found, utf8_seen=False)
