"""``airflow-doi demo``: the project's main job on the bundled sample data.

The demo is a list of steps run in order; each step is a small function that takes the demo
context and prints what it produced: normalize the messy sample CSV, then run the Airflow DAG
``doi_enrich_catalogue`` end to end on a DuckDB file (offline: against the bundled proxy
simulator), print a few enriched rows and the command that opens the file. Later steps append
themselves to :data:`STEPS`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from airflow_doi._install import pip_install
from airflow_doi.resolver.agencies import RA_NAMES, work_for
from airflow_doi.syntax import ascii_upper
from airflow_doi.words import plural

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
    from airflow_doi.files.jobs import normalize_file

    target = context.out / "messy_dois.normalized.csv"
    summary, skipped, _ = normalize_file(context.sample, target, column=SAMPLE_COLUMN)
    print(f"normalize: wrote {target}")
    print(f"normalize: {summary.line()}")
    if skipped:
        print(f"normalize: {skipped:,} malformed CSV rows skipped")


#: The Airflow DAG the demo runs end to end, and where it lives in the checkout.
DAG_ID = "doi_enrich_catalogue"
DAGS = Path("examples/dags")
PROXY_CONN_ENV = "AIRFLOW_CONN_DOI_PROXY_DEFAULT"
#: What the demo asks of the DAG, explicitly: its defaults never load the sample or run dbt.
DAG_CONF: dict[str, object] = {"load_sample": True, "run_dbt": True}
#: The DOIs the offline simulator knows; any other valid DOI is ``not_found``.
REGISTRY = Path("examples/data/simulated_registry.txt")
#: Every table and view a demo run creates in ``catalogue.duckdb`` (the DAG's and dbt's); a
#: file holding anything else is not the demo's to replace.
DEMO_TABLES = frozenset({
    "catalogue", "catalogue_doi_keys", "doi_resolution", "doi_resolution_claims", "doi_metadata",
    "doi_metadata_claims", "doi_metadata_sources", "reading_list", "stg_catalogue",
    "stg_reading_list", "reading_list_holdings", "reading_list_metadata",
})


class DemoError(Exception):
    """A demo step cannot go on; the message says why and what to do (exit code 2)."""

def _airflow(args: list[str], env: dict[str, str], log: Path) -> None:
    """Run the ``airflow`` CLI of this interpreter; its output goes to ``log``."""

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


def registry_records(path: Path) -> dict[str, Any]:
    """Simulator records for the DOIs listed in ``path`` (one a line, ``#`` comments); the
    simulated agencies describe each with made-up metadata, :data:`DEMO_RETRACTED` as a
    retracted journal article and :data:`DEMO_CORRECTED` as a corrected one (Crossref's, as
    :data:`DEMO_UPDATES` says), so the demo's tables and report list one of each."""

    from airflow_doi.resolver.simulator import read_records

    records = read_records(path)
    for doi, record in records.items():
        work = work_for(doi)
        update = DEMO_UPDATES.get(ascii_upper(doi))
        if update is not None:
            kind, notice = update
            work = replace(work, agency="crossref", csl_type="article-journal",
                           updated_by=((kind, f"{doi}{notice}"),))
            record["work"] = asdict(work)
        record["ra"] = RA_NAMES[work.agency]  # what Which RA? says of it
    return records


#: The registry DOIs the offline demo's agencies call retracted and corrected (DOI Foundation
#: DOIs: the test DOI, and the DOI Handbook's).
DEMO_RETRACTED = "10.1000/xyz"
DEMO_CORRECTED = "10.1000/182"
#: By comparison key: the kind of update notice each work gets, and its DOI's suffix.
DEMO_UPDATES: dict[str, tuple[str, str]] = {
    ascii_upper(DEMO_RETRACTED): ("retraction", ".notice"),
    ascii_upper(DEMO_CORRECTED): ("correction", ".erratum"),
}


def _relations(database: Path) -> set[str]:
    """The user tables and views in a DuckDB file (read-only look)."""
    import duckdb

    with duckdb.connect(str(database), read_only=True) as conn:
        rows = conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT temporary "
            "UNION SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary"
        ).fetchall()
    return {name for (name,) in rows}


def fresh_database(database: Path) -> None:
    """Remove the previous demo run's ``catalogue.duckdb``, and only that.

    The DAG loads the sample only into a new table, so each demo run starts from a new file.
    A file holding any table the demo does not create is someone's data: refuse, untouched.
    """
    if not database.exists():
        return
    try:
        found = _relations(database)
    except Exception as error:  # not a DuckDB file, or locked by another process
        raise DemoError(
            f"{database} exists and cannot be read as the previous demo's DuckDB file "
            f"({type(error).__name__}); move it away or pass --out to another folder"
        ) from None
    foreign = sorted(found - DEMO_TABLES)
    if foreign:
        raise DemoError(
            f"{database} holds tables the demo did not create ({', '.join(foreign)}); it was "
            "left untouched: move it away or pass --out to another folder"
        )
    database.unlink()
    database.with_name(database.name + ".wal").unlink(missing_ok=True)
    print(f"airflow: replaced the previous demo's {database.name}")


def airflow_pipeline(context: DemoContext) -> None:
    """Run the Airflow DAG ``doi_enrich_catalogue`` on a new ``out/catalogue.duckdb``.

    A private ``AIRFLOW_HOME`` under ``out/airflow`` (SQLite metadata, no scheduler) is
    migrated, and the DAG runs through ``airflow dags test`` with :data:`DAG_CONF`. DOIs are
    resolved against the bundled proxy simulator, which knows the DOIs of :data:`REGISTRY`,
    unless ``AIRFLOW_CONN_DOI_PROXY_DEFAULT`` names a proxy (e.g. the real one:
    ``{"conn_type": "doi_proxy", "host": "https://doi.org", "extra": {"rate": 3}}``).
    """

    dags = (context.root / DAGS).resolve()
    if not (dags / f"{DAG_ID}.py").is_file():
        raise DemoError(f"{dags / DAG_ID}.py not found: run from the repository checkout "
                        "or pass --root")
    home = (context.out / "airflow").resolve()
    home.mkdir(parents=True, exist_ok=True)
    database = (context.out / "catalogue.duckdb").resolve()
    fresh_database(database)
    log = home / "demo.log"
    log.write_text("", encoding="utf-8")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_DOI_CATALOGUE": json.dumps({"conn_type": "duckdb", "host": str(database)}),
        # One-shot run: a failed task should end the demo now, not after the DAG's retry delays.
        "AIRFLOW_DOI_EXAMPLE_RETRIES": "0",
    }
    print(f"airflow: AIRFLOW_HOME={home} (log: {log})")
    _airflow(["db", "migrate"], env, log)
    with contextlib.ExitStack() as stack:
        simulator = None
        if os.environ.get(PROXY_CONN_ENV):
            print(f"airflow: resolving through {PROXY_CONN_ENV}")
        else:
            from airflow_doi.resolver.simulator import ProxySimulator

            registry = context.root / REGISTRY
            simulator = stack.enter_context(ProxySimulator(registry_records(registry)))
            env[PROXY_CONN_ENV] = json.dumps({
                "conn_type": "doi_proxy", "host": simulator.url,
                "extra": {"rate": 50, "concurrency": 4, "agency_rate": 50, "list_rate": 5,
                          "metadata_hosts": ",".join(simulator.metadata_hosts),
                          "crossref_url": simulator.crossref_url,
                          "datacite_url": simulator.datacite_url},
            })
            print(f"airflow: resolving against the bundled simulator at {simulator.url}, which "
                  f"knows the DOIs listed in {REGISTRY} (set {PROXY_CONN_ENV} to use a real "
                  "proxy)")
        report = (context.out / "report.html").resolve()
        conf = {**DAG_CONF, "report_path": str(report)}
        if simulator is not None:
            conf["snapshot"] = str(sample_data_file(context.out / "snapshot", simulator))
            print(f"airflow: enrich reads {conf['snapshot']} first, Crossref's data file of "
                  "the sample registry (as the agencies publish theirs); the other DOIs go to "
                  "the APIs")
        _airflow(["dags", "test", DAG_ID, "--conf", json.dumps(conf)], env, log)
        if simulator is not None:
            print(requests_line(simulator.stats()))
    show_results(database)
    if not report.is_file():
        raise RuntimeError(f"the DAG's quality_report task wrote no {report}")
    print(f"airflow: the quality report of the catalogue: {report}")
    print(f"  open it in a browser: {report.as_uri()}")


def sample_data_file(folder: Path, simulator: Any) -> Path:
    """Crossref's public data file of the simulated registry's Crossref works, in ``folder``
    (the demo's own: its file of an earlier run is replaced)."""
    from airflow_doi.resolver.agencies import crossref_item_for, work_from_record
    from airflow_doi.resolver.datafiles import crossref_tar

    folder.mkdir(parents=True, exist_ok=True)
    works = [work_from_record(doi, record) for doi, record in simulator.records.values()]
    items = [crossref_item_for(w) for w in works if w.agency == "crossref" and w.fault is None]
    return crossref_tar(folder / "crossref.tar", items).resolve()


def requests_line(stats: dict[str, Any]) -> str:
    """What the run asked of the simulated servers, as the demo prints it."""
    lists = stats["list_requests"]
    negotiated = stats["cn_requests"]
    queries = plural(sum(lists.values()), "list query", "list queries")
    return (f"airflow: the DAG sent {plural(stats['requests'], 'request')} to the proxy "
            f"(resolve, and Which RA? for enrich), {queries} to the agencies' batch APIs "
            f"(Crossref {lists.get('crossref', 0):,}, DataCite {lists.get('datacite', 0):,}) and "
            f"{plural(negotiated, 'content negotiation')} for the other agencies' DOIs (each a "
            "proxy redirect and an agency request)")


#: A few catalogue rows per outcome (resolved, not_found, ..., invalid), joined to their
#: resolution; invalid DOIs are never sent to the proxy, so they have no resolution row.
_CATALOGUE_ROWS = """
WITH joined AS (
    SELECT c.record_id, c.doi_raw, c.doi_key, c.doi_valid, c.doi_reason,
           r.status AS resolution,
           CASE WHEN c.doi_valid THEN r.status ELSE 'invalid' END AS outcome
    FROM catalogue AS c LEFT JOIN doi_resolution AS r ON r.doi_key = c.doi_key
)
SELECT record_id, doi_raw, doi_key, doi_valid, doi_reason, resolution FROM joined
QUALIFY row_number() OVER (PARTITION BY outcome ORDER BY record_id) <= 2
ORDER BY record_id
"""
#: A few enriched keys: one per CSL type, then every retracted or corrected work.
_METADATA_ROWS = """
SELECT doi_key, csl_type, year, container_title, title, updated_by FROM doi_metadata
WHERE metadata_status = 'ok'
QUALIFY row_number() OVER (PARTITION BY csl_type ORDER BY doi_key) <= 1 OR updated_by IS NOT NULL
ORDER BY updated_by NULLS FIRST, csl_type, doi_key
"""
_RESOLUTION_ROWS = """
SELECT doi_key, status, http_status, url FROM doi_resolution
QUALIFY row_number() OVER (PARTITION BY status ORDER BY length(doi_key), doi_key) <= 2
ORDER BY status, length(doi_key), doi_key
"""
#: Cells longer than this are cut (with an ellipsis) so each row fits on one line.
_CELL_WIDTH = 40


def _cell(value: object) -> str:
    """One table cell: ``-`` for NULL, invisible characters escaped, long text cut."""
    if value is None:
        return "-"
    text = str(value)
    if not text.isprintable():
        text = ascii(text)[1:-1]
    return text if len(text) <= _CELL_WIDTH else text[:_CELL_WIDTH - 1] + "\N{HORIZONTAL ELLIPSIS}"


def format_rows(names: list[str], rows: list[tuple[Any, ...]], indent: str = "  ") -> str:
    """A plain left-aligned text table, one line per row (for the terminal and for logs)."""
    cells = [names, *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(names))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(indent + line for line in lines)


def _query(conn: Any, sql: str) -> str:
    cursor = conn.execute(sql)
    rows = cursor.fetchall()
    names = [d[0] for d in cursor.description]
    return format_rows(names, rows) + _hostile_note(names, rows)


#: What makes a cell look like an attack: SQL quoting and comments, markup, a formula.
_HOSTILE = re.compile(r"[';<>\"]|--|^[=+@]")


def _hostile_note(names: list[str], rows: list[tuple[Any, ...]]) -> str:
    """A word under a table whose DOI cells show one looking like an attack: the sample
    holds such cells on purpose, valid DOIs by the standard, to show they stay data."""
    doi_columns = [index for index, name in enumerate(names) if name in ("doi_raw", "doi_key")]
    shown = next((str(row[index]) for row in rows for index in doi_columns
                  if isinstance(row[index], str) and _HOSTILE.search(row[index])), None)
    if shown is None:
        return ""
    return ("\n  (" + _cell(shown) + " is a deliberately hostile cell of the sample: a valid DOI "
            "by the standard, kept as data; every value is bound as a parameter, never run "
            "as SQL or shown as markup)")


def open_command(database: Path) -> tuple[str, str]:
    """The shell command that opens ``database`` here (the DuckDB CLI, else this Python with
    the duckdb module), and a first query to type in it."""

    if shutil.which("duckdb"):
        return (f"duckdb -readonly {shlex.quote(str(database))}",
                "FROM reading_list_holdings;")
    code = (f"import duckdb; db = duckdb.connect({json.dumps(str(database))}, read_only=True); "
            'print(db.sql("SHOW TABLES"))')
    return (f"{shlex.quote(sys.executable)} -i -c {shlex.quote(code)}",
            'db.sql("FROM reading_list_holdings").show()')


def show_results(database: Path) -> None:
    """Print the tables the DAG wrote, a few enriched rows, and how to open the file."""
    import duckdb

    with duckdb.connect(str(database), read_only=True) as conn:
        tables = conn.execute(
            "SELECT table_name, estimated_size FROM duckdb_tables() ORDER BY table_name"
        ).fetchall()
        statuses = conn.execute(
            "SELECT status, COUNT(*) FROM doi_resolution GROUP BY status ORDER BY status"
        ).fetchall()
        catalogue = _query(conn, _CATALOGUE_ROWS)
        resolution = _query(conn, _RESOLUTION_ROWS)
        enriched = conn.execute(
            "SELECT metadata_status, COUNT(*) FROM doi_metadata GROUP BY 1 ORDER BY 1"
        ).fetchall()
        sources = conn.execute(
            "SELECT metadata_source, COUNT(*) FROM doi_metadata WHERE metadata_source IS NOT "
            "NULL GROUP BY 1 ORDER BY 2 DESC, 1").fetchall()
        metadata = _query(conn, _METADATA_ROWS)
    print(f"airflow: {DAG_ID} succeeded; enriched tables in {database}:")
    for name, rows in tables:
        print(f"airflow:   {name} ({plural(rows, 'row')})")
    print("airflow: doi_resolution: " + ", ".join(f"{s}={n:,}" for s, n in statuses))
    print("airflow: the two catalogues joined on doi_key: table reading_list_holdings")
    print("airflow: a few rows of catalogue (invalid DOIs are never sent to the proxy):")
    print(catalogue)
    print("airflow: a few rows of doi_resolution:")
    print(resolution)
    print("airflow: doi_metadata (registry metadata from the data file, the batch APIs and "
          "content negotiation): " + ", ".join(f"{s}={n:,}" for s, n in enriched))
    print("airflow: doi_metadata by source: " + ", ".join(f"{s}={n:,}" for s, n in sources))
    print("airflow: a few enriched keys (one per type, then retracted or corrected works):")
    print(metadata)
    command, first_query = open_command(database)
    print(f"airflow: open the file (then try {first_query}):")
    print(f"  {command}")


Step = Callable[[DemoContext], None]
#: The demo, in order; later issues add their steps here.
STEPS: list[tuple[str, Step]] = [
    ("normalize", normalize_sample),
    ("airflow", airflow_pipeline),
]


#: The one line of ``airflow-doi --help`` for this command.
HELP = "run the project's main job on the bundled sample data"
DESCRIPTION = """\
Run the project's main job on the bundled sample data, offline: normalize the messy sample
CSV (examples/data/messy_dois.csv), then run the Airflow DAG doi_enrich_catalogue end to end
on a DuckDB file against the bundled proxy simulator (resolve, enrich, the dbt models and the
HTML quality report), and print a few enriched rows and the command that opens the file.
Run it from the repository checkout (or pass --root); it needs Airflow, DuckDB, dbt and the
report's charts (./scripts/demo.sh makes a .venv with them all).

Exit status: 0 done; 2 something the demo needs is missing or a step failed."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("demo", help=HELP, description=DESCRIPTION)
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="repository checkout (default: cwd)"
    )
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: ROOT/out)")
    parser.set_defaults(func=run)


#: What the demo runs, by the module each needs (Airflow, DuckDB, dbt, the report's charts).
DEMO_MODULES: tuple[str, ...] = ("airflow", "duckdb", "dbt", "matplotlib")


def missing_modules() -> list[str]:
    """The demo's modules this install lacks."""
    return [name for name in DEMO_MODULES if importlib.util.find_spec(name) is None]


def run(args: argparse.Namespace) -> int:
    context = DemoContext(root=args.root, out=args.out or args.root / "out")
    missing = missing_modules()
    if missing:
        print(
            f"airflow-doi demo: error: the demo runs Airflow, DuckDB, dbt and the report, and "
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed here: "
            f"run ./scripts/demo.sh from the clone (it makes .venv with everything), or "
            f"{pip_install('all')}",
            file=sys.stderr,
        )
        return 2
    if not context.sample.is_file():
        print(
            f"airflow-doi demo: error: sample {context.sample} not found; "
            "run the demo from the repository checkout or pass --root",
            file=sys.stderr,
        )
        return 2
    for name, step in STEPS:
        print(f"== {name}")
        try:
            step(context)
        except DemoError as error:
            print(f"airflow-doi demo: error: {error}", file=sys.stderr)
            return 2
    return 0
