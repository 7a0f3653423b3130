"""Issue 41: figures that must agree. Each command's summary, each page and each row count the
same things the same way: the keys ``resolve`` sent (shortDOIs too) in the report, a shortDOI
in ``enrich`` as in ``resolve``, one rule set for ``normalize``, the report and ``repair``,
a dead proxy said as such, and a README that promises what the demo shows.

The commands run as a user runs them (subprocess), against the proxy simulator on loopback.
"""

from __future__ import annotations

import html
import re
import socket
import subprocess
import sys
from pathlib import Path

from airflow_doi.resolver.simulator import ProxySimulator, make_records
from tests import forked
from tests.conftest import ROOT, read_output_csv

FAST = ["--rate", "200", "--backoff-base", "0.01", "--timeout", "2"]
README = ROOT / "README.md"


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return forked.run(
        [sys.executable, "-m", "airflow_doi", *map(str, args)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )


def page_text(path: Path) -> str:
    """The words of an HTML page, tags dropped and whitespace folded (no style or script)."""
    page = path.read_text(encoding="utf-8")
    page = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.DOTALL)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def summary_line(stderr: str, command: str, output: Path) -> str:
    [line] = [line for line in stderr.splitlines()
              if line.startswith(f"airflow-doi {command}: {output}: ")]
    return line


# -- 1. the report counts every key resolve sent, shortDOIs included --------------------------

def test_the_report_counts_a_short_doi_resolve_sent_and_lists_it_among_failures(
        tmp_path: Path) -> None:
    """A shortDOI nobody registered is sent (the proxy says it does not exist): it is one of the
    keys looked up, and one of the failures; not "Resolved 100.0%, 20 of 20"."""
    dois = [f"10.1000/d{i}" for i in range(20)]
    source, resolved, page = tmp_path / "in.csv", tmp_path / "res.csv", tmp_path / "r.html"
    source.write_text("doi\n" + "".join(f"{d}\n" for d in dois) + "10/nothere1\n",
                      encoding="utf-8")
    with ProxySimulator(make_records(dois)) as sim:
        run = cli("resolve", source, "-o", resolved, "--base-url", sim.url, *FAST)
    assert run.returncode == 0, run.stderr
    assert [r["status"] for r in read_output_csv(resolved)][-1] == "not_found"
    report = cli("report", source, "--resolution", resolved, "-o", page)
    assert report.returncode == 0, report.stderr
    text = page_text(page)
    assert "Resolved 95.2% 20 of 21 DOIs looked up" in text, text
    assert "21 DOIs (distinct comparison keys) looked up, 20 resolved" in text
    assert "never sent" not in text  # every row was sent
    failures = text[text.index("Failures (not_found or error)"):]
    assert failures.startswith("Failures (not_found or error): 1 DOI ")
    assert "10/nothere1 not_found the shortDOI 10/nothere1 does not exist 1" in failures
    assert "Every DOI looked up was found" not in text


# -- 2. enrich expands a shortDOI as resolve does ---------------------------------------------

def test_enrich_expands_a_short_doi_as_resolve_does(tmp_path: Path) -> None:
    """``10/xxxxxx`` is the DOI it aliases, then that DOI's record: enrich counts the same rows
    as resolve (none invalid), and the aliased DOI's metadata is on the shortDOI's row."""
    target = "10.5555/showcase.article"
    source = tmp_path / "in.csv"
    with ProxySimulator(auto_records=True) as sim:
        short = sim.short_doi(target)
        source.write_text(f"doi\n{short}\n10/nothere1\n{target}\nnot a doi\n", encoding="utf-8")
        resolved = cli("resolve", source, "-o", tmp_path / "res.csv", "--base-url", sim.url,
                       *FAST)
        enriched = cli("enrich", source, "-o", tmp_path / "meta.csv", "--base-url", sim.url,
                       *FAST, "--agency-rate", "200",
                       *[a for h in sim.metadata_hosts for a in ("--metadata-host", h)])
    assert resolved.returncode == 0, resolved.stderr
    assert enriched.returncode == 0, enriched.stderr
    resolution = read_output_csv(tmp_path / "res.csv")
    metadata = read_output_csv(tmp_path / "meta.csv")
    assert [r["status"] for r in resolution] == ["resolved", "not_found", "resolved", "invalid"]
    assert [r["metadata_status"] for r in metadata] == ["ok", "not_found", "ok", "invalid"]
    assert [(r["input"], r["doi"], r["key"]) for r in metadata[:1]] == [
        (short, target, target.upper())]
    assert metadata[0]["title"] == metadata[2]["title"] != ""
    assert metadata[1]["error"] == "the shortDOI 10/nothere1 does not exist"
    # The summaries count the same rows: one invalid, one shortDOI not found, each looked up.
    for run, command, out in ((resolved, "resolve", "res.csv"), (enriched, "enrich",
                                                                 "meta.csv")):
        line = summary_line(run.stderr, command, tmp_path / out)
        assert "4 rows, 1 distinct key" in line and "invalid=1" in line, line
        assert "not_found=1" in line, line
        assert "2 shortDOIs looked up through the proxy" in line, line


# -- 3. one rule set for normalize, the report and repair; counts equal to the rows -----------

DAMAGED = [
    "10.1000/abc.", "doi:doi:10.1000/1", "10.1000/x]", "10.1093%2Fjac%2Fdky096",
    "1038/nature14129", "10.1000/182 (retracted)", "10.1038/nature12373Accessed 2019",
    "10.1371/journal. pone.0123456", "10.1000/a\\_b",
]


def test_repair_no_verify_counts_the_rows_it_suggests_for(tmp_path: Path) -> None:
    """``10–1000/123`` has a candidate only a verified run shows (mistyped_dot): without the
    proxy its row is empty, and the summary counts only the rows with a suggestion."""
    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    cells = [*DAMAGED, "10.1000/182 – accessed 2020", "10–1000/123", "10.1000/182", "junk"]
    source.write_text("doi\n" + "".join(f'"{c}"\n' for c in cells), encoding="utf-8")
    run = cli("repair", source, "-o", out, "--no-verify")
    assert run.returncode == 0, run.stderr
    rows = read_output_csv(out)
    suggested = [r for r in rows if r["doi_suggestion"]]
    assert len(suggested) == 10 and rows[cells.index("10–1000/123")]["doi_suggestion"] == ""
    line = summary_line(run.stderr, "repair", out)
    assert ": 13 rows, 10 with candidate repairs: 0 verified, 0 not found, 10 unchecked, " \
           "0 left alone" in line, line


def test_normalize_the_report_and_repair_name_the_same_repair(tmp_path: Path) -> None:
    """``10.1000/182 – accessed 2020`` was unicode_dash (to ``10.1000/182 - accessed 2020``,
    still damaged) in normalize's note and the report, appended_text in repair: one answer."""
    cell = "10.1000/182 – accessed 2020"
    source = tmp_path / "in.csv"
    source.write_text(f'doi\n"{cell}"\n10.1000/1\n', encoding="utf-8")
    normalized = cli("normalize", source, "-o", tmp_path / "norm.csv")
    repaired = cli("repair", source, "-o", tmp_path / "rep.csv", "--no-verify")
    reported = cli("report", source, "-o", tmp_path / "r.html")
    for run in (normalized, repaired, reported):
        assert run.returncode == 0, run.stderr
    [row, _] = read_output_csv(tmp_path / "rep.csv")
    assert (row["doi_suggestion"], row["doi_suggestion_rule"]) == ("10.1000/182", "appended_text")
    assert f"{cell!r} (likely 10.1000/182, appended_text)" in normalized.stderr, \
        normalized.stderr
    text = page_text(tmp_path / "r.html")
    damaged = text[text.index("Valid but likely damaged"):]
    assert f"{cell} 10.1000/182 appended_text" in damaged, damaged[:600]
    assert "unicode_dash" not in damaged[:600]


# -- 4. a dead proxy: what enrich tried, and that nothing answered ----------------------------

def dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_enrich_on_a_dead_proxy_says_what_it_tried_and_that_nothing_answered(
        tmp_path: Path) -> None:
    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    source.write_text("doi\n" + "".join(f"10.1000/d{i}\n" for i in range(20)), encoding="utf-8")
    run = cli("enrich", source, "-o", out, "--base-url", f"http://127.0.0.1:{dead_port()}",
              "--backoff-base", "0.01", "--timeout", "2")
    assert run.returncode == 3, run.stderr
    line = summary_line(run.stderr, "enrich", out)
    assert "negotiation 20 keys in 0 requests" not in line, line
    match = re.search(r"Which RA\? (\d+) requests?, none answered; "
                      r"negotiation 20 keys, none sent$", line)
    assert match, line
    assert re.search(rf"; {match.group(1)} requests? in ", line), line  # the same requests


# -- 5. the README promises what the demo shows, and says how long the tests take -------------

def demo_paragraph() -> str:
    text = README.read_text(encoding="utf-8")
    return re.sub(r"\s+", " ", text[text.index("`demo.sh` creates"):text.index("`test.sh`")])


def test_the_readme_promises_no_invalid_rows_in_doi_resolution() -> None:
    """The DAG never sends an invalid cell, so ``doi_resolution`` has no invalid row: the
    README says where the demo shows invalid cells (the catalogue's rows)."""
    from airflow_doi.resolver.result import STATUSES

    paragraph = demo_paragraph()
    said = re.search(r"`doi_resolution` \(([^)]*)\)", paragraph)
    assert said, paragraph
    assert "invalid" not in said.group(1), said.group(1)
    named = set(re.findall(r"`?([a-z_]+)`?", said.group(1))) & set(STATUSES)
    assert named == {"resolved", "not_found"}, said.group(1)
    assert re.search(r"`catalogue` \([^)]*invalid", paragraph), paragraph


def test_the_demo_registry_holds_the_retracted_and_the_corrected_work_the_readme_names() -> None:
    """The README's demo shows the retracted and the corrected work: the offline registry
    holds one of each, Crossref works of the DAG's catalogue (so enrich reads them from the
    Crossref data file the demo writes), and their records carry the notices."""
    from airflow_doi.cli.demo import REGISTRY, registry_records
    from airflow_doi.resolver.agencies import crossref_item_for, work_from_record
    from airflow_doi.syntax import validate

    said = re.search(r"`doi_metadata` \(([^)]*)\)", demo_paragraph())
    assert said and "retracted" in said.group(1) and "corrected" in said.group(1), said
    records = registry_records(ROOT / REGISTRY)
    works = [work_from_record(doi, record) for doi, record in records.items()]
    updated = {kind: work for work in works for kind, _ in work.updated_by}
    assert set(updated) == {"retraction", "correction"}, updated
    import csv

    with (ROOT / "examples/data/catalogue.csv").open(newline="", encoding="utf-8") as handle:
        keys = {validate(row["doi_raw"]).key for row in csv.DictReader(handle)}
    for kind, work in updated.items():
        assert validate(work.doi).key in keys, work.doi
        assert work.agency == "crossref"
        assert [u["type"] for u in crossref_item_for(work)["updated-by"]] == [kind]


def test_the_readme_says_how_long_the_test_command_takes() -> None:
    text = README.read_text(encoding="utf-8")
    block = text[text.index("`test.sh` creates"):text.index("---")]
    assert re.search(r"about \d+ minutes on (?:a )?2[- ]core", re.sub(r"\s+", " ", block)), \
        block
