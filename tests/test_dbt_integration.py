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
import re
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
CLI = str(Path(sys.executable).with_name("airflow-doi"))
FUNCTIONS = ("doi_normalize", "doi_key", "doi_is_valid", "doi_reason", "doi_url")
#: dbt's colours.
ANSI = re.compile(r"\x1b\[[0-9;]*m")


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
    code, statuses, _ = dbt_output(project, *args, executable=executable)
    return code, statuses


def dbt_output(
    project: Path, *args: str, executable: str = DBT
) -> tuple[int, dict[str, str], str]:
    """:func:`dbt`, and what dbt printed (its colours removed)."""
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
    return done.returncode, statuses, ANSI.sub("", done.stdout)


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


# -- dbt_doi_use_functions: 'SCHEMA' names the schema `airflow-doi sql install` created ------

#: The adapters the package has bodies for, the quote each one's ``adapter.quote`` writes, and
#: the dialect of ``airflow-doi sql print``/``install`` for the same engine.
ADAPTER_QUOTES = {
    "duckdb": ('"', "duckdb"), "postgres": ('"', "postgres"), "redshift": ('"', "redshift"),
    "snowflake": ('"', "snowflake"), "trino": ('"', "trino"), "bigquery": ("`", "bigquery"),
    "databricks": ("`", "databricks"), "spark": ("`", "databricks"),
}


class _Returned(Exception):
    """dbt's ``return()``: a macro's answer, raised out of the macro."""

    def __init__(self, value: object) -> None:
        self.value = value


def render_function_call(adapter_type: str, schema: str) -> str:
    """``dbt_doi._function_call('doi_key', 'doi')`` rendered as dbt would for ``adapter_type``
    with ``dbt_doi_use_functions: schema`` (plain Jinja: dbt's return(), adapter.quote and var
    stand in)."""
    import jinja2

    quote = ADAPTER_QUOTES[adapter_type][0]

    class Adapter:
        def type(self) -> str:
            return adapter_type

        def quote(self, name: str) -> str:  # what each adapter's own quote() writes
            return f"{quote}{name}{quote}"

    class Exceptions:
        def raise_compiler_error(self, message: str) -> None:
            raise AssertionError(message)

    def returned(value: object) -> None:
        raise _Returned(value)

    def call(macro: Any, *args: object) -> object:
        try:
            macro(*args)
        except _Returned as answer:
            return answer.value
        raise AssertionError("the macro returned nothing")

    class Package:  # dbt_doi.<macro>(...) inside the macros
        def __getattr__(self, name: str) -> Any:
            return lambda *args: call(defined[name], *args)

    variables = {"dbt_doi_use_functions": schema}
    env = jinja2.Environment(extensions=["jinja2.ext.do"])
    macros = env.from_string((PACKAGE / "macros" / "doi.sql").read_text(encoding="utf-8"))
    context = macros.new_context({
        "adapter": Adapter(), "exceptions": Exceptions(), "return": returned, "execute": False,
        "var": lambda name, default=None: variables.get(name, default), "dbt_doi": Package(),
    })
    list(macros.root_render_func(context))  # defines the macros, _private ones included
    defined = context.vars
    return str(call(defined["_function_call"], "doi_key", "doi"))


def test_a_function_schema_is_quoted_as_sql_install_writes_it_on_every_adapter() -> None:
    """Found in a trial: ``dbt_doi_use_functions: 'trial_sql_Upper'`` compiled to
    ``trial_sql_Upper.doi_key(doi)`` (PostgreSQL looks in trial_sql_upper), ``'trial_sql-dash'``
    to a minus; ``sql install --schema`` creates both quoted. The call names the schema as
    ``sql install``/``sql print --schema`` write it, per adapter."""
    from airflow_doi.db.install import schema_name

    for adapter_type, (quote, dialect) in ADAPTER_QUOTES.items():
        for schema in ("trial_sql_Upper", "trial_sql-dash", "analytics.trial_sql-dash"):
            if adapter_type == "postgres" and "." in schema:
                continue  # a PostgreSQL schema is named alone (sql install says so)
            want = f"{schema_name(dialect, schema)}.doi_key(doi)"
            assert render_function_call(adapter_type, schema) == want, (adapter_type, schema)
        # written already quoted: kept as written
        assert render_function_call(adapter_type, f"{quote}Mine{quote}") == (
            f"{quote}Mine{quote}.doi_key(doi)")
    assert render_function_call("postgres", "trial_sql_Upper") == '"trial_sql_Upper".doi_key(doi)'
    assert render_function_call("snowflake", "analytics.doi") == '"ANALYTICS"."DOI".doi_key(doi)'
    assert render_function_call("bigquery", "my-project.doi") == "`my-project`.`doi`.doi_key(doi)"


def install_functions(url: str, schema: str) -> None:
    """``airflow-doi sql install URL --schema SCHEMA``, as a user runs it."""
    done = forked.run([CLI, "sql", "install", url, "--schema", schema], capture_output=True,
                      text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert f"in schema {schema}" in done.stderr, done.stderr


def build_on_installed_functions(project: Path, schema: str, quoted: str) -> None:
    """The macro project built with ``dbt_doi_use_functions: schema``: every vector passes and
    every macro is one call of the function in ``quoted`` (the schema as install wrote it)."""
    build_and_check(project, "--vars", json.dumps({"dbt_doi_use_functions": schema}))
    text = compiled(project, "vector_results")
    assert "REGEXP" not in text.upper() and len(text) < 3000, text[:2000]
    for name in FUNCTIONS:
        assert f"{quoted}.{name}(input)" in text, (name, text[:2000])


@pytest.mark.xdist_group("dbt_duckdb")
def test_functions_installed_by_the_cli_in_a_mixed_case_or_dashed_schema_on_duckdb(
    tmp_path: Path,
) -> None:
    path = tmp_path / "quoted_fns.duckdb"
    project = copy_project(tmp_path)
    write_profile(project, {"type": "duckdb", "path": str(path), "threads": 1})
    for schema in ("trial_sql_Upper", "trial_sql-dash"):
        install_functions(f"duckdb:///{path}", schema)
    build_on_installed_functions(project, "trial_sql_Upper", '"trial_sql_Upper"')
    build_on_installed_functions(project, "trial_sql-dash", '"trial_sql-dash"')
    # database.schema: the DuckDB file's catalogue, each part quoted
    build_on_installed_functions(
        project, "quoted_fns.trial_sql-dash", '"quoted_fns"."trial_sql-dash"'
    )


@pytest.mark.xdist_group("dbt_postgres")
def test_functions_installed_by_the_cli_in_a_mixed_case_or_dashed_schema_on_postgres(
    tmp_path: Path, postgres_dsn: str, postgres_schema: str
) -> None:
    import psycopg

    project = copy_project(tmp_path)
    write_profile(project, postgres_profile(postgres_dsn, postgres_schema))
    schemas = [f"{postgres_schema}_Upper", f"{postgres_schema}-dash"]
    try:
        for schema in schemas:
            install_functions(postgres_dsn, schema)
            build_on_installed_functions(project, schema, f'"{schema}"')
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            for schema in schemas:  # ours, made above
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- dbt_doi_duckdb_native without the extension -------------------------------------------


@pytest.mark.xdist_group("dbt_duckdb")
def test_the_native_var_without_the_extension_says_to_load_it(tmp_path: Path) -> None:
    """Found in a trial: the var set and the extension not in the profile failed with DuckDB's
    ``Scalar Function with name doi_normalize does not exist!``. The macros say what to do."""
    project = copy_project(tmp_path)
    write_profile(project, {"type": "duckdb", "path": str(tmp_path / "n.duckdb"), "threads": 1})
    assert dbt(project, "deps")[0] == 0
    code, statuses, out = dbt_output(
        project, "build", "--exclude", "tag:expected_failure",
        "--vars", '{"dbt_doi_duckdb_native": true}',
    )
    assert code == 1
    models = {k.split(".")[-1]: v for k, v in statuses.items() if k.startswith("model.")}
    # deliberately_bad calls no macro; catalogue_matches waits for its seeds' tests (errors)
    assert models == {"vector_results": "error", "catalogue_matches": "skipped",
                      "deliberately_bad": "success"}, models
    assert "Catalog Error" not in out and "does not exist" not in out, out[-3000:]
    assert (
        "dbt_doi.doi_normalize: the var dbt_doi_duckdb_native is set, but this DuckDB "
        "connection has no native doi_normalize (the airflow-doi DuckDB extension is not "
        "loaded). Load it from the profile: extensions: [<the path `airflow-doi sql "
        "duckdb-extension` prints>] and config_options: {allow_unsigned_extensions: true}"
    ) in " ".join(out.split()), out[-3000:]


# -- the README's integration-test commands, as written -------------------------------------


def readme_commands() -> list[tuple[str, int, list[str]]]:
    """The console block of dbt_doi/README.md's "Integration tests": each ``$`` command, the
    exit status its comment promises (0 unless it says ``exit status N``), and the lines of
    output shown under it."""
    text = (PACKAGE / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Integration tests"):]
    (block,) = re.findall(r"```console\n(.*?)```", section, re.S)
    commands: list[tuple[str, int, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            status = re.search(r"#.*exit status (\d+)", line)
            commands.append((line[2:], int(status.group(1)) if status else 0, []))
        else:
            commands[-1][2].append(line.strip())
    return commands


def test_the_readme_says_how_to_leave_out_and_check_the_expected_failures() -> None:
    commands = [command.split("#")[0].split() for command, _, _ in readme_commands()]
    builds = [c for c in commands if c[:2] == ["dbt", "build"]]
    assert len(builds) == 2 and all("tag:expected_failure" in c and "--exclude" in c
                                    for c in builds), builds
    assert any(c[:2] == ["dbt", "test"] and "tag:expected_failure" in c for c in commands)
    assert all("--profiles-dir" in c for c in commands if c[0] == "dbt"), commands


def run_readme_commands(tmp_path: Path, env: dict[str, str], extra: str = "") -> None:
    """The README's commands, one shell each, from the root of a copy of the clone: each ends
    with the status its comment says and prints the lines shown under it (``NO-OP=0``, which
    dbt 1.11 adds to its summary, aside)."""
    clone = tmp_path / "clone"
    shutil.copytree(PACKAGE, clone / "dbt_doi",
                    ignore=shutil.ignore_patterns("target", "dbt_packages", "logs", ".user.yml",
                                                  "package-lock.yml", "*.duckdb"))
    cwd = clone
    for command, status, shown in readme_commands():
        if command.startswith("cd "):
            cwd = (cwd / command.split("#")[0][3:].strip()).resolve()
            assert cwd.is_dir(), command
            continue
        line = command.replace(" #", f"{extra} #", 1) if "#" in command else command + extra
        done = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=600, check=False)
        out = ANSI.sub("", done.stdout).replace(" NO-OP=0", "")
        assert done.returncode == status, (line, out[-3000:], done.stderr[-2000:])
        for want in shown:
            assert want in out, (line, want, out[-3000:])


def _reader_env(tmp_path: Path) -> dict[str, str]:
    """A reader's shell: the dev venv's dbt on PATH, no DBT_* or DOI_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DBT_", "DOI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(tmp_path / "home")
    env["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    return env


@pytest.mark.xdist_group("dbt_duckdb")
def test_the_readmes_integration_test_commands_run_as_written(tmp_path: Path) -> None:
    """Found in a trial: a plain ``dbt build`` in integration_tests reported two FAILs (the
    tests tagged expected_failure) and the README named neither the command nor a profile."""
    run_readme_commands(tmp_path, _reader_env(tmp_path))


@pytest.mark.xdist_group("dbt_postgres")
def test_the_readmes_integration_test_commands_on_postgres(
    tmp_path: Path, postgres_dsn: str, postgres_schema: str
) -> None:
    """The same with ``--target postgres`` added, as the README says, and the DOI_PG_*
    variables of integration_tests/profiles.yml set."""
    dsn = urlparse(postgres_dsn)
    env = {
        **_reader_env(tmp_path),
        "DOI_PG_HOST": dsn.hostname or "127.0.0.1", "DOI_PG_PORT": str(dsn.port or 5432),
        "DOI_PG_USER": dsn.username or "postgres", "DOI_PG_PASSWORD": dsn.password or "",
        "DOI_PG_DBNAME": (dsn.path or "/test").lstrip("/"), "DOI_DBT_SCHEMA": postgres_schema,
    }
    run_readme_commands(tmp_path, env, extra=" --target postgres")


# -- packaging after `dbt deps` in the clone ------------------------------------------------


def _tracked(*paths: str) -> list[str]:
    """The clone's files under ``paths`` that git keeps or would add (not ignored ones)."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard",
         "--", *paths], capture_output=True, text=True, check=True)
    return [name for name in done.stdout.splitlines() if os.path.lexists(ROOT / name)]


@pytest.mark.xdist_group("dbt_duckdb")
def test_the_wheel_after_dbt_deps_in_the_clone_is_built_and_ships_no_dbt_output(
    tmp_path: Path,
) -> None:
    """Found in a trial: ``dbt deps`` in dbt_doi/integration_tests (as this README says) makes
    ``dbt_packages/dbt_doi -> <clone>/dbt_doi``, a directory holding itself; ``pip wheel .``
    then walked it for 13 minutes and never ended. The wheel is built in seconds and ships
    dbt_doi's own files exactly: nothing of dbt_packages/, target/, logs/, package-lock.yml."""
    clone = tmp_path / "clone"
    files = _tracked("pyproject.toml", "setup.py", "README.md", "airflow_doi", "sql", "dbt_doi")
    for name in files:
        source, target = ROOT / name, clone / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():  # airflow_doi/dbt_package -> ../dbt_doi, sql_files -> ../sql
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    for project in (MACRO_PROJECT, UDF_PROJECT):
        directory = clone / "dbt_doi" / project
        assert dbt(directory, "deps")[0] == 0
        assert (directory / "dbt_packages" / "dbt_doi").resolve() == clone / "dbt_doi"
        for made in ("target/compiled/x/models/m.sql", "target/manifest.json",
                     "target/run/x/models/schema.yml", "logs/dbt.log"):
            (directory / made).parent.mkdir(parents=True, exist_ok=True)
            (directory / made).write_text("select 1\n", encoding="utf-8")
        assert (directory / "package-lock.yml").exists()

    out = tmp_path / "wheel"
    build = subprocess.Popen(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(clone)],
        env={**os.environ, "AIRFLOW_DOI_BUILD_NATIVE": "0"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    limit = 240  # seconds; the build takes 3 on an idle machine
    try:
        stdout, stderr = build.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(build.pid, 9)  # pip and its build backend, all of them
        build.communicate()
        pytest.fail(f"pip wheel did not end in {limit} s (it walks the dbt_packages link)")
    assert build.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert "Package would be ignored" not in stderr, stderr[-3000:]
    (wheel,) = out.glob("airflow_doi-*.whl")
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(n for n in names if n.startswith("airflow_doi/dbt_package/"))
    ours = sorted(f"airflow_doi/dbt_package/{name.removeprefix('dbt_doi/')}"
                  for name in files if name.startswith("dbt_doi/"))
    assert shipped == ours
    sql = sorted(f"airflow_doi/sql_files/{name.removeprefix('sql/')}"
                 for name in files if name.startswith("sql/") and name.endswith(".sql"))
    assert sorted(n for n in names if n.startswith("airflow_doi/sql_files/")) == sql


if __name__ == "__main__":  # regenerate the seed after the vectors change
    SEED.write_text(vector_seed_csv(seed_inputs()), encoding="utf-8")
