"""`airflow-doi sql generate` reproduces the committed files byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot
import yaml
from sqlglot import exp

from airflow_doi.cli import main
from airflow_doi.sqlgen import (
    DBT_GENERATED_DIR,
    DIALECTS,
    Dialect,
    definition,
    generate,
    generated_files,
)
from airflow_doi.sqlgen.render import _JINJA_ARG, PARTS, STEP_PARAMS, _deep_trees
from airflow_doi.syntax import TRIM_CHARS
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
        names = ("doi_normalize", "doi_key", "doi_is_valid", "doi_reason", "doi_url")
        if path.suffix == ".yml":  # the dbt docs entries of the same macros
            assert yaml.safe_load(text)["macros"] == [
                {**entry, "name": f"{adapter}__{name}"}
                for name, entry in zip(names, yaml.safe_load(text)["macros"], strict=True)
            ]
            continue
        for name in names:
            assert f"{{% macro {adapter}__{name}(value) -%}}" in text
            assert f"dbt_doi._function_call('{name}', value)" in text
        assert "({{ value }})" in text


# -- issue #15: what the generator means to write is what the files hold ----------------------


def _string_literals(tree: exp.Expression, dialect: Dialect) -> set[str]:
    """String literals of a parsed tree, looking inside $$-quoted bodies too."""
    found = {node.this for node in tree.find_all(exp.Literal) if node.is_string}
    for node in tree.find_all(exp.RawString, exp.Heredoc):
        inner = node.this if isinstance(node.this, str) else node.name
        found |= _string_literals(sqlglot.parse_one(inner, read=dialect.sqlglot_dialect), dialect)
    return found


def _file_literals(dialect: Dialect, text: str) -> set[str]:
    """Every string literal of a generated file, read back with sqlglot in its own dialect.

    DuckDB macros and PostgreSQL RETURN bodies are not DDL sqlglot models: their bodies are
    cut out of the command text (after "AS" or "RETURN") and parsed as expressions.
    """
    found: set[str] = set()
    if dialect.name == "mariadb":
        # Statements between DELIMITER lines (split as the mariadb client does); the stored
        # helpers' compound bodies are hand-written, the RETURN bodies are generated.
        from airflow_doi.db.install import mariadb_statements

        bodies = [s.split("\nRETURN\n", 1)[1] for s in mariadb_statements(text)
                  if "\nRETURN\n" in s]
        assert len(bodies) == 11, len(bodies)
        for body in bodies:
            found |= _string_literals(sqlglot.parse_one(body, read="mysql"), dialect)
        return found
    for statement in sqlglot.parse(text, read=dialect.sqlglot_dialect):
        if isinstance(statement, exp.Command):
            body = statement.expression
            for marker in (" AS\n", "\nRETURN\n"):
                body = body.split(marker, 1)[-1]
            statement = sqlglot.parse_one(body.rstrip().rstrip(";"), read=dialect.sqlglot_dialect)
        if statement is not None:
            found |= _string_literals(statement, dialect)
    return found


def _dbt_literals(dialect: Dialect, text: str) -> set[str]:
    """String literals of the SQL bodies of a generated dbt macro file (Jinja cut away)."""
    found: set[str] = set()
    body: list[str] = []
    native = False  # inside {%- if var(...) -%}: the call of the native function, no body
    for line in text.split("\n"):  # never splitlines(): see Dialect.indent
        if line.startswith(("{% macro", "{%- if", "{%- else")):
            body, native = [], line.startswith("{%- if")
        elif line.startswith(("{%- endmacro", "{%- endif")) and body:
            sql = "\n".join(body).replace("({{ value }})", f"({_JINJA_ARG})")
            found |= _string_literals(sqlglot.parse_one(sql, read=dialect.sqlglot_dialect), dialect)
            body = []
        elif not native and not line.startswith("{#-"):
            body.append(line)
    return found


def _intended_literals(dialect: Dialect, binding: str, steps: bool) -> set[str]:
    """String literals of the lowered definition: built from the syntax/presentation tables."""
    arg = exp.column(dialect.argument if steps else _JINJA_ARG)
    trees = [definition.STEPS[n](exp.column(p)) for n, p in STEP_PARAMS.items()] if steps else []
    trees += [definition.BUILDERS[n](arg, PARTS[binding](arg)) for n in definition.PUBLIC_FUNCTIONS]
    return {
        node.this
        for tree in trees
        for node in dialect.lower(tree.copy()).find_all(exp.Literal)
        if node.is_string
    }


@pytest.mark.parametrize("name", [n for n in DIALECTS if n != "sqlite"])
def test_every_string_literal_reaches_the_generated_files_intact(name: str) -> None:
    """Each literal the definition lowers to (regexes holding raw U+0085, U+2028, ... in
    Snowflake) appears unchanged when the file is parsed back, in sql/ and in dbt."""
    dialect = DIALECTS[name]
    with _deep_trees():
        wanted = _intended_literals(dialect, dialect.binding, dialect.has_helper_functions)
        found = _file_literals(dialect, (ROOT / "sql" / name / "doi_functions.sql").read_text())
        assert wanted - found == set(), f"sql/{name}: literals changed by the file layout"
        if dialect.dbt_adapter and dialect.dbt_binding:
            path = ROOT / DBT_GENERATED_DIR / f"{dialect.dbt_adapter}.sql"
            wanted = _intended_literals(dialect, dialect.dbt_binding, False)
            assert wanted - _dbt_literals(dialect, path.read_text()) == set(), path
    # The check reads what it should: the trimming class is among those literals.
    trim = dialect.regex(f"[{TRIM_CHARS}]")[1:-1]
    assert any(trim in literal for literal in wanted), name


def test_generated_sql_is_never_split_on_unicode_line_breaks() -> None:
    literal = "'[\x85\u2028\u2029\x0b\x0c\x1c]'"
    for dialect in DIALECTS.values():
        assert dialect.indent(f"F(x, {literal})\nOR y") == f"  F(x, {literal})\n  OR y"


def test_snowflake_decodes_percent_00_to_a_character_its_patterns_can_see() -> None:
    """Snowflake's patterns cannot hold U+0000 (Dialect.regex maps it to U+0001), so a decoded
    %00 would pass the bad_character test: the decoder turns the escape into %01 first. No
    Snowflake engine runs here, so this checks the generated decoder and the file."""
    snowflake = DIALECTS["snowflake"]
    assert "\x00" not in snowflake.regex(definition.ILLEGAL)
    decoder = snowflake.pct_decode(exp.column("x")).sql(dialect="snowflake")
    assert "REPLACE(REPLACE(CAST(r AS VARCHAR), '%00', '%01'), '%', '')" in decoder
    assert "'%00', '%01'" in (ROOT / "sql" / "snowflake" / "doi_functions.sql").read_text()


def test_an_installed_package_never_generates_into_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Found in a new-user trial: from an installed package, `sql generate` wrote 24 files
    into whatever directory it ran in, and `--check` called missing files 'differ'."""
    from airflow_doi.cli import sql as sql_cli

    monkeypatch.setattr(sql_cli, "_default_root", lambda: None)
    monkeypatch.chdir(tmp_path)
    assert main(["sql", "generate"]) == 2
    assert "not a checkout of airflow-doi" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    assert main(["sql", "generate", "--check", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "sql/duckdb/doi_functions.sql: missing" in err and "differs" not in err
    assert f"run `airflow-doi sql generate --root {tmp_path}`" in err  # a hint that works
    assert list(tmp_path.iterdir()) == []


#: Spellings common in real catalogues (bench/operators_scale.py's mix), each answered by a
#: shortcut that needs no regular expression past a literal prefix (issue #32: on PostgreSQL
#: the one for padded and odd-case spellings costs 1.2-1.6 µs a row, several literal tests).
SHORTCUT_SPELLINGS: tuple[str, ...] = (
    "10.1000/j.cell.1",
    "https://doi.org/10.1000/J.CELL.1",
    "http://dx.doi.org/10.1000/j.cell.1",
    "doi:10.1000/j.Cell.1",
    "DOI: 10.1000/j.cell.1",
    "DOI:10.1000/j.cell.1",
    "urn:doi:10.1000:j.cell.1",
    "10.1000/j.cell.1é",
    "https://doi.org/10.1000/j.cell.%3C1",
)


def test_common_spellings_are_answered_before_the_regular_expression_branches() -> None:
    import duckdb

    s = exp.column("x")
    branches = definition._fast_branches(
        s, lambda doi: doi, hopeless=exp.null(), from_dt=lambda dt: dt, url_dt=exp.null()
    )
    wrapped = definition.re_match(s.copy(), definition.SIMPLE_WRAPPED)
    first_regex = next(i for i, b in enumerate(branches) if b.this == wrapped)
    duck = DIALECTS["duckdb"]
    conditions = ", ".join(
        f"COALESCE({duck.to_sql(b.this)}, false)" for b in branches[:first_regex]
    )
    con = duckdb.connect()
    for value in SHORTCUT_SPELLINGS:
        row = con.execute(f"SELECT {conditions} FROM (SELECT ? AS x)", [value]).fetchone()
        assert row is not None and any(row), f"{value!r} reaches the regular expressions"
    # And a spelling only the regular expression knows still gets there.
    row = con.execute(f"SELECT {conditions} FROM (SELECT ? AS x)", ["Doi: 10.1/x"]).fetchone()
    assert row is not None and not any(row)
