"""``airflow-doi sql generate [--check]``: write (or verify) the generated SQL and dbt files.

``airflow-doi sql duckdb-extension [--output DIR]``: compile the native DuckDB extension and
print the path to ``LOAD`` (see :mod:`airflow_doi.duckdb_native`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DESCRIPTION = """\
Generated SQL: generate writes (or checks) sql/<dialect>/doi_functions.sql and the dbt
macro bodies; duckdb-extension compiles the native DuckDB extension and prints its path."""


def _default_root() -> Path:
    # The repository root when run from a checkout; otherwise the current directory.
    here = Path(__file__).resolve().parents[2]
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def register(subparsers: Any) -> None:
    from airflow_doi.cli import HelpFormatter

    parser = subparsers.add_parser(
        "sql", help="generated SQL functions and dbt macro bodies",
        description=DESCRIPTION, formatter_class=HelpFormatter,
    )
    actions = parser.add_subparsers(
        dest="sql_command", required=True, metavar="ACTION", help="generate or duckdb-extension"
    )
    generate = actions.add_parser(
        "generate",
        help="write sql/<dialect>/doi_functions.sql and dbt_doi/macros/_generated/*.sql",
        description="Write (or, with --check, verify) the generated SQL functions and dbt "
        "macro bodies.\n\nExit status: 0 up to date or written; 1 --check found a file that "
        "differs; 2 a missing extra.",
        formatter_class=HelpFormatter,
    )
    generate.add_argument(
        "--root", type=Path, default=None, help="repository root (default: this checkout)"
    )
    generate.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if any committed file differs from the generator",
    )
    generate.set_defaults(func=run_generate)
    native = actions.add_parser(
        "duckdb-extension",
        help="compile the native DuckDB extension (doi_key & co.) and print its path",
        description="Compile the native DuckDB extension (doi_key and friends) and print the "
        "path to LOAD. Needs the [duckdb] extra and a C compiler.",
        formatter_class=HelpFormatter,
    )
    native.add_argument(
        "--output", type=Path, default=None, help="directory (default: a per-user cache)"
    )
    native.add_argument("--force", action="store_true", help="rebuild even if cached")
    native.set_defaults(func=run_duckdb_extension)


def run_duckdb_extension(args: argparse.Namespace) -> int:
    # A missing duckdb reaches the CLI's table of extras (airflow_doi.cli.EXTRAS).
    import duckdb  # noqa: F401  (the platform string comes from it)

    from airflow_doi.duckdb_native import build

    print(build(args.output, force=args.force))
    return 0


def run_generate(args: argparse.Namespace) -> int:
    from airflow_doi.sqlgen import generated_files  # sqlglot: the [sql] extra

    root: Path = args.root or _default_root()
    stale = []
    for relative, text in generated_files().items():
        path = root / relative
        current = path.read_bytes() if path.exists() else None
        wanted = text.encode("utf-8")
        if current == wanted:
            continue
        stale.append(relative)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(wanted)
    verb = "differ from the generator" if args.check else "written"
    for relative in stale:
        print(f"{relative}: {verb}", file=sys.stderr if args.check else sys.stdout)
    if args.check and stale:
        print("run `airflow-doi sql generate` and commit the result", file=sys.stderr)
        return 1
    if not stale:
        print("generated files are up to date")
    return 0
