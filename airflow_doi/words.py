"""Counts in words, as every summary line and report says them: ``1 row``, ``2,000 rows``.

One helper, so that no message says ``1 requests`` (standard library only: the command
line, the library's summaries and the report all use it).
"""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, one: str, many: str = "") -> str:
    """The count, with thousands separators, and the word it takes: ``1 retry``, ``0 retries``
    (``many``: the plural where it is not ``one`` and an s)."""
    return f"{count:,} {one if count == 1 else many or one + 's'}"
