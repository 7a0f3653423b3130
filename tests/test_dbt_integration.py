"""``dbt build`` of dbt_doi/integration_tests, for real, on dbt-duckdb and dbt-postgres.

The project is copied to a temporary directory (so target/, logs/ and dbt_packages/ never land
in the repository) and gets a generated profiles.yml: a DuckDB file database there, and a fresh
schema on the real PostgreSQL server. Two builds (one per adapter, seeds + models + UDF
resources + every test) and one run that must fail: the tests tagged expected_failure, which
prove that valid_doi and unique_doi can fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from airflow_doi.sqlgen.conformance import EXTRA_CASES, vector_seed_csv
from tests.conftest import ROOT, syntax_vectors

pytestmark = pytest.mark.slow

PACKAGE = ROOT / "dbt_doi"
SEED = PACKAGE / "integration_tests" / "seeds" / "doi_vectors.csv"
DBT = str(Path(sys.executable).with_name("dbt"))


def seed_inputs() -> list[str | None]:
    """Vectors with decode="auto" and the extra cases; U+0000 cannot be stored in PostgreSQL
    text, so inputs holding it are left to the engine tests."""
    values = [v["input"] for v in syntax_vectors() if v.get("decode", "auto") == "auto"]
    return [v for v in [*values, *EXTRA_CASES] if v is None or "\x00" not in v]


def test_vector_seed_is_generated_from_the_vectors() -> None:
    assert SEED.read_text(encoding="utf-8") == vector_seed_csv(seed_inputs()), (
        "regenerate: python -m tests.test_dbt_integration"
    )


def copy_project(tmp_path: Path) -> Path:
    ignore = shutil.ignore_patterns("target", "dbt_packages", "logs", ".user.yml")
    shutil.copytree(PACKAGE, tmp_path / "dbt_doi", ignore=ignore)
    return tmp_path / "dbt_doi" / "integration_tests"


def write_profile(directory: Path, output: dict[str, Any]) -> None:
    profile = {"dbt_doi_integration_tests": {"target": "test", "outputs": {"test": output}}}
    (directory / "profiles.yml").write_text(json.dumps(profile), encoding="utf-8")


def dbt(project: Path, *args: str) -> tuple[int, dict[str, str]]:
    """Run dbt; return its exit code and {test or node name: status} from run_results.json."""
    env = {
        **os.environ,
        "DBT_PROFILES_DIR": str(project),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DO_NOT_TRACK": "1",
    }
    done = subprocess.run(
        [DBT, *args, "--project-dir", str(project)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    results_path = project / "target" / "run_results.json"
    statuses: dict[str, str] = {}
    if results_path.exists() and args[0] != "deps":
        results = json.loads(results_path.read_text(encoding="utf-8"))
        statuses = {r["unique_id"]: r["status"] for r in results["results"]}
    if done.returncode not in (0, 1) or (args[0] == "deps" and done.returncode):
        pytest.fail(f"dbt {' '.join(args)} crashed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    print(done.stdout[-1500:])
    return done.returncode, statuses


def build_and_check(project: Path, *build_args: str) -> dict[str, str]:
    assert dbt(project, "deps")[0] == 0
    code, statuses = dbt(project, "build", "--exclude", "tag:expected_failure", *build_args)
    failed = {k: v for k, v in statuses.items() if v not in ("success", "pass")}
    assert code == 0 and not failed, failed
    kinds = {key.split(".")[0] for key in statuses}
    assert {"seed", "model", "test", "function"} <= kinds, kinds
    assert any("vectors_match_python" in key for key in statuses)
    assert any("udfs_match_python" in key for key in statuses)
    assert sum(".valid_doi" in key or "valid_doi_" in key for key in statuses) >= 2
    return statuses


@pytest.mark.xdist_group("dbt_duckdb")
def test_dbt_build_on_duckdb_and_valid_doi_can_fail(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    write_profile(
        project,
        {"type": "duckdb", "path": str(tmp_path / "integration.duckdb"), "threads": 1},
    )
    build_and_check(project)

    # Failing on purpose: both generic tests must report failures on deliberately_bad.
    code, statuses = dbt(project, "test", "--select", "tag:expected_failure")
    assert code == 1
    assert sorted(statuses.values()) == ["fail", "fail"], statuses
    assert {("valid_doi" in k, "unique_doi" in k) for k in statuses} == {
        (True, False),
        (False, True),
    }


@pytest.mark.xdist_group("dbt_duckdb")
def test_dbt_build_on_duckdb_with_the_native_extension(tmp_path: Path) -> None:
    """The same build with ``dbt_doi_duckdb_native``: every macro calls the C extension, which
    dbt-duckdb installs and loads from the profile, and every vector test still passes."""
    from airflow_doi import duckdb_native

    extension = duckdb_native.build(tmp_path / "build")
    project = copy_project(tmp_path)
    write_profile(
        project,
        {
            "type": "duckdb",
            "path": str(tmp_path / "native.duckdb"),
            "threads": 1,
            "config_options": {
                "allow_unsigned_extensions": True,
                "extension_directory": str(tmp_path / "extensions"),
            },
            "extensions": [str(extension)],
        },
    )
    build_and_check(project, "--vars", '{"dbt_doi_duckdb_native": true}')
    compiled = next((project / "target" / "compiled").rglob("vector_results.sql")).read_text()
    assert "system.main.doi_key(" in compiled and "REGEXP" not in compiled.upper()


@pytest.mark.xdist_group("dbt_postgres")
def test_dbt_build_on_postgres(tmp_path: Path, postgres_dsn: str, postgres_schema: str) -> None:
    project = copy_project(tmp_path)
    dsn = urlparse(postgres_dsn)
    write_profile(
        project,
        {
            "type": "postgres",
            "host": dsn.hostname or "127.0.0.1",
            "port": dsn.port or 5432,
            "user": dsn.username or "postgres",
            "password": dsn.password or "",
            "dbname": (dsn.path or "/test").lstrip("/"),
            "schema": postgres_schema,
            "threads": 2,
        },
    )
    build_and_check(project)


if __name__ == "__main__":  # regenerate the seed after the vectors change
    SEED.write_text(vector_seed_csv(seed_inputs()), encoding="utf-8")
