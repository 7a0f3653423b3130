"""Tables in files: sniff how a CSV was written (:mod:`.sniff`), read it or a Parquet file
(:mod:`.read`), write one (:mod:`.write`), and the column passes the commands share
(:mod:`.jobs`).

This package's own namespace holds only the values the command line needs before any table
is touched (standard library only, so ``airflow-doi --help`` stays fast).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = [
    "BEFORE_PUT_IN_PLACE", "DEFAULT_CHUNK_ROWS", "MALFORMED_REASON", "MAX_LINE_CHARS",
    "TableInputError",
]

#: Rows read per batch, unless a command is told otherwise.
DEFAULT_CHUNK_ROWS = 100_000
#: The reason of a CSV row that could not be aligned with the header (a file-level reason,
#: beside the standard's reasons): never a valid DOI row, never sent to a server.
MALFORMED_REASON = "malformed_row"
#: The longest CSV record read whole, in characters (line endings counted): 16 MiB, far
#: beyond a spreadsheet's cell (Excel holds 32,767 characters) and as much as a snapshot's
#: record (``Limits.max_record_bytes``), so that memory is bounded whatever the file. A longer
#: line is cut there and the rest of it dropped; a record over several lines that grows longer
#: (a quoted cell with line breaks, a quote left open) is kept line by line; either way its
#: rows are kept and flagged ``malformed_row`` (:mod:`.read`).
MAX_LINE_CHARS = 16 << 20
#: Called, in order, once an output is complete and just before :mod:`.write` puts it in
#: place. The command line registers one that makes a Ctrl-C from then on wait for the end of
#: the command: the work is done, so it ends as done (its summary said), not as interrupted.
BEFORE_PUT_IN_PLACE: list[Callable[[], None]] = []


class TableInputError(Exception):
    """The input cannot be used as asked (missing file or column, no header...): exit code 2."""
