"""`airflow-doi sql generate` reproduces the committed files byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_doi.cli import main
from airflow_doi.sqlgen import DIALECTS, generate, generated_files
from tests.conftest import ROOT


def test_generate_reproduces_committed_files(tmp_path: Path) -> None:
    assert main(["sql", "generate", "--root", str(tmp_path)]) == 0
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert written == sorted(generated_files())
    for relative in written:
        committed = ROOT / relative
        assert committed.exists(), f"{relative} is generated but not committed"
        assert (tmp_path / relative).read_bytes() == committed.read_bytes(), (
            f"{relative} drifted from the generator: run `airflow-doi sql generate`"
        )


def test_every_required_dialect_is_generated() -> None:
    required = {"duckdb", "postgres", "snowflake", "bigquery", "databricks", "spark", "trino"}
    assert required | {"redshift", "sqlite"} <= set(DIALECTS)
    for name in DIALECTS:
        assert (ROOT / "sql" / name / "doi_functions.sql").exists()


def test_check_mode_reports_drift_without_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["sql", "generate", "--root", str(tmp_path)])
    target = tmp_path / "sql" / "duckdb" / "doi_functions.sql"
    target.write_text("-- edited by hand\n", encoding="utf-8")
    assert main(["sql", "generate", "--root", str(tmp_path), "--check"]) == 1
    assert "sql/duckdb/doi_functions.sql" in capsys.readouterr().err
    assert target.read_text(encoding="utf-8") == "-- edited by hand\n"
    assert main(["sql", "generate", "--root", str(ROOT), "--check"]) == 0


def test_unknown_dialect_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown dialect 'oracle'"):
        generate("oracle")


def test_dbt_bodies_are_jinja_safe_and_cover_every_function() -> None:
    for path, text in generated_files().items():
        if path.parts[0] != "dbt_doi":
            continue
        adapter = path.stem
        for name in ("doi_normalize", "doi_key", "doi_is_valid", "doi_reason", "doi_url"):
            assert f"{{% macro {adapter}__{name}(value) -%}}" in text
        assert "({{ value }})" in text
