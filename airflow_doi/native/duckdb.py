"""Build and load ``doi``, the native DuckDB extension behind the fastest ``doi_key``.

The generated macros in ``sql/duckdb/doi_functions.sql`` run anywhere DuckDB runs but cost
about five ``UPPER()`` calls a value; the C extension (``native/doi_duckdb.c`` over the shared
core ``native/doi_core.h``) parses a value in one pass and keys a column at 0.8 to 1.0 of
``UPPER()``'s speed (see ``bench/sql.py``). ``pip install`` compiles it where a C compiler
is present (``setup.py``: ``airflow_doi/native/_doi_duckdb*.so``, against the DuckDB C extension API
headers vendored in ``airflow_doi/native/include``: C API v1.2.0, so any DuckDB from 1.2 on
loads it); :func:`build` then only copies that library into a cache directory with the
metadata footer DuckDB reads before loading an extension file. Where the install had no
compiler, or the installed library is older than the sources, :func:`build` compiles the
source with the machine's C compiler instead.

DuckDB loads only signed extensions unless the connection was opened with
``allow_unsigned_extensions``; :func:`connect` does that and loads the extension, and
:func:`load` loads it into a connection you opened that way yourself. The extension registers
``doi_key``, ``doi_normalize``, ``doi_is_valid``, ``doi_reason`` and ``doi_url``: do not install
the SQL macros into the same database too (macros shadow built-in functions, so the slow ones
would answer; ``system.main.doi_key(...)`` always reaches the extension). Needs ``duckdb`` (the
``[duckdb]`` extra) and a C compiler (``cc``, or ``$CC``): Linux and macOS; the file needs no
DuckDB symbols at link time (the C API arrives as a table of function pointers).
Without a compiler, only the library ``pip install`` built can serve.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_doi._user_cache import user_cache_dir
from airflow_doi.native import digest_of, sources

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "EXTENSION_NAME", "NativeBuildError", "build", "connect", "digest", "installed_library", "load",
    "metadata_footer",
]

EXTENSION_NAME = "doi"
#: The C API version the source targets (``DUCKDB_EXTENSION_API_VERSION_*`` in the C file).
C_API_VERSION = "v1.2.0"
_EXTENSION_VERSION = "v1"


class NativeBuildError(RuntimeError):
    """The extension could not be compiled (no C compiler, or the compiler failed)."""


def _field(text: str) -> bytes:
    raw = text.encode("ascii")
    if len(raw) > 32:
        raise ValueError(f"metadata field longer than 32 bytes: {text!r}")
    return raw.ljust(32, b"\0")


def metadata_footer(platform: str, capi_version: str = C_API_VERSION) -> bytes:
    """The 512 bytes DuckDB reads from the end of an extension file.

    Eight 32-byte fields in reverse order (magic ``4``, platform, C API version, extension
    version, ABI type ``C_STRUCT``, three unused), then a 256-byte signature left empty: the
    file is unsigned. Preceded, as DuckDB's own build does, by a WebAssembly custom-section
    header so that the file stays a valid Wasm module where that matters.
    """
    fields = ["4", platform, capi_version, _EXTENSION_VERSION, "C_STRUCT", "", "", ""]
    header = bytes([0, 147, 4, 16]) + b"duckdb_signature" + bytes([128, 4])
    return header + b"".join(_field(f) for f in reversed(fields)) + b"\0" * 256


#: Compiled into the library (``setup.py`` and :func:`build`) so that a stale one is spotted.
DIGEST_MARKER = b"airflow-doi-source-digest:"


def _sources() -> tuple[Path, Path]:
    root = Path(str(resources.files("airflow_doi.native")))
    return root / "doi_duckdb.c", root / "include"


def digest() -> str:
    """The digest of the installed C sources of the extension."""
    return digest_of(sources.DUCKDB)


def installed_library() -> Path | None:
    """The library ``pip install`` compiled (``airflow_doi/native/_doi_duckdb*.so``), if current."""
    package = Path(str(resources.files("airflow_doi.native")))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        library = package / f"_doi_duckdb{suffix}"
        if library.is_file() and DIGEST_MARKER + digest().encode() in library.read_bytes():
            return library
    return None


def _platform() -> str:
    import duckdb

    row = duckdb.connect().execute("PRAGMA platform").fetchone()
    assert row is not None
    return str(row[0])


def _cache_dir() -> Path:
    return user_cache_dir() / "duckdb"


def build(
    output_dir: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    from_source: bool = False,
) -> Path:
    """The path of a loadable ``doi.duckdb_extension`` (cached by source digest and platform).

    The library ``pip install`` compiled is copied and given its footer; without one (no
    compiler at install time, or ``from_source=True``) the source is compiled here. ``force``
    redoes the work even when the cached file exists.
    """
    source, include = _sources()
    platform = _platform()
    name = hashlib.sha256((digest() + platform).encode()).hexdigest()[:16]
    target_dir = Path(output_dir) if output_dir is not None else _cache_dir() / name
    target = target_dir / f"{EXTENSION_NAME}.duckdb_extension"
    if target.exists() and not force:
        return target
    installed = None if from_source else installed_library()
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if installed is None and not compiler:
        raise NativeBuildError(
            "the DuckDB extension was not built when airflow-doi was installed and no C "
            "compiler is found to build it now: install one (Debian: gcc) or set CC; or use "
            "the SQL functions instead (airflow-doi sql install duckdb:///PATH)"
        )
    if installed is None and compiler and not shutil.which(compiler):
        raise NativeBuildError(f"CC={compiler} names no program: point CC at a C compiler")
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target_dir) as tmp:
        library = Path(tmp) / target.name
        if installed is not None:
            shutil.copyfile(installed, library)
        else:
            command = [
                str(compiler), "-O3", "-std=c11", "-Wall", "-Wextra", "-fPIC", "-shared",
                "-fvisibility=hidden", f"-DDOI_SOURCE_DIGEST=\"{digest()}\"",
                "-I", str(include), "-I", str(source.parent), "-o", str(library), str(source),
            ]  # fmt: skip
            try:
                done = subprocess.run(command, capture_output=True, text=True, check=False)
            except OSError as error:
                raise NativeBuildError(f"{compiler} could not be run: {error.strerror}") from None
            if done.returncode != 0:
                raise NativeBuildError(f"{' '.join(command)} failed:\n{done.stderr}")
        with library.open("ab") as handle:
            handle.write(metadata_footer(platform))
        os.replace(library, target)  # atomic: parallel builders never see half a file
    return target


def load(con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str] | None = None) -> None:
    """Load the extension into ``con`` (opened with ``allow_unsigned_extensions``)."""
    extension = Path(path) if path is not None else build()
    con.execute(f"LOAD '{_sql_string(str(extension))}'")


def connect(database: str = ":memory:", **kwargs: Any) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect`` with unsigned extensions allowed and ``doi`` loaded."""
    import duckdb

    config = dict(kwargs.pop("config", None) or {})
    config["allow_unsigned_extensions"] = "true"
    con = duckdb.connect(database, config=config, **kwargs)
    load(con)
    return con


def _sql_string(text: str) -> str:
    # LOAD takes no parameters; the path is ours, but quote it properly all the same.
    return text.replace("'", "''")
