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
    "DOT_SEGMENT_REWRITES",
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
#: Dot segments: a path segment that is ``.`` or ``..`` is removed (``..`` with the segment
#: before it) by URL parsers and by proxies that normalise paths (RFC 3986 5.2.4, WHATWG), so
#: ``https://doi.org/10.1000/abc/..`` would ask for ``10.1000/``. The DOI Handbook's rule
#: ("one of the slashes be percent encoded") is applied to every dot segment by two rewrites,
#: in this order, each left to right and non-overlapping:
#:
#: 1. inside the path, the slash after it: ``/./`` -> ``/.%2F``, ``/../`` -> ``/..%2F``;
#: 2. at the end, where there is no slash after it, the one before: ``/.`` -> ``%2F.``,
#:    ``/..`` -> ``%2F..`` (``10.1000/abc/..`` -> ``10.1000/abc%2F..``).
#:
#: Afterwards no segment is ``.`` or ``..``: a dot segment whose leading slash a rewrite
#: already took has joined the segment before it. ``%2E`` needs no rule: ``%`` is encoded.
#: Spelled with ``[.]`` and ``$`` so that the SQL generator emits the same patterns (a DOI
#: holds no line break, so ``$`` is the end of the text everywhere). Pairs of (pattern,
#: replacement with ``\1`` for the dots).
DOT_SEGMENT_REWRITES: Final[tuple[tuple[str, str], ...]] = (
    ("/([.][.]?)/", "/\\1%2F"),
    ("/([.][.]?)$", "%2F\\1"),
)
_DOT_SEGMENT_SUBS: Final[tuple[tuple[re.Pattern[str], str], ...]] = tuple(
    (re.compile(pattern), replacement) for pattern, replacement in DOT_SEGMENT_REWRITES
)
#: Matches wherever a rewrite of :data:`DOT_SEGMENT_REWRITES` would apply.
DOT_SEGMENT_RE: Final[re.Pattern[str]] = re.compile(
    "|".join(f"(?:{pattern})" for pattern, _ in DOT_SEGMENT_REWRITES)
)


def _escape(char: str) -> str:
    return "".join(f"%{b:02X}" for b in char.encode("utf-8"))


def _encode(text: str, extra: str = "") -> str:
    if text.isascii() and not any(c in _ENCODED or c in extra for c in text):
        return text
    return "".join(
        _escape(c) if (c in _ENCODED or c in extra or not c.isascii()) else c for c in text
    )


def _encode_dot_segments(path: str) -> str:
    """Apply :data:`DOT_SEGMENT_REWRITES` (the one dot-segment rule of every face)."""
    if "/." not in path:  # the common case: nothing to rewrite
        return path
    for pattern, replacement in _DOT_SEGMENT_SUBS:
        path = pattern.sub(replacement, path)
    return path


def encode_path(doi: str) -> str:
    """Encode a normalized DOI for a URL path: both IDF tables, non-ASCII, dot segments."""
    return _encode_dot_segments(_encode(doi))


def encode_which_ra(doi: str) -> str:
    """Encode a normalized DOI for a Which RA? list, where commas separate DOIs."""
    return _encode_dot_segments(_encode(doi, WHICH_RA_EXTRA))


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
