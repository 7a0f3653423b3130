"""doi_enrich_catalogue: normalize, validate, resolve and enrich a catalogue's DOIs, run dbt.

Tasks: ``load_sample_catalogue`` -> ``normalize`` -> ``validate`` -> ``resolve`` -> ``enrich``
-> ``dbt_build`` -> ``quality_report``. ``enrich`` fetches each key's registry metadata
(title, type, year, journal, ISSN, publisher, license, retractions...) through DOI content
negotiation into ``doi_metadata`` beside the table, one row per ``doi_key``.

Params (all optional):

* ``catalogue_conn_id``: any SQL connection with a DB-API hook; default ``doi_catalogue``
  (the demo defines it as a DuckDB file: ``AIRFLOW_CONN_DOI_CATALOGUE='{"conn_type": "duckdb",
  "host": "/path/catalogue.duckdb"}'``). ``doi_resolution`` and ``doi_metadata`` are written
  beside the table.
* ``catalogue_table`` (``schema.table`` allowed) and ``doi_column``: your table and the column
  holding its DOIs. The DAG only adds and fills the columns ``doi``, ``doi_key``,
  ``doi_valid`` and ``doi_reason``; it never deletes a row.
* ``load_sample`` (default false): create the table and load ``examples/data/catalogue.csv``
  into it (the demo sets it). It only ever loads into a table that does not exist yet, or
  exists with no rows; a table that already holds exactly the sample (an earlier run's) is
  left as it is, so the same conf runs again; a table that holds other rows fails the task,
  untouched, with a message;
* ``run_dbt`` (default false): build the example project ``examples/dbt`` (its seed
  ``reading_list`` and models ``stg_catalogue``, ``stg_reading_list``,
  ``reading_list_holdings``, ``reading_list_metadata`` (joined to ``doi_metadata`` on
  ``doi_key``) are (re)created in the catalogue's schema, so a table of one of
  those names that dbt did not build fails the task before dbt runs; dbt-duckdb on a DuckDB
  connection, dbt-postgres on a PostgreSQL one); other engines skip the step with a log line;
* ``functions_schema`` (MariaDB only, default empty): a database where ``normalize`` and
  ``validate`` may create (or replace) the generated ``doi_*`` functions, so that they run in
  the database; empty, they work in the worker. Other engines run in the database anyway,
  installing nothing;
* ``resolve_batch_size``: keys per request batch and per commit (resolve and enrich);
* ``resolve_urls`` (default true): false makes ``resolve`` an existence-only pass (doi.org's
  Which RA?, about 50 DOIs a request: each key ``registered`` with its agency, or
  ``not_found``), the cheap first pass over a large catalogue when nothing downstream needs
  the URLs (1M keys: about 20,000 requests, under 2 hours at 3/s, against 3.9 days); a later
  run with true fills in the URLs of the ``registered`` keys;
* ``snapshot`` (default empty): the agencies' public data files (a file or a folder: Crossref's
  tar or JSON-lines files, DataCite's tar) that ``enrich`` reads first, asking the APIs only
  for the keys they lack; every worker must see them at that path. The demo passes a Crossref
  data file of the sample registry;
* ``updates`` (default false): ``enrich`` then harvests the agencies' update streams, since the
  last harvest into ``doi_metadata`` (else the files' newest record);
* ``report_path``: where ``quality_report`` writes the HTML quality report of the DOI column,
  and ``doi_resolution`` (default: ``$AIRFLOW_HOME/doi_reports/<table>.html``); the task logs
  the path. It reads the table and writes only that file (the ``[report]`` extra; without it
  the task is skipped with a line saying what to install).

Every task is retried, 3 times, 2 then 4 then 8 minutes later (retries, retry delay and pool
come from environment variables: :mod:`airflow_doi.provider.example_settings`): when the DOI
proxy is down the resolve task fails as soon as the resolver gives up on it, and Airflow tries
it again later, asking only for the keys not stored yet. Runs on the same table (or on tables that
share ``doi_resolution``) claim the keys they ask for, so none is asked twice.

The DOI proxy is the ``doi_proxy_default`` connection; without it, https://doi.org is used
(and the agencies' metadata hosts). Offline, start the bundled simulator (``airflow-doi
simulator --auto-records``): it prints the ``AIRFLOW_CONN_DOI_PROXY_DEFAULT`` to export, with
the proxy's URL as host and its agencies' origins in the ``metadata_hosts`` extra.
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
from typing import Any

from airflow.sdk import AssetAlias, Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_doi.db.statements import (
    dialect_named,
    missing_columns,
    quote_identifier,
    sibling_table,
)
from airflow_doi.provider.assets import table_asset
from airflow_doi.provider.example_settings import DEFAULT_ARGS
from airflow_doi.provider.hooks.sql import dialect_of, sql_hook
from airflow_doi.provider.operators import (
    DoiEnrichOperator,
    DoiNormalizeOperator,
    DoiResolveOperator,
    DoiValidateOperator,
)

EXAMPLES = Path(__file__).resolve().parent.parent
SAMPLE_CSV = EXAMPLES / "data" / "catalogue.csv"
DBT_PROJECT = EXAMPLES / "dbt"
#: The DAG's outlets: each task attaches the concrete tables (``dbapi://conn/table``) it wrote.
CATALOGUE_TABLES = AssetAlias("doi_enrich_catalogue")

IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
CONN = "{{ params.catalogue_conn_id }}"
TABLE = "{{ params.catalogue_table }}"
COLUMN = "{{ params.doi_column }}"


def _holds_exactly(cursor: Any, quoted: str, columns: tuple[str, ...],
                   rows: list[tuple[int, str, str | None]]) -> bool:
    """Whether the table's ``columns`` hold exactly ``rows``, in any order (the columns a run
    added beside them are not compared)."""
    cursor.execute(f"SELECT {', '.join(quote_identifier(c) for c in columns)} FROM {quoted}")
    try:
        held = [(int(r[0]), r[1], r[2]) for r in cursor.fetchall()]
    except (TypeError, ValueError):  # a record_id that is no number: not the sample's
        return False
    return sorted(held, key=repr) == sorted(rows, key=repr)


@task(outlets=[CATALOGUE_TABLES])
def load_sample_catalogue() -> int:
    """Load the sample CSV into a new (or empty) catalogue table, every value bound.

    Never into a table that holds rows: those are someone's data, and the sample is only a
    demonstration. Such a table fails the task without a retry and is left as it was, unless
    it holds exactly the sample (an earlier run loaded it): then there is nothing to load.
    """
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
    columns = ("record_id", "title", column)
    with closing(hook.get_conn()) as conn:
        cursor = conn.cursor()
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {quoted} (record_id {dialect.integer_type}, "
            f"title {dialect.text_type}, {quote_identifier(column)} {dialect.text_type})"
        )
        cursor.execute(f"SELECT COUNT(*) FROM {quoted}")
        (existing,) = cursor.fetchone()
        missing = missing_columns(cursor, table, columns,
                                  case_sensitive=dialect.case_sensitive_identifiers)
        if existing == len(rows) and not missing and _holds_exactly(cursor, quoted, columns,
                                                                   rows):
            print(f"load_sample: {table} already holds {existing} rows, exactly the sample: "
                  "nothing loaded")
            return 0
        if existing:
            raise AirflowFailException(
                f"load_sample: {table} already exists and holds {existing} rows; the sample is "
                "loaded only into a new or empty table, and yours was left untouched. Run "
                "with load_sample=false to enrich it, or name another catalogue_table."
            )
        if missing:
            raise AirflowFailException(
                f"load_sample: the empty table {table} has no column {', '.join(missing)} for "
                "the sample; name a new catalogue_table and the DAG creates it."
            )
        cursor.executemany(
            f"INSERT INTO {quoted} ({', '.join(quote_identifier(c) for c in columns)}) "
            f"VALUES ({dialect.marks(3)})",
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


#: What dbt (re)creates beside the catalogue, with columns only its own builds have: a
#: relation of that name without them is someone else's, and dbt would replace it.
DBT_RELATIONS: dict[str, tuple[str, ...]] = {
    "reading_list": ("course", "week", "cited_as"),
    "stg_reading_list": ("course", "week", "cited_as", "doi_key"),
    "stg_catalogue": ("sql_doi_key",),
    "catalogue_doi_keys": ("doi_raw", "doi_key", "keyed_by"),
    "reading_list_holdings": ("doi_key", "copies", "resolution_status", "resolved_url"),
    "reading_list_metadata": ("doi_key", "metadata_status", "retracted"),
}


def _refuse_foreign_relations(conn_id: str, table: str) -> None:
    """Fail, before dbt runs, when a table dbt would replace is not one it built."""
    hook = sql_hook(conn_id)
    dialect = dialect_of(hook)
    for name, own_columns in DBT_RELATIONS.items():
        relation = sibling_table(table, name)
        with closing(hook.get_conn()) as conn:
            cursor = conn.cursor()
            try:
                missing = missing_columns(cursor, relation, own_columns,
                                          case_sensitive=dialect.case_sensitive_identifiers)
            except Exception:  # the relation does not exist (each engine says so its own way)
                continue
        if missing:
            raise AirflowFailException(
                f"run_dbt: {relation} exists and is not the example dbt project's (no column "
                f"{', '.join(missing)}); dbt would replace it, so nothing was run and it was "
                "left untouched. Run with run_dbt=false, or use another schema."
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
    _refuse_foreign_relations(params["catalogue_conn_id"], table)
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
    for model in ("stg_catalogue", "catalogue_doi_keys", "stg_reading_list",
                  "reading_list_holdings", "reading_list_metadata"):
        context["outlet_events"][CATALOGUE_TABLES].add(
            table_asset(params["catalogue_conn_id"], sibling_table(table, model))
        )
    return env["DOI_DBT_TARGET"]


@task(trigger_rule="none_failed")
def quality_report() -> str:
    """Write the HTML quality report of the DOI column and its resolutions; log its path."""
    context = get_current_context()
    params = context["params"]
    table = params["catalogue_table"]
    try:
        import matplotlib  # noqa: F401  (the [report] extra)

        from airflow_doi.report import write_report
    except ModuleNotFoundError as error:
        from airflow_doi._install import pip_install  # the command for this very install

        raise AirflowSkipException(
            f"the quality report needs the [report] extra ({error.name} is not installed): "
            + pip_install("report")
        ) from None
    default = Path(os.environ.get("AIRFLOW_HOME", tempfile.gettempdir())) / "doi_reports"
    target = params["report_path"] or str(default / f"{table}.html")
    written = write_report(
        target, None, params["doi_column"], table=table, conn_id=params["catalogue_conn_id"],
        resolution_table=sibling_table(table, "doi_resolution"),
        metadata_table=sibling_table(table, "doi_metadata"),
        title=f"{table}: DOI quality",
    )
    print(f"Quality report: {written}")
    return str(written)


@dag(
    dag_id="doi_enrich_catalogue",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["doi", "example"],
    default_args=DEFAULT_ARGS,
    params={
        "catalogue_conn_id": Param("doi_catalogue", type="string"),
        "catalogue_table": Param(
            "catalogue", type="string", pattern=rf"^{IDENTIFIER}(\.{IDENTIFIER})?$"
        ),
        "doi_column": Param("doi_raw", type="string", pattern=rf"^{IDENTIFIER}$"),
        "load_sample": Param(False, type="boolean"),
        "run_dbt": Param(False, type="boolean"),
        "functions_schema": Param("", type="string", pattern=rf"^({IDENTIFIER})?$"),
        "resolve_batch_size": Param(500, type="integer", minimum=1),
        "resolve_urls": Param(True, type="boolean"),
        "snapshot": Param("", type="string"),
        "updates": Param(False, type="boolean"),
        "report_path": Param("", type="string"),
    },
    doc_md=__doc__,
)
def doi_enrich_catalogue() -> None:
    load = load_sample_catalogue()
    normalize = DoiNormalizeOperator(
        task_id="normalize", conn_id=CONN, table=TABLE, doi_column=COLUMN,
        functions_schema="{{ params.functions_schema }}", outlets=[CATALOGUE_TABLES],
        trigger_rule="none_failed",
    )
    validate = DoiValidateOperator(
        task_id="validate", conn_id=CONN, table=TABLE, doi_column=COLUMN,
        functions_schema="{{ params.functions_schema }}", max_invalid_share=0.5,
        on_breach="fail",
    )
    resolve = DoiResolveOperator(
        task_id="resolve", conn_id=CONN, table=TABLE,
        batch_size="{{ params.resolve_batch_size }}", urls="{{ params.resolve_urls }}",
        outlets=[CATALOGUE_TABLES],
    )
    enrich = DoiEnrichOperator(
        task_id="enrich", conn_id=CONN, table=TABLE,
        batch_size="{{ params.resolve_batch_size }}", snapshot="{{ params.snapshot }}",
        updates="{{ params.updates }}", outlets=[CATALOGUE_TABLES],
    )
    load >> normalize >> validate >> resolve >> enrich >> dbt_build() >> quality_report()


doi_enrich_catalogue()
