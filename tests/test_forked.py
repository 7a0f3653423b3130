"""The tests' fork server (tests/forked.py) runs a command as its exec'ed twin would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forked
from tests.conftest import ROOT

CLI = [sys.executable, "-m", "airflow_doi"]
SCRIPT = str(Path(sys.executable).with_name("airflow-doi"))
ROWS = "record_id;doi_raw\r\n1;doi:10.1000/ABC\r\n2;not a doi\r\n3;\r\n"


@pytest.mark.parametrize("argv", [
    [*CLI, "--version"],
    [*CLI, "normalize", "-", "--column", "doi_raw", "-o", "-"],
    [*CLI, "normalize", "-", "--column", "nope", "-o", "-"],
    [SCRIPT, "normalize", "-", "--colum", "doi_raw"],
    [SCRIPT, "sql", "print", "--dialect", "duckdb"],
])
def test_a_forked_command_answers_as_the_exec_ed_one(argv: list[str]) -> None:
    """Same exit status, same bytes on stdout and on stderr, stdin fed the same way."""
    data = ROWS.encode("cp1252")
    forked_run = forked.run(argv, input=data, cwd=ROOT, timeout=120)
    real = subprocess.run(argv, input=data, cwd=ROOT, capture_output=True, timeout=120,
                          check=False)
    assert (forked_run.returncode, forked_run.stdout, forked_run.stderr) == (
        real.returncode, real.stdout, real.stderr)
    assert forked_run.stdout or forked_run.stderr


def test_the_child_has_the_callers_directory_environment_umask_and_its_own_pid(
        tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("doi\n10.1000/x\n", encoding="utf-8")
    old = os.umask(0o077)
    try:
        first = forked.run([*CLI, "normalize", "in.csv", "-o", "out.csv"], cwd=tmp_path,
                           env={**os.environ, "AIRFLOW_DOI_NATIVE": "0"}, text=True)
    finally:
        os.umask(old)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "out.csv").stat().st_mode & 0o777 == 0o600
    code = "import os, sys, json; print(json.dumps([os.getpid(), os.getcwd(), sys.argv, " \
           "os.environ.get('X_SEEN')]))  # airflow_doi.provider"
    pids = set()
    for value in ("a", "b"):
        done = forked.run([sys.executable, "-c", code, "arg"], cwd=tmp_path, text=True,
                          env={**os.environ, "X_SEEN": value})
        assert done.returncode == 0, done.stderr
        pid, cwd, argv, seen = __import__("json").loads(done.stdout)
        assert (cwd, argv, seen) == (str(tmp_path), ["-c", "arg"], value)
        pids.add(pid)
    assert len(pids) == 2 and os.getpid() not in pids


def test_exit_codes_exceptions_and_text_mode_are_a_processes() -> None:
    code = ("import sys; print('out\\r\\nline'); sys.stderr.write('é'); sys.exit(%s)"
            "  # airflow_doi.provider")
    for status, expected in (("0", 0), ("3", 3), ("'words'", 1), ("None", 0)):
        done = forked.run([sys.executable, "-c", code % status], text=True)
        assert done.returncode == expected
        assert done.stdout == "out\nline\n"
        assert done.stderr.startswith("é")
    raised = forked.run([sys.executable, "-c", "raise ValueError('x')  # airflow_doi.provider"],
                        text=True)
    assert raised.returncode == 1 and "ValueError: x" in raised.stderr
    assert "Traceback" in raised.stderr


def test_a_command_past_its_timeout_is_killed() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        forked.run([sys.executable, "-c", "import time; time.sleep(60)  # airflow_doi.provider"],
                   timeout=1)


def test_another_program_runs_as_a_real_subprocess() -> None:
    done = forked.run(["sh", "-c", "echo $$; exit 4"], text=True)
    assert done.returncode == 4 and int(done.stdout) != os.getpid()


def test_a_started_command_is_polled_killed_and_its_group_signalled() -> None:
    """forked.popen: poll() while it runs, SIGKILL to its pid or (new session) its group, and
    the status a killed process has; stderr merged into stdout when asked."""
    sleeper = "import sys, time; print('up', flush=True); time.sleep(60)  # airflow_doi.provider"
    running = forked.popen([sys.executable, "-c", sleeper], text=True)
    assert isinstance(running, forked.Popen) and running.poll() is None
    running.kill()
    assert running.wait(30) == -signal.SIGKILL
    out, err = running.communicate(5)  # killed before or after its print: both are fine
    assert out in ("", "up\n") and err == ""
    leader = forked.popen([sys.executable, "-c", sleeper], start_new_session=True)
    assert os.getpgid(leader.pid) == leader.pid != os.getpgid(0)
    os.killpg(leader.pid, signal.SIGKILL)
    assert leader.wait(30) == -signal.SIGKILL
    both = forked.popen([sys.executable, "-c", "import sys; print('o', flush=True); "
                         "print('e', file=sys.stderr)  # airflow_doi.provider"],
                        text=True, merged=True)
    assert both.communicate(30) == ("o\ne\n", None) and both.returncode == 0
    real = forked.popen(["sh", "-c", "echo o; echo e >&2; exit 3"], text=True)
    assert isinstance(real, subprocess.Popen)
    assert real.communicate(30) == ("o\n", "e\n") and real.returncode == 3


def test_a_different_tmpdir_or_timezone_is_the_childs_own(tmp_path: Path) -> None:
    code = ("import tempfile, time; print(tempfile.gettempdir(), time.tzname[0])"
            "  # airflow_doi.provider")
    for folder, zone in ((tmp_path / "a", "UTC"), (tmp_path / "b", "EST5EDT")):
        folder.mkdir()
        done = forked.run([sys.executable, "-c", code], text=True,
                          env={**os.environ, "TMPDIR": str(folder), "TZ": zone})
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [str(folder), zone[:3]]
