"""``airflow-doi report``: one self-contained HTML page on the state of a DOI column."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from airflow_doi.cli import missing_extra_message
from airflow_doi.cli._files import (
    INPUT_FORMAT_HELP,
    add_mkdir_option,
    add_na_option,
    check_output,
    csv_options,
    say,
)

__all__ = ["register", "run"]

#: The one line of ``airflow-doi --help`` for this command.
HELP = "write a self-contained HTML quality report of a DOI column"
DESCRIPTION = """\
Write one HTML page on the state of a DOI column: rows, valid share, reasons with the
commonest failing cells, duplicates by comparison key (the same DOI written differently),
forms (bare, doi:, URL, URN), top registrant prefixes and, given a resolution table, the
status mix, registration agencies, failures and repairs. The page embeds its charts and
needs no network to open.

IN is a CSV or Parquet file (- reads standard input), or a database URL with --table:
sqlite:///path.db, duckdb:///path.duckdb, postgresql://user@host/db. Or give --conn-id (an
Airflow SQL connection) and --table instead of IN. Only the DOI column is read (SELECT
"column" FROM "table", read-only); the figures are computed by the same engine as for files.

--resolution takes the output of airflow-doi resolve (CSV/Parquet, or any table with a
status, ra or doi_suggestion column); --resolution-table names such a table (e.g.
doi_resolution, written by DoiResolveOperator) in the same database as the input.

--metadata takes the output of airflow-doi enrich (CSV/Parquet, or any table with a key or
doi_key column and a metadata_status column) and adds a metadata section: coverage, CSL
types, years, journals, publishers, and the works a retraction or correction notice updates;
--metadata-table names such a table (e.g. doi_metadata, written by DoiEnrichOperator) in the
same database as the input.

Exit status: 0 written; 2 the input cannot be used as asked (no such file, table or column,
a resolution or metadata table without the columns the report reads, a missing extra)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("report", help=HELP, description=DESCRIPTION)
    parser.add_argument(
        "input", nargs="?", metavar="IN",
        help="CSV/Parquet file or database URL (see above); - reads standard input",
    )
    parser.add_argument("--column", default="doi", help="column holding the DOIs (default: doi)")
    parser.add_argument("--output", "-o", required=True, type=Path, metavar="OUT.html",
                        help="the HTML file to write (replaced whole, or not at all)")
    add_mkdir_option(parser)
    parser.add_argument("--table", help="table holding the column, for a database input")
    parser.add_argument("--conn-id", help="Airflow SQL connection to read --table from")
    parser.add_argument("--resolution", type=Path, metavar="FILE",
                        help="resolution results: the output of airflow-doi resolve")
    parser.add_argument("--resolution-table", metavar="TABLE",
                        help="resolution table in the input's database (e.g. doi_resolution)")
    parser.add_argument("--metadata", type=Path, metavar="FILE",
                        help="metadata results: the output of airflow-doi enrich")
    parser.add_argument("--metadata-table", metavar="TABLE",
                        help="metadata table in the input's database (e.g. doi_metadata)")
    parser.add_argument(
        "--decode", choices=("auto", "always", "never"), default="auto",
        help="percent-decoding: auto (URL/URN/info forms only), always, never",
    )
    parser.add_argument(
        "--input-format", choices=("csv", "parquet"), default=None, help=INPUT_FORMAT_HELP,
    )
    parser.add_argument("--encoding", default=None,
                        help="encoding of a CSV input (default: found from the file)")
    parser.add_argument("--delimiter", default=None,
                        help="field separator of a CSV input (default: found from the file)")
    add_na_option(parser)
    parser.add_argument("--title", help="heading of the page (default: DOI quality report)")
    parser.set_defaults(func=run)


def _fail(message: str) -> int:
    say("report", f"error: {message}")
    return 2


def run(args: argparse.Namespace) -> int:
    if (args.input is None) == (args.conn_id is None):
        return _fail("give either IN (a file or database URL) or --conn-id, not both or neither")
    if args.resolution_table and args.input is not None and "://" not in args.input:
        return _fail("--resolution-table needs a database input; for a file use --resolution")
    if args.metadata_table and args.input is not None and "://" not in args.input:
        return _fail("--metadata-table needs a database input; for a file use --metadata")
    try:
        # The charts' library first: a missing [report] extra is said before any reading.
        import matplotlib  # noqa: F401

        from airflow_doi.report import ReportInputError, write_report
    except ModuleNotFoundError as error:

        return _fail(missing_extra_message(error.name))
    try:
        check_output(args)  # before any reading: IN, --resolution, --metadata are not OUT
    except ReportInputError as error:
        return _fail(str(error))

    try:
        options = csv_options(args)
        path = write_report(
            args.output, args.input, args.column,
            table=args.table, conn_id=args.conn_id, resolution=args.resolution,
            resolution_table=args.resolution_table, metadata=args.metadata,
            metadata_table=args.metadata_table, decode=args.decode,
            input_format=args.input_format, encoding=options.encoding,
            delimiter=options.delimiter, na_values=options.na_values, title=args.title,
            on_note=lambda kind, text: say("report", f"{kind}: {text}"),
        )
    except ReportInputError as error:
        return _fail(str(error))
    except ModuleNotFoundError as error:

        return _fail(missing_extra_message(error.name))
    say("report", f"wrote {path}")
    return 0
