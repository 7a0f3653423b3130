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

__all__ = ["register", "run"]


#: The one line of ``airflow-doi --help`` for this command.
HELP = "serve a local DOI proxy simulator (for tests and demos)"
DESCRIPTION = """\
Serve the local DOI proxy simulator in the foreground.

Prints its base URL on the first line of stdout, then serves until SIGINT or SIGTERM. Used by
the offline demo and by tests that need the proxy in another process. Needs the [resolve]
extra.

It also plays the registration agencies for DOI content negotiation (airflow-doi enrich,
DoiEnrichOperator): each on a port of its own. The second line of stdout lists their origins
(the allowlist a client needs: --metadata-host, or the connection extra metadata_hosts), and
the third an AIRFLOW_CONN_DOI_PROXY_DEFAULT to export for Airflow."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("simulator", help=HELP, description=DESCRIPTION)
    parser.add_argument("--records", type=Path, metavar="FILE",
                        help="a JSON file: an object of handle -> record/values")
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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from airflow_doi.resolver.simulator import Faults, ProxySimulator

    records: dict[str, Any] | None = None
    if args.records is not None:
        try:
            records = json.loads(args.records.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            reason = getattr(error, "strerror", None) or str(error)
            print(f"airflow-doi simulator: --records {args.records}: cannot be read as JSON "
                  f"({reason}): give a JSON file holding an object of DOI -> record, or use "
                  "--auto-records", file=sys.stderr)
            return 2
        if not isinstance(records, dict):
            print(f"airflow-doi simulator: --records {args.records}: holds a JSON "
                  f"{type(records).__name__}, not an object of DOI -> record", file=sys.stderr)
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
    )
    with simulator:

        print(simulator.url)
        print("metadata hosts: " + ",".join(simulator.metadata_hosts))
        connection = {"conn_type": "doi_proxy", "host": simulator.url,
                      "extra": {"metadata_hosts": ",".join(simulator.metadata_hosts)}}
        print("export AIRFLOW_CONN_DOI_PROXY_DEFAULT="
              + shlex.quote(json.dumps(connection)), flush=True)
        while not stop.wait(0.5):
            pass
        stats = simulator.stats()
    agencies = ", ".join(f"{name} {count}" for name, count in
                         sorted(stats["agency_requests"].items())) or "none"
    print(f"served {stats['requests']} API requests, {stats['cn_requests']} content "
          f"negotiation requests; agencies: {agencies}", file=sys.stderr)
    return 0
