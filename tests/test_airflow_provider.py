"""The Airflow provider: discovery, the connection form, the hooks and the operators in-process.

The operators run here against real SQLite, DuckDB and PostgreSQL databases and the bundled
proxy simulator, called directly (``operator.execute``) for speed; ``test_airflow_dag.py``
runs the whole DAG through ``airflow dags test``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlparse

import pytest

# Airflow reads its home at import: never let the suite write to ~/airflow.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-doi-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

import duckdb

from airflow_doi.db.statements import quote_identifier, sibling_table
from airflow_doi.resolver.simulator import ProxySimulator, make_records

ROOT = Path(__file__).resolve().parent.parent
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
INJECTION = "x'); DROP TABLE works; --"
QUOTED_DOI = "10.1000/1'; DELETE FROM catalogue; --"
VALUES = [
    "10.1000/ABC",
    "doi:10.1000/abc",
    "https://doi.org/10.1000/x%20y",
    None,
    "junk",
    INJECTION,
    "10.1000/a/b",
    " 10.5555/Q ",
    QUOTED_DOI,
    "10.1000/Straße",
    "10.1000/missing",
]
#: Comparison keys of the valid values above (what the resolver must ask for, once each).
VALID_KEYS = {
    "10.1000/ABC", "10.1000/X Y", "10.5555/Q", "10.1000/1'; DELETE FROM CATALOGUE; --",
    "10.1000/STRAßE", "10.1000/MISSING",
}


def _airflow(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRFLOW, *args], capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ}, cwd=os.environ["AIRFLOW_HOME"],
    )


# -- discovery ------------------------------------------------------------------------------
def test_providers_list_shows_the_provider() -> None:
    result = _airflow("providers", "list", "-o", "json")
    assert result.returncode == 0, result.stderr
    providers = {p["package_name"]: p for p in json.loads(result.stdout)}
    assert "airflow-doi" in providers
    assert providers["airflow-doi"]["version"] == "0.1.0"


def test_connection_types_and_form_fields_are_registered() -> None:
    hooks = json.loads(_airflow("providers", "hooks", "-o", "json").stdout)
    by_type = {h["connection_type"]: h for h in hooks}
    assert by_type["doi_proxy"]["class"] == "airflow_doi.provider.hooks.doi_proxy.DoiProxyHook"
    # "duckdb" is the DuckDB provider's type: ours is doi_duckdb (#24).
    assert by_type["doi_duckdb"]["class"] == "airflow_doi.provider.hooks.duckdb.DuckDbHook"
    assert "duckdb" not in by_type
    widgets = json.loads(_airflow("providers", "widgets", "-o", "json").stdout)
    fields = {w["connection_parameter_name"]: w["field_type"] for w in widgets}
    for name, kind in [("rate", "number"), ("concurrency", "integer"), ("timeout", "number"),
                       ("contact", "string"), ("redis_url", "string")]:
        assert kind in fields[f"extra__doi_proxy__{name}"]
    assert "number" in fields["extra__doi_duckdb__lock_wait"]


def test_provider_info_matches_the_schema_and_imports_nothing() -> None:
    import airflow
    import jsonschema

    schema_path = Path(airflow.__file__).with_name("provider_info.schema.json")
    from airflow_doi.provider.get_provider_info import get_provider_info

    jsonschema.validate(get_provider_info(), json.loads(schema_path.read_text()))
    probe = subprocess.run(
        [sys.executable, "-c",
         "import sys, airflow_doi.provider.get_provider_info as m; m.get_provider_info();"
         " print(sorted(n for n in sys.modules if n.split('.')[0] in ('airflow', 'aiohttp')))"],
        capture_output=True, text=True, check=True,
    )
    assert probe.stdout.strip() == "[]"


def test_one_import_line_for_the_operators_and_the_hooks() -> None:
    """``from airflow_doi.provider.operators import ...`` (the README's line) and the same for
    hooks; ``import airflow_doi`` and ``import airflow_doi.provider.hooks`` alone still import
    no Airflow."""
    code = (
        "import sys; import airflow_doi, airflow_doi.provider, airflow_doi.provider.hooks, "
        "airflow_doi.provider.operators; "
        "print(sorted(n for n in sys.modules if n.split('.')[0] == 'airflow')); "
        "from airflow_doi.provider.operators import DoiNormalizeOperator, DoiResolveOperator, "
        "DoiValidateOperator; from airflow_doi.provider.hooks import DoiProxyHook, DuckDbHook; "
        "from airflow.sdk import BaseHook, BaseOperator; "
        "print(all(issubclass(c, BaseOperator) for c in (DoiNormalizeOperator, "
        "DoiResolveOperator, DoiValidateOperator)), issubclass(DoiProxyHook, BaseHook), "
        "DuckDbHook.conn_type, DoiNormalizeOperator.__module__)"
    )
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, check=False)
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.splitlines() == [
        "[]", "True True doi_duckdb airflow_doi.provider.operators.normalize"]
    import airflow_doi.provider.operators

    with pytest.raises(AttributeError, match="DoiMissingOperator"):
        airflow_doi.provider.operators.DoiMissingOperator  # noqa: B018


# -- the doi_proxy connection ----------------------------------------------------------------
def test_config_from_connection_fields() -> None:
    from airflow_doi.provider.hooks.doi_proxy import (
        base_url_from_parts,
        resolver_config_from_connection,
    )

    assert base_url_from_parts(None) == "https://doi.org"
    assert base_url_from_parts("https://doi.org/") == "https://doi.org"
    assert base_url_from_parts("127.0.0.1", "http", 8080) == "http://127.0.0.1:8080"
    config = resolver_config_from_connection(
        "http://127.0.0.1:9", {"rate": "7.5", "concurrency": "3", "timeout": 2,
                               "contact": "ops@lib.example-uni.edu", "redis_url": "",
                               "extra__doi_proxy__max_attempts": 2},
    )
    assert (config.base_url, config.rate, config.concurrency, config.timeout) == (
        "http://127.0.0.1:9", 7.5, 3, 2.0)
    assert config.contact == "ops@lib.example-uni.edu" and config.redis_url is None
    assert config.max_attempts == 2
    assert "mailto:ops@lib.example-uni.edu" in config.user_agent
    assert resolver_config_from_connection(None, {"rate": 1}, rate=9).rate == 9
    with pytest.raises(ValueError, match="unknown extra 'rates'"):
        resolver_config_from_connection(None, {"rates": 3})
    with pytest.raises(ValueError, match="'concurrency' must be an integer"):
        resolver_config_from_connection(None, {"concurrency": "many"})
    with pytest.raises(ValueError, match="http"):
        resolver_config_from_connection("ftp://doi.org")


def test_proxy_hook_reads_the_connection_and_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook

    with ProxySimulator(make_records(["10.1000/182"])) as sim:
        monkeypatch.setenv("AIRFLOW_CONN_MY_PROXY", json.dumps(
            {"conn_type": "doi_proxy", "host": sim.url, "extra": {"rate": 50, "concurrency": 2}}
        ))
        hook = DoiProxyHook("my_proxy")
        assert hook.get_config().base_url == sim.url
        assert hook.get_config().rate == 50
        found, missing, junk = hook.resolve(["doi:10.1000/182", "10.1000/nope", "junk"])
        assert (found.status, missing.status, junk.status) == ("resolved", "not_found", "invalid")
        assert sim.request_count == 2
        assert hook.test_connection()[0] is True
    monkeypatch.delenv("AIRFLOW_CONN_DOI_PROXY_DEFAULT", raising=False)
    assert DoiProxyHook().get_config().base_url == "https://doi.org"  # default id: public proxy


# -- SQL helpers ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["catalogue", "s.catalogue", "_x1", "db.s.t"])
def test_plain_identifiers_are_quoted(name: str) -> None:
    assert quote_identifier(name) == ".".join(f'"{p}"' for p in name.split("."))


@pytest.mark.parametrize("name", [
    "catalogue; DROP TABLE works", 'a"b', "a b", "", ".t", "t.", "1abc", "a.b.c.d", "naïve",
])
def test_other_identifiers_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="identifier"):
        quote_identifier(name)


def test_sibling_table_keeps_the_schema() -> None:
    assert sibling_table("s.catalogue", "doi_resolution") == "s.doi_resolution"
    assert sibling_table("catalogue", "doi_resolution") == "doi_resolution"


# -- operators on real databases ------------------------------------------------------------
class Database:
    """One catalogue database for the operator tests: its connection and a raw client."""

    def __init__(self, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 postgres_dsn: str | None = None, schema: str | None = None) -> None:
        self.kind = kind
        self.conn_id = f"cat_{kind}"
        self.table = f"{schema}.catalogue" if schema else "catalogue"
        self.results = sibling_table(self.table, "doi_resolution")
        if kind == "sqlite":
            self.path = str(tmp_path / "catalogue.sqlite")
            connection = {"conn_type": "sqlite", "host": self.path}
        elif kind == "duckdb":
            self.path = str(tmp_path / "catalogue.duckdb")
            connection = {"conn_type": "duckdb", "host": self.path}
        else:
            assert postgres_dsn is not None
            self.dsn = postgres_dsn
            url = urlparse(postgres_dsn)
            connection = {"conn_type": "postgres", "host": url.hostname, "port": url.port or 5432,
                          "login": url.username, "password": url.password or "",
                          "schema": url.path.lstrip("/")}
        monkeypatch.setenv(f"AIRFLOW_CONN_{self.conn_id.upper()}", json.dumps(connection))

    def connect(self) -> object:
        if self.kind == "sqlite":
            return sqlite3.connect(self.path)
        if self.kind == "duckdb":
            return duckdb.connect(self.path)
        import psycopg

        return psycopg.connect(self.dsn)

    def run(self, sql: str, rows: list[tuple[object, ...]] | None = None) -> list[tuple]:
        conn = self.connect()
        try:
            cursor = conn.cursor()  # type: ignore[attr-defined]
            if self.kind == "postgres":
                sql = sql.replace("?", "%s")
            if rows is not None:
                cursor.executemany(sql, rows)
                result: list[tuple] = []
            else:
                cursor.execute(sql)
                result = cursor.fetchall() if cursor.description else []
            conn.commit()  # type: ignore[attr-defined]
            return [tuple(r) for r in result]
        finally:
            conn.close()  # type: ignore[attr-defined]


@pytest.fixture(params=["sqlite", "duckdb", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Database:
    if request.param == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("postgres_schema")
        db = Database("postgres", tmp_path, monkeypatch, dsn, schema)
    else:
        db = Database(request.param, tmp_path, monkeypatch)
    db.run(f"CREATE TABLE {quote_identifier(db.table)} (id INTEGER, doi_raw TEXT)")
    db.run(f"INSERT INTO {quote_identifier(db.table)} VALUES (?, ?)", list(enumerate(VALUES)))
    works = sibling_table(db.table, "works")
    db.run(f"CREATE TABLE {quote_identifier(works)} (id INTEGER)")
    db.run(f"INSERT INTO {quote_identifier(works)} VALUES (?)", [(1,), (2,)])
    return db


@pytest.fixture()
def simulator(monkeypatch: pytest.MonkeyPatch):
    known = ["10.1000/ABC", "10.1000/x y", "10.5555/Q", QUOTED_DOI, "10.1000/Straße"]
    with ProxySimulator(make_records(known)) as sim:  # 10.1000/missing: not found
        monkeypatch.setenv("AIRFLOW_CONN_DOI_PROXY_DEFAULT", json.dumps(
            {"conn_type": "doi_proxy", "host": sim.url, "extra": {"rate": 200, "concurrency": 4}}
        ))
        yield sim


def _normalize(db: Database, **kwargs: object) -> dict:
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator

    return DoiNormalizeOperator(task_id="normalize", conn_id=db.conn_id, table=db.table,
                                doi_column="doi_raw", batch_size=3, **kwargs).execute({})


def _resolve(db: Database, batch_size: int = 2) -> dict:
    from airflow_doi.provider.operators.resolve import DoiResolveOperator

    return DoiResolveOperator(task_id="resolve", conn_id=db.conn_id, table=db.table,
                              batch_size=batch_size).execute({})


def test_normalize_writes_the_standard_columns(database: Database) -> None:
    from airflow_doi import validate

    summary = _normalize(database)
    assert summary == {"rows_written": len(VALUES), "full_refresh": False,
                       "other_settings_rows": 0}
    # Incremental: nothing changed, nothing written; a full refresh writes every row again.
    assert _normalize(database)["rows_written"] == 0
    # As a template renders it: text.
    assert _normalize(database, full_refresh="True")["rows_written"] == len(VALUES)
    rows = database.run(
        f"SELECT id, doi_raw, doi, doi_key, doi_valid, doi_reason "
        f"FROM {quote_identifier(database.table)} ORDER BY id"
    )
    assert len(rows) == len(VALUES)
    for (_, raw, doi, key, valid, reason), value in zip(rows, VALUES, strict=True):
        expected = validate(value)
        assert raw == value
        assert (doi, key, bool(valid), reason) == (
            expected.doi, expected.key, expected.valid, expected.reason)
    works = quote_identifier(sibling_table(database.table, "works"))
    assert database.run(f"SELECT COUNT(*) FROM {works}") == [(2,)]


def test_normalize_never_touches_a_users_table_named_like_its_stage(database: Database) -> None:
    """The staging table is a TEMPORARY one with a per-run name: a user's table called
    ``doi_normalize_stage`` (the old fixed name) keeps its rows, and no stage is left behind."""
    from airflow_doi.provider.hooks.normalize import _STAGE_PREFIX

    theirs = quote_identifier(sibling_table(database.table, "doi_normalize_stage"))
    database.run(f"CREATE TABLE {theirs} (raw TEXT, doi TEXT)")
    database.run(f"INSERT INTO {theirs} VALUES (?, ?)", [("mine", "10.1000/mine")])
    _normalize(database, mode="python")
    assert database.run(f"SELECT raw, doi FROM {theirs}") == [("mine", "10.1000/mine")]
    assert _STAGE_PREFIX.startswith("doi_normalize_stage_")


def test_normalize_refuses_to_overwrite_its_source(database: Database) -> None:
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator

    with pytest.raises(ValueError, match="overwritten"):
        DoiNormalizeOperator(task_id="n", conn_id=database.conn_id, table=database.table,
                             doi_column="doi").execute({})
    with pytest.raises(ValueError, match="identifier"):
        DoiNormalizeOperator(task_id="n", conn_id=database.conn_id,
                             table="catalogue; DROP TABLE works", doi_column="doi_raw").execute({})


def test_a_misspelt_column_or_table_fails_first_and_touches_nothing(
        database: Database, simulator) -> None:
    """Found in a new-user trial: on SQLite a misspelt ``doi_column`` was read as a string
    literal and normalize overwrote every row's results; on DuckDB the output columns were
    added before the engine's own error. Each operator now checks its table and columns
    first, names the parameter, and the user's table stays exactly as it was."""
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator
    from airflow_doi.provider.operators.resolve import DoiResolveOperator
    from airflow_doi.provider.operators.validate import DoiValidateOperator

    table = quote_identifier(database.table)
    _normalize(database)

    def columns() -> list[str]:
        conn = database.connect()
        try:
            cursor = conn.cursor()  # type: ignore[attr-defined]
            cursor.execute(f"SELECT * FROM {table} WHERE 1 = 0")
            return [str(c[0]) for c in cursor.description]
        finally:
            conn.close()  # type: ignore[attr-defined]

    before = (columns(), database.run(f"SELECT * FROM {table} ORDER BY id"))
    common = {"conn_id": database.conn_id, "table": database.table}
    with pytest.raises(ValueError, match=r"doi_column 'doi_rawx' is not a column of .*; its "
                                         r"columns are id, doi_raw, doi, doi_key"):
        DoiNormalizeOperator(task_id="n", doi_column="doi_rawx", output_prefix="fresh_",
                             **common).execute({})
    with pytest.raises(ValueError, match="doi_column 'doi_rawx' is not a column"):
        DoiValidateOperator(task_id="v", doi_column="doi_rawx", **common).execute({})
    with pytest.raises(ValueError, match="key_column 'doi_kee' is not a column"):
        DoiResolveOperator(task_id="r", key_column="doi_kee", **common).execute({})
    with pytest.raises(ValueError, match="repair_column 'raw' is not a column"):
        DoiResolveOperator(task_id="r", repair_column="raw", **common).execute({})
    missing = sibling_table(database.table, "catalogu")
    with pytest.raises(ValueError, match=rf"table '{missing}' cannot be read on this "
                                         r"connection \(.+\): check the table name"):
        DoiNormalizeOperator(task_id="n", conn_id=database.conn_id, table=missing,
                             doi_column="doi_raw").execute({})
    assert simulator.request_count == 0
    assert (columns(), database.run(f"SELECT * FROM {table} ORDER BY id")) == before
    schema = database.table.rpartition(".")[0] or "main"  # this test's own (parallel-safe)
    assert "doi_resolution" not in str(database.run(
        "SELECT name FROM sqlite_master" if database.kind == "sqlite"
        else f"SELECT table_name FROM information_schema.tables WHERE table_schema = '{schema}'"))


def test_validate_gate_fails_or_warns(database: Database) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_doi.provider.operators.validate import DoiValidateOperator

    common = {"conn_id": database.conn_id, "table": database.table, "doi_column": "doi_raw",
              "batch_size": 4}
    summary = DoiValidateOperator(task_id="v", max_invalid_share=0.5, **common).execute({})
    assert summary["rows"] == 11 and summary["invalid_rows"] == 4
    assert summary["reasons"] == {"bad_directory": 2, "empty": 1, "reserved_suffix": 1}
    with pytest.raises(AirflowFailException, match=r"36\.36% of"):
        DoiValidateOperator(task_id="v", max_invalid_share=0.1, **common).execute({})
    warned = DoiValidateOperator(task_id="v", max_invalid_share=0.1, on_breach="warn",
                                 allow_empty=True, **common).execute({})
    assert warned["invalid_rows"] == 3


def test_resolve_asks_once_per_key_and_resumes(database: Database, simulator) -> None:
    _normalize(database)
    first = _resolve(database)
    assert first["due_keys"] == len(VALID_KEYS) and first["stored_keys"] == len(VALID_KEYS)
    assert first["batches"] == 3
    assert set(simulator.requests_by_key) == VALID_KEYS
    assert set(simulator.requests_by_key.values()) == {1}
    results = quote_identifier(database.results)
    rows = dict(database.run(f"SELECT doi_key, status FROM {results}"))
    assert rows["10.1000/MISSING"] == "not_found"
    assert rows["10.1000/1'; DELETE FROM CATALOGUE; --"] == "resolved"
    assert rows["10.1000/X Y"] == "resolved"

    simulator.reset_counts()
    assert _resolve(database)["due_keys"] == 0  # everything fresh: no request at all
    assert simulator.request_count == 0

    # An expired row and a lost row are due again; nothing else is.
    past = datetime.now(timezone.utc) - timedelta(days=1)
    stamp = past.isoformat() if database.kind == "sqlite" else past
    conn = database.connect()
    placeholder = "%s" if database.kind == "postgres" else "?"
    conn.cursor().execute(  # type: ignore[attr-defined]
        f"UPDATE {results} SET expires_at = {placeholder} WHERE doi_key = {placeholder}",
        (stamp, "10.5555/Q"),
    )
    conn.commit()  # type: ignore[attr-defined]
    conn.close()  # type: ignore[attr-defined]
    database.run(f"DELETE FROM {results} WHERE doi_key = '10.1000/ABC'")
    again = _resolve(database)
    assert again["due_keys"] == 2
    assert set(simulator.requests_by_key) == {"10.5555/Q", "10.1000/ABC"}
    assert database.run(f"SELECT COUNT(*) FROM {results}") == [(len(VALID_KEYS),)]
    assert database.run(
        f"SELECT COUNT(*) FROM {quote_identifier(sibling_table(database.table, 'works'))}"
    ) == [(2,)]
    assert database.run(f"SELECT COUNT(*) FROM {quote_identifier(database.table)}") == [(11,)]


def test_resolve_refuses_a_users_table_named_doi_resolution(database: Database,
                                                             simulator) -> None:
    """A ``doi_resolution`` that is not ours is refused with a message, before any write."""
    results = quote_identifier(database.results)
    database.run(f"CREATE TABLE {results} (doi_key TEXT PRIMARY KEY, note TEXT)")
    database.run(f"INSERT INTO {results} VALUES (?, ?)", [("10.1000/ABC", "keep me")])
    _normalize(database)
    with pytest.raises(ValueError, match=r"already exists and is not one DoiResolveOperator "
                                         r"wrote \(no column doi, status, .*results_table="):
        _resolve(database)
    assert simulator.request_count == 0
    assert database.run(f"SELECT doi_key, note FROM {results}") == [("10.1000/ABC", "keep me")]


def test_a_dead_proxy_stores_no_error_rows_and_leaves_the_keys_due(
        database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """#24: a batch the proxy answered nothing of ends the task at once; its keys get no
    ``error`` row and no claim is left behind, so the next try asks them as if never asked."""
    from airflow_doi.provider.operators.resolve import ProxyUnavailableError

    _normalize(database)
    with ProxySimulator(faults={"always_500": True}) as broken:
        monkeypatch.setenv("AIRFLOW_CONN_DOI_PROXY_DEFAULT", json.dumps(
            {"conn_type": "doi_proxy", "host": broken.url,
             "extra": {"rate": 500, "max_attempts": 1, "breaker_threshold": 1000}}))
        with pytest.raises(ProxyUnavailableError, match="the DOI proxy failed"):
            _resolve(database, batch_size=4)  # the first batch fails whole: stop, don't grind
        assert broken.request_count == 4  # the second batch was never sent
    results = quote_identifier(database.results)
    assert database.run(f"SELECT COUNT(*) FROM {results}") == [(0,)]
    claims = quote_identifier(f"{database.results}_claims")
    assert database.run(f"SELECT COUNT(*) FROM {claims}") == [(0,)]
    with ProxySimulator(auto_records=True) as healthy:
        monkeypatch.setenv("AIRFLOW_CONN_DOI_PROXY_DEFAULT", json.dumps(
            {"conn_type": "doi_proxy", "host": healthy.url, "extra": {"rate": 500}}))
        assert _resolve(database, batch_size=10)["due_keys"] == len(VALID_KEYS)
        assert healthy.request_count == len(VALID_KEYS)
    assert database.run(f"SELECT COUNT(*) FROM {results} WHERE status = 'resolved'") == [
        (len(VALID_KEYS),)]


def test_errors_of_an_answering_proxy_are_stored_and_retried_next_run(
        database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some keys fail while the proxy answers others: their ``error`` rows are stored (no
    expiry) and the next run asks exactly those again."""
    _normalize(database)
    with ProxySimulator(auto_records=True, faults={"error_every": 2}) as flaky:
        monkeypatch.setenv("AIRFLOW_CONN_DOI_PROXY_DEFAULT", json.dumps(
            {"conn_type": "doi_proxy", "host": flaky.url,
             "extra": {"rate": 500, "concurrency": 1, "max_attempts": 1,
                       "breaker_threshold": 1000}}))
        first = _resolve(database, batch_size=10)
    results = quote_identifier(database.results)
    errors = database.run(f"SELECT COUNT(*) FROM {results} WHERE status = 'error' "
                          "AND expires_at IS NULL AND error IS NOT NULL")[0][0]
    assert errors == first["by_status"]["error"] == len(VALID_KEYS) // 2
    with ProxySimulator(auto_records=True) as healthy:
        monkeypatch.setenv("AIRFLOW_CONN_DOI_PROXY_DEFAULT", json.dumps(
            {"conn_type": "doi_proxy", "host": healthy.url, "extra": {"rate": 500}}))
        assert _resolve(database, batch_size=10)["due_keys"] == errors
        assert healthy.request_count == errors
    assert database.run(f"SELECT COUNT(*) FROM {results} WHERE status = 'resolved'") == [
        (len(VALID_KEYS),)]


def test_mapped_key_ranges_cover_the_due_keys(database: Database, simulator) -> None:
    from airflow_doi.provider.operators.resolve import plan_resolve_batches, resolve_key_range

    _normalize(database)
    ranges = plan_resolve_batches(conn_id=database.conn_id, table=database.table, batch_size=4)
    assert len(ranges) == 2 and ranges[0]["after"] is None
    assert ranges[1]["after"] == ranges[0]["upto"]
    summaries = [resolve_key_range(conn_id=database.conn_id, table=database.table, **r)
                 for r in ranges]
    assert [s["stored_keys"] for s in summaries] == [4, 2]
    assert simulator.request_count == len(VALID_KEYS)
    assert resolve_key_range(conn_id=database.conn_id, table=database.table,
                             **ranges[0])["due_keys"] == 0  # a retried map index asks nothing


def test_duckdb_hook_speaks_common_sql(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_doi.provider.hooks.duckdb import DuckDbHook

    path = tmp_path / "hook.duckdb"
    monkeypatch.setenv("AIRFLOW_CONN_DUCK", json.dumps({"conn_type": "duckdb", "host": str(path)}))
    monkeypatch.setenv("AIRFLOW_CONN_DUCK_RO", json.dumps(
        {"conn_type": "duckdb", "host": str(path), "extra": {"read_only": "true"}}))
    hook = DuckDbHook("duck")
    assert hook.placeholder == "?" and hook.get_uri() == f"duckdb:///{path}"
    hook.run("CREATE TABLE t (doi VARCHAR, n INTEGER)")
    hook.insert_rows("t", [(INJECTION, 1), ("10.1000/1", 2)], target_fields=["doi", "n"])
    assert hook.get_records("SELECT doi, n FROM t WHERE n > ? ORDER BY n", parameters=[0]) == [
        (INJECTION, 1), ("10.1000/1", 2)]
    with pytest.raises(duckdb.Error, match="read-only"):
        DuckDbHook("duck_ro").run("DELETE FROM t")


# -- review fixes: dialects, paging guards, mapping cap, decode, collation, identifiers --------
class _RecordingCursor:
    """A DB-API cursor that records statements and answers ``fetchall`` from a script."""

    def __init__(self, pages: list[list[tuple[object, ...]]] | None = None) -> None:
        self.statements: list[tuple[str, object]] = []
        self.pages = pages or []

    def execute(self, sql: str, params: object = ()) -> None:
        self.statements.append((sql, params))

    def executemany(self, sql: str, rows: object) -> None:
        self.statements.append((sql, list(rows)))  # type: ignore[call-overload]

    def fetchall(self) -> list[tuple[object, ...]]:
        return self.pages.pop(0) if self.pages else []


def test_redshift_upserts_by_delete_then_multi_row_insert() -> None:
    from airflow_doi.db.statements import dialect_named, upsert_rows

    dialect = dialect_named("redshift", "%s")
    assert dialect.name == "redshift"
    assert not dialect.on_conflict and not dialect.array_unnest
    assert dialect_named("postgresql").name == "postgres"
    cursor = _RecordingCursor()
    rows = [("10.1000/A", "a"), ("10.1000/B", "b")]
    upsert_rows(cursor, dialect, "s.results", ["doi_key", "doi"], rows, key="doi_key",
                types=(dialect.text_type, dialect.text_type))
    (delete, delete_rows), (insert, insert_params) = cursor.statements
    assert delete == 'DELETE FROM "s"."results" WHERE "doi_key" = %s'
    assert delete_rows == [("10.1000/A",), ("10.1000/B",)]
    assert insert == 'INSERT INTO "s"."results" ("doi_key", "doi") VALUES (%s, %s), (%s, %s)'
    assert insert_params == ["10.1000/A", "a", "10.1000/B", "b"]
    assert not any("unnest" in sql or "ON CONFLICT" in sql for sql, _ in cursor.statements)


def test_keyset_pages_refuses_to_loop_or_to_drop_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_doi.db import statements as airflow_sql
    from airflow_doi.db.statements import dialect_named, keyset_pages

    dialect = dialect_named("sqlite")
    stuck = _RecordingCursor([[("a",), ("b",)], [("a",), ("b",)], [("a",), ("b",)]])
    pages = keyset_pages(stuck, dialect, select="k FROM t", key="k", batch_size=2)
    with pytest.raises(RuntimeError, match="did not advance"):
        list(pages)
    null_key = _RecordingCursor([[("a",), (None,)]])
    with pytest.raises(RuntimeError, match="did not advance"):
        list(keyset_pages(null_key, dialect, select="k FROM t", key="k", batch_size=2))
    monkeypatch.setattr(airflow_sql, "MAX_PAGES", 2)
    more = _RecordingCursor([[("a",)], [("b",)], [("c",)]])
    seen: list[list[tuple[object, ...]]] = []
    with pytest.raises(RuntimeError, match="MAX_PAGES=2"):
        seen.extend(keyset_pages(more, dialect, select="k FROM t", key="k", batch_size=1))
    assert seen == [[("a",)], [("b",)]]
    done = _RecordingCursor([[("a",)], [("b",)]])  # exactly MAX_PAGES full pages: no error
    assert len(list(keyset_pages(done, dialect, select="k FROM t", key="k", batch_size=1))) == 2


def test_redact_url_drops_userinfo() -> None:
    from airflow_doi.provider.hooks.doi_proxy import redact_url, resolver_config_from_connection

    assert redact_url("http://user:s3cret@127.0.0.1:8080/p?q=1") == "http://127.0.0.1:8080/p?q=1"
    assert redact_url("https://doi.org") == "https://doi.org"
    with pytest.raises(ValueError, match="host must be") as error:
        resolver_config_from_connection("ftp://user:s3cret@doi.org")
    assert "s3cret" not in str(error.value)


def test_mapped_ranges_are_capped_and_take_the_column_names(
    database: Database, simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_doi.provider.operators.resolve import plan_resolve_batches, resolve_key_range

    _normalize(database, output_prefix="ident")
    columns = {"key_column": "ident_key", "valid_column": "ident_valid"}
    results = sibling_table(database.table, "ident_resolution")
    common = {"conn_id": database.conn_id, "table": database.table, "results_table": results}
    ranges = plan_resolve_batches(**common, **columns, batch_size=1, max_ranges=2)
    assert len(ranges) == 2 and ranges[1]["after"] == ranges[0]["upto"]
    summaries = [resolve_key_range(**common, **columns, doi_column="ident", batch_size=2, **r)
                 for r in ranges]
    assert [s["stored_keys"] for s in summaries] == [3, 3]
    assert [s["batches"] for s in summaries] == [2, 2]
    assert set(simulator.requests_by_key) == VALID_KEYS
    assert simulator.request_count == len(VALID_KEYS)
    monkeypatch.setenv("AIRFLOW__CORE__MAX_MAP_LENGTH", "1")
    database.run(f"DELETE FROM {quote_identifier(results)}")
    (whole,) = plan_resolve_batches(**common, **columns, batch_size=1)
    assert whole["after"] is None


def test_normalize_decode_is_a_checked_templated_parameter(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_doi import validate
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator

    assert "decode" in DoiNormalizeOperator.template_fields
    with pytest.raises(ValueError, match="decode must be one of auto, always, never"):
        DoiNormalizeOperator(task_id="n", conn_id="c", table="t", doi_column="d", decode="yes")
    templated = DoiNormalizeOperator(task_id="n", conn_id="c", table="t", doi_column="d",
                                     decode="{{ params.decode }}")
    with pytest.raises(ValueError, match="decode must be"):
        templated.execute({})  # left untemplated: refused before touching a database
    db = Database("sqlite", tmp_path, monkeypatch)
    db.run("CREATE TABLE catalogue (id INTEGER, doi_raw TEXT)")
    db.run("INSERT INTO catalogue VALUES (?, ?)", list(enumerate(VALUES)))
    _normalize(db, decode="never")
    rows = db.run("SELECT doi_raw, doi, doi_reason FROM catalogue ORDER BY id")
    assert rows == [(v, validate(v, decode="never").doi, validate(v, decode="never").reason)
                    for v in VALUES]
    assert rows != [(v, validate(v).doi, validate(v).reason) for v in VALUES]


def test_normalize_keeps_each_rows_case_under_nocase(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    db = Database("sqlite", tmp_path, monkeypatch)
    db.run("CREATE TABLE catalogue (id INTEGER, doi_raw TEXT COLLATE NOCASE)")
    values = ["10.1000/abc", "10.1000/ABC", "doi:10.1000/Abc", "10.1000/abc", "10.1000/aBc"]
    db.run("INSERT INTO catalogue VALUES (?, ?)", list(enumerate(values)))
    summary = _normalize(db, mode="python")  # batch_size=3: pages cross a boundary
    assert summary["rows_written"] == 5
    assert db.run("SELECT doi_raw, doi, doi_key FROM catalogue ORDER BY id") == [
        ("10.1000/abc", "10.1000/abc", "10.1000/ABC"),
        ("10.1000/ABC", "10.1000/ABC", "10.1000/ABC"),
        ("doi:10.1000/Abc", "10.1000/Abc", "10.1000/ABC"),
        ("10.1000/abc", "10.1000/abc", "10.1000/ABC"),
        ("10.1000/aBc", "10.1000/aBc", "10.1000/ABC"),
    ]


def test_existing_upper_case_column_is_matched_as_the_engine_does(database: Database) -> None:
    from airflow_doi.db.statements import column_names

    table = quote_identifier(database.table)
    database.run(f'ALTER TABLE {table} ADD COLUMN "DOI" TEXT')
    database.run(f"UPDATE {table} SET \"DOI\" = 'old'")
    assert _normalize(database)["rows_written"] == len(VALUES)
    conn = database.connect()
    try:
        names = column_names(conn.cursor(), database.table)  # type: ignore[attr-defined]
    finally:
        conn.close()  # type: ignore[attr-defined]
    if database.kind == "postgres":  # quoted identifiers are case-sensitive: "doi" is new
        assert "DOI" in names and "doi" in names
        assert database.run(f'SELECT DISTINCT "DOI" FROM {table}') == [("old",)]
        assert database.run(f'SELECT "doi" FROM {table} WHERE id = 0') == [("10.1000/ABC",)]
    else:  # SQLite and DuckDB match quoted identifiers case-insensitively: "DOI" is "doi"
        assert "doi" not in names
        assert database.run(f'SELECT "DOI" FROM {table} WHERE id = 0') == [("10.1000/ABC",)]


def test_resolve_with_repair_column_stores_verified_suggestions_once(database: Database,
                                                                     simulator) -> None:
    """``repair_column``: invalid or not_found cells get suggestions in ``doi_repair``, verified
    on the proxy; valid cells that resolved are not touched, and a re-run sends nothing."""
    from airflow_doi.provider.operators.resolve import DoiResolveOperator

    table = quote_identifier(database.table)
    database.run(f"INSERT INTO {table} VALUES (?, ?)",
                 [(20, "10.1000/ABC."), (21, "10.5555/Q”"), (22, "10.1000/ABC.")])
    _normalize(database)

    def run() -> dict:
        return DoiResolveOperator(task_id="resolve", conn_id=database.conn_id,
                                  table=database.table, repair_column="doi_raw").execute({})

    first = run()
    repairs = quote_identifier(sibling_table(database.table, "doi_repair"))
    stored = {raw: (doi, rule, verified) for raw, doi, rule, verified in database.run(
        f"SELECT raw_value, doi_suggestion, doi_suggestion_rule, doi_suggestion_verified "
        f"FROM {repairs}")}
    assert stored["10.1000/ABC."][0] == "10.1000/ABC"
    assert stored["10.1000/ABC."][1] == "trailing_punctuation"
    assert bool(stored["10.1000/ABC."][2]) is True
    assert stored["10.5555/Q”"][0] == "10.5555/Q" and bool(stored["10.5555/Q”"][2]) is True
    assert "junk" in stored and stored["junk"][0] is None  # invalid: checked, nothing found
    assert "10.1000/ABC" not in stored  # resolved: never a repair candidate
    assert first["repair_cells"] == len(stored) and first["repair_verified"] >= 2
    assert database.run(f"SELECT COUNT(*) FROM {table}") == [(14,)]  # the user's rows, all

    simulator.reset_counts()
    again = run()
    assert again["repair_cells"] == 0 and simulator.request_count == 0


def test_only_the_provider_subpackage_imports_airflow() -> None:
    """The house: Airflow is known in ``airflow_doi/provider/`` and nowhere else of the package
    (the standard, the Arrow engine, the SQL generator, the resolver, the CLI, the report)."""
    import ast

    package = ROOT / "airflow_doi"
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).parts[0] == "provider":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name == "airflow" or name.startswith("airflow.") for name in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
    assert (package / "provider" / "operators" / "normalize.py").is_file()


def test_no_rendered_parameter_is_masked_and_the_old_name_still_works() -> None:
    """#24: Airflow showed ``doi_proxy_conn_id`` as ``'***'`` (names holding "proxy" are
    masked); ``resolver_conn_id`` is not, nor is any other templated field, and the old name
    works with a deprecation warning."""
    from airflow.exceptions import AirflowProviderDeprecationWarning
    from airflow.sdk._shared.secrets_masker.secrets_masker import should_hide_value_for_key

    from airflow_doi.provider.hooks.doi_proxy import DoiProxyHook
    from airflow_doi.provider.operators.resolve import DoiResolveOperator

    assert should_hide_value_for_key("doi_proxy_conn_id")  # what the rename is about
    fields = DoiResolveOperator.template_fields
    assert "resolver_conn_id" in fields and "doi_proxy_conn_id" not in fields
    assert not [name for name in fields if should_hide_value_for_key(name)]
    with pytest.warns(AirflowProviderDeprecationWarning, match="pass resolver_conn_id"):
        operator = DoiResolveOperator(task_id="r", conn_id="c", table="t",
                                      doi_proxy_conn_id="my_proxy")
    assert operator.resolver_conn_id == "my_proxy"
    with pytest.warns(AirflowProviderDeprecationWarning, match="pass resolver_conn_id"):
        assert DoiProxyHook(doi_proxy_conn_id="my_proxy").resolver_conn_id == "my_proxy"
    assert DoiProxyHook(resolver_conn_id="mine").resolver_conn_id == "mine"
    assert DoiProxyHook.conn_name_attr == "resolver_conn_id"


def test_an_existence_only_pass_then_the_urls(database: Database, simulator) -> None:
    """``urls=False``: Which RA? alone (a few requests for every key), ``registered`` with the
    agency or ``not_found``; a later run with URLs asks the handles of the registered keys
    only, and a further existence-only run leaves the resolved rows (URLs) as they are."""
    from airflow_doi.provider.operators.resolve import DoiResolveOperator

    _normalize(database)
    results = quote_identifier(database.results)

    def resolve(urls: bool | str) -> dict:
        return DoiResolveOperator(task_id="resolve", conn_id=database.conn_id,
                                  table=database.table, urls=urls).execute({})

    first = resolve("False")  # as a template renders it
    assert first["stored_keys"] == len(VALID_KEYS)
    assert simulator.requests_by_key == {}  # no handle asked
    assert simulator.request_count == simulator.ra_requests == 1
    rows = {key: (status, url, agency) for key, status, url, agency in database.run(
        f"SELECT doi_key, status, url, agency FROM {results}")}
    assert rows["10.1000/MISSING"] == ("not_found", None, None)
    assert {rows[k][0] for k in VALID_KEYS - {"10.1000/MISSING"}} == {"registered"}
    assert {rows[k][2] for k in VALID_KEYS - {"10.1000/MISSING"}} == {"DataCite"}

    simulator.reset_counts()
    second = resolve(True)
    assert second["due_keys"] == len(VALID_KEYS) - 1  # not_found is fresh; registered is due
    assert set(simulator.requests_by_key) == VALID_KEYS - {"10.1000/MISSING"}
    rows = dict(database.run(f"SELECT doi_key, status FROM {results}"))
    assert set(rows.values()) == {"resolved", "not_found"}

    simulator.reset_counts()
    past = datetime.now(timezone.utc) - timedelta(days=1)
    database.run(f"UPDATE {results} SET expires_at = ?",
                 [(past.isoformat() if database.kind == "sqlite" else past,)])
    third = resolve(False)  # expired, but an existence pass never drops a URL
    assert third["due_keys"] == 1 and simulator.request_count == 1
    assert database.run(f"SELECT COUNT(*) FROM {results} WHERE url IS NOT NULL") == [
        (len(VALID_KEYS) - 1,)]
    with pytest.raises(ValueError, match="urls must be true or false, not 'maybe'"):
        resolve("maybe")
