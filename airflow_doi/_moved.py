"""Old import paths kept working after a move: each is a two-line module that warns on use.

``airflow_doi/native_core.py`` holds only ``from airflow_doi._moved import moved`` and
``__getattr__ = moved(__name__, "airflow_doi.native")``: ``from airflow_doi import native_core;
native_core.status()`` still works and says, once per name, where the name lives now. Nothing
is imported before a name is asked for, so an old path costs nothing and draws no import
arrow. Standard library only.
"""

from __future__ import annotations

import importlib
import runpy
import warnings
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = ["moved"]


def moved(old: str, new: str, names: Collection[str] | None = None, *,
          also: str | None = None, renamed: Mapping[str, str] | None = None
          ) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the old path ``old``: ``names`` (all when ``None``) are
    fetched from ``new`` (or, when ``new`` lacks one, from ``also``: a module split in two)
    with a :class:`DeprecationWarning`; ``renamed`` maps an old name to its new one. Run as a
    script (``python -m old``), the old module runs ``new`` as ``__main__``."""
    if old == "__main__":
        warnings.warn(f"run python -m {new}: the old module name is deprecated",
                      DeprecationWarning, stacklevel=2)
        runpy.run_module(new, run_name="__main__", alter_sys=True)

    def __getattr__(name: str) -> Any:
        if name.startswith("__") or (names is not None and name not in names):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        now = (renamed or {}).get(name, name)
        home = importlib.import_module(new)
        if also is not None and not hasattr(home, now):
            home = importlib.import_module(also)
        warnings.warn(f"{old}.{name} is deprecated: import {now} from {home.__name__}",
                      DeprecationWarning, stacklevel=2)
        return getattr(home, now)

    return __getattr__
