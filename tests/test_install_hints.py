"""Every install command we show works for a package that is on no index: from a clone or a
built wheel. A hint printed by the package names the clone or wheel this install came from
(pip's record, PEP 610); the docs never show the published name alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_doi._install import pip_install
from airflow_doi.cli import EXTRAS, missing_extra_message
from tests.conftest import ROOT

#: A form that installs from a clone or a wheel (a path, relative or absolute).
CLONE_FORMS = re.compile(r"\./airflow-doi\b|-e '?\.|\.whl|pip install (?:-e )?'/|pip wheel")
#: The published name, as pip would be given it.
PUBLISHED = re.compile(r"pip install (?:--[\w-]+ )*['\"]?airflow-doi\b")


def _texts() -> list[Path]:
    return [ROOT / "README.md", ROOT / "dbt_doi" / "README.md",
            *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "airflow_doi").rglob("*.py")),
            *sorted((ROOT / "examples").rglob("*.py")), *sorted((ROOT / "scripts").glob("*.sh"))]


def test_no_text_shows_the_published_name_without_a_clone_form() -> None:
    """A paragraph (docs) or statement (code) that shows ``pip install 'airflow-doi[...]'``
    must also say how to install from a clone or a wheel."""
    bare = []
    for path in _texts():
        for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
            if PUBLISHED.search(block) and not CLONE_FORMS.search(block):
                bare.append(f"{path.relative_to(ROOT)}: {PUBLISHED.search(block).group(0)}")
    assert bare == []


def _record(site: Path, direct_url: dict[str, object] | None, installer: bool = True) -> None:
    """A dist-info folder as pip leaves it in site-packages."""
    info = site / "airflow_doi-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: airflow-doi\nVersion: 0.1.0\n")
    if installer:
        (info / "INSTALLER").write_text("pip\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))


@pytest.mark.parametrize("kind", ["editable", "directory", "wheel", "index", "gone", "none"])
def test_the_hint_names_the_clone_or_wheel_the_install_came_from(tmp_path: Path,
                                                                 kind: str) -> None:
    clone = tmp_path / "my clone" / "airflow-doi"
    clone.mkdir(parents=True)
    wheel = tmp_path / "dist" / "airflow_doi-0.1.0-cp311-cp311-linux_x86_64.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK")
    site = tmp_path / "site"
    site.mkdir()
    if kind in ("editable", "directory"):
        _record(site, {"url": clone.as_uri(), "dir_info": {"editable": kind == "editable"}})
    elif kind == "wheel":
        _record(site, {"url": wheel.as_uri(), "archive_info": {}})
    elif kind == "index":
        _record(site, None)
    elif kind == "gone":
        _record(site, {"url": (tmp_path / "moved").as_uri(), "dir_info": {}})
    hint = pip_install("resolve", path=[str(site)])
    expected = {
        "editable": f"pip install -e '{clone}[resolve]'",
        "directory": f"pip install '{clone}[resolve]'",
        "wheel": f"pip install '{wheel}[resolve]'",
        "index": "pip install 'airflow-doi[resolve]' (from a clone: pip install -e "
                 "'.[resolve]' inside it)",
    }
    if kind in expected:
        assert hint == expected[kind]
    else:  # not known: both ways
        assert hint.startswith("pip install -e '.[resolve]' inside your clone of airflow-doi "
                               "(or pip install './airflow-doi[resolve]' beside it)"), hint
        assert "pip wheel --no-deps -w dist ." in hint and "…whl[resolve]'" in hint
    assert CLONE_FORMS.search(hint), hint


def test_this_install_gets_its_own_clone_named() -> None:
    """The suite runs on an editable install of this very tree (scripts/bootstrap.sh)."""
    for module, extra in EXTRAS.items():
        message = missing_extra_message(f"{module}.sub")
        if extra is None:
            assert message.endswith(f"reinstall with pip install --force-reinstall -e {ROOT}")
        else:
            assert message.endswith(f"[{extra}] extra ({module} is not installed): "
                                    f"pip install -e '{ROOT}[{extra}]'"), message


def test_a_missing_extra_from_python_names_the_command_for_this_install(tmp_path: Path) -> None:
    """``import airflow_doi.pandas`` without pandas, in a process of its own."""
    probe = "import sys; sys.modules['pandas'] = None; import airflow_doi.pandas"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, check=False)
    assert run.returncode == 1
    assert f"airflow_doi.pandas needs pandas: pip install -e '{ROOT}[pandas]'" in run.stderr
