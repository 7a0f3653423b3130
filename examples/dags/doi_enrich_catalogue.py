"""doi_enrich_catalogue: load a messy catalogue, normalize, validate and resolve its DOIs, run dbt.

Tasks: ``load_sample_catalogue`` -> ``normalize`` -> ``validate`` -> ``resolve`` -> ``dbt_build``.

Params (all optional):

* ``catalogue_conn_id``: any SQL connection with a DB-API hook; default ``doi_catalogue``
  (the demo defines it as a DuckDB file: ``AIRFLOW_CONN_DOI_CATALOGUE='{"conn_type": "duckdb",
  "host": "/path/catalogue.duckdb"}'``). ``doi_resolution`` is written beside the table.
* ``catalogue_table`` (``schema.table`` allowed) and ``doi_column``;
* ``load_sample``: (re)load ``examples/data/catalogue.csv`` into the table first; set it to
  false to enrich a table of your own;
* ``run_dbt``: build ``examples/dbt`` (dbt-duckdb on a DuckDB connection, dbt-postgres on a
  PostgreSQL one); other engines (SQLite) skip the step with a log line saying so;
* ``resolve_batch_size``: keys per request batch and per commit.

The DOI proxy is the ``doi_proxy_default`` connection; without it, https://doi.org is used.
Offline, start the bundled simulator (``airflow-doi simulator --auto-records``) and set
``AIRFLOW_CONN_DOI_PROXY_DEFAULT='{"conn_type": "doi_proxy", "host": "http://127.0.0.1:PORT"}'``.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
from contextlib import closing
from datetime import datetime
from pathlib import Path

from airflow.sdk import AssetAlias, Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowSkipException

from airflow_doi.airflow_sql import dialect_named, quote_identifier, sibling_table
from airflow_doi.assets import table_asset
from airflow_doi.operators.base import dialect_of, sql_hook
from airflow_doi.operators.normalize import DoiNormalizeOperator
from airflow_doi.operators.resolve import DoiResolveOperator
from airflow_doi.operators.validate import DoiValidateOperator

EXAMPLES = Path(__file__).resolve().parent.parent
SAMPLE_CSV = EXAMPLES / "data" / "catalogue.csv"
DBT_PROJECT = EXAMPLES / "dbt"
#: The DAG's outlets: each task attaches the concrete tables (``dbapi://conn/table``) it wrote.
CATALOGUE_TABLES = AssetAlias("doi_enrich_catalogue")

IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
CONN = "{{ params.catalogue_conn_id }}"
TABLE = "{{ params.catalogue_table }}"
COLUMN = "{{ params.doi_column }}"


@task(outlets=[CATALOGUE_TABLES])
def load_sample_catalogue() -> int:
    """(Re)load the sample CSV into the catalogue table, every value as a bound parameter."""
    context = get_current_context()
    params = context["params"]
    if not params["load_sample"]:
        raise AirflowSkipException("load_sample is false: enriching the existing table")
    table, column = params["catalogue_table"], params["doi_column"]
    hook = sql_hook(params["catalogue_conn_id"])
    dialect = dialect_of(hook)
    with SAMPLE_CSV.open(encoding="utf-8", newline="") as handle:
        rows = [(int(r["record_id"]), r["title"], r["doi_raw"] or None)
                for r in csv.DictReader(handle)]
    quoted = quote_identifier(table)
    with closing(hook.get_conn()) as conn:
        cursor = conn.cursor()
        # Keep the table (dbt views may depend on it); replace its rows.
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {quoted} (record_id {dialect.integer_type}, "
            f"title {dialect.text_type}, {quote_identifier(column)} {dialect.text_type})"
        )
        cursor.execute(f"DELETE FROM {quoted}")
        cursor.executemany(
            f"INSERT INTO {quoted} (record_id, title, {quote_identifier(column)}) "
            f"VALUES ({dialect.p(3)})",
            rows,
        )
        conn.commit()
    print(f"Loaded {len(rows)} rows from {SAMPLE_CSV.name} into {table}")
    context["outlet_events"][CATALOGUE_TABLES].add(table_asset(params["catalogue_conn_id"], table))
    return len(rows)


def _dbt_environment(conn_id: str, table: str) -> dict[str, str]:
    """dbt profile variables for the Airflow connection the catalogue lives on."""
    from airflow.sdk import BaseHook

    connection = BaseHook.get_connection(conn_id)
    dialect = dialect_named(connection.conn_type or "")
    schema, _, _ = table.rpartition(".")
    if dialect.name == "duckdb":
        path = connection.host or connection.schema
        if not path:
            raise AirflowSkipException("dbt needs a DuckDB file, not an in-memory database")
        return {"DOI_DBT_TARGET": "duckdb", "DOI_DUCKDB_PATH": path,
                "DOI_DBT_SCHEMA": schema or "main"}
    if dialect.name == "postgres":
        return {
            "DOI_DBT_TARGET": "postgres",
            "DOI_PG_HOST": connection.host or "127.0.0.1",
            "DOI_PG_PORT": str(connection.port or 5432),
            "DOI_PG_USER": connection.login or "postgres",
            "DOI_PG_PASSWORD": connection.password or "",
            "DOI_PG_DBNAME": connection.schema or "postgres",
            "DOI_DBT_SCHEMA": schema or "public",
        }
    raise AirflowSkipException(
        f"no dbt adapter for {dialect.name!r} connections in this example (duckdb, postgres)"
    )


@task(outlets=[CATALOGUE_TABLES])
def dbt_build() -> str:
    """``dbt deps`` + ``dbt build`` of examples/dbt against the catalogue's database."""
    context = get_current_context()
    params = context["params"]
    if not params["run_dbt"]:
        raise AirflowSkipException("run_dbt is false")
    table = params["catalogue_table"]
    quote_identifier(table)
    quote_identifier(params["doi_column"])
    env = {**os.environ, **_dbt_environment(params["catalogue_conn_id"], table)}
    dbt_vars = {
        "catalogue_table": table.rpartition(".")[2],
        "doi_column": params["doi_column"],
    }
    with tempfile.TemporaryDirectory(prefix="doi-dbt-") as scratch:
        env.update(
            DOI_DBT_PACKAGES_DIR=str(Path(scratch) / "dbt_packages"),
            DBT_TARGET_PATH=str(Path(scratch) / "target"),
            DBT_LOG_PATH=str(Path(scratch) / "logs"),
            DBT_SEND_ANONYMOUS_USAGE_STATS="false",
        )
        common = ["--project-dir", str(DBT_PROJECT), "--profiles-dir", str(DBT_PROJECT)]
        dbt = [sys.executable, "-m", "dbt.cli.main"]
        for command in (["deps"], ["build", "--vars", json.dumps(dbt_vars)]):
            completed = subprocess.run(
                [*dbt, *command, *common], env=env, cwd=scratch, text=True,
                capture_output=True, timeout=600, check=False,
            )
            print(completed.stdout[-20_000:])
            if completed.returncode != 0:
                print(completed.stderr[-5_000:], file=sys.stderr)
                raise RuntimeError(f"dbt {command[0]} failed with exit code "
                                   f"{completed.returncode}")
    for model in ("stg_catalogue", "stg_reading_list", "reading_list_holdings"):
        context["outlet_events"][CATALOGUE_TABLES].add(
            table_asset(params["catalogue_conn_id"], sibling_table(table, model))
        )
    return env["DOI_DBT_TARGET"]


@dag(
    dag_id="doi_enrich_catalogue",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["doi", "example"],
    params={
        "catalogue_conn_id": Param("doi_catalogue", type="string"),
        "catalogue_table": Param(
            "catalogue", type="string", pattern=rf"^{IDENTIFIER}(\.{IDENTIFIER})?$"
        ),
        "doi_column": Param("doi_raw", type="string", pattern=rf"^{IDENTIFIER}$"),
        "load_sample": Param(True, type="boolean"),
        "run_dbt": Param(True, type="boolean"),
        "resolve_batch_size": Param(500, type="integer", minimum=1),
    },
    doc_md=__doc__,
)
def doi_enrich_catalogue() -> None:
    load = load_sample_catalogue()
    normalize = DoiNormalizeOperator(
        task_id="normalize", conn_id=CONN, table=TABLE, doi_column=COLUMN,
        outlets=[CATALOGUE_TABLES], trigger_rule="none_failed",
    )
    validate = DoiValidateOperator(
        task_id="validate", conn_id=CONN, table=TABLE, doi_column=COLUMN,
        max_invalid_share=0.5, on_breach="fail",
    )
    resolve = DoiResolveOperator(
        task_id="resolve", conn_id=CONN, table=TABLE,
        batch_size="{{ params.resolve_batch_size }}", outlets=[CATALOGUE_TABLES],
    )
    load >> normalize >> validate >> resolve >> dbt_build()


doi_enrich_catalogue()
