"""Server-supplied text made safe: one line, no control characters, bounded.

The one room every text a server sends passes through before it is cached, written, stored
or logged (a reason, a ``Location``, a URL value as sent, an agency's name, a header a log
line repeats, a JSON document kept as text). A hostile proxy or agency must not be able to
put line breaks, terminal escapes, lone surrogates (which no UTF-8 file, database or log can
hold: the whole run used to stop on one) or megabytes into a row, a table or a log line.

Standard library only, so that readers of files (the agencies' data files), the result types
and the metadata side can use it without the network extra or an import circle.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any, Final

__all__ = ["MAX_REASON", "MAX_SERVER_TEXT", "UNSAFE_CATEGORIES", "json_text", "server_text"]

#: Longest piece of server-supplied text (a ``message``, a foreign handle) kept in a reason.
MAX_SERVER_TEXT: Final = 200
#: Longest reason kept whole (ours, with the server's pieces in it).
MAX_REASON: Final = 1000
#: Unicode categories never written as they are: controls (C0, DEL, C1), invisible format
#: characters (bidi overrides, zero-width joiners), line and paragraph separators, surrogates.
UNSAFE_CATEGORIES: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def server_text(text: object, limit: int = MAX_SERVER_TEXT) -> str:
    """Server-supplied text made fit for a one-line reason or a cell: each unsafe character
    (:data:`UNSAFE_CATEGORIES`) shown as its Python escape (``\\x07``, ``\\x1b``, ``\\udcff``,
    ``\\u202e``), at most ``limit`` characters, then ``...`` when it was longer. Text that is
    already safe comes back as it is, so applying it twice changes nothing.
    """
    text = str(text)
    if len(text) <= limit and text.isprintable():  # the common case, at C speed
        return text
    shown = "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char) in UNSAFE_CATEGORIES
        else char
        for char in text[: limit + 1]
    )
    return shown[:limit] + "..." if len(shown) > limit else shown


def json_text(value: Any, **options: Any) -> str:
    """``value`` as JSON text that is safe text too: every unsafe character inside its strings
    written as its ``\\u`` escape. JSON reads the escape back as the same character, so the
    document is unchanged (a lone surrogate included); only its text is safe to store.
    ``options`` go to :func:`json.dumps` (which raises as it does).
    """
    text = json.dumps(value, ensure_ascii=False, **options)
    if text.isprintable():
        return text
    return "".join(
        json.dumps(char)[1:-1] if unicodedata.category(char) in UNSAFE_CATEGORIES else char
        for char in text
    )
