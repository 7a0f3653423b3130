"""What a normalize run rewrites: each row's fingerprint, and which rows are stale.

A run of the normalize operator writes four columns beside the DOI column (the DOI, its key,
its valid flag and its reason) and a fifth, the *fingerprint* of what they were computed from:
the rules' version, the ``decode`` setting and a hash of the cell's text
(``2/auto/9e107d9d372bb6826bd81d3542a419d6``, MD5; PostgreSQL's own 64-bit hash there,
``=`` and the cell's text itself on SQLite and DuckDB; nothing after the last slash for NULL).
A later
run rewrites only the rows that are *stale*:

* the fingerprint is NULL (a row added since, or a table never normalized with one) or differs
  (the cell was edited, or the row was written under other rules or another ``decode``);
* one of the four columns is NULL where a run always writes a value (the valid flag, the reason
  of an invalid row, the key of a DOI, the DOI of a key): a column someone emptied.

Everything is computed by the engine (the hash too, in the worker path as well), so both paths
agree on every fingerprint, and a run whose rows are all current reads the table once and
writes nothing. ``full_refresh`` rewrites every row, as the first run does. The statements are
written here in the ANSI form of :mod:`airflow_doi.db.statements` (double-quoted identifiers);
:meth:`~airflow_doi.db.statements.StatementDialect.translate` gives an engine its own. An
engine whose hash is unknown here has no fingerprint: :func:`fingerprint_sql` says so with
``None``, and every run there is a full one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from airflow_doi.db.install import normalized_columns
from airflow_doi.db.statements import StatementDialect, quote_identifier
from airflow_doi.syntax import RULES_VERSION, Decode

__all__ = [
    "NormalizedColumns",
    "fingerprint_sql",
    "fingerprint_tag",
    "stale_sql",
]

#: The hash of a cell's text, as text, per engine, around ``{x}`` (a quoted column): MD5 as
#: lower-case hex, except on PostgreSQL, whose 64-bit ``hashtextextended`` (the hash of its
#: hash partitioning, stable across releases for that reason) costs a quarter of its MD5 on a
#: scan of a million cells (0.17 s against 0.48 s): the scan a run with nothing stale is made
#: of. SQLite has no hash of its own, and a function of the task's (Python) called for each
#: row costs a quarter of parsing it: there the cell's text itself is the fingerprint (what a
#: hash stands for, compared without a call; a ``||`` expression compares byte-wise there,
#: whatever the column's collation). DuckDB's MD5 was most of a run with nothing
#: stale (70 of 125 ms for a million cells) and its hex does not compress; the cell's text
#: does: 0.07 s, and a file 3.5 MiB smaller. (DuckDB's own ``hash`` is not promised to stay the
#: same across its releases.) Written so that it runs as is where statements
#: are not translated (PostgreSQL, DuckDB, SQLite, Redshift, Trino) and translates where they
#: are (sqlglot writes MySQL's, Snowflake's, BigQuery's and Databricks' own spelling of MD5).
_HASH: Final[dict[str, str]] = {
    "postgres": 'CAST(HASHTEXTEXTENDED(CAST({x} AS TEXT) COLLATE "C", 0) AS TEXT)',
    # COLLATE C: DuckDB carries a column's collation through CAST and ||, and a NOCASE one
    # would make an edit from "abc" to "ABC" compare equal.
    "duckdb": "'=' || CAST({x} AS TEXT) COLLATE C",
    "sqlite": "'=' || CAST({x} AS TEXT)",  # '=' so that '' is not NULL's ''
    "mysql": "MD5(CAST({x} AS TEXT))",
    "snowflake": "MD5(CAST({x} AS TEXT))",
    "bigquery": "MD5(CAST({x} AS TEXT))",
    "databricks": "MD5(CAST({x} AS TEXT))",
    # Redshift's TEXT is VARCHAR(256): a longer cell would not fit.
    "redshift": "MD5(CAST({x} AS VARCHAR(65535)))",
    "trino": "LOWER(TO_HEX(MD5(TO_UTF8(CAST({x} AS VARCHAR)))))",
}


def fingerprint_tag(decode: Decode) -> str:
    """What a fingerprint starts with: the rules' version and the ``decode`` setting."""
    return f"{RULES_VERSION}/{decode}/"


@dataclass(frozen=True)
class NormalizedColumns:
    """The DOI column of a table and the five columns a normalize run writes beside it."""

    source: str
    doi: str
    key: str
    valid: str
    reason: str
    fingerprint: str

    @classmethod
    def of(cls, source: str, prefix: str = "doi") -> NormalizedColumns:
        """``source`` and the columns of ``prefix`` (``doi``, ..., ``doi_fingerprint``)."""
        return cls(source, *normalized_columns(prefix), f"{prefix}_fingerprint")

    @property
    def written(self) -> tuple[str, str, str, str, str]:
        """The five columns a run writes, the fingerprint last."""
        return self.doi, self.key, self.valid, self.reason, self.fingerprint

    def quoted(self, qualifier: str | None = None) -> NormalizedColumns:
        """Every name quoted (ANSI), each after ``qualifier.`` when given (a table alias)."""
        prefix = f"{qualifier}." if qualifier else ""
        return NormalizedColumns(*(f"{prefix}{quote_identifier(name)}"
                                   for name in (self.source, *self.written)))


def fingerprint_sql(dialect: StatementDialect, source: str, decode: Decode) -> str | None:
    """The fingerprint of the quoted column ``source`` in ANSI form (never NULL), or None where
    the engine's hash is not known here."""
    digest = _HASH.get(dialect.name)
    if digest is None:
        return None
    return f"('{fingerprint_tag(decode)}' || COALESCE({digest.format(x=source)}, ''))"


def stale_sql(columns: NormalizedColumns, fingerprint: str) -> str:
    """The rows a run rewrites (see the module docstring), over quoted ``columns``; true or
    false for every row, never NULL."""
    c = columns
    return (
        f"({c.fingerprint} IS NULL OR {c.fingerprint} <> {fingerprint} OR {c.valid} IS NULL"
        f" OR (NOT {c.valid} AND {c.reason} IS NULL)"
        f" OR ({c.key} IS NULL AND ({c.valid} OR {c.reason} = 'reserved_suffix'))"
        f" OR ({c.doi} IS NULL AND {c.key} IS NOT NULL))"
    )
