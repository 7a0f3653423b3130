"""``airflow-doi resolve``: resolve a CSV or Parquet column through the proxy REST API.

Reads files exactly as ``normalize`` does (:mod:`airflow_doi.files.read`) and writes one row
per input row. Rows the resolver gave up on are ``status=error``; the exit status turns
non-zero for them only above ``--max-error-share``, so a dead proxy cannot pass for success.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["register", "run"]

DESCRIPTION = """\
Resolve a column of DOIs through the doi.org proxy REST API (or any proxy at --base-url).

Writes one row per input row: input (the cell as text), doi, key, status, url, response_code,
http_status, attempts, error, resolved_at, expires_at, url_raw (the URL exactly as the proxy
sent it; url holds it only when it is a safe http(s) URL). status is resolved, no_values,
not_found, invalid (never sent; the reason is in error: bad_encoding for a cell that is not
UTF-8, malformed_row for a CSV row with the wrong number of fields) or error (the resolver
gave up; the reason is in error). Rows sharing a comparison key cost one request. The file is
read as normalize reads it: same encodings, delimiters, gzip and error messages.

A progress bar is drawn only on a terminal; warnings (the proxy failing, the breaker opening
or giving up) go to stderr as single lines, and a one-line summary ends the run.

Exit status: 0 done; 2 the input cannot be used as asked (no such file or column, bad
option, a missing extra); 3 the share of sent rows that ended in status=error is above
--max-error-share (the output is still written)."""

#: Exit status when too many rows ended in ``status=error``.
EXIT_ERRORS = 3
#: Default --max-error-share: a few stragglers on a long run are normal (a re-run with
#: --cache sends only them again); a dead proxy or a wrong --base-url fails every row.
DEFAULT_MAX_ERROR_SHARE = 0.1
#: Columns that carry raw input or server-supplied text: the ones --escape-formulas guards.
GUARDED = ("input", "url", "url_raw", "error")
#: Rows read per batch from the input file.
CHUNK_ROWS = 100_000


def register(subparsers: Any) -> None:
    from airflow_doi.cli import HelpFormatter
    from airflow_doi.cli._files import add_file_options

    parser = subparsers.add_parser(
        "resolve",
        help="resolve a column of DOIs through the doi.org proxy REST API",
        description=DESCRIPTION,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--column", default="doi", help="column holding the DOIs")
    add_file_options(parser, escape_default=True)
    add_proxy_options(
        parser,
        cache_help="SQLite cache file (also the checkpoint)",
        give_up_help="seconds of continuous proxy failure after which unfinished rows end as error",
        error_share_help="exit 3 when more than this share (0 to 1) of the rows sent to the "
        "proxy ended in status=error; 0 fails on any error, 1 never",
    )
    parser.add_argument(
        "--type", action="append", default=[], dest="types",
        help="keep only handle values of this type (repeatable), e.g. URL",
    )
    parser.add_argument(
        "--index", action="append", type=int, default=[], dest="indexes",
        help="keep only handle values at this index (repeatable)",
    )
    parser.add_argument("--auth", action="store_true", help="ask the proxy to bypass its cache")
    parser.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    parser.set_defaults(func=run)


def add_proxy_options(
    parser: argparse.ArgumentParser, *, cache_help: str, give_up_help: str, error_share_help: str
) -> None:
    """The options of every command that talks to the proxy (resolve, repair): one set of
    names and defaults, so a setting learnt on one command means the same on the other."""
    parser.add_argument("--base-url", default="https://doi.org", help="proxy base URL")
    parser.add_argument("--rate", type=float, default=3.0, help="requests per second")
    parser.add_argument("--burst", type=int, default=1, help="requests allowed back to back")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight at most")
    parser.add_argument("--cache", type=Path, help=cache_help)
    parser.add_argument("--contact", help="contact e-mail named in the User-Agent")
    parser.add_argument("--redis-url", help="share the rate limit through this Redis")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    parser.add_argument("--max-attempts", type=int, default=6, help="retry budget per DOI")
    parser.add_argument("--backoff-base", type=float, default=0.5, help="first backoff, seconds")
    parser.add_argument("--breaker-give-up", type=float, default=120.0, help=give_up_help)
    parser.add_argument("--max-error-share", type=_share, default=DEFAULT_MAX_ERROR_SHARE,
                        metavar="F", help=error_share_help)


def proxy_config(args: argparse.Namespace, *, config_class: Any = None, **extra: Any) -> Any:
    """The :class:`~airflow_doi.resolver.ResolverConfig` (or ``config_class``) the options of
    :func:`add_proxy_options` ask for (raises ``ValueError``/``TypeError`` on bad values)."""
    from airflow_doi.resolver import ResolverConfig

    options = {
        "base_url": args.base_url, "rate": args.rate, "burst": args.burst,
        "concurrency": args.concurrency, "timeout": args.timeout, "contact": args.contact,
        "redis_url": args.redis_url, "max_attempts": args.max_attempts,
        "backoff_base": args.backoff_base, "breaker_give_up": args.breaker_give_up,
    }
    try:
        return (config_class or ResolverConfig)(**options, **extra)
    except (TypeError, ValueError) as error:
        # The library names its fields; the user typed options: say --rate, not rate.
        message = str(error)
        for name in sorted([*options, *extra], key=len, reverse=True):
            if message.startswith(f"{name} "):
                message = f"--{name.replace('_', '-')}{message[len(name):]}"
                break
        raise type(error)(message) from None


def require_network_extra() -> None:
    """Import what the [resolve] extra installs, so that a base install stops (exit 2, the
    extra named) before anything is read or any file, the cache included, is created."""
    import aiohttp  # noqa: F401
    import aiolimiter  # noqa: F401
    import tenacity  # noqa: F401


def check_backends(args: argparse.Namespace) -> None:
    """Open the ``--cache`` file and reach the ``--redis-url`` server before any request:
    a wrong path or a dead Redis is one clear input error (``ValueError``), not every row
    ending in ``status=error`` with advice about the proxy."""
    import sqlite3

    from airflow_doi.resolver.cache import ResolverCache

    if args.cache is not None:
        try:
            ResolverCache(args.cache).close()
        except (sqlite3.Error, OSError) as error:
            raise ValueError(
                f"--cache {args.cache}: cannot be used as the cache ({error}): give the path "
                "of a new file in a writable directory, or of a cache an earlier run wrote"
            ) from None
    if args.redis_url:
        import redis

        try:
            client = redis.Redis.from_url(args.redis_url, socket_connect_timeout=5,
                                          socket_timeout=5)
            try:
                client.ping()
            finally:
                client.close()
        except (redis.RedisError, ValueError, OSError) as error:
            raise ValueError(
                f"--redis-url {args.redis_url}: Redis cannot be reached ({error}): start it, "
                "correct the URL, or leave out --redis-url to keep the rate limit in this "
                "process"
            ) from None


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share between 0 and 1")
    return value


def read_values(
    path: Path, column: str, args: argparse.Namespace
) -> tuple[list[object], list[object], list[bool], Any]:
    """The cells of ``column`` as read, the same with missing-value markers (``NA``...) as
    None (what is judged), their malformed-row flags (empty when the file had none) and the
    reader that read them.

    CSV cells that are not UTF-8 stay bytes, so the resolver judges them as it judges any
    bytes (``bad_encoding``); a malformed CSV row becomes ``malformed_row`` in the output
    (see :func:`_rows`).
    """
    from airflow_doi.cli._files import csv_options
    from airflow_doi.files.read import MALFORMED_FLAG, detect_format, read_table, require_column

    def one_pass(reader: Any) -> tuple[list[object], list[object], list[bool]]:
        found = require_column(reader, column, path)
        values: list[object] = []
        judged: list[object] = []
        flags: list[bool] = []
        for batch in reader.batches:
            raw = batch.column(found)
            cells = reader.missing_as_null(raw)
            values.extend(raw.to_pylist())
            judged.extend(cells.to_pylist() if cells is not raw
                          else values[len(values) - len(raw):])
            if reader.flags_malformed:
                flags.extend(batch.column(MALFORMED_FLAG).to_pylist())
        return values, judged, flags

    (values, judged, flags), reader = read_table(
        path, detect_format(path, args.input_format), one_pass,
        chunk_rows=CHUNK_ROWS, options=csv_options(args), columns=[column],
    )
    return values, judged, flags, reader


def _rows(results: list[Any], values: list[object], flags: list[bool]) -> list[dict[str, object]]:
    """The output rows: ``input`` as text, malformed CSV rows marked ``malformed_row``."""
    from airflow_doi.cli.normalize import MALFORMED_REASON

    rows = []
    for index, result in enumerate(results):
        row = result.as_row()
        row["input"] = _as_text(values[index])
        if flags and flags[index]:
            row.update(doi=None, key=None, status="invalid", error=MALFORMED_REASON)
        rows.append(row)
    return rows


def _as_text(value: object) -> str | None:
    """A cell as text: bytes decoded (bad bytes as U+FFFD), numbers in their text form."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def write_rows(
    path: Path, fmt: Any, rows: list[dict[str, object]], escape: bool, dialect: Any = None, *,
    columns: Sequence[str], integers: Collection[str], guarded: Collection[str],
) -> None:
    """Write ``rows`` (dicts by column) as CSV or Parquet: ``integers`` as int64, the rest as
    text; on CSV with ``escape``, the ``guarded`` columns get formula escaping."""
    import pyarrow as pa

    from airflow_doi.files.write import escape_formulas, writing

    fields = [pa.field(name, pa.int64() if name in integers else pa.string()) for name in columns]
    schema = pa.schema(fields)
    arrays = []
    for item in fields:
        array = pa.array([row[item.name] for row in rows], item.type)
        if escape and fmt == "csv" and item.name in guarded:
            array = escape_formulas(array)
        arrays.append(array)
    with writing(path, fmt, schema, dialect) as writer:
        writer.write_table(pa.Table.from_arrays(arrays, schema=schema))


def _write(
    path: Path, fmt: Any, rows: list[dict[str, object]], escape: bool, dialect: Any = None
) -> None:
    from airflow_doi.resolver import COLUMNS

    write_rows(path, fmt, rows, escape, dialect, columns=COLUMNS,
               integers=("response_code", "http_status", "attempts"), guarded=GUARDED)


def error_share(rows: list[dict[str, object]]) -> tuple[int, int]:
    """(rows that ended in status=error, rows that were sent: all but ``invalid``)."""
    sent = [row for row in rows if row["status"] != "invalid"]
    return sum(row["status"] == "error" for row in sent), len(sent)


def run(args: argparse.Namespace) -> int:
    # Imported before the file is read: a missing [resolve] extra is reported at once.
    import sys

    from airflow_doi.cli._files import input_error, report_reading, say
    from airflow_doi.files.read import TableInputError, detect_format
    from airflow_doi.files.write import check_output
    from airflow_doi.resolver import ResolverStats, resolve

    terminal = sys.stderr.isatty() and not args.no_progress
    if terminal:
        import tqdm  # noqa: F401  (the progress bar's extra, checked before any work starts)
    require_network_extra()
    try:
        config = proxy_config(args, types=tuple(args.types), indexes=tuple(args.indexes),
                              auth=args.auth)
        out_format = detect_format(args.output, args.format)
        check_output(args.input, args.output)
        values, judged, flags, reader = read_values(args.input, args.column, args)
        check_backends(args)
    except (TypeError, ValueError, TableInputError) as error:
        return input_error("resolve", error)
    sent = [None if flags and flags[i] else value for i, value in enumerate(judged)]
    stats = ResolverStats()
    with _progress(terminal) as progress:
        results = resolve(sent, config=config, cache=args.cache, progress=progress, stats=stats)
    rows = _rows(results, values, flags)
    try:
        _write(args.output, out_format, rows, args.escape_formulas, reader.dialect)
    except TableInputError as error:
        return input_error("resolve", error)
    say("resolve", f"{args.output}: {stats.summary()}")
    repaired = sum(row["error"] == "bad_encoding" for row in rows)
    report_reading("resolve", reader, {args.column: repaired} if repaired else {},
                   csv_out=out_format == "csv")
    failed, tried = error_share(rows)
    if tried and failed / tried > args.max_error_share:
        say("resolve", f"error: {failed:,} of {tried:,} rows sent ended in status=error "
            f"({failed / tried:.1%}, above --max-error-share {args.max_error_share:g}); "
            f"{args.output} holds every row: check --base-url and the proxy, then run again "
            "(with --cache only the failed rows are sent again)")
        return EXIT_ERRORS
    return 0


@contextmanager
def _progress(terminal: bool) -> Iterator[Callable[[Any], None] | None]:
    """A tqdm bar on a terminal (log lines printed above it, not through it), else nothing."""
    if not terminal:
        yield None
        return
    import logging
    import os
    import sys

    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    from airflow_doi.cli import LOGGER

    # A pseudo-terminal that reports no size (script(1), some CI consoles and IDE panes) has
    # 0 rows, and tqdm draws nothing there: give it 80 by 24.
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError):
        size = os.terminal_size((0, 0))
    sizing: dict[str, Any] = ({"dynamic_ncols": True} if size.columns and size.lines
                              else {"ncols": 80, "nrows": 24})
    bar = tqdm(total=0, unit="doi", file=sys.stderr, **sizing)

    def update(event: Any) -> None:
        if bar.total != event.total:
            bar.total = event.total
            bar.refresh()
        bar.set_postfix(retries=event.retries, refresh=False)
        bar.update(event.done - bar.n)  # update() rate-limits redraws; refresh() would not

    try:
        with logging_redirect_tqdm([logging.getLogger(LOGGER)], tqdm_class=tqdm):
            yield update
    finally:
        bar.close()
