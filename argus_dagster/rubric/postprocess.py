"""Deterministic, input-gated post-processing applied to every rubric, generated or loaded (method §4).

Rules, keyed only on which conditions the input has:

* subject or source present: criteria of dimensions 5, 6, 8 and 10 (action, scene, event order,
  camera) become low importance;
* source present: preservation criteria (dimension 19, or an id that speaks of preserving,
  consistency or unchanged regions) are at most medium, with hard caps at most 4;
* subject and source both present: dimensions 18 and 21 are at least high with hard caps at most 2,
  and dimension 17 hard caps are at most 2.

Criteria are never deleted. Every change is returned as a log line.
"""

from __future__ import annotations

import re

from .schema import Criterion, Rubric

_RANK = {"low": 0, "medium": 1, "high": 2}
_PRESERVATION_ID = re.compile(r"preserv|consisten|unchanged", re.IGNORECASE)


def is_preservation(c: Criterion) -> bool:
    return c.dimension == 19 or bool(_PRESERVATION_ID.search(c.id))


def _cap_at_most(c: Criterion, limit: int, log: list[str], why: str) -> Criterion:
    current = c.hard_cap
    if c.type == "hard" and (current is None or current > limit):
        log.append(f"{c.id}: hard_cap {current} -> {limit} ({why})")
        return c.model_copy(update={"hard_cap": limit})
    if c.type == "soft" and current is not None and current > limit:
        log.append(f"{c.id}: hard_cap {current} -> {limit} ({why})")
        return c.model_copy(update={"hard_cap": limit})
    return c


def _importance(c: Criterion, *, at_most: str | None = None, at_least: str | None = None,
                log: list[str], why: str) -> Criterion:
    new = c.importance
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
        if (has_subject or has_source) and c.dimension in (5, 6, 8, 10):
            c = _importance(c, at_most="low", log=log, why="subject or source present")
        if has_source and is_preservation(c):
            c = _importance(c, at_most="medium", log=log, why="preservation criterion")
            c = _cap_at_most(c, 4, log, "preservation criterion")
        if has_subject and has_source:
            if c.dimension in (18, 21):
                c = _importance(c, at_least="high", log=log, why="subject and source present")
                c = _cap_at_most(c, 2, log, "subject and source present")
            if c.dimension == 17:
                c = _cap_at_most(c, 2, log, "subject and source present")
        out.append(c)
    return rubric.model_copy(update={"criteria": out}), log
