"""Finding DOIs in free text (reference strings, abstracts, notes fields).

Text around a DOI usually ends with punctuation that is not part of it ("see 10.1000/1."),
while SICI DOIs legitimately contain brackets. So a candidate runs to the next whitespace,
loses trailing sentence punctuation, and loses a closing bracket only while that bracket has
no partner inside the candidate.
"""

from __future__ import annotations

import re
from typing import Final

from airflow_doi.syntax import (
    DIRECTORY,
    DOI_SCHEME,
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


_FORM = (
    rf"(?i:https?://(?:{regex_alternation(URL_HOSTS)})/|(?:{regex_alternation(SCHEMELESS_HOSTS)})/"
    rf"|{re.escape(DOI_SCHEME)}\s*|{re.escape(URN_PREFIX)}|{re.escape(INFO_PREFIX)})"
)
# A bare DOI must not be glued to a preceding letter or digit ("110.1000/x" is no DOI).
_CANDIDATE_RE = re.compile(rf"{_FORM}\S+|(?<![^\W_]){re.escape(DIRECTORY)}{REGISTRANT_PATTERN}/\S+")


def _trim(candidate: str) -> str:
    while candidate:
        last = candidate[-1]
        if last in TRAILING_PUNCTUATION:
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
    for match in _CANDIDATE_RE.finditer(text):
        try:
            found.append(normalize(_trim(match.group())))
        except InvalidDoiError:
            continue
    return found
