"""``airflow-doi normalize``: add normalized DOI columns to a CSV or Parquet file.

Every input row and column is kept, in order; five columns are appended (names can take a
``--prefix``): ``doi`` (normalized, null when invalid), ``doi_key`` (comparison key),
``doi_valid`` (true/false), ``doi_reason`` (null when valid) and ``doi_url``. The file is
streamed in chunks, so its size is bounded by the disk, not by memory.

Exit codes: 0 done (including rows that are not DOIs: they are reported, not fatal); 2 the input
cannot be used as asked (no such file or column, empty file, an added column already exists).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DESCRIPTION = """\
Add normalized DOI columns to a CSV or Parquet file.

Every input row and column is kept, in order (CSV cells are read as text, so ids like 00123
stay as they are), and five columns are appended: doi (normalized, empty when invalid),
doi_key (comparison key), doi_valid (true/false), doi_reason (empty when valid: empty,
bad_encoding, bad_character, bad_directory, bad_registrant, missing_suffix, reserved_suffix)
and doi_url. If the input already has one of these names, pass --prefix.

The file is streamed in chunks, so memory stays flat whatever its size. A CSV cell that is not
UTF-8 is written back with U+FFFD for the bad bytes and, in the DOI column, reported as
bad_encoding. A CSV row with the wrong number of fields is kept too (padded with empty cells
or cut to the header's width) with doi_valid=false and doi_reason=malformed_row.

Exit status: 0 done; 2 the input cannot be used as asked (no such file or column, empty
file, an added column already exists)."""

#: The appended columns, before ``--prefix``.
ADDED_COLUMNS: tuple[str, ...] = ("doi", "doi_key", "doi_valid", "doi_reason", "doi_url")
DEFAULT_CHUNK_ROWS = 100_000


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "normalize",
        help="add doi, doi_key, doi_valid, doi_reason, doi_url columns to a CSV/Parquet file",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", type=Path, metavar="IN", help="CSV or Parquet file")
    parser.add_argument("--column", required=True, help="the column holding the DOIs")
    parser.add_argument("--output", "-o", required=True, type=Path, metavar="OUT")
    parser.add_argument(
        "--decode", choices=("auto", "always", "never"), default="auto",
        help="percent-decoding: auto (URL/URN/info forms only, default), always, never",
    )
    parser.add_argument(
        "--chunk-size", type=_positive, default=DEFAULT_CHUNK_ROWS, metavar="N",
        help=f"rows per processing chunk (default {DEFAULT_CHUNK_ROWS:,}); bounds memory",
    )
    parser.add_argument(
        "--format", choices=("csv", "parquet"), default=None,
        help="output format (default: from OUT's extension, .parquet/.pq -> parquet, else csv)",
    )
    parser.add_argument(
        "--input-format", choices=("csv", "parquet"), default=None,
        help="input format (default: from IN's extension)",
    )
    parser.add_argument(
        "--prefix", default="", help="prefix for the added column names (e.g. clean_)"
    )
    parser.add_argument(
        "--base-url", default=None, help="resolver base for doi_url (default https://doi.org/)"
    )
    parser.set_defaults(func=run)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


#: doi_reason of a CSV row that could not be aligned with the header (a CLI-level reason,
#: beside the standard's reasons).
MALFORMED_REASON = "malformed_row"


@dataclass
class Summary:
    """Counts for the one-line report on stderr."""

    rows: int = 0
    valid: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        reasons = ", ".join(f"{name}={count:,}" for name, count in sorted(self.reasons.items()))
        invalid = self.rows - self.valid
        detail = f" ({reasons})" if reasons else ""
        return f"{self.rows:,} rows: {self.valid:,} valid, {invalid:,} not{detail}"


def run(args: argparse.Namespace) -> int:
    from airflow_doi.io_tables import TableInputError

    try:
        summary, skipped, examples = normalize_file(
            args.input,
            args.output,
            column=args.column,
            decode=args.decode,
            chunk_rows=args.chunk_size,
            input_format=args.input_format,
            output_format=args.format,
            prefix=args.prefix,
            base_url=args.base_url,
        )
    except TableInputError as error:
        print(f"airflow-doi normalize: error: {error}", file=sys.stderr)
        return 2
    print(f"airflow-doi normalize: {args.output}: {summary.line()}", file=sys.stderr)
    if skipped:
        print(
            f"airflow-doi normalize: warning: {skipped:,} CSV rows had the wrong number of "
            f"fields (kept as doi_reason={MALFORMED_REASON}), e.g. {examples[:3]!r}",
            file=sys.stderr,
        )
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
) -> tuple[Summary, int, list[str]]:
    """Stream ``source`` to ``target`` with the DOI columns added.

    Returns the summary, the number of malformed CSV rows (kept, flagged ``malformed_row``)
    and a few of them.
    """
    import pyarrow as pa

    from airflow_doi.io_tables import (
        TableInputError,
        detect_format,
        open_csv_lenient,
        open_table,
    )
    from airflow_doi.presentation import DEFAULT_BASE_URL

    if decode not in ("auto", "always", "never"):
        raise TableInputError(f"decode must be auto, always or never, not {decode!r}")
    reader = open_table(source, detect_format(source, input_format), chunk_rows=chunk_rows)
    if column not in reader.names:
        raise TableInputError(
            f"{source}: no column {column!r} (columns: {', '.join(reader.names) or 'none'})"
        )
    added = [prefix + name for name in ADDED_COLUMNS]
    clashes = [name for name in added if name in reader.names]
    if clashes:
        raise TableInputError(
            f"{source}: already has column(s) {', '.join(clashes)}; "
            "pick a prefix for the added columns, e.g. --prefix clean_"
        )
    text = pa.large_string()
    schema = reader.schema
    for name, kind in zip(added, (text, text, pa.bool_(), text, text), strict=True):
        schema = schema.append(pa.field(name, kind))
    out_format = detect_format(target, output_format)
    base = base_url or DEFAULT_BASE_URL
    try:
        summary = _stream(reader, target, out_format, schema, column, decode, base)
    except _MalformedRows:
        # The fast reader met a row whose field count is wrong: it could only drop it, so the
        # file is read again with the lenient reader, which keeps and flags every such row.
        lenient = open_csv_lenient(source, chunk_rows)
        summary = _stream(lenient, target, out_format, schema, column, decode, base)
    return summary, reader.malformed_count, reader.malformed


class _MalformedRows(Exception):
    """The fast CSV reader skipped a row: start again with the lenient reader."""


def _stream(
    reader: Any, target: Path, out_format: Any, schema: Any, column: str, decode: str, base: str
) -> Summary:
    """One pass: every batch of ``reader`` analysed and written; the file appears at the end."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from airflow_doi._arrow import analyse
    from airflow_doi.io_tables import MALFORMED_FLAG, text_column, writing

    summary = Summary()
    text = pa.large_string()
    with writing(target, out_format, schema) as writer:
        for batch in reader.batches:
            if reader.malformed_count:
                raise _MalformedRows
            flags = None
            if reader.flags_malformed:
                flags = batch.column(MALFORMED_FLAG)
                batch = batch.drop_columns([MALFORMED_FLAG])
            dois, overrides = text_column(batch.column(column))
            columns: list[Any] = [
                text_column(values)[0] if reader.all_text else values
                for values in batch.columns
            ]
            result = analyse(dois, decode, overrides)  # type: ignore[arg-type]
            added = [result.doi, result.key(), pa.array(result.valid), result.reason,
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
            writer.write_table(pa.Table.from_arrays(columns, schema=schema))
            summary.rows += batch.num_rows
            valid = added[2].to_numpy(zero_copy_only=False)
            summary.valid += int(valid.sum())
            reasons = pc.value_counts(pc.drop_null(added[3])).to_pylist()
            summary.reasons.update({item["values"]: item["counts"] for item in reasons})
        if reader.malformed_count:  # a malformed row in the very last block
            raise _MalformedRows
    return summary
