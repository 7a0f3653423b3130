"""The records of one member: found by their own DOI without parsing the rest, bounded.

A member's content (decompressed by :mod:`.files`) is one of:

* **JSON lines**: one record a line: a Crossref ``/works`` record, a DataCite JSON:API record
  (``{"id", "type": "dois", "attributes": {...}}``) or DataCite's attributes alone
  (``{"doi": ...}``), each recognised per line;
* a **document**: Crossref's ``{"items": [...]}`` (or a saved API page, ``{"message":
  {"items": [...]}}``), a JSON array of records, or one record pretty-printed.

Each record is read twice at most: first for its own DOI only (msgspec skips every other
field without building it: a record's references, funders and update links hold DOIs too,
but only the top-level one is the record's own), then, for a record whose comparison key is
wanted, whole, through the agency's own mapping (:func:`~airflow_doi.metadata.crossref.
csl_of_item`, :func:`~airflow_doi.metadata.datacite.csl_of_record`), the one the batch APIs'
answers take, so a key gets the same columns from a file as from the API.

Nothing a file holds stops the member: a corrupt line, a record without a DOI, one over
``max_record_bytes``, one nested too deep, a line that never ends are each counted under a
reason and skipped; the member's own problems (cut short, a gzip bomb) end it with what was
read before kept (a document's whole records before the cut too). A member taken for a
document by its first line that is JSON lines after all (that line corrupt: ``[1, 2``) is read
as JSON lines, that line alone skipped.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Final

import msgspec

from airflow_doi.metadata.crossref import csl_of_item
from airflow_doi.metadata.crossref import registry_type_of as crossref_registry_type
from airflow_doi.metadata.csl import CslError, read_document
from airflow_doi.metadata.datacite import csl_of_record
from airflow_doi.metadata.datacite import registry_type_of as datacite_registry_type
from airflow_doi.metadata.result import MetadataResult, record_result
from airflow_doi.metadata.snapshot.files import CHUNK, Limits, MemberProblem
from airflow_doi.syntax import InvalidDoiError, comparison_key

__all__ = [
    "AGENCY_NAMES",
    "CROSSREF",
    "DATACITE",
    "REASONS",
    "SNAPSHOT_SOURCES",
    "MemberScan",
    "RecordReader",
    "RowSettings",
    "key_of",
]

#: The agencies whose files are read, and the ``metadata_source`` of their records.
CROSSREF: Final = "crossref"
DATACITE: Final = "datacite"
SNAPSHOT_SOURCES: Final[dict[str, str]] = {
    CROSSREF: "crossref_snapshot", DATACITE: "datacite_snapshot",
}
#: What doi.org's Which RA? calls each (the ``agency`` column).
AGENCY_NAMES: Final[dict[str, str]] = {CROSSREF: "Crossref", DATACITE: "DataCite"}


class _Stamp(msgspec.Struct):
    date_time: Any = msgspec.field(default=None, name="date-time")


class _Attributes(msgspec.Struct):
    doi: Any = None
    updated: Any = None


class _Head(msgspec.Struct):
    """The fields of a record that say whose it is and when it changed; the rest is skipped."""

    DOI: Any = None
    doi: Any = None
    id: Any = None
    type: Any = None
    attributes: Any = None
    indexed: Any = None
    updated: Any = None


class _HeadFast(msgspec.Struct):
    """:class:`_Head` with the nested objects typed, so their other fields are skipped too."""

    DOI: Any = None
    doi: Any = None
    id: Any = None
    type: Any = None
    attributes: _Attributes | None = None
    indexed: _Stamp | None = None
    updated: Any = None


class _Message(msgspec.Struct):
    items: list[msgspec.Raw] | None = None


class _Document(msgspec.Struct):
    items: list[msgspec.Raw] | None = None
    message: _Message | None = None


_HEAD = msgspec.json.Decoder(_HeadFast)
_HEAD_LOOSE = msgspec.json.Decoder(_Head)
_DOCUMENT = msgspec.json.Decoder(_Document)
_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])


def _finite(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


#: A whole record, floats as the batch APIs' reader takes them (out of range: None).
_RECORD = msgspec.json.Decoder(float_hook=_finite)
#: The first key of a document's top level (``{"items": ...}``, a saved API page).
_ENVELOPE: Final = frozenset({b"items", b"message", b"status", b"message-type",
                              b"message-version", b"facets"})
_FIRST = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*([\[{])(\s*)(?:"((?:[^"\\]|\\.){0,40})")?')


def key_of(doi: str) -> str | None:
    """The comparison key of a record's own DOI, or None when it is none. A registry writes
    its DOIs bare and in printable ASCII almost always: for those the key is the text
    upper-cased (``str.upper`` changes ASCII a-z only in ASCII text), at a fraction of
    :func:`~airflow_doi.syntax.comparison_key`'s cost; any other text takes that."""
    if doi.startswith("10.") and doi.isascii() and doi.isprintable() and doi.strip() == doi:
        return doi.upper()
    try:
        return comparison_key(doi)
    except (InvalidDoiError, TypeError):
        return None


def own_doi(head: Any) -> tuple[str | None, str, str | None]:
    """``(doi, agency, stamp)`` of a record's head: Crossref's ``DOI``, or DataCite's
    ``attributes.doi``, ``doi`` or (a JSON:API ``dois`` record) ``id``; the stamp is when the
    record last changed (Crossref's ``indexed`` date-time, DataCite's ``updated``)."""
    doi = head.DOI
    if doi is not None:
        stamp = getattr(head.indexed, "date_time", None) if head.indexed is not None else None
        if isinstance(head.indexed, dict):
            stamp = head.indexed.get("date-time")
        return (doi if isinstance(doi, str) else None), CROSSREF, _text(stamp)
    attributes = head.attributes
    if isinstance(attributes, dict):
        doi, stamp = attributes.get("doi"), attributes.get("updated")
    elif attributes is not None:
        doi, stamp = attributes.doi, attributes.updated
    else:
        doi, stamp = head.doi, head.updated
    if doi is None and head.type == "dois":
        doi = head.id
    return (doi if isinstance(doi, str) else None), DATACITE, _text(stamp)


#: Crossref's ``2025-01-02T06:40:00Z`` and DataCite's ``2024-03-04T12:00:00.000Z``.
#: (Days past the 28th take the long way: they may not be in their month.)
_PLAIN_STAMP: Final = re.compile(
    r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d"
    r"(?:\.\d{1,6})?Z")
#: A day after this process began: a record's stamp later than that is no stamp.
_HORIZON: Final = (datetime.now(timezone.utc) + timedelta(days=1)).strftime(
    "%Y-%m-%dT%H:%M:%SZ")


def _text(value: object) -> str | None:
    """A record's change time as UTC ISO text, or None: text that is no date (``zzzz``) or a
    time more than a day ahead is no stamp (it would win every newest-record choice, and
    start the update streams in the future)."""
    if not isinstance(value, str) or not 10 <= len(value) <= 40:
        return None
    if _PLAIN_STAMP.fullmatch(value):  # the agencies' own forms, at a fraction of the cost
        text = value[:19] + "Z"
        return text if text <= _HORIZON else None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    text = moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return text if text <= _HORIZON else None


@dataclass(frozen=True)
class RowSettings:
    """How a found record becomes a row: when the snapshot was taken (``fetched_at``), when
    its rows expire, the largest ``csl_json`` kept."""

    fetched_at: datetime
    expires_at: datetime
    max_csl_bytes: int = 65536


@dataclass
class MemberScan:
    """What one member held: its records, the wanted ones (mapped), problems by reason."""

    identity: str
    name: str
    #: ``json_lines``, ``document``, ``doi_list`` (DataCite's CSV list of a month's DOIs) or
    #: ``other`` (not records: text, a table).
    form: str = "json_lines"
    records: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    #: The wanted records, mapped; and when each last changed (newest wins across members).
    found: list[MetadataResult] = field(default_factory=list)
    stamps: list[str | None] = field(default_factory=list)
    #: Records (or the member) skipped, by reason; the member's own problem in words.
    problems: Counter[str] = field(default_factory=Counter)
    detail: str | None = None
    #: When the newest of its records last changed (ISO text): how recent the files are.
    newest: str | None = None
    #: The member could not be read for a reason of the moment (its worker died, the file went
    #: away): it is not recorded as finished, so the next run reads it again.
    retry: bool = False


class RecordReader:
    """Reads members for the ``wanted`` keys (None: every record) under ``limits``."""

    def __init__(self, wanted: Container[str] | None, limits: Limits,
                 settings: RowSettings) -> None:
        self.wanted = wanted
        self.limits = limits
        self.settings = settings

    # -- one member ---------------------------------------------------------------------------
    def scan(self, identity: str, name: str, chunks: Iterator[bytes],
             size: int) -> MemberScan:
        """Every record of a member's content (``chunks``), never raising for what it holds."""
        result = MemberScan(identity, name, bytes_in=size)
        counted = _Counted(chunks, result)
        try:
            form, first, stopped = _sniff(counted, self.limits)
            if stopped is not None and form not in ("json_lines", "document"):
                raise stopped
            result.form = form
            # A member that stops within its first bytes: the records they hold are read.
            rest = counted if stopped is None else _stopping(stopped)
            if form == "json_lines":
                self._lines(first, rest, result)
            elif form == "document":
                self._document(first, rest, result)
            elif form == "doi_list":  # DataCite's monthly lists: expected, quietly passed over
                result.problems["doi_list"] += 1
            else:
                result.problems["not_records"] += 1
                result.detail = ("not JSON records (text, a table...): skipped" if first
                                 else "empty once decompressed")
        except MemberProblem as problem:
            result.problems[problem.reason] += 1
            result.detail = problem.detail
        return result

    def _record(self, raw: bytes | msgspec.Raw, result: MemberScan) -> None:
        """One record: its DOI read, the rest skipped unless its key is wanted."""
        result.records += 1
        try:
            head = _HEAD.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            head = _loose_head(raw)
            if head is None:
                result.problems[_bad(raw)] += 1
                return
        doi, agency, stamp = own_doi(head)
        if stamp is not None and (result.newest is None or stamp > result.newest):
            result.newest = stamp
        key = key_of(doi) if doi is not None else None
        if key is None:
            result.problems["no_doi"] += 1
            return
        if self.wanted is not None and key not in self.wanted:
            return
        mapped = self.map(bytes(raw), doi or "", key, agency)
        if isinstance(mapped, str):
            result.problems[mapped] += 1
            return
        result.found.append(mapped)
        result.stamps.append(stamp)

    def map(self, raw: bytes, doi: str, key: str, agency: str) -> MetadataResult | str:
        """A wanted record as its row, or the reason it cannot be one."""
        try:
            record = _RECORD.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            try:  # what the batch APIs' reader accepts (NaN, lone surrogates), it accepts
                record = read_document(raw)
            except CslError as error:
                return _reason(error)
        if not isinstance(record, dict):
            return "not_a_record"
        if agency == DATACITE and not isinstance(record.get("attributes"), dict):
            record = {"id": doi, "type": "dois", "attributes": record}  # attributes alone
        try:
            if agency == CROSSREF:
                csl, kind = csl_of_item(record), crossref_registry_type(record)
            else:
                csl, kind = csl_of_record(record), datacite_registry_type(record)
        except Exception:  # a record of a shape no rule foresaw: its key, not the member
            return "unreadable_record"
        settings = self.settings
        return record_result(
            csl, doi.strip(), key, max_csl_bytes=settings.max_csl_bytes,
            fetched_at=settings.fetched_at, expires_at=settings.expires_at,
            agency=AGENCY_NAMES[agency], metadata_source=SNAPSHOT_SOURCES[agency],
            registry_type=kind)

    # -- the two forms ------------------------------------------------------------------------
    def _lines(self, first: bytes, chunks: Iterator[bytes], result: MemberScan) -> None:
        """JSON lines: each line a record; a line over ``max_record_bytes`` skipped as it
        streams past (never held whole)."""
        limit = self.limits.max_record_bytes
        pending: list[bytes] = []
        held = 0
        skipping = False
        record = self._record
        chunk = first
        while True:
            start = 0
            if skipping:
                start = chunk.find(b"\n") + 1
                if start == 0:
                    chunk = next(chunks, b"")
                    if not chunk:
                        return
                    continue
                skipping = False
            last = chunk.rfind(b"\n")
            if last < start:  # no line ends in this chunk
                piece = chunk[start:]
                if held + len(piece) > limit:
                    result.records += 1
                    result.problems["record_too_large"] += 1
                    pending, held, skipping = [], 0, True
                else:
                    pending.append(piece)
                    held += len(piece)
            else:
                first_end = chunk.find(b"\n", start)
                head = chunk[start:first_end]
                if pending:
                    head = b"".join([*pending, head])
                    pending, held = [], 0
                for line in (head, *chunk[first_end + 1:last].split(b"\n")) if (
                        first_end < last) else (head,):
                    if len(line) > limit:
                        result.records += 1
                        result.problems["record_too_large"] += 1
                    elif line.strip():
                        record(line, result)
                tail = chunk[last + 1:]
                if tail:
                    pending, held = [tail], len(tail)
            chunk = next(chunks, b"")
            if not chunk:
                break
        if pending and not skipping:
            line = b"".join(pending)
            if len(line) > limit:
                result.records += 1
                result.problems["record_too_large"] += 1
            elif line.strip():
                record(line, result)

    def _document(self, first: bytes, chunks: Iterator[bytes], result: MemberScan) -> None:
        """A whole JSON document, read at most ``max_document_bytes``: its records. A member
        that stops early (cut short, damaged gzip) keeps each whole record of its array before
        the stop; a member that is JSON lines after all, its first line corrupt (``[1, 2``,
        100,000 brackets), is read as JSON lines, that line alone skipped."""
        limit = self.limits.max_document_bytes
        document = bytearray(first)  # grown in place: never a second copy of the whole
        over: bytes | None = None  # the chunk that would take the document past ``limit``
        try:
            for chunk in chunks:
                if len(document) + len(chunk) > limit:
                    over = chunk
                    break
                document += chunk
        except MemberProblem:  # the member's own: what came before is used, then it counts
            if _lines_like(document, self.limits.max_record_bytes, complete=False):
                cut = document.rfind(b"\n") + 1  # a line cut short is no line
                self._lines_of(memoryview(document)[:cut], iter(()), result)
            else:
                self._partial(document, result)
            raise
        if over is not None:
            if _lines_like(document, self.limits.max_record_bytes, complete=False):
                self._lines_of(document, itertools.chain((over,), chunks), result)
                return
            raise MemberProblem("document_too_large", f"a JSON document over {limit:,} "
                                "bytes (max_document_bytes): skipped")
        start = _skip_space(document, 0, bom=True)
        stripped = memoryview(document)[start:]
        try:
            if bytes(stripped[:1]) == b"[":
                items: list[Any] | None = _ARRAY.decode(stripped)
            else:
                parsed = _DOCUMENT.decode(stripped)
                items = parsed.items if parsed.items is not None else (
                    parsed.message.items if parsed.message is not None else None)
                if items is None:  # one record, pretty-printed
                    items = [stripped]
        except RecursionError:
            if _lines_like(document, self.limits.max_record_bytes, complete=True):
                self._lines_of(document, iter(()), result)
                return
            raise MemberProblem("too_deep", "the JSON document is nested too deep to "
                                "read: skipped") from None
        except msgspec.DecodeError as error:
            if _lines_like(document, self.limits.max_record_bytes, complete=True):
                self._lines_of(document, iter(()), result)
                return
            raise MemberProblem("bad_json", f"not a complete JSON document ({error}): "
                                "skipped") from None
        except msgspec.ValidationError as error:
            raise MemberProblem("not_records", f"a JSON document without a list of records "
                                f"({error}): skipped") from None
        for raw in items or ():
            if len(raw) > self.limits.max_record_bytes:
                result.records += 1
                result.problems["record_too_large"] += 1
            else:
                self._record(raw, result)

    def _lines_of(self, held: bytearray | memoryview, rest: Iterator[bytes],
                  result: MemberScan) -> None:
        """JSON lines after all: the content ``held`` (fed in chunks), then the ``rest``."""
        result.form = "json_lines"
        pieces = (bytes(held[at:at + CHUNK]) for at in range(0, len(held), CHUNK))
        self._lines(next(pieces, b""), itertools.chain(pieces, rest), result)

    def _partial(self, document: bytearray, result: MemberScan) -> None:
        """The records of a document that stops early: each whole element of its array (a
        top-level array, ``items``, ``message.items``) before the stop, found by matching its
        brackets outside strings (no recursion: a deep one is counted by :meth:`_record`);
        nothing past the first byte that is not JSON."""
        size = len(document)
        position = _items_start(document, _skip_space(document, 0, bom=True), top=True)
        limit = self.limits.max_record_bytes
        while position is not None:
            position = _skip_space(document, position)
            if position >= size or document[position] == 0x5D:  # "]": the array's end
                return
            end = _value_end(document, position)
            if end is None:
                return
            after = _skip_space(document, end)
            if after < size and document[after] not in b",]":
                return
            if end - position > limit:
                result.records += 1
                result.problems["record_too_large"] += 1
            else:
                self._record(bytes(document[position:end]), result)
            position = after + 1 if after < size and document[after] == 0x2C else None


class _Counted:
    """The member's chunks, their bytes counted into ``result.bytes_out``."""

    def __init__(self, chunks: Iterator[bytes], result: MemberScan) -> None:
        self._chunks = chunks
        self._result = result

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        chunk = next(self._chunks)
        self._result.bytes_out += len(chunk)
        return chunk


def _sniff(chunks: Iterator[bytes],
           limits: Limits) -> tuple[str, bytes, MemberProblem | None]:
    """``(form, the content read so far, the member's problem if it stopped there)``:
    ``json_lines`` (a record on the first line), ``document`` (an array, an envelope key
    first, or a pretty-printed object) or ``other``."""
    head = b""
    stopped = None
    try:
        for chunk in chunks:
            head += chunk
            if len(head) >= 4096 or b"\n" in head:
                break
    except MemberProblem as problem:
        stopped = problem
    found = _FIRST.match(head)
    if not found:
        header = head.split(b"\n", 1)[0].lstrip(b"\xef\xbb\xbf").strip().lower()
        if header.split(b",")[0] == b"doi":  # DataCite's YYYY-MM.csv.gz: DOIs, no records
            return "doi_list", head, stopped
        return "other", head, stopped
    bracket, space, first_key = found.groups()
    if bracket == b"[" or (first_key is not None and first_key in _ENVELOPE):
        return "document", head, stopped
    if b"\n" in space:  # "{" alone on its line: pretty-printed, never a JSON line
        return "document", head, stopped
    return "json_lines", head, stopped


def _stopping(problem: MemberProblem) -> Iterator[bytes]:
    """No more chunks: the member stopped (``problem``)."""
    raise problem
    yield b""  # pragma: no cover  (a generator)


#: A JSON string whole, else a bracket, else a quote that opens a string cut short.
#: (Unrolled, so linear without possessive quantifiers, which Python 3.10 lacks.)
_TOKEN: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|"', re.DOTALL)
_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
#: A number, ``true``, ``false`` or ``null`` (or bytes that are none: :meth:`_record` says).
_SCALAR: Final = re.compile(rb'[^\s,:\[\]{}"]+')
_SPACE: Final = re.compile(rb"[ \t\r\n]*")
_BOM_SPACE: Final = re.compile(rb"[\xef\xbb\xbf \t\r\n]*")


def _skip_space(data: bytearray, position: int, *, bom: bool = False) -> int:
    found = (_BOM_SPACE if bom else _SPACE).match(data, position)
    return found.end() if found else position


def _value_end(data: bytearray, position: int) -> int | None:
    """Where the JSON value at ``position`` ends (its brackets matched outside strings), or
    None when it does not end in ``data`` (cut) or begins as no value. Not a parser: the
    value's own bytes are judged when it is read."""
    if position >= len(data):
        return None
    head = data[position]
    if head == 0x22:  # '"'
        found = _STRING.match(data, position)
        return found.end() if found else None
    if head in b"[{":
        depth = 0
        for token in _TOKEN.finditer(data, position):
            byte = data[token.start()]
            if byte == 0x22:
                if token.end() - token.start() == 1:  # a string that never ends: the cut
                    return None
            elif byte in b"[{":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return token.end()
        return None
    found = _SCALAR.match(data, position)
    # A number at the very end may be cut (``12`` of ``123``): only one followed is whole.
    return found.end() if found and found.end() < len(data) else None


def _items_start(data: bytearray, position: int, *, top: bool) -> int | None:
    """Where the records of a document begin: inside its array when it is one, else inside
    its ``items`` array, or (``top``) its ``message``'s; None when the part read holds none."""
    size = len(data)
    if position >= size:
        return None
    if data[position] == 0x5B:  # "["
        return position + 1 if top else None
    if data[position] != 0x7B:  # "{"
        return None
    position += 1
    while True:
        key = _STRING.match(data, _skip_space(data, position))
        if key is None:
            return None
        position = _skip_space(data, key.end())
        if position >= size or data[position] != 0x3A:  # ":"
            return None
        position = _skip_space(data, position + 1)
        if position < size:
            name = bytes(data[key.start() + 1:key.end() - 1])
            if name == b"items" and data[position] == 0x5B:
                return position + 1
            if top and name == b"message" and data[position] == 0x7B:
                return _items_start(data, position, top=False)
        end = _value_end(data, position)
        if end is None:
            return None
        position = _skip_space(data, end)
        if position >= size or data[position] != 0x2C:  # ","
            return None
        position += 1


class _Anything(msgspec.Struct):
    """A JSON object, every field skipped."""


_OBJECT = msgspec.json.Decoder(_Anything)


def _lines_like(content: bytearray, limit: int, *, complete: bool) -> bool:
    """Whether a member taken for a document is JSON lines after all, its first line corrupt
    (a cut ``[1, 2``, 100,000 brackets): most of the lines after the first (up to 100; the
    last too when the content is ``complete``) are JSON objects. A document spanning lines
    never is: its lines are parts of one value (``{``, ``"DOI": "10.1/x",``, ``},``)."""
    size = len(content)
    position = content.find(b"\n", _skip_space(content, 0, bom=True))
    checked = objects = 0
    while position >= 0 and checked < 100:
        start = position + 1
        position = content.find(b"\n", start)
        end = position if position >= 0 else (size if complete else start)
        if end - start > limit:
            checked += 1
            continue
        line = bytes(content[start:end])
        if not line.strip():
            continue
        checked += 1
        try:
            _OBJECT.decode(line)
        except (msgspec.DecodeError, RecursionError):
            continue
        objects += 1
    return objects * 2 > checked


def _loose_head(raw: bytes | msgspec.Raw) -> Any:
    """The head of a record the fast decoder refused (an ``attributes`` or ``indexed`` of
    another shape, a number where text was expected, NaN or a lone surrogate the stricter
    decoder rejects): read again with every field untyped, else through the batch APIs'
    reader; None when it is not a JSON object at all."""
    try:
        return _HEAD_LOOSE.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        pass
    try:
        document = read_document(bytes(raw))
    except CslError:
        return None
    return _Head(**{name: document.get(name) for name in _Head.__struct_fields__})


def _bad(raw: bytes | msgspec.Raw) -> str:
    """The reason a record that is no JSON object is skipped."""
    try:
        read_document(bytes(raw))
    except CslError as error:
        return _reason(error)
    return "not_a_record"


def _reason(error: CslError) -> str:
    """The reason (:data:`REASONS`) for what :func:`~airflow_doi.metadata.csl.read_document`
    refused."""
    if "deep" in error.reason:
        return "too_deep"
    if "UTF-8" in error.reason:
        return "not_utf8"
    if "is a JSON" in error.reason:  # a list, a number: JSON, but no record
        return "not_a_record"
    return "bad_json"


#: Members passed over that are meant to be there (no damage): DataCite's monthly lists.
EXPECTED: Final = frozenset({"doi_list"})
#: The reasons a record or a member can be skipped for, and what each means (the summary).
REASONS: Final[dict[str, str]] = {
    "bad_json": "not complete JSON: a corrupt or cut line",
    "not_utf8": "bytes that are not UTF-8",
    "too_deep": "nested too deep to read",
    "no_doi": "a record without a DOI",
    "not_a_record": "JSON that is not a record: a number, a list...",
    "unreadable_record": "a record of a shape no reader foresaw",
    "record_too_large": "a record or a line over max_record_bytes",
    "document_too_large": "a JSON document over max_document_bytes",
    "not_records": "a member of another kind: text, a table...",
    "doi_list": "a list of DOIs without records: DataCite's monthly CSV files",
    "truncated_gzip": "gzip data that ends early: a file cut short",
    "damaged_gzip": "damaged gzip data",
    "inflation_limit": "a gzip bomb, inflating over max_ratio times",
    "member_too_large": "a member over max_member_bytes",
    "worker_died": "the worker reading it died (killed, out of memory): read again next run",
    "unreadable": "the file could not be read: read again next run",
    "reader_failed": "the reader failed: read again next run",
    "damaged_tar": "a damaged tar: the members before the damage are read",
    "trailing_data": "bytes after a tar's end: every member was read",
    "not_a_file": "a link or a special file, not followed",
    "not_a_data_file": "neither a tar, a gzip file nor JSON",
    "empty": "an empty file",
    "truncated_tar": "a tar cut short: the members before the cut are read",
}
