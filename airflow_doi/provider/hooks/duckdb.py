"""A minimal DB-API hook for DuckDB files, so every common-sql operator works on them.

Connection type ``doi_duckdb`` (this project's own name: ``duckdb`` belongs to the DuckDB
provider, ``airflow-provider-duckdb``). The database file is in ``host`` (empty for an
in-memory database); extras ``read_only`` and ``lock_wait``. A connection of type ``duckdb``
gets the DuckDB provider's hook when that provider is installed, and this one otherwise
(:func:`airflow_doi.provider.hooks.sql.sql_hook`).

DuckDB lets one process open a file for writing at a time: a second one fails at once with
``Could not set lock on file``. Tasks run side by side under a real executor, so opening the
file waits for it (``lock_wait`` seconds, :data:`DEFAULT_LOCK_WAIT` by default; 0 fails at
once), saying in the task log which process holds it. The DOI operators keep the file open
only as long as a statement needs it; a DAG should still put the tasks that write one file
in a one-slot Airflow pool (README, "Running in production").
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.providers.common.sql.hooks.sql import DbApiHook

if TYPE_CHECKING:
    import duckdb

__all__ = ["CONN_TYPE", "DEFAULT_LOCK_WAIT", "DuckDbHook", "is_lock_conflict", "lock_wait_of",
           "wait_for_file"]

#: This project's connection type for DuckDB files.
CONN_TYPE = "doi_duckdb"
#: Seconds a task waits for a DuckDB file another process holds, unless the connection says.
DEFAULT_LOCK_WAIT = 600.0
#: Seconds between two tries while waiting.
_POLL = 0.2

T = TypeVar("T")
_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.*?) \(PID (?P<pid>\d+)\)")


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def is_lock_conflict(error: BaseException) -> bool:
    """True for DuckDB's "another process holds this file" error."""
    return "Could not set lock on file" in str(error)


def lock_wait_of(extra: dict[str, Any]) -> float:
    """The ``lock_wait`` extra of a connection in seconds (a clear error when it is not one)."""
    value = extra.get("lock_wait")
    if value is None or value == "":
        return DEFAULT_LOCK_WAIT
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds >= 0:
        raise ValueError(f"DuckDB connection: extra lock_wait must be seconds (0 or more), "
                         f"not {value!r}")
    return seconds


def wait_for_file(
    open_file: Callable[[], T], database: str, wait: float, log: logging.Logger | Any
) -> T:
    """``open_file()``, tried again while another process holds ``database``, up to ``wait``
    seconds; logs once who holds it and how long this task will wait."""
    deadline = time.monotonic() + wait
    announced = False
    while True:
        try:
            return open_file()
        except Exception as error:
            if not is_lock_conflict(error):
                raise
            holder = _HOLDER.search(str(error))
            who = f"process {holder['pid']}" if holder else "another process"
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"the DuckDB file {database} is still held by {who} after {wait:g} s "
                    "(DuckDB lets one process write a file at a time): put the tasks that "
                    "write it in a one-slot pool, or raise the connection's lock_wait extra"
                ) from None
            if not announced:
                log.info("The DuckDB file %s is held by %s; waiting up to %g s for it "
                         "(the connection's lock_wait extra)", database, who, wait)
                announced = True
            time.sleep(_POLL)


class DuckDbHook(DbApiHook):
    """Talk to a DuckDB database file through the DB-API (placeholder ``?``)."""

    conn_name_attr = "duckdb_conn_id"
    default_conn_name = "duckdb_default"
    conn_type = CONN_TYPE
    hook_name = "DuckDB file (airflow-doi)"
    supports_autocommit = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._placeholder = "?"

    @property
    def database(self) -> str:
        """The database file of the connection (``host``, else ``schema``), or ``:memory:``."""
        connection = self.get_connection(self.get_conn_id())
        return connection.host or connection.schema or ":memory:"

    def get_conn(self) -> duckdb.DuckDBPyConnection:
        """A connection to the file, waiting up to ``lock_wait`` s for another process's."""
        import duckdb

        connection = self.get_connection(self.get_conn_id())
        extra = connection.extra_dejson
        read_only = _truthy(extra.get("read_only", False))
        database = self.database
        return wait_for_file(lambda: duckdb.connect(database, read_only=read_only), database,
                             lock_wait_of(extra), self.log)

    def get_uri(self) -> str:
        return f"duckdb:///{self.database}"

    @property
    def dialect_name(self) -> str:
        return "duckdb"

    def set_autocommit(self, conn: Any, autocommit: bool) -> None:
        """DuckDB commits each statement unless a transaction is open: nothing to switch."""

    def get_autocommit(self, conn: Any) -> bool:
        return False
