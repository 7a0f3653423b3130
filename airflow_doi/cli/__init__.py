"""The ``airflow-doi`` command line: one subcommand module per job.

Each module in this package exposes ``register(subparsers)``; subcommands whose optional
dependencies are missing still appear and fail with a clear message naming the extra.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: Subcommand modules, in the order ``--help`` lists them.
SUBCOMMANDS: tuple[str, ...] = ("normalize", "resolve", "simulator", "sql", "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-doi", description="DOIs per ANSI/NISO Z39.84: normalize, resolve, SQL."
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"airflow_doi.cli.{name}")
        except ModuleNotFoundError as error:
            if error.name and error.name.startswith("airflow_doi.cli"):
                continue  # subcommand not part of this build
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as error:  # a clear one-line message, never a traceback, for users
        if getattr(args, "debug", False):
            raise
        print(f"airflow-doi {args.command}: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
