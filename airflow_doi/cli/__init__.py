"""The ``airflow-doi`` command line: one subcommand module per job.

Each module in this package exposes ``register(subparsers)``; subcommands whose optional
dependencies are missing still appear and fail with a clear message naming the extra (one
table, :data:`EXTRAS`, maps a missing module to the extra that installs it). The package
itself imports only the standard library, so ``--help`` works on any install.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from airflow_doi._install import pip_install
from airflow_doi._version import __version__
from airflow_doi.cli._files import StandardInputError, shown, standard_input
from airflow_doi.cli._parser import Parser
from airflow_doi.files import BEFORE_PUT_IN_PLACE, TableInputError

#: Subcommand modules, in the order ``--help`` lists them.
SUBCOMMANDS: tuple[str, ...] = (
    "normalize", "resolve", "enrich", "repair", "report", "simulator", "sql", "demo",
)

#: Top-level module -> the extra that installs it. ``None``: a base dependency, so its absence
#: means a broken install rather than a missing extra.
EXTRAS: dict[str, str | None] = {
    "pyarrow": None,
    "numpy": None,
    "charset_normalizer": None,
    "aiohttp": "resolve",
    "tenacity": "resolve",
    "redis": "resolve",
    "tqdm": "resolve",
    "pandas": "pandas",
    "sqlglot": "sql",
    "duckdb": "duckdb",
    "psycopg": "postgres",
    "pymysql": "mariadb",
    "dbt": "dbt",
    "airflow": "airflow",
    "pyspark": "spark",
    "matplotlib": "report",
}

#: Exit codes shared by the subcommands.
EXIT_USAGE = 2

#: Loggers whose WARNING lines the CLI shows on stderr (the resolver's breaker, for one).
LOGGER = "airflow_doi"


#: Sphinx markup a docstring may carry: ``literal`` and :role:`target`.
_MARKUP = re.compile(r":[a-z]+:`~?([^`]*)`|``([^`]*)``")


#: A help text that already says its default (``(default: ...)``, ``default: none``, or
#: ``%(default)s``): :class:`HelpFormatter` adds none.
_STATED = re.compile(r"%\(default\)|\bdefault\b")


def plain(text: str) -> str:
    """``text`` without Sphinx markup, as a terminal should show it."""
    return _MARKUP.sub(lambda match: match.group(1) or match.group(2) or "", text)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions kept as written but plain; every option's default shown after its help.

    ``ArgumentDefaultsHelpFormatter`` would also print ``(default: None)``, ``(default: )``
    and ``(default: False)``, which say nothing; those are left out here, as is a default
    the help text already states.
    """

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain(text))

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or _STATED.search(text)
            or default is None
            or default is False
            or default == []
            or default == ""
            or default is argparse.SUPPRESS
        ):
            return text
        return f"{text} (default: %(default)s)"


def missing_extra_message(module: str | None) -> str:
    """What to install when ``module`` cannot be imported, in one sentence."""
    top = (module or "?").split(".")[0]
    if top not in EXTRAS:
        return f"the module {top!r} is missing: install it, or reinstall airflow-doi"
    extra = EXTRAS[top]
    if extra is None:
        return (f"the module {top!r}, part of every airflow-doi install, is missing: "
                f"reinstall with {pip_install(force=True)}")
    return f"this command needs the [{extra}] extra ({top} is not installed): {pip_install(extra)}"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="airflow-doi",
        description="DOIs per ANSI/NISO Z39.84: normalize, resolve, enrich, SQL.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"airflow-doi {__version__}",
                        help="print the version and exit")
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND",
        help=", ".join(SUBCOMMANDS) + " (each has its own --help)",
    )
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"airflow_doi.cli.{name}")
        except ModuleNotFoundError as error:
            if error.name and error.name.startswith("airflow_doi.cli"):
                continue  # subcommand not part of this build
            raise
        module.register(subparsers)
    _plain_help_everywhere(parser)
    return parser


def _plain_help_everywhere(parser: argparse.ArgumentParser) -> None:
    """Every (sub)command's help through :class:`HelpFormatter`, whoever registered it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.formatter_class = HelpFormatter
                _plain_help_everywhere(child)


class _OneLine(logging.Formatter):
    """``airflow-doi CMD: warning: message`` on one line, never a traceback."""

    def __init__(self, command: str) -> None:
        super().__init__()
        self.command = command

    def format(self, record: logging.LogRecord) -> str:
        message = " ".join(shown(record.getMessage()).split())
        return f"airflow-doi {self.command}: {record.levelname.lower()}: {message}"


def _not_never_answered(record: logging.LogRecord) -> bool:
    """Leave out the breaker's give-up when nothing was ever answered: the command says so
    once, in its own words, when the run ends (imported here: the breaker needs asyncio,
    which a command that logs nothing should not load)."""
    from airflow_doi.resolver.breaker import NEVER_ANSWERED

    return not getattr(record, NEVER_ANSWERED, False)


@contextmanager
def _log_to_stderr(command: str) -> Iterator[logging.Handler]:
    """The project's WARNING-and-up log lines on stderr while a command runs."""
    logger = logging.getLogger(LOGGER)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine(command))
    handler.setLevel(logging.WARNING)
    handler.addFilter(_not_never_answered)
    previous, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.propagate = False  # once, in our format: not again through a host's root handlers
    if logger.level == logging.NOTSET or logger.level > logging.WARNING:
        logger.setLevel(logging.WARNING)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
        logger.propagate = propagate


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; ``argv`` None: this process's own arguments (the installed command),
    else a call from Python (a task, a notebook, a test), whose process is left alone."""
    if argv is None:
        BEFORE_PUT_IN_PLACE.append(_ignore_ctrl_c)
    try:
        return _run(argv)
    except KeyboardInterrupt:
        if argv is not None:
            return 130
        _leave_now(130)
    finally:
        if argv is None:
            # The work is done (or given up): a Ctrl-C on the way out must not print a
            # traceback from the interpreter's shutdown.
            _ignore_ctrl_c()
            BEFORE_PUT_IN_PLACE.remove(_ignore_ctrl_c)
    return 130  # pragma: no cover (_leave_now does not return)


def _ignore_ctrl_c() -> None:
    """From now on this process ignores Ctrl-C: its output is complete (and being put in
    place), or it is on its way out."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _leave_now(code: int) -> None:
    """Exit at once: the partial output is already removed, and threads of Arrow's reader
    may still be winding down; waiting for them at exit can hang or abort."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def interrupted(args: argparse.Namespace) -> str:
    """What a Ctrl-C left behind, in one line: an output appears only once complete (and a
    Ctrl-C from then on is ignored), so the output was not written; the cache (``--cache``,
    or the default one a command that asks the proxy keeps) holds every answer already in,
    and ``--no-cache`` none."""
    output = getattr(args, "output", None)
    if output is None:
        return "interrupted (Ctrl-C): stopped before it was done"
    shown = "standard output received nothing" if str(output) == "-" else (
        f"{output} was not written")
    text = f"interrupted (Ctrl-C): {shown} (a file appears only once complete)"
    cache = getattr(args, "cache", None)
    if cache is not None:
        read = (", every data file member and update page already read" if
                getattr(args, "snapshot", None) or getattr(args, "updates", None)
                or getattr(args, "updates_since", None) else "")
        text += (f"; the cache {cache} keeps every answer already in{read}, so running the "
                 "same command again asks only for the rest")
    elif getattr(args, "no_cache", False):
        text += ("; with --no-cache no answer was kept: running it again asks for every DOI "
                 "(without --no-cache the answers are kept for a run started again)")
    return text


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with _log_to_stderr(args.command):
        try:
            with standard_input(args):  # IN "-"
                return int(args.func(args) or 0)
        except KeyboardInterrupt:
            print(f"airflow-doi {args.command}: {interrupted(args)}", file=sys.stderr)
            raise
        except BrokenPipeError:
            return 0
        except (StandardInputError, TableInputError) as error:
            print(f"airflow-doi {args.command}: error: {error}", file=sys.stderr)
            return EXIT_USAGE
        except PermissionError as error:  # a file this user may not read or write
            if getattr(args, "debug", False):
                raise
            print(f"airflow-doi {args.command}: error: {denied(error)}", file=sys.stderr)
            return EXIT_USAGE
        except ModuleNotFoundError as error:
            if getattr(args, "debug", False):
                raise
            message = missing_extra_message(error.name)
            print(f"airflow-doi {args.command}: error: {message}", file=sys.stderr)
            return EXIT_USAGE
        except Exception as error:  # a clear one-line message, never a traceback, for users
            if getattr(args, "debug", False):
                raise
            from airflow_doi.resolver.config import scrub

            said = scrub(str(error), *_urls_given(args))  # a driver may echo a DSN
            print(f"airflow-doi {args.command}: error: {shown(said)}", file=sys.stderr)
            return 1


def denied(error: PermissionError) -> str:
    """A file the system refused this user, as one line: which, why, what to do."""
    name = error.filename2 or error.filename
    if name is None:  # a socket, a library's own call: what was refused is all there is
        return (f"the system refused this user an operation ({error.strerror or error}); "
                "check the permissions of the files and folders the command names, or run "
                "it as a user who may use them")
    return (f"{os.fsdecode(name)}: this user may not use it ({error.strerror or error}); "
            "change its permissions, or pass a file this user may read (an input) or write "
            "(an output)")


def _urls_given(args: argparse.Namespace) -> list[str]:
    """Every URL the command line gave (a DSN, ``--redis-url``...): their credentials are
    never said back."""
    values = [v for value in vars(args).values()
              for v in (value if isinstance(value, (list, tuple)) else [value])]
    return [str(v) for v in values if "://" in str(v)]


if __name__ == "__main__":
    sys.exit(main())
