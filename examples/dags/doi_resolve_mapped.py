"""doi_resolve_mapped: the resolve step as dynamic task mapping, one mapped task per key range.

For catalogues too large for one task (or to spread resolution over several workers that share
one pace through the ``doi_proxy`` connection's ``redis_url``): ``plan`` splits the due keys
into ranges of ``range_size`` keys, and ``resolve`` is mapped over them with
``expand_kwargs``. Each mapped task asks and stores its range ``batch_size`` keys at a time
(each batch committed to ``doi_resolution`` before the next is asked), so a failed or killed
map index is retried on its own (every task has retries, :data:`DEFAULT_ARGS`) and asks only
for the keys of its range still due: at most one batch again.

Params: ``catalogue_conn_id``, ``catalogue_table``, ``doi_column`` (as in
``doi_enrich_catalogue``, whose sample table this DAG can run on), ``range_size`` (keys per
mapped task, 1000) and ``batch_size`` (keys per batch and commit, 100). Like
that DAG, it only adds and fills the ``doi*`` columns of the table and writes
``doi_resolution`` beside it; it never deletes a row.

Mapped tasks, and runs of this or the other example DAG on the same table, claim the keys
they ask for in ``doi_resolution_claims``, so no key is asked twice however many run at
once. Retries, retry delay, pool and how many mapped tasks run at once
(``AIRFLOW_DOI_EXAMPLE_PARALLELISM``, default 4) come from environment variables
(:mod:`airflow_doi.provider.example_settings`); on a DuckDB file put the tasks in a one-slot pool.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import Param, dag, task

from airflow_doi.provider.example_settings import DEFAULT_ARGS, PARALLELISM
from airflow_doi.provider.operators.normalize import DoiNormalizeOperator
from airflow_doi.provider.operators.resolve import plan_resolve_batches, resolve_key_range

IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"


@task
def plan(conn_id: str, table: str, range_size: int) -> list[dict[str, str | None]]:
    return plan_resolve_batches(conn_id=conn_id, table=table, range_size=int(range_size))


@task(max_active_tis_per_dagrun=PARALLELISM)
def resolve(conn_id: str, table: str, batch_size: int, after: str | None,
            upto: str | None) -> dict:
    return resolve_key_range(conn_id=conn_id, table=table, after=after, upto=upto,
                             batch_size=int(batch_size))


@task(trigger_rule="none_failed")
def summarize(summaries: list[dict] | None, table: str) -> dict:
    """One line for the run, also when nothing was due (no mapped task then)."""
    names = ("stored_keys", "requests", "requests_by_earlier_tries", "stored_elsewhere")
    total = dict.fromkeys(("ranges", *names), 0)
    for summary in summaries or []:
        total["ranges"] += 1
        for name in names:
            total[name] += summary.get(name, 0)
    # Requests of tries that failed or were killed are counted in Redis (the connection's
    # redis_url) and reported by the task's last try: they are the run's requests too.
    total["requests"] += total["requests_by_earlier_tries"]
    if not total["ranges"]:
        print(f"resolved 0 keys: nothing was due in {table} (every valid key already has a "
              "fresh row in doi_resolution, a cache by key shared by the tables beside it)")
        return total
    print(f"resolved {total['stored_keys']} keys in {total['ranges']} mapped tasks "
          f"with {total['requests']} requests ({total['requests_by_earlier_tries']} of them "
          f"by earlier tries of a task; {total['stored_elsewhere']} keys were stored by "
          "another run meanwhile)")
    return total


@dag(
    dag_id="doi_resolve_mapped",
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
        "range_size": Param(1000, type="integer", minimum=1),
        "batch_size": Param(100, type="integer", minimum=1),
    },
    doc_md=__doc__,
)
def doi_resolve_mapped() -> None:
    conn_id, table = "{{ params.catalogue_conn_id }}", "{{ params.catalogue_table }}"
    normalize = DoiNormalizeOperator(
        task_id="normalize", conn_id=conn_id, table=table, doi_column="{{ params.doi_column }}"
    )
    ranges = plan(conn_id, table, "{{ params.range_size }}")
    normalize >> ranges
    summaries = resolve.partial(
        conn_id=conn_id, table=table, batch_size="{{ params.batch_size }}").expand_kwargs(ranges)
    summarize(summaries, table)


doi_resolve_mapped()
