"""Valid but likely damaged: the valid DOIs of a whole column that a repair rule would change.

``10.1000/182 (retracted)``, ``10.1038/nature12373Accessed 2019`` and ``10.1371/journal.
pone.0123456`` are valid per Z39.84 (a suffix may hold any legal character, spaces included),
so ``normalize`` passes them and the report counts each as one more distinct DOI. They are
far more often a DOI with text glued on. :class:`LikelyDamaged` counts them over a column,
batch by batch, with examples, so that ``normalize``'s notes and the report can point at
``airflow-doi repair`` (which asks the proxy whether the DOI or its repair exists).

Cheapest first, so that ``normalize`` keeps its speed on a million rows: one RE2 pass over the
column with :data:`DAMAGE_HINT` (every rule's :attr:`~airflow_doi.repair.rules.Rule.hint` at
once; most DOIs match none); then, for each distinct valid DOI it picks, in Python, only the
rules whose own hint the DOI matches (:func:`~airflow_doi.repair.rules.damage_by`). The repair
each example shown gets is ``repair``'s own (:func:`~airflow_doi.repair.rules.offline_repair`:
its search, a few examples at a time), so that ``normalize``, the report and ``repair`` name
one rule and one DOI for a cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from airflow_doi.native.arrow import map_slices
from airflow_doi.repair.rules import (
    HINTS,
    OFFERED_ON_VALID,
    Repair,
    damage_by,
    offline_repair,
)

__all__ = ["DAMAGE_HINT", "EXAMPLES", "LikelyDamaged"]

#: One RE2 pattern that matches every valid DOI a rule offered without the proxy may change.
DAMAGE_HINT: Final[str] = "|".join(f"(?:{rule.hint})" for rule in OFFERED_ON_VALID)
#: Examples kept (the DOIs with the most rows); distinct damaged DOIs counted by name at most.
EXAMPLES: Final[int] = 5
_KEPT: Final[int] = 1000


@dataclass
class LikelyDamaged:
    """Valid DOIs a repair rule would change, over the batches given to :meth:`add`."""

    #: Rows holding such a DOI.
    rows: int = 0
    #: DOI -> (the step of a rule that showed it damaged, rows), for the first distinct DOIs
    #: met (bounded); :meth:`examples` names the repair offered for each.
    found: dict[str, tuple[Repair, int]] = field(default_factory=dict)

    def add(self, doi: Any, valid: Any) -> None:
        """Count the rows of one batch: ``doi`` the normalized DOIs, ``valid`` the verdicts
        (Arrow arrays of one length; null or false rows are not looked at).

        Four Arrow calls a batch, whatever its size: each call lets go of the GIL, and the
        command's reading and writing threads may keep it a while before it comes back.
        """
        hinted = pa.chunked_array(map_slices(
            lambda chunk: pc.match_substring_regex(chunk, DAMAGE_HINT), _chunks(doi)),
            pa.bool_())
        picked = pc.filter(doi, pc.and_(valid, hinted))
        if not len(picked):
            return
        counted = pc.value_counts(picked).to_pylist()
        for item in counted:
            text, rows = item["values"], int(item["counts"])
            repair = damage_by(text, (rule for rule in OFFERED_ON_VALID
                                      if HINTS[rule.name].search(text) is not None))
            if repair is None:
                continue
            self.rows += rows
            if text in self.found or len(self.found) < _KEPT:
                kept = self.found.get(text, (repair, 0))
                self.found[text] = (repair, kept[1] + rows)

    def examples(self, limit: int = EXAMPLES) -> list[tuple[str, Repair, int]]:
        """``(doi, repair, rows)``, the most rows first, then by DOI; ``repair`` is the one
        ``airflow-doi repair --no-verify`` offers for the DOI."""
        ranked = sorted(self.found.items(), key=lambda item: (-item[1][1], item[0]))
        return [(doi, offline_repair(doi, step), rows) for doi, (step, rows) in ranked[:limit]]


def _chunks(values: Any) -> list[Any]:
    return list(values.chunks) if isinstance(values, pa.ChunkedArray) else [values]
