#!/usr/bin/env bash
# The project's main job on a fresh machine: normalize the sample catalogue into out/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh all
.venv/bin/airflow-doi demo "$@"
