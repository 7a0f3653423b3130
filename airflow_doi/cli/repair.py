"""``airflow-doi repair``: suggest (and verify) repairs for a column of damaged DOIs.

Kept thin, and a twin of the other two file commands: the file options and error reporting
are :mod:`airflow_doi.cli._files`'s, the DOI column is read by ``resolve``'s
:func:`~airflow_doi.cli.resolve.read_values` and the copy-out by
:func:`airflow_doi.files.read.read_table`, so a file normalize or resolve accepts (or refuses)
is accepted (or refused, in the same words) here. The rules are :mod:`airflow_doi.repair.rules`'s
and the verification is :mod:`airflow_doi.repair.verify`'s.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from airflow_doi.repair.rules import REPAIR_COLUMNS

__all__ = ["ADDED_COLUMNS", "register", "run"]

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
rate limit, cache and retry budget as airflow-doi resolve; --cache makes a second run free.
The DOI column is held in memory (the rest of the file is streamed). A progress bar is drawn
only on a terminal.

Exit status: 0 done; 2 the input or an option cannot be used as asked (no such file or
column, a bad resolver setting, a missing extra); 3 the share
of checked rows the proxy could not decide is above --max-error-share (the output is still
written)."""

#: The appended columns: the library's three, and why a row was left undecided.
ERROR_COLUMN = "doi_suggestion_error"
ADDED_COLUMNS: tuple[str, ...] = (*REPAIR_COLUMNS, ERROR_COLUMN)
#: doi_suggestion_error of a cell that is not UTF-8 (the standard's reason name).
BAD_ENCODING = "bad_encoding"
DEFAULT_CHUNK_ROWS = 100_000


def register(subparsers: Any) -> None:
    from airflow_doi.cli import HelpFormatter
    from airflow_doi.cli._files import add_file_options
    from airflow_doi.cli.resolve import add_proxy_options

    parser = subparsers.add_parser(
        "repair",
        help="suggest and verify repairs for damaged DOIs (appends doi_suggestion columns)",
        description=DESCRIPTION,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--column", required=True, help="the column holding the DOIs")
    # As normalize: the user's own columns are copied as they are unless asked; the appended
    # ones hold DOIs (they start with "10.") and our own words, never a formula.
    add_file_options(parser, escape_default=False)
    parser.add_argument("--no-verify", action="store_true", help="suggest only; send nothing")
    add_proxy_options(
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
    import sys

    from airflow_doi.cli._files import input_error, report_reading, say
    from airflow_doi.cli.resolve import (
        EXIT_ERRORS,
        _progress,
        check_backends,
        proxy_config,
        require_network_extra,
    )
    from airflow_doi.files.read import TableInputError, detect_format
    from airflow_doi.files.write import check_output
    from airflow_doi.repair.verify import RepairStats, repair

    if not args.no_verify:
        require_network_extra()
    try:
        config = proxy_config(args)
    except (TypeError, ValueError) as error:
        return input_error("repair", ValueError(f"{error}; check the resolver options"))
    try:
        out_format = detect_format(args.output, args.format)
        check_output(args.input, args.output)
        cells, reasons, first = _read_column(args)
        check_backends(args)
    except (ValueError, TableInputError) as error:
        return input_error("repair", error)
    stats = RepairStats()
    terminal = sys.stderr.isatty() and not args.no_progress and not args.no_verify
    with _progress(terminal) as progress:
        results = repair(cells, verify=not args.no_verify, config=config, cache=args.cache,
                         progress=progress, stats=stats)
    added = _added_columns(results, reasons)
    try:
        reader, repaired = _write(args, out_format, added)
    except TableInputError as error:
        return input_error("repair", error)
    say("repair", f"{args.output}: {stats.summary()}")
    bad = reasons.count(BAD_ENCODING)
    if bad and args.column not in repaired:  # a Parquet binary column kept as binary
        repaired[args.column] = bad
    # What the first read found out (the header matched, the markers) holds for the copy too.
    reader.matched, reader.na_count = first.matched, first.na_count
    report_reading("repair", reader, repaired, csv_out=out_format == "csv")
    undecided = sum(1 for result in results if result.error is not None)
    checked = 0 if args.no_verify else sum(1 for result in results if result.candidates)
    if checked and undecided / checked > args.max_error_share:
        say("repair", f"error: the proxy could not decide {undecided:,} of {checked:,} rows "
            f"with candidate repairs ({undecided / checked:.1%}, above --max-error-share "
            f"{args.max_error_share:g}); {args.output} holds every row, those unverified: "
            "check --base-url and the proxy, then run again (with --cache only the undecided "
            "DOIs are sent again), or pass --no-verify for the suggestions without the proxy")
        return EXIT_ERRORS
    return 0


def _read_column(args: argparse.Namespace) -> tuple[list[object], list[str | None], Any]:
    """The DOI column as text, per row why it must not be looked at (or None), and the
    reader that read it.

    A malformed CSV row and a cell that is not UTF-8 are never repaired: the first cannot be
    trusted to hold the DOI, the second would be "repaired" by dropping the bytes that
    ``--encoding`` would have read. Both are flagged in ``doi_suggestion_error``.
    """
    from airflow_doi.cli.normalize import MALFORMED_REASON
    from airflow_doi.cli.resolve import _as_text, read_values

    _, values, flags, reader = read_values(args.input, args.column, args)
    cells: list[object] = []
    reasons: list[str | None] = []
    for index, value in enumerate(values):
        reason = MALFORMED_REASON if flags and flags[index] else None
        if reason is None and isinstance(value, (bytes, bytearray)):
            try:
                value = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                reason = BAD_ENCODING
        cells.append(None if reason else _as_text(value))
        reasons.append(reason)
    return cells, reasons, reader


def _added_columns(results: list[Any], reasons: list[str | None]) -> dict[str, list[object]]:
    from airflow_doi.repair.verify import repair_columns

    added = repair_columns(results)
    added[ERROR_COLUMN] = [
        reason or result.error for result, reason in zip(results, reasons, strict=True)
    ]
    return added


def _write(
    args: argparse.Namespace, out_format: Any, added: dict[str, list[object]]
) -> tuple[Any, dict[str, int]]:
    """Every input row and column, then the added ones; the reader and the cells per column
    that were not UTF-8 (written with U+FFFD)."""
    import pyarrow as pa

    from airflow_doi.cli._files import csv_options
    from airflow_doi.cli.normalize import _is_binary
    from airflow_doi.files.read import (
        MALFORMED_FLAG,
        TableInputError,
        added_names,
        detect_format,
        match_column,
        read_table,
        text_column,
    )
    from airflow_doi.files.write import escape_formulas, writing

    text = pa.large_string()
    kinds = dict.fromkeys(ADDED_COLUMNS, text) | {"doi_suggestion_verified": pa.bool_()}
    rows = len(added[ERROR_COLUMN])

    def one_pass(reader: Any) -> Counter[str]:
        found = match_column(reader.names, args.column)[0]
        try:
            names = added_names(ADDED_COLUMNS, reader.names, found, None)
        except TableInputError as error:  # pragma: no cover (no prefix: always a name)
            raise TableInputError(f"{args.input}: {error}") from None
        schema = reader.schema
        if out_format == "csv":  # CSV holds text: a Parquet binary column is written as text
            schema = pa.schema([
                pa.field(item.name, text) if _is_binary(item.type) else item for item in schema
            ])
        for ours, name in zip(ADDED_COLUMNS, names, strict=True):
            schema = schema.append(pa.field(name, kinds[ours]))
        guard = args.escape_formulas and out_format == "csv"
        repaired: Counter[str] = Counter()
        done = 0
        with writing(args.output, out_format, schema, reader.dialect) as writer:
            for batch in reader.batches:
                if reader.flags_malformed:
                    batch = batch.drop_columns([MALFORMED_FLAG])
                columns: list[Any] = []
                for index, (name, values) in enumerate(
                        zip(batch.schema.names, batch.columns, strict=True)):
                    if reader.all_text or schema.field(index).type != values.type:
                        values, bad = text_column(values)
                        repaired[name] += len(bad)
                    columns.append(escape_formulas(values) if guard else values)
                end = done + batch.num_rows
                columns += [pa.array(added[name][done:end], kinds[name]) for name in ADDED_COLUMNS]
                writer.write_table(pa.Table.from_arrays(columns, schema=schema))
                done = end
            if done != rows:  # the output file is not put in place
                raise TableInputError(
                    f"{args.input}: had {rows:,} rows on the first read and {done:,} on the "
                    "second; was it changed meanwhile? run again once it is complete"
                )
        return +repaired

    repaired, reader = read_table(
        args.input, detect_format(args.input, args.input_format), one_pass,
        chunk_rows=DEFAULT_CHUNK_ROWS, options=csv_options(args),
    )
    return reader, dict(repaired)
