"""Each extra installs what its commands import, as a stranger's ``pip install`` gets it.

The README's Install section is run as written beside a copy of the working tree: its clone
block gives one virtualenv, its wheel block builds the wheel and installs it with ``[resolve]``
in another; then one fresh virtualenv per other user-facing install (the base package,
``[pandas]``, ``[polars]``, ``[report]``) gets the wheel with only that extra.
Each venv runs its extra's commands the way a person does: on a terminal (``script``, so
progress bars and colour paths run) and in a pipe. A command whose extra is missing must say
which extra to install, with the pip command for that very install (its wheel or its clone),
exit code 2 and no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.xdist_group("extras"), pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
CSV_ROWS = "record_id,doi_raw\n1,doi:10.1000/ABC\n2,https://doi.org/10.1000/abc\n3,not a doi\n"
#: Left out of the copy the wheel is built from: local state, never part of a release.
IGNORED = shutil.ignore_patterns(
    ".venv", ".git", "out", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
    ".mypy_cache", ".ruff_cache", ".hypothesis", "target", "dbt_packages", "logs", "*.so",
)


def _build_wheel(scratch: Path, env: dict[str, str] | None = None) -> Path:
    source = scratch / "src"
    shutil.copytree(ROOT, source, ignore=IGNORED)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(scratch), str(source)],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (built,) = scratch.glob("airflow_doi-*.whl")
    return built


def _install_blocks() -> tuple[str, str]:
    """The README's two install blocks (from a clone, from a wheel), as written."""
    from tests.test_readme_blocks import blocks

    clone, wheel = [text for heading, text in blocks("bash") if heading == "Install"]
    return clone, wheel


def _stranger_env() -> dict[str, str]:
    """A terminal's environment: no virtualenv active, this suite's venv off PATH."""
    ours = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != ours)
    return env


def _run_block(text: str, cwd: Path) -> None:
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=cwd,
                            env=_stranger_env(), capture_output=True, text=True, timeout=900,
                            check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.fixture(scope="module")
def installs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The README's Install section, run as written beside a copy of the working tree (the
    tree stays clean): its clone block makes ``.venv``; its wheel block, in a venv of its
    own, builds ``airflow-doi/dist/*.whl`` and installs it. Returns the wheel and both venvs."""
    folder = tmp_path_factory.mktemp("stranger")
    shutil.copytree(ROOT, folder / "airflow-doi", ignore=IGNORED)
    clone, wheel = _install_blocks()
    _run_block(clone, folder)
    _run_block("python3 -m venv wheel-venv && . wheel-venv/bin/activate\n" + wheel, folder)
    (built,) = (folder / "airflow-doi" / "dist").glob("airflow_doi-*.whl")
    return {"wheel": built, "clone": folder / ".venv", "from-wheel": folder / "wheel-venv"}


@pytest.fixture(scope="module")
def wheel(installs: dict[str, Path]) -> Path:
    """The project's wheel, built as the README says."""
    return installs["wheel"]


def _venv(root: Path, wheel: Path, extra: str) -> Path:
    """A fresh virtualenv holding the wheel with exactly one extra (or none).

    The wheel's metadata decides what is installed: uv resolves the same requirements as pip
    (the README's two install blocks above run pip as written), from the cache the bootstrap
    filled. Left out, as they test nothing of ours: the venv's own pip (no test runs pip
    inside these venvs) and byte-compiling (the commands compile what they import). The
    ``[pandas]`` venv on 2 cores, from a warm cache: pip with both 25.5 s of CPU, pip without
    them 3.0 s, uv 0.4 s (the module: 85 -> 71 s)."""
    venv = root / (extra or "base")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=300)
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    result = subprocess.run(
        [sys.executable, "-m", "uv", "pip", "install", "-q", "--python",
         str(venv / "bin" / "python"), target],
        capture_output=True, text=True, timeout=900, check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return venv


@pytest.fixture(scope="module")
def venvs(wheel: Path, installs: dict[str, Path],
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One venv per extra; ``resolve`` is the README's wheel install, ``clone`` its clone
    install (also ``[resolve]``)."""
    root = tmp_path_factory.mktemp("venvs")
    extras = ("", "pandas", "polars", "report")
    made = {extra or "base": _venv(root, wheel, extra) for extra in extras}
    return {**made, "resolve": installs["from-wheel"], "clone": installs["clone"]}


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "catalogue.csv").write_text(CSV_ROWS, encoding="utf-8")
    return tmp_path


def _env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["TERM"] = env.get("TERM") or "xterm"
    return env


def _run(venv: Path, command: str, cwd: Path, *, terminal: bool) -> subprocess.CompletedProcess:
    """Run ``command`` with the venv first on PATH, on a pseudo-terminal or through a pipe."""
    argv = (["script", "-qec", command, "/dev/null"] if terminal
            else ["bash", "-c", command])
    return subprocess.run(argv, cwd=cwd, env=_env(venv), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300, check=False)


def _assert_names_extra(result: subprocess.CompletedProcess, extra: str, source: Path) -> None:
    """Exit 2, no traceback, and the pip command that adds ``extra`` to this very install
    (made from ``source``, a wheel or a clone)."""
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert f"pip install '{source}[{extra}]'" in output, output
    assert "Traceback" not in output and "No module named" not in output, output


def test_the_readme_install_blocks_give_a_working_command(installs: dict[str, Path],
                                                          workdir: Path) -> None:
    """Both installs of the README's Install section, as written, give the command; a
    command whose extra the clone install lacks names that clone."""
    for venv in (installs["clone"], installs["from-wheel"]):
        version = _run(venv, "airflow-doi --version", workdir, terminal=False)
        assert version.returncode == 0 and version.stdout == "airflow-doi 0.1.0\n", version
    clone = installs["clone"].parent / "airflow-doi"
    report = _run(installs["clone"], "airflow-doi report catalogue.csv --column doi_raw "
                  "-o report.html", workdir, terminal=True)
    _assert_names_extra(report, "report", clone)


def test_the_wheel_carries_the_native_core(wheel: Path, venvs: dict[str, Path],
                                           workdir: Path) -> None:
    """pip compiled both native libraries (a C compiler is present here) into the wheel."""
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("airflow_doi/native/_core.") and n.endswith(".so")
               for n in names), names
    assert any(n.startswith("airflow_doi/native/_doi_duckdb.") and n.endswith(".so") for n in names)
    probe = "from airflow_doi.native import arrow; print(arrow.status())"
    result = _run(venvs["base"], f'python -c "{probe}"', workdir, terminal=False)
    assert result.stdout.startswith("native:"), result.stdout + result.stderr


def test_an_install_without_a_compiler_works_on_the_fallback(
    wheel: Path, venvs: dict[str, Path], workdir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A machine with no C compiler: pip install still succeeds, and the CLI gives the same
    file as the native install, on the pure-Arrow path, saying why when asked."""
    scratch = tmp_path_factory.mktemp("no-compiler")
    no_cc = {**os.environ, "CC": str(scratch / "no-such-cc"), "LDSHARED": str(scratch / "no-ld")}
    pure = _build_wheel(scratch, no_cc)
    assert not [n for n in zipfile.ZipFile(pure).namelist() if n.endswith(".so")]
    venv = _venv(scratch / "venvs", pure, "")
    command = "airflow-doi normalize catalogue.csv --column doi_raw --output {}.csv"
    fallback = _run(venv, command.format("fallback"), workdir, terminal=True)
    assert fallback.returncode == 0, fallback.stdout + fallback.stderr
    native = _run(venvs["base"], command.format("native"), workdir, terminal=False)
    assert native.returncode == 0, native.stdout + native.stderr
    assert (workdir / "fallback.csv").read_bytes() == (workdir / "native.csv").read_bytes()
    probe = "from airflow_doi.native import arrow; print(arrow.status())"
    status = _run(venv, f'python -c "{probe}"', workdir, terminal=False).stdout
    assert status.startswith("pure Arrow: the native core is not built"), status
    assert "C compiler" in status


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_base_install_normalizes(venvs: dict[str, Path], workdir: Path, terminal: bool) -> None:
    result = _run(venvs["base"], "airflow-doi normalize catalogue.csv --column doi_raw "
                  "--output out.csv", workdir, terminal=terminal)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = (workdir / "out.csv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4  # header + every input row
    assert "10.1000/ABC" in lines[1] and "10.1000/ABC" in lines[2]


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
@pytest.mark.parametrize(
    ("command", "extra"),
    [
        ("airflow-doi resolve catalogue.csv --column doi_raw --output r.csv"
         " --cache r-cache.sqlite", "resolve"),
        ("airflow-doi simulator --auto-records", "resolve"),
        ("airflow-doi sql generate --check", "sql"),
        ("airflow-doi report catalogue.csv --column doi_raw -o report.html", "report"),
    ],
    ids=["resolve", "simulator", "sql", "report"],
)
def test_base_install_names_the_missing_extra(
    venvs: dict[str, Path], wheel: Path, workdir: Path, command: str, extra: str, terminal: bool
) -> None:
    _assert_names_extra(_run(venvs["base"], command, workdir, terminal=terminal), extra, wheel)
    assert not (workdir / "r-cache.sqlite").exists()  # stopped before creating anything


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_base_install_prints_the_shipped_sql(venvs: dict[str, Path], workdir: Path,
                                             terminal: bool) -> None:
    """The generated SQL travels in the wheel: no checkout and no extra to get it."""
    result = _run(venvs["base"], "airflow-doi sql print postgres > doi.sql", workdir,
                  terminal=terminal)
    assert result.returncode == 0, result.stdout + result.stderr
    text = (workdir / "doi.sql").read_text(encoding="utf-8")
    assert text == (ROOT / "sql" / "postgres" / "doi_functions.sql").read_text(encoding="utf-8")


def test_base_install_ships_the_dbt_package_and_dbt_builds_from_it(
    venvs: dict[str, Path], workdir: Path
) -> None:
    """The README's install: the path ``airflow-doi sql dbt-package`` prints goes into a
    project's packages.yml, and dbt (here the dev venv's dbt-duckdb) builds a model with the
    macros and with the UDF resources from the installed files."""
    printed = {}
    for flag in ("", " --udfs"):
        result = _run(venvs["base"], f"airflow-doi sql dbt-package{flag}", workdir,
                      terminal=False)
        assert result.returncode == 0, result.stdout + result.stderr
        printed[flag] = Path(result.stdout.strip())
    package, udfs = printed[""], printed[" --udfs"]
    assert "site-packages" in str(package) and udfs == package / "udfs"
    assert (package / "dbt_project.yml").exists() and (package / "macros" / "doi.yml").exists()
    assert (udfs / "functions" / "schema.yml").exists()

    project = workdir / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: stranger\nversion: '1.0'\nconfig-version: 2\nprofile: stranger\n"
        "dispatch:\n  - macro_namespace: dbt\n"
        "    search_order: [stranger, dbt_doi_udfs, dbt]\n", encoding="utf-8")
    (project / "packages.yml").write_text(
        f"packages:\n  - local: {package}\n  - local: {udfs}\n", encoding="utf-8")
    (project / "profiles.yml").write_text(json.dumps({"stranger": {"target": "dev", "outputs": {
        "dev": {"type": "duckdb", "path": str(workdir / "w.duckdb")}}}}), encoding="utf-8")
    (project / "models" / "keys.sql").write_text(
        "select {{ dbt_doi.doi_key(\"'doi: 10.1000/abc'\") }} as inline_key,\n"
        "  {{ function('doi_key') }}('https://doi.org/10.1000/abc') as udf_key\n",
        encoding="utf-8")
    dbt = str(Path(sys.executable).with_name("dbt"))
    env = {**os.environ, "DBT_PROFILES_DIR": str(project),
           "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    for args in (["deps"], ["build"], ["show", "--select", "keys", "--output", "json"]):
        done = subprocess.run([dbt, *args, "--project-dir", str(project)], cwd=project, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout[-3000:]
    assert '"inline_key": "10.1000/ABC"' in done.stdout, done.stdout
    assert '"udf_key": "10.1000/ABC"' in done.stdout, done.stdout


def test_base_install_pandas_accessor_names_its_extra(venvs: dict[str, Path], wheel: Path,
                                                      workdir: Path) -> None:
    result = _run(venvs["base"], "python -c 'import airflow_doi.pandas'", workdir,
                  terminal=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"pip install '{wheel}[pandas]'" in output, output


def test_polars_extra_namespace(venvs: dict[str, Path], wheel: Path, workdir: Path) -> None:
    """[polars] installs what ``import airflow_doi.polars`` needs; a base install names it."""
    script = workdir / "frames.py"
    script.write_text(
        "import polars as pl\n"
        "import airflow_doi.polars  # registers .doi\n"
        "frame = pl.LazyFrame({'raw': ['doi:10.1000/ABC', 'https://doi.org/10.1000/abc', None]})\n"
        "print(frame.select(pl.col('raw').doi.key()).collect().to_series().to_list())\n",
        encoding="utf-8",
    )
    result = _run(venvs["polars"], "python frames.py", workdir, terminal=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == "['10.1000/ABC', '10.1000/ABC', None]"
    missing = _run(venvs["base"], "python -c 'import airflow_doi.polars'", workdir,
                   terminal=False)
    assert missing.returncode != 0
    assert f"pip install '{wheel}[polars]'" in missing.stdout + missing.stderr, missing.stderr


def test_base_install_imports_only_the_standard_library(venvs: dict[str, Path],
                                                        workdir: Path) -> None:
    probe = ("import sys, airflow_doi; "
             "print(airflow_doi.comparison_key('doi: 10.1000/straße')); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "{'pyarrow', 'numpy', 'pandas', 'aiohttp', 'airflow'}))")
    result = _run(venvs["base"], f'python -c "{probe}"', workdir, terminal=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["10.1000/STRAßE", "[]"]


def test_pandas_extra_accessor(venvs: dict[str, Path], workdir: Path) -> None:
    script = workdir / "accessor.py"
    script.write_text(
        "import json\n"
        "import pandas as pd\n"
        "import airflow_doi.pandas  # registers Series.doi\n"
        "s = pd.Series(['doi:10.1000/ABC', 'https://doi.org/10.1000/abc', 'n/a', None])\n"
        "report = s.doi.validate()\n"
        "print(json.dumps({'key': s.doi.key().tolist(), 'reason': report['reason'].tolist(),\n"
        "                  'url': s.doi.url().tolist()}, default=str))\n",
        encoding="utf-8",
    )
    for terminal in (True, False):
        result = _run(venvs["pandas"], "python accessor.py", workdir, terminal=terminal)
        assert result.returncode == 0, result.stdout + result.stderr
        answer = json.loads(result.stdout.strip().splitlines()[-1])
        assert answer["key"][:2] == ["10.1000/ABC", "10.1000/ABC"]
        assert answer["url"][0] == "https://doi.org/10.1000/ABC"
        assert answer["reason"][2] == "bad_directory"


@pytest.fixture()
def simulator(venvs: dict[str, Path], workdir: Path) -> Iterator[str]:
    """``airflow-doi simulator`` from the ``[resolve]`` venv, in its own process."""
    process = subprocess.Popen(
        ["airflow-doi", "simulator", "--auto-records"], cwd=workdir, env=_env(venvs["resolve"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.stderr.read() if process.stderr else ""
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_resolve_extra_resolves(venvs: dict[str, Path], workdir: Path, simulator: str,
                                terminal: bool) -> None:
    result = _run(venvs["resolve"], f"airflow-doi resolve catalogue.csv --column doi_raw "
                  f"--output r.csv --base-url {simulator} --rate 50", workdir, terminal=terminal)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    import csv

    with (workdir / "r.csv").open(encoding="utf-8", newline="") as handle:
        statuses = [row["status"] for row in csv.DictReader(handle)]
    assert statuses == ["resolved", "resolved", "invalid"]


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_resolve_extra_reads_the_data_files_as_the_readme_says(
        venvs: dict[str, Path], tmp_path: Path, terminal: bool) -> None:
    """A new user's --snapshot run, from the README, with only the [resolve] extra of a wheel
    built from the clone: on a terminal (its progress bar) and through a pipe."""
    from tests.test_readme_blocks import run_snapshot_block

    os.symlink(ROOT / "examples", tmp_path / "examples")
    run_snapshot_block(tmp_path, lambda line: _run(venvs["resolve"], line, tmp_path,
                                                   terminal=terminal))


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_report_extra_writes_the_page(venvs: dict[str, Path], workdir: Path,
                                      terminal: bool) -> None:
    result = _run(venvs["report"], "airflow-doi report catalogue.csv --column doi_raw "
                  "-o report.html", workdir, terminal=terminal)
    assert result.returncode == 0, result.stdout + result.stderr
    page = (workdir / "report.html").read_text(encoding="utf-8")
    assert "<svg" in page or "data:image/svg+xml" in page
    assert "10.1000/ABC" in page
