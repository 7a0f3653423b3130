"""The paths the README showed before the move keep working, warn, and name the new home."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from tests.conftest import ROOT

#: (old module, name, new module, new name): one name each old path was shown with.
MOVED = [
    ("airflow_doi.native_core", "status", "airflow_doi.native", "status"),
    ("airflow_doi.native_tables", "render", "airflow_doi.native.tables", "render"),
    ("airflow_doi.native_arrow", "run", "airflow_doi.native.arrow", "run"),
    ("airflow_doi._arrow", "analyse", "airflow_doi.columns", "analyse"),
    ("airflow_doi.sniff", "sniff", "airflow_doi.files.sniff", "sniff"),
    ("airflow_doi.sql_install", "shipped_sql", "airflow_doi.db.install", "shipped_sql"),
    ("airflow_doi.duckdb_native", "connect", "airflow_doi.native.duckdb", "connect"),
    ("airflow_doi.io_tables", "read_table", "airflow_doi.files.read", "read_table"),
    ("airflow_doi.io_tables", "writing", "airflow_doi.files.write", "writing"),
    ("airflow_doi.sqlite_udf", "register", "airflow_doi.db.sqlite", "register"),
    ("airflow_doi.resolver.repair", "repair", "airflow_doi.repair.verify", "repair"),
    ("airflow_doi.provider.sql", "quote_identifier", "airflow_doi.db.statements",
     "quote_identifier"),
    ("airflow_doi.provider.sql", "Dialect", "airflow_doi.db.statements", "StatementDialect"),
    ("airflow_doi.provider.operators.base", "sql_hook", "airflow_doi.provider.hooks.sql",
     "sql_hook"),
]


@pytest.mark.parametrize(("old", "name", "new", "now"), MOVED)
def test_an_old_path_gives_the_same_object_and_says_where_it_lives_now(old, name, new, now):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=f"import {now} from {new}"):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), now)


def test_renamed_members_still_answer_and_warn():
    from airflow_doi.db.statements import dialect_named
    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator

    dialect = dialect_named("postgres")
    with pytest.warns(DeprecationWarning, match="call marks"):
        assert dialect.p(3) == dialect.marks(3) == "%s, %s, %s"
    operator = DoiNormalizeOperator(task_id="n", conn_id="c", table="t", doi_column="d",
                                    batch_size="250")
    with pytest.warns(DeprecationWarning, match="check_batch_size"):
        assert operator.page_size == 250


def test_an_old_path_knows_only_the_names_that_moved():
    module = importlib.import_module("airflow_doi.provider.operators.base")
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018


def test_the_public_paths_stay_without_a_warning(recwarn):
    from airflow_doi import normalize
    from airflow_doi.pandas import DoiAccessor
    from airflow_doi.provider.operators import DoiNormalizeOperator
    from airflow_doi.repair import repair, suggest_repairs

    assert normalize("doi:10.1000/ABC") == "10.1000/ABC"
    assert DoiAccessor and DoiNormalizeOperator and repair and suggest_repairs
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)
                and "airflow_doi" in str(w.message)]


def test_the_old_module_name_still_runs_as_a_script():
    run = subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-m", "airflow_doi.native_tables",
         "--check"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "run python -m airflow_doi.native.tables" in run.stderr
