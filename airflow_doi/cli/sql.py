"""``airflow-doi sql generate [--check]``: write (or verify) the generated SQL and dbt files.

``airflow-doi sql duckdb-extension [--output DIR]``: compile the native DuckDB extension and
print the path to ``LOAD`` (see :mod:`airflow_doi.duckdb_native`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def _default_root() -> Path:
    # The repository root when run from a checkout; otherwise the current directory.
    here = Path(__file__).resolve().parents[2]
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("sql", help="generated SQL functions and dbt macro bodies")
    actions = parser.add_subparsers(dest="sql_command", required=True)
    generate = actions.add_parser(
        "generate",
        help="write sql/<dialect>/doi_functions.sql and dbt_doi/macros/_generated/*.sql",
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
    )
    native.add_argument(
        "--output", type=Path, default=None, help="directory (default: a per-user cache)"
    )
    native.add_argument("--force", action="store_true", help="rebuild even if cached")
    native.set_defaults(func=run_duckdb_extension)


def run_duckdb_extension(args: argparse.Namespace) -> int:
    try:
        import duckdb  # noqa: F401  (the platform string comes from it)

        from airflow_doi.duckdb_native import build
    except ModuleNotFoundError as error:
        raise RuntimeError(f"{error.name} is missing: pip install 'airflow-doi[duckdb]'") from None
    print(build(args.output, force=args.force))
    return 0


def run_generate(args: argparse.Namespace) -> int:
    try:
        from airflow_doi.sqlgen import generated_files
    except ModuleNotFoundError as error:  # sqlglot is the "sql" extra
        raise RuntimeError(f"{error.name} is missing: pip install 'airflow-doi[sql]'") from None
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
