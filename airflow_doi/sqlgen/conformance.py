"""What every engine must answer: the Python reference, row by row, for checking SQL output.

Used by the test suite (DuckDB, PostgreSQL, SQLite, Spark, dbt) and usable against a deployed
warehouse: run the five functions over :data:`EXTRA_CASES` and the conformance vectors, and
compare with :func:`expected`.
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Iterable
from typing import NamedTuple

from airflow_doi.presentation import DEFAULT_BASE_URL, encode_path
from airflow_doi.syntax import validate

__all__ = ["EXTRA_CASES", "INJECTION", "Answer", "expected", "mixtures", "vector_seed_csv"]

#: A DOI that carries SQL metacharacters: it must round-trip through every engine untouched.
INJECTION = "10.1000/x';DROP TABLE doi;--"

#: Cases beyond the shared vectors, aimed at the places SQL engines differ.
EXTRA_CASES: tuple[str, ...] = (
    INJECTION,
    "https://doi.org/10.1000/x'%3B--",
    "10.1000/ß",
    "10.1000/STRASSE",
    "10.1000/é",
    "10.1000/ﬁ",
    "10.1000/İstanbul",
    "10.1000/ı",
    "10.1000/ǆ",
    "urn:doi:10.123:a%2Fb",
    "urn:doi:10.123/a:b",
    "https://doi.org/urn:doi:10.123:x%2Fy?q#f",
    "https://doi.org/10.1/a?b#c",
    "https://doi.org/10.1/a#b?c",
    "https://doi.org/10.1/a+b%2B",
    "10.1/a+b",
    "doi:10.1/a%2Fb",
    "doi:info:doi/10.1/x",
    "urn:doi:doi:x",
    "info:doi/10.1%2Fx",
    "https://doi.org/10.1/%F0%9F%98%80",
    "https://doi.org/10.1/%ED%A0%80",
    "https://doi.org/10.1/%C0%AF",
    "https://doi.org/10.1/%e2%82%ac",
    "https://doi.org/10.1/%01",
    "https://doi.org/%310.1/x",
    "DOI:\u2003 10.1/é",
    "\u200b10.1/x\u3000",
    "https://doi.org/10.1/./../x",
    "10.1/x/./y/../z",
    "10.1/a\n",
    "10.1/a\u0085",
    "10.1/a\u2028b",
    "Https://Dx.Doi.Org/10.1/X",
    "dx.doi.org/10.1/X",
    "www.doi.org/10.1/x",
    "httpſ://doi.org/10.1/x",
    "10.1/" + "x" * 300,
    "10.01.2/x",
    "10.1./x",
    "10..1/x",
    # The literal "DOI:" and "urn:doi:" shortcuts and the reserved-suffix test (issue #32).
    "DOI:10.1000/abc",
    "DOI: 10.1000/abc",
    "DOI:  10.1000/abc",
    "DOI: 10.1000/a b",
    "DOI: 10.1000/é",
    "DOI: 10.1000/a%2Fb",
    "urn:doi:10.1000:abc",
    "urn:doi:10.1000:a:b/c",
    "urn:doi:10.1000.5:x",
    "urn:doi:10.:x",
    "urn:doi:10..5:x",
    "urn:doi:10.5.:x",
    "urn:doi:10.5:",
    "urn:doi:10.5::",
    "urn:doi:10.5a:x",
    "urn:doi:10.5:x y",
    "urn:doi:10.5:x?y",
    "urn:doi:10.5:x#y",
    "urn:doi:10.5:a%41",
    "urn:doi:10.5:é",
    "URN:DOI:10.5:x",
    "urn:doi:10.5:a/b",
    "10.1000///x",
    "10.1000//x",
    "10.1000/é/x",
    "10.1000/a/b",
    "10.1000/ab/c",
    "10.1000/a/",
    "https://doi.org/10.1/a/b",
    "urn:doi:10.1:a/b",
)


#: Pieces that engines treat differently; :func:`mixtures` strings them together at random.
PIECES: tuple[str, ...] = (
    "10.", "1000", ".", "/", "a", "A", "z", "%", "2F", "e2", "%C3", "%A9", "%c3%a9", "doi:",
    "DOI: ", "urn:doi:", "URN:DOI:", "https://doi.org/", "info:doi/", " ", "\t", "\u200b",
    "\ufeff", "?", "#", ":", "ß", "é", "\x85", "\u2028", "+", "'", "%00", "%25",
    "HTTP://DX.DOI.ORG/", "hdl.handle.net/", "http://hdl.handle.net/", "www.doi.org/", "..",
    "./", "%E2%80%A8", "\n", "\u3000", "1", "0", "%2e", "%31%30", "İ", "\U0001F600",
    "%F0%9F%98%80", "%ZZ", "doi.org/", "dx.doi.org/", "%3F", "%23", ";", "--",
)  # fmt: skip


def mixtures(count: int, seed: int = 7) -> list[str]:
    """``count`` distinct deterministic strings mixing :data:`PIECES`, half of them after a
    plausible ``10.<digits>/`` prefix: a cheap, reproducible differential test."""
    rng = random.Random(seed)
    values: set[str] = set()
    while len(values) < count:
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 7)))
        if rng.random() < 0.5:
            slash = "/" if rng.random() < 0.8 else ""
            text = f"10.{rng.randint(1, 99999)}{slash}{text}"
        values.add(text)
    return sorted(values)


class Answer(NamedTuple):
    doi: str | None
    key: str | None
    valid: bool
    reason: str | None
    url: str | None


def expected(value: str | None) -> Answer:
    """The five answers the SQL functions must give for ``value`` (``decode="auto"``)."""
    result = validate(value)
    url = None if result.doi is None else DEFAULT_BASE_URL + encode_path(result.doi)
    return Answer(result.doi, result.key, result.valid, result.reason, url)


def vector_seed_csv(inputs: Iterable[str | None]) -> str:
    """The dbt integration seed: inputs as UTF-8 hex (controls, padding and the empty string
    survive CSV that way) beside the expected answers."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "id",
            "input_hex",
            "input_is_null",
            "expected_doi",
            "expected_key",
            "expected_valid",
            "expected_reason",
            "expected_url",
        ]
    )
    for number, value in enumerate(inputs, start=1):
        answer = expected(value)
        writer.writerow(
            [
                number,
                "" if value is None else value.encode("utf-8").hex(),
                "true" if value is None else "false",
                answer.doi or "",
                answer.key or "",
                "true" if answer.valid else "false",
                answer.reason or "",
                answer.url or "",
            ]
        )
    return out.getvalue()
