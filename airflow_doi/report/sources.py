"""The report's inputs as Arrow text: the DOI column, and whole resolution or metadata tables.

Files go through :mod:`airflow_doi.files.read` (the same reader as ``airflow-doi normalize``:
cells as text, bytes that are not UTF-8 kept for a ``bad_encoding`` verdict, CSV rows with the
wrong number of fields kept and flagged). SQL tables are read through a DB-API connection
(``SELECT "column" FROM "table"``, nothing else, and read-only where the driver allows it);
the figures are then computed in Arrow by the same engine as for files, rather than in SQL:
the DOI functions need not be installed in the database, and every input gets exactly the same
verdicts. Rows in memory (result objects, dicts) become a table through :func:`as_table`.

Database sources: ``sqlite:///path.db``, ``duckdb:///path.duckdb``, ``postgresql://...`` (or
``postgres://``), opened by :mod:`airflow_doi.db.connect`; or an Airflow connection id whose
hook speaks the DB-API (the one place the report reaches into :mod:`airflow_doi.provider`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Final, cast

import numpy as np
import pyarrow as pa

from airflow_doi.db.connect import (
    SQL_SCHEMES,
    DatabaseUrlError,
    is_database_url,
    open_read_only,
)
from airflow_doi.db.statements import column_names, quote_identifier, require_columns
from airflow_doi.files.names import find_added
from airflow_doi.files.read import (
    MALFORMED_FLAG,
    CsvOptions,
    TableInputError,
    TableReader,
    detect_format,
    read_table,
    reading_notes,
    require_column,
    text_column,
)
from airflow_doi.resolver.config import redact_url
from airflow_doi.syntax import cell_text
from airflow_doi.words import plural

#: SQL_SCHEMES is db.connect's, still exported where it was first.
__all__ = ["SQL_SCHEMES", "Column", "as_table", "read_column", "read_resolution_table"]

_CHUNK_ROWS: Final[int] = 200_000
_TEXT: Final[pa.DataType] = pa.large_string()


@dataclass
class Column:
    """The raw cells of a DOI column, plus what :func:`compute_figures` needs to judge them."""

    values: pa.ChunkedArray
    overrides: dict[int, object]
    malformed: np.ndarray[Any, np.dtype[np.bool_]] | None = None
    #: What to tell the user about how a file was read (``reading_notes``).
    notes: list[tuple[str, str]] = field(default_factory=list)


def _in_database(source: str | Path | None, conn_id: str | None) -> bool:
    """Whether the input is a table: through a connection id or a database URL."""
    return conn_id is not None or (source is not None and is_database_url(source))


def read_column(
    source: str | Path | None,
    column: str,
    *,
    table: str | None = None,
    conn_id: str | None = None,
    input_format: str | None = None,
    options: CsvOptions | None = None,
) -> Column:
    """The cells of ``column``: from a file, or from ``table`` via a database URL or ``conn_id``."""
    if _in_database(source, conn_id):
        if table is None:
            raise TableInputError(f"a database source needs a table: which table holds {column!r}?")
        return _from_sql(source, conn_id, table, [column])[column]
    if source is None:
        raise TableInputError(
            "no input: give a CSV/Parquet file, a database URL or a connection id"
        )
    return _from_file(Path(source), column, input_format, options)


def read_resolution_table(
    source: str | Path | None,
    *,
    table: str | None = None,
    conn_id: str | None = None,
    keep: Collection[str] | None = None,
) -> pa.Table:
    """A whole (small) table as text columns: used for a resolution or metadata table.

    ``keep`` names the only columns worth reading (compared without case); the table's other
    columns come back as nulls, so its column names are all there for an error message, but
    never their contents (from a database they are not even selected: ``csl_json`` is large).
    """
    if _in_database(source, conn_id):
        if table is None:
            raise TableInputError("a database resolution source needs a table name")
        columns = _from_sql(source, conn_id, table, None, keep=keep)
        return pa.table({name: found.values for name, found in columns.items()})
    if source is None:
        raise TableInputError("no resolution table given")
    path = Path(source)

    def consume(reader: TableReader) -> pa.Table:
        batches = [
            pa.record_batch(
                [text_column(batch.column(name))[0] for name in reader.names], reader.names
            )
            for batch in reader.batches
        ]
        if reader.flags_malformed and reader.malformed_count:
            raise TableInputError(
                f"{path}: {plural(reader.malformed_count, 'row has', 'rows have')} the wrong "
                "number of fields "
                f"(e.g. {reader.malformed[0]}): fix the file and run again"
            )
        if not batches:
            return pa.table({name: pa.array([], _TEXT) for name in reader.names})
        return pa.Table.from_batches(batches)

    found, _ = read_table(path, detect_format(path), consume, chunk_rows=_CHUNK_ROWS)
    found = _our_names(found)
    if keep is not None:
        wanted = {name.lower() for name in keep}
        nulls = pa.nulls(found.num_rows, _TEXT)
        found = pa.table({
            name: found[name] if name.lower() in wanted else nulls for name in found.column_names
        })
    return found


def _our_names(table: pa.Table) -> pa.Table:
    """The output of ``resolve`` or ``enrich`` with our columns under their own names: they
    are renamed after the DOI column when the input had one of them (``doi_status`` for
    ``status`` beside a column ``doi``), and then only ours are read."""
    from airflow_doi.metadata.result import METADATA_COLUMNS
    from airflow_doi.resolver.result import COLUMNS

    for ours in (COLUMNS, METADATA_COLUMNS):
        found = find_added(table.column_names, ours)
        if found is not None and any(name != there for name, there in found.items()):
            return pa.table({name: table[there] for name, there in found.items()})
    return table


def _from_file(
    path: Path, column: str, input_format: str | None, options: CsvOptions | None
) -> Column:
    def consume(reader: TableReader) -> Column:
        # Restartable: read_table calls it again on the lenient reader when the fast one
        # could only have skipped a row with the wrong number of fields (kept and flagged).
        found_name = require_column(reader, column, path)
        flags: list[np.ndarray[Any, Any]] = []

        def cells() -> Iterator[pa.Array]:
            for batch in reader.batches:
                if reader.flags_malformed:
                    flag = batch.column(MALFORMED_FLAG)
                    flags.append(flag.to_numpy(zero_copy_only=False).astype(bool))
                yield reader.doi_cells(batch, found_name)

        found = _collect(cells())
        if flags:
            found.malformed = np.concatenate(flags)
        return found

    fmt = detect_format(path, input_format)
    found, reader = read_table(
        path, fmt, consume, chunk_rows=_CHUNK_ROWS, options=options, columns=[column]
    )
    found.notes = reading_notes(reader, {})
    return found


def _collect(chunks: Iterable[pa.Array]) -> Column:
    arrays: list[pa.Array] = []
    overrides: dict[int, object] = {}
    offset = 0
    for values in chunks:
        text, repaired = text_column(values)
        overrides.update({offset + row: cell for row, cell in repaired.items()})
        arrays.append(text)
        offset += len(text)
    return Column(pa.chunked_array(arrays, _TEXT), overrides)


def _from_sql(
    url: str | Path | None,
    conn_id: str | None,
    table: str,
    columns: list[str] | None,
    *,
    keep: Collection[str] | None = None,
) -> dict[str, Column]:
    """``SELECT`` the columns (all when ``None``) of ``table``: name -> cells as text.

    With ``keep`` (and ``columns`` None) only the table's columns named there are selected;
    the others come back as nulls.
    """
    try:
        quoted_table = quote_identifier(table)
        selected = "*" if columns is None else ", ".join(quote_identifier(c) for c in columns)
    except ValueError as error:
        raise TableInputError(str(error)) from None
    where = f"connection {conn_id!r}" if conn_id is not None else redact_url(str(url))
    if conn_id is not None:
        connection, checking, translate = _airflow_connection(conn_id, where)
    else:
        connection, checking, translate = _url_connection(str(url))
    existing: list[str] = []
    try:
        if columns:
            # An unknown "quoted" name is a string literal to SQLite: every row would read as
            # that text. The columns are checked against the table's own first.
            parameter = "--column" if conn_id is None else "column"
            _require(checking, table, where, {parameter: columns[0]})
        elif columns is None and keep is not None:
            _require(checking, table, where, {})
            existing = column_names(checking(), table)
            selected = _selection(existing, keep)
        what = f"column {columns[0]!r} of table {table!r}" if columns else f"table {table!r}"
        read, rows = _select(
            connection, translate(f"SELECT {selected} FROM {quoted_table}"),
            f"{where}: cannot read {what}: it does not exist or may not be read; "
            "check the table and column names (schema.table for another schema)",
        )
        return _with_nulls(read, existing, rows)
    finally:
        connection.close()


def _require(
    checking: Callable[[], Any], table: str, where: str, columns: dict[str, str]
) -> None:
    """:func:`require_columns` (compared without case), its refusal as a ``TableInputError``."""
    try:
        require_columns(checking(), table, columns, case_sensitive=False)
    except ValueError as error:
        raise TableInputError(f"{where}: {error}") from None


def _selection(existing: list[str], keep: Collection[str]) -> str:
    """The ``SELECT`` list of the columns of ``existing`` named in ``keep`` (without case)."""
    wanted = {name.lower() for name in keep}
    kept = [name for name in existing if name.lower() in wanted]
    try:
        # No column of keep: one row per row all the same, for the count.
        return ", ".join(quote_identifier(name) for name in kept) or "1 AS one"
    except ValueError as error:
        raise TableInputError(str(error)) from None


def _select(connection: Any, query: str, failure: str) -> tuple[dict[str, Column], int]:
    """Every column ``query`` returns, as cells, and the number of rows; ``failure`` is the
    message when the engine refuses the query."""
    try:
        if type(connection).__module__.startswith(("duckdb", "_duckdb")):
            # DuckDB hands Arrow over without building a Python row per record.
            relation = connection.sql(query)
            arrow = getattr(relation, "to_arrow_table", None) or relation.arrow
            got = arrow()
            read = {name: _collect(got.column(name).chunks) for name in got.column_names}
            return read, got.num_rows
        cursor = connection.cursor()
        cursor.execute(query)
    except Exception:  # every driver has its own error classes and wording
        raise TableInputError(failure) from None
    names = [str(item[0]) for item in cursor.description]
    read = _fetch(cursor, names)
    return read, len(next(iter(read.values())).values) if read else 0


def _with_nulls(read: dict[str, Column], existing: list[str], rows: int) -> dict[str, Column]:
    """``read`` in the order of ``existing`` (when given), the columns not read as nulls."""
    if not existing:
        return read
    nulls = Column(pa.chunked_array([pa.nulls(rows, _TEXT)]), {})
    return {name: read.get(name, nulls) for name in existing}


def _fetch(cursor: Any, names: list[str]) -> dict[str, Column]:
    """Every row of an executed cursor, column by column, as text arrays."""
    parts: dict[str, list[pa.Array]] = {name: [] for name in names}
    while rows := cursor.fetchmany(50_000):
        for index, name in enumerate(names):
            parts[name].append(_cells([row[index] for row in rows]))
    return {name: _collect(arrays or [pa.array([], _TEXT)]) for name, arrays in parts.items()}


def _cells(values: list[object]) -> pa.Array:
    """DB-API values as an Arrow array: text as text, bytes kept for ``text_column``."""
    try:
        return pa.array(values, _TEXT)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    binary = (bytes, bytearray, memoryview)
    if all(v is None or isinstance(v, binary) for v in values):
        blobs = [bytes(v) if isinstance(v, binary) else None for v in values]
        return pa.array(blobs, pa.large_binary())
    return pa.array([cell_text(v) for v in values], _TEXT)


def _url_connection(url: str) -> tuple[Any, Callable[[], Any], Callable[[str], str]]:
    """A read-only connection to a database URL, how to get a cursor on it, and the query
    translation (none: the quoting of :mod:`airflow_doi.db.statements` is standard SQL)."""
    try:
        connection = open_read_only(url)
    except DatabaseUrlError as error:
        raise TableInputError(str(error)) from None
    return connection, connection.cursor, _as_written


def _as_written(query: str) -> str:
    return query


def _airflow_connection(
    conn_id: str, where: str
) -> tuple[Any, Callable[[], Any], Callable[[str], str]]:
    """The report's Airflow branch: the connection of ``conn_id``, how to get a cursor on it
    and how to translate a query (BigQuery, MySQL...: the engine's own quoting)."""
    from airflow_doi.provider.hooks.sql import connect, dialect_of, sql_hook  # needs Airflow

    try:
        hook = sql_hook(conn_id)
        connection = connect(hook)
    except Exception:
        raise TableInputError(
            f"{where}: cannot connect: check that the Airflow connection exists and "
            "is a SQL connection whose server is reachable"
        ) from None
    dialect = dialect_of(hook)
    return connection, functools.partial(dialect.cursor, connection), dialect.translate


def as_table(rows: pa.Table | Iterable[Any]) -> pa.Table:
    """A table given in memory: an Arrow table, result objects (``ResolutionResult``,
    ``MetadataResult``: their ``as_row()``, else their dataclass fields) or dicts."""
    if isinstance(rows, pa.Table):
        return rows
    records: list[Mapping[str, Any]] = [_record(row) for row in rows]
    names = list(dict.fromkeys(name for record in records for name in record))
    return pa.table({
        name: _cells([record.get(name) for record in records]) for name in names
    })


def _record(row: Any) -> Mapping[str, Any]:
    if hasattr(row, "as_row"):
        found: Mapping[str, Any] = row.as_row()
        return found
    if is_dataclass(row) and not isinstance(row, type):
        return {item.name: getattr(row, item.name) for item in fields(row)}
    return cast(Mapping[str, Any], row)
