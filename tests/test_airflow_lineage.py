"""OpenLineage facets of the operators, with the OpenLineage provider installed.

The datasets must carry the names the first-party SQL providers give the same tables (the
PostgreSQL hook's own ``get_openlineage_database_info``), and the column lineage must lead
from the DOI column to each output column.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlparse

import pytest

from airflow_doi.db.statements import sibling_table
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


def test_normalize_lineage_maps_the_doi_column_to_the_five_columns(database: Database) -> None:
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
    assert sorted(fields) == ["work_doi", "work_doi_fingerprint", "work_doi_key",
                              "work_doi_reason", "work_doi_valid"]
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


def test_enrich_reads_the_catalogue_and_writes_doi_metadata(database: Database) -> None:
    from openlineage.client.serde import Serde

    from airflow_doi.provider.operators.enrich import DoiEnrichOperator

    enrich = DoiEnrichOperator(task_id="e", conn_id=database.conn_id, table=database.table,
                               metadata_table="{{ params.t }}")
    enrich.metadata_table = None  # as rendered with no value: the default beside the table
    lineage = enrich.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [
        _expected_names(database, database.table)]
    [target] = lineage.outputs
    assert (target.namespace, target.name) == _expected_names(
        database, sibling_table(database.table, "doi_metadata"))
    fields = target.facets["columnLineage"].fields
    assert [f.field for f in fields["doi_key"].inputFields] == ["doi_key"]
    assert [f.field for f in fields["doi"].inputFields] == ["doi"]
    assert '"columnLineage"' in Serde.to_json(target)
    assert "metadata_table" in DoiEnrichOperator.template_fields
    # With the agencies' data files, they are inputs too, as OpenLineage names files.
    enrich.snapshot = ["/data/crossref.tar", "/data/datacite"]
    lineage = enrich.get_openlineage_facets_on_complete(None)
    import socket

    assert [(d.namespace, d.name) for d in lineage.inputs[1:]] == [
        (f"file://{socket.gethostname()}", "/data/crossref.tar"),
        (f"file://{socket.gethostname()}", "/data/datacite")]


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


# -- the example DAG through the OpenLineage provider's file transport ----------------------
def _run_example_dag_with_openlineage(tmp_path: Path, connection: dict[str, object],
                                      proxy_url: str) -> list[dict]:
    """``airflow dags test doi_enrich_catalogue`` (sample loaded, dbt off) in a fresh
    ``AIRFLOW_HOME``, the OpenLineage provider writing every event to a file: the events."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    airflow = str(Path(sys.executable).with_name("airflow"))
    home = tmp_path / "airflow_home"
    home.mkdir()
    events = tmp_path / "openlineage.jsonl"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW__OPENLINEAGE__", "OPENLINEAGE_"))}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(root / "examples" / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        AIRFLOW__OPENLINEAGE__DISABLED="False",
        AIRFLOW__OPENLINEAGE__NAMESPACE="airflow_doi_test",
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(
            {"type": "file", "log_file_path": str(events), "append": True}),
        AIRFLOW_CONN_DOI_CATALOGUE=json.dumps(connection),
        AIRFLOW_CONN_DOI_PROXY_DEFAULT=json.dumps(
            {"conn_type": "doi_proxy", "host": proxy_url,
             "extra": {"rate": 200, "concurrency": 4}}),
    )
    for command in (["db", "migrate"],
                    ["dags", "test", "doi_enrich_catalogue", "--conf",
                     json.dumps({"load_sample": True})]):
        result = subprocess.run([airflow, *command], env=env, cwd=home, capture_output=True,
                                text=True, timeout=300, check=False)
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-5000:]
    assert "state=success" in output, output[-5000:]
    return [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow  # an end-to-end `airflow dags test`, as test_airflow_dag.py marks them
def test_example_dag_on_postgres_emits_task_events_only_under_the_sql_operators_names(
    tmp_path: Path, postgres_dsn: str, postgres_schema: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue #24 (6): on PostgreSQL one run emitted 33 events, 20 of them child jobs
    ``<task>.query.N`` whose only SQL was ``SELECT CURRENT_SCHEMA`` (the lineage naming asked
    the default schema through ``DbApiHook.get_first``, which reports hook-level lineage).
    Now every event is the DAG's or a task's own, the tables carry the names common-sql's
    ``SQLExecuteQueryOperator`` gives them, and the column lineage leads from the DOI column.

    The table is unqualified and the connection's ``search_path`` is a fresh schema, so the
    default schema must be asked of the server (and the run stays off ``public``)."""
    from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

    from airflow_doi.resolver.simulator import ProxySimulator

    url = urlparse(postgres_dsn)
    connection = {"conn_type": "postgres", "host": url.hostname, "port": url.port or 5432,
                  "login": url.username, "password": url.password or "",
                  "schema": url.path.lstrip("/"),
                  "extra": {"options": f"-c search_path={postgres_schema}"}}
    with ProxySimulator(auto_records=True) as simulator:
        events = _run_example_dag_with_openlineage(tmp_path, connection, simulator.url)

    dag_id = "doi_enrich_catalogue"
    tasks = ["load_sample_catalogue", "normalize", "validate", "resolve", "enrich", "dbt_build",
             "quality_report"]
    jobs = [event["job"]["name"] for event in events]
    queries = [event["job"].get("facets", {}).get("sql", {}).get("query") for event in events]
    assert not [q for q in queries if q and q.strip().rstrip(";").upper()
                == "SELECT CURRENT_SCHEMA"], jobs
    assert not [job for job in jobs if ".query." in job], jobs
    assert {job: jobs.count(job) for job in jobs if job != dag_id} == {
        f"{dag_id}.{task}": 2 for task in tasks}  # START and COMPLETE, nothing else
    complete = {event["job"]["name"].rpartition(".")[2]: event for event in events
                if event["eventType"] == "COMPLETE" and event["job"]["name"] != dag_id}

    # The names SQLExecuteQueryOperator gives the same two tables, on the same connection.
    monkeypatch.setenv("AIRFLOW_CONN_DOI_CATALOGUE", json.dumps(connection))
    reference = SQLExecuteQueryOperator(
        task_id="reference", conn_id="doi_catalogue",
        sql="INSERT INTO doi_resolution (doi_key, doi) SELECT doi_key, doi FROM catalogue "
            "WHERE FALSE",
    )
    reference.execute({})
    sql_lineage = reference.get_openlineage_facets_on_complete(None)
    [sql_source], [sql_target] = sql_lineage.inputs, sql_lineage.outputs
    catalogue = (sql_source.namespace, sql_source.name)
    results = (sql_target.namespace, sql_target.name)
    host = f"postgres://{url.hostname}:{url.port or 5432}"
    database = url.path.lstrip("/")
    assert catalogue == (host, f"{database}.{postgres_schema}.catalogue")
    assert results == (host, f"{database}.{postgres_schema}.doi_resolution")

    def names(event: dict, side: str) -> list[tuple[str, str]]:
        return [(d["namespace"], d["name"]) for d in event[side]]

    assert names(complete["normalize"], "inputs") == [catalogue]
    assert names(complete["normalize"], "outputs") == [catalogue]
    assert names(complete["validate"], "inputs") == [catalogue]
    assert names(complete["resolve"], "inputs") == [catalogue]
    assert names(complete["enrich"], "inputs") == [catalogue]
    assert names(complete["enrich"], "outputs") == [
        (host, f"{database}.{postgres_schema}.doi_metadata")]
    assert names(complete["resolve"], "outputs") == [results]
    assert catalogue in names(complete["load_sample_catalogue"], "outputs")  # its asset

    def lineage(event: dict) -> dict[str, list[tuple[str, str, str]]]:
        [output] = event["outputs"]
        return {column: [(f["namespace"], f["name"], f["field"]) for f in spec["inputFields"]]
                for column, spec in output["facets"]["columnLineage"]["fields"].items()}

    assert lineage(complete["normalize"]) == {
        column: [(*catalogue, "doi_raw")] for column in ("doi", "doi_key", "doi_valid",
                                                         "doi_reason", "doi_fingerprint")}
    assert lineage(complete["resolve"]) == {"doi_key": [(*catalogue, "doi_key")],
                                            "doi": [(*catalogue, "doi")]}
    # ... as SQLExecuteQueryOperator's parser reads the same copy of the two columns
    reference_lineage = {
        column: [(f.namespace, f.name, f.field) for f in spec.inputFields]
        for column, spec in sql_target.facets["columnLineage"].fields.items()}
    assert reference_lineage == lineage(complete["resolve"])


def test_naming_an_unqualified_postgres_table_reports_no_sql_job(
    postgres_dsn: str, postgres_schema: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default schema comes from the server (here the connection's ``search_path``), as
    the PostgreSQL hook's ``get_openlineage_default_schema`` asks it, yet naming reports no
    ``sql_job`` to hook-level lineage (which the OpenLineage provider emits as a child job);
    the hook's own method, through ``get_first``, does (the collector really records)."""
    from airflow.providers.common.sql.hooks import lineage as sql_lineage
    from airflow.sdk import BaseHook
    from airflow.sdk.lineage import HookLineageCollector

    from airflow_doi.provider.hooks.sql import sql_hook
    from airflow_doi.provider.lineage import dataset_names

    collector = HookLineageCollector()
    monkeypatch.setattr(sql_lineage, "get_hook_lineage_collector", lambda: collector)
    url = urlparse(postgres_dsn)
    monkeypatch.setenv("AIRFLOW_CONN_CAT_SEARCH_PATH", json.dumps({
        "conn_type": "postgres", "host": url.hostname, "port": url.port or 5432,
        "login": url.username, "password": url.password or "", "schema": url.path.lstrip("/"),
        "extra": {"options": f"-c search_path={postgres_schema}"}}))
    hook = sql_hook("cat_search_path")
    connection = BaseHook.get_connection("cat_search_path")
    host = f"postgres://{url.hostname}:{url.port or 5432}"
    database = url.path.lstrip("/")
    for table in ("works", "doi_resolution"):
        assert dataset_names(hook, connection, table) == (
            host, f"{database}.{postgres_schema}.{table}")
    assert "get_first" not in vars(hook)  # the hook is left as it was
    assert collector.collected_assets.extra == []
    assert hook.get_openlineage_default_schema() == postgres_schema
    assert [e.value["sql"] for e in collector.collected_assets.extra] == ["SELECT CURRENT_SCHEMA;"]


def test_file_engine_asset_uris_are_the_ones_airflow_keeps(database: Database) -> None:
    """``table_uri`` returns what the Asset stores: ``sqlite:/path/file/table`` and
    ``duckdb:/path/file.duckdb/<stem>/main/table`` (Airflow drops the empty authority of
    ``sqlite:///...``), and PostgreSQL's ``postgres://host:port/database/schema/table``."""
    from airflow.sdk import Asset

    from airflow_doi.provider.assets import table_asset, table_uri

    uri = table_uri(database.conn_id, database.table)
    assert uri == table_asset(database.conn_id, database.table).uri == Asset(uri=uri).uri
    if database.kind == "sqlite":
        assert uri == f"sqlite:{Path(database.path).resolve()}/catalogue"
    elif database.kind == "duckdb":
        assert uri == f"duckdb:{Path(database.path).resolve()}/catalogue/main/catalogue"
        # This project's own connection type names the file the same way.
        from airflow_doi.provider.lineage import dataset_names

        ours = type("Connection", (), {"conn_type": "doi_duckdb", "host": database.path})()
        assert dataset_names(object(), ours, "catalogue") == (
            f"duckdb://{Path(database.path).resolve()}", "catalogue.main.catalogue")
    else:
        url = urlparse(database.dsn)
        assert uri == (f"postgres://{url.hostname}:{url.port or 5432}/{url.path.lstrip('/')}/"
                       f"{database.table.replace('.', '/')}")
