"""OpenLineage facets of the three operators, with the OpenLineage provider installed.

The datasets must carry the names the first-party SQL providers give the same tables (the
PostgreSQL hook's own ``get_openlineage_database_info``), and the column lineage must lead
from the DOI column to each output column.
"""

from __future__ import annotations

from airflow_doi.provider.sql import sibling_table
from tests import test_airflow_provider as provider

Database = provider.Database
database = provider.database  # the fixture: SQLite, DuckDB and PostgreSQL catalogues


def _expected_names(db: Database, table: str) -> tuple[str, str]:
    if db.kind == "postgres":
        from urllib.parse import urlparse

        url = urlparse(db.dsn)
        return (f"postgres://{url.hostname}:{url.port or 5432}",
                f"{url.path.lstrip('/')}.{table}")
    from pathlib import Path

    if db.kind == "duckdb":
        return f"duckdb://{Path(db.path).resolve()}", f"catalogue.main.{table}"
    return f"sqlite://{Path(db.path).resolve()}", table


def test_normalize_lineage_maps_the_doi_column_to_the_four_columns(database: Database) -> None:
    from openlineage.client.serde import Serde

    from airflow_doi.provider.operators.normalize import DoiNormalizeOperator

    operator = DoiNormalizeOperator(task_id="n", conn_id=database.conn_id, table=database.table,
                                    doi_column="doi_raw", output_prefix="work_doi")
    operator.execute({})
    lineage = operator.get_openlineage_facets_on_complete(None)
    namespace, name = _expected_names(database, database.table)
    [source], [target] = lineage.inputs, lineage.outputs
    assert (source.namespace, source.name) == (target.namespace, target.name) == (namespace, name)
    fields = target.facets["columnLineage"].fields
    assert sorted(fields) == ["work_doi", "work_doi_key", "work_doi_reason", "work_doi_valid"]
    for column in fields.values():
        [field] = column.inputFields
        assert (field.namespace, field.name, field.field) == (namespace, name, "doi_raw")
    assert '"columnLineage"' in Serde.to_json(target)


def test_validate_reads_and_resolve_writes_its_results_table(database: Database) -> None:
    from airflow_doi.provider.operators.resolve import DoiResolveOperator
    from airflow_doi.provider.operators.validate import DoiValidateOperator

    common = {"conn_id": database.conn_id, "table": database.table}
    validate = DoiValidateOperator(task_id="v", doi_column="doi_raw", **common)
    lineage = validate.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [
        _expected_names(database, database.table)]
    assert lineage.outputs == []
    resolve = DoiResolveOperator(task_id="r", repair_column="doi_raw", **common)
    lineage = resolve.get_openlineage_facets_on_complete(None)
    results = sibling_table(database.table, "doi_resolution")
    repairs = sibling_table(database.table, "doi_repair")
    assert [(d.namespace, d.name) for d in lineage.outputs] == [
        _expected_names(database, results), _expected_names(database, repairs)]
    keys = lineage.outputs[0].facets["columnLineage"].fields["doi_key"].inputFields
    assert [f.field for f in keys] == ["doi_key"]


def test_table_assets_take_the_first_party_uri(database: Database) -> None:
    """``postgres://host:port/db/schema/table``, as the PostgreSQL provider's assets are
    named, so asset-aware schedules and lineage tools meet the same table under one name."""
    from airflow_doi.provider.assets import table_asset

    asset = table_asset(database.conn_id, database.table)
    namespace, name = _expected_names(database, database.table)
    expected = f"{namespace}/{name.replace('.', '/')}"
    if database.kind == "postgres":
        assert asset.uri == expected and asset.uri.count("/") == 5
    else:  # Airflow drops the empty authority of a file URI: duckdb:/path/...
        assert asset.uri == expected.replace(":///", ":/")
    assert table_asset("no_such_connection", "works").uri == "dbapi://no_such_connection/works"
