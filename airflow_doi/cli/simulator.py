"""``airflow-doi simulator``: serve the local proxy simulator in the foreground.

Prints its base URL on the first line of stdout, then serves until SIGINT or SIGTERM.
Used by the offline demo and by tests that need the proxy in another process.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from airflow_doi.words import plural

__all__ = ["register", "run"]


#: The one line of ``airflow-doi --help`` for this command.
HELP = "serve a local DOI proxy simulator (for tests and demos)"
DESCRIPTION = """\
Serve the local DOI proxy simulator in the foreground.

Prints its base URL on the first line of stdout, then serves until SIGINT or SIGTERM. Used by
the offline demo and by tests that need the proxy in another process. Needs the [resolve]
extra.

The DOIs it knows: --records FILE, either a list of DOIs (one a line, in any form; blank
lines and lines starting with # are skipped), as examples/data/simulated_registry.txt, or
JSON (an array of DOIs, or an object of handle -> record); or --auto-records, every valid
DOI. A valid DOI it does not know gets 404, as a DOI nobody registered does on doi.org.

It also plays the registration agencies for DOI content negotiation (airflow-doi enrich,
DoiEnrichOperator): each on a port of its own, free ones unless --agency-base-port names the
first (the others follow it: four agencies, then a fifth port for a host off every
allowlist), so that the allowlist stays the same across restarts. The second line of stdout
lists their origins (the allowlist a client needs: --metadata-host, or the connection extra
metadata_hosts), the third an AIRFLOW_CONN_DOI_PROXY_DEFAULT to export for Airflow, and the
fourth the flags to paste after airflow-doi enrich (--base-url, --metadata-host,
--crossref-url, --datacite-url). The simulated Crossref and DataCite also serve their batch
APIs (list queries): the connection line and the flags name them, so that enrichment asks
their DOIs many a request.

--data-files DIR writes the agencies' public data files of the DOIs --records knows, as the
agencies publish them (Crossref: crossref.tar of gzipped {"items": [...]} files, and the same
records as JSON lines in crossref.jsonl.gz; DataCite: datacite.tar of
dois/updated_YYYY-MM/part_NNNN.jsonl.gz parts), then exits: a snapshot to try airflow-doi
enrich --snapshot on. Files already there are never overwritten."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("simulator", help=HELP, description=DESCRIPTION)
    parser.add_argument(
        "--records", type=Path, metavar="FILE",
        help="the DOIs the simulator knows: a list of DOIs, one a line in any form (blank lines "
        "and lines starting with # skipped; examples/data/simulated_registry.txt is one), or "
        "JSON: an array of DOIs, or an object of handle -> record (a list of handle values, "
        "or an object with values)")
    parser.add_argument(
        "--auto-records",
        action="store_true",
        help="every syntactically valid DOI exists with a URL value",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=0, help="port to listen on; 0 picks a free one")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added per answer")
    parser.add_argument("--rate-limit", type=float, help="requests/second before 429")
    parser.add_argument("--rate-burst", type=int, help="token-bucket size of the rate limit")
    parser.add_argument("--error-every", type=int, help="HTTP 500 on every Nth request")
    parser.add_argument("--drop-every", type=int, help="drop the connection every Mth request")
    parser.add_argument("--bad-json-every", type=int, help="malformed JSON every Kth request")
    parser.add_argument("--slow-every", type=int, help="slow answer every Sth request")
    parser.add_argument(
        "--slow-seconds", type=float, default=1.0, help="how long a slow answer takes"
    )
    parser.add_argument(
        "--outage-seconds",
        type=float,
        default=0.0,
        help="answer 500 to everything for this long after start",
    )
    parser.add_argument("--always-500", action="store_true", help="answer 500 to everything")
    parser.add_argument("--die-after", type=int, metavar="N",
                        help="stop listening after answering N requests (connection refused)")
    parser.add_argument("--agency-rate-limit", type=float,
                        help="requests/second each simulated agency answers before 429")
    parser.add_argument("--list-rate-limit", type=float,
                        help="list queries each simulated batch API answers in any second "
                        "before 429 (Crossref's announces it in x-rate-limit-limit)")
    parser.add_argument("--crossref-pools", action="store_true",
                        help="limit Crossref's list queries as its pools do since December "
                        "2025 (3 a second with a contact address, 1 without), announced with "
                        "x-api-pool")
    parser.add_argument("--list-missing-every", type=int,
                        help="leave out every Nth record a list query asked for")
    parser.add_argument("--list-truncated-every", type=int,
                        help="cut every Nth list answer's body short")
    parser.add_argument("--list-bad-record-every", type=int,
                        help="put a record of the wrong shape in place of every Nth record")
    parser.add_argument("--which-ra-invalid-every", type=int, metavar="N",
                        help="Which RA? calls every Nth DOI asked 'Invalid DOI' (registered "
                        "or not), as doi.org does for DOIs it parses otherwise")
    parser.add_argument("--agency-base-port", type=int, default=0, metavar="PORT",
                        help="serve the agencies on PORT and the 4 ports after it (the same "
                             "allowlist on every start); 0 picks free ports")
    parser.add_argument("--data-files", type=Path, metavar="DIR",
                        help="write the agencies' data files of the --records DOIs into DIR "
                        "(created if missing) and exit, serving nothing")
    parser.set_defaults(func=run)


def write_data_files(args: argparse.Namespace, records: dict[str, Any] | None) -> int:
    """``--data-files``: the simulated agencies' data files of the known DOIs."""
    from airflow_doi.resolver.agencies import work_from_record
    from airflow_doi.resolver.datafiles import DATA_FILES, write_data_files
    from airflow_doi.resolver.simulator import _load

    if records is None:
        print("airflow-doi simulator: error: --data-files needs --records FILE: the DOIs to "
              "write (--auto-records knows every DOI, which no file can hold)", file=sys.stderr)
        return 2
    target: Path = args.data_files
    taken = [name for name in DATA_FILES if (target / name).exists()]
    if taken:
        print(f"airflow-doi simulator: error: --data-files {target}: {', '.join(taken)} "
              "already there, left untouched: remove them or choose another folder",
              file=sys.stderr)
        return 2
    try:
        target.mkdir(parents=True, exist_ok=True)
        works = [work_from_record(doi, record) for doi, record in _load(records).values()]
        written = write_data_files(target, works)
    except OSError as error:
        print(f"airflow-doi simulator: error: --data-files {target}: cannot be written "
              f"({error.strerror or error})", file=sys.stderr)
        return 2
    for name, path in written.items():
        print(f"{path}: {name}")
    return 0


def _records(path: str) -> dict[str, Any] | None:
    """The records ``--records`` names, or None after saying why they cannot be used."""
    from airflow_doi.resolver.simulator import read_records

    try:
        return read_records(path)
    except UnicodeDecodeError:
        reason = "not UTF-8 text"
    except OSError as error:
        reason = error.strerror or str(error)
    except ValueError as error:
        reason = str(error)
    print(f"airflow-doi simulator: error: --records {path}: cannot be used "
          f"({reason}): give a list of DOIs, one a line (# starts a comment), or a "
          "JSON object of DOI -> record; or use --auto-records", file=sys.stderr)
    return None


def run(args: argparse.Namespace) -> int:
    from airflow_doi.resolver.agencies import AGENCIES
    from airflow_doi.resolver.simulator import Faults, ProxySimulator

    records: dict[str, Any] | None = None
    if args.records is not None:
        records = _records(args.records)
        if records is None:
            return 2

    if args.data_files is not None:
        return write_data_files(args, records)
    last = args.agency_base_port + len(AGENCIES)
    if args.agency_base_port and not (0 < args.agency_base_port and last <= 65535):
        print(f"airflow-doi simulator: --agency-base-port {args.agency_base_port}: the agencies "
              f"need it and the {len(AGENCIES)} ports after it, between 1 and 65535; give "
              "another, or 0 for free ports", file=sys.stderr)
        return 2
    faults = Faults(**{item.name: getattr(args, item.name) for item in dataclasses.fields(Faults)})
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    simulator = ProxySimulator(
        records,
        host=args.host,
        port=args.port,
        latency=args.latency,
        rate_limit=args.rate_limit,
        rate_burst=args.rate_burst,
        faults=faults,
        auto_records=args.auto_records,
        agency_rate_limit=args.agency_rate_limit,
        agency_base_port=args.agency_base_port,
        list_rate_limit=args.list_rate_limit,
        crossref_pools=args.crossref_pools,
    )
    try:
        simulator.start()
    except OSError as error:
        print(f"airflow-doi simulator: cannot listen on {args.host} (--port {args.port}, "
              f"--agency-base-port {args.agency_base_port}): {error.strerror or error}; "
              "choose free ports, or 0 for any", file=sys.stderr)
        return 2
    try:
        print(simulator.url)
        print("metadata hosts: " + ",".join(simulator.metadata_hosts))
        connection = {"conn_type": "doi_proxy", "host": simulator.url,
                      "extra": {"metadata_hosts": ",".join(simulator.metadata_hosts),
                                "crossref_url": simulator.crossref_url,
                                "datacite_url": simulator.datacite_url}}
        print("export AIRFLOW_CONN_DOI_PROXY_DEFAULT="
              + shlex.quote(json.dumps(connection)))
        flags = [f"--base-url {simulator.url}",
                 *(f"--metadata-host {host}" for host in simulator.metadata_hosts),
                 f"--crossref-url {simulator.crossref_url}",
                 f"--datacite-url {simulator.datacite_url}"]
        print("enrich flags: " + " ".join(flags), flush=True)
        while not stop.wait(0.5):
            pass
        stats = simulator.stats()
    finally:
        simulator.stop()
    agencies = ", ".join(f"{name} {count:,}" for name, count in
                         sorted(stats["agency_requests"].items())) or "none"
    lists = ", ".join(f"{name} {count:,}" for name, count in
                      sorted(stats["list_requests"].items())) or "none"
    print(f"served {plural(stats['requests'], 'API request')}, "
          f"{plural(stats['cn_requests'], 'content negotiation request')}; agencies: "
          f"{agencies}; list queries: {lists}",
          file=sys.stderr)
    return 0
