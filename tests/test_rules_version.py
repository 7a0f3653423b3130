"""``syntax.RULES_VERSION`` names the answers of the rules: when an answer changes, it must too.

The fingerprints the normalize operator stores name the version; a table normalized under
other rules is rewritten only if the version differs. So the answers (DOI, key, valid flag,
reason, for each ``decode``) of a fixed corpus are pinned here with the version they belong to:
a change of the rules that changes one of them fails this test until the version is changed
and the new digest recorded beside it.
"""

from __future__ import annotations

import hashlib
import json

from airflow_doi.sqlgen.conformance import EXTRA_CASES, mixtures
from airflow_doi.syntax import RULES_VERSION, validate
from tests.conftest import syntax_vectors

#: RULES_VERSION -> the digest of the corpus' answers under it.
PINNED = {
    "1": "e5b49bc8cd03478a67671e5f04a202be748ea5bfa5d2a173b17c5b0d8024fc9e",
    # 2: the reason short_doi (10/abc1 was bad_directory).
    "2": "fd47f76a14544aaf1e6d68ee8d7bb2b9dbda3991abee250c3679d9b53cdb1d97",
}


#: The extra cases the digests were recorded over: a digest pins answers to a fixed corpus, so
#: cases added later (they prove the engines, not the version) stay out of it.
_PINNED_EXTRA_CASES = EXTRA_CASES[: EXTRA_CASES.index("10..1/x") + 1]


def _corpus() -> list[str | None]:
    inputs = [v["input"] for v in syntax_vectors() if isinstance(v.get("input"), str)]
    return [None, *dict.fromkeys([*inputs, *_PINNED_EXTRA_CASES, *mixtures(3000, seed=32)])]


def answers_digest() -> str:
    digest = hashlib.sha256()
    for value in _corpus():
        for decode in ("auto", "always", "never"):
            answer = validate(value, decode=decode)
            line = [value, decode, answer.doi, answer.key, answer.valid, answer.reason]
            digest.update(json.dumps(line, ensure_ascii=True).encode() + b"\n")
    return digest.hexdigest()


def test_the_rules_version_names_the_rules_answers() -> None:
    digest = answers_digest()
    assert RULES_VERSION in PINNED, (
        f"RULES_VERSION {RULES_VERSION!r} has no digest here: add {RULES_VERSION!r}: "
        f"{digest!r} to PINNED")
    assert PINNED[RULES_VERSION] == digest, (
        "the rules give other answers than those RULES_VERSION "
        f"{RULES_VERSION!r} stands for: change RULES_VERSION in airflow_doi/syntax.py (tables "
        f"normalized under the old rules are then rewritten) and record {digest!r} for it")
