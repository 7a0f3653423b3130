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

    def __init__(self, socket: Any) -> None:
        self.socket = socket
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
            clip={"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1},
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
def open_page(address: str, path: Path) -> Iterator[Page]:
    with urllib.request.urlopen(f"http://{address}/json/list", timeout=30) as answer:
        targets = json.load(answer)
    socket_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
    with connect(socket_url, max_size=None, open_timeout=30) as socket:
        page = Page(socket)
        for domain in ("Runtime", "Log", "Page"):
            page.call(f"{domain}.enable")
        page.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900,
                  deviceScaleFactor=1, mobile=False)
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
    assert summary["headings"][:2] == ["Validity", "Duplicates by comparison key"]
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
