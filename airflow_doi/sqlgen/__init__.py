"""Generate the DOI functions for SQL engines and dbt from one canonical definition.

The definition (:mod:`.definition`) is a set of sqlglot expressions built from the constants
of :mod:`airflow_doi.syntax`; each dialect (:mod:`.dialects`) lowers it with a pure transform
and wraps it in its ``CREATE FUNCTION`` template; :mod:`.render` glues steps together. sqlglot
transpiles expressions well but not DDL, and it passes unknown functions through silently,
which is why every generated file is also run on a real engine by the test suite.

This package needs ``sqlglot`` (the ``sql`` extra); the generated files do not.
"""

from __future__ import annotations

from pathlib import Path

from airflow_doi.db.install import DIALECT_ALIASES
from airflow_doi.sqlgen.dialects import DIALECTS, Dialect
from airflow_doi.sqlgen.render import dbt_macros_docs, dbt_macros_file, functions_file

__all__ = ["DIALECTS", "Dialect", "generate", "generated_files"]

#: Where the dbt adapter bodies go, relative to the repository root.
DBT_GENERATED_DIR = Path("dbt_doi/macros/_generated")


def generate(dialect: str) -> str:
    """The text of ``sql/<dialect>/doi_functions.sql`` (``dialect`` as people write it too:
    ``postgresql``, ``pg``, ``mysql``; see :func:`airflow_doi.db.install.sql_dialect`)."""
    try:
        return functions_file(DIALECTS[DIALECT_ALIASES.get(dialect.lower(), dialect.lower())])
    except KeyError:
        aliases = ", ".join(f"{alias} for {target}" for alias, target in DIALECT_ALIASES.items())
        raise ValueError(f"unknown dialect {dialect!r}; known: {', '.join(DIALECTS)} (also "
                         f"{aliases})") from None


def generated_files() -> dict[Path, str]:
    """Every generated file, by path relative to the repository root (sorted, stable)."""
    files: dict[Path, str] = {}
    for name, dialect in DIALECTS.items():
        files[Path("sql") / name / "doi_functions.sql"] = functions_file(dialect)
        if dialect.dbt_adapter:
            files[DBT_GENERATED_DIR / f"{dialect.dbt_adapter}.sql"] = dbt_macros_file(dialect)
            files[DBT_GENERATED_DIR / f"{dialect.dbt_adapter}.yml"] = dbt_macros_docs(dialect)
    return dict(sorted(files.items()))
