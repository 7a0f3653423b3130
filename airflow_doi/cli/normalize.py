"""``airflow-doi normalize``: add normalized DOI columns to a CSV or Parquet file.

Every input row and column is kept, in order; five columns are appended (names can take a
``--prefix``): ``doi`` (normalized, null when invalid), ``doi_key`` (comparison key),
``doi_valid`` (true/false), ``doi_reason`` (null when valid) and ``doi_url``. The file is
streamed in chunks, so its size is bounded by the disk, not by memory.

Files are read by :func:`airflow_doi.files.read.read_table`, as ``resolve`` reads them.
Exit codes: 0 done (including rows that are not DOIs: they are reported, not fatal); 2 the input
cannot be used as asked (no such file or column, empty file, two columns answering to
``--column``, a ``--prefix`` that clashes, bytes that are not the named ``--encoding``).
"""

from __future__ import annotations

import argparse
from typing import Any

from airflow_doi.cli._files import (
    add_file_options,
    check_output,
    csv_options,
    given,
    input_error,
    output_encoding,
    output_shown,
    report_reading,
    say,
)
from airflow_doi.files import DEFAULT_CHUNK_ROWS
from airflow_doi.presentation import DEFAULT_BASE_URL

#: The one line of ``airflow-doi --help`` for this command.
HELP = "add doi, doi_key, doi_valid, doi_reason, doi_url columns to a CSV/Parquet file"
DESCRIPTION = """\
Add normalized DOI columns to a CSV or Parquet file.

Every input row and column is kept, in order, and written back as it was read (CSV cells are
text, so ids like 00123 stay as they are; a CSV output keeps the input's separator and line
ending and quotes a cell only when it must). Five columns are appended: doi (normalized,
empty when invalid), doi_key (comparison key), doi_valid (true/false), doi_reason (empty when
valid: empty, bad_encoding, bad_character, short_doi, bad_directory, bad_registrant,
missing_suffix, reserved_suffix, malformed_row) and doi_url. If the input already has a column of
these names (in any case), they are named after the DOI column instead: doi_normalized,
doi_key, ... for a column doi (DOI_normalized, DOI_key, ... for DOI); --prefix chooses.

How a CSV was written is found from the file: the encoding (a BOM, else UTF-8 if it is, else
the likeliest code page, e.g. cp1252) and the separator (, ; tab |), said on stderr;
--encoding and --delimiter override. --column finds ' DOI ' for doi when only one header
matches once trimmed and case-folded. In the DOI column, missing-value markers (NA, N/A,
NULL, -, ...: --na-values) read as missing (reason empty). A gzip-compressed CSV is read as
is. CSV output is UTF-8, with a BOM when the input was an Excel-style export (a code page or
a BOM) so that Excel reads it right; --output-encoding chooses. In a UTF-8 file, a cell that
is not UTF-8 is written back with U+FFFD for the bad bytes and counted on stderr (in the DOI
column it is reported as bad_encoding). No row is ever dropped: a CSV row with the wrong
number of fields or a quote left open is kept (padded with empty cells, or its extra fields
joined into its last cell) with doi_valid=false and doi_reason=malformed_row. The file is
streamed in chunks, so memory stays flat whatever its size.

Exit status: 0 done; 2 the input cannot be used as asked (no such file or column, empty
file, two columns answering to --column, a --prefix that clashes, a cell --output-encoding
cannot hold, a missing extra)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("normalize", help=HELP, description=DESCRIPTION)
    parser.add_argument("--column", default="doi", help="column holding the DOIs (default: doi)")
    add_file_options(parser, escape_default=False)
    parser.add_argument(
        "--decode", choices=("auto", "always", "never"), default="auto",
        help="percent-decoding: auto (URL/URN/info forms only), always, never",
    )
    parser.add_argument(
        "--chunk-size", type=_positive, default=DEFAULT_CHUNK_ROWS, metavar="N",
        help="rows per processing chunk; bounds memory",
    )
    parser.add_argument(
        "--prefix", default="",
        help="prefix for the added column names (e.g. clean_); default: none, or names "
        "derived from --column when the input already has one of them",
    )
    parser.add_argument(
        "--base-url", default=None, help=f"resolver base for doi_url (default: {DEFAULT_BASE_URL})"
    )
    parser.set_defaults(func=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def run(args: argparse.Namespace) -> int:
    from airflow_doi.files.jobs import NORMALIZE_COLUMNS, normalize_table
    from airflow_doi.files.read import TableInputError, detect_format

    try:
        encoding = output_encoding(args)
        check_output(args)
        summary, reader = normalize_table(
            args.input, args.output, column=args.column, decode=args.decode,
            chunk_rows=args.chunk_size, input_format=args.input_format, output_format=args.format,
            prefix=args.prefix, base_url=args.base_url, options=csv_options(args),
            escape=args.escape_formulas, output_encoding=encoding, mkdir=args.mkdir,
        )
    except TableInputError as error:
        return input_error("normalize", error)
    say("normalize", f"{output_shown(args.output)}: {summary.line()}")
    damaged = summary.damaged
    if damaged.rows:
        # A decomposed cell looks like its twin on a terminal: its code points are spelled.
        shown = "; ".join(
            f"{ascii(doi) if 'decomposed_unicode' in repair.rules else repr(doi)} (likely "
            f"{repair.doi}, {repair.rule})" for doi, repair, _ in damaged.examples(3))
        cells = "1 valid cell looks" if damaged.rows == 1 else f"{damaged.rows:,} valid cells look"
        say("normalize", f"note: {cells} damaged (valid per the standard, but a repair rule "
            f"changes {'it' if damaged.rows == 1 else 'them'}), e.g. {shown}: airflow-doi repair "
            f"{given(args.input)} --column {args.column} -o repaired.csv suggests repairs and "
            "checks them on the proxy")
    if summary.added and summary.added[0] != (args.prefix or "") + NORMALIZE_COLUMNS[0]:
        say("normalize", f"note: {args.input} already has a column named as one of ours, so "
            f"the added columns are {', '.join(summary.added)} (--prefix chooses others)")
    csv_out = detect_format(args.output, args.format) == "csv"
    report_reading("normalize", reader, dict(summary.repaired), csv_out=csv_out,
                   encoding=encoding)
    return 0
