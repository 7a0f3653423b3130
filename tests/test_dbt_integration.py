"""``dbt build`` of the dbt package's two integration projects, for real.

* ``dbt_doi/integration_tests`` (the macros): on dbt-duckdb and dbt-postgres 1.11, on DuckDB
  with the native extension, and on the oldest dbt the package claims (1.8, in the venv
  ``.venv-dbt-oldest`` that ``scripts/bootstrap.sh dev`` makes), each followed where it
  matters by a run that must fail: the tests tagged expected_failure, which prove that
  valid_doi and unique_doi can fail.
* ``dbt_doi/udfs/integration_tests`` (the UDF resources, dbt 1.11+): the same seeds, models and
  tests with every macro calling the functions built there, on DuckDB and PostgreSQL; and
  ``dbt docs generate`` must describe every macro of both packages.

Each project is copied to a temporary directory (so target/, logs/ and dbt_packages/ never land
in the repository) and gets a generated profiles.yml: a DuckDB file database there, or a fresh
schema on the real PostgreSQL server.
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
from tests import forked
from tests.conftest import ROOT, syntax_vectors

pytestmark = pytest.mark.slow

PACKAGE = ROOT / "dbt_doi"
SEED = PACKAGE / "integration_tests" / "seeds" / "doi_vectors.csv"
DBT = str(Path(sys.executable).with_name("dbt"))
#: The oldest dbt-core the package claims, in a venv of its own (see scripts/bootstrap.sh).
OLDEST_DBT = os.environ.get("DBT_DOI_OLDEST_DBT", str(ROOT / ".venv-dbt-oldest" / "bin" / "dbt"))
MACRO_PROJECT = "integration_tests"
UDF_PROJECT = "udfs/integration_tests"


def seed_inputs() -> list[str | None]:
    """Vectors with decode="auto" and the extra cases; U+0000 cannot be stored in PostgreSQL
    text, so inputs holding it are left to the engine tests."""
    values = [v["input"] for v in syntax_vectors() if v.get("decode", "auto") == "auto"]
    return [v for v in [*values, *EXTRA_CASES] if v is None or "\x00" not in v]


def test_vector_seed_is_generated_from_the_vectors() -> None:
    assert SEED.read_text(encoding="utf-8") == vector_seed_csv(seed_inputs()), (
        "regenerate: python -m tests.test_dbt_integration"
    )


def copy_project(tmp_path: Path, project: str = MACRO_PROJECT) -> Path:
    ignore = shutil.ignore_patterns("target", "dbt_packages", "logs", ".user.yml")
    shutil.copytree(PACKAGE, tmp_path / "dbt_doi", ignore=ignore)
    return tmp_path / "dbt_doi" / project


def postgres_profile(postgres_dsn: str, schema: str) -> dict[str, Any]:
    dsn = urlparse(postgres_dsn)
    return {
        "type": "postgres",
        "host": dsn.hostname or "127.0.0.1",
        "port": dsn.port or 5432,
        "user": dsn.username or "postgres",
        "password": dsn.password or "",
        "dbname": (dsn.path or "/test").lstrip("/"),
        "schema": schema,
        "threads": 2,
    }


def write_profile(directory: Path, output: dict[str, Any]) -> None:
    profile = {"dbt_doi_integration_tests": {"target": "test", "outputs": {"test": output}}}
    (directory / "profiles.yml").write_text(json.dumps(profile), encoding="utf-8")


def dbt(project: Path, *args: str, executable: str = DBT) -> tuple[int, dict[str, str]]:
    """Run dbt; return its exit code and {test or node name: status} from run_results.json."""
    env = {
        **os.environ,
        "DBT_PROFILES_DIR": str(project),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DO_NOT_TRACK": "1",
    }
    done = forked.run(
        [executable, *args, "--project-dir", str(project)],
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


def build_and_check(
    project: Path, *build_args: str, executable: str = DBT, functions: bool = False
) -> dict[str, str]:
    assert dbt(project, "deps", executable=executable)[0] == 0
    code, statuses = dbt(
        project, "build", "--exclude", "tag:expected_failure", *build_args, executable=executable
    )
    failed = {k: v for k, v in statuses.items() if v not in ("success", "pass")}
    assert code == 0 and not failed, failed
    kinds = {key.split(".")[0] for key in statuses}
    assert {"seed", "model", "test"} <= kinds, kinds
    assert ("function" in kinds) == functions, kinds
    assert any("vectors_match_python" in key for key in statuses)
    assert any("catalogue_join_is_exact" in key for key in statuses)
    assert any("udfs_match_python" in key for key in statuses) == functions
    assert sum(".valid_doi" in key or "valid_doi_" in key for key in statuses) >= 2
    return statuses


def expected_failures_fail(project: Path, executable: str = DBT) -> None:
    """Both generic tests must report failures on deliberately_bad."""
    code, statuses = dbt(project, "test", "--select", "tag:expected_failure", executable=executable)
    assert code == 1
    assert sorted(statuses.values()) == ["fail", "fail"], statuses
    assert {("valid_doi" in k, "unique_doi" in k) for k in statuses} == {
        (True, False),
        (False, True),
    }


def compiled(project: Path, model: str) -> str:
    """The model's compiled SQL from the manifest of the last build (the UDF project's models
    live outside its directory, so target/compiled has no tidy path for them)."""
    manifest = json.loads((project / "target" / "manifest.json").read_text(encoding="utf-8"))
    nodes = [n for n in manifest["nodes"].values() if n["resource_type"] == "model"]
    return str(next(n for n in nodes if n["name"] == model)["compiled_code"])


@pytest.mark.xdist_group("dbt_duckdb")
def test_dbt_build_on_duckdb_and_valid_doi_can_fail(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    write_profile(
        project,
        {"type": "duckdb", "path": str(tmp_path / "integration.duckdb"), "threads": 1},
    )
    build_and_check(project)
    assert "REGEXP" in compiled(project, "vector_results").upper()  # inline bodies
    expected_failures_fail(project)


@pytest.mark.xdist_group("dbt_oldest")
def test_the_macros_build_on_the_oldest_dbt_the_package_claims(tmp_path: Path) -> None:
    """dbt_doi claims dbt-core 1.8: its macro project builds there, unchanged, and its tests
    still fail where they must."""
    assert Path(OLDEST_DBT).exists(), f"{OLDEST_DBT} is missing: run scripts/bootstrap.sh dev"
    version = subprocess.run(
        [OLDEST_DBT, "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert "installed: 1.8." in version, version
    project = copy_project(tmp_path)
    write_profile(project, {"type": "duckdb", "path": str(tmp_path / "old.duckdb"), "threads": 1})
    build_and_check(project, executable=OLDEST_DBT)
    expected_failures_fail(project, executable=OLDEST_DBT)


@pytest.mark.xdist_group("dbt_duckdb")
def test_git_install_with_the_readmes_subdirectories(tmp_path: Path) -> None:
    """The README's git entries (subdirectory dbt_doi and dbt_doi/udfs, a pinned revision),
    pointed at this repository's own git history: dbt deps clones them and the macros and the
    functions compile from the clone."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    project = tmp_path / "stranger"
    project.mkdir()
    (project / "dbt_project.yml").write_text(
        "name: stranger\nversion: '1.0'\nconfig-version: 2\nprofile: dbt_doi_integration_tests\n",
        encoding="utf-8")
    url = f"file://{ROOT}"
    (project / "packages.yml").write_text(
        f"packages:\n  - git: {url!r}\n    subdirectory: dbt_doi\n    revision: {commit}\n"
        f"  - git: {url!r}\n    subdirectory: dbt_doi/udfs\n    revision: {commit}\n",
        encoding="utf-8")
    write_profile(project, {"type": "duckdb", "path": str(tmp_path / "git.duckdb")})
    assert dbt(project, "deps")[0] == 0
    installed = sorted(p.name for p in (project / "dbt_packages").iterdir())
    assert installed == ["dbt_doi", "dbt_doi_udfs"], installed
    code, _ = dbt(project, "compile", "--inline", "select {{ dbt_doi.doi_key('doi') }} as k")
    assert code == 0


def test_the_claimed_dbt_versions() -> None:
    """The macros admit 1.8 up to 1.12 (1.12 cannot be installed offline here, so it is
    claimed, not built); the UDF resources, a dbt 1.11 feature, start at 1.11."""
    import yaml

    macros = yaml.safe_load((PACKAGE / "dbt_project.yml").read_text(encoding="utf-8"))
    udfs = yaml.safe_load((PACKAGE / "udfs" / "dbt_project.yml").read_text(encoding="utf-8"))
    assert macros["require-dbt-version"] == [">=1.8.0", "<2.0.0"]
    assert udfs["require-dbt-version"] == [">=1.11.0", "<2.0.0"]
    assert "function-paths" not in macros and "functions" not in macros
    assert udfs["function-paths"] == ["functions"]
    assert not (PACKAGE / "functions").exists()
    assert len(list((PACKAGE / "udfs" / "functions").glob("*.sql"))) == 5


def test_udf_argument_types_per_adapter() -> None:
    """The functions' types render per adapter: STRING where the engine has no TEXT, an
    untruncated VARCHAR on Redshift."""
    import jinja2
    import yaml

    schema = yaml.safe_load(
        (PACKAGE / "udfs" / "functions" / "schema.yml").read_text(encoding="utf-8")
    )
    expected = {
        "bigquery": "string", "databricks": "string", "spark": "string", "trino": "varchar",
        "snowflake": "varchar", "redshift": "varchar(65535)", "postgres": "text",
        "duckdb": "varchar",
    }
    for adapter, text_type in expected.items():
        target = {"type": adapter}
        for function in schema["functions"]:
            types = [a["data_type"] for a in function["arguments"]] + [
                function["returns"]["data_type"]
            ]
            rendered = [jinja2.Template(t).render(target=target) for t in types]
            want = "boolean" if function["name"] == "doi_is_valid" else text_type
            assert rendered == [text_type, want], (adapter, function["name"], rendered)


@pytest.mark.xdist_group("dbt_duckdb")
def test_dbt_build_on_duckdb_with_the_native_extension(tmp_path: Path) -> None:
    """The same build with ``dbt_doi_duckdb_native``: every macro calls the C extension, which
    dbt-duckdb installs and loads from the profile, and every vector test still passes."""
    from airflow_doi.native import duckdb as duckdb_native

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
    text = compiled(project, "vector_results")
    assert "system.main.doi_key(" in text and "REGEXP" not in text.upper()


@pytest.mark.xdist_group("dbt_postgres")
def test_dbt_build_on_postgres(tmp_path: Path, postgres_dsn: str, postgres_schema: str) -> None:
    project = copy_project(tmp_path)
    write_profile(project, postgres_profile(postgres_dsn, postgres_schema))
    build_and_check(project)
    expected_failures_fail(project)


def check_function_calls(project: Path) -> None:
    """With the UDF resources built, every macro in the reused models is one short call."""
    text = compiled(project, "vector_results")
    assert "REGEXP" not in text.upper() and len(text) < 3000, text[:2000]
    for name in ("doi_normalize", "doi_key", "doi_is_valid", "doi_reason", "doi_url"):
        assert f'"{name}"(input)' in text, name


@pytest.mark.xdist_group("dbt_duckdb")
def test_udf_resources_on_duckdb_and_every_macro_is_documented(tmp_path: Path) -> None:
    project = copy_project(tmp_path, UDF_PROJECT)
    write_profile(project, {"type": "duckdb", "path": str(tmp_path / "udfs.duckdb"), "threads": 1})
    build_and_check(project, functions=True)
    check_function_calls(project)

    assert dbt(project, "docs", "generate")[0] == 0
    manifest = json.loads((project / "target" / "manifest.json").read_text(encoding="utf-8"))
    ours = {
        m["name"]: m
        for m in manifest["macros"].values()
        if m["package_name"] in ("dbt_doi", "dbt_doi_udfs")
    }
    undocumented = sorted(name for name, m in ours.items() if not m["description"].strip())
    assert len(ours) >= 60 and not undocumented, undocumented
    for name in ("doi_normalize", "doi_key", "doi_is_valid", "doi_reason", "doi_url"):
        assert ours[name]["arguments"] and "```sql" in ours[name]["description"], name
    functions = manifest["functions"]
    assert {f["name"] for f in functions.values()} == {
        "doi_normalize", "doi_key", "doi_is_valid", "doi_reason", "doi_url"
    }
    assert {f["arguments"][0]["data_type"] for f in functions.values()} == {"varchar"}


@pytest.mark.xdist_group("dbt_postgres")
def test_udf_resources_on_postgres(
    tmp_path: Path, postgres_dsn: str, postgres_schema: str
) -> None:
    project = copy_project(tmp_path, UDF_PROJECT)
    write_profile(project, postgres_profile(postgres_dsn, postgres_schema))
    build_and_check(project, functions=True)
    check_function_calls(project)
    expected_failures_fail(project)


if __name__ == "__main__":  # regenerate the seed after the vectors change
    SEED.write_text(vector_seed_csv(seed_inputs()), encoding="utf-8")
