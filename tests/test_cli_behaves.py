"""The command line behaves as command lines do (#41 items 6 to 8): an unknown flag is refused
with the command's usage and the flag it most likely meant, an abbreviation is refused
rather than taken for a flag it happens to start, ``-`` reads standard input as ``-o -``
writes standard output, and every --help and summary reads right (each default said once,
no note meant for developers, 1 row and 2 rows)."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_doi.resolver.simulator import ProxySimulator, make_records
from tests import forked
from tests.conftest import ROOT


def cli(*args: str | Path, cwd: Path = ROOT, stdin: bytes | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return forked.run([sys.executable, "-m", "airflow_doi", *map(str, args)], input=stdin,
                      capture_output=True, timeout=300, cwd=cwd, check=False,
                      env=None if env is None else {**os.environ, **env})


def text(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stderr.decode("utf-8")


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxySimulator]:
    with ProxySimulator(auto_records=True) as simulator:
        yield simulator


# -- 6: unknown flags and abbreviations ------------------------------------------------------

@pytest.mark.parametrize(("command", "given", "meant"), [
    ("normalize", ["--sep", ";"], "--delimiter"),          # pandas' name
    ("normalize", ["--separator=;"], "--delimiter"),
    ("report", ["-d", ";"], "--delimiter"),                 # cut's
    ("normalize", ["--colunm", "doi"], "--column"),         # a typo
    ("resolve", ["--retries", "3"], "--max-attempts"),
    ("enrich", ["--mailto", "me@example.org"], "--contact"),  # Crossref's parameter
    ("sql generate", ["--chek"], "--check"),                # a command of a command
])
def test_an_unknown_flag_shows_the_usage_and_the_flag_meant(
        tmp_path: Path, command: str, given: list[str], meant: str) -> None:
    (tmp_path / "in.csv").write_text("doi\n10.1000/a\n", encoding="utf-8")
    file_args = [] if command.startswith("sql") else ["in.csv", "-o", "out.csv"]
    done = cli(*command.split(), *file_args, *given, cwd=tmp_path)
    assert done.returncode == 2, text(done)
    err = text(done)
    assert err.startswith(f"usage: airflow-doi {command} "), err
    flag = given[0].split("=")[0]
    assert err.endswith(f"airflow-doi {command}: error: unrecognized argument {flag}; "
                        f"did you mean {meant}?\n"), err
    assert "Traceback" not in err and not (tmp_path / "out.csv").exists()


def test_a_flag_like_none_of_ours_says_where_the_options_are(tmp_path: Path) -> None:
    done = cli("normalize", "in.csv", "-o", "out.csv", "--frobnicate", cwd=tmp_path)
    assert done.returncode == 2
    assert text(done).endswith(
        "airflow-doi normalize: error: unrecognized argument --frobnicate; airflow-doi "
        "normalize --help lists the options\n"), text(done)


@pytest.mark.parametrize(("given", "meant"), [
    (["--colum", "DOI"], "--column"),
    (["--chunk", "5"], "--chunk-size"),
    (["--escape"], "--escape-formulas"),
])
def test_an_abbreviation_is_refused_not_taken_for_the_flag_it_starts(
        tmp_path: Path, given: list[str], meant: str) -> None:
    """Accepted, ``--colum`` would change meaning the day a flag --columns is added."""
    (tmp_path / "in.csv").write_text("id,DOI\n1,10.1000/a\n", encoding="utf-8")
    done = cli("normalize", "in.csv", "--column", "DOI", "-o", "out.csv", *given, cwd=tmp_path)
    assert done.returncode == 2, text(done)
    assert text(done).endswith(f"airflow-doi normalize: error: unrecognized argument "
                               f"{given[0]}; did you mean {meant}?\n"), text(done)
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize(("command", "given", "meant"), [
    ("normalize", ["--outptu", "out.csv"], "--output"),
    ("resolve", ["--ouput=out.csv"], "--output"),
    ("report", ["--out", "out.html"], "--output"),
])
def test_a_mistyped_required_flag_is_named_not_reported_missing(
        tmp_path: Path, command: str, given: list[str], meant: str) -> None:
    """argparse checks the required flags first: a mistyped ``--output`` was answered "the
    following arguments are required: --output/-o", never naming the flag typed."""
    (tmp_path / "in.csv").write_text("doi\n10.1000/a\n", encoding="utf-8")
    done = cli(command, "in.csv", *given, cwd=tmp_path)
    assert done.returncode == 2, text(done)
    flag = given[0].split("=")[0]
    assert text(done).endswith(f"airflow-doi {command}: error: unrecognized argument {flag}; "
                               f"did you mean {meant}?\n"), text(done)
    missing = cli(command, "in.csv", cwd=tmp_path)  # nothing mistyped: the missing flag said
    assert text(missing).endswith(f"airflow-doi {command}: error: the following arguments are "
                                  "required: --output/-o\n"), text(missing)
    # Review: arguments argparse itself takes are no typo: a flag with its value attached, a
    # value that starts with "-" but holds a space.
    attached = cli(command, "-oout.csv", cwd=tmp_path)
    no_input = ("give either IN (a file or database URL) or --conn-id, not both or neither"
                if command == "report" else "the following arguments are required: IN")
    assert text(attached).endswith(f"airflow-doi {command}: error: {no_input}\n"), text(attached)
    spaced = cli(command, "in.csv", "--na-values", "-, NA", cwd=tmp_path)
    assert text(spaced).endswith(f"airflow-doi {command}: error: the following arguments are "
                                 "required: --output/-o\n"), text(spaced)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


# -- 7: "-" reads standard input ----------------------------------------------------------

#: An Excel export, as a pipe would carry it: cp1252, semicolons, CRLF.
EXPORT = "id;ref\r\n1;10.1000/café\r\n2;doi:10.1000/ABC\r\n3;not a doi\r\n".encode("cp1252")


def test_normalize_reads_standard_input_as_it_reads_the_file(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_bytes(EXPORT)
    spool = tmp_path / "tmp"
    spool.mkdir()
    from_file = cli("normalize", "in.csv", "--column", "ref", "-o", "out.csv", cwd=tmp_path)
    assert from_file.returncode == 0, text(from_file)
    piped = cli("normalize", "-", "--column", "ref", "-o", "-", cwd=tmp_path, stdin=EXPORT,
                env={"TMPDIR": str(spool)})
    assert piped.returncode == 0, text(piped)
    assert piped.stdout == (tmp_path / "out.csv").read_bytes()  # the same bytes, cp1252
    assert text(piped).splitlines() == text(from_file).replace(
        "normalize: out.csv: ", "normalize: standard output: ").splitlines()
    assert text(piped).startswith("airflow-doi normalize: standard output: 3 rows: 2 valid")
    assert list(spool.iterdir()) == []  # the copy of standard input is gone


def test_a_problem_with_standard_input_names_it(tmp_path: Path) -> None:
    spool = tmp_path / "tmp"
    spool.mkdir()
    done = cli("normalize", "-", "--column", "nope", "-o", "out.csv", cwd=tmp_path,
               stdin=b"doi\n10.1000/a\n", env={"TMPDIR": str(spool)})
    assert done.returncode == 2
    assert text(done).startswith("airflow-doi normalize: error: standard input: "), text(done)
    assert str(spool) not in text(done) and "airflow-doi-stdin" not in text(done)
    assert list(spool.iterdir()) == [] and not (tmp_path / "out.csv").exists()


def test_resolve_reads_standard_input_and_writes_standard_output(
        tmp_path: Path, proxy: ProxySimulator) -> None:
    given = b"id,ref\n1,10.1000/a\n2,https://doi.org/10.1000/b\n3,not a doi\n"
    done = cli("resolve", "-", "--column", "ref", "-o", "-", "--base-url", proxy.url,
               "--rate", "100", cwd=tmp_path, stdin=given)
    assert done.returncode == 0, text(done)
    rows = list(csv.DictReader(io.StringIO(done.stdout.decode("utf-8"))))
    assert [(r["id"], r["doi"], r["status"]) for r in rows] == [
        ("1", "10.1000/a", "resolved"), ("2", "10.1000/b", "resolved"),
        ("3", "", "invalid")]
    assert text(done).startswith("airflow-doi resolve: standard output: 3 rows, "), text(done)


@pytest.mark.parametrize(("command", "extra", "made"), [
    ("repair", ["--no-verify", "-o", "out.csv"], "out.csv"),
    ("report", ["-o", "out.html"], "out.html"),
])
def test_every_file_command_reads_standard_input(
        tmp_path: Path, command: str, extra: list[str], made: str) -> None:
    done = cli(command, "-", *extra, cwd=tmp_path, stdin=b"doi\n10.1000/a\n10.1000/182.\n")
    assert done.returncode == 0, text(done)
    assert "10.1000/182" in (tmp_path / made).read_text(encoding="utf-8")


# -- 8: help texts and summaries ------------------------------------------------------------

COMMANDS = ("", "normalize", "resolve", "enrich", "repair", "report", "simulator", "demo",
            "sql", "sql generate", "sql print", "sql install", "sql dbt-package",
            "sql duckdb-extension")


def help_entries(command: str) -> tuple[str, list[str]]:
    """``airflow-doi COMMAND --help``, and each option's (or argument's) entry on one line."""
    done = forked.run([sys.executable, "-m", "airflow_doi", *command.split(), "--help"],
                      capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    entries: list[str] = []
    listing = False
    for line in done.stdout.splitlines():
        if re.match(r"^(options|positional arguments):$", line):
            listing = True
        elif listing and re.match(r"^  \S", line):
            entries.append(line.strip())
        elif listing and line.startswith("   ") and entries:
            entries[-1] += " " + line.strip()
    return done.stdout, entries


@pytest.mark.parametrize("command", COMMANDS)
def test_help_says_each_default_once_and_nothing_meant_for_developers(command: str) -> None:
    whole, entries = help_entries(command)
    assert entries
    for entry in entries:
        assert len(re.findall(r"\bdefault\b", entry)) <= 1, entry
        assert "(default: )" not in entry, entry
    for note in ("STEPS", ":data:", ":func:", "``", "Later steps", "later issues"):
        assert note not in whole, (note, whole)


@pytest.mark.parametrize(("command", "stem"), [("resolve", "resolution_"),
                                               ("enrich", "metadata_")])
def test_prefix_help_names_what_the_command_writes(command: str, stem: str) -> None:
    _, entries = help_entries(command)
    prefix = next(entry for entry in entries if entry.startswith("--prefix"))
    assert f"{stem}input, {stem}doi" in prefix, prefix
    assert "doi_normalized" not in prefix, prefix  # normalize's names, not this command's


#: A count of one with a plural noun.
ONE_PLURAL = re.compile(r"(?<![\d.,])1 (rows|requests|retries|cache hits|shortDOIs|keys|"
                        r"distinct keys|batches|pages|records|members|workers|files|queries|"
                        r"functions|DOIs|restarts|times)\b")


def test_a_count_of_one_takes_the_singular(tmp_path: Path) -> None:
    target = "10.1016/S0933-3657(96)00367-3"
    with ProxySimulator(make_records([target])) as sim:
        short = sim.short_doi(target)
        (tmp_path / "in.csv").write_text(f"doi\n{short}\n", encoding="utf-8")
        done = cli("repair", "in.csv", "-o", "out.csv", "--base-url", sim.url, "--rate", "100",
                   "--cache", "cache.sqlite", cwd=tmp_path)
        again = cli("repair", "in.csv", "-o", "again.csv", "--base-url", sim.url, "--rate",
                    "100", "--cache", "cache.sqlite", cwd=tmp_path)
    for run in (done, again):
        assert run.returncode == 0, text(run)
        summary = text(run).splitlines()[0]
        assert summary.startswith("airflow-doi repair: "), summary
        assert not ONE_PLURAL.search(summary), summary
    assert "1 shortDOI looked up" in text(done).splitlines()[0]
    assert re.search(r"\b1 cache hit\b", text(again)), text(again)


def test_summaries_and_notes_count_in_words_that_agree() -> None:
    from types import SimpleNamespace

    from airflow_doi.cli.enrich import update_lines
    from airflow_doi.repair.verify import RepairStats
    from airflow_doi.resolver import ResolverStats

    stats = RepairStats(rows=1, with_candidates=1, verified=1, resolver=ResolverStats(
        requests=1, retries=1, cache_hits=1, short_dois=1))
    assert not ONE_PLURAL.search(stats.summary()), stats.summary()
    state = SimpleNamespace(since="2024-01-01", pages=1, records=1, found=1, requests=1,
                            restarts=1, finished=True)
    for line in update_lines({"crossref": state}, None):
        assert not ONE_PLURAL.search(line) and "1 changed record read" in line, line


def test_enrich_says_when_a_local_proxy_still_leaves_the_batch_apis_public(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's trial: ``enrich --base-url`` of the simulator still asked
    api.crossref.org (the default batch API, on the default allowlist), five requests lost
    offline, with nothing said before."""
    from airflow_doi.cli.enrich import _public_batch_apis
    from airflow_doi.metadata import MetadataConfig

    local = "http://user:pw@127.0.0.1:8080"
    _public_batch_apis(MetadataConfig(base_url=local))
    assert capsys.readouterr().err == (
        "airflow-doi enrich: note: --base-url is http://127.0.0.1:8080, but the agencies' "
        "batch APIs are asked at their public hosts (https://api.crossref.org and "
        "https://api.datacite.org); --crossref-url and --datacite-url name others, --source "
        "negotiation asks every DOI through --base-url\n")
    mine = "http://127.0.0.1:9090"
    quiet = [
        MetadataConfig(),  # doi.org: the public APIs are the ones meant
        MetadataConfig(base_url=local, crossref_url=mine, datacite_url=mine,
                       metadata_hosts=(mine,)),
        MetadataConfig(base_url=local, source="negotiation"),  # no batch API is asked
        MetadataConfig(base_url=local, metadata_hosts=(mine,)),  # not on the allowlist
    ]
    for config in quiet:
        _public_batch_apis(config)
        assert capsys.readouterr().err == "", config
