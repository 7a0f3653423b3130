"""``airflow-doi sql generate [--check]``: write (or verify) the generated SQL and dbt files.

``airflow-doi sql print DIALECT``: one dialect's functions on stdout: the generated file as
shipped in the package (``airflow_doi/sql_files`` is the repository's ``sql/``), so no extra
is needed.

``airflow-doi sql install URL [--schema S]``: create the functions in a PostgreSQL, DuckDB
or MariaDB database; every statement is ``CREATE OR REPLACE``, so a second run changes
nothing and a newer version replaces the older one.

``airflow-doi sql dbt-package [--udfs]``: the directory of the dbt package shipped in the
wheel (``airflow_doi/dbt_package`` is the repository's ``dbt_doi/``), for a ``packages.yml``
``local:`` entry.

``airflow-doi sql duckdb-extension [--output DIR]``: prepare the native DuckDB extension and
print the path to ``LOAD`` (see :mod:`airflow_doi.native.duckdb`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

from airflow_doi.cli._files import input_error, say
from airflow_doi.db.install import (
    DIALECT_ALIASES,
    InstallError,
    in_schema,
    install,
    shipped_dialects,
    shipped_sql,
    sql_dialect,
)
from airflow_doi.resolver.config import redact_url, scrub
from airflow_doi.words import plural

#: The one line of ``airflow-doi --help`` for this command.
HELP = "generated SQL functions and dbt macro bodies"
DESCRIPTION = """\
Generated SQL: generate writes (or checks) sql/<dialect>/doi_functions.sql and the dbt
macro bodies; print writes one dialect's functions to stdout; install creates them in a
PostgreSQL, DuckDB or MariaDB/MySQL database; dbt-package prints where the dbt package is
installed; duckdb-extension prepares the native DuckDB extension and prints its path."""

#: URL scheme -> (dialect of the generated file, the extra whose driver connects).
INSTALL_SCHEMES: dict[str, tuple[str, str]] = {
    "postgresql": ("postgres", "postgres"),
    "postgres": ("postgres", "postgres"),
    "duckdb": ("duckdb", "duckdb"),
    "mysql": ("mariadb", "mariadb"),
    "mariadb": ("mariadb", "mariadb"),
}


def _default_root() -> Path | None:
    """The repository root when this is a checkout (an editable install); None otherwise."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "pyproject.toml").exists() and (here / "dbt_doi").is_dir() else None


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("sql", help=HELP, description=DESCRIPTION)
    actions = parser.add_subparsers(
        dest="sql_command", required=True, metavar="ACTION",
        help="generate, print, install, dbt-package or duckdb-extension",
    )
    for name, (help_text, description, arguments, run) in _ACTIONS.items():
        action = actions.add_parser(name, help=help_text, description=description)
        arguments(action)
        action.set_defaults(func=run)


def _generate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root", type=Path, default=None,
        help="repository root (default: this checkout; an installed package has none)",
    )
    parser.add_argument(
        "--check", action="store_true",
        help="write nothing; exit 1 if any committed file differs from the generator",
    )


def _print_arguments(parser: argparse.ArgumentParser) -> None:
    known = shipped_dialects()
    aliases = ", ".join(f"{alias} for {target}" for alias, target in DIALECT_ALIASES.items())
    parser.add_argument("dialect", help=f"{', '.join(known[:-1])} or {known[-1]} (also "
                        f"{aliases})")
    parser.add_argument(
        "--schema", help="create every function in this schema (or database.schema; on "
        "BigQuery a dataset, and the functions become persistent instead of TEMP) and "
        "qualify the calls between them",
    )


def _install_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="database URL")
    parser.add_argument(
        "--schema", help="schema to create them in (created if missing); MariaDB: the "
        "database. Default: the connection's current schema",
    )


def _dbt_package_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--udfs", action="store_true", help="the UDF package dbt_doi_udfs instead")


def _duckdb_extension_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output", type=Path, default=None, help="directory (default: a per-user cache)"
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")


def run_dbt_package(args: argparse.Namespace) -> int:
    # A wheel installs real files, an editable install points at the checkout: either way a
    # directory on disk, resolved so the printed path names the files themselves.
    with as_file(files("airflow_doi") / "dbt_package") as package:
        path = Path(package).resolve() / ("udfs" if args.udfs else "")
    print(path)
    return 0


def run_duckdb_extension(args: argparse.Namespace) -> int:
    # A missing duckdb reaches the CLI's table of extras (airflow_doi.cli.EXTRAS).
    import duckdb  # noqa: F401  (the platform string comes from it)

    from airflow_doi.native.duckdb import NativeBuildError, build

    try:
        path = build(args.output, force=args.force)
    except NativeBuildError as error:
        print(f"airflow-doi sql duckdb-extension: error: {error}", file=sys.stderr)
        return 2
    print(path)
    return 0


def run_generate(args: argparse.Namespace) -> int:
    from airflow_doi.sqlgen import generated_files  # sqlglot: the [sql] extra

    root = args.root or _default_root()
    if root is None:
        # An installed package has no checkout to regenerate: never write into the current
        # directory unasked.
        return input_error("sql generate", ValueError(
            "this install is not a checkout of airflow-doi, so there are no generated files to "
            "write or check: pass --root DIR to write them under DIR, or use `airflow-doi sql "
            "print DIALECT` for one dialect's functions"))
    stale = []
    for relative, text in generated_files().items():
        path = root / relative
        current = path.read_bytes() if path.exists() else None
        wanted = text.encode("utf-8")
        if current == wanted:
            continue
        stale.append((relative, current is None))
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(wanted)
    for relative, missing in stale:
        verb = "written" if not args.check else "missing" if missing else (
            "differs from the generator")
        print(f"{relative}: {verb}", file=sys.stderr if args.check else sys.stdout)
    if args.check and stale:
        again = f" --root {args.root}" if args.root else ""
        print(f"run `airflow-doi sql generate{again}` and commit the result", file=sys.stderr)
        return 1
    if not stale:
        print("generated files are up to date")
    return 0


def _generated(dialect: str) -> str:
    return shipped_sql(dialect)


def run_print(args: argparse.Namespace) -> int:
    try:
        dialect = sql_dialect(args.dialect)
        text = _generated(dialect)
        if args.schema is not None:
            text = in_schema(dialect, text, args.schema)
    except ValueError as error:
        return input_error("sql print", error)
    if dialect == "mariadb" and args.dialect.strip().lower() == "mysql":
        say("sql print", "note: the MariaDB 10.5+ functions (MySQL 8's regular expressions "
            "differ: there, use the operators' mode='python' or airflow_doi in Python)")
    sys.stdout.write(text)
    return 0


def run_install(args: argparse.Namespace) -> int:
    scheme = args.url.partition("://")[0].lower()
    if scheme not in INSTALL_SCHEMES or "://" not in args.url:
        return input_error("sql install", ValueError(
            f"cannot install into {_redact(args.url)!r}: give a postgresql://, "
            "duckdb:/// or mysql:// URL"))
    dialect, _extra = INSTALL_SCHEMES[scheme]
    try:
        count, where = install(args.url, dialect, _generated(dialect), schema=args.schema)
    except (InstallError, ValueError) as error:  # what a driver said, without the password
        return input_error("sql install", ValueError(scrub(str(error), args.url)))
    say("sql install", f"{plural(count, 'function')} created or replaced in {where}")
    return 0


def _redact(url: str) -> str:
    return redact_url(url)


#: ACTION -> (its line in the help, its description, what adds its arguments, what runs it).
_ACTIONS: dict[str, tuple[str, str, Callable[[argparse.ArgumentParser], None],
                          Callable[[argparse.Namespace], int]]] = {
    "generate": (
        "write sql/<dialect>/doi_functions.sql and dbt_doi/macros/_generated/*.sql",
        "Write (or, with --check, verify) the generated SQL functions and dbt macro bodies."
        "\n\nExit status: 0 up to date or written; 1 --check found a file that differs; 2 a "
        "missing extra.",
        _generate_arguments, run_generate,
    ),
    "print": (
        "write one dialect's DOI functions to stdout",
        "Write the DOI functions of one SQL dialect to stdout, e.g. airflow-doi sql print "
        "postgres > doi.sql. The files ship with the package: no extra is needed.\n\nExit "
        "status: 0 printed; 2 an unknown dialect or a --schema that dialect cannot take.",
        _print_arguments, run_print,
    ),
    "install": (
        "create the DOI functions in a PostgreSQL, DuckDB or MariaDB database",
        "Create (or replace) doi_normalize, doi_key, doi_is_valid, doi_reason, doi_url and "
        "their doi__* helpers in a database, e.g. airflow-doi sql install "
        "postgresql://user@host/db --schema doi. Nothing else is created or changed (but "
        "the --schema, and a DuckDB file that does not exist yet, as duckdb FILE would); a "
        "second run changes nothing. The schema (letters, digits, _, $ and -) is quoted as "
        "given in every statement.\n\nURL: postgresql://..., duckdb:///path/file.duckdb (a "
        "file, percent-decoded; not :memory:), "
        "mysql://user:password@host:port/db (MariaDB or MySQL).\n\nExit status: 0 installed; "
        "2 a bad URL or --schema, an unreachable or refusing database, or a missing extra.",
        _install_arguments, run_install,
    ),
    "dbt-package": (
        "print the directory of the dbt package dbt_doi shipped with airflow-doi",
        "Print the directory of the dbt package dbt_doi as installed with airflow-doi (no "
        "extra needed), for a packages.yml entry:\n\n  packages:\n    - local: <the printed "
        "path>\n\n--udfs prints the directory of dbt_doi_udfs, its function resources (dbt "
        "1.11+); list it beside dbt_doi.",
        _dbt_package_arguments, run_dbt_package,
    ),
    "duckdb-extension": (
        "prepare the native DuckDB extension (doi_key & co.) and print its path",
        "Prepare the native DuckDB extension (doi_key and friends) and print the path to "
        "LOAD: the library pip built at install time, or, where there is none, one compiled "
        "now with the machine's C compiler. Needs the [duckdb] extra.",
        _duckdb_extension_arguments, run_duckdb_extension,
    ),
}
