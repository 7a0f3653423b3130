#!/usr/bin/env bash
# Create (or reuse) the project's virtualenv in .venv with every extra a contributor needs.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
extra=${1:-dev}
stamp=.venv/.airflow-doi-installed-$extra   # one per extra: demo installs [all], tests [dev]
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[$extra]"
  touch "$stamp"
fi
