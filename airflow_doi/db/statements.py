"""Portable SQL statements over any DB-API connection: identifiers, paging, upserts, columns.

The Airflow operators emit these through their hooks; nothing here imports Airflow.

The operators must work on any connection whose hook is a ``DbApiHook`` (SQLite, PostgreSQL,
DuckDB, Snowflake, ...). The few statements they need are written here once, per dialect
where dialects differ, under two rules:

* every value travels as a bound parameter (the hook's own placeholder, ``?`` or ``%s``);
  catalogue cells such as ``x'); DROP TABLE works; --`` are data, never SQL;
* identifiers (table and column names come from DAG params) are validated against a plain
  ``[A-Za-z_][A-Za-z0-9_]*`` pattern per dotted part and then double-quoted, so the name a
  user types is the name used, and nothing else can be smuggled in.

Large tables are read in pages with keyset pagination (``WHERE key > ? ORDER BY key LIMIT ?``)
rather than one long cursor, so a page can be written back on the same connection and memory
stays bounded by the batch size.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

__all__ = [
    "StatementDialect",
    "TranslatingCursor",
    "add_missing_columns",
    "bulk_upsert",
    "column_names",
    "dialect_named",
    "distinct_pages",
    "fold_identifier",
    "insert_values",
    "keyset_pages",
    "missing_columns",
    "native_cursor",
    "quote_identifier",
    "require_columns",
    "sibling_table",
    "upsert_rows",
]

_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Upper bound on pages read by one keyset scan; reaching it is an error, never a silent stop.
MAX_PAGES = 10_000_000


def quote_identifier(name: str) -> str:
    """``schema.table`` -> ``"schema"."table"``, after checking every part is a plain name.

    Raises ``ValueError`` for anything else (quotes, spaces, semicolons, empty parts), so a
    DAG param cannot carry SQL into a statement.
    """
    if not isinstance(name, str):
        raise TypeError(f"an SQL identifier must be a string, not {type(name).__name__}")
    parts = name.split(".")
    if len(parts) > 3 or not all(_IDENTIFIER_RE.fullmatch(part) for part in parts):
        raise ValueError(
            f"not a plain SQL identifier: {name!r} (letters, digits and _ per dotted part)"
        )
    return ".".join(f'"{part}"' for part in parts)


def sibling_table(table: str, name: str) -> str:
    """A table called ``name`` in the same schema as ``table`` (``s.catalogue`` -> ``s.name``)."""
    quote_identifier(table)
    quote_identifier(name)
    schema, _, _ = table.rpartition(".")
    return f"{schema}.{name}" if schema else name


@dataclass(frozen=True)
class StatementDialect:
    """What differs between the SQL engines the operators write to."""

    name: str
    placeholder: str = "?"
    text_type: str = "VARCHAR"
    boolean_type: str = "BOOLEAN"
    integer_type: str = "INTEGER"
    timestamp_type: str = "TIMESTAMP WITH TIME ZONE"
    #: ``INSERT ... ON CONFLICT (key) DO UPDATE`` (SQLite 3.24+, PostgreSQL 9.5+, DuckDB).
    on_conflict: bool = True
    #: Upsert with one ``MERGE`` where there is no ``ON CONFLICT``: on warehouses that commit
    #: every statement (BigQuery), delete-then-insert would leave a window with the rows gone.
    merge: bool = False
    #: ``UPDATE t SET ... FROM other WHERE ...`` (SQLite 3.33+, PostgreSQL, DuckDB, Snowflake).
    update_from: bool = True
    #: Timestamps bound as ISO-8601 text (SQLite has no timestamp type).
    timestamps_as_text: bool = False
    #: Bound parameters per statement (SQLite builds before 3.32 allow 999).
    max_params: int = 10_000
    #: Bind a whole column as one array parameter and ``unnest`` it (PostgreSQL, DuckDB).
    array_unnest: bool = False
    #: Postfix that makes a text comparison byte-wise (`` COLLATE BINARY``), so a column declared
    #: with a case-insensitive collation never merges ``10.1000/abc`` with ``10.1000/ABC``.
    #: Empty where the default already compares bytes (DuckDB) or the syntax is unknown.
    binary_collation: str = ""
    #: Quoted identifiers are case-sensitive (``"DOI"`` is not ``"doi"``): PostgreSQL,
    #: Snowflake, standard SQL. SQLite, DuckDB and Redshift match them case-insensitively.
    case_sensitive_identifiers: bool = True
    #: sqlglot's name for an engine whose statements are rewritten from the ANSI form written
    #: here (identifiers, types, ``ORDER BY`` null order): BigQuery and MySQL quote with
    #: backticks, BigQuery has no ``VARCHAR``. None: the statements run as written.
    sqlglot_dialect: str | None = None
    #: Fold every identifier to upper case, as the engine folds unquoted names: on Snowflake a
    #: table created as ``works`` is ``WORKS``, and ``"works"`` would miss it.
    fold_upper: bool = False
    #: How the operators' staging tables declare their key column: MySQL cannot index a TEXT
    #: column without a prefix length, so there the stage has no key (it holds one page).
    stage_key: str = " PRIMARY KEY"
    #: Statement (in the engine's own dialect) that indexes a keyless stage's ``raw`` column.
    stage_index: str | None = None
    #: Type of the key columns the operators create (``doi_key``, ``raw_value``); None: text.
    #: MySQL can only index a bounded VARCHAR (768 utf8mb4 characters fill its 3072 bytes).
    key_type: str | None = None
    #: Type of a column holding a JSON document (``csl_json``); None: text.
    json_type: str | None = None
    #: Statement (``{table}``: the quoted name) that an ``UPDATE`` of every row takes first, in
    #: its transaction, so that two such updates of one table run one after the other: on
    #: PostgreSQL two of them can otherwise lock rows in opposite orders (a synchronized scan
    #: starts where the other one is) and deadlock. It lets readers through. None: not needed.
    whole_table_update_lock: str | None = None

    @property
    def key_text(self) -> str:
        return self.key_type or self.text_type

    @property
    def json_text(self) -> str:
        return self.json_type or self.text_type

    def marks(self, count: int = 1) -> str:
        """``count`` placeholders joined by commas."""
        return ", ".join([self.placeholder] * count)

    def timestamp(self, value: datetime | None) -> datetime | str | None:
        """A timezone-aware datetime as this dialect binds it."""
        if value is None or not self.timestamps_as_text:
            return value
        return value.isoformat(timespec="microseconds")

    def quote(self, name: str) -> str:
        """``name`` checked (:func:`quote_identifier`) and quoted as this engine quotes it."""
        quoted = quote_identifier(name.upper() if self.fold_upper else name)
        return quoted if self.sqlglot_dialect is None else self.translate_identifier(quoted)

    def translate_identifier(self, quoted: str) -> str:
        from sqlglot import exp

        parts = [part.strip('"') for part in quoted.split(".")]
        return ".".join(exp.to_identifier(p, quoted=True).sql(dialect=self.sqlglot_dialect)
                        for p in parts)

    def translate(self, sql: str) -> str:
        """``sql``, written in the ANSI form of this module, in this engine's own dialect."""
        if self.sqlglot_dialect is None:
            return sql
        return _translate(sql, self.sqlglot_dialect, self.fold_upper, self.placeholder)

    def cursor(self, conn: Any) -> Any:
        """A cursor of ``conn`` that runs this module's statements in the engine's dialect."""
        raw = conn.cursor()
        return raw if self.sqlglot_dialect is None else TranslatingCursor(raw, self)


@functools.lru_cache(maxsize=1024)
def _translate(sql: str, target: str, fold_upper: bool, placeholder: str) -> str:
    import sqlglot
    from sqlglot import exp

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Identifier) and fold_upper:
            return exp.Identifier(this=node.this.upper(), quoted=True)
        if isinstance(node, exp.Placeholder):
            return exp.Var(this=placeholder)  # the driver's own marker, never "?" in a literal
        return node

    trees = sqlglot.parse(sql, read="postgres")
    return "; ".join(tree.transform(rewrite).sql(dialect=target) for tree in trees if tree)


class TranslatingCursor:
    """A DB-API cursor whose ``execute``/``executemany`` take this module's ANSI statements and
    run them in the engine's dialect (:meth:`StatementDialect.translate`); ``native`` is the cursor
    itself, for statements already written in that dialect (generated SQL)."""

    def __init__(self, cursor: Any, dialect: StatementDialect) -> None:
        self.native = cursor
        self.dialect = dialect

    def execute(self, sql: str, *args: Any) -> Any:
        return self.native.execute(self.dialect.translate(sql), *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        return self.native.executemany(self.dialect.translate(sql), *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.native, name)


def native_cursor(cursor: Any) -> Any:
    """The engine's own cursor under a :class:`TranslatingCursor` (or ``cursor`` itself)."""
    return getattr(cursor, "native", cursor)


_DIALECTS: dict[str, StatementDialect] = {
    "sqlite": StatementDialect(
        "sqlite", text_type="TEXT", timestamp_type="TEXT", timestamps_as_text=True, max_params=999,
        binary_collation=" COLLATE BINARY", case_sensitive_identifiers=False,
    ),
    "postgres": StatementDialect("postgres", placeholder="%s", text_type="TEXT", array_unnest=True,
                        binary_collation=' COLLATE "C"', json_type="JSONB",
                        whole_table_update_lock="LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE"),
    "duckdb": StatementDialect("duckdb", array_unnest=True, case_sensitive_identifiers=False,
                      json_type="JSON", binary_collation=" COLLATE C"),
    "snowflake": StatementDialect("snowflake", on_conflict=False, merge=True,
                         timestamp_type="TIMESTAMP_TZ",
                         sqlglot_dialect="snowflake", fold_upper=True,
                         case_sensitive_identifiers=False),
    # BigQuery reads "x" as a string: identifiers take backticks; types are STRING/BOOL/INT64.
    "bigquery": StatementDialect("bigquery", placeholder="%s", text_type="STRING",
                        boolean_type="BOOL",
                        integer_type="INT64", timestamp_type="TIMESTAMP", on_conflict=False,
                        merge=True,
                        update_from=True, sqlglot_dialect="bigquery",
                        case_sensitive_identifiers=False),
    # Databricks (Spark SQL) reads "x" as a string too: backticks.
    "databricks": StatementDialect("databricks", text_type="STRING", on_conflict=False, merge=True,
                          sqlglot_dialect="databricks", case_sensitive_identifiers=False),
    "trino": StatementDialect("trino", on_conflict=False, update_from=False),
    # MySQL and MariaDB: backticks; byte-wise comparison through the utf8mb4_bin collation.
    # Every text column the operators create compares byte-wise (utf8mb4_bin): under the
    # server's default *_general_ci, "STRAßE" equals "STRASE" and keys would collide.
    "mysql": StatementDialect("mysql", placeholder="%s", text_type="TEXT COLLATE utf8mb4_bin",
                     key_type="VARCHAR(768) COLLATE utf8mb4_bin", timestamp_type="DATETIME(6)",
                     on_conflict=False, update_from=False, sqlglot_dialect="mysql",
                     binary_collation=" COLLATE utf8mb4_bin", case_sensitive_identifiers=False,
                     stage_key="", stage_index="ALTER TABLE {stage} ADD INDEX (raw(255))",
                     json_type="JSON"),
    # Redshift speaks the PostgreSQL wire protocol but has neither ``ON CONFLICT`` nor
    # ``unnest`` of a bound array: delete-then-insert with multi-row VALUES. Its bare VARCHAR
    # is VARCHAR(256), too short for a DOI or a URL; it folds quoted identifiers to lower case.
    "redshift": StatementDialect(
        "redshift", placeholder="%s", text_type="VARCHAR(65535)", on_conflict=False,
        array_unnest=False, case_sensitive_identifiers=False,
    ),
}


def dialect_named(name: str, placeholder: str | None = None) -> StatementDialect:
    """The dialect for a connection type (``postgres``/``postgresql``, ``sqlite``, ...).

    Unknown engines get ANSI SQL without ``ON CONFLICT`` and without ``UPDATE ... FROM``
    (delete-then-insert and correlated sub-queries instead), which every engine accepts.
    """
    key = {"postgresql": "postgres", "mariadb": "mysql", "gcpbigquery": "bigquery",
           "google_cloud_platform": "bigquery", "doi_duckdb": "duckdb"}.get(name, name)
    dialect = _DIALECTS.get(key) or StatementDialect(key, on_conflict=False, update_from=False)
    if placeholder and placeholder != dialect.placeholder:
        dialect = StatementDialect(**{**dialect.__dict__, "placeholder": placeholder})
    return dialect


def column_names(cursor: Any, table: str) -> list[str]:
    """The columns of ``table`` in order (``SELECT * ... WHERE 1 = 0`` reads only metadata)."""
    cursor.execute(f"SELECT * FROM {quote_identifier(table)} WHERE 1 = 0")
    names = [str(column[0]) for column in cursor.description]
    cursor.fetchall()
    return names


def fold_identifier(name: str, case_sensitive: bool) -> str:
    """``name`` as the engine matches a quoted identifier (see
    :attr:`StatementDialect.case_sensitive_identifiers`)."""
    return name if case_sensitive else name.lower()


def require_columns(
    cursor: Any, table: str, columns: dict[str, str], *, case_sensitive: bool = True
) -> None:
    """Fail, before anything is written, unless ``table`` can be read and has every column of
    ``columns`` (operator parameter -> column name), with an error naming the parameter.

    Without it a misspelt name reaches the engine: SQLite reads an unknown ``"quoted"`` name
    as a string literal (so an UPDATE would overwrite every row with the answers for that
    text), and other engines fail with their own words after the output columns were added.
    """
    try:
        existing = column_names(cursor, table)
    except Exception as error:  # each driver has its own exception classes
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(
            f"table {table!r} cannot be read on this connection ({reason}): check the "
            "table name (schema.table, as the connection sees it) and the connection"
        ) from None

    have = {fold_identifier(name, case_sensitive) for name in existing}
    for parameter, name in columns.items():
        if fold_identifier(name, case_sensitive) not in have:
            raise ValueError(
                f"{parameter} {name!r} is not a column of {table}; its columns are "
                f"{', '.join(existing)}: set {parameter} to the column that holds the values"
            )


def missing_columns(
    cursor: Any, table: str, names: Sequence[str], *, case_sensitive: bool = True
) -> list[str]:
    """The names of ``names`` that ``table`` has no column for, in the order given.

    Names are compared the way the engine matches quoted identifiers
    (:attr:`StatementDialect.case_sensitive_identifiers`): on PostgreSQL an existing ``"DOI"`` is
    another column than ``"doi"``; on SQLite it is the same column.
    """
    existing = {fold_identifier(name, case_sensitive) for name in column_names(cursor, table)}
    return [name for name in names if fold_identifier(name, case_sensitive) not in existing]


def add_missing_columns(
    conn: Any, cursor: Any, table: str, columns: dict[str, str], *,
    case_sensitive: bool = True, if_not_exists: bool = False,
) -> list[str]:
    """``ALTER TABLE ... ADD COLUMN`` for each column not there yet, committed; returns those
    added.

    Names are compared as :func:`missing_columns` compares them: on PostgreSQL an existing
    ``"DOI"`` does not stand for ``"doi"``, which must be added; on SQLite it does. Two tasks
    may add the same column at once (two runs on one new table):

    * the transaction that read the column list (and any read of ``table`` before it) is
      ended before the first ``ALTER``: on PostgreSQL a session holding its read lock while it
      waits for the exclusive lock deadlocks with a second session doing the same, and the
      engine kills one of the two tasks;
    * with ``if_not_exists`` (PostgreSQL, DuckDB) the statement says ``IF NOT EXISTS``; a
      failed ``ALTER`` is rolled back and let pass when the column is there now (the other
      session's), tried again a little later when it is not and the engine's words say it may
      pass (a lock, a conflict), raised at once otherwise (a missing privilege) or at the third
      failure;
    * the ``ALTER`` is committed at once, so the exclusive lock is not held through the work
      that follows.
    """
    conn.commit()
    missing = missing_columns(cursor, table, list(columns), case_sensitive=case_sensitive)
    conn.commit()
    added = []
    for name in missing:
        statement = (f"ALTER TABLE {quote_identifier(table)} ADD COLUMN "
                     f"{'IF NOT EXISTS ' if if_not_exists else ''}{quote_identifier(name)} "
                     f"{columns[name]}")
        for attempt in range(_ALTER_TRIES):
            try:
                cursor.execute(statement)
                conn.commit()
            except Exception as error:
                with contextlib.suppress(Exception):  # DuckDB: no transaction left to end
                    conn.rollback()
                # Another session added it meanwhile ("duplicate column", or DuckDB's "write-
                # write conflict" between two connections of one process): nothing to do.
                # The re-check's read is ended before anything else, whichever way it goes.
                there = name not in missing_columns(cursor, table, [name],
                                                    case_sensitive=case_sensitive)
                conn.commit()
                if there:
                    break
                if attempt + 1 == _ALTER_TRIES or not _passing(error):
                    raise
                time.sleep(0.2 * (attempt + 1))
            else:
                added.append(name)
                break
    return added


#: Words of an engine error that may pass if the statement is tried again a little later.
_PASSING: Final[tuple[str, ...]] = (
    "deadlock", "conflict", "lock", "busy", "could not serialize", "already exists",
    "duplicate column",
)


def _passing(error: BaseException) -> bool:
    text = str(error).lower()
    return any(word in text for word in _PASSING)


_ALTER_TRIES = 3


def keyset_pages(
    cursor: Any,
    dialect: StatementDialect,
    *,
    select: str,
    key: str,
    where: str = "",
    params: Sequence[Any] = (),
    group_by: bool = False,
    batch_size: int,
) -> Iterator[list[tuple[Any, ...]]]:
    """Yield pages of ``SELECT {select} ... ORDER BY {key}`` of at most ``batch_size`` rows.

    ``select`` must start with the key expression (the first column of each row is the key
    the next page starts after); ``where`` may hold placeholders bound from ``params``.
    The query text is built from trusted fragments only: callers pass quoted identifiers.

    Raises ``RuntimeError`` rather than drop or repeat rows when the key of a page's last row
    does not advance (NULL, or equal to the previous page's: a key that is not unique per
    row, or an ``ORDER BY`` and a ``>`` that disagree) or when :data:`MAX_PAGES` pages were
    read.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    conditions = f"({where})" if where else "1 = 1"
    grouping = f" GROUP BY {key}" if group_by else ""
    first = f"SELECT {select} WHERE {conditions}{grouping} ORDER BY {key} LIMIT {dialect.marks()}"
    after = (
        f"SELECT {select} WHERE {conditions} AND {key} > {dialect.marks()}{grouping} "
        f"ORDER BY {key} LIMIT {dialect.marks()}"
    )
    last: Any = None
    for page in range(MAX_PAGES):
        if page == 0:
            cursor.execute(first, (*params, batch_size))
        else:
            cursor.execute(after, (*params, last, batch_size))
        rows = [tuple(row) for row in cursor.fetchall()]
        if not rows:
            return
        yield rows
        if len(rows) < batch_size:
            return
        key_value = rows[-1][0]
        # Equality only: Python's order of strings is not the database's collation order.
        if key_value is None or (page > 0 and key_value == last):
            raise RuntimeError(
                f"keyset paging on {key} did not advance (last key {last!r}, then "
                f"{key_value!r}): the key must be non-NULL and ordered consistently with '>'"
            )
        last = key_value
    cursor.execute(after, (*params, last, 1))  # the limit was reached: is anything left?
    if not cursor.fetchall():
        return
    raise RuntimeError(
        f"keyset paging on {key} stopped after MAX_PAGES={MAX_PAGES} pages of {batch_size} rows "
        "with rows left: raise the batch size"
    )


def distinct_pages(
    cursor: Any,
    dialect: StatementDialect,
    *,
    value: str,
    source: str,
    where: str,
    batch_size: int,
    params: Sequence[Any] = (),
    aggregate: tuple[str, str] | None = None,
    filled: Callable[[], None] | None = None,
) -> Generator[tuple[int, list[tuple[Any, ...]]], None, None]:
    """Yield ``(total, page)``: the distinct ``value``s of ``source`` (with ``aggregate``, an
    ``(SQL expression, SQL type)`` such as ``("COUNT(*)", "INTEGER")``, beside each),
    ``batch_size`` at a time, each as it was stored. ``where`` may hold placeholders bound from
    ``params``.

    The table is read once: its distinct values are numbered into a TEMPORARY table of this
    session (a per-call name, dropped at the end) and pages are ranges of that number, a key
    lookup each. Keyset paging over the table itself re-read the whole table for every page:
    on 4M rows of DuckDB that was 55x a hand-written ``UPDATE``, and it grew with the square of
    the rows.
    """

    numbered = f"doi_distinct_{uuid.uuid4().hex[:16]}"
    extra_sql, extra_column, extra = "", "", ""
    if aggregate is not None:
        extra_sql, extra_column, extra = f", {aggregate[0]} AS a", f", a {aggregate[1]}", ", a"
    cursor.execute(
        f"CREATE TEMPORARY TABLE {numbered} (id {dialect.integer_type} PRIMARY KEY, "
        f"v {dialect.text_type}{extra_column})"
    )
    cursor.execute(
        f"INSERT INTO {numbered} SELECT ROW_NUMBER() OVER (ORDER BY v), v{extra}"
        f" FROM (SELECT {value} AS v{extra_sql} FROM {source} WHERE {where} GROUP BY {value})"
        " AS d",
        tuple(params),
    )
    if filled is not None:  # e.g. a commit: later rollbacks then leave the numbered list be
        filled()
    cursor.execute(f"SELECT COUNT(*) FROM {numbered}")
    total = int(cursor.fetchone()[0])
    try:
        for start in range(0, total, batch_size):
            cursor.execute(
                f"SELECT v{extra} FROM {numbered} WHERE id > {dialect.marks()} "
                f"AND id <= {dialect.marks()} ORDER BY id",
                (start, start + batch_size),
            )
            yield total, [tuple(row) for row in cursor.fetchall()]
    finally:
        try:
            cursor.execute(f"DROP TABLE {numbered}")
        except Exception:  # a broken session: its TEMPORARY table ends with it anyway
            pass


def insert_values(
    cursor: Any,
    dialect: StatementDialect,
    head: str,
    rows: Sequence[Sequence[Any]],
    tail: str = "",
    *,
    types: Sequence[str] | None = None,
) -> None:
    """Insert ``rows`` with ``{head} <rows> {tail}`` in as few statements as the dialect allows.

    Not ``executemany``: DuckDB runs that one statement per row (~3 ms each) and psycopg2 one
    round trip per row. Where the engine has arrays (``types`` given, one SQL type per
    column), each column is bound as a single array parameter and unnested
    (``SELECT unnest(?::T[]), ...``); elsewhere multi-row ``VALUES`` lists. Every cell is a
    bound parameter either way.
    """
    if not rows:
        return
    width = len(rows[0])
    if dialect.array_unnest and types is not None:
        if len(types) != width:
            raise ValueError("one SQL type per column is needed")
        arrays = ", ".join(f"unnest({dialect.marks()}::{sql_type}[])" for sql_type in types)
        columns = [list(column) for column in zip(*rows, strict=True)]
        cursor.execute(f"{head} SELECT {arrays}{tail}", columns)
        return
    per_statement = max(1, dialect.max_params // max(1, width))
    row_sql = f"({dialect.marks(width)})"
    for start in range(0, len(rows), per_statement):
        chunk = rows[start:start + per_statement]
        values = ", ".join([row_sql] * len(chunk))
        cursor.execute(f"{head} VALUES {values}{tail}", [cell for row in chunk for cell in row])


def upsert_rows(
    cursor: Any,
    dialect: StatementDialect,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    key: str,
    types: Sequence[str] | None = None,
) -> None:
    """Insert ``rows``, replacing any row with the same ``key`` (the first of ``columns``).

    ``ON CONFLICT DO UPDATE`` where the engine has it; elsewhere delete-then-insert, which is
    atomic as long as the caller commits once per batch.
    """
    if not rows:
        return
    quoted = [quote_identifier(column) for column in columns]
    quoted_key = quote_identifier(key)
    insert = f"INSERT INTO {quote_identifier(table)} ({', '.join(quoted)})"
    if dialect.on_conflict:
        updates = ", ".join(f"{c} = excluded.{c}" for c in quoted if c != quoted_key)
        insert_values(cursor, dialect, insert, rows,
                      f" ON CONFLICT ({quoted_key}) DO UPDATE SET {updates}", types=types)
        return
    if dialect.merge:
        _merge(cursor, dialect, table, quoted, quoted_key, rows)
        return
    position = list(columns).index(key)
    cursor.executemany(
        f"DELETE FROM {quote_identifier(table)} WHERE {quoted_key} = {dialect.marks()}",
        [(row[position],) for row in rows],
    )
    insert_values(cursor, dialect, insert, rows, types=types)


def bulk_upsert(
    cursor: Any,
    dialect: StatementDialect,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    key: str,
    types: Sequence[str] | None = None,
) -> None:
    """:func:`upsert_rows` through the engine's own bulk load where the driver has one:
    PostgreSQL over psycopg 3 copies the rows (``COPY ... FROM STDIN``) into a temporary
    table of this session and upserts them from there in one ``INSERT ... ON CONFLICT`` (five
    times the rows a second of bound arrays: `bench/snapshot.py`'s operator figures); every
    other engine or driver takes :func:`upsert_rows`. Rows of one key: the last wins."""
    if not rows:
        return
    native = native_cursor(cursor)
    if dialect.name != "postgres" or not hasattr(native, "copy"):
        upsert_rows(cursor, dialect, table, columns, rows, key=key, types=types)
        return
    position = list(columns).index(key)
    unique = list({row[position]: row for row in rows}.values())
    quoted = [quote_identifier(column) for column in columns]
    listed = ", ".join(quoted)
    quoted_key = quote_identifier(key)
    stage = quote_identifier("doi_stage_" + uuid.uuid5(uuid.NAMESPACE_URL, table).hex[:12])
    # The columns written, their types, nothing else (not the table's other NOT NULL or
    # identity columns: the insert leaves those to their defaults, as upsert_rows does).
    native.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS "
                   f"SELECT {listed} FROM {quote_identifier(table)} WITH NO DATA")
    native.execute(f"TRUNCATE {stage}")  # rows of an attempt rolled back never linger
    with native.copy(f"COPY {stage} ({listed}) FROM STDIN") as copy:
        for row in unique:
            copy.write_row(row)
    updates = ", ".join(f"{c} = excluded.{c}" for c in quoted if c != quoted_key)
    native.execute(f"INSERT INTO {quote_identifier(table)} ({listed}) SELECT {listed} FROM "
                   f"{stage} ON CONFLICT ({quoted_key}) DO UPDATE SET {updates}")


def _merge(cursor: Any, dialect: StatementDialect, table: str, quoted: list[str], quoted_key: str,
           rows: Sequence[Sequence[Any]]) -> None:
    """One ``MERGE`` per chunk: the rows as a ``SELECT ... UNION ALL`` source (BigQuery has
    no ``VALUES`` table), matched on the key, updated or inserted in one statement."""
    width = len(quoted)
    first = "SELECT " + ", ".join(f"{dialect.marks()} AS {c}" for c in quoted)
    other = f"SELECT {dialect.marks(width)}"
    updates = ", ".join(f"{c} = s.{c}" for c in quoted if c != quoted_key)
    per_statement = max(1, dialect.max_params // max(1, width))
    for start in range(0, len(rows), per_statement):
        chunk = rows[start:start + per_statement]
        source = " UNION ALL ".join([first] + [other] * (len(chunk) - 1))
        cursor.execute(
            f"MERGE INTO {quote_identifier(table)} AS d USING ({source}) AS s "
            f"ON d.{quoted_key} = s.{quoted_key} WHEN MATCHED THEN UPDATE SET {updates} "
            f"WHEN NOT MATCHED THEN INSERT ({', '.join(quoted)}) "
            f"VALUES ({', '.join(f's.{c}' for c in quoted)})",
            [cell for row in chunk for cell in row],
        )
