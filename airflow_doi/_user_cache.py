"""The user's cache directory: what airflow-doi keeps between runs and may always rebuild.

``$AIRFLOW_DOI_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/airflow-doi`` (the XDG Base
Directory specification: an absolute path, a relative one is ignored), else
``~/.cache/airflow-doi``. The commands that ask the proxy keep their answers in its
``answers`` folder by default (one file per proxy, the user's alone), and the DuckDB extension
is built in its ``duckdb`` folder.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["user_cache_dir"]


def user_cache_dir() -> Path:
    """``$AIRFLOW_DOI_CACHE_DIR``, else ``$XDG_CACHE_HOME/airflow-doi``, else
    ``~/.cache/airflow-doi`` (not created here).

    Raises ``RuntimeError`` when there is no home to find (no ``HOME``, no user entry)."""
    if chosen := os.environ.get("AIRFLOW_DOI_CACHE_DIR"):
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "airflow-doi"
