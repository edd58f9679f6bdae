"""Deterministic, input-gated post-processing applied to every rubric, generated or loaded (method §4).

Keyed only on which conditions the input has; criteria are never deleted, only importance and caps
change, and every change is returned as a log line:

1. subject image or source video present: criteria of dimensions 5, 6, 8 and 10 (action, scene, event
   order, camera) that are not low become low;
2. subject image *and* source video present (TSV2V; plain TV2V gets rule 1 alone), per criterion the
   first branch that matches:
   a. dimension 18 or 21: importance at least high; a hard cap above 2 becomes 2;
   b. dimension 17: a hard cap above 2 becomes 2 (checked before the id keywords, so a dimension-17
      "identity_consistency" is an identity criterion, not a preservation one);
   c. a preservation criterion (dimension 19, or an id with one of :data:`PRESERVATION_KEYWORDS`):
      importance at most medium; a hard cap above 4 becomes 4.

Caps change only on hard criteria that have one: a hard criterion without a cap never caps, and soft
criteria's caps are left as they are.
"""

from __future__ import annotations

import re

from argus_dagster.method.rubric.schema import Criterion, Rubric

_RANK = {"low": 0, "medium": 1, "high": 2}
PRESERVATION_KEYWORDS = ("preserv", "consisten", "unchanged", "background_preserved", "scene_preserved",
                         "structure_motion", "motion_preserved", "temporal_consistency")
_PRESERVATION_ID = re.compile("|".join(PRESERVATION_KEYWORDS), re.IGNORECASE)
GENERIC_DIMENSIONS = (5, 6, 8, 10)


def is_preservation(c: Criterion) -> bool:
    """Dimension 19, or an id that speaks of preservation (method §4's keyword list)."""
    return c.dimension == 19 or bool(_PRESERVATION_ID.search(c.id))


def _cap_at_most(c: Criterion, limit: int, log: list[str], why: str) -> Criterion:
    if c.type == "hard" and c.hard_cap is not None and c.hard_cap > limit:
        log.append(f"{c.id}: hard_cap {c.hard_cap} -> {limit} ({why})")
        return c.model_copy(update={"hard_cap": limit})
    return c


def _importance(c: Criterion, *, at_most: str | None = None, at_least: str | None = None,
                log: list[str], why: str) -> Criterion:
    new: str = c.importance
    if at_most is not None and _RANK[new] > _RANK[at_most]:
        new = at_most
    if at_least is not None and _RANK[new] < _RANK[at_least]:
        new = at_least
    if new != c.importance:
        log.append(f"{c.id}: importance {c.importance} -> {new} ({why})")
        return c.model_copy(update={"importance": new})
    return c


def postprocess(rubric: Rubric, *, has_subject: bool, has_source: bool) -> tuple[Rubric, list[str]]:
    """Apply the §4 rules; returns the new rubric and the list of changes made."""
    log: list[str] = []
    out: list[Criterion] = []
    for c in rubric.criteria:
        if (has_subject or has_source) and c.dimension in GENERIC_DIMENSIONS:
            c = _importance(c, at_most="low", log=log, why="rule 1: subject or source present")
        if has_subject and has_source:
            if c.dimension in (18, 21):
                c = _importance(c, at_least="high", log=log, why="rule 2a: edit or inserted subject")
                c = _cap_at_most(c, 2, log, "rule 2a: edit or inserted subject")
            elif c.dimension == 17:
                c = _cap_at_most(c, 2, log, "rule 2b: subject identity")
            elif is_preservation(c):
                c = _importance(c, at_most="medium", log=log, why="rule 2c: preservation criterion")
                c = _cap_at_most(c, 4, log, "rule 2c: preservation criterion")
        out.append(c)
    return rubric.model_copy(update={"criteria": out}), log
