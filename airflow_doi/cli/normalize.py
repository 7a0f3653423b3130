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
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DESCRIPTION = """\
Add normalized DOI columns to a CSV or Parquet file.

Every input row and column is kept, in order, and written back as it was read (CSV cells are
text, so ids like 00123 stay as they are; a CSV output keeps the input's separator and line
ending and quotes a cell only when it must). Five columns are appended: doi (normalized,
empty when invalid), doi_key (comparison key), doi_valid (true/false), doi_reason (empty when
valid: empty, bad_encoding, bad_character, bad_directory, bad_registrant, missing_suffix,
reserved_suffix, malformed_row) and doi_url. If the input already has a column of one of
these names (in any case), they are named after the DOI column instead: doi_normalized,
doi_key, ... for a column doi (DOI_normalized, DOI_key, ... for DOI); --prefix chooses.

How a CSV was written is found from the file: the encoding (a BOM, else UTF-8 if it is, else
the likeliest code page, e.g. cp1252) and the separator (, ; tab |), said on stderr;
--encoding and --delimiter override. --column finds ' DOI ' for doi when only one header
matches once trimmed and case-folded. In the DOI column, missing-value markers (NA, N/A,
NULL, -, ...: --na-values) read as missing (reason empty). A gzip-compressed CSV is read as
is. CSV output is UTF-8. In a UTF-8 file, a cell that is not UTF-8 is written back with
U+FFFD for the bad bytes and counted on stderr (in the DOI column it is reported as
bad_encoding). No row is ever dropped: a CSV row with the wrong number of fields or a quote
left open is kept (padded with empty cells, or its extra fields joined into its last cell)
with doi_valid=false and doi_reason=malformed_row. The file is streamed in chunks, so memory
stays flat whatever its size.

Exit status: 0 done; 2 the input cannot be used as asked (no such file or column, empty
file, two columns answering to --column, a --prefix that clashes, a missing extra)."""

#: The appended columns, before ``--prefix``.
ADDED_COLUMNS: tuple[str, ...] = ("doi", "doi_key", "doi_valid", "doi_reason", "doi_url")
DEFAULT_CHUNK_ROWS = 100_000


def register(subparsers: Any) -> None:
    from airflow_doi.cli import HelpFormatter
    from airflow_doi.cli._files import add_file_options

    parser = subparsers.add_parser(
        "normalize",
        help="add doi, doi_key, doi_valid, doi_reason, doi_url columns to a CSV/Parquet file",
        description=DESCRIPTION,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--column", required=True, help="the column holding the DOIs")
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
        "--base-url", default=None, help="resolver base for doi_url (default https://doi.org/)"
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


#: doi_reason of a CSV row that could not be aligned with the header (a CLI-level reason,
#: beside the standard's reasons).
MALFORMED_REASON = "malformed_row"


@dataclass
class Summary:
    """Counts for the one-line report on stderr, and the cells that had to be repaired."""

    rows: int = 0
    valid: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    #: Column -> cells that were not UTF-8 (written with U+FFFD).
    repaired: Counter[str] = field(default_factory=Counter)
    #: The names of the appended columns (``ADDED_COLUMNS``, unless renamed to avoid a clash).
    added: list[str] = field(default_factory=list)

    def line(self) -> str:
        reasons = ", ".join(f"{name}={count:,}" for name, count in sorted(self.reasons.items()))
        invalid = self.rows - self.valid
        detail = f" ({reasons})" if reasons else ""
        rows = "1 row" if self.rows == 1 else f"{self.rows:,} rows"
        return f"{rows}: {self.valid:,} valid, {invalid:,} not{detail}"


def run(args: argparse.Namespace) -> int:
    from airflow_doi.cli._files import csv_options, input_error, report_reading, say
    from airflow_doi.files.read import TableInputError

    try:
        options = csv_options(args)
        summary, reader = _normalize(
            args.input,
            args.output,
            column=args.column,
            decode=args.decode,
            chunk_rows=args.chunk_size,
            input_format=args.input_format,
            output_format=args.format,
            prefix=args.prefix,
            base_url=args.base_url,
            options=options,
            escape=args.escape_formulas,
        )
    except TableInputError as error:
        return input_error("normalize", error)
    say("normalize", f"{args.output}: {summary.line()}")
    if summary.added and summary.added[0] != (args.prefix or "") + ADDED_COLUMNS[0]:
        say("normalize", f"note: {args.input} already has a column named as one of ours, so "
            f"the added columns are {', '.join(summary.added)} (--prefix chooses others)")
    from airflow_doi.files.read import detect_format

    csv_out = detect_format(args.output, args.format) == "csv"
    report_reading("normalize", reader, dict(summary.repaired), csv_out=csv_out)
    return 0


def normalize_file(
    source: Path,
    target: Path,
    *,
    column: str,
    decode: str = "auto",
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    input_format: str | None = None,
    output_format: str | None = None,
    prefix: str = "",
    base_url: str | None = None,
    encoding: str | None = None,
    delimiter: str | None = None,
    na_values: tuple[str, ...] | None = None,
    escape_formulas: bool = False,
) -> tuple[Summary, int, list[str]]:
    """Stream ``source`` to ``target`` with the DOI columns added.

    ``encoding`` and ``delimiter`` are found from the file when None; ``na_values`` are the
    DOI column's missing-value markers (None: pandas' defaults). Returns the summary, the
    number of malformed CSV rows (kept, flagged ``malformed_row``) and a few of them.
    """
    from airflow_doi.files.read import CsvOptions

    summary, reader = _normalize(
        source, target, column=column, decode=decode, chunk_rows=chunk_rows,
        input_format=input_format, output_format=output_format, prefix=prefix,
        base_url=base_url, options=CsvOptions(encoding, delimiter, na_values),
        escape=escape_formulas,
    )
    return summary, reader.malformed_count, reader.malformed


def _normalize(
    source: Path,
    target: Path,
    *,
    column: str,
    decode: str,
    chunk_rows: int,
    input_format: str | None,
    output_format: str | None,
    prefix: str,
    base_url: str | None,
    options: Any,
    escape: bool,
) -> tuple[Summary, Any]:
    """The work of :func:`normalize_file`; also returns the reader that read the file."""
    import pyarrow as pa

    from airflow_doi.files.read import (
        TableInputError,
        added_names,
        detect_format,
        read_table,
        require_column,
    )
    from airflow_doi.files.write import check_output
    from airflow_doi.presentation import DEFAULT_BASE_URL

    if decode not in ("auto", "always", "never"):
        raise TableInputError(f"decode must be auto, always or never, not {decode!r}")
    check_output(source, target)
    out_format = detect_format(target, output_format)
    base = base_url or DEFAULT_BASE_URL

    def one_pass(reader: Any) -> Summary:
        found = require_column(reader, column, source)
        try:
            added = added_names(ADDED_COLUMNS, reader.names, found, prefix)
        except TableInputError as error:
            raise TableInputError(f"{source}: {error}") from None
        text = pa.large_string()
        schema = reader.schema
        if out_format == "csv":  # CSV holds text: a Parquet binary column is written as text
            schema = pa.schema([
                pa.field(item.name, text) if _is_binary(item.type) else item for item in schema
            ])
        for name, kind in zip(added, (text, text, pa.bool_(), text, text), strict=True):
            schema = schema.append(pa.field(name, kind))
        guard = escape and out_format == "csv"
        summary = _stream(reader, target, out_format, schema, found, decode, base, guard)
        summary.added = added
        return summary

    return read_table(
        source, detect_format(source, input_format), one_pass,
        chunk_rows=chunk_rows, options=options,
    )


def _is_binary(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_binary(kind) or pa.types.is_large_binary(kind))


def _read_ahead(batches: Iterable[Any], pool: ThreadPoolExecutor) -> Iterator[Any]:
    """``batches``, each one read on ``pool`` while the caller works on the one before."""
    iterator = iter(batches)
    coming = pool.submit(next, iterator, None)
    while (batch := coming.result()) is not None:
        coming = pool.submit(next, iterator, None)
        yield batch


def _stream(
    reader: Any, target: Path, out_format: Any, schema: Any, column: str, decode: str,
    base: str, escape: bool,
) -> Summary:
    """One pass: every batch of ``reader`` analysed and written; the file appears at the end."""
    from airflow_doi.files.write import writing

    summary = Summary()
    # The writer runs on its own thread, one batch behind: Arrow's CSV and Parquet writers
    # release the GIL, so writing a batch overlaps reading and analysing the next one.
    # Likewise the next batch is read while this one is analysed.
    background, ahead = ThreadPoolExecutor(1), ThreadPoolExecutor(1)
    with writing(target, out_format, schema, reader.dialect) as writer:
        try:
            _stream_batches(reader, writer, schema, column, decode, base, escape, summary,
                            background, ahead)
        except BaseException:
            # Ctrl-C or an error: the batch being written is finished before the file is
            # closed (and removed), but the read-ahead is not waited for: Arrow's reader can
            # take long to wind down, and its next batch is not wanted.
            ahead.shutdown(wait=False, cancel_futures=True)
            background.shutdown(wait=True, cancel_futures=True)
            raise
        background.shutdown()
        ahead.shutdown()
    return summary


def _stream_batches(
    reader: Any, writer: Any, schema: Any, column: str, decode: str, base: str, escape: bool,
    summary: Summary, background: ThreadPoolExecutor, ahead: ThreadPoolExecutor,
) -> None:
    """The body of :func:`_stream`: each batch read ahead, analysed, and written behind."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from airflow_doi.columns import analyse
    from airflow_doi.files.read import MALFORMED_FLAG, text_column
    from airflow_doi.files.write import escape_formulas

    text = pa.large_string()
    pending: Future[None] | None = None
    for batch in _read_ahead(reader.batches, ahead):
        flags = None
        if reader.flags_malformed:
            flags = batch.column(MALFORMED_FLAG)
            batch = batch.drop_columns([MALFORMED_FLAG])
        columns: list[Any] = []
        doi_text: Any = None
        for index, (name, values) in enumerate(
                zip(batch.schema.names, batch.columns, strict=True)):
            kept = values  # Parquet columns keep their own types, unless CSV needs text
            if reader.all_text or schema.field(index).type != values.type:
                kept, repaired = text_column(values)
                if repaired:
                    summary.repaired[name] += len(repaired)
                if name == column:
                    doi_text = (kept, repaired)
            columns.append(escape_formulas(kept) if escape else kept)
        if doi_text is None:  # a Parquet text column, copied as it is
            doi_text = text_column(batch.column(column))
        dois, overrides = doi_text
        dois = reader.missing_as_null(dois)  # NA, N/A, NULL...: read as missing
        result = analyse(dois, decode, overrides)  # type: ignore[arg-type]
        added = [result.doi, result.key(), result.valid_array, result.reason,
                 result.url(base)]
        if flags is not None and pc.any(flags).as_py():
            # A row that could not be aligned with the header is never a valid DOI row.
            null = pa.scalar(None, text)
            added = [
                pc.if_else(flags, null, added[0]),
                pc.if_else(flags, null, added[1]),
                pc.if_else(flags, False, added[2]),
                pc.if_else(flags, pa.scalar(MALFORMED_REASON, text), added[3]),
                pc.if_else(flags, null, added[4]),
            ]
        columns += added
        if pending is not None:
            pending.result()  # at most one batch waits: memory stays bounded
        pending = background.submit(
            writer.write_table, pa.Table.from_arrays(columns, schema=schema))
        summary.rows += batch.num_rows
        summary.valid += pc.sum(added[2]).as_py() or 0
        reasons = pc.value_counts(pc.drop_null(added[3])).to_pylist()
        summary.reasons.update({item["values"]: item["counts"] for item in reasons})
    if pending is not None:
        pending.result()
