"""SQLite: no SQL-defined functions exist, so the "dialect file" documents the Python helper.

:func:`airflow_doi.db.sqlite.register` registers doi_normalize, doi_key, doi_is_valid,
doi_reason and doi_url on a ``sqlite3.Connection``; they call :mod:`airflow_doi.syntax`
directly, so SQLite agrees with Python by construction (and the tests still check it).
"""

from __future__ import annotations

from airflow_doi.sqlgen.dialects.base import Dialect

USAGE = """\
SQLite has no CREATE FUNCTION: its functions are registered by the host program. In Python:

    import sqlite3
    from airflow_doi.db.sqlite import register

    con = sqlite3.connect("catalogue.db")
    register(con)   # doi_normalize, doi_key, doi_is_valid, doi_reason, doi_url
    con.execute("SELECT doi_key(doi) FROM works")

The functions call airflow_doi.syntax (deterministic=True, so SQLite may use them in indexes
and generated columns of connections that register them)."""


class SQLite(Dialect):
    name = "sqlite"
    sqlglot_dialect = "sqlite"
    title = "SQLite (Python sqlite3 registration helper)"
    proof = "run through python sqlite3 against every conformance vector in the test suite."
    install = "airflow_doi.db.sqlite.register(connection); this file holds no DDL."

    @property
    def has_helper_functions(self) -> bool:
        return False

    def file_text(self) -> str:
        return self.header() + "\n--\n" + self.comment(USAGE) + "\n"
