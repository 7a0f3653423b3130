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
