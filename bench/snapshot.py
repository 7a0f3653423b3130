"""Registry scale (#39): a catalogue's keys found in the agencies' public data files.

Generates (once, kept in ``--data``) data files shaped like the agencies' own, of realistic
records: Crossref ``/works`` records with reference lists (0 to 120 references, most with a
DOI), author lists (1 to 12 authors, one record in a hundred with 100 to 600, affiliations and
ORCIDs), funders, licences, links and JATS abstracts; DataCite JSON:API records with creators,
descriptions, subjects and related identifiers:

* ``crossref-jsonl/part-NN.jsonl.gz``: Crossref's newer form, JSON lines, ``--crossref``
  records in 20 files;
* ``crossref.tar``: the same records in Crossref's classic form, a plain tar of gzipped
  ``{"items": [...]}`` files of 3,000 records;
* ``datacite.tar``: DataCite's data file, ``dois/updated_YYYY-MM/part_NNNN.jsonl.gz`` parts of
  10,000 JSON:API records and a ``.csv.gz`` list per month, ``--datacite`` records.

Then, against a catalogue of ``--keys`` keys (90% of them in the files, 10% not), each form is
scanned by :func:`airflow_doi.metadata.snapshot.source.answer_from_snapshots` in a child
process with 1 and 2 workers, and printed, in one run:

* records/s and MB/s (as stored, compressed) in all and per worker;
* the decompression floor: the same bytes through ``gzip -dc > /dev/null`` (``tar -xOf |
  gzip -dc`` for the tar), and the scan's speed as a share of it (goals: JSON lines >= 0.5x on
  one worker, the tar >= 0.3x);
* two workers against one (goal: >= 1.7x);
* peak RSS of the scan's process and its workers together, over the first quarter of the
  bytes and over all of them (goal: flat; the found rows go to a store as the operator's do,
  not kept: ``fetch`` keeps them, a few KB a key, for the rows it returns);
* keys found against the keys the files hold (goal: all).

Also, for the JSON lines, DuckDB reading the same files itself (``read_ndjson_objects``,
``json_extract_string``, a semi-join on the keys), as the engine's own bulk path.

    .venv/bin/python bench/snapshot.py [--crossref 2000000] [--datacite 2000000]
        [--keys 200000] [--data /tmp/airflow-doi-snapshot-bench]

Generating the files takes about 15 minutes on two cores the first time (about 5 GB); the
measurements about as long.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORDS = (
    "analysis of the effect on model data system study results method using based approach "
    "evaluation performance high low new novel structure function protein cell gene "
    "expression patients clinical trial temperature pressure water soil climate change "
    "network learning deep neural graph theory quantum energy solar wind ocean coastal "
    "urban rural health policy economic market trade growth development education school "
    "children adults cohort survey review meta systematic synthesis properties thermal "
    "mechanical optical electronic magnetic surface interface layer film thin membrane"
).split()
FAMILIES = ("Smith Wang Li Zhang Garcia Müller Kowalski Nguyen Rossi Silva Tanaka Kim Okafor "
            "Johansson Dubois Novak Haddad Ivanova Fernández Ó'Brien Lindqvist Chen Patel "
            "Suzuki Cohen Mensah Moreau Andersen Schmidt Yilmaz").split()
GIVEN = ("Anna Ben Carla David Elif Fatima George Hana Ivan Julia Kofi Lena Marco Nadia "
         "Omar Pia Quentin Rosa Sven Tariq Uma Viktor Wen Xenia Yusuf Zoe").split()
PUBLISHERS = ("Elsevier BV", "Springer Science and Business Media LLC", "Wiley",
              "Informa UK Limited", "American Chemical Society (ACS)", "IEEE",
              "Oxford University Press (OUP)", "MDPI AG", "SAGE Publications")
JOURNALS = [f"Journal of {a.title()} {b.title()}" for a in WORDS[:20] for b in WORDS[20:40]]


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


def crossref_doi(i: int) -> str:
    return f"10.{1000 + i % 9000}/bench.{i:09d}"


def datacite_doi(i: int) -> str:
    return f"10.{5000 + i % 4000}/ZENODO.{i:09d}"


def crossref_record(i: int) -> dict[str, Any]:
    rng = random.Random(i)
    doi = crossref_doi(i)
    year = rng.randint(1950, 2025)
    authors = rng.randint(100, 600) if rng.random() < 0.01 else rng.randint(1, 12)
    author = []
    for k in range(authors):
        person: dict[str, Any] = {
            "given": rng.choice(GIVEN), "family": rng.choice(FAMILIES),
            "sequence": "first" if k == 0 else "additional",
            "affiliation": [{"name": f"Department of {words(rng, 2).title()}, University of "
                                     f"{rng.choice(FAMILIES)}"}] if rng.random() < 0.7 else []}
        if rng.random() < 0.3:
            person["ORCID"] = (f"https://orcid.org/0000-000{rng.randint(1, 9)}-"
                               f"{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}")
            person["authenticated-orcid"] = rng.random() < 0.5
        author.append(person)
    references = []
    for k in range(int(rng.expovariate(1 / 28)) if rng.random() < 0.8 else 0):
        reference: dict[str, Any] = {"key": f"{doi}_bib{k}", "first-page": str(rng.randint(1, 900)),
                                     "volume": str(rng.randint(1, 90)),
                                     "author": rng.choice(FAMILIES),
                                     "year": str(rng.randint(1900, year))}
        if rng.random() < 0.7:
            reference["DOI"] = crossref_doi(rng.randrange(50_000_000)).lower()
            reference["doi-asserted-by"] = rng.choice(("crossref", "publisher"))
            reference["journal-title"] = rng.choice(JOURNALS)
        else:
            reference["unstructured"] = f"{rng.choice(FAMILIES)} et al. {words(rng, 9)}. " \
                                        f"{rng.choice(JOURNALS)} {rng.randint(1, 90)} ({year})."
        references.append(reference)
    stamp = f"{2024 + rng.randint(0, 1)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    record: dict[str, Any] = {
        "indexed": {"date-parts": [[int(stamp[:4]), int(stamp[5:7]), int(stamp[8:])]],
                    "date-time": f"{stamp}T{rng.randint(0, 23):02d}:12:33Z",
                    "timestamp": 1700000000000 + i},
        "reference-count": len(references), "publisher": rng.choice(PUBLISHERS),
        "issue": str(rng.randint(1, 12)),
        "license": [{"start": {"date-parts": [[year, 1, 1]], "date-time": f"{year}-01-01T00:00:00Z",
                               "timestamp": 0},
                     "content-version": "vor", "delay-in-days": 0,
                     "URL": "https://creativecommons.org/licenses/by/4.0/"}],
        "content-domain": {"domain": ["elsevier.com", "sciencedirect.com"],
                           "crossmark-restriction": True},
        "short-container-title": [rng.choice(JOURNALS)[:20]],
        "published-print": {"date-parts": [[year, rng.randint(1, 12)]]},
        "DOI": doi, "type": rng.choice(("journal-article",) * 8 + ("book-chapter",
                                                                   "proceedings-article")),
        "created": {"date-parts": [[year, 1, 2]], "date-time": f"{year}-01-02T10:00:00Z",
                    "timestamp": 0},
        "page": f"{rng.randint(1, 500)}-{rng.randint(501, 999)}",
        "source": "Crossref", "is-referenced-by-count": rng.randint(0, 500),
        "title": [words(rng, rng.randint(6, 18)).capitalize()], "prefix": doi.split("/")[0],
        "volume": str(rng.randint(1, 120)), "author": author, "member": str(rng.randint(1, 9999)),
        "reference": references, "container-title": [rng.choice(JOURNALS)],
        "original-title": [], "language": "en",
        "link": [{"URL": f"https://api.example.org/fulltext/{doi}", "content-type": "text/xml",
                  "content-version": "vor", "intended-application": "text-mining"}],
        "deposited": {"date-parts": [[2024, 3, 1]], "date-time": "2024-03-01T00:00:00Z",
                      "timestamp": 1709251200000},
        "score": 1, "resource": {"primary": {"URL": f"https://publisher.example/article/{i}"}},
        "subtitle": [], "short-title": [], "issued": {"date-parts": [[year, rng.randint(1, 12)]]},
        "references-count": len(references), "alternative-id": [f"S{i:012d}"],
        "URL": f"https://doi.org/{doi}", "relation": {},
        "ISSN": [f"{rng.randint(1000, 9999)}-{rng.randint(100, 999)}X"],
        "issn-type": [{"type": "print",
                       "value": f"{rng.randint(1000, 9999)}-{rng.randint(100, 999)}X"}],
        "subject": [words(rng, 2).title()],
    }
    if rng.random() < 0.25:
        record["funder"] = [{"DOI": "10.13039/501100001809", "name": "Example Science Foundation",
                             "doi-asserted-by": "publisher", "award": [str(rng.randint(1, 10**8))]}]
        record = {"funder": record.pop("funder"), **record}  # before DOI, as real records have it
    if rng.random() < 0.35:
        record["abstract"] = f"<jats:p>{words(rng, rng.randint(80, 260))}</jats:p>"
    return record


def datacite_record(i: int) -> dict[str, Any]:
    rng = random.Random(-i - 1)
    doi = datacite_doi(i).lower()
    year = rng.randint(2000, 2025)
    creators = [{"name": f"{rng.choice(FAMILIES)}, {rng.choice(GIVEN)}", "nameType": "Personal",
                 "givenName": rng.choice(GIVEN), "familyName": rng.choice(FAMILIES),
                 "affiliation": [], "nameIdentifiers": []} for _ in range(rng.randint(1, 8))]
    related = [{"relatedIdentifier": datacite_doi(rng.randrange(10**7)).lower(),
                "relatedIdentifierType": "DOI",
                "relationType": rng.choice(("IsVersionOf", "IsPartOf", "References", "IsCitedBy"))}
               for _ in range(rng.randint(0, 12))]
    attributes: dict[str, Any] = {
        "doi": doi, "prefix": doi.split("/")[0], "suffix": doi.split("/")[1],
        "identifiers": [{"identifier": f"https://zenodo.example/record/{i}",
                         "identifierType": "URL"}],
        "alternateIdentifiers": [], "creators": creators,
        "titles": [{"title": words(rng, rng.randint(4, 14)).capitalize()}],
        "publisher": "Zenodo", "container": {}, "publicationYear": year,
        "subjects": [{"subject": words(rng, 2)} for _ in range(rng.randint(0, 5))],
        "contributors": [], "dates": [{"date": f"{year}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
                                       "dateType": "Issued"}],
        "language": "en", "types": {"ris": "DATA", "bibtex": "misc", "citeproc": "dataset",
                                     "schemaOrg": "Dataset", "resourceTypeGeneral": "Dataset"},
        "relatedIdentifiers": related, "sizes": [f"{rng.randint(1, 999)} MB"], "formats": [],
        "version": f"{rng.randint(1, 9)}.0",
        "rightsList": [{"rights": "Creative Commons Attribution 4.0 International",
                        "rightsUri": "https://creativecommons.org/licenses/by/4.0/legalcode"}],
        "descriptions": [{"description": words(rng, rng.randint(20, 160)),
                          "descriptionType": "Abstract"}],
        "geoLocations": [], "fundingReferences": [], "url": f"https://zenodo.example/record/{i}",
        "contentUrl": None, "metadataVersion": 1, "schemaVersion":
        "http://datacite.org/schema/kernel-4", "source": "api", "isActive": True,
        "state": "findable", "reason": None, "viewCount": 0, "downloadCount": 0,
        "created": f"{year}-05-01T10:00:00.000Z", "registered": f"{year}-05-01T10:00:01.000Z",
        "published": str(year), "updated": f"2025-0{rng.randint(1, 9)}-15T08:00:00.000Z",
    }
    return {"id": doi, "type": "dois", "attributes": attributes,
            "relationships": {"client": {"data": {"id": "cern.zenodo", "type": "clients"}}}}


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _jsonl_part(args: tuple[Path, int, int]) -> None:
    path, start, stop = args
    with gzip.open(path, "wb", compresslevel=6) as out:
        for i in range(start, stop):
            out.write(_line(crossref_record(i)) + b"\n")


def _items_member(args: tuple[int, int]) -> tuple[int, bytes]:
    start, stop = args
    body = b'{"items":[' + b",".join(_line(crossref_record(i)) for i in range(start, stop)) + b"]}"
    return start, gzip.compress(body, 6, mtime=0)


def _datacite_part(args: tuple[int, int]) -> tuple[int, bytes]:
    start, stop = args
    body = b"".join(_line(datacite_record(i)) + b"\n" for i in range(start, stop))
    return start, gzip.compress(body, 6, mtime=0)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1_735_689_600
    tar.addfile(info, io.BytesIO(data))


def generate(data: Path, crossref: int, datacite: int) -> None:
    """The three data files, unless ``data`` already holds them for these counts."""
    stamp = data / f"generated-{crossref}-{datacite}"
    if stamp.exists():
        return
    shutil.rmtree(data, ignore_errors=True)
    (data / "crossref-jsonl").mkdir(parents=True)
    started = time.monotonic()
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        files = 20
        step = -(-crossref // files)
        list(pool.map(_jsonl_part, [(data / "crossref-jsonl" / f"part-{n:02d}.jsonl.gz", n * step,
                                     min(crossref, (n + 1) * step)) for n in range(files)]))
        print(f"  crossref JSON lines: {time.monotonic() - started:.0f}s", flush=True)
        with tarfile.open(data / "crossref.tar", "w", format=tarfile.GNU_FORMAT) as tar:
            for start, member in pool.map(_items_member, [(s, min(crossref, s + 3000))
                                                          for s in range(0, crossref, 3000)]):
                _add(tar, f"{start // 3000}.json.gz", member)
        print(f"  crossref tar: {time.monotonic() - started:.0f}s", flush=True)
        with tarfile.open(data / "datacite.tar", "w", format=tarfile.GNU_FORMAT) as tar:
            ranges = [(s, min(datacite, s + 10000)) for s in range(0, datacite, 10000)]
            for number, (_, member) in enumerate(pool.map(_datacite_part, ranges)):
                month = f"2025-{1 + number * 12 // max(1, len(ranges)):02d}"
                _add(tar, f"dois/updated_{month}/part_{number:04d}.jsonl.gz", member)
            _add(tar, "dois/updated_2025-01.csv.gz", gzip.compress(b"doi,state\n", 6))
        print(f"  datacite tar: {time.monotonic() - started:.0f}s", flush=True)
    stamp.touch()


def keys(crossref: int, datacite: int, count: int, seed: int = 7) -> list[str]:
    """``count`` catalogue keys: 90% of them in the files (Crossref's and DataCite's in
    proportion), 10% not."""
    rng = random.Random(seed)
    present = int(count * 0.9)
    share = crossref / (crossref + datacite)
    chosen = [crossref_doi(i) for i in rng.sample(range(crossref), int(present * share))]
    chosen += [datacite_doi(i) for i in rng.sample(range(datacite), present - len(chosen))]
    chosen += [f"10.9/absent.{i}" for i in range(count - len(chosen))]
    return [k.upper() for k in chosen]


SCANNER = """
import json, os, sys, time
from datetime import datetime, timezone, timedelta
sys.path.insert(0, os.path.dirname(sys.argv[4]))
from snapshot import tree_rss
from airflow_doi.metadata.snapshot import index_snapshots
from airflow_doi.metadata.snapshot.records import RowSettings
from airflow_doi.metadata.snapshot.source import answer_from_snapshots
paths, workers, keys_file = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
keys = open(keys_file).read().split()
now = datetime.now(timezone.utc)
index = index_snapshots(paths)
peaks = {"quarter": 0, "all": 0}
def progress(event):
    rss = tree_rss(os.getpid())
    peaks["all"] = max(peaks["all"], rss)
    if event.bytes_done <= event.bytes_total / 4:
        peaks["quarter"] = max(peaks["quarter"], rss)
started = time.monotonic()
answers = answer_from_snapshots(paths, {k: k for k in keys}, workers=workers, index=index,
                                settings=RowSettings(now, now + timedelta(days=30)),
                                progress=progress, keep=False)
elapsed = time.monotonic() - started
print(json.dumps({"seconds": elapsed, "records": answers.stats.records,
                  "found": answers.stats.found, "bytes": index.total_bytes,
                  "members": answers.stats.members, "problems": dict(answers.stats.problems),
                  "rss_quarter": peaks["quarter"], "rss_all": peaks["all"]}))
"""


def tree_rss(pid: int) -> int:
    """RSS of a process and its descendants, bytes."""
    total = 0
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            with open(f"/proc/{current}/task/{current}/children") as children:
                todo += [int(c) for c in children.read().split()]
        except OSError:
            continue
    return total


def run_scan(paths: list[Path], workers: int, keys_file: Path) -> dict[str, Any]:
    """One scan in a child process: its figures, and the peak RSS of its process tree over
    the first quarter of the bytes and over all of them (sampled as members finish)."""
    done = subprocess.run([sys.executable, "-c", SCANNER, json.dumps([str(p) for p in paths]),
                           str(workers), str(keys_file), str(Path(__file__).resolve())],
                          stdout=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the scan failed (exit {done.returncode})")
    return dict(json.loads(done.stdout))


def floor(command: str) -> float:
    started = time.monotonic()
    subprocess.run(["bash", "-c", command], check=True)
    return time.monotonic() - started


def duckdb_scan(files: list[Path], keys_file: Path) -> tuple[float, int]:
    """DuckDB reading the JSON lines itself: the engine's own bulk path, for comparison."""
    import duckdb

    connection = duckdb.connect()
    connection.execute("CREATE TABLE wanted AS SELECT k AS key FROM read_csv(?, header=false, "
                       "columns={'k': 'VARCHAR'})", [str(keys_file)])
    started = time.monotonic()
    found = connection.execute(
        "SELECT count(*) FROM (SELECT json FROM read_ndjson_objects(?) WHERE "
        "upper(json_extract_string(json, '$.DOI')) IN (SELECT key FROM wanted))",
        [[str(f) for f in files]]).fetchone()[0]
    return time.monotonic() - started, int(found)


OPERATOR = """
import json, os, sys, time
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
from airflow_doi.provider.operators.enrich import DoiEnrichOperator
started = time.monotonic()
summary = DoiEnrichOperator(task_id="enrich", conn_id="cat", table=sys.argv[1],
                            snapshot=sys.argv[2], snapshot_workers=2,
                            resolver_options={"source": "snapshot"}).execute({})
print(json.dumps({"seconds": time.monotonic() - started, **summary["snapshot"]}))
"""


def operator_runs(folder: Path, keys_file: Path, postgres: str) -> list[str]:
    """``DoiEnrichOperator(snapshot=...)`` on a catalogue of the keys in PostgreSQL (COPY into
    doi_metadata) and in DuckDB, end to end: due keys, the scan, the writes."""
    import duckdb
    import psycopg

    keys = keys_file.read_text().split()
    lines = []
    with psycopg.connect(postgres, autocommit=True) as connection:
        connection.execute("DROP SCHEMA IF EXISTS snapshot_bench CASCADE")
        connection.execute("CREATE SCHEMA snapshot_bench")
        connection.execute("CREATE TABLE snapshot_bench.catalogue (doi text, doi_key text, "
                           "doi_valid boolean)")
        with connection.cursor().copy("COPY snapshot_bench.catalogue FROM STDIN") as copy:
            for key in keys:
                copy.write_row((key, key, True))
    url = urlsplit(postgres)
    duck = Path(tempfile.mkdtemp(prefix="snapshot-bench-")) / "catalogue.duckdb"
    with duckdb.connect(str(duck)) as connection:
        connection.execute("CREATE TABLE catalogue AS SELECT k AS doi, k AS doi_key, true AS "
                           "doi_valid FROM (SELECT unnest(?) AS k)", [keys])
    for engine, connection, table in (
            ("PostgreSQL", {"conn_type": "postgres", "host": url.hostname, "port": url.port or
                            5432, "login": url.username or "postgres",
                            "schema": url.path.lstrip("/")}, "snapshot_bench.catalogue"),
            ("DuckDB", {"conn_type": "duckdb", "host": str(duck)}, "catalogue")):
        env = {**os.environ, "AIRFLOW_CONN_CAT": json.dumps(connection)}
        done = subprocess.run([sys.executable, "-c", OPERATOR, table, str(folder)], env=env,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the operator failed on {engine}: {done.stderr[-2000:]}")
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        lines.append(f"  DoiEnrichOperator on {engine}, {len(keys):,}-key catalogue, 2 workers: "
                     f"{figures['seconds']:.1f}s end to end (due keys, the scan, "
                     f"{figures['found_keys']:,} rows written), "
                     f"{figures['records'] / figures['seconds']:,.0f} records/s")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crossref", type=int, default=2_000_000)
    parser.add_argument("--datacite", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--data", type=Path,
                        default=Path(tempfile.gettempdir()) / "airflow-doi-snapshot-bench")
    parser.add_argument("--postgres", default=os.environ.get(
        "AIRFLOW_DOI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"),
        help="where the operator's PostgreSQL run writes (a schema snapshot_bench)")
    args = parser.parse_args()
    print(f"generating into {args.data} (once)", flush=True)
    generate(args.data, args.crossref, args.datacite)
    catalogue = keys(args.crossref, args.datacite, args.keys)
    keys_file = args.data / f"keys-{args.keys}.txt"
    keys_file.write_text("\n".join(catalogue) + "\n")
    jsonl = sorted((args.data / "crossref-jsonl").glob("*.jsonl.gz"))
    forms = {
        "crossref JSON lines": ([*jsonl], "cat {files} | gzip -dc > /dev/null"),
        "crossref tar": ([args.data / "crossref.tar"],
                         "tar -xOf {files} | gzip -dc > /dev/null"),
        "datacite tar": ([args.data / "datacite.tar"],
                         "tar -xOf {files} --wildcards '*.jsonl.gz' | gzip -dc > /dev/null"),
    }
    expected = {"crossref JSON lines": "crossref", "crossref tar": "crossref",
                "datacite tar": "datacite"}
    present = {"crossref": sum(k.startswith("10.") and "/BENCH." in k for k in catalogue),
               "datacite": sum("/ZENODO." in k for k in catalogue)}
    goals: list[str] = []
    for name, (paths, floor_command) in forms.items():
        size = sum(p.stat().st_size for p in paths)
        files = " ".join(f"'{p}'" for p in paths)
        floor_seconds = floor(floor_command.format(files=files))
        print(f"\n== {name}: {len(paths)} file(s), {size / 1e6:,.0f} MB as stored", flush=True)
        print(f"  floor (gzip -dc > /dev/null): {floor_seconds:.1f}s, "
              f"{size / 1e6 / floor_seconds:,.1f} MB/s")
        runs = {}
        for workers in (1, 2):
            figures = run_scan(paths, workers, keys_file)
            runs[workers] = figures
            seconds = figures["seconds"]
            print(f"  {workers} worker{'s' if workers > 1 else ''}: {seconds:.1f}s, "
                  f"{figures['records'] / seconds:,.0f} records/s "
                  f"({figures['records'] / seconds / workers:,.0f} per worker), "
                  f"{size / 1e6 / seconds:,.1f} MB/s ({size / 1e6 / seconds / workers:,.1f} per "
                  f"worker); {floor_seconds / seconds:.2f}x the floor; peak RSS "
                  f"{figures['rss_quarter'] / 2**20:,.0f} MiB over the first quarter of the "
                  f"bytes, {figures['rss_all'] / 2**20:,.0f} MiB over all; "
                  f"{figures['found']:,} keys found of "
                  f"{present[expected[name]]:,} there; problems {figures['problems'] or 'none'}",
                  flush=True)
        one, two = runs[1], runs[2]
        speedup = one["seconds"] / two["seconds"]
        print(f"  two workers: {speedup:.2f}x one")
        share = floor_seconds / one["seconds"]
        goal = 0.5 if "JSON lines" in name else 0.3
        if share < goal:
            goals.append(f"{name}: {share:.2f}x the floor on one worker (goal {goal}x)")
        if speedup < 1.7:
            goals.append(f"{name}: two workers {speedup:.2f}x one (goal 1.7x)")
        if one["found"] != present[expected[name]]:
            goals.append(f"{name}: {one['found']:,} keys found of {present[expected[name]]:,}")
        for workers, figures in runs.items():
            growth = figures["rss_all"] / max(1, figures["rss_quarter"])
            if growth > 1.25:
                goals.append(f"{name}, {workers} worker(s): RSS grew {growth:.2f}x from the "
                             "first quarter of the bytes to all")
        if "JSON lines" in name:
            seconds, found = duckdb_scan(paths, keys_file)
            print(f"  DuckDB reading them itself (read_ndjson_objects, json_extract_string, a "
                  f"semi-join; all its threads): {seconds:.1f}s, {found:,} found: our two "
                  f"workers are {seconds / two['seconds']:.2f}x its speed")
            for line in operator_runs(args.data / "crossref-jsonl", keys_file, args.postgres):
                print(line, flush=True)
    print("\ngoals missed: " + ("; ".join(goals) if goals else "none"))
    return 1 if goals else 0


if __name__ == "__main__":
    sys.exit(main())
