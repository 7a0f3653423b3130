"""How to install an extra, in words that work for this very install.

airflow-doi is on no package index yet: it is installed from a clone (``pip install
'./airflow-doi[resolve]'`` beside it, ``pip install -e '.[resolve]'`` inside it) or from a wheel
built from one (``pip wheel --no-deps -w dist .``, then ``pip install
'dist/airflow_doi-…whl[resolve]'``). pip records where it installed a distribution from
(PEP 610, ``direct_url.json``), so :func:`pip_install` names that clone or that wheel; when
it cannot tell, it says both ways, and the published name for an install from an index.
Every hint the package prints (a missing extra, a stale native core) comes from here.
Standard library only.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from urllib.parse import unquote, urlsplit

from airflow_doi._version import __version__

__all__ = ["DISTRIBUTION", "pip_install"]

#: The distribution's name (the one a package index will know it by).
DISTRIBUTION = "airflow-doi"


def _origin(path: list[str] | None = None) -> tuple[str, str] | None:
    """Where pip installed this distribution from: (``editable`` | ``directory`` | ``wheel``
    | ``vcs`` | ``index``, location), or None when that is not known: not installed (a source
    tree on ``sys.path``), a record that cannot be read, a clone or wheel no longer there.
    ``path``: where to look for the record (default ``sys.path``)."""
    # The first installed record that says where it came from; a source tree's own
    # egg-info (on sys.path when Python runs there) says nothing, nor does it come from pip.
    from importlib import metadata  # here: ~40 ms, and only a missing extra's message needs it

    text = None
    found = (metadata.distributions(name=DISTRIBUTION) if path is None
             else metadata.distributions(name=DISTRIBUTION, path=path))
    for distribution in found:
        text = distribution.read_text("direct_url.json")
        if text is not None:
            break
        if distribution.read_text("INSTALLER") is not None:
            return "index", DISTRIBUTION
    if text is None:
        return None
    try:
        record = json.loads(text)
        url = str(record["url"])
    except (ValueError, KeyError, TypeError):
        return None
    if "vcs_info" in record:
        vcs = record["vcs_info"]
        commit = vcs.get("commit_id") or vcs.get("requested_revision")
        return "vcs", f"{vcs.get('vcs', 'git')}+{url}" + (f"@{commit}" if commit else "")
    parts = urlsplit(url)
    if parts.scheme != "file":
        return None
    location = Path(unquote(parts.path))
    if not location.exists():  # the clone moved, or the wheel was deleted
        return None
    if "dir_info" in record:
        kind = "editable" if record["dir_info"].get("editable") else "directory"
        return kind, str(location)
    return "wheel", str(location)


def pip_install(extra: str | None = None, *, force: bool = False,
                path: list[str] | None = None) -> str:
    """The pip command that installs ``extra`` (None: the package again, ``force``: with
    ``--force-reinstall``) the way this install was made, e.g. ``pip install
    '/home/me/airflow-doi[resolve]'``; when that is not known, how to do it from a clone and
    from a built wheel. ``path``: where to look for the install's record (see
    :func:`_origin`)."""
    pip = "pip install --force-reinstall" if force else "pip install"
    wanted = f"[{extra}]" if extra else ""
    origin = _origin(path)
    if origin is not None:
        kind, where = origin
        if kind == "editable":
            return f"{pip} -e {shlex.quote(where + wanted)}"
        if kind in ("directory", "wheel"):
            return f"{pip} {shlex.quote(where + wanted)}"
        if kind == "vcs":
            return f"{pip} {shlex.quote(f'{DISTRIBUTION}{wanted} @ {where}')}"
        return (f"{pip} {shlex.quote(DISTRIBUTION + wanted)} (from a clone: {pip} -e "
                f"{shlex.quote('.' + wanted)} inside it)")
    return (f"{pip} -e {shlex.quote('.' + wanted)} inside your clone of airflow-doi (or "
            f"{pip} {shlex.quote('./airflow-doi' + wanted)} beside it), or from a wheel built "
            f"there with pip wheel --no-deps -w dist .: {pip} "
            f"{shlex.quote(f'dist/airflow_doi-{__version__}-…whl' + wanted)} with the file's "
            "full name")
