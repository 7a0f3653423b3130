"""ANSI/NISO Z39.84-2005 syntax: parsing, validation, normalization and the comparison key.

This module is the one place where the rules live. Everything else in the project (the
vectorized pandas path, the SQL generator, the resolver, the Airflow operators) either calls
these functions or builds its own code from the constants below, so that every face of the
project gives the same answer for the same cell. It imports nothing outside the standard
library on purpose: it must be importable anywhere, including inside a warehouse UDF.

Case: Z39.84 section 4 says ASCII ``a``-``z`` compare equal to ``A``-``Z`` and nothing else
folds. ``str.upper()`` would turn ``ß`` into ``SS`` and ``ﬁ`` into ``FI``, so it is never used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from numbers import Number
from typing import Final, Literal, NamedTuple, get_args

__all__ = [
    "REASONS",
    "RULES_VERSION",
    "Decode",
    "Doi",
    "InvalidDoiError",
    "Validation",
    "ascii_upper",
    "cell_text",
    "comparison_key",
    "is_missing",
    "normalize",
    "parse",
    "short_doi",
    "validate",
]

Decode = Literal["auto", "always", "never"]
#: Why a value is not a DOI, in the order the checks run.
Reason = Literal[
    "empty",
    "bad_encoding",
    "bad_character",
    "short_doi",
    "bad_directory",
    "bad_registrant",
    "missing_suffix",
    "reserved_suffix",
]

#: Reason codes in the order they are checked; the first failure is the one reported.
REASONS: Final[tuple[str, ...]] = get_args(Reason)

#: Which reading of the rules this module is. It changes whenever some input gets another answer
#: (DOI, key, valid flag or reason) on any face, so that what was computed under other rules is
#: computed again: the fingerprints the normalize operator stores beside a table name it, and
#: a run finds the rows written under another version stale. ``tests/test_rules_version.py``
#: pins the answers this version stands for and fails, saying to change it, when they change.
RULES_VERSION: Final[str] = "2"

#: Stripped from both ends before anything else: the Unicode White_Space property, plus the
#: zero-width space and the byte-order mark that copy-paste leaves behind. Spelled out (rather
#: than ``str.strip()``) so the SQL generator can emit exactly the same set.
WHITESPACE: Final[str] = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
TRIM_CHARS: Final[str] = WHITESPACE + "\u200b\ufeff"

#: Hosts whose URLs carry a DOI as their path (with an explicit http/https scheme).
URL_HOSTS: Final[tuple[str, ...]] = ("doi.org", "dx.doi.org", "www.doi.org", "hdl.handle.net")
#: Hosts also recognised without a scheme (``doi.org/10.1000/1``).
SCHEMELESS_HOSTS: Final[tuple[str, ...]] = ("doi.org", "dx.doi.org")
DOI_SCHEME: Final[str] = "doi:"
URN_PREFIX: Final[str] = "urn:doi:"
INFO_PREFIX: Final[str] = "info:doi/"
DIRECTORY: Final[str] = "10."
#: A shortDOI (the IDF's shortDOI service): a handle under the prefix ``10`` alone, ``10/`` then a
#: code of ASCII letters and digits (``10/b6vnmd``), whose record aliases a DOI (an ``HS_ALIAS``
#: value). Not a DOI string per Z39.84 (the directory code is ``10.`` and a registrant), so never
#: valid; it is named by the reason ``short_doi`` rather than ``bad_directory``, and only the
#: proxy can say which DOI it stands for (``resolve`` and verified ``repair`` ask it). The code
#: holds a letter: digits alone (``10/182``) read as a DOI that lost its registrant, and stay
#: ``bad_directory`` (the shared conformance vectors say so).
SHORT_DOI_PREFIX: Final[str] = "10/"
#: One character of a shortDOI's code, and the letter it must hold at least once.
SHORT_DOI_CODE: Final[str] = "[0-9A-Za-z]"
SHORT_DOI_LETTER: Final[str] = "[A-Za-z]"
SHORT_DOI_PATTERN: Final[str] = (
    f"{re.escape(SHORT_DOI_PREFIX)}{SHORT_DOI_CODE}*{SHORT_DOI_LETTER}{SHORT_DOI_CODE}*"
)

#: Code points that are not "legal graphic characters of Unicode" (Z39.84 4.1), as inclusive
#: ranges: controls (Cc), format characters (Cf: soft hyphen, zero-width space and joiners,
#: bidi controls, BOM), line/paragraph separators (Zl, Zp), private use (Co) and noncharacters.
#: Pinned from the Unicode 14.0 tables rather than computed, so that Python and every SQL engine
#: judge the same code points whatever Unicode version they ship. Unassigned code points are
#: accepted: which ones are assigned changes with every Unicode release, and no two engines agree.
ILLEGAL_RANGES: Final[tuple[tuple[int, int], ...]] = (
    (0x0000, 0x001F), (0x007F, 0x009F), (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xE000, 0xF8FF),
    (0xFDD0, 0xFDEF), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0xFFFE, 0xFFFF), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0x1FFFE, 0x1FFFF), (0x2FFFE, 0x2FFFF), (0x3FFFE, 0x3FFFF), (0x4FFFE, 0x4FFFF),
    (0x5FFFE, 0x5FFFF), (0x6FFFE, 0x6FFFF), (0x7FFFE, 0x7FFFF), (0x8FFFE, 0x8FFFF),
    (0x9FFFE, 0x9FFFF), (0xAFFFE, 0xAFFFF), (0xBFFFE, 0xBFFFF), (0xCFFFE, 0xCFFFF),
    (0xDFFFE, 0xDFFFF), (0xE0001, 0xE0001), (0xE0020, 0xE007F), (0xEFFFE, 0x10FFFF),
)
#: Lone surrogates can occur in a Python str (never in UTF-8 text, so never in SQL).
SURROGATES: Final[tuple[int, int]] = (0xD800, 0xDFFF)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)


#: The same set as the body of a regex character class (literal code points).
ILLEGAL_CHARS_CLASS: Final[str] = _char_class((*ILLEGAL_RANGES, SURROGATES))

Form = Literal["bare", "doi", "url", "urn", "info"]


def regex_alternation(items: tuple[str, ...]) -> str:
    """``a|b|c`` of escaped literals, for building patterns from the constants here."""
    return "|".join(re.escape(i) for i in items)


_URL_RE = re.compile(
    rf"(?:https?://(?:{regex_alternation(URL_HOSTS)})|(?:{regex_alternation(SCHEMELESS_HOSTS)}))/",
    re.ASCII | re.IGNORECASE,
)
_DOI_SCHEME_RE = re.compile(rf"{DOI_SCHEME}[{re.escape(WHITESPACE)}]*", re.IGNORECASE | re.ASCII)
_ILLEGAL_RE = re.compile(f"[{ILLEGAL_CHARS_CLASS}]")  # no endpoint is a class metacharacter
#: The registrant code: ASCII digit groups joined by single dots (``1000``, ``1000.10``).
REGISTRANT_PATTERN: Final[str] = r"[0-9]+(?:\.[0-9]+)*"
_REGISTRANT_RE = re.compile(REGISTRANT_PATTERN, re.ASCII)
_PERCENT_RUN_RE = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_BAD_PERCENT_RE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SHORT_DOI_RE = re.compile(SHORT_DOI_PATTERN, re.ASCII)


class InvalidDoiError(ValueError):
    """Raised for a value that is not a DOI in any recognised form; ``.reason`` says why."""

    def __init__(self, reason: str, value: object = None) -> None:
        self.reason = reason
        self.value = value
        super().__init__(f"not a DOI ({reason}): {value!r}")


@dataclass(frozen=True, slots=True)
class Doi:
    """A parsed DOI: the normalized registry string and its parts.

    ``doi`` keeps the registrant's case (it is what is stored and shown); ``key`` is what two
    DOIs are compared on. A DOI with a reserved suffix (``10.1000/a/b``) still parses, but
    ``valid`` is false.
    """

    doi: str
    form: Form = "bare"

    @property
    def prefix(self) -> str:
        return self.doi.partition("/")[0]

    @property
    def registrant(self) -> str:
        return self.prefix[len(DIRECTORY):]

    @property
    def suffix(self) -> str:
        return self.doi.partition("/")[2]

    @property
    def key(self) -> str:
        return ascii_upper(self.doi)

    @property
    def valid(self) -> bool:
        return not _is_reserved(self.suffix)

    def __str__(self) -> str:
        return self.doi


class Validation(NamedTuple):
    """Outcome of :func:`validate`: never raises, so it suits row-by-row data quality work.

    A named tuple rather than a dataclass: it is built once per row in bulk paths.
    """

    valid: bool
    reason: str | None
    doi: str | None

    @property
    def key(self) -> str | None:
        return None if self.doi is None else ascii_upper(self.doi)


def ascii_upper(text: str) -> str:
    """Map ASCII ``a``-``z`` to ``A``-``Z`` and leave every other code point alone."""
    # bytes.upper() is ASCII-only by definition, and UTF-8 never uses bytes below 0x80 inside a
    # multi-byte sequence, so this is exact for any text and ~10x faster than str.translate.
    return bytes.upper(text.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")


def _ascii_lower(text: str) -> str:
    return bytes.lower(text.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")


def _is_reserved(suffix: str) -> bool:
    # Z39.84 4.3: a suffix may not start with "*/" where * is any single character.
    return len(suffix) >= 2 and suffix[1] == "/"


def _percent_decode(text: str) -> str:
    """Undo URL encoding; ``+`` stays a plus. Raises ``InvalidDoiError('bad_encoding')``."""
    if "%" not in text:
        return text
    if _BAD_PERCENT_RE.search(text):
        raise InvalidDoiError("bad_encoding", text)

    def run(match: re.Match[str]) -> str:
        try:
            return bytes.fromhex(match.group().replace("%", "")).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidDoiError("bad_encoding", text) from None

    # Each run of escapes must be valid UTF-8 on its own: a literal character between escapes
    # is a complete UTF-8 sequence, so it can never finish a sequence that a run started.
    return _PERCENT_RUN_RE.sub(run, text)


#: numpy's time scalars, whose NaT (like NaN) is unequal to itself; named, not imported.
_NAT_TYPES: Final[frozenset[str]] = frozenset({"datetime64", "timedelta64"})


def _is_nan(value: object) -> bool:
    """NaN or NaT of any numeric type (float, numpy, Decimal): missing, as pandas' ``isna``."""
    if isinstance(value, Number) or type(value).__name__ in _NAT_TYPES:
        try:
            return bool(value != value)
        except Exception:  # Decimal("sNaN") signals on comparison: read it as text instead
            return False
    return False


def is_missing(value: object) -> bool:
    """Whether a cell holds no value: ``None``, NaN or NaT of any numeric type, or pandas'
    ``NA``/``NaT`` (named, not imported), as pandas' ``isna`` reads a scalar."""
    return value is None or _is_nan(value) or type(value).__name__ in {"NAType", "NaTType"}


def cell_text(value: object, *, strict: bool = False) -> str | None:
    """The text of a cell, as every face reads it: ``None`` for a missing value.

    Missing is ``None``, NaN or NaT of any numeric type, and pandas' ``NA``/``NaT`` (named,
    not imported). Text is taken as it is and bytes as UTF-8: a byte that is not UTF-8 reads as
    U+FFFD, or, when ``strict``, raises :class:`InvalidDoiError` ``bad_encoding`` (what the
    parser reports). Anything else (a number in a spreadsheet column, a :class:`Doi`, a
    ``Decimal``) is read as ``str(value)``; a value whose ``str()`` fails is ``bad_encoding``.
    """
    if value is None or isinstance(value, str):
        return value
    if is_missing(value):
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8", "strict" if strict else "replace")
        except UnicodeDecodeError:
            raise InvalidDoiError("bad_encoding", value) from None
    try:
        return str(value)
    except Exception:  # a broken __str__: the value has no text to judge
        raise InvalidDoiError("bad_encoding", type(value).__name__) from None


def _coerce(value: object) -> str | None:
    """The text of a cell: ``None`` for a missing value.

    Text is taken as it is and bytes as UTF-8 (``bad_encoding`` when they are not). Anything
    else (a number in a spreadsheet column, a :class:`Doi`, a ``Decimal``) is read as
    ``str(value)``, as the pandas accessor, the SQLite functions and the batch resolver read
    it, so that one cell gets one answer on every face: ``0`` is ``bad_directory``. A value
    whose ``str()`` fails cannot be read as text, which is ``bad_encoding`` too.
    """
    return cell_text(value, strict=True)


def _unwrap(text: str) -> tuple[Form, str]:
    """Remove the presentation wrapper; return the form and the (still encoded) DOI string."""
    if text.startswith(DIRECTORY):  # the common case: a bare DOI
        return "bare", text
    match = _URL_RE.match(text)
    if match:
        path = text[match.end():]
        cut = min((i for i in (path.find("?"), path.find("#")) if i >= 0), default=len(path))
        path = path[:cut]
        if _ascii_lower(path[: len(URN_PREFIX)]) == URN_PREFIX:
            return "urn", _urn_colon(path[len(URN_PREFIX):])
        return "url", path
    head = _ascii_lower(text[: len(INFO_PREFIX)])
    if head.startswith(DOI_SCHEME):
        scheme = _DOI_SCHEME_RE.match(text)
        assert scheme is not None
        return "doi", text[scheme.end():]
    if head.startswith(URN_PREFIX):
        return "urn", _urn_colon(text[len(URN_PREFIX):])
    if head == INFO_PREFIX:
        return "info", text[len(INFO_PREFIX):]
    return "bare", text


def _urn_colon(rest: str) -> str:
    # In the URN form a colon stands for the first slash; a slash before any colon means the
    # writer used the slash already, and the string is taken as it is.
    colon, slash = rest.find(":"), rest.find("/")
    if colon >= 0 and (slash < 0 or colon < slash):
        return rest[:colon] + "/" + rest[colon + 1:]
    return rest


def _analyse(
    value: object, decode: Decode, *, short: bool = False
) -> tuple[str | None, str | None, Form]:
    """The single parser every public function calls: (normalized DOI, reason, form).

    With ``short``, a shortDOI's handle (``10/b6vnmd``) comes back in place of the DOI (the
    reason stays ``short_doi``): for :func:`short_doi`, never for the DOI functions.
    """
    if decode not in ("auto", "always", "never"):
        raise ValueError(f"decode must be 'auto', 'always' or 'never', not {decode!r}")
    try:
        text = _coerce(value)
    except InvalidDoiError as error:
        return None, error.reason, "bare"
    if text is None:
        return None, "empty", "bare"
    text = text.strip(TRIM_CHARS)
    if not text:
        return None, "empty", "bare"
    form, doi = _unwrap(text)
    if not doi:
        return None, "empty", form
    if decode == "always" or (decode == "auto" and form in ("url", "urn", "info")):
        try:
            doi = _percent_decode(doi)
        except InvalidDoiError:
            return None, "bad_encoding", form
    # Trim again: decoding (``%20``), a cut query (``/x ?q``) or a wrapper (``doi:\u200b``)
    # can leave an edge that step 1 would have trimmed from a bare DOI. A normalized DOI never
    # starts or ends with one, so normalize is idempotent and a key never ends in a space.
    if doi[0] in TRIM_CHARS or doi[-1] in TRIM_CHARS:
        doi = doi.strip(TRIM_CHARS)
        if not doi:
            return None, "empty", form
    # For ASCII text the only illegal characters are the controls, which isprintable() spots.
    if (not doi.isprintable()) if doi.isascii() else _ILLEGAL_RE.search(doi):
        return None, "bad_character", form
    if not doi.startswith(DIRECTORY):
        if doi.startswith(SHORT_DOI_PREFIX) and _SHORT_DOI_RE.fullmatch(doi):
            return (doi if short else None), "short_doi", form
        return None, "bad_directory", form
    registrant, slash, suffix = doi[len(DIRECTORY):].partition("/")
    if not _REGISTRANT_RE.fullmatch(registrant):
        return None, "bad_registrant", form
    if not slash or not suffix:
        return None, "missing_suffix", form
    if _is_reserved(suffix):
        return doi, "reserved_suffix", form
    return doi, None, form


def parse(value: object, *, decode: Decode = "auto") -> Doi:
    """Parse any presentation form into a :class:`Doi`; raises :class:`InvalidDoiError`."""
    doi, reason, form = _analyse(value, decode)
    if doi is None:
        raise InvalidDoiError(reason or "empty", value)
    return Doi(doi, form)


def normalize(value: object, *, decode: Decode = "auto") -> str:
    """The registry string ``10.<REG>/<DSS>``, case kept, wrappers and URL encoding removed.

    A reserved suffix still normalizes (it is syntactically a DOI string); use
    :func:`validate` to reject it.
    """
    doi, reason, _ = _analyse(value, decode)
    if doi is None:
        raise InvalidDoiError(reason or "empty", value)
    return doi


def comparison_key(value: object, *, decode: Decode = "auto") -> str:
    """The string two DOIs are joined on: normalized, then ASCII ``a``-``z`` upper-cased."""
    return ascii_upper(normalize(value, decode=decode))


def short_doi(value: object, *, decode: Decode = "auto") -> str | None:
    """The shortDOI handle a value holds (``10/b6vnmd``, from ``doi:10/b6vnmd`` or
    ``https://doi.org/10/b6vnmd``; case kept), or ``None``: the values :func:`validate`
    gives the reason ``short_doi``. Which DOI it aliases only the proxy knows."""
    handle, reason, _ = _analyse(value, decode, short=True)
    return handle if reason == "short_doi" else None


def validate(value: object, *, decode: Decode = "auto") -> Validation:
    """Check a value without raising: ``.valid``, the first failing ``.reason``, ``.doi``."""
    doi, reason, _ = _analyse(value, decode)
    return Validation(valid=reason is None, reason=reason, doi=doi)
