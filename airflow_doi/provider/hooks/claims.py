"""Claims on due keys, so that tasks running at once never ask the proxy for one key twice.

Concurrent DAG runs, mapped tasks and workers that resolve the same results table share a
claims table beside it (``<results_table>_claims``): one row per key being resolved, with its
owner (the task: DAG, run, task and map index), a token for this one claim, and a lease. A
task claims the keys of a batch before it sends a request and deletes its claim rows in the
same transaction that stores the answers; keys another task holds are put off, and waited
for at the end (they end up stored, or their lease runs out and they are claimed then).

A claim is a compare-and-set on the key's row, so it is safe on every engine:

1. the rows of the batch's keys are created if missing (``ON CONFLICT DO NOTHING``,
   ``INSERT IGNORE``, ``MERGE``, or ``INSERT ... WHERE NOT EXISTS``), as already expired;
2. where the engine has ``FOR UPDATE SKIP LOCKED`` (PostgreSQL, MySQL 8, MariaDB 10.6), the
   free rows are locked first, skipping any another claim is locking right now;
3. ``UPDATE ... SET owner, token, lease WHERE key IN (...) AND (lease over OR same owner)``:
   the database re-checks the condition on each row as it updates it, so of two claims at
   once exactly one takes a key;
4. the rows carrying this claim's token are read back: they are the keys that are ours;
5. once the claim is committed, keys whose answer another task stored meanwhile (its answers
   and the deletion of its claim are one commit) are let go again (:meth:`drop_fresh`).

While a claim's requests run, its lease is renewed every third of its length
(:meth:`renew`), so a slow proxy or a rate shared through Redis never lets keys go mid-batch.

A killed task leaves its rows behind: its own next try (same owner) takes them back at once,
so does any claim on the same machine once the process that made them is gone (the token
names host and process), and anyone else after ``lease`` seconds. Keys whose row in the
results table is still fresh are never claimed: another task stored them meanwhile.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_doi.db.statements import StatementDialect, native_cursor, quote_identifier
from airflow_doi.provider.hooks.tables import TableShape

__all__ = ["CLAIM_COLUMNS", "Claim", "KeyClaims", "Staleness", "claim_types", "claims_table_of"]

CLAIM_COLUMNS: tuple[str, ...] = ("doi_key", "owner", "token", "claimed_at", "lease_until")


def claim_types(dialect: StatementDialect) -> tuple[str, ...]:
    """SQL types of :data:`CLAIM_COLUMNS`, in order."""
    text, stamp = dialect.text_type, dialect.timestamp_type
    return (dialect.key_text, text, text, stamp, stamp)


#: Engines whose ``SELECT ... FOR UPDATE SKIP LOCKED`` the claim uses (step 2).
SKIP_LOCKED = frozenset({"postgres", "mysql"})
#: Engines whose server turned out to have none (MariaDB 10.5): asked once per process.
_NO_SKIP_LOCKED: set[str] = set()
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _place() -> str:
    """Where process ids mean the same thing: host name, boot and PID namespace (containers
    sharing a host name have PID namespaces of their own)."""
    place = [socket.gethostname().replace("/", "_")]
    for path, read in (("/proc/sys/kernel/random/boot_id", "text"), ("/proc/self/ns/pid", "link")):
        try:
            if read == "text":
                with open(path, encoding="ascii") as handle:
                    place.append(handle.read().strip()[:8])
            else:
                place.append(os.readlink(path).replace("/", "_"))
        except OSError:
            place.append("?")
    return "#".join(place)


_PLACE = _place()


def _gone(token: str) -> bool:
    """True when ``token`` (``place/pid/random``) was made by a process of this machine,
    boot and PID namespace that no longer exists."""
    parts = token.rsplit("/", 2)
    if len(parts) != 3 or parts[0] != _PLACE or "?" in _PLACE or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists but is not ours to signal
        return False
    return False


def claims_table_of(results_table: str) -> str:
    """The claims table of a results table: ``s.doi_resolution`` -> ``s.doi_resolution_claims``."""
    name = f"{results_table}_claims"
    quote_identifier(name)
    return name


@dataclass
class Claim:
    """What one claim got: ``mine`` to resolve now, ``elsewhere`` held by another task,
    ``fresh`` already stored (by another task, meanwhile)."""

    token: str
    mine: set[str] = field(default_factory=set)
    elsewhere: set[str] = field(default_factory=set)
    fresh: set[str] = field(default_factory=set)


def _chunks(values: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start:start + size]


@dataclass(frozen=True)
class Staleness:
    """When a stored answer is due again: past its ``expires_at`` (or without one), unless its
    status is one of ``keep``; or at once, whatever its age, when its status is one of
    ``redo`` (a run that wants URLs redoes an existence-only run's ``registered`` rows)."""

    status_column: str = "status"
    keep: tuple[str, ...] = ()
    redo: tuple[str, ...] = ()

    def condition(self, dialect: StatementDialect, now: datetime,
                  alias: str = "") -> tuple[str, list[Any]]:
        """SQL true for a stale row of the results table (columns prefixed ``alias``), and
        its values."""
        stale = f'({alias}"expires_at" IS NULL OR {alias}"expires_at" <= {dialect.marks()})'
        status = f"{alias}{quote_identifier(self.status_column)}"
        if self.keep:
            stale = f"({stale} AND {status} NOT IN ({dialect.marks(len(self.keep))}))"
        if self.redo:
            stale = f"({stale} OR {status} IN ({dialect.marks(len(self.redo))}))"
        return stale, [dialect.timestamp(now), *self.keep, *self.redo]


@dataclass(frozen=True)
class KeyClaims:
    """The claims table of one results table, as one owner uses it."""

    table: str
    results_table: str
    dialect: StatementDialect
    owner: str
    lease: float
    staleness: Staleness = field(default_factory=Staleness)

    @property
    def _per_statement(self) -> int:
        return max(1, self.dialect.max_params - 8)

    def ensure(self, cursor: Any) -> None:
        """``CREATE TABLE IF NOT EXISTS`` the claims table; refuse a table that is not one."""
        TableShape(
            CLAIM_COLUMNS, claim_types, not_null=CLAIM_COLUMNS, kind="table",
            writer=f"the claims table of {self.results_table}", parameter="results_table",
            purpose="resolve into another pair of tables",
        ).ensure(cursor, self.dialect, self.table)

    def claim(self, cursor: Any, keys: Sequence[str], now: datetime) -> Claim:
        """Claim ``keys`` (the caller commits at once, before any request is sent)."""
        claim = Claim(token=f"{_PLACE}/{os.getpid()}/{uuid.uuid4().hex}")
        if not keys:
            return claim
        claim.fresh = self._fresh(cursor, keys, now)
        todo = [k for k in keys if k not in claim.fresh]
        if not todo:
            return claim
        self._create_rows(cursor, todo)
        candidates: Sequence[str] = todo
        if self.dialect.name in SKIP_LOCKED and self.dialect.name not in _NO_SKIP_LOCKED:
            try:
                candidates = self._free_rows_locked(cursor, todo, now)
            except Exception as error:
                # MariaDB before 10.6 has no SKIP LOCKED (a syntax error, which leaves the
                # transaction usable there): the compare-and-set alone is enough.
                if self.dialect.name != "mysql" or "syntax" not in str(error).lower():
                    raise
                _NO_SKIP_LOCKED.add(self.dialect.name)
        d = self.dialect
        stamp = d.timestamp(now)
        until = d.timestamp(now + timedelta(seconds=self.lease))
        for chunk in _chunks(candidates, self._per_statement):
            cursor.execute(
                f'UPDATE {quote_identifier(self.table)} SET "owner" = {d.marks()}, '
                f'"token" = {d.marks()}, "claimed_at" = {d.marks()}, "lease_until" = {d.marks()} '
                f'WHERE "doi_key" IN ({d.marks(len(chunk))}) '
                f'AND ("lease_until" <= {d.marks()} OR "owner" = {d.marks()})',
                [self.owner, claim.token, stamp, until, *chunk, stamp, self.owner],
            )
        claim.mine = self._carrying(cursor, todo, claim.token)
        claim.elsewhere = set(todo) - claim.mine
        if claim.elsewhere:
            self._take_from_the_dead(cursor, claim, stamp, until)
        return claim

    def _take_from_the_dead(self, cursor: Any, claim: Claim, stamp: Any, until: Any) -> None:
        """Keys held by a process of this machine that is gone (killed, not retried yet):
        taken over at once, without waiting for its lease (claims by other machines wait)."""
        d = self.dialect
        held = sorted(claim.elsewhere)
        tokens: set[str] = set()
        for chunk in _chunks(held, self._per_statement):
            cursor.execute(
                f'SELECT DISTINCT "token" FROM {quote_identifier(self.table)} WHERE "doi_key" '
                f'IN ({d.marks(len(chunk))})', list(chunk))
            tokens.update(row[0] for row in cursor.fetchall())
        dead = [token for token in tokens if _gone(token)]
        if not dead:
            return
        for token in dead:
            for chunk in _chunks(held, self._per_statement - 1):
                cursor.execute(
                    f'UPDATE {quote_identifier(self.table)} SET "owner" = {d.marks()}, '
                    f'"token" = {d.marks()}, "claimed_at" = {d.marks()}, '
                    f'"lease_until" = {d.marks()} '
                    f'WHERE "doi_key" IN ({d.marks(len(chunk))}) AND "token" = {d.marks()}',
                    [self.owner, claim.token, stamp, until, *chunk, token])
        taken = self._carrying(cursor, held, claim.token)
        claim.mine |= taken
        claim.elsewhere -= taken

    def drop_fresh(self, cursor: Any, claim: Claim, now: datetime) -> None:
        """After the claim is committed: keys another task stored meanwhile (its answers and
        the deletion of its claim are one commit, so a look now sees them) leave ``mine``."""
        fresh = self._fresh(cursor, sorted(claim.mine), now)
        if fresh:
            self._delete(cursor, sorted(fresh), claim.token)
            claim.mine -= fresh
            claim.fresh |= fresh

    def renew(self, cursor: Any, claim: Claim, now: datetime) -> None:
        """Push the lease of a claim's keys ``lease`` seconds past ``now``."""
        d = self.dialect
        until = d.timestamp(now + timedelta(seconds=self.lease))
        for chunk in _chunks(sorted(claim.mine), self._per_statement - 1):
            cursor.execute(
                f'UPDATE {quote_identifier(self.table)} SET "lease_until" = {d.marks()} WHERE '
                f'"doi_key" IN ({d.marks(len(chunk))}) AND "token" = {d.marks()}',
                [until, *chunk, claim.token])

    def finish(self, cursor: Any, claim: Claim) -> None:
        """Let go of a claim's keys (their answers are stored, or they stay due)."""
        self._delete(cursor, sorted(claim.mine), claim.token)

    def _delete(self, cursor: Any, keys: Sequence[str], token: str) -> None:
        d = self.dialect
        for chunk in _chunks(keys, self._per_statement):
            cursor.execute(
                f'DELETE FROM {quote_identifier(self.table)} WHERE "doi_key" IN '
                f'({d.marks(len(chunk))}) AND "token" = {d.marks()}', [*chunk, token])

    def _carrying(self, cursor: Any, keys: Sequence[str], token: str) -> set[str]:
        """Step 4: which of ``keys`` carry ``token`` (by key: no scan, no lock on others)."""
        return self._keys_where(cursor, self.table, keys, f'"token" = {self.dialect.marks()}',
                                [token])

    def _fresh(self, cursor: Any, keys: Sequence[str], now: datetime) -> set[str]:
        """Which of ``keys`` have a row in the results table that is not due (not expired)."""
        stale, params = self.staleness.condition(self.dialect, now)
        return self._keys_where(cursor, self.results_table, keys, f"NOT {stale}", params)

    def _keys_where(self, cursor: Any, table: str, keys: Sequence[str], condition: str,
                    params: list[Any]) -> set[str]:
        """The ``keys`` whose row in ``table`` meets ``condition`` (``params`` bound last)."""
        d = self.dialect
        found: set[str] = set()
        for chunk in _chunks(keys, self._per_statement):
            cursor.execute(
                f'SELECT "doi_key" FROM {quote_identifier(table)} WHERE "doi_key" IN '
                f"({d.marks(len(chunk))}) AND {condition}", [*chunk, *params])
            found.update(row[0] for row in cursor.fetchall())
        return found

    def _create_rows(self, cursor: Any, keys: Sequence[str]) -> None:
        """Step 1: a row per key, expired, unless it exists (another claim's stays as is)."""
        d = self.dialect
        epoch = d.timestamp(_EPOCH)
        columns = ", ".join(quote_identifier(c) for c in CLAIM_COLUMNS)
        table = quote_identifier(self.table)
        per_statement = max(1, self._per_statement // len(CLAIM_COLUMNS))
        for chunk in _chunks(keys, per_statement):
            rows = [[key, "", "", epoch, epoch] for key in chunk]
            cells = [cell for row in rows for cell in row]
            values = ", ".join([f"({d.marks(len(CLAIM_COLUMNS))})"] * len(rows))
            if d.on_conflict:
                cursor.execute(f"INSERT INTO {table} ({columns}) VALUES {values} "
                               'ON CONFLICT ("doi_key") DO NOTHING', cells)
            elif d.name == "mysql":  # written for MySQL itself: sqlglot has no INSERT IGNORE
                quoted = ", ".join(d.quote(c) for c in CLAIM_COLUMNS)
                native_cursor(cursor).execute(
                    f"INSERT IGNORE INTO {d.quote(self.table)} ({quoted}) VALUES {values}", cells)
            elif d.merge:
                first = ", ".join(f"{d.marks()} AS {quote_identifier(c)}" for c in CLAIM_COLUMNS)
                source = " UNION ALL ".join(
                    [f"SELECT {first}"]
                    + [f"SELECT {d.marks(len(CLAIM_COLUMNS))}"] * (len(rows) - 1))
                inserted = ", ".join(f"s.{quote_identifier(c)}" for c in CLAIM_COLUMNS)
                cursor.execute(
                    f'MERGE INTO {table} AS q USING ({source}) AS s ON q."doi_key" = s."doi_key" '
                    f"WHEN NOT MATCHED THEN INSERT ({columns}) VALUES ({inserted})", cells)
            else:
                cursor.executemany(
                    f"INSERT INTO {table} ({columns}) SELECT {d.marks(len(CLAIM_COLUMNS))} "
                    f'WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE "doi_key" = {d.marks()})',
                    [[*row, row[0]] for row in rows])

    def _free_rows_locked(self, cursor: Any, keys: Sequence[str], now: datetime) -> list[str]:
        """Step 2: the free rows among ``keys``, locked; rows another claim locks are skipped."""
        d = self.dialect
        free: list[str] = []
        for chunk in _chunks(keys, self._per_statement):
            cursor.execute(
                f'SELECT "doi_key" FROM {quote_identifier(self.table)} WHERE "doi_key" IN '
                f'({d.marks(len(chunk))}) AND ("lease_until" <= {d.marks()} '
                f'OR "owner" = {d.marks()}) '
                "FOR UPDATE SKIP LOCKED",
                [*chunk, d.timestamp(now), self.owner],
            )
            free.extend(row[0] for row in cursor.fetchall())
        return free
