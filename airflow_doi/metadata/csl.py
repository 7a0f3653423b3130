"""CSL-JSON, as the registration agencies send it, read into typed catalogue columns.

Pure standard library and pure functions: :func:`read_document` turns a response body into a
CSL object or raises :class:`CslError` with a reason in our words; :func:`typed_fields` maps
the object to the columns of ``doi_metadata``; :func:`kept_json` is the raw object as stored.

Every value is server-supplied text. It is cleaned before it reaches a table, a CSV cell or
the HTML report: whitespace runs (line breaks included) become one space, control and
invisible format characters are dropped, and each field is cut to a bounded length. A field of
the wrong type (a number for a title, a text for the author list) is left empty and named in
the row's note, never a crash: the rest of the record is still used.
"""

from __future__ import annotations

import html
import json
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Final

from airflow_doi.resolver.text import UNSAFE_CATEGORIES, json_text
from airflow_doi.resolver.urls import is_safe_url
from airflow_doi.syntax import ascii_upper

__all__ = [
    "CROSSREF_TYPES",
    "CSL_MEDIA_TYPE",
    "CSL_TYPES",
    "FIELDS",
    "CslError",
    "clean_text",
    "csl_type",
    "describe_ignored",
    "kept_json",
    "plain_text",
    "read_document",
    "typed_fields",
]

#: The media type asked for: one shape for Crossref, DataCite, mEDRA, JaLC, KISTI...
CSL_MEDIA_TYPE: Final = "application/vnd.citationstyles.csl+json"
#: The typed columns, in table order.
FIELDS: Final[tuple[str, ...]] = (
    "title", "csl_type", "registry_type", "issued", "year", "container_title", "publisher",
    "issn", "isbn", "volume", "issue", "page", "author_count", "first_author", "language",
    "license_url", "updated_by", "update_to",
)
#: Crossref's own type names -> CSL 1.0.2 types (what its content negotiation sends for them).
CROSSREF_TYPES: Final[dict[str, str]] = {
    "journal-article": "article-journal",
    "book-chapter": "chapter",
    "book-part": "chapter",
    "book-section": "chapter",
    "proceedings-article": "paper-conference",
    "posted-content": "article",
    "book": "book",
    "monograph": "book",
    "edited-book": "book",
    "reference-book": "book",
    "book-set": "book",
    "book-series": "book",
    "book-track": "book",
    "dataset": "dataset",
    "database": "dataset",
    "report": "report",
    "report-series": "report",
    "report-component": "report",
    "dissertation": "thesis",
    "reference-entry": "entry",
    "peer-review": "review",
    "standard": "standard",
    "journal": "periodical",
    "journal-issue": "periodical",
    "journal-volume": "periodical",
    "proceedings": "book",
    "proceedings-series": "book",
    "component": "document",
    "grant": "document",
    "other": "document",
}
#: The types of CSL 1.0.2 (``csl_type`` holds one of these, whichever source answered).
CSL_TYPES: Final = frozenset({
    "article", "article-journal", "article-magazine", "article-newspaper", "bill", "book",
    "broadcast", "chapter", "classic", "collection", "dataset", "document", "entry",
    "entry-dictionary", "entry-encyclopedia", "event", "figure", "graphic", "hearing",
    "interview", "legal_case", "legislation", "manuscript", "map", "motion_picture",
    "musical_score", "pamphlet", "paper-conference", "patent", "performance", "periodical",
    "personal_communication", "post", "post-weblog", "regulation", "report", "review",
    "review-book", "software", "song", "speech", "standard", "thesis", "treaty", "webpage",
})


def csl_type(word: object) -> str | None:
    """The CSL type of a record's type word: a CSL type as it is, Crossref's own name mapped
    (most content negotiation answers from Crossref carry those: ``journal-article`` is
    ``article-journal``), any other word ``document`` (the word itself is kept as
    ``registry_type``)."""
    text = clean_text(word) if isinstance(word, str) else None
    if text is None:
        return None
    if text in CSL_TYPES:
        return text
    return CROSSREF_TYPES.get(text, "document")


#: Longest kept text per field (characters); anything longer is cut there.
_LIMITS: Final[dict[str, int]] = {
    "title": 1000, "container_title": 1000, "publisher": 300, "first_author": 300,
    "license_url": 2000, "updated_by": 1000, "update_to": 1000,
}
_DEFAULT_LIMIT: Final = 100
_YEAR: Final = re.compile(r"(?<!\d)(\d{4})(?!\d)")


class CslError(ValueError):
    """A body that is not a usable CSL-JSON object; ``reason`` says why, in our words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def clean_text(value: object, limit: int = _DEFAULT_LIMIT) -> str | None:
    """Text fit for a table cell, or None: whitespace collapsed, controls dropped, cut."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = " ".join(str(value).split())
    text = "".join(c for c in text if unicodedata.category(c) not in UNSAFE_CATEGORIES).strip()
    return text[:limit] or None


#: A markup tag as agencies leave them in titles (JATS face markup ``<i>``, ``<sub>``,
#: ``<scp>``, MathML's ``<mml:mi>``): a ``<`` followed by a name, never ``p < 0.05``.
_TAG: Final = re.compile(r"</?[A-Za-z][A-Za-z0-9:.-]*(?:\s[^<>]*)?/?>")


def plain_text(value: object, limit: int = _DEFAULT_LIMIT) -> str | None:
    """:func:`clean_text` of a title-like value with its markup taken off: entities read
    (``&amp;`` is ``&``), then tags dropped (``<i>Tidal</i>`` is ``Tidal``)."""
    if not isinstance(value, str):
        return clean_text(value, limit)
    return clean_text(_TAG.sub("", html.unescape(value)), limit)


def read_document(body: bytes) -> dict[str, Any]:
    """The CSL object of a response body, or :class:`CslError`.

    JSON must be UTF-8 (RFC 8259); nesting too deep for the parser, a list or a scalar at the
    top, or text that is not JSON each get their own reason.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise CslError("the metadata is not UTF-8 text, as JSON must be") from None
    try:
        # NaN, Infinity and 1e400 are not JSON values PostgreSQL or MariaDB accept: None.
        document = json.loads(text, parse_constant=lambda _: None, parse_float=_finite)
    except RecursionError:
        raise CslError("the metadata JSON is nested too deep to read") from None
    except ValueError:
        head = text.lstrip()[:1]
        if head == "<":
            raise CslError("the metadata host answered HTML, not CSL-JSON") from None
        raise CslError("the metadata is not complete JSON (cut short or malformed)") from None
    if not isinstance(document, dict):
        raise CslError(f"the metadata is a JSON {type(document).__name__}, not a CSL object")
    return document


def _finite(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _first_text(value: object, limit: int) -> str | None:
    """The first text of a value or of a list (empty and markup-only items skipped)."""
    items = value if isinstance(value, list) else [value]
    for item in items:
        text = plain_text(item, limit) if isinstance(item, str) else None
        if text:
            return text
    return None


def _date_parts(issued: object) -> tuple[str | None, int | None]:
    """``(issued, year)`` of a CSL date: ``YYYY[-MM[-DD]]`` from date-parts, else literal."""
    if not isinstance(issued, Mapping):
        return None, None
    parts = issued.get("date-parts")
    first = parts[0] if isinstance(parts, list) and parts else None
    if isinstance(first, list) and first:
        numbers: list[int] = []
        for index, part in enumerate(first[:3]):
            text = part.strip() if isinstance(part, str) else ""
            if text.isascii() and text.isdecimal() and len(text) <= 4:  # not "²", not 10**5000
                part = int(text)
            if isinstance(part, bool) or not isinstance(part, int):
                break
            low, high = ((1, 9999), (1, 12), (1, 31))[index]
            if not low <= part <= high:
                break
            numbers.append(part)
        if numbers:
            text = f"{numbers[0]:04d}" + "".join(f"-{n:02d}" for n in numbers[1:])
            return text, numbers[0]
    for name in ("literal", "raw"):
        literal = clean_text(issued.get(name))
        if literal:
            found = _YEAR.search(literal)
            return literal, int(found.group(1)) if found else None
    return None, None


#: An ISSN written without its hyphen (``12345679``), as some records carry it.
_BARE_ISSN: Final = re.compile(r"\d{7}[\dXx]")


def _issn(text: str) -> str:
    """An ISSN in its standard form, ``1234-5679`` (X upper case); other text as it is."""
    if _BARE_ISSN.fullmatch(text):
        text = f"{text[:4]}-{text[4:]}"
    return text[:8] + text[8:].upper() if len(text) == 9 and text[4] == "-" else text


def _joined(value: object, issn: bool = False) -> str | None:
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    kept: list[str] = []
    for item in items:
        text = clean_text(item) if isinstance(item, str) else None
        if text and issn:
            text = _issn(text)
        if text and text not in kept:
            kept.append(text)
    return ", ".join(kept)[:300] or None


def _author(author: object) -> str | None:
    if not isinstance(author, Mapping):
        return None
    raw_family = author.get("family")
    family = clean_text(raw_family, 300) if isinstance(raw_family, str) else None
    if family:
        given = author.get("given")
        given_text = clean_text(given, 300) if isinstance(given, str) else None
        return (f"{family}, {given_text}" if given_text else family)[:300]
    for name in ("literal", "name"):
        value = author.get(name)
        if isinstance(value, str) and clean_text(value, 300):
            return clean_text(value, 300)
    return None


def _license(value: object) -> str | None:
    if isinstance(value, str):
        url: object = value
    elif isinstance(value, list):
        licences = [item for item in value if isinstance(item, Mapping)]
        chosen = next((item for item in licences if item.get("content-version") == "vor"),
                      licences[0] if licences else None)
        url = chosen.get("URL") if chosen is not None else None
    else:
        return None
    if not isinstance(url, str) or len(url) > _LIMITS["license_url"]:
        return None
    url = url.strip()
    return url if is_safe_url(url) else None


def _updates(value: object, own: object = None) -> str | None:
    """``type:DOI`` items joined with ``; ``; an item pointing at the record itself (``own``,
    its DOI) is left out: a notice is not its own update."""
    if not isinstance(value, list):
        return None
    own_key = ascii_upper(own.strip()) if isinstance(own, str) else None
    items: list[str] = []
    for item in value:
        if not isinstance(item, Mapping):
            continue
        kind = clean_text(item.get("type")) if isinstance(item.get("type"), str) else None
        doi = clean_text(item.get("DOI"), 300) if isinstance(item.get("DOI"), str) else None
        if doi and own_key and ascii_upper(doi) == own_key:
            continue
        text = f"{kind or 'update'}:{doi}" if doi else kind
        if text and text not in items:
            items.append(text)
    return "; ".join(items)[: _LIMITS["updated_by"]] or None


#: CSL field -> the Python types its column accepts (others are wrong types, noted).
_EXPECTED: Final[dict[str, tuple[type, ...]]] = {
    "title": (str, list), "type": (str,), "issued": (dict,), "container-title": (str, list),
    "publisher": (str,), "ISSN": (str, list), "ISBN": (str, list), "volume": (str, int),
    "issue": (str, int), "page": (str, int), "author": (list,), "language": (str,),
    "license": (str, list), "updated-by": (list,), "update-to": (list,),
}


def typed_fields(document: Mapping[str, Any], registry_type: str | None = None
                 ) -> tuple[dict[str, Any], list[str]]:
    """``(columns, ignored)``: the typed columns of :data:`FIELDS` and the CSL fields that
    were present with a type no column can take (left empty). ``registry_type`` is the
    registry's own word for the type where the source says it (Crossref's type, DataCite's
    ``resourceTypeGeneral``), else the record's type word as sent."""
    ignored = sorted(
        name for name, types in _EXPECTED.items()
        if name in document and document[name] is not None
        and (isinstance(document[name], bool) or not isinstance(document[name], types))
    )
    get = {name: (None if name in ignored else document.get(name)) for name in _EXPECTED}
    issued, year = _date_parts(get["issued"])
    authors = get["author"]
    fields: dict[str, Any] = {
        "title": _first_text(get["title"], _LIMITS["title"]),
        "csl_type": csl_type(get["type"]),
        "registry_type": clean_text(registry_type) if registry_type else (
            clean_text(get["type"]) if isinstance(get["type"], str) else None),
        "issued": issued,
        "year": year,
        "container_title": _first_text(get["container-title"], _LIMITS["container_title"]),
        "publisher": plain_text(get["publisher"], _LIMITS["publisher"])
        if isinstance(get["publisher"], str) else None,
        "issn": _joined(get["ISSN"], issn=True),
        "isbn": _joined(get["ISBN"]),
        "volume": clean_text(get["volume"]),
        "issue": clean_text(get["issue"]),
        "page": clean_text(get["page"]),
        "author_count": len(authors) if isinstance(authors, list) else None,
        "first_author": _author(authors[0]) if isinstance(authors, list) and authors else None,
        "language": clean_text(get["language"]) if isinstance(get["language"], str) else None,
        "license_url": _license(get["license"]),
        "updated_by": _updates(get["updated-by"], document.get("DOI")),
        "update_to": _updates(get["update-to"], document.get("DOI")),
    }
    return fields, ignored


def kept_json(document: Mapping[str, Any], max_bytes: int) -> str | None:
    """The object as stored in ``csl_json``: compact, without its (bulky) ``reference`` list;
    None when it is still over ``max_bytes`` of UTF-8."""
    kept = {name: value for name, value in document.items() if name != "reference"}
    try:  # safe text: no control, format or separator character unescaped (resolver.text)
        text = json_text(_storable(kept), separators=(",", ":"), allow_nan=False)
    except (RecursionError, ValueError):
        return None
    return text if len(text.encode("utf-8")) <= max_bytes else None


def _storable(value: Any) -> Any:
    """``value`` with NUL characters and lone surrogates taken out of every string: JSON
    allows them as escapes, but UTF-8 and PostgreSQL's ``jsonb`` do not."""
    if isinstance(value, str):
        return "".join(c for c in value if c != "\x00" and not 0xD800 <= ord(c) <= 0xDFFF)
    if isinstance(value, list):
        return [_storable(item) for item in value]
    if isinstance(value, dict):
        return {_storable(str(k)): _storable(v) for k, v in value.items()}
    return value


def describe_ignored(ignored: Sequence[str]) -> str | None:
    """The row's note for fields of the wrong type, or None."""
    if not ignored:
        return None
    return "ignored CSL fields of an unexpected type: " + ", ".join(ignored)
