#!/usr/bin/env bash
# The whole test suite, from a fresh machine: virtualenv, services, lint, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh dev
. scripts/services.sh  # sourced: it may name the tests' MariaDB login (AIRFLOW_DOI_TEST_MARIADB_DSN)
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff check"; ruff check .
echo "== mypy"; mypy airflow_doi
# One test module per xdist worker at a time (--dist loadfile): a module's fixtures (an Airflow
# deployment, a migrated AIRFLOW_HOME, the extras' venvs) are built once, not once per worker.
# (--dist loadgroup would group by xdist_group markers, but pytest 9.2 and pytest-xdist 3.8
# lose the group suffix of node ids: tests spread one by one, each worker built every fixture.)
# Modules go out in collection order, the slowest first (tests/conftest.py: SLOWEST_FIRST).
# Three workers on two cores: a fifth of the suite waits (on Airflow's scheduler, simulated
# latency, subprocesses), and a third worker fills it (2 workers: 868 s, 3: 702 s, measured).
echo "== pytest"; pytest -n "${PYTEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder "$@"
