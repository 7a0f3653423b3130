"""The native core: find the compiled C module, say which engine serves, validate one value.

Standard library only; the C sources and their one list (:mod:`.sources`) live here too,
with the modules that load the builds: :mod:`.arrow` (columns), :mod:`.duckdb` (the DuckDB
extension) and :mod:`.tables` (the C tables generated from the Python constants).

``airflow_doi.native._core`` (``doi_arrow.c`` over ``doi_core.h``) is compiled by
setuptools at install time when a C compiler is present. Where it is missing (no compiler at
install time), stale (its sources changed since it was built) or switched off
(``AIRFLOW_DOI_NATIVE=0``), :func:`module` returns ``None`` and says why once in the log, and
callers use the pure-Python/pure-Arrow paths, which give the same answers more slowly.
Column-at-a-time callers go through :mod:`airflow_doi.native.arrow`; value-at-a-time callers
(SQLite's functions, the Python-mode operators) through :func:`validate`.
"""

from __future__ import annotations

import functools
import logging
import os
from importlib import resources
from types import ModuleType
from typing import Final

from airflow_doi._install import pip_install
from airflow_doi.native import sources
from airflow_doi.syntax import REASONS, Decode, Validation
from airflow_doi.syntax import validate as _validate

__all__ = ["DISABLE_ENV", "module", "source_digest", "status", "validate"]

log = logging.getLogger("airflow_doi.native")

#: Set to ``0`` (or ``false``, ``no``, ``off``) to use the pure-Python/Arrow paths even where
#: the native module is built.
DISABLE_ENV: Final[str] = "AIRFLOW_DOI_NATIVE"
DECODES: Final[dict[str, int]] = {"auto": 0, "always": 1, "never": 2}


def digest_of(names: tuple[str, ...]) -> str:
    """The digest of installed C sources, as ``setup.py`` bakes it into what it builds."""
    root = resources.files(__name__)
    return sources.digest(lambda name: (root / name).read_bytes(), names)


def source_digest() -> str:
    """The digest of the module's installed C sources."""
    return digest_of(sources.ARROW)


@functools.cache
def _load() -> tuple[ModuleType | None, str]:
    setting = os.environ.get(DISABLE_ENV, "1").strip().lower()
    if setting in ("0", "false", "no", "off"):
        return None, f"switched off ({DISABLE_ENV}={os.environ[DISABLE_ENV]})"
    try:
        from airflow_doi.native import _core as _native
    except ImportError:
        return None, (
            "not built (when pip installed airflow-doi it found no C compiler or no Python "
            "headers, or AIRFLOW_DOI_BUILD_NATIVE=0 was set); reinstall with gcc and the Python "
            "headers present (Debian: gcc python3-dev) for the fast path"
        )
    if _native.SOURCE_DIGEST != source_digest():
        return None, (
            "built from older sources than the installed ones; reinstall airflow-doi to "
            f"rebuild it: {pip_install(force=True)} --no-deps"
        )
    return _native, "the native core (airflow_doi.native._core)"


@functools.cache
def module() -> ModuleType | None:
    """The compiled module, or ``None`` (logged once) when the slower paths must serve."""
    native, why = _load()
    if native is None:
        log.info("airflow-doi: native DOI core %s; using the slower pure-Arrow path", why)
    return native


def status() -> str:
    """One line: which engine serves the vectorized functions, and why."""
    native, why = _load()
    return f"native: {why}" if native is not None else f"pure Arrow: the native core is {why}"


def validate(value: object, *, decode: Decode = "auto") -> Validation:
    """:func:`airflow_doi.syntax.validate`, through the C core where it can take the value.

    Text goes to C; bytes (which may need decoding), other types and strings with lone
    surrogates (not UTF-8) go to the Python parser. The answers are the same (tested).
    """
    native = module()
    if native is None or type(value) is not str:
        return _validate(value, decode=decode)
    try:
        doi, code = native.scalar(value, DECODES[decode])
    except UnicodeEncodeError:
        return _validate(value, decode=decode)
    except KeyError:
        raise ValueError(f"decode must be 'auto', 'always' or 'never', not {decode!r}") from None
    return Validation(code < 0, None if code < 0 else REASONS[code], doi)
