"""``airflow-doi resolve`` as a stranger runs it: a dead proxy is loud (log lines, exit 3), the
summary agrees with the rows, a missing extra names itself, and every ``--help`` is plain.
"""

from __future__ import annotations

import io
import json
import logging
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from airflow_doi.cli import EXTRAS, build_parser, main, missing_extra_message
from airflow_doi.resolver.simulator import ProxySimulator, make_records
from tests import forked
from tests.conftest import ROOT, read_output_csv

FAST = ["--rate", "200", "--backoff-base", "0.01", "--timeout", "2"]


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return forked.run(
        [sys.executable, "-m", "airflow_doi", *map(str, args)],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )


def read_csv(path: Path) -> list[dict[str, str]]:
    return read_output_csv(path)


def dead_port() -> int:
    """A loopback port where nothing listens (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture()
def dois(tmp_path: Path) -> Path:
    source = tmp_path / "in.csv"
    source.write_text("doi\n" + "".join(f"10.1000/d{i}\n" for i in range(6)) + "not a doi\n")
    return source


def summary_number(stderr: str, name: str) -> int:
    singular = {"retries": "retry", "requests": "request", "rows": "row"}.get(name, name)
    match = re.search(rf"(\d+) (?:{name}|{singular})\b", stderr)
    assert match, stderr
    return int(match.group(1))


def retries_in_rows(rows: list[dict[str, str]]) -> int:
    """Retries the rows account for: each distinct key's attempts after its first."""
    attempts = {row["key"]: int(row["attempts"]) for row in rows if row["key"]}
    return sum(max(count - 1, 0) for count in attempts.values())


@pytest.mark.parametrize("command", ["resolve", "enrich", "repair"])
def test_a_proxy_never_there_stops_within_seconds_naming_it(
        tmp_path: Path, command: str) -> None:
    """Issue 34: with every request refused, resolve exited 3 after 121 s (the default
    --breaker-give-up). Nothing ever answered: it stops within seconds and says where."""
    source = tmp_path / "in.csv"
    # Damaged cells, so that repair has its own DOIs and candidates to check.
    source.write_text("doi\n" + "".join(f"10.1000/d{i}.\n" for i in range(6)))
    base = f"http://127.0.0.1:{dead_port()}"
    started = time.monotonic()
    run = cli(command, source, "--column", "doi", "-o", tmp_path / "out.csv",
              "--base-url", base)  # the default --breaker-give-up: 120 s
    elapsed = time.monotonic() - started
    assert run.returncode == 3, run.stderr
    assert elapsed < 30, elapsed
    [line] = [line for line in run.stderr.splitlines() if ": error: nothing at " in line]
    assert line.startswith(f"airflow-doi {command}: error: nothing at {base} answered "
                           f"(could not connect to {base}/ (connection refused)): stopped after ")
    assert "instead of waiting --breaker-give-up (120s)" in line and "check --base-url" in line
    assert "Traceback" not in run.stderr
    assert (tmp_path / "out.csv").exists()  # every row written, as before
    # Said once: not again as the breaker's warning, nor as the share of rows in error.
    said = [said for said in run.stderr.splitlines()
            if ": error: " in said or ": warning: " in said]
    assert said == [line], run.stderr


def test_a_simulator_killed_mid_run_keeps_the_bounded_wait(tmp_path: Path) -> None:
    """A proxy that answered and then died is waited for --breaker-give-up, as before: the
    rows answered are kept, the others end as error; no word of a proxy never there."""
    simulator = subprocess.Popen(
        [sys.executable, "-m", "airflow_doi", "simulator", "--auto-records", "--latency",
         "0.02"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    try:
        assert simulator.stdout is not None
        url = simulator.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        source = tmp_path / "in.csv"
        source.write_text("doi\n" + "".join(f"10.1000/k{i}\n" for i in range(200)))
        started = time.monotonic()
        run = subprocess.Popen(
            [sys.executable, "-m", "airflow_doi", "resolve", str(source), "-o",
             str(tmp_path / "out.csv"), "--base-url", url, "--rate", "40",
             "--breaker-give-up", "3", "--backoff-base", "0.05", "--timeout", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        time.sleep(3.0)  # a few dozen answers in
        simulator.kill()
        killed = time.monotonic()
        _, stderr = run.communicate(timeout=120)
        ended = time.monotonic()
    finally:
        simulator.kill()
        simulator.wait()
    assert run.returncode == 3, stderr
    statuses = [row["status"] for row in read_csv(tmp_path / "out.csv")]
    assert 0 < statuses.count("resolved") < 200
    assert statuses.count("resolved") + statuses.count("error") == 200
    assert "kept failing for" in stderr and "never answered" not in stderr
    assert "error: nothing at" not in stderr
    assert 3.0 <= ended - killed < 3.0 + 2 * 2 + 10, (ended - killed, ended - started)


def test_a_dead_proxy_is_loud_and_exits_3(tmp_path: Path, dois: Path) -> None:
    target = tmp_path / "out.csv"
    run = cli("resolve", dois, "-o", target, "--base-url", f"http://127.0.0.1:{dead_port()}",
              "--breaker-give-up", "2", *FAST)
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr
    rows = read_csv(target)  # the output is still written, one row per input row
    assert [r["status"] for r in rows] == ["error"] * 6 + ["invalid"]
    # A proxy never there is one error line in our words (not the breaker's warning, not
    # "6 of 6 rows sent ended in status=error" as well), then the summary.
    lines = run.stderr.splitlines()
    said = [line for line in lines if ": error: " in line or ": warning: " in line]
    assert len(said) == 1 and said[0].startswith("airflow-doi resolve: error: nothing at ")
    assert all(line.startswith("airflow-doi resolve: ") for line in lines), run.stderr
    assert summary_number(run.stderr, "retries") == retries_in_rows(rows)


@pytest.mark.parametrize("command", ["resolve", "repair"])
def test_a_bad_cache_or_a_dead_redis_is_an_input_error_before_any_request(
        tmp_path: Path, dois: Path, command: str) -> None:
    """Found in a new-user trial: a cache path that cannot be opened printed sqlite's own
    words with exit 1, and a dead Redis made every row an error blamed on the proxy."""
    with ProxySimulator(make_records(["10.1000/d0"])) as sim:
        base = [command, dois, "--column", "doi", "-o", tmp_path / "out.csv",
                "--base-url", sim.url, *FAST]
        cases = [
            (["--cache", tmp_path / "no" / "such" / "c.sqlite"], "--cache", "cannot be used"),
            (["--cache", dois], "--cache", "cannot be used as the cache"),
            (["--redis-url", f"redis://127.0.0.1:{dead_port()}/0"], "--redis-url",
             "Redis cannot be reached"),
        ]
        for options, option, words in cases:
            run = cli(*base, *options)
            assert run.returncode == 2, run.stderr
            assert f"airflow-doi {command}: error: {option} " in run.stderr, run.stderr
            assert words in run.stderr and "Traceback" not in run.stderr
        assert sim.request_count == 0
    assert not (tmp_path / "out.csv").exists()
    assert dois.read_text().startswith("doi\n")  # the file given as a cache is untouched


def test_max_error_share_one_accepts_any_failure(tmp_path: Path, dois: Path) -> None:
    run = cli("resolve", dois, "-o", tmp_path / "out.csv", "--base-url",
              f"http://127.0.0.1:{dead_port()}", "--breaker-give-up", "1",
              "--max-error-share", "1", *FAST)
    assert run.returncode == 0, run.stderr
    assert "error=6" in run.stderr


@pytest.mark.parametrize("share", ["-0.1", "1.5", "half"])
def test_max_error_share_must_be_a_share(tmp_path: Path, dois: Path, share: str) -> None:
    run = cli("resolve", dois, "-o", tmp_path / "o.csv", "--max-error-share", share)
    assert run.returncode == 2 and "is not a share between 0 and 1" in run.stderr


def test_summary_retries_agree_with_rows_against_the_simulator(
    tmp_path: Path, dois: Path
) -> None:
    target = tmp_path / "out.csv"
    with ProxySimulator(auto_records=True, faults={"error_every": 2}) as simulator:
        run = cli("resolve", dois, "-o", target, "--base-url", simulator.url, *FAST)
        served = simulator.request_count
    assert run.returncode == 0, run.stderr
    rows = read_csv(target)
    assert [r["status"] for r in rows] == ["resolved"] * 6 + ["invalid"]
    retries = summary_number(run.stderr, "retries")
    assert retries == retries_in_rows(rows) > 0
    assert summary_number(run.stderr, "requests") == served == 6 + retries


def test_log_lines_are_one_line_each_in_our_format() -> None:
    from airflow_doi.cli import _log_to_stderr

    captured, hosts = io.StringIO(), io.StringIO()
    host = logging.StreamHandler(hosts)  # a host program's root handler (Airflow has one)
    logging.getLogger().addHandler(host)
    try:
        with redirect_stderr(captured), _log_to_stderr("resolve"):
            logging.getLogger("airflow_doi.resolver.breaker").warning("proxy failing:\n%s",
                                                                      "boom")
            logging.getLogger("airflow_doi.resolver").info("not shown")
    finally:
        logging.getLogger().removeHandler(host)
    assert captured.getvalue() == "airflow-doi resolve: warning: proxy failing: boom\n"
    assert hosts.getvalue() == ""  # once, in our format, not again through the root
    assert not logging.getLogger("airflow_doi").handlers  # removed when the command ends
    assert logging.getLogger("airflow_doi").propagate


@pytest.mark.parametrize(("module", "command", "extra"), [
    ("redis", ["resolve", "in.csv", "-o", "o.csv"], "resolve"),
    ("tqdm", ["resolve", "in.csv", "-o", "o.csv"], "resolve"),
    ("aiohttp", ["enrich", "in.csv", "-o", "o.csv"], "resolve"),
    ("tqdm", ["enrich", "in.csv", "-o", "o.csv"], "resolve"),
    ("aiohttp", ["simulator"], "resolve"),
    ("sqlglot", ["sql", "generate", "--check"], "sql"),
])
def test_a_missing_extra_names_the_extra(
    tmp_path: Path, module: str, command: list[str], extra: str
) -> None:
    """The module is made unimportable the way Python marks one (sys.modules[name] = None)."""
    (tmp_path / "in.csv").write_text("doi\n10.1000/a\n")
    probe = (f"import sys; sys.modules[{module!r}] = None; "
             "from airflow_doi.cli import main; sys.exit(main(sys.argv[1:]))")
    # tqdm is only needed for the bar: pretend to be on a terminal through --no-progress's
    # absence and a terminal check that says yes.
    if module == "tqdm":
        probe = probe.replace("from airflow_doi", "sys.stderr.isatty = lambda: True; "
                              "from airflow_doi")
    run = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert f"pip install -e '{ROOT}[{extra}]'" in run.stderr  # this very install's clone
    assert "Traceback" not in run.stderr and "No module named" not in run.stderr


def test_every_extra_message_names_an_install() -> None:
    for module, extra in EXTRAS.items():
        message = missing_extra_message(f"{module}.sub")
        assert (f"{ROOT}[{extra}]'" if extra else f"--force-reinstall -e {ROOT}") in message


def _parsers() -> list[tuple[str, object]]:
    """Every (sub)command's parser, by its command line."""
    found: list[tuple[str, object]] = []

    def walk(prefix: str, parser: object) -> None:
        found.append((prefix, parser))
        for action in parser._actions:  # type: ignore[attr-defined]
            choices = getattr(action, "choices", None)
            if isinstance(choices, dict):
                for name, child in choices.items():
                    walk(f"{prefix} {name}", child)

    walk("airflow-doi", build_parser())
    return found


def test_every_help_is_plain_and_every_option_has_help() -> None:
    parsers = _parsers()
    assert {name for name, _ in parsers} >= {
        "airflow-doi normalize", "airflow-doi resolve", "airflow-doi simulator",
        "airflow-doi sql generate", "airflow-doi demo",
    }
    for name, parser in parsers:
        text = parser.format_help()  # type: ignore[attr-defined]
        assert "`" not in text, name
        assert not re.search(r":[a-z]+:`|:data:|:func:|:mod:", text), name
        for action in parser._actions:  # type: ignore[attr-defined]
            assert action.help, f"{name} {action.option_strings or action.dest}: no help"
            shown = action.default not in (None, False, [], "==SUPPRESS==")
            if action.option_strings and shown:
                assert "default" in parser._get_formatter()._get_help_string(action), (
                    name, action.option_strings,
                )


def test_help_runs_for_every_subcommand() -> None:
    for name, _ in _parsers():
        argv = name.split()[1:]
        captured = io.StringIO()
        with redirect_stderr(captured), pytest.raises(SystemExit) as stop:
            from contextlib import redirect_stdout

            with redirect_stdout(captured):
                main([*argv, "--help"])
        assert stop.value.code == 0, name
        assert "`" not in captured.getvalue()


@pytest.mark.parametrize(("content", "words"), [
    (None, "No such file or directory"),
    (b"id;doi\r\n1;caf\xe9\r\n", "not UTF-8 text"),
    (b"[1, 2]", "item 1, 1, is not a DOI (not text)"),
    (b"# ours\n10.1000/a\n\nid;doi\n", "line 4, 'id;doi', is not a DOI (bad_directory)"),
    (b"# nothing yet\n", "holds no DOI"),
    (b'{"10.1000/a": [', "starts like JSON but is not JSON"),
])
def test_simulator_records_that_cannot_be_used_exit_2_naming_the_file(
        tmp_path: Path, content: bytes | None, words: str) -> None:
    path = tmp_path / "records.json"
    if content is not None:
        path.write_bytes(content)
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["simulator", "--records", str(path)])
    assert code == 2
    message = err.getvalue()
    assert f"--records {path}" in message and words in message
    assert "a list of DOIs, one a line" in message
    assert "Traceback" not in message


def test_simulator_serves_the_list_the_demo_ships() -> None:
    """``--records examples/data/simulated_registry.txt``, as the README shows it: every DOI
    listed resolves (a form such as doi: or a URL too, read by comparison key), a valid DOI
    not listed is 404, in a process of its own over loopback."""
    import urllib.error
    import urllib.request
    from urllib.parse import quote

    from airflow_doi import normalize

    shipped = ROOT / "examples" / "data" / "simulated_registry.txt"
    listed = [line.strip() for line in shipped.read_text(encoding="utf-8").splitlines()
              if line.strip() and not line.startswith("#")]
    process = subprocess.Popen(
        [sys.executable, "-m", "airflow_doi", "simulator", "--records", str(shipped)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.stderr.read()  # type: ignore[union-attr]
        for doi in [*listed, "doi:10.1000/182", "https://doi.org/10.1038/171737A0"]:
            path = quote(normalize(doi), safe="/")
            with urllib.request.urlopen(f"{url}/api/handles/{path}", timeout=10) as answer:
                assert json.load(answer)["responseCode"] == 1, doi
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{url}/api/handles/10.1000/nobody-registered", timeout=10)
        assert missing.value.code == 404
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


def test_the_simulators_enrich_flags_pasted_after_enrich_get_every_record(
        tmp_path: Path) -> None:
    """The trial's worst surprise: ``enrich --base-url <simulator>`` alone exits 0 with every
    row no_metadata (the agencies are off the default allowlist). The simulator's last line
    is the flags to paste; with them each row gets its record, Crossref's and DataCite's by
    their batch APIs."""
    import shlex

    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    dois = [f"10.5555/flags.{i}" for i in range(40)]
    source.write_text("doi\n" + "\n".join(dois) + "\n", encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "airflow_doi", "simulator", "--auto-records"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline().strip() for _ in range(4)]
        assert lines[3].startswith("enrich flags: "), lines
        flags = shlex.split(lines[3].removeprefix("enrich flags: "))
        run = cli("enrich", source, "-o", out, *flags, "--rate", "200", "--agency-rate", "200",
                  "--list-rate", "50")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    assert run.returncode == 0, run.stderr
    rows = read_csv(out)
    assert len(rows) == len(dois)
    statuses = {row["metadata_status"] for row in rows}
    assert statuses <= {"ok", "no_metadata"} and "ok" in statuses, statuses
    sources = {row["metadata_source"] for row in rows if row["metadata_status"] == "ok"}
    assert {"crossref", "datacite"} <= sources, sources
    assert "crossref" in run.stderr and "Which RA?" in run.stderr


def test_resolve_turns_a_short_doi_into_the_doi_it_aliases(tmp_path: Path) -> None:
    """Issue 34: validate names a shortDOI (reason short_doi); resolve asks the proxy which DOI
    it aliases and resolves that one, keeping the cell as written in input."""
    target = "10.1016/S0933-3657(96)00367-3"
    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    with ProxySimulator(make_records([target])) as sim:
        short = sim.short_doi(target)
        source.write_text(f"doi\n{short}\nhttps://doi.org/{short}\n10/nothere1\n",
                          encoding="utf-8")
        run = cli("resolve", source, "-o", out, "--base-url", sim.url, *FAST)
    assert run.returncode == 0, run.stderr
    rows = read_csv(out)
    assert [(r["input"], r["doi"], r["status"]) for r in rows] == [
        (short, target, "resolved"), (f"https://doi.org/{short}", target, "resolved"),
        ("10/nothere1", "", "not_found")]
    assert rows[2]["error"] == "the shortDOI 10/nothere1 does not exist"
    assert "2 shortDOIs looked up through the proxy (2 of the requests)" in run.stderr
