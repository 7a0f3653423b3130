"""The agencies' data files as a source (#39): recognised by content, read in place, the same
columns as the APIs give, and nothing a file holds can stop a run, fill memory or write
outside the output."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import zlib
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from airflow_doi.metadata import MetadataStats, fetch
from airflow_doi.metadata.csl import FIELDS
from airflow_doi.metadata.snapshot import Limits, index_snapshots
from airflow_doi.metadata.snapshot.records import RecordReader, RowSettings
from airflow_doi.metadata.snapshot.scan import read_member
from airflow_doi.metadata.snapshot.source import answer_from_snapshots
from airflow_doi.resolver.agencies import (
    SHOWCASE_WORKS,
    crossref_item_for,
    datacite_record_for,
    work_for,
)
from airflow_doi.resolver.datafiles import add_member, crossref_tar, datacite_tar, jsonl_gz
from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked

CLI = [sys.executable, "-m", "airflow_doi"]
NOW = datetime(2026, 1, 2, tzinfo=timezone.utc)
SETTINGS = RowSettings(NOW, NOW + timedelta(days=30))
CROSSREF_WORKS = [w for w in SHOWCASE_WORKS if w.agency == "crossref"] + [
    w for w in (work_for(f"10.5555/many.{i}") for i in range(40)) if w.agency == "crossref"][:8]
DATACITE_WORKS = [w for w in SHOWCASE_WORKS if w.agency == "datacite"]
#: The columns a key gets whichever way its record came: typed fields, the record, the agency.
SAME = (*FIELDS, "doi", "key", "metadata_status", "csl_json", "agency")


def _line(record: Any) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


def _scan(paths: list[Path], wanted: set[str] | None = None, **limits: Any) -> Any:
    """Every member's scan, by name, and the found rows by key."""
    index = index_snapshots(paths)
    reader = RecordReader(wanted, Limits(**limits), SETTINGS)
    scans = {m.name: read_member(reader, m) for m in index.members}
    rows = {r.key: r for s in scans.values() for r in s.found}
    return index, scans, rows


# -- the same columns from every source ---------------------------------------------------------
def _by_key(results: list[Any]) -> dict[str, dict[str, Any]]:
    return {r.key: {name: getattr(r, name) for name in SAME} for r in results}


def test_a_crossref_work_gets_the_same_columns_from_the_list_query_the_tar_and_json_lines(
        tmp_path: Path) -> None:
    dois = [w.doi for w in CROSSREF_WORKS]
    with ProxySimulator(auto_records=True) as sim:
        stats = MetadataStats()
        listed = fetch(dois, base_url=sim.url, metadata_hosts=sim.metadata_hosts,
                       crossref_url=sim.crossref_url, datacite_url=sim.datacite_url,
                       rate=1000, agency_rate=1000, list_rate=1000, stats=stats)
    assert {r.metadata_source for r in listed} == {"crossref"}, stats.summary()
    items = [crossref_item_for(w) for w in CROSSREF_WORKS]
    tar = crossref_tar(tmp_path / "crossref.tar", items, per_file=2)
    lines = jsonl_gz(tmp_path / "crossref.jsonl.gz", items)
    from_tar = fetch(dois, snapshot=[tar], source="snapshot")
    from_lines = fetch(dois, snapshot=[lines], source="snapshot")
    assert {r.metadata_source for r in from_tar + from_lines} == {"crossref_snapshot"}
    assert _by_key(from_tar) == _by_key(listed) == _by_key(from_lines)
    retracted = next(r for r in from_tar if r.key == "10.5555/SHOWCASE.RETRACTED")
    assert retracted.updated_by == "retraction:10.5555/showcase.notice"
    with tarfile.open(tar) as opened:  # the files' date: the newest member's
        newest = max(member.mtime for member in opened.getmembers())
    assert retracted.fetched_at == datetime.fromtimestamp(newest, timezone.utc)


@pytest.mark.parametrize("shape", ["json_api", "attributes"])
def test_a_datacite_work_gets_the_same_columns_from_the_batch_api_and_the_data_file(
        tmp_path: Path, shape: str) -> None:
    dois = [w.doi for w in DATACITE_WORKS]
    with ProxySimulator(auto_records=True) as sim:
        listed = fetch(dois, base_url=sim.url, metadata_hosts=sim.metadata_hosts,
                       crossref_url=sim.crossref_url, datacite_url=sim.datacite_url,
                       rate=1000, agency_rate=1000, list_rate=1000)
    assert {r.metadata_source for r in listed} == {"datacite"}
    tar = datacite_tar(tmp_path / "datacite.tar",
                       [("2025-03", datacite_record_for(w)) for w in DATACITE_WORKS],
                       attributes_only=shape == "attributes")
    from_file = fetch(dois, snapshot=[tar], source="snapshot")
    assert {r.metadata_source for r in from_file} == {"datacite_snapshot"}
    assert _by_key(from_file) == _by_key(listed)


# -- recognised by content ------------------------------------------------------------------------
def test_every_form_is_recognised_by_its_content_not_its_name(tmp_path: Path) -> None:
    items = [crossref_item_for(w) for w in CROSSREF_WORKS]
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "a.txt").write_bytes(gzip.compress(b'{"items":[' + b",".join(map(_line, items[:2]))
                                                 + b"]}"))  # an items file named .txt
    (folder / "page.json").write_text(json.dumps(  # an API page saved, pretty-printed
        {"status": "ok", "message-type": "work-list", "message": {"items": items[2:3]}},
        indent=2))
    (folder / "array.dat").write_bytes(json.dumps(items[3:4]).encode())  # a JSON array
    (folder / "one.json").write_text(json.dumps(items[4], indent=1))  # one record, pretty
    (folder / "lines.jsonl").write_bytes(b"\n".join(map(_line, items[5:6])) + b"\r\n")
    # Two gzip members one after the other (pigz, bgzip): both read.
    (folder / "two.gz").write_bytes(gzip.compress(_line(items[6]) + b"\n")
                                    + gzip.compress(_line(items[7]) + b"\n"))
    (folder / "README").write_text("Crossref public data file, 2025\n")
    (folder / "sums.md5").write_text("d41d8cd98f00b204e9800998ecf8427e  0.json.gz\n")
    os.symlink(folder / "a.txt", folder / "link.gz")
    # A gzipped tar (read in one pass) of DataCite attributes-only lines.
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w") as tar:
        add_member(tar, "dois/updated_2025-02/part_0000.jsonl.gz", gzip.compress(
            _line(datacite_record_for(DATACITE_WORKS[0])["attributes"]) + b"\n"))
    (folder / "datacite.tgz").write_bytes(gzip.compress(inner.getvalue()))
    index = index_snapshots([folder])
    assert {s.name: s.reason for s in index.skipped} == {
        "README": "not_a_data_file", "sums.md5": "not_a_data_file", "link.gz": "not_a_file"}
    assert [s.name for s in index.streams] == ["datacite.tgz"]
    keys = {w.doi.upper() for w in (*SHOWCASE_WORKS, *CROSSREF_WORKS)}
    answers = answer_from_snapshots([folder], {k: k for k in keys}, settings=SETTINGS,
                                    workers=1, index=index)
    assert set(answers.results) == {w.doi.upper() for w in CROSSREF_WORKS[:8]} | {
        DATACITE_WORKS[0].doi.upper()}
    assert answers.stats.problems == {}, answers.stats.problems
    assert answers.stats.by_form == {"document": 4, "json_lines": 3}


def test_a_path_that_is_no_data_file_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "catalogue.csv").write_text("doi\n10.5555/showcase.article\n")
    (tmp_path / "empty").mkdir()
    for path, said in ((tmp_path / "catalogue.csv", "not a data file"),
                       (tmp_path / "empty", "the folder holds no data file"),
                       (tmp_path / "missing.tar", "no such file or folder")):
        done = forked.run([*CLI, "enrich", str(tmp_path / "catalogue.csv"), "-o",
                               str(tmp_path / "out.csv"), "--snapshot", str(path),
                               "--source", "snapshot"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
        assert done.returncode == 2, done.stderr
        assert said in done.stderr and "Traceback" not in done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert not (tmp_path / "out.csv").exists()


# -- bad files: counted, the rest used ------------------------------------------------------------
def test_damage_is_counted_by_reason_and_the_rest_of_the_file_is_used(tmp_path: Path) -> None:
    items = [crossref_item_for(w) for w in CROSSREF_WORKS]
    good = [_line(item) for item in items]
    body = b"\n".join([good[0], b'{"DOI": "10.5555/cut', good[1], b'{"title": "no DOI"}',
                       b'["a", "list"]', b'{"DOI": 12}', b"\xff\xfe not json", good[2],
                       b'{"DOI": "10.5555/deep", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
                       good[3]]) + b"\n"
    cut = gzip.compress(b"\n".join(good[4:7]) + b"\n" + good[7])
    cut = cut[: len(cut) - 40]  # a member cut short: the lines before the cut are used
    with tarfile.open(tmp_path / "crossref.tar", "w") as tar:
        add_member(tar, "0.json.gz", gzip.compress(body))
        add_member(tar, "1.json.gz", cut)
        add_member(tar, "2.csv.gz", gzip.compress(b"doi,state\n10.5555/x,findable\n"))
        add_member(tar, "3.bin", b"\x00\x01\x02binary")
        add_member(tar, "4.json.gz", gzip.compress(b'{"items": [' + good[8] + b", 7]}"))
    with open(tmp_path / "crossref.tar", "ab") as handle:  # bytes after the tar's end
        handle.write(b"garbage that is no tar header" * 40)
    index, scans, rows = _scan([tmp_path / "crossref.tar"])
    assert scans["0.json.gz"].problems == {"bad_json": 1, "no_doi": 2, "not_a_record": 1,
                                           "not_utf8": 1, "too_deep": 1}
    assert scans["1.json.gz"].problems == {"truncated_gzip": 1}
    assert scans["2.csv.gz"].problems == {"doi_list": 1}
    assert scans["3.bin"].problems == {"not_records": 1}
    assert scans["4.json.gz"].problems == {"not_a_record": 1}
    assert [s.reason for s in index.skipped] == ["trailing_data"]
    found = {w.doi.upper() for w in CROSSREF_WORKS[:9]} - {CROSSREF_WORKS[7].doi.upper()}
    assert set(rows) == found


def test_a_damaged_tar_header_ends_the_listing_and_says_so(tmp_path: Path) -> None:
    items = [crossref_item_for(w) for w in CROSSREF_WORKS]
    path = crossref_tar(tmp_path / "crossref.tar", items, per_file=2)
    with tarfile.open(path) as opened:
        third = opened.getmembers()[2].offset
    data = bytearray(path.read_bytes())
    data[third + 148:third + 156] = b"99999999"  # its checksum no longer matches
    path.write_bytes(bytes(data))
    index, scans, rows = _scan([path])
    assert list(scans) == ["0.json.gz", "1.json.gz"]
    assert [(s.reason, "after 2 entries" in s.detail) for s in index.skipped] == [
        ("damaged_tar", True)]
    assert len(rows) == 4


def test_a_tar_cut_short_reads_what_it_holds(tmp_path: Path) -> None:
    items = [crossref_item_for(w) for w in CROSSREF_WORKS]
    path = crossref_tar(tmp_path / "crossref.tar", items, per_file=3)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    index, scans, rows = _scan([path])
    assert "truncated_tar" in {s.reason for s in index.skipped} or any(
        "truncated_gzip" in s.problems for s in scans.values())
    assert rows and set(rows) < {w.doi.upper() for w in CROSSREF_WORKS}


def _trunc(number: int) -> dict[str, Any]:
    return {"DOI": f"10.1000/trunc.{number}", "title": ["t"], "type": "journal-article"}


def _whole_before_cut(cut: bytes) -> int:
    """How many ``_trunc`` records end in what a cut gzip member inflates to."""
    import re

    inflated = zlib.decompressobj(31).decompress(cut)
    return len(re.findall(rb'"journal-article"\s*\}', inflated))


@pytest.mark.parametrize("shape", ["items", "api_page", "array", "small"])
def test_a_document_cut_short_keeps_every_whole_record_before_the_cut(
        tmp_path: Path, shape: str) -> None:
    """Crossref's ``{"items": [...]}`` member cut short lost every record (the whole document
    was parsed or nothing); each whole record before the cut is now used, the member still
    counted as cut short."""
    count = 30 if shape == "small" else 2000
    records = [_trunc(n) for n in range(count)]
    document = {
        "items": b'{"items":[' + b",".join(map(_line, records)) + b"]}",
        "small": b'{"items":[' + b",".join(map(_line, records)) + b"]}",
        "api_page": json.dumps({"status": "ok", "message-type": "work-list", "message": {
            "facets": {}, "total-results": count, "items": records}}, indent=2).encode(),
        "array": json.dumps(records, indent=1).encode(),
    }[shape]
    packed = gzip.compress(document)
    cut = packed[: len(packed) - 16 if shape == "small" else len(packed) // 2]
    whole = _whole_before_cut(cut)
    assert 0 < whole < count
    if shape == "small":  # stops within the bytes read to tell the member's form
        assert len(zlib.decompressobj(31).decompress(cut)) < 4096
    with tarfile.open(tmp_path / "crossref.tar", "w") as tar:
        add_member(tar, "1.json.gz", cut)
    _, scans, rows = _scan([tmp_path / "crossref.tar"])
    scanned = scans["1.json.gz"]
    assert scanned.problems == {"truncated_gzip": 1}
    assert scanned.detail == ("the gzip data ends early (a file cut short); the records "
                              "before the cut are used")
    assert (scanned.form, scanned.records) == ("document", whole)
    assert set(rows) == {f"10.1000/TRUNC.{n}" for n in range(whole)}


@pytest.mark.parametrize(("first", "reason"), [
    (b"[1, 2", "bad_json"), (b"[" * 100_000, "too_deep"), (b'["a", "list"]', "not_a_record")])
def test_a_json_lines_member_whose_first_line_is_a_corrupt_array_loses_that_line_only(
        tmp_path: Path, first: bytes, reason: str) -> None:
    """A first line beginning with ``[`` made the member a document: one corrupt line lost the
    whole member. Now only that line is skipped; a document spanning lines is read whole."""
    lines = [_line({"DOI": f"10.3000/j{n}", "title": ["x"], "type": "journal-article"})
             for n in range(1, 5)]
    many = [_line(_trunc(n)) for n in range(300)]
    cut = gzip.compress(first + b"\n" + b"\n".join(many) + b"\n")
    cut = cut[: len(cut) // 2]
    inflated = zlib.decompressobj(31).decompress(cut)
    whole = inflated.count(b"\n") - 1  # the lines after the first that end before the cut
    assert 0 < whole < 300
    pretty = [{"DOI": f"10.3000/p{n}", "title": ["y"], "type": "journal-article"}
              for n in range(3)]
    with tarfile.open(tmp_path / "mixed.tar", "w") as tar:
        add_member(tar, "lines.jsonl.gz", gzip.compress(first + b"\n" + b"\n".join(lines)
                                                         + b"\n"))
        add_member(tar, "cut.jsonl.gz", cut)
        # Documents spanning lines: pretty-printed, and one record a line, commas leading.
        add_member(tar, "pretty.json.gz", gzip.compress(json.dumps(pretty, indent=2).encode()))
        add_member(tar, "leading.json.gz", gzip.compress(
            b"[\n" + b"\n,".join(map(_line, pretty)) + b"\n]\n"))
    _, scans, rows = _scan([tmp_path / "mixed.tar"])
    summary = {name: (s.form, s.records, dict(s.problems)) for name, s in scans.items()}
    assert summary == {
        "lines.jsonl.gz": ("json_lines", 5, {reason: 1}),
        "cut.jsonl.gz": ("json_lines", whole + 1, {reason: 1, "truncated_gzip": 1}),
        "pretty.json.gz": ("document", 3, {}),
        "leading.json.gz": ("document", 3, {}),
    }
    assert set(rows) == ({f"10.3000/J{n}" for n in range(1, 5)}
                         | {f"10.3000/P{n}" for n in range(3)}
                         | {f"10.1000/TRUNC.{n}" for n in range(whole)})


def test_json_lines_past_max_document_bytes_after_a_corrupt_first_line_are_streamed(
        tmp_path: Path) -> None:
    """Taken for a document by its first line, a member over ``max_document_bytes`` was
    skipped whole (``document_too_large``); JSON lines, it is read on as JSON lines."""
    body = b"[1, 2\n" + b"\n".join(_line(_trunc(n)) for n in range(100)) + b"\n"
    assert len(body) > 4 * 1024
    (tmp_path / "part_0000.jsonl.gz").write_bytes(gzip.compress(body))
    _, scans, rows = _scan([tmp_path / "part_0000.jsonl.gz"], max_document_bytes=1024)
    scanned = scans["part_0000.jsonl.gz"]
    assert (scanned.form, scanned.records, dict(scanned.problems)) == (
        "json_lines", 101, {"bad_json": 1})
    assert set(rows) == {f"10.1000/TRUNC.{n}" for n in range(100)}


def test_bytes_that_are_not_utf8_in_a_record_are_counted_as_not_utf8(tmp_path: Path) -> None:
    """A wanted record whose text is not UTF-8 was counted ``bad_json`` (the reason of a cut
    line); it is ``not_utf8``, as documented, and the member's other records are used."""
    from airflow_doi.cli.enrich import snapshot_lines

    crossref = (b'{"items": [{"DOI": "10.4000/cafe", "title": ["caf\xe9 \xff"]}, '
                b'{"DOI": "10.4000/ok", "title": ["fine"], "type": "journal-article"}]}')
    datacite = (b'{"doi": "10.4001/bad", "titles": [{"title": "bad \xc3\x28 utf8"}]}\n'
                b'{"doi": "10.4001/ok", "titles": [{"title": "fine"}], "types": '
                b'{"resourceTypeGeneral": "Dataset"}}\n')
    with tarfile.open(tmp_path / "files.tar", "w") as tar:
        add_member(tar, "0.json.gz", gzip.compress(crossref))
        add_member(tar, "dois/updated_2025-03/part_0000.jsonl.gz", gzip.compress(datacite))
    _, scans, rows = _scan([tmp_path / "files.tar"])
    assert {name: dict(s.problems) for name, s in scans.items()} == {
        "0.json.gz": {"not_utf8": 1}, "dois/updated_2025-03/part_0000.jsonl.gz": {"not_utf8": 1}}
    assert set(rows) == {"10.4000/OK", "10.4001/OK"}
    keys = {"10.4000/CAFE", "10.4000/OK", "10.4001/BAD", "10.4001/OK"}
    answers = answer_from_snapshots([tmp_path / "files.tar"], {k: k for k in keys},
                                    settings=SETTINGS, workers=1)
    assert set(answers.results) == {"10.4000/OK", "10.4001/OK"}
    assert snapshot_lines(answers.stats, 2, 2, "snapshot")[1:] == [
        "data files: skipped 2 x not_utf8 (bytes that are not UTF-8) in files.tar:0.json.gz, "
        "files.tar:dois/updated_2025-03/part_0000.jsonl.gz"]


# -- hostile files: bounded memory and time, nothing written outside ------------------------------
def _peak_mib(command: list[str], **kwargs: Any) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``command``; its peak RSS (MiB), measured by a wrapper that is its only child."""
    wrapper = ("import resource, subprocess, sys, json; done = subprocess.run(sys.argv[1:], "
               "capture_output=True, text=True); print(json.dumps([done.returncode, "
               "done.stdout, done.stderr, resource.getrusage(resource.RUSAGE_CHILDREN)"
               ".ru_maxrss]))")
    done = subprocess.run([sys.executable, "-c", wrapper, *command], capture_output=True,
                          text=True, **kwargs)
    code, out, err, peak = json.loads(done.stdout)
    return subprocess.CompletedProcess(command, code, out, err), peak / 1024


def _bomb_member(size: int) -> bytes:
    """A JSON line that goes on for ``size`` bytes of spaces, as one gzip member (about a
    thousandth of that)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    parts = [compressor.compress(b'{"DOI": "10.5555/bomb", "x": ')]
    parts += [compressor.compress(block) for _ in range(size >> 20)]
    return b"".join([*parts, compressor.flush()])


def _long_line(size: int) -> bytes:
    """A JSON line of ``size`` bytes with no newline, gzipped (about 60 times smaller)."""
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    parts = [compressor.compress(b'{"DOI": "10.5555/long", "title": "')]
    for number in range(size >> 20):
        block = os.urandom(8192).hex().encode()  # 16 KiB, repeated within the window
        parts.append(compressor.compress((block * 64)[: 1 << 20]))
        del number
    return b"".join([*parts, compressor.flush()])


def test_hostile_files_cost_bounded_memory_and_time_and_write_nothing_outside(
        tmp_path: Path) -> None:
    good = [_line(crossref_item_for(w)) for w in CROSSREF_WORKS]
    bomb = _bomb_member(1 << 30) * 10  # 10 GiB of zeros in about 10 MiB
    nested = io.BytesIO()
    with tarfile.open(fileobj=nested, mode="w") as inner:
        add_member(inner, "bomb.json.gz", bomb)
    tar_path = tmp_path / "hostile.tar"
    with tarfile.open(tar_path, "w", format=tarfile.GNU_FORMAT) as tar:
        add_member(tar, "../escaped.json.gz", gzip.compress(good[0] + b"\n"))
        add_member(tar, "/etc/airflow-doi-test.json.gz", gzip.compress(good[1] + b"\n"))
        cut = gzip.compress(good[2] + b"\n" + good[6])
        add_member(tar, "name\x1b[31mred\x07.json.gz", cut[:-30])  # reported: cut short
        add_member(tar, "long-line.jsonl.gz", _long_line(1 << 30))
        add_member(tar, "bomb.jsonl.gz", bomb)
        big = b'{"DOI": "10.5555/big", "title": "' + b"x" * (50 << 20) + b'"}'
        add_member(tar, "big-record.jsonl.gz", gzip.compress(
            good[3] + b"\n" + big + b"\n" + good[4] + b"\n", 1))
        add_member(tar, "deep.jsonl.gz", gzip.compress(
            b'{"DOI": "10.5555/deep", "a": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\n"
            + good[5] + b"\n"))
    # A few KB of gzipped tar that inflates (through the bomb inside) to many GB.
    (tmp_path / "bomb.tar.gz").write_bytes(gzip.compress(nested.getvalue(), 9))
    assert (tmp_path / "bomb.tar.gz").stat().st_size < 100_000
    dois = [w.doi for w in CROSSREF_WORKS[:6]] + ["10.5555/long", "10.5555/big",
                                                  "10.5555/deep"]
    source = tmp_path / "in.csv"
    source.write_text("doi\n" + "\n".join(dois) + "\n")
    work = tmp_path / "work"
    work.mkdir()
    before = set(os.listdir(tmp_path))
    done, peak = _peak_mib(
        [*CLI, "enrich", str(source), "-o", str(work / "out.csv"), "--snapshot", str(tar_path),
         "--snapshot", str(tmp_path / "bomb.tar.gz"), "--source", "snapshot", "--workers", "1"],
        cwd=work, timeout=300)
    assert done.returncode == 0, done.stderr
    assert peak < 300, f"peak RSS {peak:.0f} MiB"
    assert set(os.listdir(tmp_path)) == before and os.listdir(work) == ["out.csv"]
    assert not Path("/etc/airflow-doi-test.json.gz").exists()
    assert not (tmp_path.parent / "escaped.json.gz").exists()
    rows = {r["doi"]: r for r in _rows(work / "out.csv")}
    assert all(rows[d]["metadata_status"] == "ok" for d in dois[:6])
    assert {rows[d]["metadata_status"] for d in dois[6:]} == {"not_in_snapshot"}
    said = done.stderr
    # The bombs' endless lines are too long long before they stop for their inflation.
    for reason in ("x record_too_large", "2 x inflation_limit", "1 x too_deep",
                   "1 x truncated_gzip"):
        assert reason in said, said
    assert "\x1b" not in said and "\x07" not in said and "name\\x1b[31mred\\x07" in said


def _rows(path: Path) -> list[dict[str, str]]:
    from tests.conftest import read_output_csv

    return read_output_csv(path)


# -- parallel, and resumed ------------------------------------------------------------------------
def test_two_workers_find_what_one_finds(tmp_path: Path) -> None:
    works = [work_for(f"10.5555/par.{i}") for i in range(3000)]
    items = [crossref_item_for(w) for w in works if w.agency == "crossref"]
    crossref_tar(tmp_path / "c.tar", items, per_file=200)
    wanted = {w.doi.upper(): w.doi for w in works[::2]}
    one = answer_from_snapshots([tmp_path], wanted, settings=SETTINGS, workers=1)
    two = answer_from_snapshots([tmp_path], wanted, settings=SETTINGS, workers=2)
    assert one.stats.workers == 1 and two.stats.workers == 2
    assert {k: r.as_row() for k, r in one.results.items()} == {
        k: r.as_row() for k, r in two.results.items()}
    assert len(one.results) == sum(1 for w in works[::2] if w.agency == "crossref")


def test_the_newest_record_of_a_key_wins_across_files(tmp_path: Path) -> None:
    work = CROSSREF_WORKS[0]
    old = {**crossref_item_for(work), "indexed": {"date-time": "2024-01-01T00:00:00Z"}}
    new = {**crossref_item_for(replace(work, title="Revised title")),
           "indexed": {"date-time": "2025-06-01T00:00:00Z"}}
    jsonl_gz(tmp_path / "a-new.jsonl.gz", [new])
    jsonl_gz(tmp_path / "b-old.jsonl.gz", [old])
    answers = answer_from_snapshots([tmp_path], {work.doi.upper(): work.doi},
                                    settings=SETTINGS, workers=1)
    assert answers.results[work.doi.upper()].title == "Revised title"


KILLED = """
import sys, time
from airflow_doi.metadata import fetch
from airflow_doi.metadata.cache import MetadataCache
store = MetadataCache.store_member
def slow(self, *args):
    store(self, *args)
    done = self._conn.execute("select count(*) from snapshot_members").fetchone()[0]
    if done >= int(sys.argv[3]):
        time.sleep(60)  # killed here
MetadataCache.store_member = slow
fetch(open(sys.argv[1]).read().split(), snapshot=[sys.argv[2]], source="snapshot",
      cache=sys.argv[4], snapshot_workers=1)
"""


def test_a_killed_scan_resumes_at_the_members_it_had_not_finished(tmp_path: Path) -> None:
    import sqlite3
    import time

    works = [work_for(f"10.5555/kill.{i}") for i in range(1500)]
    items = [crossref_item_for(w) for w in works if w.agency == "crossref"]
    crossref_tar(tmp_path / "c.tar", items, per_file=100)
    (tmp_path / "keys.txt").write_text("\n".join(w.doi for w in works))
    cache = tmp_path / "cache.sqlite"
    child = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path / "keys.txt"),
                              str(tmp_path / "c.tar"), "3", str(cache)])
    deadline = time.monotonic() + 120
    stored: list[tuple[str, int]] = []
    while time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.2)
        if cache.exists():
            with sqlite3.connect(cache) as connection:
                try:
                    done = connection.execute("select count(*) from snapshot_members").fetchone()
                except sqlite3.OperationalError:
                    continue
                if done[0] >= 3:
                    stored = connection.execute("select key, rowid from metadata").fetchall()
                    break
    child.kill()
    child.wait()
    assert len(stored) > 100
    stats = MetadataStats()
    results = fetch([w.doi for w in works], snapshot=[tmp_path / "c.tar"], source="snapshot",
                    cache=cache, stats=stats)
    assert stats.snapshot.resumed == 3 and stats.snapshot.members == len(items) // 100 + (
        len(items) % 100 > 0) - 3
    assert {r.metadata_status for r in results} <= {"ok", "not_in_snapshot"}
    assert sum(r.metadata_status == "ok" for r in results) == len(items)
    with sqlite3.connect(cache) as connection:
        after = dict(connection.execute("select key, rowid from metadata").fetchall())
    assert all(after[key] == rowid for key, rowid in stored)  # never written again


def test_a_worker_killed_costs_its_member_which_the_next_run_reads(tmp_path: Path) -> None:
    import signal

    from airflow_doi.metadata.cache import MetadataCache

    works = [work_for(f"10.5555/wk.{i}") for i in range(40000)]
    items = [crossref_item_for(w) for w in works if w.agency == "crossref"]
    crossref_tar(tmp_path / "c.tar", items, per_file=len(items) // 6 + 1)
    wanted = {w.doi.upper(): w.doi for w in works if w.agency == "crossref"}
    killed: list[int] = []

    def kill_one(event: Any) -> None:
        if event.members_done >= 1 and not killed:  # one member in: kill a worker mid-member
            me = os.getpid()
            with open(f"/proc/{me}/task/{me}/children") as children:
                workers = [int(p) for p in children.read().split()
                           if "snapshot.worker" in Path(f"/proc/{p}/cmdline").read_text()]
            os.kill(workers[0], signal.SIGKILL)
            killed.append(workers[0])

    with MetadataCache(tmp_path / "cache.sqlite") as cache:
        first = answer_from_snapshots([tmp_path / "c.tar"], wanted, settings=SETTINGS,
                                      workers=2, store=_CacheStore(cache), scan_id="s",
                                      progress=kill_one)
        assert killed and first.stats.problems == {"worker_died": 1}
        assert len(cache.finished_members("s")) == first.stats.members - 1
        again = answer_from_snapshots([tmp_path / "c.tar"], wanted, settings=SETTINGS,
                                      workers=2, store=_CacheStore(cache), scan_id="s")
    assert again.stats.resumed == first.stats.members - 1 and again.stats.members == 1
    assert len(first.results) + len(again.results) == len(wanted)


class _CacheStore:
    """A metadata cache as the scan's member store (what ``fetch`` does)."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache

    def finished_members(self, scan: str) -> set[str]:
        return set(self.cache.finished_members(scan))

    def store_member(self, scan: str, member: Any, results: list[Any]) -> None:
        from airflow_doi.metadata.batch import _cached

        self.cache.store_member(scan, member.identity, member.records,
                                [_cached(r) for r in results], member.newest)


def test_a_gzip_member_may_begin_in_the_last_byte_of_a_read() -> None:
    """Concatenated gzip (pigz, bgzip): the next member's first byte may be all a read ends
    with; it is judged once its header is there (it was called damaged, its records lost)."""
    from airflow_doi.metadata.snapshot.files import inflate

    first, second = gzip.compress(b'{"DOI": "10.1/a"}\n'), gzip.compress(b'{"DOI": "10.1/b"}\n')
    reads = [first + second[:1], second[1:]]
    out = b"".join(inflate(lambda n: reads.pop(0) if reads else b"", Limits()))
    assert out == b'{"DOI": "10.1/a"}\n{"DOI": "10.1/b"}\n'
