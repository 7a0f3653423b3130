"""Presenting a DOI inside a URL or a URN, per the IDF encoding tables.

The DOI itself never changes; only its representation does. The encoding sets are defined
here once: the resolver uses them to build request paths, the SQL generator to build
``doi_url``, and ``syntax`` undoes them when reading URL, URN and info forms.
"""

from __future__ import annotations

import re
from typing import Final

from airflow_doi.syntax import Decode, parse

__all__ = [
    "DEFAULT_BASE_URL",
    "MANDATORY",
    "RECOMMENDED",
    "encode_path",
    "encode_which_ra",
    "to_url",
    "to_urn",
]

#: IDF Table 1: characters that must always be hex-encoded in a URL.
MANDATORY: Final[str] = '%"# ?'
#: IDF Table 2: characters whose encoding is recommended (browsers and gateways mangle them).
RECOMMENDED: Final[str] = "<>{}^[]`|\\+"
#: Encoded only inside a Which RA? request, where a comma separates DOIs.
WHICH_RA_EXTRA: Final[str] = ","
DEFAULT_BASE_URL: Final[str] = "https://doi.org/"

_ENCODED: Final[frozenset[str]] = frozenset(MANDATORY + RECOMMENDED)
#: "/./" becomes "/.%2F" and "/../" becomes "/..%2F", left to right, non-overlapping.
DOT_SEGMENT_RE: Final[re.Pattern[str]] = re.compile(r"/(\.\.?)/")


def _escape(char: str) -> str:
    return "".join(f"%{b:02X}" for b in char.encode("utf-8"))


def _encode(text: str, extra: str = "") -> str:
    if text.isascii() and not any(c in _ENCODED or c in extra for c in text):
        return text
    return "".join(
        _escape(c) if (c in _ENCODED or c in extra or not c.isascii()) else c for c in text
    )


def encode_path(doi: str) -> str:
    """Encode a normalized DOI for a URL path: both IDF tables, non-ASCII, dot segments."""
    return DOT_SEGMENT_RE.sub(r"/\1%2F", _encode(doi))


def encode_which_ra(doi: str) -> str:
    """Encode a normalized DOI for a Which RA? list, where commas separate DOIs."""
    return DOT_SEGMENT_RE.sub(r"/\1%2F", _encode(doi, WHICH_RA_EXTRA))


def to_url(value: object, base: str = DEFAULT_BASE_URL, *, decode: Decode = "auto") -> str:
    """The resolvable URL of a DOI given in any form; raises :class:`InvalidDoiError`."""
    doi = parse(value, decode=decode).doi
    if not base.endswith("/"):
        base += "/"
    return base + encode_path(doi)


def to_urn(value: object, *, decode: Decode = "auto") -> str:
    """``urn:doi:<prefix>:<suffix>``: the colon replaces the first slash, later ones are %2F."""
    parsed = parse(value, decode=decode)
    return f"urn:doi:{parsed.prefix}:{_encode(parsed.suffix).replace('/', '%2F')}"
