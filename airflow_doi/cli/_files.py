"""What every file command (``normalize``, ``resolve``, ``enrich``, ``repair``, ``report``)
shares: the file options and the way a file that cannot be used is reported, so all read,
fail and write alike.

The work is :mod:`airflow_doi.files`'s; this module only turns flags into its arguments and
its findings into stderr lines. Standard library only (``--help`` must work on
any install).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: Exit status when the input cannot be used as asked.
EXIT_INPUT = 2
#: Every option whose file a command reads (IN first), as (argument, what the file is to the
#: user): the --output of none may be one of them (:func:`check_output`).
READ_OPTIONS: tuple[tuple[str, str], ...] = (
    ("input", "the input file"),
    ("cache", "the --cache file"),
    ("resolution", "the --resolution file"),
    ("metadata", "the --metadata file"),
    ("snapshot", "a --snapshot file"),
)
#: IN that means standard input, and what messages call it.
STDIN = "-"
STDIN_SHOWN = "standard input"
#: The first bytes of a Parquet file (standard input has no extension to go by).
_PARQUET_MAGIC = b"PAR1"
#: Copies of standard input, by path -> what messages call them; kept after the copy is
#: removed, for the messages printed on the way out.
_SPOOLED: dict[str, str] = {}


class StandardInputError(ValueError):
    """Standard input cannot be read or kept for the run (said as is, exit 2)."""


def add_file_options(parser: argparse.ArgumentParser, *, escape_default: bool,
                     escaped: str | None = None) -> None:
    """IN, --column, --output and the format, encoding and delimiter flags; ``escaped`` names
    the columns --escape-formulas guards when that is not the default wording."""
    parser.add_argument("input", type=Path, metavar="IN",
                        help="CSV (or .csv.gz) or Parquet file; - reads standard input")
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
        help=INPUT_FORMAT_HELP,
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


#: --input-format's help, for every command that reads a file.
INPUT_FORMAT_HELP = ("input format (default: from IN's extension; for standard input, from "
                     "its first bytes)")


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


def files_read(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """Every file the command of ``args`` reads, as (what it is, its path): IN (the database
    file of a ``sqlite:///`` or ``duckdb:///`` IN), --cache, --resolution, --metadata,
    each --snapshot."""
    from airflow_doi.db.connect import database_file, is_database_url

    found: list[tuple[str, Path]] = []
    for name, what in READ_OPTIONS:
        value = getattr(args, name, None)
        for item in value if isinstance(value, list) else [value]:
            if item is None or os.fspath(item) == STDIN:  # a stream, no file to write over
                continue
            if is_database_url(item):
                path = database_file(str(item))
                if path is not None:
                    found.append(("the input database", path))
            else:
                found.append((what, Path(item)))
    return found


def check_output(args: argparse.Namespace) -> None:
    """Refuse, before anything is read, an --output the command cannot write: one of the
    files it reads (:func:`files_read`), a directory, a missing folder without --mkdir
    (``TableInputError``, see :func:`~airflow_doi.files.write.check_output`)."""
    from airflow_doi.files import write

    write.check_output(None, args.output, mkdir=args.mkdir, reads=files_read(args))


def say(command: str, text: str) -> None:
    print(f"airflow-doi {command}: {shown(text)}", file=sys.stderr)


def shown(text: str) -> str:
    """``text`` as the user should read it: a copy of standard input named as they gave it."""
    for path, name in _SPOOLED.items():
        text = text.replace(path, name)
    return text


def given(path: str | os.PathLike[str]) -> str:
    """IN as the user typed it (``-`` for standard input), for a command line to suggest."""
    return STDIN if os.fspath(path) in _SPOOLED else os.fspath(path)


def output_shown(path: str | os.PathLike[str]) -> str:
    """OUT as messages name it: ``-`` is standard output."""
    return "standard output" if os.fspath(path) == STDIN else os.fspath(path)


@contextmanager
def standard_input(args: argparse.Namespace) -> Iterator[None]:
    """With IN ``-``: standard input copied, as bytes, into a temporary file for the run, and
    IN pointing at it (a file is read more than once: its encoding and separator found, then
    read, then copied out beside the results); Parquet is told by its first bytes. Any other
    IN is left alone. Messages name the copy standard input (:func:`shown`)."""
    source = getattr(args, "input", None)
    if source is None or os.fspath(source) != STDIN:
        yield
        return
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise StandardInputError(f"IN is - but this process has no {STDIN_SHOWN}; pass a file")
    if sys.stdin.isatty():
        say(args.command, f"reading IN from the terminal ({STDIN_SHOWN}): type or paste the "
            "rows, then Ctrl-D")
    folder, copy, head = _spool(stream)
    try:
        if head.startswith(_PARQUET_MAGIC) and getattr(args, "input_format", None) is None:
            args.input_format = "parquet"
        args.input = Path(copy) if isinstance(source, Path) else copy
        yield
    finally:
        args.input = source
        shutil.rmtree(folder, ignore_errors=True)


def _spool(stream: Any) -> tuple[str, str, bytes]:
    """``stream`` copied to a new file in a new temporary folder: the folder, the file and
    its first bytes."""
    folder = ""
    try:
        folder = os.path.realpath(tempfile.mkdtemp(prefix="airflow-doi-stdin-"))
        copy = os.path.join(folder, STDIN_SHOWN)
        _SPOOLED[copy] = STDIN_SHOWN
        with open(copy, "xb") as out:
            head: bytes = stream.read(len(_PARQUET_MAGIC))
            out.write(head)
            shutil.copyfileobj(stream, out)
    except BaseException as error:  # a full disk, or a Ctrl-C while reading: nothing left
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
        if not isinstance(error, OSError):
            raise
        raise StandardInputError(
            f"{STDIN_SHOWN} cannot be kept in a temporary file for the run "
            f"({error.strerror or error}): set TMPDIR to a folder with room, or pass a file"
        ) from None
    return folder, copy, head


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
