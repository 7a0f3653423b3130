"""The column passes the file commands share: normalize a file's DOI column into a copy, read
a column's cells, and copy every row out with columns appended (the result columns of
``resolve`` and ``enrich``, the repairs of ``repair``).

Each pass reads through :func:`airflow_doi.files.read.read_table` (so a file one command
accepts, or refuses, every command accepts, or refuses, in the same words) and writes through
:func:`airflow_doi.files.write.writing` (the output appears only when complete). No pass ever
drops a row: a CSV row that could not be aligned with the header is kept and marked
:data:`MALFORMED_REASON`. The command line (:mod:`airflow_doi.cli`) only turns flags into
these arguments and results into messages and exit codes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_doi.columns import analyse
from airflow_doi.files import DEFAULT_CHUNK_ROWS, MALFORMED_REASON
from airflow_doi.files.names import added_names, match_column
from airflow_doi.files.read import (
    MALFORMED_FLAG,
    CsvOptions,
    Format,
    TableInputError,
    TableReader,
    detect_format,
    read_table,
    require_column,
    text_column,
)
from airflow_doi.files.read import output_format as output_format_of
from airflow_doi.files.write import CsvEncoding, check_output, escape_formulas, writing
from airflow_doi.presentation import DEFAULT_BASE_URL
from airflow_doi.repair.damage import LikelyDamaged
from airflow_doi.syntax import cell_text
from airflow_doi.words import plural

__all__ = [
    "BAD_ENCODING",
    "DEFAULT_CHUNK_ROWS",
    "MALFORMED_REASON",
    "NORMALIZE_COLUMNS",
    "Summary",
    "append_columns",
    "kept_columns",
    "normalize_file",
    "normalize_table",
    "read_cells",
    "repair_cells",
    "result_columns",
]

#: The columns ``normalize`` appends, before a prefix.
NORMALIZE_COLUMNS: tuple[str, ...] = ("doi", "doi_key", "doi_valid", "doi_reason", "doi_url")
#: Why a cell that is not UTF-8 is not looked at (the standard's reason name).
BAD_ENCODING = "bad_encoding"
_TEXT = pa.large_string()


@dataclass
class Summary:
    """Counts of a ``normalize`` pass for its one-line report, and the cells repaired."""

    rows: int = 0
    valid: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    #: Column -> cells that were not UTF-8 (written with U+FFFD).
    repaired: Counter[str] = field(default_factory=Counter)
    #: The names of the appended columns (``NORMALIZE_COLUMNS``, unless renamed for a clash).
    added: list[str] = field(default_factory=list)
    #: Valid cells a repair rule would change (``10.1000/182 (retracted)``), with examples.
    damaged: LikelyDamaged = field(default_factory=LikelyDamaged)
    #: ``(doi, valid)`` of the batches not yet counted into ``damaged`` (:func:`_stream`
    #: counts them on a thread of their own, beside the writing).
    damaged_batches: list[tuple[Any, Any]] = field(default_factory=list, repr=False)

    def line(self) -> str:
        reasons = ", ".join(f"{name}={count:,}" for name, count in sorted(self.reasons.items()))
        invalid = self.rows - self.valid
        detail = f" ({reasons})" if reasons else ""
        rows = "1 row" if self.rows == 1 else f"{self.rows:,} rows"
        return f"{rows}: {self.valid:,} valid, {invalid:,} not{detail}"


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
    output_encoding: CsvEncoding | None = None,
) -> tuple[Summary, int, list[str]]:
    """Stream ``source`` to ``target`` with the DOI columns added.

    ``encoding`` and ``delimiter`` are found from the file when None; ``na_values`` are the
    DOI column's missing-value markers (None: pandas' defaults); ``output_encoding``: a CSV
    output's (None: :func:`~airflow_doi.files.write.csv_encoding` chooses). Returns the
    summary, the number of malformed CSV rows (kept, flagged ``malformed_row``) and a few of
    them.
    """
    summary, reader = normalize_table(
        source, target, column=column, decode=decode, chunk_rows=chunk_rows,
        input_format=input_format, output_format=output_format, prefix=prefix,
        base_url=base_url, options=CsvOptions(encoding, delimiter, na_values),
        escape=escape_formulas, output_encoding=output_encoding,
    )
    return summary, reader.malformed_count, reader.malformed


def normalize_table(
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
    options: CsvOptions,
    escape: bool,
    output_encoding: CsvEncoding | None = None,
    mkdir: bool = True,
) -> tuple[Summary, TableReader]:
    """The work of :func:`normalize_file`; also returns the reader that read the file.
    ``mkdir``: create the output's folder if missing (else refuse: the command line's
    default, see :func:`~airflow_doi.files.write.check_output`)."""
    if decode not in ("auto", "always", "never"):
        raise TableInputError(f"decode must be auto, always or never, not {decode!r}")
    check_output(source, target, mkdir=mkdir)
    out_format = output_format_of(target, output_format)
    base = base_url or DEFAULT_BASE_URL

    def one_pass(reader: TableReader) -> Summary:
        found = require_column(reader, column, source)
        added = _added(reader, found, NORMALIZE_COLUMNS, prefix, source)
        schema = output_schema(reader.schema, out_format)
        for name, kind in zip(added, (_TEXT, _TEXT, pa.bool_(), _TEXT, _TEXT), strict=True):
            schema = schema.append(pa.field(name, kind))
        guard = escape and out_format == "csv"
        summary = _stream(reader, target, out_format, schema, found, decode, base, guard,
                          output_encoding)
        summary.added = added
        return summary

    return read_table(
        source, detect_format(source, input_format), one_pass,
        chunk_rows=chunk_rows, options=options,
    )


def _added(reader: TableReader, found: str, ours: Sequence[str], prefix: str | None,
           source: Path, names: list[str] | None = None, stem: str | None = None) -> list[str]:
    """The names ``ours`` take beside ``names`` (default: the file's), renamed where those
    have them already (after ``stem``, the command's word, when given)."""
    try:
        return added_names(tuple(ours), reader.names if names is None else names, found, prefix,
                           stem)
    except TableInputError as error:
        raise TableInputError(f"{source}: {error}") from None


def kept_columns(names: list[str], keep: Sequence[str] | None, source: Path) -> list[int]:
    """The positions of the columns ``keep`` names (each as ``--column`` finds one: exact,
    else trimmed and case-folded), in the file's order; all when ``keep`` is None. A name
    the file lacks, or that two columns answer to, is refused."""
    if keep is None:
        return list(range(len(names)))
    chosen: set[int] = set()
    for name in keep:
        found = match_column(names, name)
        if len(found) != 1:
            listed = ", ".join(repr(item) for item in names) or "none"
            what = (f"{len(found)} columns answer to {name!r}" if found
                    else f"no column {name!r}")
            raise TableInputError(f"{source}: {what} (--keep-columns; columns: {listed}); "
                                  "give each column's exact name, comma-separated")
        chosen.add(names.index(found[0]))
    return sorted(chosen)


def output_schema(schema: pa.Schema, out_format: Format) -> pa.Schema:
    """The input's schema as written: CSV holds text, so a binary column is written as text."""
    if out_format != "csv":
        return schema
    return pa.schema([
        pa.field(item.name, _TEXT) if _is_binary(item.type) else item for item in schema
    ])


def _is_binary(kind: pa.DataType) -> bool:
    return bool(pa.types.is_binary(kind) or pa.types.is_large_binary(kind))


def _read_ahead(batches: Iterable[Any], pool: ThreadPoolExecutor) -> Iterator[Any]:
    """``batches``, each one read on ``pool`` while the caller works on the one before."""
    iterator = iter(batches)
    coming = pool.submit(next, iterator, None)
    while (batch := coming.result()) is not None:
        coming = pool.submit(next, iterator, None)
        yield batch


def _stream(
    reader: TableReader, target: Path, out_format: Format, schema: pa.Schema, column: str,
    decode: str, base: str, escape: bool, encoding: CsvEncoding | None,
) -> Summary:
    """One pass: every batch of ``reader`` analysed and written; the file appears at the end."""
    summary = Summary()
    # The writer runs on its own thread, one batch behind: Arrow's CSV and Parquet writers
    # release the GIL, so writing a batch overlaps reading and analysing the next one.
    # Likewise the next batch is read while this one is analysed.
    # The likely damaged cells are counted on a third thread, one batch behind too.
    background, ahead, counting = (ThreadPoolExecutor(1) for _ in range(3))
    with writing(target, out_format, schema, reader.dialect, encoding) as writer:
        try:
            pending: Future[None] | None = None
            counted: Future[None] | None = None
            for batch in _read_ahead(reader.batches, ahead):
                table = _normalized(reader, batch, schema, column, decode, base, escape,
                                    summary)
                if pending is not None:
                    pending.result()  # at most one batch waits: memory stays bounded
                pending = background.submit(writer.write_table, table)
                if counted is not None:
                    counted.result()
                counted = counting.submit(summary.damaged.add, *summary.damaged_batches.pop())
            for future in (pending, counted):
                if future is not None:
                    future.result()
        except BaseException:
            # Ctrl-C or an error: the batch being written is finished before the file is
            # closed (and removed), but the read-ahead is not waited for: Arrow's reader can
            # take long to wind down, and its next batch is not wanted.
            ahead.shutdown(wait=False, cancel_futures=True)
            counting.shutdown(wait=False, cancel_futures=True)
            background.shutdown(wait=True, cancel_futures=True)
            raise
        background.shutdown()
        ahead.shutdown()
        counting.shutdown()
    return summary


def _normalized(
    reader: TableReader, batch: pa.RecordBatch, schema: pa.Schema, column: str, decode: str,
    base: str, escape: bool, summary: Summary,
) -> pa.Table:
    """One batch with the DOI columns appended; ``summary`` counts it."""
    flags = None
    if reader.flags_malformed:
        flags = batch.column(MALFORMED_FLAG)
        batch = batch.drop_columns([MALFORMED_FLAG])
    columns, repaired, doi_text = _copied(reader, batch, schema, escape, column)
    summary.repaired.update(repaired)
    if doi_text is None:  # a Parquet text column, copied as it is
        doi_text = text_column(batch.column(column))
    dois, overrides = doi_text
    dois = reader.missing_as_null(dois)  # NA, N/A, NULL...: read as missing
    result = analyse(dois, decode, overrides)  # type: ignore[arg-type]
    added = [result.doi, result.key(), result.valid_array, result.reason, result.url(base)]
    if flags is not None and pc.any(flags).as_py():
        # A row that could not be aligned with the header is never a valid DOI row.
        null = pa.scalar(None, _TEXT)
        added = [
            pc.if_else(flags, null, added[0]),
            pc.if_else(flags, null, added[1]),
            pc.if_else(flags, False, added[2]),
            pc.if_else(flags, pa.scalar(MALFORMED_REASON, _TEXT), added[3]),
            pc.if_else(flags, null, added[4]),
        ]
    summary.rows += batch.num_rows
    summary.valid += pc.sum(added[2]).as_py() or 0
    summary.damaged_batches.append((added[0], added[2]))
    reasons = pc.value_counts(pc.drop_null(added[3])).to_pylist()
    summary.reasons.update({item["values"]: item["counts"] for item in reasons})
    return pa.Table.from_arrays([*columns, *added], schema=schema)


def _copied(
    reader: TableReader, batch: pa.RecordBatch, schema: pa.Schema, escape: bool,
    column: str | None = None,
) -> tuple[list[Any], Counter[str], tuple[Any, dict[int, object]] | None]:
    """The batch's own columns as written (text where the output needs text, formulas
    escaped when asked), the cells per column that were not UTF-8, and ``column`` as
    (text, overrides) when it had to be read as text."""
    columns: list[Any] = []
    repaired: Counter[str] = Counter()
    doi_text = None
    for index, (name, values) in enumerate(zip(batch.schema.names, batch.columns, strict=True)):
        kept = values  # Parquet columns keep their own types, unless CSV needs text
        if reader.all_text or schema.field(index).type != values.type:
            kept, bad = text_column(values)
            if bad:
                repaired[name] += len(bad)
            if name == column:
                doi_text = (kept, bad)
        columns.append(escape_formulas(kept) if escape else kept)
    return columns, repaired, doi_text


def read_cells(
    path: Path, column: str, *, input_format: str | None, options: CsvOptions,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> tuple[list[object], list[object], list[bool], TableReader]:
    """The cells of ``column`` as read, the same with missing-value markers (``NA``...) as
    None (what is judged), their malformed-row flags (empty when the file had none) and the
    reader that read them.

    CSV cells that are not UTF-8 stay bytes, so the resolver judges them as it judges any
    bytes (``bad_encoding``); a malformed CSV row becomes ``malformed_row`` in the output
    (see :func:`result_columns`).
    """

    def one_pass(reader: TableReader) -> tuple[list[object], list[object], list[bool]]:
        found = require_column(reader, column, path)
        values: list[object] = []
        judged: list[object] = []
        flags: list[bool] = []
        for batch in reader.batches:
            raw = batch.column(found)
            cells = reader.missing_as_null(raw)
            values.extend(raw.to_pylist())
            judged.extend(cells.to_pylist() if cells is not raw
                          else values[len(values) - len(raw):])
            if reader.flags_malformed:
                flags.extend(batch.column(MALFORMED_FLAG).to_pylist())
        return values, judged, flags

    (values, judged, flags), reader = read_table(
        path, detect_format(path, input_format), one_pass,
        chunk_rows=chunk_rows, options=options, columns=[column],
    )
    return values, judged, flags, reader


def result_columns(
    results: Iterable[Any], values: Sequence[object], flags: Sequence[bool], status: str,
    columns: Sequence[str],
) -> dict[str, list[object]]:
    """The added ``columns``, a list each, a cell per result (``as_row()``): ``input`` as text;
    a malformed CSV row's ``status`` column is ``invalid`` with the reason in ``error``. Built
    a row at a time, so no row's dict outlives it: a million rows of thirty cells kept as
    dicts took gigabytes more than their cells."""
    added: dict[str, list[object]] = {name: [] for name in columns}
    cells = [(name, added[name].append) for name in columns]
    for index, result in enumerate(results):
        row = result.as_row()
        row["input"] = cell_text(values[index])
        if flags and flags[index]:
            row.update({"doi": None, "key": None, status: "invalid", "error": MALFORMED_REASON})
        for name, append in cells:
            append(row[name])
    return added


def repair_cells(
    values: Sequence[object], flags: Sequence[bool]
) -> tuple[list[str | None], list[str | None]]:
    """The cells to suggest repairs for, as text, and per row why it must not be looked at
    (or None).

    A malformed CSV row and a cell that is not UTF-8 are never repaired: the first cannot be
    trusted to hold the DOI, the second would be "repaired" by dropping the bytes that
    ``--encoding`` would have read.
    """
    cells: list[str | None] = []
    reasons: list[str | None] = []
    for index, value in enumerate(values):
        reason = MALFORMED_REASON if flags and flags[index] else None
        if reason is None and isinstance(value, (bytes, bytearray)):
            try:
                value = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                reason = BAD_ENCODING
        cells.append(None if reason else cell_text(value))
        reasons.append(reason)
    return cells, reasons


def append_columns(
    source: Path, target: Path, column: str, added: Mapping[str, list[object]],
    kinds: Mapping[str, str], *, input_format: str | None, output_format: Format,
    options: CsvOptions, escape: bool, chunk_rows: int = DEFAULT_CHUNK_ROWS,
    encoding: CsvEncoding | None = None, keep: Sequence[str] | None = None,
    prefix: str | None = None, guarded: Collection[str] = (), stem: str | None = None,
) -> tuple[TableReader, dict[str, int], list[str]]:
    """Every row of ``source`` copied to ``target`` with the columns ``keep`` names (all
    when None; see :func:`kept_columns`), then the ``added`` columns (one value per row,
    typed by ``kinds``: Arrow type names such as ``large_string``; named apart from the kept
    columns as :func:`~airflow_doi.files.read.added_names` names them, ``prefix`` as given, after
    ``stem`` on a clash).
    ``escape``: formulas escaped in the copied columns; ``guarded``: added columns escaped
    (CSV only). Returns the reader, the cells per column that were not UTF-8 (written with
    U+FFFD) and the added columns' names.

    The file must have as many rows as on the first read, else nothing is put in place."""
    ours = tuple(added)
    types = {name: getattr(pa, kinds[name])() for name in ours}
    rows = len(next(iter(added.values()))) if added else 0
    named: list[str] = []

    def one_pass(reader: TableReader) -> Counter[str]:
        found = match_column(reader.names, column)[0]
        indices = kept_columns(reader.names, keep, source)
        full = output_schema(reader.schema, output_format)
        schema = pa.schema([full.field(index) for index in indices])
        named[:] = _added(reader, found, ours, prefix, source,
                          [reader.names[index] for index in indices], stem)
        for name, new in zip(ours, named, strict=True):
            schema = schema.append(pa.field(new, types[name]))
        guard = escape and output_format == "csv"
        protect = {name for name in guarded if output_format == "csv"}
        repaired: Counter[str] = Counter()
        done = 0
        with writing(target, output_format, schema, reader.dialect, encoding) as writer:
            for batch in reader.batches:
                if reader.flags_malformed:
                    batch = batch.drop_columns([MALFORMED_FLAG])
                columns, bad, _ = _copied(reader, batch.select(indices), schema, guard)
                repaired.update(bad)
                end = done + batch.num_rows
                for name in ours:
                    values = pa.array(added[name][done:end], types[name])
                    columns.append(escape_formulas(values) if name in protect else values)
                writer.write_table(pa.Table.from_arrays(columns, schema=schema))
                done = end
            if done != rows:  # the output file is not put in place
                raise TableInputError(
                    f"{source}: had {plural(rows, 'row')} on the first read and {done:,} on the "
                    "second; was it changed meanwhile? run again once it is complete"
                )
        return +repaired

    repaired, reader = read_table(
        source, detect_format(source, input_format), one_pass,
        chunk_rows=chunk_rows, options=options,
    )
    return reader, dict(repaired), named
