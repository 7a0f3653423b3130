"""``airflow-doi enrich``: registry metadata for a CSV or Parquet column of DOIs.

DOI content negotiation through the proxy (:mod:`airflow_doi.metadata`): one row out per row
in, with typed columns. Reads files exactly as ``resolve`` does, takes the same proxy flags
(``--rate``, ``--contact``, ``--cache``, ``--redis-url``...), reports the same way and exits
with the same codes.
"""

from __future__ import annotations

import argparse
from typing import Any

from airflow_doi.cli import _proxy
from airflow_doi.cli._files import add_file_options, input_error, say
from airflow_doi.metadata.config import CROSSREF_URL, DATACITE_URL, SOURCES
from airflow_doi.words import plural

__all__ = ["register", "run"]

#: What our columns are named after when a kept column has one of their names.
STEM = "metadata"
#: The one line of ``airflow-doi --help`` for this command.
HELP = "registry metadata (title, type, year, journal, ISSN...) for a column of DOIs"
DESCRIPTION = """\
Fetch the registry metadata of a column of DOIs. Crossref's and DataCite's DOIs (doi.org's
Which RA? says whose each is) come from their batch APIs, many DOIs a request (--list-size,
at --list-rate); every other DOI, and any a batch answer leaves out, through DOI content
negotiation: the doi.org proxy (or --base-url) redirects the request to the registration
agency's metadata service (mEDRA, JaLC...), which answers in CSL-JSON. --source negotiation
asks every DOI by content negotiation.

With --snapshot, the agencies' public data files are read first (Crossref's tar of
.json.gz files or its JSON-lines files, DataCite's tar of dois/updated_YYYY-MM/part_NNNN.jsonl.gz
parts, or folders of them; recognised by content, read in place, never extracted, --workers
processes at once): every DOI they hold is answered from them (metadata_source
crossref_snapshot or datacite_snapshot, fetched_at the files' date) and only the others are
asked of the APIs; --source snapshot asks no API at all (those rows end not_in_snapshot).
With the cache, a scan interrupted and started again reads only the members it had not finished.

--updates reads the agencies' update streams first (Crossref's works by from-update-date,
DataCite's dois by updated, 1,000 records a page): the records of the file's DOIs that changed
since the --snapshot files' date, or since the last harvest --cache recorded, answer those
DOIs (metadata_source crossref_updates, datacite_updates); --updates-since DATE (YYYY-MM-DD)
names the day. A harvest interrupted and started again with the cache goes on from its page.

Writes one row per input row, in order: the input's columns (all of them, as normalize keeps
them, or those of --keep-columns), then input (the cell as text), doi, key, metadata_status,
title, csl_type (a CSL type, whichever source answered), registry_type (the registry's own
word: Crossref's type, DataCite's resourceTypeGeneral), issued (as given: 2019, 2019-05 or
2019-05-03), year, container_title (the journal or book), publisher, issn, isbn, volume,
issue, page, author_count, first_author, language, license_url, updated_by and update_to
(retractions and corrections, as type:DOI items), source_host, agency (who registered the
DOI), metadata_source (crossref, datacite, negotiation, crossref_snapshot,
datacite_snapshot, crossref_updates, datacite_updates), error, attempts, http_status,
fetched_at, expires_at and csl_json (the record as CSL-JSON, without its reference list).
metadata_status is ok, not_found (no such DOI), no_metadata (the agency offers no CSL-JSON
for it), not_in_snapshot (--source snapshot: not in the files, no API asked), invalid (never
sent; the reason is in error) or error (gave up, or refused: the reason is in error). A
shortDOI (10/b6vnmd) is expanded through the proxy as resolve expands it: its row holds the
metadata of the DOI it aliases (not_found when no such shortDOI exists or it names no DOI). If a
kept column already has one of these names (in any case, as a column doi or title), ours are
named metadata_input, metadata_doi, metadata_key, metadata_status, metadata_title, ...
instead and stderr says so; --prefix chooses. A CSV output keeps the input's separator and
line endings, in UTF-8 with a BOM when the input was an Excel-style export (--output-
encoding chooses).

Redirects are followed only to the hosts of --metadata-host (https only) and at most twice.
Rows sharing a comparison key cost one request to the proxy and one to the agency. The
answers are kept as they come (by default in the user's cache directory, one file per proxy:
--cache FILE names it, --no-cache keeps none), so a run stopped and started again asks only for
keys it has not finished (or that expired).

Exit status: 0 done; 2 the input cannot be used as asked (no such file or column, bad
option, a missing extra, no data file); 3 the share of sent rows that ended in status error
is above --max-error-share, or an update stream stopped before its end (the output is still
written)."""

#: Columns written as whole numbers; every other column is text.
INTEGERS = ("year", "author_count", "attempts", "http_status")
#: Columns that carry raw input or server-supplied text (--escape-formulas guards them).
GUARDED = (
    "input", "title", "csl_type", "registry_type", "issued", "container_title", "publisher",
    "issn", "isbn", "volume", "issue", "page", "first_author", "language", "license_url",
    "updated_by", "update_to", "source_host", "agency", "error",
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("enrich", help=HELP, description=DESCRIPTION)
    parser.add_argument("--column", default="doi", help="column holding the DOIs (default: doi)")
    _proxy.add_keep_options(parser, STEM)
    add_file_options(parser, escape_default=True,
                     escaped="the input column and every text column the servers filled")
    _proxy.add_proxy_options(
        parser,
        cache_help="SQLite cache file (also the checkpoint; resolve may share it)",
        give_up_help="seconds of continuous failure of a host after which its unfinished "
        "rows end as error",
        error_share_help="exit 3 when more than this share (0 to 1) of the rows sent ended "
        "in status error; 0 fails on any error, 1 never",
    )
    parser.add_argument("--agency-rate", type=float, default=None,
                        help="requests per second to each metadata host (default: Crossref's "
                        "pool's pace at Crossref, 10 a second with --contact (its polite "
                        "pool), 5 without; 2 elsewhere)")
    parser.add_argument(
        "--metadata-host", action="append", default=None, dest="metadata_hosts",
        metavar="HOST",
        help="a host redirects may lead to (repeatable, or several comma-separated): a name "
        "(https only) or an origin such as http://127.0.0.1:8081 (default: the agencies' own: "
        "api.crossref.org, "
        "data.crossref.org, api.datacite.org, data.datacite.org, data.crosscite.org, "
        "data.medra.org)",
    )
    parser.add_argument("--source", choices=SOURCES, default="auto",
                        help="auto: Crossref's and DataCite's DOIs from their batch APIs, the "
                        "others by content negotiation; negotiation: every DOI by content "
                        "negotiation; snapshot: the --snapshot files alone, no request at all "
                        "(default: auto)")
    parser.add_argument(
        "--snapshot", action="append", default=None, metavar="PATH",
        help="an agency's public data file, or a folder of them, read before any API is "
        "asked (repeatable): Crossref's tar or .jsonl.gz files, DataCite's tar")
    parser.add_argument(
        "--updates", action="store_true",
        help="read the update streams first: what changed since the --snapshot files' date "
        "(or the last harvest --cache recorded)")
    parser.add_argument("--updates-since", default=None, metavar="DATE",
                        help="read the update streams first: what changed since DATE "
                        "(YYYY-MM-DD)")
    parser.add_argument("--workers", type=int, default=0, metavar="N",
                        help="processes reading the --snapshot files at once (default: one "
                        "per core)")
    parser.add_argument("--list-rate", type=float, default=None,
                        help="list queries per second to each batch API, lowered to what the "
                        "server announces (default: 3 a second at Crossref with --contact, "
                        "its polite pool, 1 without; 1 at DataCite)")
    parser.add_argument("--list-size", type=int, default=50,
                        help="DOIs per list query, at most 100 (default: 50)")
    parser.add_argument("--crossref-url", default=CROSSREF_URL,
                        help=f"Crossref's REST API, on the --metadata-host allowlist "
                        f"(default: {CROSSREF_URL})")
    parser.add_argument("--datacite-url", default=DATACITE_URL,
                        help=f"DataCite's REST API, on the --metadata-host allowlist "
                        f"(default: {DATACITE_URL})")
    parser.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from airflow_doi.files.jobs import result_columns
    from airflow_doi.files.read import TableInputError
    from airflow_doi.metadata import METADATA_COLUMNS, MetadataConfig, MetadataStats, fetch
    from airflow_doi.metadata.snapshot.files import SnapshotError, check_paths

    terminal = _proxy.progress_wanted(args)
    try:
        if args.source == "snapshot" and not args.snapshot:
            raise ValueError("--source snapshot answers from the data files alone: name them "
                             "with --snapshot PATH")
        if args.workers < 0:
            raise ValueError(f"--workers must be at least 1 (0: one per core), not "
                             f"{args.workers}")
        check_paths(args.snapshot or ())
        since = args.updates_since or ("auto" if args.updates else None)
        if since == "auto" and not args.snapshot and args.no_cache:
            # Review: the default cache records the last harvest as --cache FILE does.
            raise ValueError("--updates reads what changed since the --snapshot files' date "
                             "or the last harvest the cache recorded, and --no-cache keeps "
                             "none: leave it out, or give --snapshot or --updates-since DATE")
        extra: dict[str, Any] = {
            "agency_rate": args.agency_rate, "source": args.source,
            "list_rate": args.list_rate, "list_size": args.list_size,
            "crossref_url": args.crossref_url, "datacite_url": args.datacite_url,
            "snapshot": tuple(args.snapshot or ()), "snapshot_workers": args.workers,
            "updates_since": since,
        }
        if args.metadata_hosts:  # repeated, or comma-separated as the simulator prints them
            extra["metadata_hosts"] = tuple(
                part.strip() for item in args.metadata_hosts for part in item.split(",")
                if part.strip())
        config = _proxy.proxy_config(args, config_class=MetadataConfig, **extra)
        read = _proxy.read_input(args)
    except (TypeError, ValueError) as error:  # the library's field name, as the flag
        message = str(error).replace("metadata_hosts", "--metadata-host", 1)
        for field in ("list_rate", "list_size", "crossref_url", "datacite_url",
                      "updates_since"):
            message = message.replace(field, "--" + field.replace("_", "-"), 1)
        return input_error("enrich", type(error)(message))
    except (TableInputError, SnapshotError) as error:
        return input_error("enrich", error)
    _public_batch_apis(config)
    stats = MetadataStats()
    try:
        results = _proxy.ask(fetch, read, args, config, terminal, stats)
    except (SnapshotError, ValueError) as error:
        return input_error("enrich", error)
    unanswered = _proxy.never_answered("enrich", args, stats)
    output = _proxy.Output(
        METADATA_COLUMNS, integers=INTEGERS, guarded=GUARDED, status="metadata_status",
        ended="status error", advice="the reasons are in its error column; check --base-url, "
        "--metadata-host and the servers", stem=STEM)
    added = result_columns(results, read.values, read.flags, "metadata_status", output.columns)
    del results  # the cells are in the columns; the results' own objects may go

    def notes(written: dict[str, list[object]]) -> None:
        _landing_only(written)
        for host, said in sorted(stats.source_health.pools.items()):
            say("enrich", f"note: {host} put this run in its {said.split(',')[0]} pool "
                f"(x-api-pool: {said})" + ("" if config.contact else
                                           "; --contact puts it in the polite one"))
        for line in update_lines(stats.updates if config.updates_since else None,
                                 stats.updates_error):
            say("enrich", line)
        if stats.snapshot is not None:
            for line in snapshot_lines(stats.snapshot, stats.snapshot_keys, stats.left_to_apis,
                                       args.source):
                say("enrich", line)

    status = _proxy.finish("enrich", args, read, added, stats.summary(), output, notes,
                           unanswered=unanswered)
    return status or (_proxy.EXIT_ERRORS if stats.updates_error else 0)


def _public_batch_apis(config: Any) -> None:
    """Say so before any request when the proxy is another (a mirror, the simulator) but the
    agencies' batch APIs are still their public hosts: a run meant to stay local would
    otherwise ask them, and an offline one wait on them."""
    from airflow_doi.resolver.config import DEFAULT_PROXY_URL, redact_url

    if config.source != "auto" or config.base_url.rstrip("/") == DEFAULT_PROXY_URL:
        return
    public = [url for url in (CROSSREF_URL, DATACITE_URL)
              if url in (config.crossref_url, config.datacite_url) and config.batch_origin(url)]
    if public:
        say("enrich", f"note: --base-url is {redact_url(config.base_url)}, but the agencies' "
            f"batch APIs are asked at their public hosts ({' and '.join(public)}); "
            "--crossref-url and --datacite-url name others, --source negotiation asks every "
            "DOI through --base-url")


def update_lines(streams: dict[str, Any] | None, error: str | None) -> list[str]:
    """What the update streams' harvest read and found, and why it stopped early (None: no
    harvest was asked for)."""
    if streams is None:
        return []
    if not streams:
        return ["update streams: none read: neither Crossref's nor DataCite's API is on the "
                "--metadata-host allowlist (--crossref-url, --datacite-url name them)"]
    lines = []
    for name, state in streams.items():
        lines.append(f"update streams: {name} since {state.since}: "
                     f"{plural(state.pages, 'page')}, "
                     f"{plural(state.records, 'changed record')} read, {state.found:,} of them "
                     f"yours, {plural(state.requests, 'request')}"
                     + (f" ({plural(state.restarts, 'restart')}: its cursor expired)"
                        if state.restarts else "")
                     + ("" if state.finished else "; stopped before its end"))
    if error:
        lines.append(f"error: an update stream stopped before its end ({error}); the rows of "
                     "the pages read are in the output, the other keys keep the files' or "
                     "the APIs' rows: run again once the API answers (with the cache it goes on "
                     "from its last page); exit status 3")
    return lines


def snapshot_lines(scanned: Any, found: int, left: int, source: str) -> list[str]:
    """What the scan of the data files read, found and skipped, in a few lines."""
    from airflow_doi.metadata.snapshot.records import EXPECTED, REASONS

    seconds = max(scanned.elapsed, 1e-9)
    read = (f"data files: {plural(scanned.members, 'member')} read"
            + (f" ({scanned.resumed:,} finished by an earlier run, not read again)"
               if scanned.resumed else "")
            + f" in {scanned.elapsed:.1f}s by {plural(scanned.workers, 'worker')}: "
            f"{plural(scanned.records, 'record')} ({scanned.records / seconds:,.0f}/s, "
            f"{scanned.bytes_in / seconds / 1e6:,.1f} MB/s as stored), "
            f"{plural(found, 'key')} found; {plural(left, 'key')} "
            + ("not in them (no key asked of an API: --source snapshot)" if source == "snapshot"
               else "left to the APIs"))
    lines = [read]
    for reason, count in scanned.problems.most_common():
        where = ", ".join(scanned.where.get(reason, []))
        verb = "passed over" if reason in EXPECTED else "skipped"
        lines.append(f"data files: {verb} {count:,} x {reason} ({REASONS.get(reason, reason)})"
                     + (f" in {where}" if where else ""))
    by_reason: dict[str, list[tuple[str, str]]] = {}
    for name, reason, detail in scanned.skipped:
        by_reason.setdefault(reason, []).append((name, detail))
    for reason, entries in by_reason.items():
        if len(entries) == 1:
            name, detail = entries[0]
            lines.append(f"data files: skipped {name}: {detail} ({reason})")
        else:  # one line a reason: a wrong folder must not print a line a file
            shown = ", ".join(name for name, _ in entries[:3])
            lines.append(f"data files: skipped {len(entries):,} files ({reason}: "
                         f"{REASONS.get(reason, entries[0][1])}), as {shown}"
                         + (", ..." if len(entries) > 3 else ""))
    return lines


def _landing_only(columns: dict[str, list[object]]) -> None:
    """Warn when the proxy sent every DOI asked to a landing page, none to a metadata host."""
    from airflow_doi.metadata.client import LANDING

    asked = [error for status, error in zip(columns["metadata_status"], columns["error"],
                                            strict=True) if status != "invalid"]
    if asked and all(str(error or "").startswith(LANDING) for error in asked):
        say("enrich", "warning: the proxy sent every DOI to a landing page, none to a metadata "
            "host: if --metadata-host does not name the agencies' hosts (the simulator "
            "prints them), correct it and run again")
