"""Which URL value of a handle record may be handed on as a row's ``url``.

A handle's ``URL`` value is whatever text the registrant (or a hostile proxy) stored. From the
``url`` column it lands in catalogue tables, in CSV files opened in spreadsheets and in the
HTML report, so only what every one of those can carry safely is accepted there: an absolute
``http``/``https`` URL with a host and no control, invisible-format or whitespace characters.
``javascript:``, ``data:``, ``=HYPERLINK(...)``, text with CR/LF and relative paths are not.

The record's lowest-index ``URL`` value (what the proxy would redirect a browser to) is
always reported as ``url_raw``; when it is refused the row is ``no_values`` (the handle
exists, but has no URL we hand on), with :data:`REFUSED_URL` as its reason. We do not fall
back to a higher-index value: the catalogue would then show a link the proxy never serves.
Pure standard library, so the cache and the result types can use it without aiohttp.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

__all__ = ["REFUSED_URL", "is_safe_url", "judge_url", "raw_url_value"]

#: The reason a ``no_values`` row carries when its only URL value was refused.
REFUSED_URL: Final = (
    "the handle's URL value is not an absolute http(s) URL without control characters; "
    "not handed on as url (the value as sent is in url_raw)"
)
#: Unicode categories never accepted inside a URL value: controls (C0, DEL, C1), invisible
#: format characters (bidi overrides, zero-width joiners), line and paragraph separators.
_REFUSED_CATEGORIES: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def is_safe_url(text: object) -> bool:
    """True for an absolute ``http``/``https`` URL with a host and no unsafe character."""
    if not isinstance(text, str) or not text:
        return False
    for char in text:
        if char.isspace() or unicodedata.category(char) in _REFUSED_CATEGORIES:
            return False
    try:
        parts = urlsplit(text)
        host = parts.hostname
    except ValueError:  # e.g. a broken IPv6 literal
        return False
    return parts.scheme.lower() in ("http", "https") and bool(host)


def raw_url_value(values: Sequence[Mapping[str, Any]]) -> str | None:
    """The ``URL``-type value with the lowest index, as sent (what the proxy redirects to)."""
    best: tuple[int, str] | None = None
    for value in values:
        data = value.get("data")
        if value.get("type") != "URL" or not isinstance(data, Mapping):
            continue
        text = data.get("value")
        index = value.get("index")
        if not isinstance(text, str) or isinstance(index, bool) or not isinstance(index, int):
            continue
        if best is None or index < best[0]:
            best = (index, text)
    return best[1] if best else None


def judge_url(values: Sequence[Mapping[str, Any]]) -> tuple[str | None, str | None, str | None]:
    """``(url, url_raw, refusal)``: the safe URL or None, the raw value, the reason if refused."""
    raw = raw_url_value(values)
    if raw is None:
        return None, None, None
    if is_safe_url(raw):
        return raw, raw, None
    return None, raw, REFUSED_URL
