"""find_dois: the shared vectors, the project's, and real reference strings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_doi import comparison_key, find_dois
from tests.conftest import find_vectors

REALWORLD = Path(__file__).parent / "data" / "realworld"


@pytest.mark.parametrize("vector", find_vectors(), ids=lambda v: repr(v["find_in"])[:60])
def test_find_vectors(vector: dict) -> None:
    assert find_dois(vector["find_in"]) == vector["found"]


def test_none_and_empty() -> None:
    assert find_dois(None) == []
    assert find_dois("") == []


def test_real_reference_strings() -> None:
    rows = [
        json.loads(line)
        for line in (REALWORLD / "reference_strings_sample.jsonl").read_text().splitlines()
    ]
    with_doi = [r for r in rows if r["doi"]]
    assert len(with_doi) >= 60
    for row in with_doi:
        keys = [comparison_key(d) for d in find_dois(row["text"])]
        assert comparison_key(row["doi"]) in keys, row["text"]
    assert all(find_dois(r["text"]) == [] for r in rows if not r["doi"])
