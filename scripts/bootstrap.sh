#!/usr/bin/env bash
# Create (or reuse) the project's virtualenv in .venv with every extra a contributor needs.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  echo "bootstrap: creating the virtualenv .venv ($("$PYTHON" --version 2>&1))"
  "$PYTHON" -m venv .venv
fi
extra=${1:-dev}
# Installs go through uv (from PyPI, into the venv that receives them): the same packages and
# versions as pip resolves, in ~40 s instead of ~150 s on a fresh 2-core machine. pip stays in
# every venv, and pip does the install when uv cannot (AIRFLOW_DOI_INSTALLER=pip forces it).
install() {  # install PYTHON ARGS...: pip's arguments, into PYTHON's environment
  local python=$1; shift
  if [[ ${AIRFLOW_DOI_INSTALLER:-uv} == uv ]] \
      && { "$python" -m uv --version >/dev/null 2>&1 \
           || "$python" -m pip install -q "uv>=0.9,<1" >/dev/null 2>&1; }; then
    if "$python" -m uv pip install --python "$python" --compile-bytecode -q "$@"; then
      return 0
    fi
    echo "bootstrap: uv could not install ($*): trying pip" >&2
  fi
  "$python" -m pip install -q "$@"
}
stamp=.venv/.airflow-doi-installed-$extra   # one per extra: demo installs [all], tests [dev]
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
  # The dev extra's MySQL provider builds mysqlclient: it needs MariaDB's client headers.
  if [[ $extra == dev ]] && ! command -v mariadb_config >/dev/null 2>&1 \
      && ! command -v mysql_config >/dev/null 2>&1; then
    echo "bootstrap: installing libmariadb-dev and pkg-config from Debian's packages"
    SUDO=""; if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libmariadb-dev pkg-config \
      >/dev/null
  fi
  echo "bootstrap: installing airflow-doi with the [$extra] extra into .venv: Airflow, dbt," \
    "DuckDB, pandas... and the native core compiled from airflow_doi/native (1 to 5 minutes" \
    "on a fresh machine; the installer prints nothing meanwhile)"
  install .venv/bin/python --upgrade pip
  install .venv/bin/python -e ".[$extra]"
  touch "$stamp" .venv/.airflow-doi-native-built
  echo "bootstrap: installed"
fi
# The editable install compiled the native core (setup.py) into airflow_doi/: rebuild it, and
# only it, when its sources changed since (the tests refuse a stale build).
native_stamp=.venv/.airflow-doi-native-built
if [[ ! -f $native_stamp || setup.py -nt $native_stamp \
      || -n $(find airflow_doi/native -type f -newer "$native_stamp" -print -quit) ]]; then
  echo "bootstrap: rebuilding the native core"
  .venv/bin/python -m pip install -q --no-deps -e .
  touch "$native_stamp"
fi
# The dbt package claims dbt-core 1.8+: the tests build its integration project with the
# oldest dbt too, in a venv of its own (dbt 1.8 and 1.11 cannot share one).
if [[ $extra == dev ]]; then
  oldest=.venv-dbt-oldest
  if [[ ! -f $oldest/.installed || scripts/bootstrap.sh -nt $oldest/.installed ]]; then
    echo "bootstrap: installing dbt-core 1.8 into $oldest (the dbt package's oldest dbt)"
    "$PYTHON" -m venv "$oldest"
    install "$oldest/bin/python" "dbt-core>=1.8,<1.9" "dbt-duckdb>=1.8,<1.9" "duckdb>=1.1,<2"
    touch "$oldest/.installed"
  fi
  # The connection type duckdb is the DuckDB provider's: a test checks that a duckdb
  # connection gets its hook when it is installed (kept apart: on PYTHONPATH in that test only).
  theirs=.venv-duckdb-provider
  if [[ ! -f $theirs/.installed || scripts/bootstrap.sh -nt $theirs/.installed ]]; then
    .venv/bin/python -m pip install -q --no-deps --upgrade --target "$theirs" \
      "airflow-provider-duckdb==0.2.0"
    touch "$theirs/.installed"
  fi
fi
