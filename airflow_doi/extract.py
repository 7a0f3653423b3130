"""Finding DOIs in free text (reference strings, abstracts, notes fields, HTML snippets).

The aim is to find what a reader sees. Text around a DOI usually ends with punctuation that is
not part of it ("see 10.1000/1.", "“10.1000/1”。"), while SICI DOIs legitimately contain
brackets. So a candidate runs to the next whitespace, or to markup (a ``"``, a ``</``, or a
``>`` that closes no ``<`` in the candidate: the end of a tag), loses trailing punctuation
(ASCII sentence punctuation, or any non-ASCII punctuation or quote), and loses a closing bracket
only while that bracket has no partner inside the candidate. Inside another site's URL
(``https://host/doi/10...``) the ``?`` and ``#`` start that site's query and fragment, so the
DOI stops there too; a doi.org URL is left to :func:`airflow_doi.syntax.normalize`, which
knows the proxy's own forms (it percent-decodes, and drops ``?noredirect``). A DOI (or its
``doi:`` label or URL) right after an opening bracket ends at the bracket that closes that one:
``<(DOI:10.1000/xyz.AB1)/S/URI,`` finds ``10.1000/xyz.AB1``.

A wrapper label that is not followed by a DOI hides nothing: a DOI URL, ``urn:doi:`` or
``info:doi/`` counts only when ``10.`` comes right after it, so in ``https://doi.org/(10.1000/x)``
the bare rule finds ``10.1000/x``. ``doi:`` is not a label here at all: it normalizes exactly like
the bare DOI after it, which the bare rule finds anyway (``DOI: (10.1000/xyz)``). (Resuming the
search after a label that failed would rescan a long token once per label: quadratic.)
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from airflow_doi.syntax import (
    DIRECTORY,
    INFO_PREFIX,
    REGISTRANT_PATTERN,
    SCHEMELESS_HOSTS,
    URL_HOSTS,
    URN_PREFIX,
    InvalidDoiError,
    normalize,
    regex_alternation,
)

__all__ = ["find_dois"]

TRAILING_PUNCTUATION: Final[str] = ".,;:!?'\""
CLOSERS: Final[dict[str, str]] = {")": "(", "]": "[", "}": "{", ">": "<"}

# Wrapper labels match ASCII case-insensitively only ("httpſ://" is no scheme), as in syntax.
_LABEL = (
    rf"(?ai:https?://(?:{regex_alternation(URL_HOSTS)})/|(?:{regex_alternation(SCHEMELESS_HOSTS)})/"
    rf"|{re.escape(URN_PREFIX)}|{re.escape(INFO_PREFIX)})(?={re.escape(DIRECTORY)})"
)
# A bare DOI must not be glued to a preceding ASCII letter or digit ("110.1000/x" is no DOI);
# anything else may touch it, so CJK text without spaces ("详见10.1016/x") still yields it.
_BARE = rf"(?<![A-Za-z0-9]){re.escape(DIRECTORY)}{REGISTRANT_PATTERN}/"
# Another site's URL up to the DOI in it: a scheme at the start of a word, then the shortest
# path that reaches a DOI. The path never crosses a nested "://", so text full of schemes and no
# DOI costs linear time rather than a rescan from every scheme.
_SITE = r'(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://(?:[^\s"<>:]|:(?!//))*?'
# Runs stop at whitespace and at markup: a double quote, or a "<" that opens an end tag.
_RUN = r'(?:[^\s"<]|<(?!/))+'
_SITE_RUN = r'(?:[^\s"<?#]|<(?!/))+'
_CANDIDATE_RE = re.compile(rf"{_LABEL}{_RUN}|(?P<site>{_SITE}){_BARE}{_SITE_RUN}|{_BARE}{_RUN}")


def _is_trailing(char: str) -> bool:
    """Sentence punctuation after a DOI: ASCII ``. , ; : ! ? ' "`` or any non-ASCII punctuation."""
    if char.isascii():
        return char in TRAILING_PUNCTUATION
    return unicodedata.category(char).startswith("P")


def _markup_end(text: str, start: int, end: int) -> int:
    """Where the candidate ``text[start:end]`` ends: at a ``>`` that closes no ``<`` in it.

    Such a ``>`` ends a tag (``<a href='10.1000/x'>``); a SICI DOI's ``<…>`` stays whole.
    """
    close = text.find(">", start, end)
    if close < 0:
        return end
    depth = text.count("<", start, close)
    while close >= 0:
        if depth == 0:
            return close
        depth -= 1
        following = text.find(">", close + 1, end)
        if following >= 0:
            depth += text.count("<", close + 1, following)
        close = following
    return end


#: A ``doi:`` label (or ``DOI``, ``doi:doi:``) just before a DOI (looked for when deciding
#: whether a bracket opens it).
_DOI_LABEL_BEFORE_RE: Final = re.compile(r"(?ai:(?:doi\s*[:.]?\s*)+)\Z")
_OPENERS: Final[dict[str, str]] = {opener: closer for closer, opener in CLOSERS.items()}


def _bracket_end(text: str, label: int, start: int, end: int) -> int:
    """Where the candidate ``text[start:end]`` ends when its DOI, ``doi:`` label or URL (which
    begins at ``label``) comes right after an opening bracket: at the bracket that closes that
    one (``(doi:10.1000/abc)/S/URI`` -> ``10.1000/abc``). Brackets of the same kind opened
    inside the DOI are matched first, so a SICI DOI in brackets keeps its own."""
    head = text[max(0, label - 24):label]
    labelled = _DOI_LABEL_BEFORE_RE.search(head)
    if labelled is not None:
        label -= len(head) - labelled.start()
    if label == 0 or text[label - 1] not in _OPENERS:
        return end
    opener = text[label - 1]
    closer = _OPENERS[opener]
    depth = 0
    for index in range(start, end):
        char = text[index]
        if char == opener:
            depth += 1
        elif char == closer:
            if depth == 0:
                return index
            depth -= 1
    return end


def _trim(candidate: str) -> str:
    while candidate:
        last = candidate[-1]
        if _is_trailing(last):
            candidate = candidate[:-1]
        elif last in CLOSERS and candidate.count(CLOSERS[last]) < candidate.count(last):
            candidate = candidate[:-1]
        else:
            break
    return candidate


def find_dois(text: str | None) -> list[str]:
    """Normalized DOIs found in ``text``, in order of appearance (duplicates kept)."""
    if not text:
        return []
    found: list[str] = []
    position = 0
    while (match := _CANDIDATE_RE.search(text, position)) is not None:
        start = match.start() if match.group("site") is None else match.end("site")
        end = _markup_end(text, start, match.end())
        end = _bracket_end(text, match.start(), start, end)
        try:
            found.append(normalize(_trim(text[start:end])))
        except InvalidDoiError:
            pass
        position = end
    return found
