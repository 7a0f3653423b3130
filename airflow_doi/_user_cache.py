"""The user's cache directory: what airflow-doi keeps between runs and may always rebuild.

``$XDG_CACHE_HOME/airflow-doi`` (the XDG Base Directory specification: an absolute path, a
relative one is ignored), else ``~/.cache/airflow-doi``. The commands that ask the proxy keep
their answers there by default (one file per proxy), and the DuckDB extension is built there.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["user_cache_dir"]


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/airflow-doi``, else ``~/.cache/airflow-doi`` (not created here).

    Raises ``RuntimeError`` when there is no home to find (no ``HOME``, no user entry)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "airflow-doi"
