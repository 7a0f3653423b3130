"""Candidate repairs for damaged DOIs: trailing dots, glued URLs, en dashes, lost ``10.``...

Catalogue and citation data is full of DOIs that are *almost* right. Many of them are still
syntactically valid (``10.3748/wjg.v10.i5.707.``), so no syntax check can tell; only asking
the proxy whether the DOI exists can. This module is the pure half of the job: it proposes
candidates, each with the rule (or chain of rules) that produced it, cheapest first. The other
half, :func:`airflow_doi.repair.verify.repair`, asks the resolver which candidates exist.

Why a search rather than one clean-up regex: real damage comes in combinations
(``doi:doi:10.1000/x.``, a glued URL followed by a period), and each single fix is only a
guess. Every rule is one row of :data:`RULES` with a cost (lower is more likely); the search
applies rules to the text and to what they produce, cheapest chain first, and keeps every
result that is a valid DOI. It is bounded on every axis (:data:`MAX_CANDIDATES`,
:data:`MAX_STEPS`, :data:`MAX_STATES`, :data:`MAX_SCAN`), so a 1 MB cell costs no more than a
short one. Standard library only, like :mod:`airflow_doi.syntax`.
"""

from __future__ import annotations

import functools
import heapq
import html
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from airflow_doi.charclass import code_point_runs
from airflow_doi.extract import CLOSERS
from airflow_doi.syntax import TRIM_CHARS, ascii_upper, cell_text, validate

__all__ = [
    "MAX_CANDIDATES",
    "MAX_CUTS",
    "REPAIR_COLUMNS",
    "RULES",
    "Repair",
    "Rule",
    "damage_by",
    "likely_damage",
    "offered_offline",
    "offline_repair",
    "suggest_repairs",
]

#: Candidates returned per value at most (the cheapest ones).
MAX_CANDIDATES: Final[int] = 16
#: Rules chained at most to reach one candidate.
MAX_STEPS: Final[int] = 4
#: Intermediate strings the search expands per value at most.
MAX_STATES: Final[int] = 64
#: Characters of a cell looked at: no DOI is this long, so a longer cell is cut at its last
#: whitespace inside this window (what follows can only be appended text).
MAX_SCAN: Final[int] = 2048
#: Output columns of a repair, in order (the pandas accessor and the CLI append these).
REPAIR_COLUMNS: Final[tuple[str, ...]] = (
    "doi_suggestion",
    "doi_suggestion_rule",
    "doi_suggestion_verified",
)

Transform = Callable[[str], Iterable[str]]


@dataclass(frozen=True, slots=True)
class Rule:
    """One kind of damage and how to undo it.

    ``transform`` returns the repaired text(s) (nothing when the damage is absent). A rule
    with ``verify_only`` guesses too freely to be offered unless the resolver confirms the
    result exists (OCR swaps: ``10.1O16`` is surely ``10.1016``, ``j.aca.2OO6`` maybe not).
    ``hint`` is the rule's cheapest test, for a whole column at once: an RE2 pattern that
    matches every *valid* DOI the rule changes into another valid DOI (looser is fine, it only
    picks the cells worth the rule), ``None`` when the rule never changes a valid DOI (it
    works on a damaged prefix, or on characters a valid DOI cannot hold).
    """

    name: str
    cost: float
    transform: Transform
    doc: str
    verify_only: bool = False
    hint: str | None = None


@dataclass(frozen=True, slots=True)
class Repair:
    """One candidate: the normalized DOI and the rules applied, in order, to reach it."""

    doi: str
    rules: tuple[str, ...]
    cost: float
    verify_only: bool = False

    @property
    def rule(self) -> str:
        """The chain as one label, ``appended_url+trailing_punctuation``."""
        return "+".join(self.rules)


# -- building blocks of the table -----------------------------------------------------------

Replacement = str | Callable[[re.Match[str]], str]


def _sub(pattern: str, replacement: Replacement, flags: int = 0) -> Transform:
    """A transform replacing every match of ``pattern``."""
    compiled = re.compile(pattern, flags)

    def transform(text: str) -> Iterator[str]:
        repaired = compiled.sub(replacement, text)
        if repaired != text:
            yield repaired

    return transform


def _translate(table: dict[int, str]) -> Transform:
    """A transform mapping characters through ``table`` (:meth:`str.maketrans`)."""

    def transform(text: str) -> Iterator[str]:
        repaired = text.translate(table)
        if repaired != text:
            yield repaired

    return transform


def _after_head(pattern: re.Pattern[str]) -> Transform:
    """A transform keeping what follows a match of ``pattern`` at the start of the text."""

    def transform(text: str) -> Iterator[str]:
        match = pattern.match(text)
        if match is not None:
            yield text[match.end():]

    return transform


def _cut_in_suffix(pattern: re.Pattern[str]) -> Transform:
    """A transform keeping what comes before a match of ``pattern`` inside the suffix."""

    def transform(text: str) -> Iterator[str]:
        match = _in_suffix(pattern, text)
        if match is not None:
            yield text[: match.start()]

    return transform


def _prefix_damaged(transform: Transform) -> Transform:
    """``transform``, for a text that does not start with a well-formed DOI prefix (where a
    DOI already starts, a later ``10.x/`` belongs to its suffix)."""

    @functools.wraps(transform)
    def guarded(text: str) -> Iterable[str]:
        return () if _INTACT_PREFIX_RE.match(text) else transform(text)

    return guarded


#: Where a DOI begins inside a string: ``10.<registrant>/``, not glued to a letter or digit.
_DOI_START_RE: Final = re.compile(r"(?<![0-9A-Za-z])10\.[0-9]+(?:\.[0-9]+)*/")


_PREFIX: Final[str] = r"10\.[0-9]+(?:\.[0-9]+)*/"
#: A text that starts with a well-formed DOI prefix.
_INTACT_PREFIX_RE: Final = re.compile(_PREFIX)


def _doi_start(text: str) -> int:
    match = _DOI_START_RE.search(text)
    return match.start() if match else 0


def _in_suffix(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The first match of ``pattern`` at least two characters after the DOI's first slash
    (a suffix has one character at least), or None (also when there is no slash)."""
    slash = text.find("/", _doi_start(text))
    return None if slash < 0 else pattern.search(text, slash + 2)


# -- the rules that need more than one regex -------------------------------------------------

_TRAILING_ASCII: Final[str] = ".,;:!?'\"/\\*"


def _trailing_punctuation(text: str) -> Iterator[str]:
    # ASCII sentence punctuation, plus any non-ASCII punctuation or quote (。 ” »), as
    # find_dois trims; closing brackets are left to unbalanced_bracket.
    end = len(text)
    while end and (
        text[end - 1] in _TRAILING_ASCII
        or (not text[end - 1].isascii() and unicodedata.category(text[end - 1])[0] == "P")
    ):
        end -= 1
    if 0 < end < len(text):
        yield text[:end]


_OPENERS: Final[dict[str, str]] = {opener: closer for closer, opener in CLOSERS.items()}


def _unbalanced_bracket(text: str) -> Iterator[str]:
    # SICI DOIs legitimately hold (), <> and []: only a bracket without a partner goes.
    start, end = 0, len(text)
    while end > start and text[end - 1] in CLOSERS:
        closer = text[end - 1]
        if text.count(CLOSERS[closer], start, end) >= text.count(closer, start, end):
            break
        end -= 1
    while start < end and text[start] in _OPENERS:
        opener = text[start]
        if text.count(_OPENERS[opener], start, end) >= text.count(opener, start, end):
            break
        start += 1
    if (start, end) != (0, len(text)):
        yield text[start:end]


_GLUED_URL_RE: Final = re.compile(
    r"(?:https?:/{1,2}|www\.|(?:dx\.)?doi\.org/|doi:\s*(?=10\.))", re.IGNORECASE
)


def _appended_url(text: str) -> Iterator[str]:
    # ``10.1016/j.aca.2006.07.086.http://dx.doi.org/10.1016/...``: keep the DOI before the
    # URL, and also offer the URL itself (it often links the very same DOI, intact).
    match = _in_suffix(_GLUED_URL_RE, text)
    if match is not None:
        yield text[: match.start()]
        yield text[match.start():]


_SECOND_DOI_RE: Final = re.compile(
    r"(?<![\s,;|])[\s,;|]*(?<![0-9A-Za-z])10\.[1-9][0-9]{3,}(?:\.[0-9]+)*/")


_WHITESPACE_RE: Final = re.compile(r"\s+")


def _appended_text(text: str) -> Iterator[str]:
    # A DOI may contain a space, but a space followed by words is far more often a title,
    # a note or a second field pasted into the same cell.
    slash = text.find("/", _doi_start(text))
    if slash < 0:
        return
    match = _WHITESPACE_RE.search(text, slash + 1)
    if match is not None and match.start() > slash + 1:
        cut = text[: match.start()]
        bare = cut.rstrip(_TRAILING_ASCII)  # "10.1000/1, 2018": the comma went with the note
        if bare != cut and len(bare) > slash + 1:
            yield bare
        yield cut


def _inner_space(text: str) -> Iterator[str]:
    # A few breaks inside one token (copy-paste across a line wrap); many are prose.
    runs = _WHITESPACE_RE.findall(text)
    if 0 < len(runs) <= 3:
        yield _WHITESPACE_RE.sub("", text)


_ENTITY_BROKEN_RE: Final = re.compile(r"(?<!&)(lt|gt|amp|quot|apos);", re.IGNORECASE)
_BROKEN_ENTITIES: Final[dict[str, str]] = {
    "lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'",
}


def _html_entity(text: str) -> Iterator[str]:
    # ``&lt;`` from an XML export, and ``lt;`` once a cleaner has eaten the ampersand.
    if "&" in text:
        decoded = html.unescape(text)
        if decoded != text:
            yield decoded
            return
    repaired = _ENTITY_BROKEN_RE.sub(lambda m: _BROKEN_ENTITIES[m.group(1).lower()], text)
    if repaired != text:
        yield repaired


# SICI DOIs: (YYYY)VVV<PPPP:CODE>2.0.CO;2 (or with [ ]); a cleaner that strips markup
# takes the angle brackets with it.
_SICI_LOST_RE: Final = re.compile(
    r"(\([0-9]{4,6}\)[0-9]{3})([0-9]{4}:[0-9A-Za-z]+?)([0-9]\.[0-9]\.co;2)", re.IGNORECASE
)


def _sici_brackets(text: str) -> Iterator[str]:
    for left, right in (("<", ">"), ("[", "]")):
        repaired = _SICI_LOST_RE.sub(rf"\1{left}\2{right}\3", text)
        if repaired != text:
            yield repaired


_REGISTRANT_HEAD_RE: Final = re.compile(r"[1-9][0-9]{3,4}(?:\.[0-9]+)*/")


@_prefix_damaged
def _lost_directory(text: str) -> Iterator[str]:
    # ``1038/nature14129``, ``.1038/...``, ``0.1038/...``, ``101038/...``, ``10,1038/...``:
    # every reading of the damaged head that leaves a 4-5 digit registrant.
    for head in ("10", "1", "0", ""):
        for sep in (".", ",", ":", ";", ""):
            if (head, sep) == ("10", ".") or not text.startswith(head + sep):
                continue  # "10." is an intact directory
            rest = text[len(head) + len(sep):]
            if _REGISTRANT_HEAD_RE.match(rest):
                yield "10." + rest


_WRAPPER: Final[str] = (
    r"\s*(?:(?:https?:/{1,2})?(?:dx\.|www\.)?doi\.org/|doi\s*[:.]?\s*|urn:doi:|info:doi/)"
)
_DOUBLE_WRAPPED_RE: Final = re.compile(rf"(?:{_WRAPPER}){{2,}}", re.IGNORECASE)
_DOUBLED_PREFIX_RE: Final = re.compile(rf"({_PREFIX})\s*(?:doi:\s*)?(?={_PREFIX})", re.IGNORECASE)


_LEADING_RE: Final = re.compile(
    r"(?<![0-9A-Za-z.])(?:10\.[0-9]+(?:\.[0-9]+)*/|[1-9][0-9]{3,4}(?:\.[0-9]+)*/)"
)


@_prefix_damaged
def _leading_text(text: str) -> Iterator[str]:
    # ``DOI 10.1000/x``, ``[10.1000/x]``, a publisher's ``https://host/doi/full/10.1000/x``.
    match = _LEADING_RE.search(text, 1)
    if match is not None:
        yield text[match.start():]


def _percent_encoding(text: str) -> Iterator[str]:
    # A bare DOI is not URL-decoded by the standard, but ``10.1093%2Fjac%2Fdky096`` is plainly
    # a URL path pasted as a DOI.
    if "%" in text:
        try:
            decoded = unquote(text, errors="strict")
        except UnicodeDecodeError:
            return
        if decoded != text:
            yield decoded


_LOST_SLASH_RE: Final = re.compile(r"10\.[1-9][0-9]{3,4}(?:\\|[.:,](?=[A-Za-z(]))")


@_prefix_damaged
def _lost_slash(text: str) -> Iterator[str]:
    # ``10.1371.journal.pntd.0005917``: a dot (or backslash) where the slash should be.
    match = _LOST_SLASH_RE.match(text)
    if match is not None:
        yield text[: match.end() - 1] + "/" + text[match.end():]


_OCR_PREFIX: Final = str.maketrans({"O": "0", "o": "0", "l": "1", "I": "1", "i": "1", "|": "1"})
_OCR_SUFFIX_RE: Final = re.compile(r"(?<=[0-9])[OolI](?=[0-9])|(?<=[0-9][.\-])[Oo](?=[0-9])")
_OCR_DIGITS: Final[dict[str, str]] = {"O": "0", "o": "0", "l": "1", "I": "1"}
_OCR_PREFIX_OK: Final = re.compile(r"10\.[0-9]+(?:\.[0-9]+)*")


def _ocr_digit(text: str) -> Iterator[str]:
    # Letters read for digits, only where digits are certain (the prefix) or the swap is
    # typical (a letter O or l between digits). At most three candidates, never a fan-out.
    slash = text.find("/")
    if slash <= 0:
        return
    head, tail = text[:slash], text[slash:]
    prefix = head.translate(_OCR_PREFIX)
    if prefix == head or not _OCR_PREFIX_OK.fullmatch(prefix):
        prefix = head
    suffix = _OCR_SUFFIX_RE.sub(lambda m: _OCR_DIGITS[m.group()], tail)
    for candidate in (prefix + suffix, prefix + tail, head + suffix):
        if candidate != text:
            yield candidate


_DASHES: Final = str.maketrans(dict.fromkeys(
    "\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\ufe58\ufe63\uff0d", "-"
))


#: Full-width forms (U+FF01-U+FF5E) and slash look-alikes, as CJK input methods and
#: typesetting leave them.
_LOOKALIKES: Final = str.maketrans(
    {**{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}, "\u2044": "/", "\u2215": "/",
     "\u2024": ".", "\u3002": "."}
)


#: Characters with no business in a DOI that copy-paste and PDF extraction leave behind.
_INVISIBLE: Final = (
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2064"
    "\ufeff]|(?<!-)[\t\n\r]"  # a line break after a hyphen is line_break_hyphen's
)


# -- text glued on, markup inside, split numbers, hyphen runs, junk before "10." (#22) ---------

#: Hosts whose name ends up glued to a DOI (a reference manager's "URL" field run on).
_GLUED_HOSTS: Final[str] = (
    r"sagepub|wiley|onlinelibrary\.wiley|springer|link\.springer|tandfonline|elsevier"
    r"|sciencedirect|oup|academic\.oup|nature|cambridge|jstor|ieee|pubs\.acs|bmj|plos"
    r"|frontiersin|mdpi|ncbi\.nlm\.nih|nejm|thelancet|cell|jamanetwork|annualreviews"
)
#: A tail that is never part of a DOI, glued to its last character, anchored at the end. The
#: leftmost start wins, so the whole tail goes ("#sa2", "(epub ahead of print)", ...).
_GLUED_TAIL_RE: Final = re.compile(
    # No branch starts with whitespace (what the cut leaves before the tail is trimmed), and
    # none has two unbounded runs in a row: a cell full of spaces costs linear time.
    r"(?:"
    r"[.,;]?[(\[]?pmid ?:? ?[0-9]{5,9}[)\]]?"  # .pmid:12345678, pmid:23456789
    r"|>\s?accessed\b.*"  # >accessed 12 May 2019
    rf"|(?<=[0-9])[a-z]{{2,12}}\.(?:{_GLUED_HOSTS})\.(?:com|org|net)(?:/\S*)?"  # abc.sagepub.com
    rf"|[./]?(?:journals|www|pubs|academic|link|onlinelibrary)\.(?:{_GLUED_HOSTS})"
    r"\.(?:com|org|net)(?:/\S*)?"  # journals.sagepub.com/home/xyz
    r"|/-/dcsupplemental.*"  # /-/DCSupplemental
    r"|[(\[] ?e-?pub ?ahead ?of ?print ?[)\]]?.*"  # (epub ahead of print)
    r"|[.,]?article ?published ?online ?before ?print.*"
    r"|[(\[](?:19|20)[0-9]{2}[)\]]?"  # (2019), (2019, [2019]
    r"|\[doi\].*"  # [doi] and what follows it
    r"|\.{3,}.*"  # a dotted leader: .......129,5334(2007)
    # A URL fragment: #, #_blank, #doilink, #sa2; not a SICI's 2-#, and not digits alone:
    # 10.1000/456#789 is the IDF's own example of a DOI holding a # (sent as %23).
    r"|(?<!-)#(?![0-9]+\Z)[A-Za-z0-9_-]{0,20}"
    r"|\|+.*"  # a table's column bar
    r")\Z",
    re.IGNORECASE | re.DOTALL,
)


#: Cheap test before :data:`_GLUED_TAIL_RE` or :data:`_TAIL_WORD_RE`: a mark or word one of
#: their tails needs (most values have none, and the full patterns try every position).
_TAIL_MARKS: Final[tuple[str, ...]] = (
    "(", "[", "#", "|", ">", "...", "/-/", "pmid", ".com", ".org", ".net", "accessed",
    "available", "retrieved", "viewed", "cited", "epub", "published", "online", "supplement",
    "abstract", "fulltext", "issn", "isbn",
)


def _tail_hint(text: str) -> bool:
    lowered = text.lower()
    return any(mark in lowered for mark in _TAIL_MARKS)


#: More tails, each with a mark of its own (so that a value without one, a run of brackets
#: say, pays nothing for them): a note word glued to the last digit, closing tags at the end,
#: the end of an HTML attribute and what follows.
_GLUED_MORE: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("", re.compile(r"(?<=[0-9])(?:accessed|retrieved|available)(?![a-z]).*\Z",  # 12373Accessed
                    re.IGNORECASE | re.DOTALL)),
    ("</", re.compile(r"(?:</[a-z][\w:.-]*\s*>)+\Z", re.IGNORECASE)),  # </a>, </td></tr>
    ('"', re.compile(r'"\s*>.*\Z', re.DOTALL)),  # ">10.1000/x</a>
)
_GLUED_WORDS: Final[tuple[str, ...]] = ("accessed", "retrieved", "available")


def _glued_tail(text: str) -> Iterator[str]:
    matches = [_in_suffix(_GLUED_TAIL_RE, text) if _tail_hint(text) else None]
    lowered = text.lower()
    for mark, pattern in _GLUED_MORE:
        if (mark in text) if mark else any(word in lowered for word in _GLUED_WORDS):
            matches.append(_in_suffix(pattern, text))
    starts = [match.start() for match in matches if match is not None]
    if starts:
        yield text[: min(starts)]  # the leftmost tail goes whole


#: Where a tail that is not part of a DOI may start: an opening bracket, a fragment, a bar,
#: a backslash, a run of dots, a publisher's ``/-/`` path, a ``>``, and a known tail word
#: glued to the last character (``...5334accessed``, ``...x.epub``).
_CUT_RE: Final = re.compile(r"[(\[<{#|\\>]|\.{2,}|/-/")
_TAIL_WORD_RE: Final = re.compile(
    r"(?<=[0-9)\]])(?:accessed|available|retrieved|viewed|cited|epub|pmid|pmcid|published"
    r"|online|supplement|abstract|fulltext|issn|isbn)(?![a-z])",
    re.IGNORECASE,
)
#: What a bracket closed at the very end holds when it is a tail: a year or a word.
_BRACKETED_TAIL_RE: Final = re.compile(r"(?:19|20)[0-9]{2}|.*[A-Za-z]{3}.*", re.DOTALL)
#: Cuts offered per value at most (longest first): each may cost a request.
MAX_CUTS: Final[int] = 4


def _tail_may_start(text: str, cut: int, slash: int) -> bool:
    """A bracket starts a tail only when it breaks the DOI's own pairs: an opener that is
    never closed, or closed at the very end (``(2019)``); a ``>`` that closes nothing. A SICI
    DOI's ``(10)70384-0`` and ``<693::AID-ASI4>3.0.CO;2-0`` stay whole."""
    char = text[cut]
    if char in _OPENERS:
        closer = _OPENERS[char]
        close = text.find(closer, cut + 1)
        return close < 0 or (close == len(text) - 1
                             and _BRACKETED_TAIL_RE.fullmatch(text[cut + 1:close]) is not None)
    if char == ">":
        return text.count("<", slash, cut) == 0
    return True


def _truncation(text: str) -> Iterator[str]:
    # Verified truncation: the value cut at each place where a tail may start, longest first.
    # Only a cut the proxy confirms counts (the rule is verify_only), so a wrong cut is free.
    slash = text.find("/", _doi_start(text))
    if slash < 0:
        return
    starts = [m.start() for m in _CUT_RE.finditer(text, slash + 2)]
    if _tail_hint(text):
        starts += [m.start() for m in _TAIL_WORD_RE.finditer(text, slash + 2)]
    cuts = sorted({cut for cut in starts if _tail_may_start(text, cut, slash)}, reverse=True)
    for cut in cuts[:MAX_CUTS]:
        yield text[:cut]


_EMPTY_TAG_RE: Final = re.compile(
    r"<\s*/?\s*(?:br|wbr|hr|p|i|b|em|strong|sup|sub|span|div)\s*/?\s*>"
    r"|<\s*[A-Za-z_][\w:.-]*\s*/\s*>",
    re.IGNORECASE,
)
_INSERTED_ELEMENT_RE: Final = re.compile(r"<([A-Za-z_][\w:.-]*)[^<>]*>([^<>]{0,40})</\1\s*>")


def _markup_inside(text: str) -> Iterator[str]:
    # <br/> and other empty tags anywhere; an inserted element (``<xml_add>e</xml_add>``) is
    # dropped whole first (the insertion is the damage), kept as its text second.
    if "<" not in text:
        return
    bare = _EMPTY_TAG_RE.sub("", text)
    dropped = _INSERTED_ELEMENT_RE.sub("", bare)
    unwrapped = _INSERTED_ELEMENT_RE.sub(lambda m: m.group(2), bare)
    for candidate in dict.fromkeys((dropped, unwrapped)):
        if candidate != text:
            yield candidate


#: A run of hyphen-like characters (a hyphen, a soft hyphen, Unicode hyphens and dashes).
_HYPHEN_RUN: Final = "[-\u00ad\u2010\u2011\u2012\u2013\u2212]{2,}"


def _one_hyphen(run: re.Match[str]) -> str:
    # Only a run with a soft or Unicode hyphen in it: a plain "--" is written so on purpose.
    return "-" if run.group().strip("-") else run.group()


#: One whitespace after a digit or a dot, before the value's last token that holds a digit
#: too (``abcd.1 2.3.4``, ``v9n10 p149``, ``journal. pone.0123456``): a number or a name split
#: at a line wrap, not a note appended. A lone year after a space is a note, not the rest of a
#: number.
_SPLIT_NUMBER_RE: Final = re.compile(
    r"(?<=[0-9.])\s(?!(?:19|20)[0-9]{2}\Z)(?=[^\s0-9]{0,12}[0-9])(?=\S{1,40}\Z)")


_ARTICLE_NUMBER_RE: Final = re.compile(r"[A-Za-z]{1,2}([0-9]{3,})")


def _split_number(text: str) -> Iterator[str]:
    match = _in_suffix(_SPLIT_NUMBER_RE, text)
    if match is None:
        return
    head, token = text[: match.start()], text[match.end():]
    # A citation's note after the DOI, not the rest of a number: volume(issue), pages
    # (``47(5)``, ``500:123``, ``p.12``, ``2019;393``), or the article number repeated
    # (``pone.0123456 e0123456``).
    if any(mark in token for mark in "():;,") or token.lower().startswith(("p.", "pp")):
        return
    number = _ARTICLE_NUMBER_RE.fullmatch(token)
    if number is not None and head.endswith(number.group(1)):
        return
    yield head + token


#: Junk glued before ``10.``: a letter or three (``e10.``, ``doi10.``), a digit (``110.``), or
#: a wrong first digit (``20.1234/``). Only before a 4-5 digit registrant and its slash.
_JUNK_BEFORE_RE: Final = re.compile(r"(?:[A-Za-z]{1,3}|[0-9])(?=10\.[1-9][0-9]{3,4}(?:\.[0-9]+)*/)")
_WRONG_DIRECTORY_RE: Final = re.compile(r"[2-9]0\.(?=[1-9][0-9]{3,4}(?:\.[0-9]+)*/)")


_MISTYPED_DOT_RE: Final = re.compile(r"10[^./\s](?=[1-9][0-9]{3}(?:\.[0-9]+)*/)")


@_prefix_damaged
def _mistyped_dot(text: str) -> Iterator[str]:
    # ``1031016/j.x``: a key next to the dot struck instead of it (``10.1016``). The digits
    # also read as a 5-digit registrant (``10.31016``, which lost_directory offers), so this
    # reading is only ever shown once the proxy confirms it.
    if _MISTYPED_DOT_RE.match(text):
        yield "10." + text[3:]


@_prefix_damaged
def _junk_before_directory(text: str) -> Iterator[str]:
    if _JUNK_BEFORE_RE.match(text):
        yield _JUNK_BEFORE_RE.sub("", text, count=1)
    elif _WRONG_DIRECTORY_RE.match(text):
        yield "10." + text[3:]


def _hint_class(chars: Iterable[str]) -> str:
    """A character class of ``chars`` (as literal characters, runs as ranges) that RE2 and
    Python's ``re`` read alike: a hint runs over a whole column in Arrow (RE2), then on each
    picked value in Python."""
    def char(point: int) -> str:
        text = chr(point)
        return "\\" + text if text in "\\]^-[" else text

    return "[" + "".join(
        char(a) if a == b else f"{char(a)}-{char(b)}" for a, b in code_point_runs(chars)) + "]"


#: What Python's ``\s`` matches (every rule's whitespace) and a valid DOI may hold (the
#: controls cannot be in one), as a class: RE2's ``\s`` is ASCII only, and a valid DOI may
#: hold a no-break or an ideographic space.
_SPACE: Final[str] = _hint_class(
    chr(c) for c in range(0x3001) if chr(c).isspace() and validate(f"10.1/a{chr(c)}b").valid)
#: Non-ASCII punctuation and quotes (what ``_trailing_punctuation`` trims besides ASCII):
#: those of the Basic Multilingual Plane, and every character beyond it (a few are).
_PUNCTUATION: Final[str] = _hint_class(
    chr(c) for c in range(0x80, 0x10000) if unicodedata.category(chr(c))[0] == "P"
)[:-1] + "\U00010000-\U0010ffff]"
#: The characters :data:`_DASHES` and :data:`_LOOKALIKES` map to ASCII.
_DASH_HINT: Final[str] = _hint_class(chr(c) for c in _DASHES)
_LOOKALIKE_HINT: Final[str] = _hint_class(chr(c) for c in _LOOKALIKES)
#: Where :data:`_GLUED_TAIL_RE` can match, without its look-arounds.
_GLUED_TAIL_HINT: Final[str] = (
    r"(?i:pmid|accessed|retrieved|available|\.(?:com|org|net)|/-/|e-?pub|published|\[doi\]"
    r"|</[a-z]|#[a-z0-9_-]{0,20}$)|[(\[](?:19|20)[0-9]{2}[)\]]?$|\.\.\.|\|"
    rf"|\"{_SPACE}*>"
)


#: Combining marks (a canonical combining class other than 0; none lies above U+1FFFF): what a
#: decomposed export writes after a base character (macOS: "e" + U+0301 for "é").
_COMBINING_HINT: Final[str] = _hint_class(
    chr(c) for c in range(0x300, 0x20000) if unicodedata.combining(chr(c)))
_COMBINING_RE: Final = re.compile(_COMBINING_HINT)


def _decomposed(text: str) -> Iterator[str]:
    """The text composed (NFC), when it holds a combining mark that composition changes: per
    the standard a different DOI (keys compare code points), so it never joins its composed
    twin, but far more often the same DOI exported decomposed."""
    if _COMBINING_RE.search(text):
        composed = unicodedata.normalize("NFC", text)
        if composed != text:
            yield composed


#: The rules, cheapest (most often the cause) first. Costs add up along a chain; the order of
#: equal-cost candidates is the order here.
RULES: Final[tuple[Rule, ...]] = (
    Rule("trailing_punctuation", 1.0, _trailing_punctuation,
         "sentence punctuation after the DOI: 10.3748/wjg.v10.i5.707.",
         hint=rf"[.,;:!?'\"/\\*]$|{_PUNCTUATION}$"),
    Rule("unbalanced_bracket", 1.0, _unbalanced_bracket,
         "a closing bracket without its partner: 10.1061/9780784480502.018]",
         hint=r"[)\]}>]$"),
    Rule("appended_url", 1.0, _appended_url,
         "a URL glued on: 10.1016/j.aca.2006.07.086.http://dx.doi.org/10.1016/...",
         hint=r"(?i:https?:/|www\.|doi\.org/|doi:)"),
    Rule("hyphen_run", 1.0, _sub(_HYPHEN_RUN, _one_hyphen),
         "hyphens, soft hyphens and Unicode hyphens in a row for one: 10.1000/1234-\u00ad5678",
         hint=_DASH_HINT),
    Rule("unicode_dash", 1.0, _translate(_DASHES),
         "an en dash, em dash or minus for a hyphen: 10.1037/0021–9010.93.3.602",
         hint=_DASH_HINT),
    Rule("html_entity", 1.0, _html_entity,
         "an HTML entity, whole or broken: 10.1379/...002lt;0162:tmethi>...",
         hint=r"&|(?i:lt|gt|amp|quot|apos);"),
    Rule("double_wrapped", 1.0, _after_head(_DOUBLE_WRAPPED_RE),
         "a presentation prefix twice: doi:doi:10.1000/1, https://doi.org/doi:10.1000/1"),
    Rule("doubled_prefix", 1.0, _after_head(_DOUBLED_PREFIX_RE),
         "the DOI prefix twice: 10.1000/10.1000/1",
         hint=rf"^10\.[0-9.]+/{_SPACE}*(?:(?i:doi):{_SPACE}*)?10\.[0-9]"),
    Rule("invisible_character", 1.0, _sub(_INVISIBLE, ""),
         "soft hyphens, zero-width spaces and controls inside the DOI"),
    Rule("decomposed_unicode", 1.0, _decomposed,
         "a letter written decomposed (macOS exports): 10.1000/cafe + U+0301 for 10.1000/café",
         hint=_COMBINING_HINT),
    Rule("percent_encoding", 1.0, _percent_encoding,
         "a URL-encoded DOI given bare: 10.1093%2Fjac%2Fdky096",
         hint="%"),
    Rule("lost_directory", 1.0, _lost_directory,
         "the leading 10. lost or mangled: 1038/nature14129"),
    Rule("inner_space", 1.0, _sub(r"(?<=[./\-_:(])\s+(?=[0-9])|(?<=/)\s+|(?<!\s)\s+(?=[./])", ""),
         "a line break next to a dot or slash: 10.1523/jneurosci. 0300-04.2004",
         hint=_SPACE),
    Rule("glued_tail", 1.0, _glued_tail,
         "a note, host, path, fragment, year or closing tag glued on: 10.1000/1.pmid:12345678, "
         "10.1000/1(epub ahead of print), 10.1000/1#sa2, 10.1000/1.......129,5334(2007), "
         "10.1038/nature12373Accessed 2019, 10.1000/xyz</a>",
         hint=_GLUED_TAIL_HINT),
    Rule("markup_inside", 1.0, _markup_inside,
         "empty tags or an inserted element inside: 10.1000/ab<br/>c, "
         "10.1000/1234-<xml_add>e</xml_add>5678",
         hint="<"),
    Rule("latex_escape", 1.0, _sub(r"\\([_&%#$])", r"\1"),
         "a LaTeX-escaped character: 10.1000/a\\_b",
         hint=r"\\[_&%#$]"),
    Rule("split_number", 1.0, _split_number,
         "a space splitting a number, or after a dot: 10.1000/abcd.1 2.3.4, "
         "10.1000/xyz.v9n10 p149, 10.1371/journal. pone.0123456",
         hint=_SPACE),
    Rule("junk_before_directory", 1.0, _junk_before_directory,
         "a letter or digit glued before 10., or 20. for 10.: e10.1000/1, 110.1000/1"),
    Rule("mistyped_dot", 1.5, _mistyped_dot,
         "another key struck for the dot after 10: 1031016/j.x (10.1016/j.x)", verify_only=True),
    Rule("leading_text", 1.5, _leading_text,
         "a label or another site's URL before the DOI: DOI 10.1000/1"),
    Rule("lost_slash", 1.5, _lost_slash, "a dot for the slash: 10.1371.journal.pntd.0005917"),
    Rule("appended_doi", 1.5, _cut_in_suffix(_SECOND_DOI_RE),
         "a second DOI in the cell: 10.1000/1;10.1000/2",
         hint=r"/.*10\.[1-9][0-9]{3}[0-9.]*/"),
    Rule("line_break_hyphen", 1.5, _sub(r"(?<=\w)-\s+(?=\w)", ""),
         "a hyphen added at a line break: 10.1002/anie.2005- 01234",
         hint=rf"-{_SPACE}"),
    Rule("encoding_placeholder", 1.5, _sub(r"(?<=[./])[?\ufffd]", ""),
         "? or U+FFFD left where an invisible character was: 10.?1212/?WNL.?0000000000004646",
         hint="[./][?\ufffd]"),
    Rule("lookalike_characters", 1.5, _translate(_LOOKALIKES),
         "full-width digits and slash look-alikes: 10．1000／1",
         hint=_LOOKALIKE_HINT),
    Rule("url_tail", 1.5, _sub(
        r"(?:/(?:full|abstract|abs|pdf|epdf|epub|meta|html|fulltext|full\.pdf|pdfplus|summary"
        r"|references|citedby|figures|issuetoc|suppl_file|full/html))+/?$"
        r"|\.(?:pdf|html?|xml)$|[?#](?:[A-Za-z_]+=|page|ref|sec|fig|abstract).*$",
        "", re.IGNORECASE),
        "a publisher page's path, extension or query after the DOI: 10.1000/1/full",
         hint=(r"(?i:/(?:full|abstract|abs|pdf|epdf|epub|meta|html|fulltext|pdfplus|summary"
              r"|references|citedby|figures|issuetoc|suppl_file)/?$|\.(?:pdf|html?|xml)$)|[?#]")),
    Rule("appended_label", 1.5, _sub(
        r"(?<!\s)\s*\[doi\]$|[.,;]?(?:(?<!\s)\s+\(?|\()(?:pmid|pmcid|pubmed|epub|isbn|issn)\b.*$",
        "",
        re.IGNORECASE | re.DOTALL),
        "a label after the DOI: 10.1000/1 [doi], 10.1000/1. Epub 2019",
         hint=rf"(?i:\[doi\]$|\((?:pmid|pmcid|pubmed|epub|isbn|issn))|{_SPACE}"),
    Rule("appended_text", 2.0, _appended_text,
         "text after a space: 10.1371/journal.pone.0178918 The Digital Object Identifier...",
         hint=_SPACE),
    Rule("sici_brackets", 2.0, _sici_brackets,
         "the <> or [] of a SICI DOI lost: 10.1379/1466-1268(2002)0070162:TMETHI2.0.CO;2",
         hint=r"(?i:[0-9]\.[0-9]\.co;2)"),
    Rule("doubled_punctuation", 2.0, _sub(r"([._])\1+|(?<!:)(/)/+", lambda m: m[1] or m[2]),
         "a doubled dot, underscore or slash: 10.1000/j..x",
         hint=r"\.\.|__|//"),
    Rule("space_anywhere", 3.0, _inner_space,
         "up to three spaces anywhere inside: 10.1000/ab cd",
         hint=_SPACE),
    Rule("truncation", 2.5, _truncation,
         "the value cut where a tail may start ((, [, <, #, |, \\, .., /-/, a word glued to "
         "the last digit), longest first, each only if it exists: 10.1000/1234(suppl",
         verify_only=True),
    Rule("ocr_digit", 4.0, _ocr_digit,
         "a letter O/l/I read for 0/1, in the prefix or between digits: 10.1O16/...",
         verify_only=True),
)


def _window(text: str) -> str | None:
    """The part of a cell worth searching; ``None`` when no DOI can end inside the window."""
    if len(text) <= MAX_SCAN:
        return text
    cut = max(text.rfind(space, 0, MAX_SCAN) for space in (" ", "\t", "\n"))
    return text[:cut] if cut > 0 else None


@dataclass(order=True)
class _State:
    cost: float
    order: int
    text: str = ""
    rules: tuple[Rule, ...] = ()


#: A candidate that one of these rules can still repair into another valid DOI shows damage,
#: and ranks after that repair: ``10.1000/abc.`` after ``10.1000/abc``.
_RESIDUAL_RULES: Final[tuple[Rule, ...]] = tuple(
    rule for rule in RULES if rule.cost <= 2.0 and not rule.verify_only
)
_RESIDUAL_PENALTY: Final[float] = 2.5


def suggest_repairs(value: object, *, limit: int = MAX_CANDIDATES) -> list[Repair]:
    """Candidate DOIs for a damaged value, most likely first (at most ``limit``).

    Each :class:`Repair` carries the normalized DOI and the rules that produced it. The value's
    own DOI (when it is valid) is never among them, and a value no rule changes gets ``[]``.
    Whether a candidate, or the value itself, *exists* only the proxy can say:
    :func:`airflow_doi.repair.verify.repair` asks it, and never repairs a value whose own
    DOI exists.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit!r}")
    text = cell_text(value)
    if text is None:
        return []
    text = text.strip(TRIM_CHARS)
    window = _window(text) if text else None
    if not window:
        return []
    own = validate(window)
    own_key = own.key if own.valid else None
    found: dict[str, Repair] = {}
    best: dict[str, float] = {window: 0.0}
    counter = 0
    heap = [_State(0.0, counter, window)]
    expanded = 0
    while heap and expanded < MAX_STATES and len(found) < limit:
        state = heapq.heappop(heap)
        if state.cost > best.get(state.text, state.cost):
            continue  # a cheaper chain reached this text already
        expanded += 1
        if state.rules:
            _keep(found, state, own_key, window)
        if len(state.rules) >= MAX_STEPS:
            continue
        for rule in RULES:
            for produced in rule.transform(state.text):
                produced = produced.strip(TRIM_CHARS)
                cost = state.cost + rule.cost
                if not produced or cost >= best.get(produced, float("inf")):
                    continue
                best[produced] = cost
                counter += 1
                heapq.heappush(heap, _State(cost, counter, produced, (*state.rules, rule)))
    return _rank(list(found.values()), own_key)


def _keep(found: dict[str, Repair], state: _State, own_key: str | None, value: str) -> None:
    check = validate(state.text)
    key = check.key
    if not check.valid or check.doi is None or key is None or key == own_key or key in found:
        return
    names = tuple(rule.name for rule in state.rules)
    found[key] = Repair(
        doi=check.doi,
        rules=names,
        cost=state.cost,
        verify_only=(any(rule.verify_only for rule in state.rules)
                     or _borrowed_prefix(names, value)),
    )


#: What may stand before a DOI that lost its ``10.``, for the digits to still be its prefix:
#: a DOI label or URL, a bracket or quote (``doi: 1038/x``, ``https://doi.org/1038/x``).
_DOI_WRAPPER_ONLY_RE: Final = re.compile(
    r"[\s\[(<{\"']*(?:(?:https?://)?(?:dx\.|www\.)?doi\.org/|doi\s*[:.]?|urn:doi:|info:doi/)?"
    r"[\s\[(<{\"']*",
    re.IGNORECASE,
)


def _borrowed_prefix(names: tuple[str, ...], value: str) -> bool:
    """True when the candidate's prefix was made from digits found inside other text: a
    ``10.`` put before the number of a handle (``hdl.handle.net/11111/2222222``), a year
    (``JOUR/2023/012345-T``) or an ISSN (``example.com/1234-5678/x``). Such a guess is only
    ever shown once the proxy confirms it. A DOI label, URL or bracket before the digits
    (``doi: 1038/nature14129``) lends them nothing: they are the DOI's own."""
    if not ("leading_text" in names and "lost_directory" in names
            and names.index("leading_text") < names.index("lost_directory")):
        return False
    digits = _LEADING_RE.search(value, 1)
    return digits is None or _DOI_WRAPPER_ONLY_RE.fullmatch(value[: digits.start()]) is None


#: The rules that may change a valid DOI without the proxy (those with a hint), cheapest first
#: (stable by RULES order); HINTS holds their hints compiled, by name.
OFFERED_ON_VALID: Final[tuple[Rule, ...]] = tuple(sorted(
    (rule for rule in RULES if rule.hint is not None and not rule.verify_only),
    key=lambda rule: rule.cost,
))
HINTS: Final[dict[str, re.Pattern[str]]] = {
    rule.name: re.compile(rule.hint or "") for rule in OFFERED_ON_VALID
}


def likely_damage(doi: str) -> Repair | None:
    """The repair ``repair`` offers, without the proxy, for a *valid* DOI that looks damaged
    (``10.1000/182 (retracted)`` -> ``10.1000/182``, :func:`offline_repair`); ``None`` when
    no rule changes it into another valid DOI, or when ``doi`` is not valid.

    Valid per the standard, such a DOI may still exist as written: only
    :func:`airflow_doi.repair.verify.repair` can tell. One step of each rule, not the search
    of :func:`suggest_repairs`, and only of the rules whose :attr:`Rule.hint` the DOI
    matches: the test ``normalize`` and the report run on the valid cells of a whole column
    (:mod:`airflow_doi.repair.damage`).
    """
    own = validate(doi)
    if not own.valid or own.doi is None:
        return None
    rules = [rule for rule in OFFERED_ON_VALID if HINTS[rule.name].search(own.doi)]
    step = damage_by(own.doi, rules)
    return None if step is None else offline_repair(own.doi, step)


def offered_offline(candidates: Iterable[Repair]) -> Repair | None:
    """The candidate shown without the proxy: the most likely one whose rules do not guess
    freely (a ``verify_only`` one is shown only once the proxy knows it exists)."""
    return next((candidate for candidate in candidates if not candidate.verify_only), None)


def offline_repair(doi: str, step: Repair) -> Repair:
    """The repair ``repair --no-verify`` offers for a valid, normalized ``doi`` in which one
    step of a rule showed damage (``step``, from :func:`damage_by`): the search's candidate
    (:func:`suggest_repairs`, :func:`offered_offline`), so that ``normalize``'s note, the
    report and ``repair`` give one answer (``10.1000/182 – accessed 2020`` is appended_text,
    to ``10.1000/182``, not unicode_dash, to a DOI still damaged); ``step`` when the search
    offers none."""
    return offered_offline(suggest_repairs(doi)) or step


def damage_by(doi: str, rules: Iterable[Rule]) -> Repair | None:
    """Whether one step of ``rules`` changes a DOI known to be valid and normalized into
    another valid DOI (in their order: :data:`OFFERED_ON_VALID`'s, those whose hint ``doi``
    matches): that step's repair, or None. The cheap test of a whole column; the repair
    offered for the DOI is :func:`offline_repair`'s."""
    key = ascii_upper(doi)
    for rule in rules:
        for produced in rule.transform(doi):
            check = validate(produced.strip(TRIM_CHARS))
            if check.valid and check.doi is not None and check.key != key:
                return Repair(check.doi, (rule.name,), rule.cost)
    return None


def _still_damaged(doi: str, own_key: str | None) -> bool:
    key = validate(doi).key
    for rule in _RESIDUAL_RULES:
        for produced in rule.transform(doi):
            check = validate(produced.strip(TRIM_CHARS))
            if check.valid and check.key not in (key, own_key):
                return True
    return False


def _rank(candidates: list[Repair], own_key: str | None) -> list[Repair]:
    """Cheapest first, candidates that still show damage after the ones that do not."""
    ranked = sorted(
        enumerate(candidates),
        key=lambda item: (
            item[1].cost + (_RESIDUAL_PENALTY if _still_damaged(item[1].doi, own_key) else 0.0),
            item[0],
        ),
    )
    return [candidate for _, candidate in ranked]
