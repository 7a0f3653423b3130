"""``airflow-doi repair``: suggest (and verify) repairs for a column of damaged DOIs.

A twin of the other file commands: the file options and error reporting are
:mod:`airflow_doi.cli._files`'s, the proxy options :mod:`airflow_doi.cli._proxy`'s, and the
column is read and the file copied out by :mod:`airflow_doi.files.jobs`, so a file normalize
or resolve accepts (or refuses) is accepted (or refused, in the same words) here. The rules
are :mod:`airflow_doi.repair.rules`'s and the verification :mod:`airflow_doi.repair.verify`'s.
"""

from __future__ import annotations

import argparse
from typing import Any

from airflow_doi.cli import _proxy
from airflow_doi.cli._files import (
    add_file_options,
    csv_options,
    input_error,
    output_shown,
    report_reading,
    say,
)
from airflow_doi.words import plural

__all__ = ["ERROR_COLUMN", "added_columns", "register", "run"]

#: The one line of ``airflow-doi --help`` for this command.
HELP = "suggest and verify repairs for damaged DOIs (appends doi_suggestion columns)"
DESCRIPTION = """\
Suggest repairs for damaged DOIs in a CSV or Parquet column, and check them on the proxy.

Every input row and column is kept, in order, and four columns are appended:
doi_suggestion (the repaired DOI, empty when there is none), doi_suggestion_rule (the rules
that produced it, e.g. appended_url+trailing_punctuation), doi_suggestion_verified (true:
the proxy knows it; false: it does not; empty: not checked) and doi_suggestion_error (empty
when the row was decided; bad_encoding for a cell that is not UTF-8, malformed_row for a CSV
row with the wrong number of fields (neither is looked at), or why the proxy could not
decide). A value whose own DOI exists is never repaired. With --no-verify nothing is sent and
every suggestion is unchecked. If the input already has a column of one of these names (in
any case), they are named after the DOI column instead (doi_raw_suggestion, ...).

The file is read as normalize and resolve read it: the encoding and separator found from the
file (--encoding, --delimiter override), gzip, ragged and huge rows, missing-value markers
(--na-values), and the same error messages; a CSV output keeps the input's separator and
line ending. Each distinct DOI is asked once per run, under the same
rate limit, cache and retry budget as airflow-doi resolve; the answers are kept (by default
in the user's cache directory, one file per proxy; --cache FILE names it, --no-cache keeps
none), so a second run, or one stopped by Ctrl-C and started again, asks only for the rest.
The DOI column is held in memory (the rest of the file is streamed). A progress bar is drawn
only on a terminal.

Exit status: 0 done; 2 the input or an option cannot be used as asked (no such file or
column, a bad resolver setting, a missing extra); 3 the share
of checked rows the proxy could not decide is above --max-error-share (the output is still
written)."""

#: Why a row was left undecided: appended after the library's three columns.
ERROR_COLUMN = "doi_suggestion_error"


def added_columns() -> tuple[str, ...]:
    """The appended columns: the library's three (:data:`airflow_doi.repair.REPAIR_COLUMNS`),
    then :data:`ERROR_COLUMN`. A function, not a constant: the repair rules compile their
    regexes on import (~80 ms), which every other command's start would pay."""
    from airflow_doi.repair.rules import REPAIR_COLUMNS

    return (*REPAIR_COLUMNS, ERROR_COLUMN)


def _kinds() -> dict[str, str]:
    """The appended columns' Arrow types, by name: text, but for whether it was verified."""
    return dict.fromkeys(added_columns(), "large_string") | {"doi_suggestion_verified": "bool_"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("repair", help=HELP, description=DESCRIPTION)
    parser.add_argument("--column", default="doi", help="column holding the DOIs (default: doi)")
    # As normalize: the user's own columns are copied as they are unless asked; the appended
    # ones hold DOIs (they start with "10.") and our own words, never a formula.
    add_file_options(parser, escape_default=False)
    parser.add_argument("--no-verify", action="store_true", help="suggest only; send nothing")
    _proxy.add_proxy_options(
        parser,
        cache_help="SQLite cache file (shared with resolve)",
        give_up_help="seconds of continuous proxy failure after which unchecked rows stay "
        "undecided",
        error_share_help="exit 3 when more than this share (0 to 1) of the rows checked on the "
        "proxy were left undecided because it failed; 0 fails on any, 1 never",
    )
    parser.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported before the file is read: a missing [resolve] extra is reported at once.
    from airflow_doi.files.jobs import BAD_ENCODING, append_columns, repair_cells
    from airflow_doi.files.read import TableInputError
    from airflow_doi.repair.verify import RepairStats, repair, repair_columns

    terminal = not args.no_verify and _proxy.progress_wanted(args)
    try:
        config = _proxy.proxy_config(args)
    except (TypeError, ValueError) as error:
        return input_error("repair", ValueError(f"{error}; check the resolver options"))
    try:
        read = _proxy.read_input(args, cache=not args.no_verify)
    except (ValueError, TableInputError) as error:
        return input_error("repair", error)
    cells, reasons = repair_cells(read.sent, read.flags)
    stats = RepairStats()
    with _proxy.progress_bar(terminal) as progress:
        results = repair(cells, verify=not args.no_verify, config=config, cache=args.cache,
                         progress=progress, stats=stats)
    unanswered = _proxy.never_answered(
        "repair", args, stats.resolver,
        advice="; or pass --no-verify for the suggestions without the proxy")
    added = repair_columns(results)
    added[ERROR_COLUMN] = [
        reason or result.error for result, reason in zip(results, reasons, strict=True)
    ]
    try:
        reader, repaired, _ = append_columns(
            args.input, args.output, args.column, added, _kinds(), input_format=args.input_format,
            output_format=read.out_format, options=csv_options(args),
            escape=args.escape_formulas, encoding=read.encoding)
    except TableInputError as error:
        return input_error("repair", error)
    say("repair", f"{output_shown(args.output)}: {stats.summary()}")
    _proxy.cache_note("repair", args)
    bad = reasons.count(BAD_ENCODING)
    if bad and args.column not in repaired:  # a Parquet binary column kept as binary
        repaired[args.column] = bad
    # What the first read found out (the header matched, the markers) holds for the copy too.
    reader.matched, reader.na_count = read.reader.matched, read.reader.na_count
    report_reading("repair", reader, repaired, csv_out=read.out_format == "csv",
                   encoding=read.encoding)
    undecided = sum(1 for result in results if result.error is not None)
    checked = 0 if args.no_verify else sum(
        1 for result in results if result.candidates or result.short_doi)
    if checked and undecided / checked > args.max_error_share:
        if unanswered:  # said, with the same advice
            return _proxy.EXIT_ERRORS
        say("repair", f"error: the proxy could not decide {undecided:,} of "
            f"{plural(checked, 'row')} with candidate repairs ({undecided / checked:.1%}, "
            f"above --max-error-share {args.max_error_share:g}); {output_shown(args.output)} "
            "holds every row, those unverified: check --base-url and the proxy, then run again "
            f"({_proxy.sent_again(args, 'the undecided DOIs')}), or pass --no-verify for the "
            "suggestions without the proxy")
        return _proxy.EXIT_ERRORS
    return 0
