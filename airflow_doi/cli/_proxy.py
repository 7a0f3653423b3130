"""What the commands that talk to the proxy (``resolve``, ``enrich``, ``repair``) share: one
set of options with the resolver's own defaults, the configuration they ask for, the checks
made before any file is read, and the progress bar.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import logging
import os
import re
import sqlite3
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from airflow_doi._user_cache import user_cache_dir
from airflow_doi.cli import LOGGER
from airflow_doi.cli._files import (
    check_output,
    csv_options,
    input_error,
    output_encoding,
    output_shown,
    report_reading,
    say,
)
from airflow_doi.resolver.config import ResolverConfig, redact_url, scrub
from airflow_doi.words import plural

__all__ = [
    "DEFAULT_MAX_ERROR_SHARE",
    "EXIT_ERRORS",
    "Input",
    "Output",
    "add_keep_options",
    "add_proxy_options",
    "ask",
    "cache_note",
    "check_backends",
    "default_cache",
    "finish",
    "never_answered",
    "progress_bar",
    "progress_wanted",
    "proxy_config",
    "read_input",
    "require_network_extra",
    "sent_again",
    "too_many_errors",
]

#: Exit status when too many rows ended in ``status=error``.
EXIT_ERRORS = 3
#: Default --max-error-share: a few stragglers on a long run are normal (a re-run sends only
#: them again: the cache keeps the rest); a dead proxy or a wrong --base-url fails every row.
DEFAULT_MAX_ERROR_SHARE = 0.1
#: The resolver's defaults, shown and used by the options (stated once, in ResolverConfig).
_DEFAULTS: dict[str, Any] = {
    item.name: item.default for item in dataclasses.fields(ResolverConfig)
    if item.default is not dataclasses.MISSING
}


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share between 0 and 1")
    return value


#: The ResolverConfig fields each proxy command takes as an option (``--rate`` for ``rate``):
#: (field, type, help); the defaults are ResolverConfig's.
_TUNING: tuple[tuple[str, Callable[[str], Any], str], ...] = (
    ("base_url", str, "proxy base URL"),
    ("rate", float, "requests per second"),
    ("burst", int, "requests allowed back to back"),
    ("concurrency", int, "requests in flight at most"),
    ("contact", str, "contact e-mail named in the User-Agent"),
    ("redis_url", str, "share the rate limit through this Redis"),
    ("timeout", float, "seconds per request"),
    ("max_attempts", int, "retry budget per DOI"),
    ("backoff_base", float, "first backoff, seconds"),
)


def add_keep_options(parser: argparse.ArgumentParser, stem: str) -> None:
    """--keep-columns and --prefix: the input's columns carried into a result file (resolve,
    enrich), and what ours are named when they clash: after ``stem``, the command's word
    (:attr:`Output.stem`)."""
    parser.add_argument(
        "--keep-columns", default=None, metavar="LIST",
        help="comma-separated columns of the input to carry into the output, in the input's "
        "order, before ours (default: all, as normalize keeps them; '' for none); the output "
        "still has one row per input row, in order",
    )
    parser.add_argument(
        "--prefix", default=None,
        help=f"prefix for our column names (e.g. r_); default: none, or, when a kept column "
        f"already has one of their names (in any case), {stem}_ before each: {stem}_input, "
        f"{stem}_doi, {stem}_key, {stem}_status, ...",
    )


def kept(args: argparse.Namespace) -> list[str] | None:
    """The columns --keep-columns names (None: all)."""
    if args.keep_columns is None:
        return None
    return [name.strip() for name in args.keep_columns.split(",") if name.strip()]


def add_proxy_options(
    parser: argparse.ArgumentParser, *, cache_help: str, give_up_help: str, error_share_help: str
) -> None:
    """The options of every command that talks to the proxy (resolve, enrich, repair): one set
    of names and defaults, so a setting learnt on one command means the same on the other."""
    for name, kind, text in _TUNING:
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=_DEFAULTS[name],
                            help=text)
    kept = parser.add_mutually_exclusive_group()
    kept.add_argument(
        "--cache", type=Path, metavar="FILE",
        help=f"{cache_help}; default: one file per proxy in the user's cache directory "
        "(answers/ in $AIRFLOW_DOI_CACHE_DIR, $XDG_CACHE_HOME/airflow-doi or "
        "~/.cache/airflow-doi, e.g. doi.org.sqlite), so a run "
        "stopped and started again asks only for what it had not answered")
    kept.add_argument("--no-cache", action="store_true",
                      help="keep no answer: every run asks the proxy for every DOI")
    parser.add_argument("--breaker-give-up", type=float,
                        default=_DEFAULTS["breaker_give_up"], help=give_up_help)
    parser.add_argument("--max-error-share", type=_share, default=DEFAULT_MAX_ERROR_SHARE,
                        metavar="F", help=error_share_help)


def proxy_config(args: argparse.Namespace, *, config_class: Any = None, **extra: Any) -> Any:
    """The :class:`~airflow_doi.resolver.ResolverConfig` (or ``config_class``) the options of
    :func:`add_proxy_options` ask for (raises ``ValueError``/``TypeError`` on bad values)."""
    options = {name: getattr(args, name) for name, _, _ in _TUNING}
    options["breaker_give_up"] = args.breaker_give_up
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
    import redis  # noqa: F401
    import tenacity  # noqa: F401


def default_cache(base_url: str) -> Path:
    """The file a proxy's answers are kept in when neither ``--cache`` nor ``--no-cache`` is
    given: one per server, in the ``answers`` folder of the user's cache directory, named
    after its host and port, and after a digest of its scheme and path unless it is
    ``https://host/`` (``doi.org.sqlite``, ``127.0.0.1_8080_1a2b3c4d.sqlite``: two proxies
    never share one; never a credential). Raises ``RuntimeError`` when there is no home
    directory to find."""
    parts = urlsplit(base_url)
    try:
        port = parts.port
    except ValueError:
        port = None
    server = (parts.hostname or "") + (f"_{port}" if port else "")
    name = re.sub(r"[^a-z0-9.-]", "_", server.lower()).lstrip(".") or "proxy"
    if parts.scheme.lower() != "https" or parts.path.strip("/"):
        where = f"{parts.scheme.lower()}:{parts.path.rstrip('/')}"
        name += "_" + hashlib.sha256(where.encode()).hexdigest()[:8]
    return user_cache_dir() / "answers" / f"{name}.sqlite"


def _open_default_cache(args: argparse.Namespace) -> None:
    """Open the default cache (:func:`default_cache`), creating it and its folder on first
    use (``args.cache_created``). One that cannot be used is a warning and a run without a
    cache, never a refusal: the user named no file."""
    from airflow_doi.resolver.cache import ResolverCache

    path: Path | None = None
    try:
        path = default_cache(args.base_url)
        existed = path.exists()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the DOIs asked are private
        ResolverCache(path).close()
        if not existed:
            path.chmod(0o600)
    except (sqlite3.Error, OSError, RuntimeError) as error:
        where = f" in {path}" if path is not None else ""
        say(args.command, f"warning: cannot keep the answers{where} ({error}): this run keeps "
            "none; --cache FILE names a file that can be written, --no-cache says none is "
            "wanted")
        return
    args.cache, args.cache_created = path, not existed


def sent_again(args: argparse.Namespace, what: str) -> str:
    """What a run started again sends: only ``what``, when a cache keeps the rest."""
    if args.cache is not None:
        return f"the cache {args.cache} keeps the other answers: only {what} are sent again"
    kept = "--no-cache kept no answer; without it" if args.no_cache else (
        "no cache kept the answers; with --cache FILE")
    return f"everything is sent again: {kept} only {what} would be"


def cache_note(command: str, args: argparse.Namespace) -> None:
    """Say where the answers are kept, when this run created the default cache."""
    if getattr(args, "cache_created", False):
        say(command, f"note: the answers are kept in {args.cache} (created now): a run "
            "started again asks only for what is missing or expired (--cache FILE chooses "
            "the file, --no-cache keeps none)")


def check_backends(args: argparse.Namespace, *, cache: bool = True) -> None:
    """Open the ``--cache`` file and reach the ``--redis-url`` server before any request:
    a wrong path or a dead Redis is one clear input error (``ValueError``), not every row
    ending in ``status=error`` with advice about the proxy. Without ``--cache`` or
    ``--no-cache``, a run that asks the proxy (``cache``) keeps its answers in the default
    cache (:func:`default_cache`), set as ``args.cache``."""
    from airflow_doi.resolver.cache import ResolverCache

    if args.cache is None and cache and not args.no_cache:
        _open_default_cache(args)
    elif args.cache is not None:
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
            # Neither the URL nor what Redis or the client said may show its password.
            refused = isinstance(error, (redis.AuthenticationError, redis.ResponseError))
            what, do = (("refused the connection", "correct the user name and password in "
                         "the URL") if refused else ("cannot be reached",
                                                     "start it, correct the URL"))
            raise ValueError(
                f"--redis-url {redact_url(args.redis_url)}: Redis {what} "
                f"({scrub(str(error), args.redis_url)}): {do}, or leave out --redis-url to "
                "keep the rate limit in this process"
            ) from None


@contextmanager
def progress_bar(terminal: bool) -> Iterator[Callable[[Any], None] | None]:
    """A tqdm bar on a terminal (log lines printed above it, not through it), else nothing."""
    if not terminal:
        yield None
        return
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    # A pseudo-terminal that reports no size (script(1), some CI consoles and IDE panes) has
    # 0 rows, and tqdm draws nothing there: give it 80 by 24.
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError):
        size = os.terminal_size((0, 0))
    sizing: dict[str, Any] = ({"dynamic_ncols": True} if size.columns and size.lines
                              else {"ncols": 80, "nrows": 24})
    bars: dict[str, Any] = {}

    def bar_for(phase: str) -> Any:
        """The bar of a phase (the data files' bytes, then the keys asked): one at a time."""
        if phase not in bars:
            for other in bars.values():
                other.close()
            bars.clear()
            if phase == "files":
                bars[phase] = tqdm(total=0, unit="B", unit_scale=True, unit_divisor=1024,
                                   desc="data files", file=sys.stderr, **sizing)
            else:
                bars[phase] = tqdm(total=0, unit="doi", desc="keys", file=sys.stderr, **sizing)
        return bars[phase]

    def update(event: Any) -> None:
        if hasattr(event, "bytes_total"):  # a scan of the data files: members and bytes
            bar = bar_for("files")
            if bar.total != event.bytes_total:
                bar.total = event.bytes_total
                bar.refresh()
            bar.set_postfix(members=f"{event.members_done:,}/{event.members:,}",
                            found=f"{event.found:,}", refresh=False)
            bar.update(event.bytes_done - bar.n)
            return
        bar = bar_for("keys")
        if bar.total != event.total:
            bar.total = event.total
            bar.refresh()
        bar.set_postfix(retries=event.retries, refresh=False)
        bar.update(event.done - bar.n)  # update() rate-limits redraws; refresh() would not

    try:
        with logging_redirect_tqdm([logging.getLogger(LOGGER)], tqdm_class=tqdm):
            yield update
    finally:
        for bar in bars.values():
            bar.close()


@dataclass
class Input:
    """What a proxy command read before asking anything: the cells, the flags, the reader."""

    #: The DOI column's cells as read (``input`` is written from these).
    values: list[object]
    #: The cells to ask about: missing-value markers and malformed rows as None.
    sent: list[object]
    #: Per row, whether the CSV row was malformed (empty when the file had none).
    flags: list[bool]
    reader: Any
    out_format: Any
    #: ``--output-encoding`` (None: chosen from the input).
    encoding: Any = None


def read_input(args: argparse.Namespace, *, cache: bool = True) -> Input:
    """Check the output path, read ``--column`` and reach the backends: every input error
    (``ValueError``, ``TableInputError``) before the first request, and before the default
    cache is made (for a run that asks the proxy: ``cache``, see :func:`check_backends`)."""
    from airflow_doi.files.jobs import kept_columns, read_cells
    from airflow_doi.files.read import output_format

    out_format = output_format(args.output, args.format)
    encoding = output_encoding(args)
    check_output(args)  # IN, --cache, --snapshot: none may be the output
    values, judged, flags, reader = read_cells(
        args.input, args.column, input_format=args.input_format, options=csv_options(args))
    if getattr(args, "keep_columns", None) is not None:
        kept_columns(reader.names, kept(args), args.input)  # a wrong name: before any request
    check_backends(args, cache=cache)
    sent = [None if flags and flags[i] else value for i, value in enumerate(judged)]
    return Input(values, sent, flags, reader, out_format, encoding)


def progress_wanted(args: argparse.Namespace) -> bool:
    """Whether to draw a progress bar (a terminal, and not ``--no-progress``); stops at once,
    before any file is read, when an extra the run needs is missing (the bar's tqdm, the
    [resolve] extra)."""
    terminal = sys.stderr.isatty() and not args.no_progress
    if terminal:
        import tqdm  # noqa: F401  (the progress bar's extra, checked before any work starts)
    require_network_extra()
    return terminal


@dataclass(frozen=True)
class Output:
    """How a proxy command writes its rows and judges its run."""

    columns: Sequence[str]
    #: Columns written as whole numbers; every other column is text.
    integers: Collection[str]
    #: Columns that carry raw input or server-supplied text (--escape-formulas guards them).
    guarded: Collection[str]
    #: The column that holds each row's outcome, and how its error value is written.
    status: str
    ended: str
    #: What to check when too many rows ended in error.
    advice: str
    #: The word ours are named after when a kept column has one of their names
    #: (``resolution_status``, ``metadata_title``).
    stem: str | None = None


def ask(function: Callable[..., list[Any]], read: Input, args: argparse.Namespace,
        config: Any, terminal: bool, stats: Any) -> list[Any]:
    """``function`` (``resolve``, ``fetch``) over the cells read, with ``--cache``, the
    progress bar on a terminal and ``stats`` counting."""
    with progress_bar(terminal) as progress:
        return function(read.sent, config=config, cache=args.cache, progress=progress,
                        stats=stats)


def finish(command: str, args: argparse.Namespace, read: Input,
           added: dict[str, list[object]], summary: str, output: Output,
           note: Callable[[dict[str, list[object]]], None] | None = None, *,
           unanswered: bool = False) -> int:
    """Write the input's kept columns and the ``added`` ones (:func:`~airflow_doi.files.jobs.
    result_columns`) beside them, say the summary (then ``note``'s lines) and how the file was
    read, and return the exit status: 2 when the output cannot be written, 3 when too many
    rows ended in error (not said again when the proxy never answered, ``unanswered``: that
    was said), else 0."""
    from airflow_doi.files.jobs import append_columns
    from airflow_doi.files.read import TableInputError

    kinds = {name: "int64" if name in output.integers else "large_string"
             for name in output.columns}
    try:
        _, cells, named = append_columns(
            args.input, args.output, args.column, added, kinds, input_format=args.input_format,
            output_format=read.out_format, options=csv_options(args), escape=False,
            encoding=read.encoding, keep=kept(args), prefix=args.prefix or None,
            guarded=output.guarded if args.escape_formulas else (), stem=output.stem)
    except TableInputError as error:
        return input_error(command, error)
    say(command, f"{output_shown(args.output)}: {summary}")
    cache_note(command, args)
    if named and named[0] != (args.prefix or "") + output.columns[0]:
        say(command, f"note: {args.input} already has a column named as one of ours, so ours "
            f"are named {', '.join(named)} (--prefix chooses others)")
    if note is not None:
        note(added)
    # Cells that were not UTF-8, written with U+FFFD: in the kept columns (counted while
    # copying), and in the DOI column even when it is not kept (its rows say bad_encoding).
    repaired = sum(error == "bad_encoding" for error in added["error"])
    if repaired and args.column not in cells:
        cells[args.column] = repaired
    report_reading(command, read.reader, cells, csv_out=read.out_format == "csv",
                   encoding=read.encoding)
    if too_many_errors(command, args, added[output.status], output.ended, output.advice,
                       quiet=unanswered):
        return EXIT_ERRORS
    return 0


def never_answered(command: str, args: argparse.Namespace, stats: Any,
                   advice: str = "") -> bool:
    """Say so when the run stopped because no request was ever answered (the proxy could
    not be reached at all): at once, not after ``--breaker-give-up`` seconds. Whether it
    did: that one line is then the run's error (the breaker's own warning and the share of
    rows in error would say the same again), ``advice`` after it."""
    if stats.never_answered is None:
        return False
    say(command, f"error: nothing at {redact_url(args.base_url)} answered ("
        f"{stats.never_answered}): stopped after {stats.elapsed:.1f}s instead of waiting "
        f"--breaker-give-up ({args.breaker_give_up:g}s), which is for a proxy that stops "
        "answering mid-run; check --base-url and that the proxy is running (offline: "
        f"airflow-doi simulator){advice}")
    return True


def too_many_errors(command: str, args: argparse.Namespace, statuses: Sequence[object],
                    ended: str, advice: str, *, quiet: bool = False) -> bool:
    """Whether more than ``--max-error-share`` of the rows sent (all but ``invalid``) ended
    ``error`` (``statuses``: the rows' status column); if so, says so unless ``quiet``
    (``ended``: how the status is written) with ``advice`` (what to check)."""
    tried = sum(value != "invalid" for value in statuses)
    failed = sum(value == "error" for value in statuses)
    if not tried or failed / tried <= args.max_error_share:
        return False
    if quiet:
        return True
    say(command, f"error: {failed:,} of {plural(tried, 'row')} sent ended in {ended} "
        f"({failed / tried:.1%}, above --max-error-share {args.max_error_share:g}); "
        f"{output_shown(args.output)} holds every row: {advice}, then run again "
        f"({sent_again(args, 'the failed rows')})")
    return True
