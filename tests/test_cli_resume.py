"""An interrupted ``resolve``, ``enrich`` or ``repair`` loses no answer it paid for (#41 item 9).

By default each command keeps its answers in the user's cache directory, one file per proxy
(``$AIRFLOW_DOI_CACHE_DIR/answers/127.0.0.1_PORT_DIGEST.sqlite``): a run stopped by Ctrl-C
says where they are, and the same command started again asks the proxy only for the keys the
first run had not answered. ``--no-cache`` keeps nothing; ``--cache FILE`` names the file, as
before. The conftest gives every test a cache directory of its own, which the subprocesses inherit.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked

KEYS = 60
FAST = ["--column", "ref", "--backoff-base", "0.05", "--timeout", "5", "--no-progress"]


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return forked.run([sys.executable, "-m", "airflow_doi", *map(str, args)],
                      capture_output=True, text=True, timeout=300, cwd=cwd, check=False)


def default_cache(proxy: ProxySimulator) -> Path:
    """Where the commands keep the simulator's answers by default: the user's cache
    directory's ``answers`` folder, a file named after the host, port and a digest of the
    scheme and path."""
    from airflow_doi.cli._proxy import default_cache as chosen

    path = chosen(proxy.url)
    assert path.parent == Path(os.environ["AIRFLOW_DOI_CACHE_DIR"]) / "answers"
    assert path.name.startswith(f"127.0.0.1_{proxy.port}_") and path.suffix == ".sqlite"
    return path


def stored(path: Path, table: str) -> set[str]:
    """The keys a cache file holds in ``table`` (``answers``: resolve and repair;
    ``metadata``: enrich); none while the file or the table is not there yet."""
    if not path.exists():
        return set()
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as conn:
            return {key for (key,) in conn.execute(f"select key from {table}")}
    except sqlite3.OperationalError:  # the run has not made the table yet
        return set()


def interrupted(args: list[str], cwd: Path, done: Callable[[], bool]) -> tuple[int, str]:
    """``airflow-doi ARGS`` in a process of its own, Ctrl-C as soon as ``done()``."""
    child = subprocess.Popen([sys.executable, "-m", "airflow_doi", *args], cwd=cwd,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not done():
            assert child.poll() is None, child.communicate()[1]
            assert time.monotonic() < deadline, "the run kept no answer in a minute"
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, err


def write_dois(folder: Path, cell: Callable[[int], str] = "10.1000/resume.{}".format,
               count: int = KEYS) -> Path:
    source = folder / "in.csv"
    source.write_text("ref\n" + "".join(f"{cell(n)}\n" for n in range(count)),
                      encoding="utf-8")
    return source


def assert_resumed(code: int, err: str, command: str, cache: Path, before: set[str],
                   asked_again: set[str], everything: set[str]) -> None:
    """The Ctrl-C line names the cache and says how to go on; the run started again asked
    for exactly the keys the first had not answered."""
    assert code == 130, err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"airflow-doi {command}: interrupted (Ctrl-C): out.csv was not written (a file "
        f"appears only once complete); the cache {cache} keeps every answer already in, so "
        "running the same command again asks only for the rest")
    assert 0 < len(before) < len(everything), "interrupted before its first answer or after"
    assert asked_again == everything - before


@pytest.fixture()
def slow_proxy() -> ProxySimulator:
    with ProxySimulator(auto_records=True, latency=0.1) as proxy:
        yield proxy


def test_an_interrupted_resolve_goes_on_where_it_stopped(tmp_path: Path,
                                                          slow_proxy: ProxySimulator) -> None:
    write_dois(tmp_path)
    cache = default_cache(slow_proxy)
    args = ["resolve", "in.csv", "-o", "out.csv", "--base-url", slow_proxy.url, "--rate", "15",
            "--concurrency", "2", *FAST]
    code, err = interrupted(args, tmp_path, lambda: len(stored(cache, "answers")) >= 10)
    before = stored(cache, "answers")
    everything = {f"10.1000/RESUME.{n}" for n in range(KEYS)}
    slow_proxy.reset_counts()
    again = cli(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert_resumed(code, err, "resolve", cache, before, set(slow_proxy.requests_by_key),
                   everything)
    assert max(slow_proxy.requests_by_key.values()) == 1
    assert stored(cache, "answers") == everything
    # Created by the first run, which the Ctrl-C line named: the second says nothing of it.
    assert "note: the answers" not in again.stderr


def test_the_first_run_says_where_it_keeps_the_answers(tmp_path: Path) -> None:
    write_dois(tmp_path)
    with ProxySimulator(auto_records=True) as proxy:
        cache = default_cache(proxy)
        args = ["resolve", "in.csv", "-o", "out.csv", "--base-url", proxy.url, "--rate", "200",
                *FAST]
        first = cli(*args, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert first.stderr.splitlines()[-1] == (
            f"airflow-doi resolve: note: the answers are kept in {cache} (created now): a "
            "run started again asks only for what is missing or expired (--cache FILE "
            "chooses the file, --no-cache keeps none)")
        assert len(stored(cache, "answers")) == KEYS
        assert proxy.request_count == KEYS
        proxy.reset_counts()
        second = cli(*args, cwd=tmp_path)
        assert second.returncode == 0, second.stderr
        assert proxy.request_count == 0 and "note:" not in second.stderr
        assert f"{KEYS} cache hits" in second.stderr


def test_no_cache_keeps_nothing(tmp_path: Path) -> None:
    write_dois(tmp_path)
    with ProxySimulator(auto_records=True) as proxy:
        args = ["resolve", "in.csv", "-o", "out.csv", "--base-url", proxy.url, "--rate", "200",
                "--no-cache", *FAST]
        for _ in range(2):
            proxy.reset_counts()
            done = cli(*args, cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            assert proxy.request_count == KEYS  # asked again: nothing was kept
            assert "note:" not in done.stderr
    assert not (Path(os.environ["AIRFLOW_DOI_CACHE_DIR"]) / "answers").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.csv"]
    refused = cli("resolve", "in.csv", "-o", "out.csv", "--cache", "c.sqlite", "--no-cache",
                  cwd=tmp_path)
    assert refused.returncode == 2
    assert "--no-cache: not allowed with argument --cache" in refused.stderr


def test_an_explicit_cache_is_used_and_the_default_left_alone(tmp_path: Path) -> None:
    write_dois(tmp_path)
    with ProxySimulator(auto_records=True) as proxy:
        done = cli("resolve", "in.csv", "-o", "out.csv", "--base-url", proxy.url, "--rate",
                   "200", "--cache", "mine.sqlite", *FAST, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert len(stored(tmp_path / "mine.sqlite", "answers")) == KEYS
        assert not default_cache(proxy).exists() and "note:" not in done.stderr


def test_an_interrupted_enrich_goes_on_where_it_stopped(tmp_path: Path) -> None:
    write_dois(tmp_path)
    with ProxySimulator(auto_records=True, latency=0.1) as proxy:
        cache = default_cache(proxy)
        args = ["enrich", "in.csv", "-o", "out.csv", "--base-url", proxy.url, "--source",
                "negotiation", "--rate", "15", "--agency-rate", "15", "--concurrency", "2",
                "--metadata-host", ",".join(proxy.metadata_hosts), *FAST]
        code, err = interrupted(args, tmp_path, lambda: len(stored(cache, "metadata")) >= 10)
        before = stored(cache, "metadata")
        proxy.reset_counts()
        again = cli(*args, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        everything = {f"10.1000/RESUME.{n}" for n in range(KEYS)}
        assert_resumed(code, err, "enrich", cache, before, set(proxy.cn_by_key), everything)
        assert stored(cache, "metadata") == everything


def test_an_interrupted_repair_goes_on_where_it_stopped(tmp_path: Path,
                                                         slow_proxy: ProxySimulator) -> None:
    # A trailing full stop: a DOI of its own (the proxy is asked whether it exists), and a
    # candidate repair without it.
    write_dois(tmp_path, "10.1000/resume.{}.".format)
    cache = default_cache(slow_proxy)
    args = ["repair", "in.csv", "-o", "out.csv", "--base-url", slow_proxy.url, "--rate", "15",
            "--concurrency", "2", *FAST]
    code, err = interrupted(args, tmp_path, lambda: len(stored(cache, "answers")) >= 10)
    before = stored(cache, "answers")
    slow_proxy.reset_counts()
    again = cli(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    everything = {f"10.1000/RESUME.{n}." for n in range(KEYS)}  # each own DOI exists
    assert_resumed(code, err, "repair", cache, before, set(slow_proxy.requests_by_key),
                   everything)
    assert stored(cache, "answers") == everything


def test_a_cache_directory_that_cannot_be_made_is_a_warning_not_a_refusal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache directory would go\n", encoding="utf-8")
    monkeypatch.setenv("AIRFLOW_DOI_CACHE_DIR", str(blocked))
    write_dois(tmp_path)
    with ProxySimulator(auto_records=True) as proxy:
        done = cli("resolve", "in.csv", "-o", "out.csv", "--base-url", proxy.url, "--rate",
                   "200", *FAST, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert proxy.request_count == KEYS
    warning = done.stderr.splitlines()[0]
    assert warning.startswith(
        f"airflow-doi resolve: warning: cannot keep the answers in {default_cache(proxy)} (")
    assert str(default_cache(proxy)).startswith(f"{blocked}/answers/")
    assert warning.endswith("this run keeps none; --cache FILE names a file that can be "
                            "written, --no-cache says none is wanted")
    assert "note:" not in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_with_no_cache_says_nothing_was_kept(tmp_path: Path,
                                                    slow_proxy: ProxySimulator) -> None:
    write_dois(tmp_path)
    args = ["resolve", "in.csv", "-o", "out.csv", "--base-url", slow_proxy.url, "--rate", "15",
            "--no-cache", *FAST]
    code, err = interrupted(args, tmp_path, lambda: slow_proxy.request_count >= 10)
    assert code == 130, err
    assert err.splitlines()[-1] == (
        "airflow-doi resolve: interrupted (Ctrl-C): out.csv was not written (a file appears "
        "only once complete); with --no-cache no answer was kept: running it again asks for "
        "every DOI (without --no-cache the answers are kept for a run started again)")
    assert not (Path(os.environ["AIRFLOW_DOI_CACHE_DIR"]) / "answers").exists()


def test_the_default_cache_is_named_after_the_proxy_alone(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_doi.cli._proxy import default_cache

    folder = Path(os.environ["AIRFLOW_DOI_CACHE_DIR"]) / "answers"
    assert default_cache("https://doi.org") == folder / "doi.org.sqlite"
    assert default_cache("https://doi.org/") == folder / "doi.org.sqlite"
    local = default_cache("http://127.0.0.1:8080/")
    assert local.parent == folder and local.name.startswith("127.0.0.1_8080_")
    # Review: two proxies on one host (another scheme, another path) never share a file.
    assert len({default_cache("https://proxy.corp/a/"), default_cache("https://proxy.corp/b/"),
                default_cache("http://proxy.corp/a/"), default_cache("https://proxy.corp")}) == 4
    secret = default_cache("https://user:secret@Proxy.Example.org:8443/api")
    assert secret.name.startswith("proxy.example.org_8443_") and "secret" not in str(secret)
    assert default_cache("http://[::1]:8080").name.startswith("__1_8080_")
    # Review: AIRFLOW_DOI_CACHE_DIR moves every cache (the answers and the DuckDB build).
    monkeypatch.delenv("AIRFLOW_DOI_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache("https://doi.org") == tmp_path / "airflow-doi/answers/doi.org.sqlite"


def test_the_default_cache_is_the_users_alone(tmp_path: Path) -> None:
    """Review: the answers name every DOI the user asked about; the folder and file are the
    user's alone (0700, 0600), whoever made the cache directory above them."""
    write_dois(tmp_path)
    with ProxySimulator(auto_records=True) as proxy:
        done = cli("resolve", "in.csv", "-o", "out.csv", "--base-url", proxy.url, "--rate",
                   "200", *FAST, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        cache = default_cache(proxy)
    assert cache.stat().st_mode & 0o777 == 0o600
    assert cache.parent.stat().st_mode & 0o777 == 0o700


def test_the_advice_to_run_again_says_what_is_sent_again() -> None:
    from argparse import Namespace

    from airflow_doi.cli._proxy import sent_again

    assert sent_again(Namespace(cache=Path("c.sqlite"), no_cache=False), "the failed rows") == (
        "the cache c.sqlite keeps the other answers: only the failed rows are sent again")
    assert sent_again(Namespace(cache=None, no_cache=True), "the failed rows") == (
        "everything is sent again: --no-cache kept no answer; without it only the failed rows "
        "would be")
    assert sent_again(Namespace(cache=None, no_cache=False), "the undecided DOIs") == (
        "everything is sent again: no cache kept the answers; with --cache FILE only the "
        "undecided DOIs would be")


#: Keys for a Which RA? phase long enough to stop in: 20 requests of 50 DOIs, 5 a second.
WHICH_RA_KEYS = 1000


@pytest.mark.parametrize("command", ["enrich", "resolve"])
def test_a_run_stopped_during_which_ra_keeps_the_agencies_it_was_told(
        tmp_path: Path, command: str) -> None:
    """Which RA? answers 50 DOIs a request; a million keys are 20,000 requests, hours at the
    proxy's pace. A run stopped among them keeps each answered request's agencies, and the run
    started again asks Which RA? only about the other keys (enrich by default; resolve with
    --existence-first)."""
    write_dois(tmp_path, count=WHICH_RA_KEYS)
    with ProxySimulator(auto_records=True, latency=0.05) as proxy:
        cache = default_cache(proxy)
        if command == "enrich":
            args = ["enrich", "in.csv", "-o", "out.csv", "--base-url", proxy.url,
                    "--metadata-host", ",".join(proxy.metadata_hosts), "--crossref-url",
                    proxy.crossref_url, "--datacite-url", proxy.datacite_url,
                    "--agency-rate", "200", "--list-rate", "50"]
        else:
            args = ["resolve", "in.csv", "-o", "out.csv", "--base-url", proxy.url,
                    "--existence-first"]
        args += ["--rate", "5", "--concurrency", "1", *FAST]
        code, err = interrupted(args, tmp_path, lambda: len(stored(cache, "agencies")) >= 50)
        kept = stored(cache, "agencies")
        asked_first = set(proxy.which_ra_by_key)
        proxy.reset_counts()
        again = cli(*[a if a != "5" else "200" for a in args], cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        asked_again = set(proxy.which_ra_by_key)
    everything = {f"10.1000/RESUME.{n}" for n in range(WHICH_RA_KEYS)}
    assert code == 130 and "Traceback" not in err, err
    assert "keeps every answer already in" in err.splitlines()[-1]
    assert 50 <= len(kept) < len(everything), "stopped after its Which RA? phase"
    assert kept <= asked_first
    assert asked_again == everything - kept
    assert stored(cache, "agencies") == everything
    if command == "enrich":
        requests = len(asked_again) // 50 + bool(len(asked_again) % 50)
        assert (f"Which RA? {requests:,} requests ({len(kept):,} agencies from the cache)"
                in again.stderr), again.stderr
        assert stored(cache, "metadata") == everything
    else:
        assert stored(cache, "answers") == everything
