"""``airflow-doi demo``: the project's main job on the bundled sample data.

The demo is a list of steps run in order; each step is a small function that takes the demo
context and prints what it produced: normalize the messy sample CSV, then run the Airflow DAG
``doi_enrich_catalogue`` end to end on a DuckDB file (offline: against the bundled proxy
simulator). Later steps append themselves to :data:`STEPS`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The sample shipped with the repository: a few hundred DOI cells in every messy form.
SAMPLE = Path("examples/data/messy_dois.csv")
SAMPLE_COLUMN = "doi_raw"


@dataclass(frozen=True)
class DemoContext:
    """Where the demo reads and writes; shared by every step."""

    root: Path
    out: Path

    @property
    def sample(self) -> Path:
        return self.root / SAMPLE


def normalize_sample(context: DemoContext) -> None:
    """Normalize the sample CSV into ``out/messy_dois.normalized.csv``."""
    from airflow_doi.cli.normalize import normalize_file

    target = context.out / "messy_dois.normalized.csv"
    summary, skipped, _ = normalize_file(context.sample, target, column=SAMPLE_COLUMN)
    print(f"normalize: wrote {target}")
    print(f"normalize: {summary.line()}")
    if skipped:
        print(f"normalize: {skipped} malformed CSV rows skipped")


#: The Airflow DAG the demo runs end to end, and where it lives in the checkout.
DAG_ID = "doi_enrich_catalogue"
DAGS = Path("examples/dags")
PROXY_CONN_ENV = "AIRFLOW_CONN_DOI_PROXY_DEFAULT"


def _airflow(args: list[str], env: dict[str, str], log: Path) -> None:
    """Run the ``airflow`` CLI of this interpreter; its output goes to ``log``."""
    import subprocess

    airflow = Path(sys.executable).with_name("airflow")
    command = [str(airflow)] if airflow.exists() else [sys.executable, "-m", "airflow"]
    with log.open("a", encoding="utf-8") as handle:
        handle.write(f"$ airflow {' '.join(args)}\n")
        handle.flush()
        completed = subprocess.run(
            [*command, *args], env=env, cwd=log.parent, stdout=handle,
            stderr=subprocess.STDOUT, timeout=1800, check=False,
        )
    if completed.returncode != 0:
        raise RuntimeError(f"airflow {args[0]} {args[1]} failed (exit {completed.returncode}): "
                           f"see {log}")


def airflow_pipeline(context: DemoContext) -> None:
    """Run the Airflow DAG ``doi_enrich_catalogue`` on ``out/catalogue.duckdb``.

    A private ``AIRFLOW_HOME`` under ``out/airflow`` (SQLite metadata, no scheduler) is
    migrated, and the DAG runs through ``airflow dags test``. DOIs are resolved against the
    bundled proxy simulator unless ``AIRFLOW_CONN_DOI_PROXY_DEFAULT`` names a proxy (e.g. the
    real one: ``{"conn_type": "doi_proxy", "host": "https://doi.org", "extra": {"rate": 3}}``).
    """
    import contextlib
    import json
    import os

    dags = (context.root / DAGS).resolve()
    if not (dags / f"{DAG_ID}.py").is_file():
        raise FileNotFoundError(f"{dags / DAG_ID}.py not found: run from the repository checkout")
    home = (context.out / "airflow").resolve()
    home.mkdir(parents=True, exist_ok=True)
    database = (context.out / "catalogue.duckdb").resolve()
    log = home / "demo.log"
    log.write_text("", encoding="utf-8")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_DOI_CATALOGUE": json.dumps({"conn_type": "duckdb", "host": str(database)}),
    }
    print(f"airflow: AIRFLOW_HOME={home} (log: {log})")
    _airflow(["db", "migrate"], env, log)
    with contextlib.ExitStack() as stack:
        if os.environ.get(PROXY_CONN_ENV):
            print(f"airflow: resolving through {PROXY_CONN_ENV}")
        else:
            from airflow_doi.resolver.simulator import ProxySimulator

            simulator = stack.enter_context(ProxySimulator(auto_records=True))
            env[PROXY_CONN_ENV] = json.dumps({
                "conn_type": "doi_proxy", "host": simulator.url,
                "extra": {"rate": 50, "concurrency": 4},
            })
            print(f"airflow: resolving against the bundled simulator at {simulator.url} "
                  f"(set {PROXY_CONN_ENV} to use a real proxy)")
        _airflow(["dags", "test", DAG_ID], env, log)
    import duckdb

    with duckdb.connect(str(database), read_only=True) as conn:
        tables = conn.execute(
            "SELECT table_name, estimated_size FROM duckdb_tables() ORDER BY table_name"
        ).fetchall()
        statuses = conn.execute(
            "SELECT status, COUNT(*) FROM doi_resolution GROUP BY status ORDER BY status"
        ).fetchall()
    print(f"airflow: {DAG_ID} succeeded; enriched tables in {database}:")
    for name, rows in tables:
        print(f"airflow:   {name} ({rows} rows)")
    print("airflow: doi_resolution: " + ", ".join(f"{s}={n}" for s, n in statuses))
    print("airflow: the two catalogues joined on doi_key: table reading_list_holdings")


Step = Callable[[DemoContext], None]
#: The demo, in order; later issues add their steps here.
STEPS: list[tuple[str, Step]] = [
    ("normalize", normalize_sample),
    ("airflow", airflow_pipeline),
]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo", help="run the project's main job on the bundled sample data", description=__doc__
    )
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="repository checkout (default: cwd)"
    )
    parser.add_argument("--out", type=Path, default=None, help="output folder (default ROOT/out)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    context = DemoContext(root=args.root, out=args.out or args.root / "out")
    if not context.sample.is_file():
        print(
            f"airflow-doi demo: error: sample {context.sample} not found; "
            "run the demo from the repository checkout or pass --root",
            file=sys.stderr,
        )
        return 2
    for name, step in STEPS:
        print(f"== {name}")
        step(context)
    return 0
