"""The catalogue operators in the database (push-down) and in the worker give the same table.

Every conformance vector, the SQL edge cases of :mod:`airflow_doi.sqlgen.conformance`, random
mixtures, duplicates and NULL go into one catalogue per engine (real SQLite, DuckDB and
PostgreSQL); ``DoiNormalizeOperator`` runs in ``mode="sql"`` and ``mode="python"`` into two
prefixes, and every row's eight columns are compared with each other and with Python.
"""

from __future__ import annotations

import pytest

from airflow_doi.db.statements import quote_identifier
from airflow_doi.sqlgen.conformance import EXTRA_CASES, mixtures
from airflow_doi.syntax import validate
from tests import test_airflow_provider as provider
from tests.conftest import syntax_vectors

Database = provider.Database
database = provider.database  # the fixture: SQLite, DuckDB and PostgreSQL catalogues


def _storable(value: str | None, kind: str) -> bool:
    if not isinstance(value, str):
        return False  # NULLs are added once, below
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: no driver can bind them
        return False
    return not (kind == "postgres" and "\x00" in value)  # text cannot hold U+0000


def _table(db: Database) -> str:
    return f"{db.table}_pd"


def _catalogue(db: Database) -> list[str | None]:
    inputs = [v["input"] for v in syntax_vectors() if v.get("decode", "auto") == "auto"]
    values: list[str | None] = [
        v for v in [*inputs, *EXTRA_CASES, *mixtures(300)] if _storable(v, db.kind)
    ]
    values += [*values[:50], None, None, ""]  # duplicates, NULLs, an empty cell
    table = quote_identifier(_table(db))
    db.run(f"CREATE TABLE {table} (id INTEGER, doi_raw TEXT)")
    db.run(f"INSERT INTO {table} VALUES (?, ?)", list(enumerate(values)))
    return values


def _operator(db: Database, **kwargs: object):
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator

    return DoiNormalizeOperator(task_id="n", conn_id=db.conn_id, table=_table(db),
                                doi_column="doi_raw", batch_size=97, **kwargs)


class _Log:
    """The operator's task log, kept (Airflow's own goes to its handlers, not to a test)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str, *args: object) -> None:
        self.lines.append(message % args)

    warning = info


def _logged(operator: object, monkeypatch: pytest.MonkeyPatch) -> _Log:
    log = _Log()
    monkeypatch.setattr(type(operator), "log", property(lambda self: log))
    return log


def test_both_modes_write_the_same_columns_as_python(database: Database,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    values = _catalogue(database)
    operator = _operator(database, mode="sql", output_prefix="s")
    log = _logged(operator, monkeypatch)
    in_db = operator.execute({})
    assert any("doi_raw in the database, one statement" in line for line in log.lines)
    in_worker = _operator(database, mode="python", output_prefix="p").execute({})
    assert any("doi_raw in the worker, page by page (mode='python')" in line
               for line in log.lines)
    assert in_db == in_worker == {"rows_written": len(values), "full_refresh": False,
                                  "other_settings_rows": 0}
    rows = database.run(
        f"SELECT id, s, s_key, s_valid, s_reason, p, p_key, p_valid, p_reason "
        f"FROM {quote_identifier(_table(database))} ORDER BY id"
    )
    assert len(rows) == len(values) > 400
    for (_, *sql, p, p_key, p_valid, p_reason), value in zip(rows, values, strict=True):
        python = validate(value)
        want = (python.doi, python.key, python.valid, python.reason)
        assert (sql[0], sql[1], bool(sql[2]), sql[3]) == want, value
        assert (p, p_key, bool(p_valid), p_reason) == want, value


def test_validate_counts_the_same_in_both_modes(database: Database) -> None:
    from airflow_doi.provider.operators.validate import DoiValidateOperator

    _catalogue(database)
    common = {"conn_id": database.conn_id, "table": _table(database),
              "doi_column": "doi_raw", "batch_size": 50, "max_invalid_share": 1.0}
    in_db = DoiValidateOperator(task_id="v", mode="sql", **common).execute({})
    in_worker = DoiValidateOperator(task_id="v", mode="python", **common).execute({})
    assert in_db == in_worker
    assert in_db["reasons"]["empty"] >= 3 and len(in_db["reasons"]) >= 5


def test_mode_sql_where_it_cannot_run_is_an_error_naming_the_way_out() -> None:
    from airflow_doi.provider.pushdown import plan

    with pytest.raises(ValueError, match="mode='sql' cannot run here: the oracle"):
        plan("sql", "oracle")
    with pytest.raises(ValueError, match="Redshift's generated SQL cannot decode non-ASCII"):
        plan("sql", "redshift")  # its SQL cannot decode non-ASCII escapes: Python mode
    with pytest.raises(ValueError, match="decode='never' is only implemented in Python"):
        plan("sql", "duckdb", "never")
    assert not plan("auto", "oracle").in_database and plan("auto", "snowflake").in_database
    assert not plan("auto", "postgres", "always").in_database
    assert plan("auto", "postgres").in_database and not plan("python", "duckdb").in_database


def test_mode_is_checked_and_templated() -> None:
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator
    from airflow_doi.provider.operators.validate import DoiValidateOperator

    assert "mode" in DoiNormalizeOperator.template_fields
    assert "mode" in DoiValidateOperator.template_fields
    with pytest.raises(ValueError, match="mode must be one of auto, sql, python"):
        DoiNormalizeOperator(task_id="n", conn_id="c", table="t", doi_column="d", mode="fast")
    with pytest.raises(ValueError, match="mode must be one of"):
        DoiValidateOperator(task_id="v", conn_id="c", table="t", doi_column="d", mode="x")
    DoiValidateOperator(task_id="v", conn_id="c", table="t", doi_column="d",
                        mode="{{ params.mode }}")


def test_push_down_installs_nothing_in_the_users_database(database: Database) -> None:
    """DuckDB gets inline expressions, SQLite functions registered on the task's connection,
    PostgreSQL functions in the session's ``pg_temp``: none of them outlives the task."""
    _catalogue(database)
    schema = database.table.rpartition(".")[0] or "public"  # other tests use other schemas
    listing = {
        "duckdb": "SELECT function_name FROM duckdb_functions() WHERE function_name LIKE 'doi%'",
        "postgres": "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                    f"WHERE p.proname LIKE 'doi%' AND n.nspname IN ('{schema}', 'public')",
        "sqlite": "SELECT name FROM pragma_function_list WHERE name LIKE 'doi%'",
    }[database.kind]
    before = database.run(listing)
    _operator(database, mode="sql").execute({})
    assert database.run(listing) == before
    assert database.run(f"SELECT COUNT(doi_key) FROM {quote_identifier(_table(database))}")[0][0]


def test_hook_params_and_every_name_are_templated(database: Database) -> None:
    """As common-sql's operators: ``hook_params`` reach the connection's hook, and every name
    argument can come from a template."""
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator
    from airflow_doi.provider.operators.resolve import DoiResolveOperator
    from airflow_doi.provider.operators.validate import DoiValidateOperator

    for operator in (DoiNormalizeOperator, DoiValidateOperator, DoiResolveOperator):
        assert {"conn_id", "table", "hook_params"} <= set(operator.template_fields)
    assert {"key_column", "doi_column", "valid_column", "results_table"} <= set(
        DoiResolveOperator.template_fields)
    normalize = _operator(database, hook_params={"log_sql": False})
    assert normalize.get_db_hook().log_sql is False
    assert _operator(database).get_db_hook().log_sql is True


def test_generating_the_duckdb_bodies_logs_nothing_at_info(
        caplog: pytest.LogCaptureFixture) -> None:
    """Found in a new-user trial: each DuckDB task logged 46 lines of sqlglot's
    ``Applying array index offset (1)`` at INFO, burying the operator's own lines."""
    import logging

    from airflow_doi.provider.pushdown import _inline

    _inline.cache_clear()
    with caplog.at_level(logging.INFO):
        bodies = _inline("duckdb", "doi_raw")
    assert len(bodies) == 4 and all("doi_raw" in body for body in bodies)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("sqlglot")] == []
    assert logging.getLogger("sqlglot").level == logging.NOTSET  # restored afterwards
