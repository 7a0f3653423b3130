"""Shared fixtures: the conformance vectors and the real services the suite talks to.

Services are never skipped: ``scripts/test.sh`` starts PostgreSQL and Redis (installing them
from Debian's packages on a fresh machine), and a fixture that cannot reach one fails loudly.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
VECTORS_DIR = Path(__file__).resolve().parent / "vectors"

POSTGRES_DSN = os.environ.get(
    "AIRFLOW_DOI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("AIRFLOW_DOI_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
MARIADB_DSN = os.environ.get("AIRFLOW_DOI_TEST_MARIADB_DSN", "mysql://root@127.0.0.1:3306/test")


def load_vectors() -> list[dict[str, Any]]:
    """Every conformance vector: the shared file copied in, plus the project's own."""
    rows: list[dict[str, Any]] = []
    for path in sorted(VECTORS_DIR.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append(json.loads(line))
    return rows


def syntax_vectors() -> list[dict[str, Any]]:
    return [v for v in load_vectors() if "input" in v]


def find_vectors() -> list[dict[str, Any]]:
    return [v for v in load_vectors() if "find_in" in v]


def read_output_csv(path: Path, *, raw: bool = False) -> list[dict[str, str]]:
    """A CSV the commands wrote, as rows: they keep the input's separator, so it is taken
    from the header line (the commonest of , ; tab |), read by Python's csv module.

    The output of ``resolve`` or ``enrich`` comes back as ``report --resolution`` reads it:
    only our columns, under their own names (``status``, not the ``doi_status`` they are
    given beside a column ``doi``); ``raw``: every column as written."""
    import csv

    from airflow_doi.files.names import find_added
    from airflow_doi.metadata.result import METADATA_COLUMNS
    from airflow_doi.resolver.result import COLUMNS

    csv.field_size_limit(2**31 - 1)
    with path.open(newline="", encoding="utf-8-sig") as handle:
        first = handle.readline()
        delimiter = max(",;\t|", key=first.count)
        handle.seek(0)
        if handle.read(1) != "\ufeff":
            handle.seek(0)
        rows = list(csv.DictReader(handle, delimiter=delimiter))
    names = output_header(path)
    for ours in (COLUMNS, METADATA_COLUMNS):
        found = None if raw else find_added(names, ours)
        if found is not None:
            return [{name: row[there] for name, there in found.items()} for row in rows]
    return rows


def output_header(path: Path) -> list[str]:
    """The header line of a CSV the commands wrote (see :func:`read_output_csv`)."""
    import csv

    with path.open(newline="", encoding="utf-8-sig") as handle:
        first = handle.readline()
    return next(csv.reader([first.rstrip("\r\n")], delimiter=max(",;\t|", key=first.count)))


def _reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    address = (parsed.hostname or "127.0.0.1", parsed.port or default_port)
    try:
        with socket.create_connection(address, 3):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """DSN of the real PostgreSQL server (``AIRFLOW_DOI_TEST_POSTGRES_DSN``)."""
    if not _reachable(POSTGRES_DSN, 5432):
        pytest.fail(f"PostgreSQL is not reachable at {POSTGRES_DSN}: run scripts/services.sh")
    return POSTGRES_DSN


@pytest.fixture()
def postgres_schema(postgres_dsn: str) -> Iterator[str]:
    """A fresh schema in the test database, dropped afterwards (parallel-safe)."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f'create schema "{schema}"')
    yield schema
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f'drop schema if exists "{schema}" cascade')


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of the real Redis server (``AIRFLOW_DOI_TEST_REDIS_URL``)."""
    if not _reachable(REDIS_URL, 6379):
        pytest.fail(f"Redis is not reachable at {REDIS_URL}: run scripts/services.sh")
    return REDIS_URL


@pytest.fixture()
def mariadb_database() -> Iterator[str]:
    """A database of its own on the real MariaDB server (its default, case-blind collation),
    dropped afterwards: the test never touches another."""
    import pymysql

    if not _reachable(MARIADB_DSN, 3306):
        pytest.fail(f"MariaDB is not reachable at {MARIADB_DSN}: run scripts/services.sh")
    url = urlparse(MARIADB_DSN)
    name = f"doi_test_{uuid.uuid4().hex[:10]}"
    admin = pymysql.connect(host=url.hostname, port=url.port or 3306, user=url.username,
                            password=url.password or "", autocommit=True)
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 "
                       "COLLATE utf8mb4_general_ci")
    try:
        yield name
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE `{name}`")
        admin.close()


def mariadb_connect(database: str | None = None, **options: Any) -> Any:
    """A PyMySQL connection to the real MariaDB server (``AIRFLOW_DOI_TEST_MARIADB_DSN``)."""
    import pymysql

    url = urlparse(MARIADB_DSN)
    return pymysql.connect(host=url.hostname, port=url.port or 3306, user=url.username,
                           password=url.password or "", database=database,
                           charset="utf8mb4", **options)


@pytest.fixture(scope="module", params=["native", "arrow"])
def vector_engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a module's tests on both vectorized engines: the native core, and the pure-Arrow
    fallback a machine without a C compiler gets (switched in this process and, through the
    environment, in the subprocesses the tests start)."""
    from airflow_doi import native as native_core
    from airflow_doi.native import arrow as native_arrow

    with pytest.MonkeyPatch.context() as patch:
        if request.param == "arrow":
            patch.setenv(native_arrow.DISABLE_ENV, "0")
            patch.setattr(native_arrow, "module", lambda: None)
            patch.setattr(native_core, "module", lambda: None)
        else:
            assert native_arrow.module() is not None, native_arrow.status()
        yield request.param


@pytest.fixture(scope="session", autouse=True)
def _session_user_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """No test writes into the real home: the user's cache directory (the answers
    ``resolve``, ``enrich`` and ``repair`` keep by default, and the DuckDB extension's build)
    is a folder of the run's (``XDG_CACHE_HOME``), set in this process's environment so the
    subprocesses the tests start inherit it; :func:`_user_cache` gives each test a folder of
    its own, whose ``duckdb`` is the run's (the extension built once a run, not once a test)."""
    folder = tmp_path_factory.mktemp("user-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(folder))
        patch.delenv("AIRFLOW_DOI_CACHE_DIR", raising=False)
        yield folder


@pytest.fixture(autouse=True)
def _user_cache(_session_user_cache: Path, tmp_path_factory: pytest.TempPathFactory,
                monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own user cache directory (``AIRFLOW_DOI_CACHE_DIR``, and
    ``XDG_CACHE_HOME`` beside it), outside its ``tmp_path``: a default cache one test filled is
    never read by another; the DuckDB extension's folder is the run's."""
    folder = tmp_path_factory.mktemp("xdg-cache")
    shared = _session_user_cache / "airflow-doi" / "duckdb"
    shared.mkdir(parents=True, exist_ok=True)
    (folder / "airflow-doi").mkdir()
    (folder / "airflow-doi" / "duckdb").symlink_to(shared, target_is_directory=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    monkeypatch.setenv("AIRFLOW_DOI_CACHE_DIR", str(folder / "airflow-doi"))
    return folder


#: The modules that take longest (seconds on one of two xdist workers, 2 cores), run first:
#: ``scripts/test.sh`` hands whole modules to workers in collection order (``--dist loadfile
#: --no-loadscope-reorder``), so the long ones start at once and the short ones fill in around
#: them; the workers then finish together. The rest keep their order, after these.
SLOWEST_FIRST = (
    "test_airflow_dag.py",  # 342
    "test_airflow_system.py",  # 201
    "test_extras.py",  # 88
    "test_airflow_celery.py",  # 87
    "test_sql_emulated.py",  # 60
    "test_airflow_claims.py",  # 59
    "test_dbt_integration.py",  # 54
    "test_readme_blocks.py",  # 54
    "test_sql_engines.py",  # 40
    "test_sql_spark.py",  # 38
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules of :data:`SLOWEST_FIRST` first, in that order; tests keep their order within
    a module (its fixtures' scopes depend on it)."""
    rank = {name: index for index, name in enumerate(SLOWEST_FIRST)}
    order = {id(item): index for index, item in enumerate(items)}
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), order[id(item)]))


_FIGURES = "AIRFLOW_DOI_SYSTEM_FIGURES"


def pytest_configure(config: pytest.Config) -> None:
    """Figures the Airflow tests measure (requests per key, seconds to fail on a dead proxy)
    go, as JSON lines, to ``$AIRFLOW_DOI_SYSTEM_FIGURES``; a run that names no file gets one,
    shared with its xdist workers, and :func:`pytest_terminal_summary` prints it."""
    if hasattr(config, "workerinput") or os.environ.get(_FIGURES):
        return
    import tempfile

    handle, path = tempfile.mkstemp(prefix="airflow-doi-figures-", suffix=".jsonl")
    os.close(handle)
    os.environ[_FIGURES] = path
    config.stash[_figures_key] = path


_figures_key = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    path = config.stash.get(_figures_key, None) or os.environ.get(_FIGURES)
    if not path or not os.path.exists(path):
        return
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if lines:
        terminalreporter.write_sep("-", "figures measured by the Airflow tests (#24)")
        for line in lines:
            terminalreporter.write_line(line)
    if config.stash.get(_figures_key, None):
        os.unlink(path)


def record_figure(figure: dict[str, Any]) -> None:
    """Append one measured figure to ``$AIRFLOW_DOI_SYSTEM_FIGURES`` (JSON lines), if set."""
    target = os.environ.get(_FIGURES)
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(figure) + "\n")
