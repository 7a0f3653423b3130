"""The report as a person sees it: rendered by headless Chromium (Debian's ``chromium``).

Driven through the DevTools protocol over a loopback websocket (``websockets``, already a
dependency of the test environment): console messages, uncaught exceptions, log entries and
JavaScript dialogs are all events there, so "no console errors" and "nothing ran" are read
from the browser itself rather than guessed from its stderr. The screenshot of the sample
report is kept; with ``AIRFLOW_DOI_UPDATE_SCREENSHOT=1`` it also replaces ``docs/report.png``.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from base64 import b64decode
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

from airflow_doi.report import write_report
from tests.conftest import ROOT
from tests.test_report import (
    COLUMN,
    SAMPLE,
    hostile_resolution,
    resolution_run,
    sample_cells,
    sample_proxy_records,
    scalar_headline,
)

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
)
WIDTH = 1280


class Page:
    """One Chromium tab over the DevTools protocol; every event it sends is kept."""

    def __init__(self, socket: Any, width: int = WIDTH) -> None:
        self.socket = socket
        self.width = width
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == number:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        if any(e.get("method") == method for e in self.events):
            return
        while time.monotonic() < deadline:
            message = json.loads(self.socket.recv(timeout=deadline - time.monotonic()))
            self.events.append(message)
            if message.get("method") == method:
                return
        raise AssertionError(f"no {method} within {timeout} s")

    def evaluate(self, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return answer["result"].get("value")

    def problems(self) -> list[str]:
        """Console errors and warnings, exceptions, error log entries and dialogs, as text."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning",
                                                                              "assert"):
                found.append(f"console {params['type']}: {params['args']}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails']}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                found.append(f"log {params['entry']['level']}: {params['entry']['text']}")
            elif method == "Page.javascriptDialogOpening":
                found.append(f"dialog: {params['message']}")
        return found

    def screenshot(self) -> bytes:
        height = int(self.call("Page.getLayoutMetrics")["cssContentSize"]["height"])
        shot = self.call(
            "Page.captureScreenshot", format="png", captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1},
        )
        return b64decode(shot["data"])


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[str]:
    """A headless Chromium with a new empty profile; yields its DevTools HTTP address."""
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("Debian's chromium is missing: run scripts/test.sh (apt-get install chromium)")
    profile = tmp_path / "profile"
    profile.mkdir()
    process = subprocess.Popen(
        [binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},900",
         "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"chromium did not start (exit code {process.poll()})")
            time.sleep(0.1)
        yield f"127.0.0.1:{port_file.read_text().split()[0]}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # chromium and the helpers it started
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def open_page(address: str, path: Path, width: int = WIDTH) -> Iterator[Page]:
    """``path`` in the browser's tab, ``width`` CSS pixels wide (a phone's below 500)."""
    with urllib.request.urlopen(f"http://{address}/json/list", timeout=30) as answer:
        targets = json.load(answer)
    socket_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
    with connect(socket_url, max_size=None, open_timeout=30) as socket:
        page = Page(socket, width)
        for domain in ("Runtime", "Log", "Page"):
            page.call(f"{domain}.enable")
        page.call("Emulation.setDeviceMetricsOverride", width=width, height=900,
                  deviceScaleFactor=1, mobile=width < 500)
        page.call("Page.navigate", url=path.resolve().as_uri())
        page.wait_for("Page.loadEventFired")
        yield page


SUMMARY = """JSON.stringify({
  cards: [...document.querySelectorAll('.card')].map(c => [
    c.querySelector('.label').textContent.trim(), c.querySelector('.value').textContent.trim()]),
  charts: [...document.querySelectorAll('figure.chart img')].map(i => [
    i.complete, i.naturalWidth, i.getBoundingClientRect().width]),
  headings: [...document.querySelectorAll('h2')].map(h => h.textContent.trim()),
  text: document.body.innerText,
})"""


def test_sample_report_in_chromium(browser, tmp_path):
    from airflow_doi.resolver.simulator import ProxySimulator

    with ProxySimulator(sample_proxy_records()) as proxy:
        resolution = resolution_run(proxy.url)
    page_path = write_report(tmp_path / "report.html", SAMPLE, COLUMN, resolution=resolution,
                             title="Sample catalogue: DOI quality")
    with open_page(browser, page_path) as page:
        summary = json.loads(page.evaluate(SUMMARY))
        shot = page.screenshot()
        assert page.problems() == []
    rows, valid, distinct, duplicated, hidden = scalar_headline(sample_cells())
    cards = dict(summary["cards"])
    assert cards["Rows"] == f"{rows:,}"
    assert cards["Valid DOIs"] == f"{100 * valid / rows:.1f}%"
    assert cards["Not valid"] == f"{rows - valid:,}"
    assert cards["Distinct DOIs"] == f"{distinct:,}"
    assert cards["Duplicated DOIs"] == f"{duplicated:,}"
    assert cards["Written differently"] == f"{hidden:,}"
    assert "Resolved" in cards
    assert summary["headings"][:3] == [
        "Validity", "Valid but likely damaged", "Duplicates by comparison key"]
    assert "Resolution" in summary["headings"]
    # Every chart decoded and is drawn at a readable size.
    assert len(summary["charts"]) >= 4
    for complete, natural_width, shown_width in summary["charts"]:
        assert complete and natural_width > 200 and shown_width > 200
    assert "https://doi.org/10.1038/171737a0" in summary["text"]  # a spelling, as written
    assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 50_000
    (tmp_path / "report.png").write_bytes(shot)
    if os.environ.get("AIRFLOW_DOI_UPDATE_SCREENSHOT"):
        (ROOT / "docs" / "report.png").write_bytes(shot)


def test_hostile_report_runs_nothing_in_chromium(browser, tmp_path):
    source = tmp_path / "hostile.csv"
    source.write_text(
        'doi\n"<script>window.__pwned=1;alert(1)</script>"\n'
        '"10.1000/""><img src=x onerror=""window.__pwned=2;alert(2)"">"\n'
        '"10.1000/<svg onload=alert(3)>"\n"10.1000/<SVG onload=alert(3)>"\n'
        "javascript:alert(4)\n", encoding="utf-8",
    )
    page_path = write_report(tmp_path / "hostile.html", source, "doi",
                             resolution=hostile_resolution())
    with open_page(browser, page_path) as page:
        state = json.loads(page.evaluate("""JSON.stringify({
          pwned: window.__pwned === undefined ? null : window.__pwned,
          scripts: document.scripts.length,
          links: [...document.links].map(a => a.href),
          text: document.body.innerText})"""))
        assert page.problems() == []
    assert state["pwned"] is None and state["scripts"] == 0
    assert state["links"] and all(h.startswith("https://doi.org/10.") for h in state["links"])
    assert "<script>window.__pwned=1;alert(1)</script>" in state["text"]  # shown as text


#: The widths every card is looked at: a laptop's window and a phone's.
WIDTHS = (1280, 390)
#: Each card's label, value and note: how wide they are drawn and how wide their box is, and
#: whether the page scrolls sideways.
CARDS = """JSON.stringify({
  page: [document.documentElement.scrollWidth, window.innerWidth],
  sections: [...document.querySelectorAll('section, section.pair > div')].map(s => [
    (s.querySelector('h2') || s).textContent.trim().slice(0, 40), s.scrollWidth,
    s.clientWidth]),
  cards: [...document.querySelectorAll('.card')].map(c => ({
    text: c.innerText.replace(/\\s+/g, ' ').trim(),
    box: [c.scrollWidth, c.clientWidth],
    parts: [...c.children].map(p => [p.className, p.scrollWidth, p.clientWidth,
      Math.round(p.getBoundingClientRect().right), Math.round(c.getBoundingClientRect().right)]),
  })),
})"""


def cards_in_chromium(address: str, path: Path, shots: Path) -> dict[int, list[str]]:
    """Each card's text at every width of :data:`WIDTHS`, after checking that no label, value
    or note overflows its card, nothing sticks out of its section and the page does not
    scroll sideways; a screenshot of each width is kept in ``shots`` (``<stem>-<width>.png``)."""
    found = {}
    for width in WIDTHS:
        with open_page(address, path, width) as page:
            state = json.loads(page.evaluate(CARDS))
            shot = page.screenshot()
            assert page.problems() == []
        (shots / f"{path.stem}-{width}.png").write_bytes(shot)
        scrolled, shown = state["page"]
        assert scrolled <= shown, f"{path.name} scrolls sideways at {width} px"
        for heading, inner, box in state["sections"]:  # a wide table would stick out
            assert inner <= box, (path.name, width, heading)
        assert state["cards"], path
        for card in state["cards"]:
            inner, box = card["box"]
            assert inner <= box, (width, card)
            for name, drawn, room, right, edge in card["parts"]:
                assert drawn <= room and right <= edge, (width, name, card["text"])
        found[width] = [card["text"] for card in state["cards"]]
    return found


def test_every_card_fits_at_1280_and_390_px(browser, tmp_path):
    """Issue 34: "100.0%" overflowed its card at 1280 px. The worst cards: every share at
    100.0% from a real run (files, a resolution and a metadata table), and the longest counts
    a page can show."""
    from airflow_doi.report.figures import Figures
    from airflow_doi.report.html import render_html
    from airflow_doi.report.metadata import MetadataFigures
    from airflow_doi.report.resolution import ResolutionFigures

    dois = [f"10.5555/card.{i}" for i in range(40)] + ["10.1000/182 (retracted)"]
    source = tmp_path / "shares.csv"
    source.write_text("doi\n" + "\n".join(dois) + "\n", encoding="utf-8")
    keys = [doi.upper() for doi in dois]
    resolution = [{"input": d, "doi": d, "key": k, "status": "resolved"}
                  for d, k in zip(dois, keys, strict=True)]
    metadata = [{"key": k, "doi": d, "metadata_status": "ok",
                 "updated_by": "retraction:10.5555/notice" if i == 0 else ""}
                for i, (d, k) in enumerate(zip(dois, keys, strict=True))]
    shares = write_report(tmp_path / "shares.html", source, "doi", resolution=resolution,
                          metadata=metadata)
    big = 123_456_789
    figures = Figures(source="counts.csv", column="doi", rows=big, valid=big - 12_345_678,
                      distinct_keys=98_765_432, duplicate_keys=12_345_678,
                      duplicate_rows=23_456_789, hidden_keys=9_876_543, damaged=1_234_567)
    figures.resolution = ResolutionFigures(rows=big, statuses={"resolved": 98_765_432},
                                           looked_up=98_765_432, resolved=98_765_432)
    figures.metadata = MetadataFigures(rows=big, keys=98_765_432,
                                       statuses={"ok": 98_765_432}, updated=1, retracted=1)
    counts = tmp_path / "counts.html"
    counts.write_text(render_html(figures), encoding="utf-8")
    seen = cards_in_chromium(browser, shares, tmp_path)
    assert seen[1280] == seen[390]  # the same cards, whatever the width
    by_label = {text.split(" ")[0]: text for text in seen[1280]}
    assert by_label["VALID"] == "VALID DOIS 100.0% 41 rows"
    assert by_label["RESOLVED"] == "RESOLVED 100.0% 41 of 41 DOIs looked up"
    assert by_label["WITH"] == "WITH METADATA 100.0% 41 of 41 DOIs"
    assert by_label["RETRACTED"] == "RETRACTED 1 1 work updated by a notice"
    assert by_label["LIKELY"] == "LIKELY DAMAGED 1 valid, but a repair rule changes it"
    counted = cards_in_chromium(browser, counts, tmp_path)
    assert "ROWS 123,456,789" in counted[390]
