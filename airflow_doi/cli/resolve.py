"""``airflow-doi resolve``: resolve a CSV or Parquet column through the proxy REST API.

Writes one output row per input row (``input`` holds the raw cell) with the resolver's
columns, shows a progress bar only on a terminal, and ends with a one-line summary. Rows
that failed are reported as ``status=error``, not as a failing exit code: the exit status is
non-zero only for usage and I/O problems.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "resolve",
        help="resolve a column of DOIs through the doi.org proxy REST API",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", type=Path, help="input file (.csv or .parquet)")
    parser.add_argument("--column", default="doi", help="column holding the DOIs (default: doi)")
    parser.add_argument("--output", "-o", type=Path, required=True, help="output .csv or .parquet")
    parser.add_argument("--base-url", default="https://doi.org", help="proxy base URL")
    parser.add_argument("--rate", type=float, default=3.0, help="requests per second (default 3)")
    parser.add_argument("--burst", type=int, default=1, help="requests allowed back to back")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight at most")
    parser.add_argument("--cache", type=Path, help="SQLite cache file (also the checkpoint)")
    parser.add_argument("--contact", help="contact e-mail named in the User-Agent")
    parser.add_argument("--redis-url", help="share the rate limit through this Redis")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    parser.add_argument("--max-attempts", type=int, default=6, help="retry budget per DOI")
    parser.add_argument("--backoff-base", type=float, default=0.5, help="first backoff, seconds")
    parser.add_argument(
        "--breaker-give-up",
        type=float,
        default=120.0,
        help="seconds of continuous proxy failure after which unfinished rows end as error",
    )
    parser.add_argument("--type", action="append", default=[], dest="types", help="type filter")
    parser.add_argument("--index", action="append", type=int, default=[], dest="indexes")
    parser.add_argument("--auth", action="store_true", help="ask the proxy to bypass its cache")
    parser.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    parser.set_defaults(func=run)


def _read_column(path: Path, column: str) -> list[object]:
    import pyarrow as pa

    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
        if column not in names:
            raise ValueError(f"{path}: no column {column!r} (columns: {', '.join(names)})")
        table = pq.read_table(path, columns=[column])
    else:
        from pyarrow import csv

        # Read every cell as text: a DOI column must never be parsed as numbers or dates.
        try:
            table = csv.read_csv(
                path,
                convert_options=csv.ConvertOptions(
                    include_columns=[column],
                    column_types={column: pa.string()},
                    strings_can_be_null=False,
                ),
            )
        except pa.ArrowInvalid as error:
            raise ValueError(f"{path}: {error}") from None
    values: list[object] = table.column(column).to_pylist()
    return values


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    import pyarrow as pa

    from airflow_doi.resolver import COLUMNS

    ints = {"response_code", "http_status", "attempts"}
    arrays = {}
    for name in COLUMNS:
        column = [row[name] for row in rows]
        if name == "input":
            column = [None if v is None else v if isinstance(v, str) else str(v) for v in column]
        arrays[name] = pa.array(column, type=pa.int64() if name in ints else pa.string())
    table = pa.table(arrays)
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    else:
        from pyarrow import csv

        csv.write_csv(table, path)


def run(args: argparse.Namespace) -> int:
    from airflow_doi.resolver import ProgressEvent, ResolverConfig, ResolverStats, resolve

    try:
        config = ResolverConfig(
            base_url=args.base_url,
            rate=args.rate,
            burst=args.burst,
            concurrency=args.concurrency,
            timeout=args.timeout,
            contact=args.contact,
            redis_url=args.redis_url,
            max_attempts=args.max_attempts,
            backoff_base=args.backoff_base,
            breaker_give_up=args.breaker_give_up,
            types=tuple(args.types),
            indexes=tuple(args.indexes),
            auth=args.auth,
        )
    except (TypeError, ValueError) as error:
        print(f"airflow-doi resolve: error: {error}", file=sys.stderr)
        return 2
    values = _read_column(args.input, args.column)
    stats = ResolverStats()
    bar: Any = None
    if sys.stderr.isatty() and not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=0, unit="doi", file=sys.stderr, dynamic_ncols=True)

    def progress(event: ProgressEvent) -> None:
        if bar is None:
            return
        if bar.total != event.total:
            bar.total = event.total
            bar.refresh()
        bar.set_postfix(retries=event.retries, refresh=False)
        bar.update(event.done - bar.n)  # update() rate-limits redraws; refresh() would not

    try:
        results = resolve(values, config=config, cache=args.cache, progress=progress, stats=stats)
    finally:
        if bar is not None:
            bar.close()
    _write(args.output, [r.as_row() for r in results])
    print(stats.summary(), file=sys.stderr)
    return 0
