"""What people notice in their first hour (#34 item 8): a version, one line on Ctrl-C, a
mistyped output folder refused, numbers written alike in every summary, a first install that
says what it is doing, and a hostile sample cell explained."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_doi import __version__
from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked
from tests.conftest import ROOT


def cli(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return forked.run([sys.executable, "-m", "airflow_doi", *map(str, args)],
                      capture_output=True, text=True, timeout=300, cwd=cwd, check=False)


def test_version() -> None:
    done = cli("--version")
    assert done.returncode == 0 and done.stdout == f"airflow-doi {__version__}\n", done


@pytest.fixture(scope="module")
def proxy() -> ProxySimulator:
    with ProxySimulator(auto_records=True) as simulator:
        yield simulator


@pytest.mark.parametrize("command", ["normalize", "resolve", "enrich", "repair", "report"])
def test_a_missing_output_folder_is_refused_unless_mkdir(tmp_path: Path, proxy: ProxySimulator,
                                                         command: str) -> None:
    (tmp_path / "in.csv").write_text("id,doi\n1,10.1000/a\n", encoding="utf-8")
    target = Path("nodir") / "sub" / ("out.html" if command == "report" else "out.csv")
    extra = {"normalize": [], "repair": ["--no-verify"], "report": [],
             "resolve": ["--base-url", proxy.url, "--rate", "100"],
             "enrich": ["--base-url", proxy.url, "--rate", "100", "--agency-rate", "100",
                        "--metadata-host", ",".join(proxy.metadata_hosts)]}[command]
    args = [command, "in.csv", "--column", "doi", "-o", target, *extra]
    before = proxy.request_count + proxy.cn_requests
    refused = cli(*args, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr == (
        f"airflow-doi {command}: error: {target}: the folder nodir/sub does not exist; create "
        "it, correct the path, or pass --mkdir to have it created\n")
    assert not (tmp_path / "nodir").exists()
    assert proxy.request_count + proxy.cn_requests == before  # refused before any request
    made = cli(*args, "--mkdir", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / target).is_file()


def test_the_library_and_the_report_default_still_make_their_folder(tmp_path: Path) -> None:
    """Only the command line refuses: a task's normalize_file, and a report written to its
    default folder, create what they need."""
    from airflow_doi.files.jobs import normalize_file

    (tmp_path / "in.csv").write_text("doi\n10.1000/a\n", encoding="utf-8")
    target = tmp_path / "made" / "by" / "task.csv"
    summary, _, _ = normalize_file(tmp_path / "in.csv", target, column="doi")
    assert summary.rows == 1 and target.is_file()


def test_every_summary_writes_its_numbers_alike(tmp_path: Path, proxy: ProxySimulator) -> None:
    """2,000 rows, as normalize says them, in resolve's, enrich's and repair's summaries."""
    rows = "".join(f"{i},10.1000/{i % 3}\n" for i in range(2_000))
    (tmp_path / "in.csv").write_text("id,doi\n" + rows, encoding="utf-8")
    lines = {}
    for command, extra in [
        ("normalize", []), ("repair", ["--no-verify"]),
        ("resolve", ["--base-url", proxy.url, "--rate", "100"]),
        ("enrich", ["--base-url", proxy.url, "--rate", "100", "--agency-rate", "100",
                    "--metadata-host", ",".join(proxy.metadata_hosts)]),
    ]:
        done = cli(command, "in.csv", "--column", "doi", "-o", f"{command}.csv", *extra,
                   cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        lines[command] = done.stderr.splitlines()[0]
    assert lines["normalize"].endswith("normalize.csv: 2,000 rows: 2,000 valid, 0 not")
    assert lines["repair"].endswith("repair.csv: 2,000 rows, 0 with candidate repairs: 0 "
                                    "verified, 0 not found, 0 unchecked, 0 left alone (their "
                                    "own DOI exists); 0 requests in 0.0s, 0 retries, 0 cache "
                                    "hits")
    for command, status in (("resolve", "resolved"), ("enrich", "ok")):
        assert f"{command}.csv: 2,000 rows, 3 distinct keys: {status}=2,000 " in lines[command]
    for line in lines.values():  # no number of four digits or more without its comma
        assert not re.search(r"(?<![\d.,])\d{4,}(?![\d])", line.replace("2026", "")), line


def _interrupted_run(tmp_path: Path, args: list[str]) -> tuple[int, str]:
    """``airflow-doi ARGS`` in a process of its own, Ctrl-C once it has started requests."""
    child = subprocess.Popen([sys.executable, "-m", "airflow_doi", *args], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    return child.returncode, err


def test_ctrl_c_says_what_was_and_was_not_written(tmp_path: Path) -> None:
    rows = "".join(f"{i},10.1000/{i}\n" for i in range(200))
    (tmp_path / "in.csv").write_text("id,doi\n" + rows, encoding="utf-8")
    with ProxySimulator(auto_records=True, latency=0.2) as slow:
        code, err = _interrupted_run(tmp_path, [
            "resolve", "in.csv", "--column", "doi", "-o", "out.csv", "--base-url", slow.url,
            "--rate", "20", "--cache", "cache.sqlite"])
    assert code == 130, err
    assert err.splitlines()[-1] == (
        "airflow-doi resolve: interrupted (Ctrl-C): out.csv was not written (a file appears "
        "only once complete); the cache cache.sqlite keeps every answer already in, so "
        "running the same command again asks only for the rest")
    assert "Traceback" not in err
    assert not (tmp_path / "out.csv").exists()


def test_the_first_install_says_what_it_is_doing(tmp_path: Path) -> None:
    """scripts/bootstrap.sh on a fresh clone (here with a python that only records what it is
    asked, so the test takes seconds): each long step is announced before it starts."""
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", clone / "scripts")
    shutil.copy(ROOT / "pyproject.toml", clone)
    shutil.copytree(ROOT / "airflow_doi" / "native", clone / "airflow_doi" / "native",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    log = tmp_path / "calls.log"
    fake = tmp_path / "python3"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "python $*" >> {log}\n'
        'if [[ "$1 $2" == "-m venv" ]]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; fi\n'
        'if [[ "$1" == "--version" ]]; then echo "Python 3.11.2"; fi\n', encoding="utf-8")
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake)}
    done = subprocess.run(["bash", "scripts/bootstrap.sh", "all"], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()
    assert said[0] == "bootstrap: creating the virtualenv .venv (Python 3.11.2)"
    assert said[1].startswith("bootstrap: installing airflow-doi with the [all] extra into "
                              ".venv: Airflow, dbt, DuckDB, pandas... and the native core")
    assert "1 to 5 minutes" in said[1]
    assert said[2] == "bootstrap: installed"
    calls = log.read_text(encoding="utf-8").splitlines()
    # uv installs (pip when uv cannot), into the venv's own python, with the extra asked for
    assert any(call.startswith("python -m uv pip install --python .venv/bin/python ")
               and call.endswith(" -q -e .[all]") for call in calls), calls


def test_the_demo_explains_a_hostile_sample_cell() -> None:
    """The demo's tables show the sample's injection string as a key: a word says why."""
    import duckdb

    from airflow_doi.cli.demo import _query

    con = duckdb.connect()
    con.execute("create table r (doi_key varchar, status varchar)")
    con.execute("insert into r values ('10.1000/182', 'resolved'), "
                "('10.1000/1''; DELETE FROM CATALOGUE; --', 'resolved')")
    shown = _query(con, "select * from r order by doi_key")
    assert shown.splitlines()[-1] == (
        "  (10.1000/1'; DELETE FROM CATALOGUE; -- is a deliberately hostile cell of the sample: "
        "a valid DOI by the standard, kept as data; every value is bound as a parameter, never "
        "run as SQL or shown as markup)")
    plain = _query(con, "select * from r where doi_key = '10.1000/182'")
    assert "hostile" not in plain


def test_the_demo_on_an_install_without_its_extras_says_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new user's trial: ``airflow-doi demo`` from a ``[resolve]`` install said the previous
    demo's file could not be read (ModuleNotFoundError), or that ``airflow db migrate``
    failed. It now names what is missing and the command that installs it, exit 2, before
    touching anything."""
    import importlib.util

    from airflow_doi.cli import build_parser, demo

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("airflow", "dbt") else real(name, *a))
    out = tmp_path / "out"
    out.mkdir()
    (out / "catalogue.duckdb").write_bytes(b"someone's file")
    args = build_parser().parse_args(["demo", "--out", str(out)])
    assert demo.run(args) == 2
    err = capsys.readouterr().err
    assert "airflow, dbt are not installed" in err and "scripts/demo.sh" in err
    assert "pip install" in err and "[all]" in err
    assert (out / "catalogue.duckdb").read_bytes() == b"someone's file"
    assert sorted(p.name for p in out.iterdir()) == ["catalogue.duckdb"]


def _as_another_user(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``airflow-doi ARGS`` as a user who owns none of the test's files: root drops to nobody
    (``setpriv``); any other user already is one (a file of mode 000 is closed to it)."""
    command = [sys.executable, "-m", "airflow_doi", *args]
    if os.geteuid() == 0:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    env = {**os.environ, "HOME": str(cwd), "MPLCONFIGDIR": str(cwd / "mpl")}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_a_file_this_user_may_not_use_is_refused_in_one_line_with_exit_2() -> None:
    """Found by a new user as another account: an unreadable input and an output another
    user owns (in a sticky folder such as /tmp) gave ``[Errno 13] Permission denied`` with
    exit 1, the second naming our hidden temporary file."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="airflow-doi-perm-", dir="/tmp") as made:
        folder = Path(made)
        folder.chmod(0o777)
        closed = folder / "closed.csv"
        closed.write_text("doi\n10.1000/182\n", encoding="utf-8")
        closed.chmod(0o600 if os.geteuid() == 0 else 0o000)
        for command in ("normalize", "report"):
            out = folder / ("out.html" if command == "report" else "out.csv")
            done = _as_another_user([command, "closed.csv", "-o", str(out)], folder)
            assert done.returncode == 2, done.stderr
            assert done.stderr.splitlines()[-1] == (
                f"airflow-doi {command}: error: closed.csv: this user may not use it "
                "(Permission denied); change its permissions, or pass a file this user may "
                "read (an input) or write (an output)")
            assert "Traceback" not in done.stderr and not out.exists()
        if os.geteuid() != 0:
            return  # a file owned by another user takes root to make
        sticky = folder / "sticky"
        sticky.mkdir()
        sticky.chmod(0o1777)
        theirs = sticky / "theirs.csv"
        theirs.write_text("doi\nkept as it was\n", encoding="utf-8")
        theirs.chmod(0o666)  # writable, but in a sticky folder only its owner may replace it
        mine = folder / "in.csv"
        mine.write_text("doi\n10.1000/182\n", encoding="utf-8")
        mine.chmod(0o644)
        done = _as_another_user(["normalize", "in.csv", "-o", str(theirs)], folder)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines()[-1] == (
            f"airflow-doi normalize: error: {theirs}: cannot be replaced (Operation not "
            "permitted); the output was made but not put there, and the file was left as it "
            "was: pick another --output, or one this user may replace")
        assert theirs.read_text(encoding="utf-8") == "doi\nkept as it was\n"
        assert sorted(p.name for p in sticky.iterdir()) == ["theirs.csv"]  # no temporary left
