"""What a deployment tunes in the example DAGs (examples/dags/), from environment variables.

Set them where the scheduler, dag-processor and workers run; each has the default a
production deployment would pick:

* ``AIRFLOW_DOI_EXAMPLE_RETRIES`` (3): tries after the first when a task fails (the DOI
  proxy down, a database restarting);
* ``AIRFLOW_DOI_EXAMPLE_RETRY_DELAY`` (120 seconds): the wait before the first retry,
  doubled each time up to 30 minutes (2, 4, 8 minutes with the defaults);
* ``AIRFLOW_DOI_EXAMPLE_POOL`` (``default_pool``): the Airflow pool of every task. On a
  DuckDB file (one writer at a time) create a one-slot pool and name it here:
  ``airflow pools set doi_duckdb 1 "one writer per DuckDB file"``;
* ``AIRFLOW_DOI_EXAMPLE_PARALLELISM`` (4): mapped resolve tasks of one run at once
  (``doi_resolve_mapped``: ``max_active_tis_per_dagrun``; runs side by side each have as
  many); they share the proxy connection's rate only through its ``redis_url``, so without
  it each runs at the connection's ``rate``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

__all__ = ["DEFAULT_ARGS", "PARALLELISM", "POOL", "RETRIES", "RETRY_DELAY"]


def _number(name: str, default: float, *, whole: bool) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = -1
    if value < 0:
        kind = "a whole number" if whole else "a number of seconds"
        raise ValueError(f"{name} must be {kind} (0 or more), not {raw!r}")
    return value


RETRIES = int(_number("AIRFLOW_DOI_EXAMPLE_RETRIES", 3, whole=True))
RETRY_DELAY = timedelta(seconds=_number("AIRFLOW_DOI_EXAMPLE_RETRY_DELAY", 120, whole=False))
POOL = os.environ.get("AIRFLOW_DOI_EXAMPLE_POOL", "").strip() or "default_pool"
PARALLELISM = max(1, int(_number("AIRFLOW_DOI_EXAMPLE_PARALLELISM", 4, whole=True)))

#: Every task: retried ``RETRIES`` times, ``RETRY_DELAY`` then doubling up to 30 minutes,
#: in ``POOL``. Refusals a retry cannot fix (a table that holds rows) fail at once anyway.
DEFAULT_ARGS: dict[str, Any] = {
    "retries": RETRIES,
    "retry_delay": RETRY_DELAY,
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=30),
    "pool": POOL,
}
