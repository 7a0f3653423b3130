"""``airflow-doi resolve``: resolve a CSV or Parquet column through the proxy REST API.

Reads files exactly as ``normalize`` does (:mod:`airflow_doi.files.read`) and writes one row
per input row. Rows the resolver gave up on are ``status=error``; the exit status turns
non-zero for them only above ``--max-error-share``, so a dead proxy cannot pass for success.
"""

from __future__ import annotations

import argparse
from typing import Any

from airflow_doi.cli import _proxy
from airflow_doi.cli._files import add_file_options, input_error

__all__ = ["register", "run"]

#: What our columns are named after when a kept column has one of their names.
STEM = "resolution"
#: The one line of ``airflow-doi --help`` for this command.
HELP = "resolve a column of DOIs through the doi.org proxy REST API"
DESCRIPTION = """\
Resolve a column of DOIs through the doi.org proxy REST API (or any proxy at --base-url).

Writes one row per input row, in order: the input's columns (all of them, as normalize keeps
them, or those of --keep-columns), then input (the cell as text), doi, key, status, url,
response_code, http_status, attempts, error, resolved_at, expires_at, url_raw (the URL
as the proxy sent it, control characters and lone surrogates as escapes such as \\x07 or
\\udcff, at most 2,048 characters; url holds it only when it is a safe http(s) URL of at most
2,048 characters, never cut), agency (who registered the DOI, when doi.org's Which RA? was
asked). status is resolved, registered
(--existence-only: the DOI exists, its URL not asked), no_values, not_found, invalid (never
sent; the reason is in error: bad_encoding
for a cell that is not UTF-8, malformed_row for a CSV row with the wrong number of fields)
or error (the resolver gave up; the reason is in error). If a kept column already has one of
these names (in any case, as a column doi), ours are named resolution_input, resolution_doi,
resolution_key, resolution_status, ... instead and stderr says so; --prefix chooses. Rows
sharing a comparison key cost one request. Answers are kept as they come (by default in the
user's cache directory, one file per proxy: --cache FILE names it, --no-cache keeps none), so
a run stopped and started again asks only for the rest. The file is read as normalize reads
it: same encodings, delimiters, gzip and error messages; a CSV output keeps its separator and
line endings, in UTF-8 with a BOM when the input was an Excel-style export (--output-encoding
chooses).

A progress bar is drawn only on a terminal; warnings (the proxy failing, the breaker opening
or giving up) go to stderr as single lines, and a one-line summary ends the run.

Exit status: 0 done; 2 the input cannot be used as asked (no such file or column, bad
option, a missing extra); 3 the share of sent rows that ended in status=error is above
--max-error-share (the output is still written)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("resolve", help=HELP, description=DESCRIPTION)
    parser.add_argument("--column", default="doi", help="column holding the DOIs (default: doi)")
    _proxy.add_keep_options(parser, STEM)
    add_file_options(parser, escape_default=True)
    _proxy.add_proxy_options(
        parser,
        cache_help="SQLite cache file (also the checkpoint)",
        give_up_help="seconds of continuous proxy failure after which unfinished rows end as error",
        error_share_help="exit 3 when more than this share (0 to 1) of the rows sent to the "
        "proxy ended in status=error; 0 fails on any error, 1 never",
    )
    parser.add_argument(
        "--type", action="append", default=[], dest="types",
        help="keep only handle values of this type (repeatable), e.g. URL",
    )
    parser.add_argument(
        "--index", action="append", type=int, default=[], dest="indexes",
        help="keep only handle values at this index (repeatable)",
    )
    parser.add_argument("--auth", action="store_true", help="ask the proxy to bypass its cache")
    existence = parser.add_mutually_exclusive_group()
    existence.add_argument(
        "--existence-only", action="store_true",
        help="ask only whether each DOI exists (doi.org's Which RA?, about 50 DOIs a request): "
        "status registered with its agency, or not_found; no URLs",
    )
    existence.add_argument(
        "--existence-first", action="store_true",
        help="ask Which RA? first and the handle only of the DOIs that exist (fewer requests "
        "where many DOIs are not registered)",
    )
    parser.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported before the file is read: a missing [resolve] extra is reported at once.
    from airflow_doi.files.jobs import result_columns
    from airflow_doi.files.read import TableInputError
    from airflow_doi.resolver import ResolverStats, resolve

    terminal = _proxy.progress_wanted(args)
    try:
        config = _proxy.proxy_config(
            args, types=tuple(args.types), indexes=tuple(args.indexes), auth=args.auth,
            urls=not args.existence_only, existence_first=args.existence_first)
        read = _proxy.read_input(args)
    except (TypeError, ValueError, TableInputError) as error:
        return input_error("resolve", error)
    stats = ResolverStats()
    results = _proxy.ask(resolve, read, args, config, terminal, stats)
    unanswered = _proxy.never_answered("resolve", args, stats)
    output = _output()
    added = result_columns(results, read.values, read.flags, "status", output.columns)
    del results  # the cells are in the columns; the results' own objects may go
    return _proxy.finish("resolve", args, read, added, stats.summary(), output,
                         unanswered=unanswered)


def _output() -> _proxy.Output:
    from airflow_doi.resolver import COLUMNS

    return _proxy.Output(
        COLUMNS, integers=("response_code", "http_status", "attempts"),
        guarded=("input", "url", "url_raw", "error"), status="status", ended="status=error",
        advice="check --base-url and the proxy", stem=STEM)
