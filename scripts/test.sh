#!/usr/bin/env bash
# The whole test suite, from a fresh machine: virtualenv, services, lint, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh dev
. scripts/services.sh  # sourced: it may name the tests' MariaDB login (AIRFLOW_DOI_TEST_MARIADB_DSN)
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff check"; ruff check .
echo "== mypy"; mypy airflow_doi
echo "== pytest"; pytest -n "${PYTEST_WORKERS:-2}" --dist loadgroup "$@"
