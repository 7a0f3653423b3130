"""What every file command (``normalize``, ``resolve``, ``enrich``, ``repair``, ``report``)
shares: the file options and the way a file that cannot be used is reported, so all read,
fail and write alike.

The work is :mod:`airflow_doi.files`'s; this module only turns flags into its arguments and
its findings into stderr lines. Standard library only (``--help`` must work on
any install).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

#: Exit status when the input cannot be used as asked.
EXIT_INPUT = 2


def add_file_options(parser: argparse.ArgumentParser, *, escape_default: bool,
                     escaped: str | None = None) -> None:
    """IN, --column, --output and the format, encoding and delimiter flags; ``escaped`` names
    the columns --escape-formulas guards when that is not the default wording."""
    parser.add_argument("input", type=Path, metavar="IN", help="CSV (or .csv.gz) or Parquet file")
    parser.add_argument(
        "--output", "-o", required=True, type=Path, metavar="OUT",
        help="file to write (.parquet/.pq/.parq: Parquet, anything else: CSV on the input's "
        "separator and line endings); it appears only when complete, with your umask's "
        "permissions",
    )
    add_mkdir_option(parser)
    parser.add_argument(
        "--output-encoding", default=None, metavar="ENC",
        help="encoding of a CSV output: utf-8, utf-8-sig (UTF-8 with a BOM), cp1252, latin-1, "
        "utf-16... (default: UTF-8 with a BOM when the input was an Excel-style export, a code "
        "page such as cp1252 or a file with a BOM, so that Excel reads it right; else UTF-8). "
        "A cell the encoding cannot hold stops the run (exit 2, its row and column named) "
        "before the output appears",
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
        "--encoding", default=None,
        help="encoding of a CSV input, e.g. cp1252 or latin-1 (default: found from the file: "
        "a BOM, else UTF-8 if it is, else the likeliest code page). With utf-8, a cell that "
        "is not UTF-8 is kept with U+FFFD for the bad bytes and counted; any other encoding "
        "is decoded strictly. See --output-encoding for the output",
    )
    parser.add_argument(
        "--delimiter", default=None,
        help="field separator of a CSV input: one character, e.g. ';' or 'tab' (default: "
        "found from the file among , ; tab |)",
    )
    add_na_option(parser)
    what = escaped or ("the input, url and error columns" if escape_default
                       else "every text cell of your own columns")
    parser.add_argument(
        "--escape-formulas", action=argparse.BooleanOptionalAction, default=escape_default,
        help=f"in CSV output, put a ' before cells of {what} that start with = + - @, tab or "
        "carriage return, so a spreadsheet shows them instead of running them as formulas",
    )


def add_mkdir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mkdir", action="store_true",
        help="create OUT's folder if it does not exist (default: refuse, so that a mistyped "
        "path does not become a new folder)",
    )


def add_na_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--na-values", default=None, metavar="LIST",
        help="comma-separated cells that mean 'no value' in a CSV's DOI column, read as "
        "missing (reason empty) (default: pandas' list: NA, N/A, n/a, NULL, null, NaN, nan, "
        "None, #N/A, <NA>, ..., and -); '' for none",
    )


def csv_options(args: argparse.Namespace) -> Any:
    """The :class:`~airflow_doi.files.read.CsvOptions` the flags ask for."""
    from airflow_doi.files.read import CsvOptions

    na_values = None
    if args.na_values is not None:
        na_values = tuple(value for value in args.na_values.split(",") if value)
    return CsvOptions(encoding=args.encoding, delimiter=args.delimiter, na_values=na_values)


def say(command: str, text: str) -> None:
    print(f"airflow-doi {command}: {text}", file=sys.stderr)


def input_error(command: str, error: Exception) -> int:
    """Report a file that cannot be used as asked; the exit status to return."""
    say(command, f"error: {error}")
    return EXIT_INPUT


def output_encoding(args: argparse.Namespace) -> Any:
    """The :class:`~airflow_doi.files.write.CsvEncoding` ``--output-encoding`` asks for (None:
    chosen from the input); an unknown name is refused before any work."""
    from airflow_doi.files.write import csv_encoding

    if args.output_encoding is None:
        return None
    return csv_encoding(None, args.output_encoding)


def report_reading(
    command: str, reader: Any, repaired: dict[str, int], *, csv_out: bool,
    encoding: Any = None,
) -> None:
    """How the file was read and how the CSV output is (its encoding, ``encoding`` or the
    default for the input, separator and line endings), and rows and cells that were kept but
    are not what the file said (:func:`~airflow_doi.files.read.reading_notes`): one line
    each."""
    from airflow_doi.files.read import reading_notes
    from airflow_doi.files.write import csv_encoding, describe_csv_output

    written = None
    if csv_out:
        chosen = encoding or csv_encoding(reader.dialect)
        plain = reader.dialect is None or reader.dialect.plain
        if not plain or chosen != csv_encoding(None):
            written = describe_csv_output(reader.dialect, chosen)
    for kind, text in reading_notes(reader, repaired, written=written):
        say(command, f"{kind}: {text}")
