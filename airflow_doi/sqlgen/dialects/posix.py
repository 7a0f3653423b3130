"""Helpers for engines whose regular expressions are POSIX-style (Snowflake): no ``(?:...)``
groups and no inline flags, so groups are renumbered and ``(?s)`` becomes a parameter."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_doi.sqlgen.dialects.base import scan_regex


@dataclass(frozen=True)
class PosixPattern:
    pattern: str
    #: Group number, in the rewritten pattern, of the canonical pattern's group 1.
    first_group: int
    dotall: bool


def to_posix(pattern: str) -> PosixPattern:
    dotall = pattern.startswith("(?s)")
    if dotall:
        pattern = pattern[4:]
    opens = [i for i, char, in_class in scan_regex(pattern) if char == "(" and not in_class]
    non_capturing = {i for i in opens if pattern.startswith("(?:", i)}
    first_capturing = next((i for i in opens if i not in non_capturing), None)
    first_group = 1 + sum(1 for i in non_capturing if first_capturing and i < first_capturing)
    out, skip = [], 0
    for i, char in enumerate(pattern):
        if skip:
            skip -= 1
            continue
        if i in non_capturing:
            out.append("(")
            skip = 2
            continue
        out.append(char)
    return PosixPattern("".join(out), first_group, dotall)
