"""Verified repairs: which of :func:`airflow_doi.repair.suggest_repairs`'s candidates exist.

A damaged DOI is often still syntactically valid, and a plausible-looking repair may name a
DOI that does not exist, so a repair is only trusted once the proxy knows the result. The work
goes through :func:`airflow_doi.resolver.aresolve`, so it has the same rate limit, cache,
retry budget and breaker as any resolution, and each distinct key is asked once per run:

1. the value's own DOI, when it is valid: if it exists, the value is never "repaired";
2. the candidates, cheapest first, in rounds (the first candidate of every row, then the next
   three, then the rest), so a row whose first guess exists costs one request, not sixteen;
3. per row, the first candidate that exists wins (``doi_suggestion_verified`` true); when none
   does, the cheapest candidate is shown with ``false`` (or null when the proxy kept failing).

A shortDOI (``10/b6vnmd``) has no candidate a rule could make: the resolver expands it (the
DOI its record aliases) in the first round, and that DOI is the suggestion (rule
``short_doi``), verified when it exists. Offline there is nothing to suggest.

Candidates from rules that guess freely (``ocr_digit``) are only ever shown when they exist.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from airflow_doi.repair.rules import (
    MAX_CANDIDATES,
    REPAIR_COLUMNS,
    Repair,
    offered_offline,
    suggest_repairs,
)
from airflow_doi.resolver.batch import Progress, aresolve, blocking_twin
from airflow_doi.resolver.config import ResolverConfig
from airflow_doi.resolver.result import ResolutionResult, ResolverStats
from airflow_doi.syntax import ascii_upper, short_doi, validate
from airflow_doi.words import plural

__all__ = ["SHORT_DOI_RULE", "RepairResult", "RepairStats", "arepair", "repair",
           "repair_columns"]

#: Statuses meaning "this DOI exists" (a handle without a URL value still exists; Which RA?
#: names a registered DOI's agency).
EXISTS: Final[frozenset[str]] = frozenset({"resolved", "registered", "no_values"})
#: The rule named for the DOI a shortDOI aliases (the proxy's answer, not one of RULES).
SHORT_DOI_RULE: Final[str] = "short_doi"
#: Candidate rounds: [start, end) indexes into each row's ranked candidates.
ROUNDS: Final[tuple[tuple[int, int], ...]] = ((0, 1), (1, 4), (4, MAX_CANDIDATES))


@dataclass(frozen=True)
class RepairResult:
    """The outcome for one input value.

    ``suggestion``/``rule``/``verified`` are the three output columns. ``own_status`` is the
    resolver's status for the value's own DOI (``None`` when it was not asked: invalid, no
    candidates, or ``verify=False``); ``error`` says why a row could not be decided.
    """

    input: object
    suggestion: str | None = None
    rule: str | None = None
    verified: bool | None = None
    candidates: tuple[Repair, ...] = ()
    own_status: str | None = None
    error: str | None = None
    #: The shortDOI the value holds (``10/b6vnmd``), expanded through the proxy.
    short_doi: str | None = None

    def as_row(self) -> dict[str, object]:
        """The :data:`~airflow_doi.repair.REPAIR_COLUMNS` of this result."""
        return dict(zip(REPAIR_COLUMNS, (self.suggestion, self.rule, self.verified), strict=True))


@dataclass
class RepairStats:
    """Counters of one repair run; ``resolver`` sums the resolver's counters over all rounds."""

    rows: int = 0
    #: Rows with a candidate repair shown or held back: the sum of the four below, each a
    #: count of rows as the output shows them (a row whose only candidates guess freely and
    #: do not exist, or were not asked, shows nothing and is in none).
    with_candidates: int = 0
    #: Rows left alone: their own DOI exists.
    own_exists: int = 0
    #: Rows whose suggestion the proxy knows (``verified`` true), does not know (false), and
    #: rows with a suggestion unchecked or an own DOI the proxy could not check (empty).
    verified: int = 0
    not_verified: int = 0
    unchecked: int = 0
    resolver: ResolverStats = field(default_factory=ResolverStats)

    def summary(self) -> str:
        """The one-line summary the CLI prints at the end."""
        resolver = self.resolver
        return (
            f"{plural(self.rows, 'row')}, {self.with_candidates:,} with "
            f"candidate repairs: {self.verified:,} verified, {self.not_verified:,} not found, "
            f"{self.unchecked:,} unchecked, {self.own_exists:,} left alone (their own DOI "
            f"exists); {plural(resolver.requests, 'request')} in {resolver.elapsed:.1f}s, "
            f"{plural(resolver.retries, 'retry', 'retries')}, "
            f"{plural(resolver.cache_hits, 'cache hit')}"
            + (f", {plural(resolver.short_dois, 'shortDOI')} looked up"
               if resolver.short_dois else "")
        )


def repair_columns(results: Sequence[RepairResult]) -> dict[str, list[object]]:
    """The three output columns as lists, ready for ``pandas.DataFrame`` or ``pyarrow.table``."""
    return {
        "doi_suggestion": [r.suggestion for r in results],
        "doi_suggestion_rule": [r.rule for r in results],
        "doi_suggestion_verified": [r.verified for r in results],
    }


class _Plan:
    """The per-row state of one repair run; the caller feeds it resolver answers."""

    def __init__(self, values: Iterable[object], limit: int) -> None:
        self.values = list(values)
        self.candidates = [tuple(suggest_repairs(v, limit=limit)) for v in self.values]
        #: ``(doi, key)`` of each row's own DOI when it must be checked: valid, with candidates.
        self.own = [
            _own(value) if candidates else None
            for value, candidates in zip(self.values, self.candidates, strict=True)
        ]
        #: Answers by comparison key, shared by every row and round.
        self.answers: dict[str, ResolutionResult] = {}
        #: The shortDOI of each row without candidates that holds one, and the resolver's
        #: answer for each (by the shortDOI's key): the DOI it aliases, resolved.
        self.short = [
            None if candidates else short_doi(value)
            for value, candidates in zip(self.values, self.candidates, strict=True)
        ]
        self.short_answers: dict[str, ResolutionResult] = {}
        #: Why the rounds stopped before the last (the proxy gave up), if they did.
        self.stopped: str | None = None

    def own_to_check(self) -> list[str]:
        return _distinct(doi for doi, _ in filter(None, self.own))

    def shorts_to_check(self) -> list[str]:
        return _distinct(filter(None, self.short))

    def take(self, asked: Sequence[str], results: Iterable[ResolutionResult]) -> None:
        for value, result in zip(asked, results, strict=True):
            if result.key is not None:
                self.answers.setdefault(result.key, result)
            if short_doi(value) is not None:
                self.short_answers.setdefault(ascii_upper(value), result)

    def own_status(self, row: int) -> str | None:
        return None if self.own[row] is None else self.answers[self._own_key(row)].status

    def _own_key(self, row: int) -> str:
        own = self.own[row]
        assert own is not None
        return own[1]

    def open_rows(self) -> list[int]:
        """Rows still looking for an existing candidate."""
        rows = []
        for row, candidates in enumerate(self.candidates):
            if not candidates or self.own_status(row) in EXISTS or self.own_status(row) == "error":
                continue
            if any(self._status(c) in EXISTS for c in candidates):
                continue
            rows.append(row)
        return rows

    def round_to_check(self, start: int, end: int) -> list[str]:
        wanted = (
            candidate.doi
            for row in self.open_rows()
            for candidate in self.candidates[row][start:end]
        )
        return _distinct(d for d in wanted if ascii_upper(d) not in self.answers)

    def _status(self, candidate: Repair) -> str | None:
        answer = self.answers.get(ascii_upper(candidate.doi))
        return None if answer is None else answer.status

    def results(self, verify: bool, stats: RepairStats) -> list[RepairResult]:
        out = [self._decide(row, verify) for row in range(len(self.values))]
        stats.rows = len(out)
        stats.own_exists = sum(1 for r in out if r.own_status in EXISTS)
        stats.verified = sum(1 for r in out if r.verified is True)
        stats.not_verified = sum(1 for r in out if r.verified is False)
        stats.unchecked = sum(1 for r in out if _unchecked(r))
        stats.with_candidates = (stats.verified + stats.not_verified + stats.unchecked
                                 + stats.own_exists)
        return out

    def _decide(self, row: int, verify: bool) -> RepairResult:
        value, candidates = self.values[row], self.candidates[row]
        short = self.short[row]
        if short is not None:
            return self._expanded(value, short) if verify else RepairResult(value, short_doi=short)
        if not candidates:
            return RepairResult(value)
        shown = offered_offline(candidates)
        if not verify:
            return _suggest(value, candidates, shown, None)
        own = self.own_status(row)
        if own in EXISTS:
            return RepairResult(value, candidates=candidates, own_status=own)
        if own == "error":
            reason = self.answers[self._own_key(row)].error
            return RepairResult(
                value, candidates=candidates, own_status=own,
                error=f"could not check whether the value's own DOI exists: {reason}",
            )
        for candidate in candidates:
            if self._status(candidate) in EXISTS:
                return _suggest(value, candidates, candidate, True, own)
        if shown is None:
            return RepairResult(value, candidates=candidates, own_status=own)
        status = self._status(shown)
        if status == "not_found":
            return _suggest(value, candidates, shown, False, own)
        answer = self.answers.get(ascii_upper(shown.doi))
        problem = (answer.error if answer is not None
                   else f"not asked, the proxy having failed ({self.stopped})" if self.stopped
                   else "not checked")
        error = f"could not check {shown.doi}: {problem}"
        return _suggest(value, candidates, shown, None, own, error)


    def _expanded(self, value: object, short: str) -> RepairResult:
        """A shortDOI's row: the DOI it aliases, verified when that DOI exists."""
        answer = self.short_answers.get(ascii_upper(short))
        if answer is None:
            why = (f"not asked, the proxy having failed ({self.stopped})" if self.stopped
                   else "not checked")
            return RepairResult(value, short_doi=short,
                                error=f"could not expand the shortDOI {short}: {why}")
        if answer.doi is None:  # no such shortDOI, no alias in it, or the proxy failed
            return RepairResult(value, short_doi=short,
                                error=answer.error if answer.status == "error" else None)
        repair = Repair(answer.doi, (SHORT_DOI_RULE,), 0.0)
        verified = (True if answer.status in EXISTS
                    else False if answer.status == "not_found" else None)
        error = None if verified is not None else f"could not check {answer.doi}: {answer.error}"
        return RepairResult(value, answer.doi, SHORT_DOI_RULE, verified, (repair,),
                            error=error, short_doi=short)


def _unchecked(result: RepairResult) -> bool:
    """A row with a suggestion the proxy did not check (``--no-verify``, or it failed), or
    whose own DOI it could not check; a row whose only candidates guess freely and were not
    found (or not asked) shows nothing, and is not counted."""
    if result.verified is not None or result.own_status in EXISTS:
        return False
    return result.suggestion is not None or bool(result.candidates and result.error)


def _suggest(
    value: object,
    candidates: tuple[Repair, ...],
    chosen: Repair | None,
    verified: bool | None,
    own_status: str | None = None,
    error: str | None = None,
) -> RepairResult:
    if chosen is None:
        return RepairResult(value, candidates=candidates, own_status=own_status, error=error)
    return RepairResult(
        value, chosen.doi, chosen.rule, verified, candidates, own_status, error
    )


def _own(value: object) -> tuple[str, str] | None:
    check = validate(value)  # never raises: a number or a list is judged as its text
    if not check.valid or check.doi is None or check.key is None:
        return None
    return check.doi, check.key


def _distinct(dois: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    for doi in dois:
        seen.setdefault(ascii_upper(doi), doi)
    return list(seen.values())


def _add(total: ResolverStats, part: ResolverStats) -> None:
    for name in ("rows", "keys", "cache_hits", "requests", "retries", "throttled", "breaker_opens",
                 "short_dois", "short_doi_requests"):
        setattr(total, name, getattr(total, name) + getattr(part, name))
    total.elapsed += part.elapsed
    total.gave_up = total.gave_up or part.gave_up
    total.never_answered = total.never_answered or part.never_answered
    total.answered = total.answered or part.answered
    for status, count in part.by_status.items():
        total.by_status[status] = total.by_status.get(status, 0) + count


async def arepair(
    values: Iterable[object],
    *,
    verify: bool = True,
    limit: int = MAX_CANDIDATES,
    config: ResolverConfig | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    stats: RepairStats | None = None,
    **overrides: Any,
) -> list[RepairResult]:
    """Suggest a repair for each value and, with ``verify``, keep the first that exists.

    One :class:`RepairResult` per value, in order. ``config``/``cache``/``progress``/
    ``overrides`` are :func:`airflow_doi.resolver.aresolve`'s; with ``verify=False`` nothing
    is sent and each row shows its cheapest candidate with ``verified`` null.
    """
    plan = _Plan(values, limit)
    stats = stats if stats is not None else RepairStats()
    if verify:
        for todo in _rounds(plan):
            part = ResolverStats(answered=stats.resolver.answered)
            plan.take(todo, await aresolve(
                todo, config=config, cache=cache, progress=progress, stats=part, **overrides))
            _add(stats.resolver, part)
            if part.gave_up is not None:
                # The proxy is down (or was never there): a next round would only wait for
                # its own breaker to give up again. The rows not decided stay unchecked.
                plan.stopped = part.gave_up
                break
    return plan.results(verify, stats)


repair = blocking_twin(arepair)


def _rounds(plan: _Plan) -> Iterable[list[str]]:
    """The DOIs to ask about, round by round; each list is computed after the last answers."""
    own = plan.own_to_check() + plan.shorts_to_check()  # a shortDOI is expanded with them
    if own:
        yield own
    for start, end in ROUNDS:
        todo = plan.round_to_check(start, end)
        if todo:
            yield todo
