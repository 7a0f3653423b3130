"""Tables in files: sniff how a CSV was written (:mod:`.sniff`), read it or a Parquet file
(:mod:`.read`), write one (:mod:`.write`), and the column passes the commands share
(:mod:`.jobs`).

This package's own namespace holds only the values the command line needs before any table
is touched (standard library only, so ``airflow-doi --help`` stays fast).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["BEFORE_PUT_IN_PLACE", "DEFAULT_CHUNK_ROWS", "MALFORMED_REASON"]

#: Rows read per batch, unless a command is told otherwise.
DEFAULT_CHUNK_ROWS = 100_000
#: The reason of a CSV row that could not be aligned with the header (a file-level reason,
#: beside the standard's reasons): never a valid DOI row, never sent to a server.
MALFORMED_REASON = "malformed_row"
#: Called, in order, once an output is complete and just before :mod:`.write` puts it in
#: place. The command line registers one that makes a Ctrl-C from then on wait for the end of
#: the command: the work is done, so it ends as done (its summary said), not as interrupted.
BEFORE_PUT_IN_PLACE: list[Callable[[], None]] = []
