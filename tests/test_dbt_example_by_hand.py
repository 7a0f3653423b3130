"""The example dbt project run by hand, as its ``profiles.yml`` says (#41 item 10).

The command line in ``examples/dbt/profiles.yml`` is run as written (``dbt deps`` first) in a
git repository holding a copy of the clone's ``.gitignore``, ``examples/dbt`` and ``dbt_doi``,
beside the DuckDB file the demo leaves (``out/catalogue.duckdb``): it builds every model and
test, and leaves no untracked file behind (dbt's ``.user.yml`` among them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from airflow_doi import validate
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

PROFILES = ROOT / "examples" / "dbt" / "profiles.yml"
#: What a run of the project writes into it; never part of a clone.
_BUILT = shutil.ignore_patterns("target", "dbt_packages", "logs", ".user.yml", "__pycache__")


def _hand_command() -> str:
    """The command ``profiles.yml`` tells a reader to run by hand (one comment line)."""
    lines = [line.removeprefix("#").strip() for line in PROFILES.read_text().splitlines()
             if line.startswith("#") and " dbt build " in line]
    assert len(lines) == 1, lines
    return lines[0]


def _git(clone: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org",
                           "-c", "commit.gpgsign=false", *args], cwd=clone,
                          capture_output=True, text=True, check=True)
    return done.stdout


def _clone(tmp_path: Path) -> Path:
    """A git repository with the parts of the clone the example project needs, committed."""
    clone = tmp_path / "clone"
    (clone / "examples").mkdir(parents=True)
    shutil.copy(ROOT / ".gitignore", clone / ".gitignore")
    shutil.copytree(ROOT / "examples" / "dbt", clone / "examples" / "dbt", ignore=_BUILT)
    shutil.copytree(ROOT / "dbt_doi", clone / "dbt_doi", ignore=_BUILT)
    _git(clone, "init", "-q")
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "clone")
    return clone


def _catalogue(path: Path) -> None:
    """The tables the demo's DAG leaves in ``out/catalogue.duckdb``, for the sample."""
    import csv

    with (ROOT / "examples" / "data" / "catalogue.csv").open(encoding="utf-8") as handle:
        rows = [(int(r["record_id"]), r["title"], r["doi_raw"] or None)
                for r in csv.DictReader(handle)]
    path.parent.mkdir(parents=True)
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE catalogue (record_id INTEGER, title TEXT, doi_raw TEXT, "
                     "doi TEXT, doi_key TEXT, doi_valid BOOLEAN, doi_reason TEXT)")
        checks = [(row, validate(row[2])) for row in rows]
        conn.executemany("INSERT INTO catalogue VALUES (?, ?, ?, ?, ?, ?, ?)", [
            (*row, check.doi, check.key, check.valid, check.reason) for row, check in checks])
        keys = sorted({check.key for _, check in checks if check.valid and check.key})
        conn.execute("CREATE TABLE doi_resolution (doi_key TEXT, status TEXT, url TEXT)")
        conn.executemany("INSERT INTO doi_resolution VALUES (?, 'resolved', ?)",
                         [(key, f"https://example.org/{n}") for n, key in enumerate(keys)])
        conn.execute("CREATE TABLE doi_metadata (doi_key TEXT, metadata_status TEXT, "
                     "title TEXT, csl_type TEXT, year INTEGER, container_title TEXT, "
                     "publisher TEXT, updated_by TEXT)")
        conn.executemany(
            "INSERT INTO doi_metadata VALUES (?, 'ok', ?, 'article-journal', 2020, 'J', 'P', "
            "NULL)", [(key, f"Work {n}") for n, key in enumerate(keys)])


def test_the_project_runs_by_hand_as_its_profile_says_and_leaves_no_file(
        tmp_path: Path) -> None:
    command = _hand_command()
    assert command.index("dbt deps") < command.index("dbt build"), command
    clone = _clone(tmp_path)
    _catalogue(clone / "out" / "catalogue.duckdb")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
           f"{os.environ.get('PATH', '')}", "HOME": str(tmp_path / "home")}
    for name in [name for name in env if name.startswith(("DBT_", "DOI_"))]:
        del env[name]  # as a reader's shell has them: none
    done = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Completed successfully" in done.stdout
    with duckdb.connect(str(clone / "out" / "catalogue.duckdb"), read_only=True) as conn:
        (holdings,) = conn.execute("SELECT COUNT(*) FROM reading_list_holdings").fetchone()
    assert holdings == 9
    assert _git(clone, "status", "--porcelain", "--untracked-files=all") == ""
