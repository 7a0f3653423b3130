"""What the two file commands (``normalize``, ``resolve``) share: their file options and the
way they report a file they cannot use, so both read, fail and write alike.

The reading itself is :mod:`airflow_doi.io_tables`; this module only turns flags into its
arguments and its findings into stderr lines. Standard library only (``--help`` must work on
any install).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

#: Exit status when the input cannot be used as asked.
EXIT_INPUT = 2


def add_file_options(parser: argparse.ArgumentParser, *, escape_default: bool) -> None:
    """IN, --column, --output and the format, encoding and delimiter flags."""
    parser.add_argument("input", type=Path, metavar="IN", help="CSV (or .csv.gz) or Parquet file")
    parser.add_argument(
        "--output", "-o", required=True, type=Path, metavar="OUT",
        help="file to write (.parquet/.pq/.parq: Parquet, anything else: CSV, always UTF-8); "
        "it appears only when complete, with your umask's permissions",
    )
    parser.add_argument(
        "--input-format", choices=("csv", "parquet"), default=None,
        help="input format (default: from IN's extension)",
    )
    parser.add_argument(
        "--format", choices=("csv", "parquet"), default=None,
        help="output format (default: from OUT's extension)",
    )
    parser.add_argument(
        "--encoding", default="utf-8",
        help="encoding of a CSV input, e.g. latin-1 or cp1252 (common in library exports). "
        "With utf-8, a cell that is not UTF-8 is kept with U+FFFD for the bad bytes and "
        "counted; any other encoding is decoded strictly. Output CSV is always UTF-8",
    )
    parser.add_argument(
        "--delimiter", default=",",
        help="field separator of a CSV input: one character, e.g. ';' or 'tab' "
        "(default: %(default)r)",
    )
    what = ("the input, url and error columns" if escape_default
            else "every text cell of your own columns")
    parser.add_argument(
        "--escape-formulas", action=argparse.BooleanOptionalAction, default=escape_default,
        help=f"in CSV output, put a ' before cells of {what} that start with = + - @, tab or "
        "carriage return, so a spreadsheet shows them instead of running them as formulas",
    )


def csv_options(args: argparse.Namespace) -> Any:
    """The :class:`~airflow_doi.io_tables.CsvOptions` the flags ask for."""
    from airflow_doi.io_tables import CsvOptions

    return CsvOptions(encoding=args.encoding, delimiter=args.delimiter)


def say(command: str, text: str) -> None:
    print(f"airflow-doi {command}: {text}", file=sys.stderr)


def input_error(command: str, error: Exception) -> int:
    """Report a file that cannot be used as asked; the exit status to return."""
    say(command, f"error: {error}")
    return EXIT_INPUT


def report_reading(command: str, reader: Any, repaired: dict[str, int], options: Any) -> None:
    """Warnings about rows and cells that were kept but are not what the file said."""
    if reader.malformed_count:
        examples = "; ".join(repr(row) for row in reader.malformed[:3])
        say(command, f"warning: {reader.malformed_count:,} CSV rows had the wrong number of "
            f"fields (kept, flagged malformed_row), e.g. {examples}")
    if repaired:
        total = sum(repaired.values())
        columns = ", ".join(f"{name} ({count:,})" for name, count in repaired.items())
        hint = ("; if the file is Latin-1 or Windows-1252, run again with --encoding latin-1 "
                "or --encoding cp1252") if reader.all_text else ""
        cells = f"{total:,} cell was" if total == 1 else f"{total:,} cells were"
        say(command, f"warning: {cells} not UTF-8 and {'is' if total == 1 else 'are'} "
            "written with U+FFFD "
            f"in place of the bad bytes, in column(s) {columns}{hint}")
    if not options.lenient_utf8:
        say(command, f"note: read as {options.encoding}, written as UTF-8")
