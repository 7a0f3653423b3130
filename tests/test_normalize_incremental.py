# ruff: noqa: F811  (``engine`` is the fixture of test_airflow_claims, used as an argument)
"""#32: a normalize run rewrites only what changed, and gives what a full refresh gives.

On real SQLite, DuckDB, PostgreSQL and MariaDB, in the database and in the worker: a catalogue
of every conformance vector, the SQL edge cases and random mixtures is normalized, then changed
at random (rows inserted, edited, deleted, set to NULL, a column emptied) several times; after
each change an incremental run writes exactly the changed rows, and its five columns equal, row
for row, those of a full refresh into other columns and Python's answer.
"""

from __future__ import annotations

import json
import random
import threading
import time
from contextlib import closing
from typing import Any

import pytest

from airflow_doi.db.statements import quote_identifier
from airflow_doi.sqlgen.conformance import EXTRA_CASES, mixtures
from airflow_doi.syntax import RULES_VERSION, validate
from tests.conftest import syntax_vectors
from tests.test_airflow_claims import Engine, engine  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("airflow_claims")]


def _storable(value: str, kind: str) -> bool:
    if any(0xD800 <= ord(c) <= 0xDFFF for c in value):  # no driver binds a lone surrogate
        return False
    return "\x00" not in value  # PostgreSQL text cannot hold it; nor MariaDB's through the C API


def _values(kind: str) -> list[str]:
    inputs = [v["input"] for v in syntax_vectors() if isinstance(v.get("input"), str)]
    return [v for v in dict.fromkeys([*inputs, *EXTRA_CASES, *mixtures(200)])
            if _storable(v, kind)]


class Catalogue:
    """A catalogue table on one engine: id, the DOI column ``raw`` and a column of the user's."""

    def __init__(self, engine: Engine, monkeypatch: pytest.MonkeyPatch, mode: str,
                 raw_type: str | None = None) -> None:
        self.engine, self.mode = engine, mode
        self.table = quote_identifier(engine.table)
        monkeypatch.setenv("AIRFLOW_CONN_CAT", json.dumps(engine.connection))
        text = engine.dialect.text_type
        engine.run(f"CREATE TABLE {self.table} (id INTEGER, raw {raw_type or text}, note {text})")
        self.functions = engine.connection["schema"] if engine.kind == "mariadb" else None
        self.next_id = 0

    def insert(self, values: list[str | None]) -> list[int]:
        ids = list(range(self.next_id, self.next_id + len(values)))
        self.next_id += len(values)
        with closing(self.engine.connect()) as conn:
            cursor = self.engine.dialect.cursor(conn)
            cursor.executemany(
                f"INSERT INTO {self.table} (id, raw, note) VALUES ({self.engine.dialect.marks(3)})",
                [(i, v, f"mine {i}") for i, v in zip(ids, values, strict=True)])
            conn.commit()
        return ids

    def run(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self.engine.run(sql, params)

    def normalize(self, **kwargs: Any) -> dict[str, Any]:
        from airflow_doi.provider.operators.normalize import DoiNormalizeOperator

        kwargs.setdefault("batch_size", 53)
        return DoiNormalizeOperator(
            task_id="normalize", conn_id="cat", table=self.engine.table, doi_column="raw",
            mode=self.mode, functions_schema=self.functions, **kwargs,
        ).execute({})

    def rows(self) -> list[tuple[Any, ...]]:
        return self.run(f"SELECT id, raw, note, doi, doi_key, doi_valid, doi_reason, "
                        f"doi_fingerprint, whole, whole_key, whole_valid, whole_reason "
                        f"FROM {self.table} ORDER BY id")


def _expected(raw: str | None) -> tuple[Any, ...]:
    answer = validate(raw)
    return answer.doi, answer.key, answer.valid, answer.reason


def _check(catalogue: Catalogue, notes: dict[int, str]) -> None:
    """Every row: the incremental columns equal the full refresh's and Python's; the user's
    column as it was."""
    rows = catalogue.rows()
    assert [r[0] for r in rows] == sorted(notes)
    for row in rows:
        ident, raw, note, *incremental = row
        doi, key, valid, reason, fingerprint, *full = incremental
        assert note == notes[ident]
        assert (doi, key, bool(valid), reason) == _expected(raw), (ident, raw)
        assert (full[0], full[1], bool(full[2]), full[3]) == _expected(raw), (ident, raw)
        assert fingerprint is not None and fingerprint.startswith(f"{RULES_VERSION}/auto/")


@pytest.mark.parametrize("engine", ["sqlite", "duckdb", "postgres", "mariadb"], indirect=True)
@pytest.mark.parametrize("mode", ["auto", "python"])
def test_an_incremental_run_writes_exactly_the_changed_rows_and_equals_a_full_refresh(
        engine: Engine, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    catalogue = Catalogue(engine, monkeypatch, mode)
    rng = random.Random(32)
    values = _values(engine.kind)
    first = [*values, None, None, ""]
    ids = catalogue.insert(first)
    notes = {i: f"mine {i}" for i in ids}
    assert catalogue.normalize()["rows_written"] == len(first)
    assert catalogue.normalize()["rows_written"] == 0  # nothing changed: nothing written
    for round_ in range(3):
        alive = sorted(notes)
        edited = rng.sample(alive, 7)
        nulled = rng.sample([i for i in alive if i not in edited], 3)
        emptied = rng.sample([i for i in alive if i not in edited + nulled], 2)
        deleted = rng.sample([i for i in alive if i not in edited + nulled + emptied], 4)
        for i in edited:  # another cell, never the same one
            catalogue.run(f"UPDATE {catalogue.table} SET raw = {engine.dialect.marks()} "
                          f"WHERE id = {i}", [f"{rng.choice(values)} edited {round_}"])
        catalogue.run(f"UPDATE {catalogue.table} SET raw = NULL WHERE id IN "
                      f"({', '.join(map(str, nulled))}) AND raw IS NOT NULL")
        nulled_now = len(nulled)  # a NULL that was NULL already is no change
        catalogue.run(f"UPDATE {catalogue.table} SET doi_valid = NULL WHERE id = {emptied[0]}")
        catalogue.run(f"UPDATE {catalogue.table} SET doi_reason = NULL, doi_valid = "
                      f"{engine.dialect.marks()} WHERE id = {emptied[1]}", [False])
        catalogue.run(f"DELETE FROM {catalogue.table} WHERE id IN "
                      f"({', '.join(map(str, deleted))})")
        for i in deleted:
            del notes[i]
        new = catalogue.insert([rng.choice([*values, None]) for _ in range(5)])
        notes.update({i: f"mine {i}" for i in new})
        summary = catalogue.normalize()
        assert summary["full_refresh"] is False
        expected = len(edited) + len(new) + len(emptied) + nulled_now
        if engine.kind == "mariadb":  # MariaDB writes (and counts) only rows whose values change
            assert summary["rows_written"] <= expected
        else:
            assert summary["rows_written"] == expected, (round_, summary)
        assert catalogue.normalize()["rows_written"] == 0
    # A full refresh into other columns, cell for cell the same.
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator

    full = DoiNormalizeOperator(task_id="full", conn_id="cat", table=engine.table,
                                doi_column="raw", mode=mode, functions_schema=catalogue.functions,
                                output_prefix="whole", full_refresh=True).execute({})
    assert full["full_refresh"] is True
    _check(catalogue, notes)


@pytest.mark.parametrize("engine", ["sqlite", "duckdb", "postgres", "mariadb"], indirect=True)
def test_rows_written_under_other_settings_are_rewritten(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run with another ``decode``, or a release with other rules, leaves no stale row: the
    rows written under the old settings are rewritten, and the log says how many."""
    catalogue = Catalogue(engine, monkeypatch, "python")
    values = ["10.1093%2Fjac%2Fdky096", "doi:10.1000/ABC", "10.1000/a%41", None]
    catalogue.insert(values)
    always = catalogue.normalize(decode="always")
    assert always["rows_written"] == 4
    rows = catalogue.run(f"SELECT doi FROM {catalogue.table} ORDER BY id")
    assert rows[0] == ("10.1093/jac/dky096",)  # decoded: decode="always"
    back = catalogue.normalize()  # decode="auto" again
    assert back == {"rows_written": 4, "full_refresh": False, "other_settings_rows": 4}
    assert catalogue.run(f"SELECT doi, doi_reason FROM {catalogue.table} ORDER BY id") == [
        (validate(v).doi, validate(v).reason) for v in values]
    # A newer release's rules: every row is stale.
    monkeypatch.setattr("airflow_doi.db.incremental.RULES_VERSION", "next")
    newer = catalogue.normalize()
    assert newer["rows_written"] == 4 and newer["other_settings_rows"] == 4
    assert catalogue.run(f"SELECT DISTINCT doi_fingerprint LIKE {engine.dialect.marks()} "
                         f"FROM {catalogue.table}", ["next/auto/%"]) in ([(True,)], [(1,)])


@pytest.mark.parametrize("engine", ["sqlite", "duckdb", "postgres", "mariadb"], indirect=True)
def test_validate_reads_the_stored_reasons_and_counts_what_it_would_compute(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_doi.provider.operators.validate import DoiValidateOperator

    catalogue = Catalogue(engine, monkeypatch, "auto")
    catalogue.insert([*_values(engine.kind)[:150], None, ""])
    catalogue.normalize()
    catalogue.run(f"UPDATE {catalogue.table} SET raw = 'not a DOI' WHERE id < 5")
    catalogue.insert(["10.1000/x/y", "10.1000/new"])  # not normalized yet

    def counted(mode: str, prefix: str | None) -> dict[str, Any]:
        return DoiValidateOperator(
            task_id="v", conn_id="cat", table=engine.table, doi_column="raw", mode=mode,
            functions_schema=catalogue.functions, max_invalid_share=1.0,
            normalized_prefix=prefix, batch_size=17).execute({})

    judged = counted("auto", None)
    assert judged["reasons"]["bad_directory"] >= 5 and judged["reasons"]["reserved_suffix"] >= 1
    for mode in ("auto", "python"):
        assert counted(mode, "doi") == judged
    # A stored reason is read, not computed: a row the test marks current with a reason of
    # its own (as no run would write it) shows that reason.
    catalogue.run(f"UPDATE {catalogue.table} SET doi_reason = 'bad_character', "
                  f"doi_valid = {engine.dialect.marks()} WHERE id = 7 AND raw IS NOT NULL",
                  [False])
    stored = counted("auto", "doi")
    assert stored["invalid_rows"] >= judged["invalid_rows"]
    assert stored["reasons"].get("bad_character", 0) >= judged["reasons"].get("bad_character", 0)


@pytest.mark.parametrize("engine", ["postgres"], indirect=True)
def test_postgres_finds_the_stale_rows_before_it_locks_and_locks_only_to_write_them(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing stale no lock is taken, so a writer's open transaction does not hold the
    run up; with stale rows the scan comes first, then the lock, then an UPDATE of those rows
    by ``ctid`` only."""
    import psycopg

    catalogue = Catalogue(engine, monkeypatch, "auto")
    catalogue.insert([f"10.1000/{i}" for i in range(2000)])
    catalogue.normalize()
    size = catalogue.run(f"SELECT pg_total_relation_size('{engine.table}')")
    writer = engine.connect()  # a catalogue writer, its transaction open (ROW EXCLUSIVE held)
    writer.execute(f"INSERT INTO {catalogue.table} (id, raw) VALUES (99999, '10.1000/late')")
    try:
        done: list[dict[str, Any]] = []
        thread = threading.Thread(target=lambda: done.append(catalogue.normalize()))
        started = time.monotonic()
        thread.start()
        thread.join(timeout=60)
        assert done and done[0]["rows_written"] == 0
        assert time.monotonic() - started < 30
    finally:
        writer.rollback()
        writer.close()
    # Nothing written: not one dead tuple, the table's size unchanged.
    assert catalogue.run(f"SELECT pg_total_relation_size('{engine.table}')") == size
    statements: list[str] = []
    real_execute = psycopg.Cursor.execute

    def recording(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        statements.append(str(query))
        return real_execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", recording)
    catalogue.run(f"UPDATE {catalogue.table} SET raw = 'doi:' || raw WHERE id < 3")
    statements.clear()
    assert catalogue.normalize()["rows_written"] == 3
    listing = next(i for i, s in enumerate(statements) if "CREATE TEMPORARY TABLE doi_stale" in s)
    lock = next(i for i, s in enumerate(statements) if s.startswith("LOCK TABLE"))
    update = next(i for i, s in enumerate(statements) if s.startswith("UPDATE"))
    assert listing < lock and update == lock + 1
    assert "ctid = ANY(ARRAY(SELECT tid FROM doi_stale_rows_" in statements[update]


@pytest.mark.parametrize("engine", ["sqlite", "duckdb", "postgres", "mariadb"], indirect=True)
def test_an_empty_cell_emptied_to_null_and_back_is_rewritten(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """'' and NULL have fingerprints of their own on every engine (SQLite's, the text itself,
    once gave both the same one): each change between them rewrites the row."""
    catalogue = Catalogue(engine, monkeypatch, "auto")
    (row,) = catalogue.insert([""])
    assert catalogue.normalize()["rows_written"] == 1
    for value in (None, "", None):
        if value is None:
            catalogue.run(f"UPDATE {catalogue.table} SET raw = NULL WHERE id = {row}")
        else:
            catalogue.run(f"UPDATE {catalogue.table} SET raw = '' WHERE id = {row}")
        assert catalogue.normalize()["rows_written"] == 1, value
        assert catalogue.normalize()["rows_written"] == 0, value


#: A case- and accent-blind collation for the DOI column, per engine (None: the engine's text
#: type as it is; MariaDB's default collation is already case- and accent-blind).
_BLIND = {"sqlite": "TEXT COLLATE NOCASE", "duckdb": "VARCHAR COLLATE NOCASE.NOACCENT",
          "postgres": "TEXT COLLATE {schema}.doi_blind",
          "mariadb": "TEXT COLLATE utf8mb4_general_ci"}


@pytest.mark.parametrize("engine", ["sqlite", "duckdb", "postgres", "mariadb"], indirect=True)
@pytest.mark.parametrize("mode", ["auto", "python"])
def test_a_case_and_accent_blind_column_is_read_as_the_text_it_holds(
        engine: Engine, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The column's collation reaches neither the rules nor the fingerprint: spellings it
    would call equal are each normalized as they are, and an edit it would call no change
    (café -> cafe, abc -> ABC) is rewritten (DuckDB carries a collation through CAST and ||;
    PostgreSQL refuses LIKE under a nondeterministic one)."""
    schema = engine.table.split(".")[0] if engine.kind == "postgres" else ""
    if engine.kind == "postgres":
        engine.run(f"CREATE COLLATION {schema}.doi_blind (provider = icu, "
                   "locale = 'und-u-ks-level1', deterministic = false)")
    catalogue = Catalogue(engine, monkeypatch, mode, _BLIND[engine.kind].format(schema=schema))
    table = catalogue.table
    values = ["10.1000/café", "10.1000/abc", "10.1000/ABC", "doi:10.1000/Abc", "10.1000/cafe"]
    catalogue.insert(list(values))

    def normalize() -> dict[str, Any]:
        return catalogue.normalize(batch_size=2)

    def stored() -> list[tuple[Any, ...]]:
        return [(raw, doi, key) for raw, doi, key in
                engine.run(f"SELECT raw, doi, doi_key FROM {table} ORDER BY id")]

    def answers(cells: list[str]) -> list[tuple[Any, ...]]:
        return [(v, validate(v).doi, validate(v).key) for v in cells]

    assert normalize()["rows_written"] == len(values)
    assert stored() == answers(values)
    engine.run(f"UPDATE {table} SET raw = 'DOI: 10.1000/CAFE' WHERE id = 0")
    engine.run(f"UPDATE {table} SET raw = '10.1000/ABC' WHERE id = 1")
    edited = ["DOI: 10.1000/CAFE", "10.1000/ABC", *values[2:]]
    assert normalize()["rows_written"] == 2
    assert stored() == answers(edited)
    assert normalize()["rows_written"] == 0
