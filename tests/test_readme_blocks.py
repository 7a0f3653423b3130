"""Every code block of the README runs, as a reader would copy it.

``test_readme.py`` runs the ``>>>`` examples as doctests; this module runs the rest: each
``python`` block is executed, each command line of the ``bash`` blocks after the set-up block is
run in a shell, and the ``sql`` block is run on DuckDB with the generated functions. What the
text promises (in its comments) is asserted. The only substitution is the proxy: a block that
names ``https://doi.org`` is pointed at the bundled simulator on loopback (this machine is
offline), exactly as the README tells users to do for a local stand-in.
"""

from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from airflow_doi.resolver.simulator import ProxySimulator
from tests.conftest import read_output_csv

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
SAMPLE = ROOT / "examples" / "data" / "catalogue.csv"
PROXY = "https://doi.org"

pytestmark = pytest.mark.xdist_group("readme_blocks")


def blocks(language: str) -> list[tuple[str, str]]:
    """(heading, text) of every fenced block in ``language``, in order."""
    found: list[tuple[str, str]] = []
    heading = ""
    fence: str | None = None
    lines: list[str] = []
    for line in README.read_text(encoding="utf-8").splitlines():
        if fence is None and line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif fence is None and line.startswith("```"):
            fence, lines = line[3:].strip(), []
        elif fence is not None and line.startswith("```"):
            if fence == language:
                found.append((heading, "\n".join(lines) + "\n"))
            fence = None
        elif fence is not None:
            lines.append(line)
    return found


def block_under(language: str, heading: str) -> str:
    matches = [text for head, text in blocks(language) if head == heading]
    assert len(matches) == 1, f"expected one {language} block under '{heading}'"
    return matches[0]


def commands(text: str) -> list[str]:
    """Shell command lines of a bash block: continuations joined, comments dropped."""
    joined = text.replace("\\\n", " ")
    result = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            result.append(shlex.join(words))
    return result


def test_every_python_block_is_covered() -> None:
    """A new ``python`` block must get a test here (doctest blocks run in test_readme.py)."""
    plain = [head for head, text in blocks("python") if not text.lstrip().startswith(">>>")]
    assert sorted(plain) == sorted(["pandas", "Resolving against the doi.org proxy REST API",
                                    EXISTENCE, ENRICHMENT, "Airflow provider", "Arrow", "Polars",
                                    "PySpark", "Dask"])  # PySpark: tests/test_sql_spark.py
    bash = [head for head, _ in blocks("bash")]
    assert bash[1:] == ["Install", "Install", "pandas", "Command line",
                        "Files as people export them", "Quality report", ENRICHMENT,
                        SNAPSHOTS, "Airflow provider", "On Celery"]
    # Install: tests/test_extras.py; Quality report: tests/test_report.py; On Celery:
    # test_celery_block_names_real_settings (the deployment itself: tests/test_airflow_celery.py).


def test_pandas_block() -> None:
    namespace: dict[str, object] = {}
    exec(compile(block_under("python", "pandas"), "README:pandas", "exec"), namespace)
    s = namespace["s"]
    assert isinstance(s, pd.Series)
    assert s.doi.key().tolist() == ["10.1000/ABC", "10.1000/ABC", pd.NA, pd.NA]
    report = s.doi.validate()
    assert list(report.columns) == ["doi", "key", "valid", "reason"]
    assert report["reason"].tolist()[2:] == ["bad_directory", "empty"]
    assert s.doi.url().tolist()[0] == "https://doi.org/10.1000/ABC"


def test_arrow_block() -> None:
    import pyarrow as pa

    namespace: dict[str, object] = {}
    exec(compile(block_under("python", "Arrow"), "README:Arrow", "exec"), namespace)
    arrow, column = namespace["arrow"], namespace["column"]
    keys = arrow.key(column)  # type: ignore[attr-defined]
    assert isinstance(keys, pa.ChunkedArray) and [len(c) for c in keys.chunks] == [2, 2]
    assert keys.to_pylist() == ["10.1000/ABC", None, "10.1000/ABC", None]
    reasons = [row["reason"] for row in arrow.validate(column).to_pylist()]  # type: ignore[attr-defined]
    assert reasons == [None, "empty", None, "bad_directory"]
    assert arrow.url(column).to_pylist()[0] == "https://doi.org/10.1000/ABC"  # type: ignore[attr-defined]


def test_polars_block() -> None:
    namespace: dict[str, object] = {}
    exec(compile(block_under("python", "Polars"), "README:Polars", "exec"), namespace)
    keyed = namespace["keyed"]
    counts = dict(keyed.group_by("key").len().rows())  # type: ignore[attr-defined]
    assert counts == {"10.1000/ABC": 2, None: 2}
    assert keyed["check"].struct.field("reason").to_list() == [  # type: ignore[index]
        None, None, "bad_directory", "empty"]


def test_dask_block() -> None:
    namespace: dict[str, object] = {}
    exec(compile(block_under("python", "Dask"), "README:Dask", "exec"), namespace)
    keyed = namespace["keyed"]
    assert keyed["key"].nunique().compute() == 1  # type: ignore[index]
    assert keyed.npartitions == 4  # type: ignore[attr-defined]


def test_native_status_block() -> None:
    """The README's check of which engine serves: the install built the native core."""
    (line,) = commands(block_under("bash", "pandas"))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(line, shell=True, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("native: the native core"), done.stdout
    off = subprocess.run(line, shell=True, cwd=ROOT, env={**env, "AIRFLOW_DOI_NATIVE": "0"},
                         capture_output=True, text=True, timeout=120, check=False)
    assert off.stdout.startswith("pure Arrow: the native core is switched off"), off.stdout


def test_resolve_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = block_under("python", "Resolving against the doi.org proxy REST API")
    assert f'base_url="{PROXY}"' in text
    monkeypatch.chdir(tmp_path)
    with ProxySimulator(auto_records=True) as sim:
        namespace: dict[str, object] = {}
        code = text.replace(f'base_url="{PROXY}"', f'base_url="{sim.url}"')
        exec(compile(code, "README:resolve", "exec"), namespace)
        assert sim.request_count == 1  # "one request was sent"
    statuses = [r.status for r in namespace["results"]]  # type: ignore[attr-defined]
    assert statuses == ["resolved", "resolved", "invalid"]
    assert (tmp_path / "doi-cache.sqlite").exists()


EXISTENCE = "Existence only, a batch at a time"


def test_existence_block(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_doi.resolver.simulator import make_records

    text = block_under("python", EXISTENCE)
    assert f'base_url="{PROXY}"' in text
    monkeypatch.chdir(tmp_path)
    with ProxySimulator(make_records(["10.1000/1"])) as sim:
        namespace: dict[str, object] = {}
        exec(compile(text.replace(f'base_url="{PROXY}"', f'base_url="{sim.url}"'),
                     "README:existence", "exec"), namespace)
        assert sim.request_count == sim.ra_requests == 1  # "one request was sent"
    rows = namespace["exists"]
    assert [r.status for r in rows] == ["registered", "registered", "not_found"]  # type: ignore[attr-defined]
    assert rows[0].agency  # type: ignore[index]


ENRICHMENT = "Enrichment: registry metadata from the agencies"
SNAPSHOTS = "A whole catalogue from the public data files"


def run_snapshot_block(cwd: Path, run: Any) -> None:
    """The block's two lines, as written, in ``cwd`` (which sees the clone's examples/), each
    by ``run(line)``; what they promise is asserted."""
    lines = commands(block_under("bash", SNAPSHOTS))
    assert [shlex.split(line)[:2] for line in lines] == [["airflow-doi", "simulator"],
                                                         ["airflow-doi", "enrich"]]
    made = run(lines[0])
    assert made.returncode == 0, made.stdout + made.stderr
    assert sorted(p.name for p in (cwd / "snapshot").iterdir()) == [
        "crossref.jsonl.gz", "crossref.tar", "datacite.tar"]
    enriched = run(lines[1])
    said = enriched.stdout + enriched.stderr
    assert enriched.returncode == 0 and "Traceback" not in said, said
    assert "data files: 4 members read" in said and "10 keys found; 4 keys not in them" in said
    rows = read_output_csv(cwd / "enriched.csv")
    sources = {row["metadata_source"] for row in rows if row["metadata_status"] == "ok"}
    assert sources == {"crossref_snapshot", "datacite_snapshot"}, sources
    assert {row["metadata_status"] for row in rows} == {"ok", "not_in_snapshot", "invalid"}


def test_snapshot_block(tmp_path: Path) -> None:
    """From the clone, offline: the sample registry's data files, then enrich from them."""
    os.symlink(ROOT / "examples", tmp_path / "examples")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    run_snapshot_block(tmp_path, lambda line: subprocess.run(
        line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        check=False))


def test_enrichment_python_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As written, with the proxy and its agencies simulated on loopback (the only change:
    ``base_url`` and the simulated agencies' hosts as ``metadata_hosts``)."""
    text = block_under("python", ENRICHMENT)
    assert f'base_url="{PROXY}"' in text
    monkeypatch.chdir(tmp_path)
    with ProxySimulator(auto_records=True) as sim:
        namespace: dict[str, object] = {}
        code = text.replace(f'base_url="{PROXY}"',
                            f'base_url="{sim.url}", metadata_hosts={sim.metadata_hosts!r}')
        exec(compile(code, "README:enrich", "exec"), namespace)
        assert sim.cn_requests == 1  # "one DOI was asked"
        assert all("you@your-library.org" in agent for agent in sim.agency_user_agents)
    records = namespace["records"]
    assert [r.metadata_status for r in records] == ["ok", "ok", "invalid"]  # type: ignore[attr-defined]
    assert (tmp_path / "doi-metadata.sqlite").exists()


def test_enrichment_command_block(tmp_path: Path) -> None:
    """The enrich line, on the file the Command line block's normalize line writes."""
    shutil.copy(SAMPLE, tmp_path / "catalogue.csv")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    normalize = commands(block_under("bash", "Command line"))[0]
    (enrich,) = commands(block_under("bash", ENRICHMENT))
    assert shlex.split(enrich)[:2] == ["airflow-doi", "enrich"]
    for line in (normalize,):
        done = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
    with ProxySimulator(auto_records=True) as sim:
        local = [f"--base-url={sim.url}", "--rate=100", "--agency-rate=100",
                 *[f"--metadata-host={h}" for h in sim.metadata_hosts]]
        done = subprocess.run(f"{enrich} {shlex.join(local)}", shell=True, cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        assert sim.cn_requests > 0
    # The normalized file's columns come along; ours are named after the registry (its column
    # doi is taken).
    rows = read_output_csv(tmp_path / "enriched.csv")
    kept = read_output_csv(tmp_path / "enriched.csv", raw=True)
    with SAMPLE.open(encoding="utf-8", newline="") as handle:
        sample = list(csv.DictReader(handle))
    assert len(rows) == len(sample)
    assert [row["doi_raw"] for row in kept] == [row["doi_raw"] for row in sample]
    # normalize's doi_key and doi_url stay as they were, beside ours: no _2 anywhere.
    assert "metadata_status" in kept[0] and "metadata_key" in kept[0] and "doi_key" in kept[0]
    assert not any(name.endswith("_2") for name in kept[0])
    assert {r["metadata_status"] for r in rows} >= {"ok", "invalid"}
    assert (tmp_path / "enriched.sqlite").exists()


def test_command_line_block(tmp_path: Path) -> None:
    """Each line of the CLI block, as written, in a fresh folder holding the sample catalogue."""
    shutil.copy(SAMPLE, tmp_path / "catalogue.csv")
    with SAMPLE.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    lines = commands(block_under("bash", "Command line"))
    assert [shlex.split(c)[:2] for c in lines] == [
        ["airflow-doi", "normalize"], ["airflow-doi", "resolve"],
        ["airflow-doi", "simulator"], ["airflow-doi", "sql"]]
    normalize, resolve, simulator, sql = lines

    done = subprocess.run(normalize, shell=True, cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    with (tmp_path / "catalogue.normalized.csv").open(encoding="utf-8", newline="") as handle:
        normalized = list(csv.DictReader(handle))
    assert len(normalized) == len(rows)
    assert {"doi", "doi_key", "doi_valid", "doi_reason", "doi_url"} <= set(normalized[0])

    # The simulator line as written: it prints its URL first, then serves until stopped.
    server = subprocess.Popen(shlex.split(simulator), cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:8080/?", url), url
        assert PROXY in resolve
        done = subprocess.run(resolve.replace(PROXY, url.rstrip("/")), shell=True, cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    with (tmp_path / "resolved.csv").open(encoding="utf-8", newline="") as handle:
        resolved = list(csv.DictReader(handle))
    assert len(resolved) == len(rows)
    assert {r["status"] for r in resolved} >= {"resolved", "invalid"}
    assert (tmp_path / "resolved.sqlite").exists()

    done = subprocess.run(sql, shell=True, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_files_block_says_what_its_comments_say(tmp_path: Path) -> None:
    """The European Excel export of the README: its command, as written, prints its comments."""
    text = block_under("bash", "Files as people export them")
    (line,) = commands(text)
    promised = [row[2:] for row in text.splitlines() if row.startswith("# ")]
    (tmp_path / "apc_2024.csv").write_bytes(
        "Institution;Period;euro;doi\r\nUniversität Zürich;2024;1.234,56;10.1000/ÄBC\r\n"
        "Université de Genève;2024;2.000,00;NA\r\nETH Zürich;2024;NA;doi:10.1000/xyz\r\n"
        .encode("cp1252"))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == promised
    lines = (tmp_path / "apc_2024.normalized.csv").read_bytes().split(b"\r\n")
    assert lines[0] == (b"\xef\xbb\xbfInstitution;Period;euro;doi;doi_normalized;doi_key;"
                        b"doi_valid;doi_reason;doi_url")  # a BOM, for Excel
    assert lines[2].startswith("Université de Genève;2024;2.000,00;NA;;;false;empty;".encode())


def test_sql_block_on_duckdb() -> None:
    """The analyst's join with the generated DuckDB functions matches what UPPER(TRIM()) misses."""
    (query,) = [text for _, text in blocks("sql")]
    con = duckdb.connect()
    con.execute((ROOT / "sql" / "duckdb" / "doi_functions.sql").read_text(encoding="utf-8"))
    con.execute("create table catalogue_a (id integer, doi varchar)")
    con.execute("create table catalogue_b (id integer, doi varchar)")
    con.executemany("insert into catalogue_a values (?, ?)",
                    [(1, "doi:10.1000/Straße"), (2, "https://doi.org/10.1000/abc%23x"),
                     (3, "10.1000/none")])
    con.executemany("insert into catalogue_b values (?, ?)",
                    [(10, "10.1000/STRAßE "), (20, "10.1000/ABC#X"), (30, "10.1000/STRASSE")])
    pairs = sorted(con.execute(query).fetchall())
    assert pairs == [(1, 10), (2, 20)]


def test_airflow_block_runs_as_a_dag(tmp_path: Path) -> None:
    """The Airflow section as a stranger follows it: the operators block saved as
    enrich_works.py, then its bash block run as written (AIRFLOW_HOME, the dags folder,
    ``airflow db migrate``, the catalogue, the simulator's connection line) in a shell whose
    environment has nothing of Airflow's or of this suite's."""
    text = block_under("python", "Airflow provider")
    match = re.search(r'DAG\(\s*"([^"]+)"', text)
    assert match, "the Airflow block defines its DAG with DAG(\"dag_id\", ...)"
    script = block_under("bash", "Airflow provider")
    assert f"airflow dags test {match.group(1)}" in script
    (tmp_path / f"{match.group(1)}.py").write_text(textwrap.dedent(text), encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "PYTEST", "VIRTUAL_ENV"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # the venv, as if activated
    # Should a step fail, the simulator started in the background stops with the shell.
    guarded = "trap 'kill $(jobs -p) 2>/dev/null || :' EXIT\n" + script
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", guarded], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900, check=False)
    output = run.stdout + run.stderr
    assert run.returncode == 0 and "state=success" in output, output[-5000:]
    assert (tmp_path / "airflow-home" / "airflow.db").exists()  # its own metadata database
    import sqlite3

    with sqlite3.connect(tmp_path / "catalogue.db") as conn:
        rows = conn.execute("select record_id, doi_key, doi_valid from works "
                            "order by record_id").fetchall()
        resolved = conn.execute("select count(*) from doi_resolution "
                                "where status = 'resolved'").fetchone()
        enriched = conn.execute("select count(*) from doi_metadata where title is not null "
                                "or metadata_status = 'no_metadata'").fetchone()
    assert [r[0] for r in rows] == [1, 2, 3, 4]  # the user's rows, all of them
    assert [r[1] for r in rows] == ["10.1000/ABC", "10.1000/ABC", "10.1000/XYZ", None]
    assert resolved == (2,)  # 10.1000/ABC and 10.1000/XYZ, by the simulator
    assert enriched == (2,)  # ... and their metadata, by content negotiation
    served = (tmp_path / "simulator.out").read_text(encoding="utf-8").splitlines()
    assert served[0].startswith("http://127.0.0.1:")  # the simulator answered, not doi.org


def test_celery_block_names_real_settings() -> None:
    """The Celery section's block starts long-running servers, so it is not run here (the
    same deployment is: tests/test_airflow_celery.py); what it names must exist: each
    ``AIRFLOW__SECTION__KEY`` is an option of the installed Airflow, the extra is ours, and
    each ``airflow`` command is one of its commands."""
    from airflow.configuration import conf

    text = block_under("bash", "On Celery")
    settings = re.findall(r"export AIRFLOW__([A-Z_]+?)__([A-Z_]+)=", text)
    assert len(settings) >= 10
    described = conf.configuration_description  # Airflow's and its providers' options
    for section, key in settings:
        options = described.get(section.lower(), {}).get("options", {})
        assert key.lower() in options, (section, key)
    assert "pip install './airflow-doi[celery]'" in text
    extras = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "\ncelery = [" in extras
    verbs = {tuple(line.split()[1:3]) for line in commands(text) if line.startswith("airflow ")}
    for verb in sorted(verbs):
        words = [w for w in verb if not w.startswith("-")][:2]
        result = subprocess.run([str(BIN / "airflow"), *words, "--help"], capture_output=True,
                                text=True, timeout=120, check=False)
        assert result.returncode == 0, (words, result.stderr[-2000:])
