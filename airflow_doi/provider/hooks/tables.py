"""The shape of the tables the provider keeps beside a catalogue, and their creation.

Each holds one row per value of its first column (its primary key): the answers of the
resolve and enrich steps by ``doi_key``, the repair suggestions by raw cell, the claims by
``doi_key``. A table is created when missing; a table of the same name that lacks one of its
columns is not one the provider wrote, and is refused before any write, untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_doi.db.statements import StatementDialect, missing_columns, quote_identifier

__all__ = ["TableShape", "keyed_columns"]


def keyed_columns(result_columns: Sequence[str], left_out: Sequence[str] = ()) -> tuple[str, ...]:
    """A results table's columns from its result's (``input``, ``doi``, ``key``, ...):
    ``doi_key`` first (the result's ``key``), then the others but ``input`` and ``left_out``."""
    dropped = {"input", "key", *left_out}
    return ("doi_key", *(column for column in result_columns if column not in dropped))


@dataclass(frozen=True)
class TableShape:
    """The columns of a table the provider writes, their SQL types, and who refuses what.

    The first column is the primary key; ``not_null`` columns are declared ``NOT NULL``. A
    table of the name that is not of this shape is refused with ``the {kind} {table} already
    exists and is not {writer} (no column ...); it was left untouched: pass
    {parameter}='another_name' to {purpose}``.
    """

    columns: tuple[str, ...]
    #: The SQL types of :attr:`columns`, in order, in a dialect.
    types: Callable[[StatementDialect], tuple[str, ...]]
    not_null: tuple[str, ...]
    kind: str
    writer: str
    parameter: str
    purpose: str
    #: Columns added by a later release (nullable): a table of this shape from an earlier one
    #: gains them, instead of being refused.
    added: tuple[str, ...] = ()

    def ensure(self, cursor: Any, dialect: StatementDialect, table: str) -> None:
        """``CREATE TABLE IF NOT EXISTS`` ``table``; refuse (``ValueError``) one that is not
        of this shape, before any write."""
        declared = ", ".join(
            f"{quote_identifier(column)} {sql_type}"
            + (" NOT NULL PRIMARY KEY" if column == self.columns[0]
               else " NOT NULL" if column in self.not_null else "")
            for column, sql_type in zip(self.columns, self.types(dialect), strict=True)
        )
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {quote_identifier(table)} ({declared})")
        missing = missing_columns(cursor, table, self.columns,
                                  case_sensitive=dialect.case_sensitive_identifiers)
        if missing and set(missing) <= set(self.added):  # written by an earlier release
            types = dict(zip(self.columns, self.types(dialect), strict=True))
            for column in missing:
                cursor.execute(f"ALTER TABLE {quote_identifier(table)} ADD COLUMN "
                               f"{quote_identifier(column)} {types[column]}")
            missing = []
        if missing:
            raise ValueError(
                f"the {self.kind} {table} already exists and is not {self.writer} (no column "
                f"{', '.join(missing)}); it was left untouched: pass {self.parameter}="
                f"'another_name' to {self.purpose}"
            )
