"""The one list of the C sources each compiled module is built from, and their digest.

Standard library only and free of package imports: ``setup.py`` runs this file by path at
build time to bake the digest into what it compiles; :mod:`airflow_doi.native` and
:mod:`airflow_doi.native.duckdb` compute the same digest over the installed sources to refuse
a stale build.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final

#: ``airflow_doi.native._core``, the CPython module over Arrow arrays.
ARROW: Final[tuple[str, ...]] = ("doi_arrow.c", "doi_core.h", "doi_tables.h")
#: ``airflow_doi.native._doi_duckdb``, the DuckDB extension.
DUCKDB: Final[tuple[str, ...]] = ("doi_duckdb.c", "doi_core.h", "doi_tables.h")


def digest(read: Callable[[str], bytes], names: tuple[str, ...]) -> str:
    """The first 16 hex digits of the SHA-256 of the named sources, read in that order."""
    sha = hashlib.sha256()
    for name in names:
        sha.update(read(name))
    return sha.hexdigest()[:16]
