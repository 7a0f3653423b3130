"""Which URL value of a handle record may be handed on as a row's ``url``.

A handle's ``URL`` value is whatever text the registrant (or a hostile proxy) stored. From the
``url`` column it lands in catalogue tables, in CSV files opened in spreadsheets and in the
HTML report, so only what every one of those can carry safely is accepted there: an absolute
``http``/``https`` URL with a host and no control, invisible-format or whitespace characters.
``javascript:``, ``data:``, ``=HYPERLINK(...)``, text with CR/LF and relative paths are not.

The record's lowest-index ``URL`` value (what the proxy would redirect a browser to) is
always reported as ``url_raw``, as safe text (:func:`~airflow_doi.resolver.text.server_text`:
control characters and lone surrogates as escapes, at most :data:`MAX_URL_CHARS` characters);
when it is refused the row is ``no_values`` (the handle exists, but has no URL we hand on),
with :data:`REFUSED_URL` (or :func:`too_long`) as its reason. We do not fall back to a
higher-index value: the catalogue would then show a link the proxy never serves.

A URL is kept whole or not at all: one longer than :data:`MAX_URL_CHARS` is refused with its
own reason, never cut (a cut URL leads somewhere else). 2,048 characters is the bound URLs
are commonly held to (sitemaps, older browsers); a landing page's URL beyond it is rare, a
megabyte "URL" is a broken or hostile record. Pure standard library, so the cache and the
result types can use it without aiohttp.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from airflow_doi.resolver.text import UNSAFE_CATEGORIES, server_text

__all__ = ["MAX_URL_CHARS", "REFUSED_URL", "is_safe_url", "judge_url", "raw_url_value",
           "too_long"]

#: The reason a ``no_values`` row carries when its only URL value was refused.
REFUSED_URL: Final = (
    "the handle's URL value is not an absolute http(s) URL without control characters; "
    "not handed on as url (the value as sent is in url_raw, control characters escaped)"
)
#: Longest URL handed on as ``url`` (or followed, by content negotiation), in characters.
MAX_URL_CHARS: Final = 2048


def too_long(length: int) -> str:
    """The reason of a ``no_values`` row whose URL value has ``length`` characters."""
    return (f"the handle's URL value is {length:,} characters long, longer than the "
            f"{MAX_URL_CHARS:,} characters kept; not handed on as url (url_raw holds its first "
            f"{MAX_URL_CHARS:,}, then ...)")


def is_safe_url(text: object) -> bool:
    """True for an absolute ``http``/``https`` URL with a host, no unsafe character (no
    whitespace, nothing of :data:`~airflow_doi.resolver.text.UNSAFE_CATEGORIES`) and at most
    :data:`MAX_URL_CHARS` characters."""
    if not isinstance(text, str) or not text or len(text) > MAX_URL_CHARS:
        return False
    for char in text:
        if char.isspace() or unicodedata.category(char) in UNSAFE_CATEGORIES:
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
    """``(url, url_raw, refusal)``: the safe URL or None, the value as sent (as safe text:
    the URL itself when it is safe), the reason if refused."""
    raw = raw_url_value(values)
    if raw is None:
        return None, None, None
    if is_safe_url(raw):
        return raw, raw, None
    shown = server_text(raw, MAX_URL_CHARS)
    return None, shown, too_long(len(raw)) if len(raw) > MAX_URL_CHARS else REFUSED_URL
