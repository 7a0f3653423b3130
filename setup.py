"""Build the optional native core at install time (everything else is in pyproject.toml).

Two C extensions share ``airflow_doi/native/doi_core.h``: ``airflow_doi.native._core`` (the
CPython module over Arrow arrays behind ``Series.doi``, ``airflow-doi normalize`` and the
Python-mode operators) and ``airflow_doi.native._doi_duckdb`` (the DuckDB extension, loaded by
airflow_doi.native.duckdb; a plain shared library that Python never imports). Both are
``optional``: without a C compiler ``pip install`` still succeeds and the package runs on its
pure-Arrow path, saying so once in the log. ``AIRFLOW_DOI_BUILD_NATIVE=0`` skips the build.
"""

from __future__ import annotations

import os
import runpy
from pathlib import Path

from setuptools import Extension, setup

NATIVE = Path("airflow_doi") / "native"
#: The one list of C sources and their digest (airflow_doi/native/sources.py, run by path).
SOURCES = runpy.run_path(str(NATIVE / "sources.py"))
ARROW_SOURCES, DUCKDB_SOURCES = SOURCES["ARROW"], SOURCES["DUCKDB"]


def _digest(names: tuple[str, ...]) -> str:
    return str(SOURCES["digest"](lambda name: (NATIVE / name).read_bytes(), names))


def _extensions() -> list[Extension]:
    if os.environ.get("AIRFLOW_DOI_BUILD_NATIVE") == "0":
        return []
    flags = ["-O3", "-std=c11", "-fvisibility=hidden"]
    return [
        Extension(
            "airflow_doi.native._core",
            sources=[str(NATIVE / "doi_arrow.c")],
            depends=[str(NATIVE / name) for name in ARROW_SOURCES],
            include_dirs=[str(NATIVE)],
            define_macros=[("DOI_SOURCE_DIGEST", f'"{_digest(ARROW_SOURCES)}"')],
            extra_compile_args=flags,
            optional=True,
        ),
        Extension(
            "airflow_doi.native._doi_duckdb",
            sources=[str(NATIVE / "doi_duckdb.c")],
            depends=[str(NATIVE / name) for name in DUCKDB_SOURCES],
            include_dirs=[str(NATIVE), str(NATIVE / "include")],
            define_macros=[("DOI_SOURCE_DIGEST", f'"{_digest(DUCKDB_SOURCES)}"')],
            extra_compile_args=flags,
            optional=True,
        ),
    ]


setup(ext_modules=_extensions())
