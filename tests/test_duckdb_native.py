"""The native DuckDB extension, built from source here and loaded into a real DuckDB.

It is a second implementation of the standard (C, beside :mod:`airflow_doi.syntax`), so it is
held to the same answers: every conformance vector, random mixtures, every two-byte percent
escape, every boundary of the illegal-character table, NULLs, long values and NUL bytes. Its
constant tables are read out of the C source and compared with the Python ones.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from airflow_doi.native import duckdb as duckdb_native
from airflow_doi.sqlgen.conformance import INJECTION, expected, mixtures
from airflow_doi.syntax import (
    ILLEGAL_RANGES,
    TRIM_CHARS,
)
from tests.test_sql_engines import cases, compare

pytestmark = pytest.mark.xdist_group("duckdb_native")

SOURCE = Path(duckdb_native.__file__).parent / "doi_duckdb.c"
FIVE = "doi_normalize(x), doi_key(x), doi_is_valid(x), doi_reason(x), doi_url(x)"


@pytest.fixture(scope="module")
def extension(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A fresh build every run: the test must prove the source compiles, not a cached file.
    return duckdb_native.build(tmp_path_factory.mktemp("ext"), force=True, from_source=True)


@pytest.fixture()
def con(extension: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    duckdb_native.load(connection, extension)
    yield connection
    connection.close()


def run_column(con: duckdb.DuckDBPyConnection, values: list[str | None]) -> list[tuple]:
    con.execute("CREATE OR REPLACE TABLE t (i INTEGER, x VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(values)))
    rows = con.execute(f"SELECT i, {FIVE} FROM t ORDER BY i").fetchall()
    return [(values[row[0]], row[1:]) for row in rows]


def test_every_vector_agrees_with_python_one_at_a_time(con: duckdb.DuckDBPyConnection) -> None:
    # A parameter is a constant vector: the other code path of the chunk loop.
    one = FIVE.replace("(x)", "($1)")
    answers = [(value, con.execute(f"SELECT {one}", [value]).fetchone()) for value in cases()]
    compare("duckdb native", answers)  # type: ignore[arg-type]


def test_vectors_and_random_mixtures_agree_as_one_column(con: duckdb.DuckDBPyConnection) -> None:
    values: list[str | None] = [*cases(), *mixtures(20_000, seed=11)]
    compare("duckdb native (column)", run_column(con, values))


def test_every_two_byte_escape_decodes_like_python(con: duckdb.DuckDBPyConnection) -> None:
    # 65,536 URLs: each pair of %XX escapes is judged by the UTF-8 rules exactly as Python's
    # strict decoder judges it (overlongs, surrogates, stray continuation bytes, %00).
    values: list[str | None] = [
        f"https://doi.org/10.1000/a%{a:02X}%{b:02x}" for a in range(256) for b in range(256)
    ]
    compare("duckdb native (two-byte escapes)", run_column(con, values))


def test_random_three_and_four_byte_escapes(con: duckdb.DuckDBPyConnection) -> None:
    rng = random.Random(5)
    interesting = [0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED,
                   0xEF, 0xF0, 0xF4, 0xF5, 0xFF]  # fmt: skip
    values: list[str | None] = []
    for _ in range(20_000):
        size = rng.choice((3, 4))
        pool = [*interesting, rng.randrange(256)]
        raw = "".join(f"%{rng.choice(pool):02X}" for _ in range(size))
        values.append(f"urn:doi:10.5555:x{raw}")
    compare("duckdb native (3/4-byte escapes)", run_column(con, values))


def test_every_illegal_range_boundary(con: duckdb.DuckDBPyConnection) -> None:
    points = {p for a, b in ILLEGAL_RANGES for p in (a - 1, a, b, b + 1)}
    points |= {ord(c) for c in TRIM_CHARS}
    points = {p for p in points if 0 <= p <= 0x10FFFF and not 0xD800 <= p <= 0xDFFF}
    values: list[str | None] = []
    for p in sorted(points):
        char = chr(p)
        values += [f"10.1000/a{char}b", f"{char}10.1000/x{char}", f"doi:{char}10.1000/y"]
        values.append(f"https://doi.org/10.1000/{''.join(f'%{b:02X}' for b in char.encode())}")
    compare("duckdb native (illegal boundaries)", run_column(con, values))


def test_nulls_long_values_and_nul_bytes(con: duckdb.DuckDBPyConnection) -> None:
    long_suffix = "é" * 3000 + "%41" * 500
    values: list[str | None] = [
        None,
        "",
        "10.1000/" + "x" * 100_000,
        "https://doi.org/10.1000/" + long_suffix,
        "urn:doi:10.1000:" + long_suffix,
        "10.1000/a\x00b",
        "https://doi.org/10.1000/a%00b",
        "\u3000" * 300 + "doi:\u3000 10.1000/Ab" + "\ufeff" * 300,
    ]
    answers = run_column(con, values)
    compare("duckdb native (edges)", answers)
    assert answers[0][1] == (None, None, False, "empty", None)


def test_injection_shaped_doi_round_trips(con: duckdb.DuckDBPyConnection) -> None:
    got = con.execute("SELECT doi_normalize($1), doi_key($1)", [INJECTION]).fetchone()
    assert got == (INJECTION, expected(INJECTION).key)
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (0,)


def test_connect_builds_and_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_DOI_CACHE_DIR", str(tmp_path))
    with duckdb_native.connect() as con:
        assert con.execute("SELECT doi_key('DOI:10.1000/ß')").fetchone() == ("10.1000/ß",)
    assert list(tmp_path.rglob("doi.duckdb_extension"))


def test_unsigned_extension_is_refused_without_the_setting(extension: Path) -> None:
    con = duckdb.connect()
    with pytest.raises(duckdb.Error, match=r"(?i)signature|unsigned"):
        duckdb_native.load(con, extension)


def test_missing_compiler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(duckdb_native.NativeBuildError, match="names no program"):
        duckdb_native.build(tmp_path, force=True, from_source=True)


def test_cli_without_library_or_compiler_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_doi.cli import main

    monkeypatch.setattr(duckdb_native, "installed_library", lambda: None)
    monkeypatch.setenv("CC", "")
    monkeypatch.setenv("PATH", str(tmp_path))  # no cc, no gcc
    assert main(["sql", "duckdb-extension", "--output", str(tmp_path / "x"), "--force"]) == 2
    err = capsys.readouterr().err
    assert "no C compiler" in err and "airflow-doi sql install" in err
    assert "Traceback" not in err


def test_metadata_footer_layout() -> None:
    footer = duckdb_native.metadata_footer("linux_amd64")
    tail = footer[-512:]
    fields = [tail[i * 32 : (i + 1) * 32].rstrip(b"\0").decode() for i in range(8)][::-1]
    assert fields[:5] == ["4", "linux_amd64", duckdb_native.C_API_VERSION, "v1", "C_STRUCT"]
    assert tail[256:] == b"\0" * 256


def test_pip_install_built_the_extension_and_build_uses_it_without_a_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # setup.py compiled airflow_doi/_doi_duckdb*.so from the current sources at install time.
    installed = duckdb_native.installed_library()
    assert installed is not None, "pip install did not build the DuckDB extension"
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))  # any compile would now fail
    built = duckdb_native.build(tmp_path / "out")
    assert built.read_bytes()[: installed.stat().st_size] == installed.read_bytes()
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    duckdb_native.load(con, built)
    assert con.execute("SELECT doi_key(' HTTPS://DOI.ORG/10.1000/Ab%2Fc ')").fetchone() == (
        "10.1000/AB/C",
    )


def test_a_library_from_other_sources_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(duckdb_native, "digest", lambda: "0123456789abcdef")
    assert duckdb_native.installed_library() is None
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(duckdb_native.NativeBuildError):
        duckdb_native.build(tmp_path, force=True)


def test_cli_builds_the_extension(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_doi.cli import main

    assert main(["sql", "duckdb-extension", "--output", str(tmp_path)]) == 0
    built = Path(capsys.readouterr().out.strip())
    assert built == tmp_path / "doi.duckdb_extension"
    assert built.read_bytes()[-512:] == duckdb_native.metadata_footer(
        str(duckdb.connect().execute("PRAGMA platform").fetchone()[0])  # type: ignore[index]
    )[-512:]
