"""The report stays small whatever the input (#42 item 6): every chart and list of values
taken from the data shows the commonest few and one bar for the others.

A resolution or metadata file whose status, agency, error, type or update columns hold
20,000 distinct values is a report of a few hundred kilobytes written in seconds, not a
40 MB page drawn for minutes; the bars of each chart still add up to the DOIs counted.
"""

from __future__ import annotations

import base64
import csv
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROWS = 20_000
#: What a 20,000-row report may cost at most: seconds, peak RSS (MiB), page size (bytes).
MAX_SECONDS = 30
MAX_RSS_MIB = 600
MAX_PAGE = 2_000_000
#: Bars a chart of counts may have: the top ones, and one for the others.
MAX_BARS = 31
_OTHERS = re.compile(r"^\(([\d,]+) others\)$")


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _dois() -> list[str]:
    return [f"10.5555/bound.{n}" for n in range(ROWS)]


#: The command line in a child that writes its own peak RSS (kB) to ``argv[1]`` at the end:
#: ``VmHWM`` belongs to the program it runs alone. ``ru_maxrss`` (wait4, RUSAGE_CHILDREN, even
#: RUSAGE_SELF) keeps the forking parent's resident set: 735 MiB in a worker of the whole
#: suite, 230 MiB alone.
_MEASURED = """\
import sys
from airflow_doi.cli import main
peak_file = sys.argv.pop(1)
try:
    code = main(sys.argv[1:])
finally:
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(peak_file, "w") as out:
        out.write(peak)
sys.exit(code)
"""


def _run_report(tmp_path: Path, *options: str) -> tuple[str, float, float]:
    """``airflow-doi report`` of the DOIs with ``options``: (the page, its wall seconds, its
    own peak RSS in MiB); killed, and the test failed, past :data:`MAX_SECONDS`."""
    source = _write_csv(tmp_path / "dois.csv", ["doi"], [[doi] for doi in _dois()])
    output = tmp_path / "r.html"
    peak_file = tmp_path / "peak.txt"
    command = [sys.executable, "-c", _MEASURED, str(peak_file), "report", str(source),
               "--column", "doi", *options, "-o", str(output)]
    errors = tmp_path / "stderr.txt"
    start = time.monotonic()
    with errors.open("w") as stderr:  # a file, never a pipe the wait below would not drain
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr,
                                 cwd=tmp_path)
    # Polled, not waited on, so a report past MAX_SECONDS is killed and the test fails.
    while True:
        pid, status, _ = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > MAX_SECONDS:
            child.kill()
            child.wait()
            pytest.fail(f"the report of {ROWS:,} rows took more than {MAX_SECONDS} s")
        time.sleep(0.05)
    elapsed = time.monotonic() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0, errors.read_text()
    assert output.stat().st_size < MAX_PAGE, f"{output.stat().st_size:,} bytes"
    return output.read_text(encoding="utf-8"), elapsed, int(peak_file.read_text()) / 1024


def _chart(page: str, title: str) -> list[str]:
    """The texts of the chart whose caption is ``title``: tick labels and bar counts."""
    found = re.search(
        r'<img alt="' + re.escape(title) + r'" src="data:image/svg\+xml;base64,([^"]+)"', page
    )
    assert found, f"no chart {title!r} in the page"
    svg = ET.fromstring(base64.b64decode(found.group(1)))
    return [node.text for node in svg.iter("{http://www.w3.org/2000/svg}text") if node.text]


def _bars(texts: list[str]) -> tuple[int, int, int]:
    """A chart's bars, the sum of their counts, and the others' bar count (0 without one)."""
    counts = [int(value.replace(",", "")) for value in texts if re.fullmatch(r"[\d,]+", value)]
    others = [_OTHERS.match(value) for value in texts]
    bucket = [match for match in others if match]
    assert len(bucket) <= 1, texts
    # The others' bar comes last, so its count is the last one drawn.
    return len(counts), sum(counts), counts[-1] if bucket else 0


def _assert_capped(page: str, title: str, total: int) -> None:
    bars, summed, others = _bars(_chart(page, title))
    assert bars <= MAX_BARS, f"{title}: {bars} bars"
    assert others > 0, f"{title}: no bar for the others"
    assert summed == total, f"{title}: the bars add up to {summed:,}, not {total:,}"


def test_distinct_statuses_agencies_and_errors_make_a_small_report_quickly(tmp_path):
    rows = []
    for n, doi in enumerate(_dois()):
        status, error = [
            ("resolved", ""), ("error", f"HTTP {500 + n % 100} failure {n}"),
            ("not_found", ""), (f"status-{n:05d}", ""),
        ][n % 4]
        rows.append([doi, doi, doi.upper(), status, error, f"Agency {n:05d}"])
    resolution = _write_csv(tmp_path / "f.csv",
                            ["input", "doi", "key", "status", "error", "ra"], rows)
    page, elapsed, peak = _run_report(tmp_path, "--resolution", str(resolution))
    assert elapsed < MAX_SECONDS and peak < MAX_RSS_MIB, (elapsed, peak)
    _assert_capped(page, "DOIs by resolution status", ROWS)
    _assert_capped(page, "Registration agency (Which RA?)", ROWS)
    # Every error text is distinct: the few commonest are listed, then the others' count.
    errors = re.search(r"Errors: (.*?)</p>", page)
    assert errors and re.search(r"\(([\d,]+) others\) ×([\d,]+)", errors.group(1))
    listed = re.findall(r"×([\d,]+)", errors.group(1))
    assert sum(int(n.replace(",", "")) for n in listed) == ROWS // 4
    assert page.count("<tr>") < 100


def test_distinct_metadata_values_make_a_small_report_quickly(tmp_path):
    rows = []
    for n, doi in enumerate(_dois()):
        status = "ok" if n % 2 else f"state-{n:05d}"
        rows.append([
            doi.upper(), doi, status, f"type-{n:05d}", str(n % 9999 + 1),
            f"Journal {n}", f"Publisher {n}",
            f"kind{n}:10.5555/notice.{n}; retraction:10.5555/r.{n}",
            f"notice{n}:10.5555/other.{n}",
        ])
    metadata = _write_csv(tmp_path / "m.csv", [
        "key", "doi", "metadata_status", "csl_type", "year", "container_title", "publisher",
        "updated_by", "update_to",
    ], rows)
    page, elapsed, peak = _run_report(tmp_path, "--metadata", str(metadata))
    assert elapsed < MAX_SECONDS and peak < MAX_RSS_MIB, (elapsed, peak)
    _assert_capped(page, "DOIs by metadata status", ROWS)
    types = next(t for t in re.findall(r'<img alt="([^"]*)"', page) if t.startswith("CSL"))
    _assert_capped(page, types, ROWS)
    years = next(t for t in re.findall(r'<img alt="([^"]*)"', page) if "issued" in t)
    bars, summed, _ = _bars(_chart(page, years))
    assert bars <= MAX_BARS and summed == ROWS, (years, bars, summed)
    # Update and notice types: the commonest few, then the others' count.
    for heading in ("Update types: ", "Notices: "):
        listed = re.search(re.escape(heading) + r"(.*?)</p>", page, re.S)
        assert listed and "others) ×" in listed.group(1), heading
        assert listed.group(1).count("×") <= MAX_BARS
    assert page.count("<tr>") < 200


def test_the_prefix_chart_shows_the_ten_commonest_and_the_others(tmp_path):
    """A new user's trial: 95 prefixes drew 12 bars captioned "Top 12 of 95 prefixes" and no
    bar for the others (950 of the rows nowhere), where the README promises the ten commonest
    and one entry for the others, as every other chart has."""
    rows = [[f"10.{1000 + n % 95}/x.{n}"] for n in range(2000)]
    source = _write_csv(tmp_path / "prefixes.csv", ["doi"], rows)
    done = subprocess.run([sys.executable, "-m", "airflow_doi", "report", str(source),
                           "--column", "doi", "-o", str(tmp_path / "r.html")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    bars, summed, others = _bars(_chart(page, "Rows per registrant prefix"))
    assert (bars, summed) == (11, 2000)
    # 2,000 rows over 95 prefixes: 10.1000 to 10.1004 hold 22 rows, the others 21.
    assert others == 2000 - 5 * 22 - 5 * 21
    assert "(85 others)" in _chart(page, "Rows per registrant prefix")
    assert "The 10 commonest of 95 prefixes, and the others summed." in page
