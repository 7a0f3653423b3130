"""Server-supplied text made fit for a message: one line, no control characters, bounded.

Standard library only, so that readers of files (the agencies' data files) and the result
types can use it without the network extra.
"""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = ["MAX_SERVER_TEXT", "server_text"]

#: Longest piece of server-supplied text (a ``message``, a foreign handle) kept in a reason.
MAX_SERVER_TEXT: Final = 200


def server_text(text: object, limit: int = MAX_SERVER_TEXT) -> str:
    """Server-supplied text made fit for a one-line reason: controls shown as ``\\xNN``-style
    escapes, at most ``limit`` characters. A hostile proxy (or a hostile file's member name)
    must not be able to put line breaks, terminal escapes or megabytes into a row's ``error``
    or a log line.
    """
    text = str(text)
    shown = "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs")
        else char
        for char in text[: limit + 1]
    )
    return shown[:limit] + "..." if len(shown) > limit else shown
