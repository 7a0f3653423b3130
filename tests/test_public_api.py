"""The package root: what it exports, and that the heavy parts stay lazy."""

from __future__ import annotations

import inspect

import airflow_doi


def test_resolve_is_the_sync_function_and_aresolve_its_async_twin() -> None:
    import airflow_doi.resolver  # importing the subpackage must not shadow the function

    assert inspect.isfunction(airflow_doi.resolve)
    assert inspect.iscoroutinefunction(airflow_doi.aresolve)
    assert airflow_doi.resolve is airflow_doi.resolver.resolve
    assert airflow_doi.ResolverConfig().base_url == "https://doi.org"


def test_every_exported_name_resolves() -> None:
    for name in airflow_doi.__all__:
        assert getattr(airflow_doi, name) is not None, name


def test_unknown_attribute_is_a_clear_error() -> None:
    try:
        airflow_doi.no_such_thing  # noqa: B018
    except AttributeError as error:
        assert "no_such_thing" in str(error)
    else:
        raise AssertionError("expected AttributeError")


#: Modules kept for a while after a move, removed: no published release ever had them.
REMOVED = (
    "airflow_doi._moved", "airflow_doi._arrow", "airflow_doi.native_arrow",
    "airflow_doi.native_core", "airflow_doi.native_tables", "airflow_doi.sniff",
    "airflow_doi.io_tables", "airflow_doi.sql_install", "airflow_doi.sqlite_udf",
    "airflow_doi.duckdb_native", "airflow_doi.resolver.repair", "airflow_doi.provider.sql",
)


def test_the_forwarding_paths_are_gone_and_nothing_names_them() -> None:
    import importlib.util
    import re
    from pathlib import Path

    root = Path(airflow_doi.__file__).resolve().parent.parent
    for name in REMOVED:
        assert importlib.util.find_spec(name) is None, name
    pattern = re.compile("|".join(re.escape(name) + r"\b" for name in REMOVED)
                         + r"|__getattr__ = moved\(|\bdef p\(self|\bdef page_size\(")
    here = Path(__file__).resolve()
    files = [path for folder in ("airflow_doi", "tests", "examples", "bench", "docs")
             for path in (root / folder).rglob("*") if path.suffix in (".py", ".md")]
    named = [f"{path.relative_to(root)}: {match.group(0)}"
             for path in [*files, root / "README.md"] if path != here
             for match in [pattern.search(path.read_text(encoding="utf-8"))] if match]
    assert named == []
