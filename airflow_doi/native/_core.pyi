"""Types of the compiled ``airflow_doi.native._core`` (``doi_arrow.c``), built by setup.py."""

from typing import Any

SOURCE_DIGEST: str
OUT_DOI: int
OUT_KEY: int
OUT_URL: int
OUT_ENCODE: int

def run(
    schema: Any, array: Any, decode: int, output: int, base: bytes, /
) -> tuple[bytes | None, bytes, bytes, bytes | None, int]: ...
def scalar(value: str | None, decode: int, /) -> tuple[str | None, int]: ...
def csv_write(fd: int, columns: Any, delimiter: bytes, eol: bytes, /) -> int: ...
def line_rows(schema: Any, array: Any, /) -> bytes | None: ...
