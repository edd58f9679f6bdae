"""Aggregation of criterion scores into a video's final score (method §8).

``base = sum(w * s) / sum(w)`` over scored criteria, w = 3 / 2 / 1 for high / medium / low.
A hard criterion fires when ``s < fail_threshold``; ``cap`` is the smallest hard cap among fired
criteria (10 if none); ``final = (1 - alpha) * base + alpha * min(base, cap)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from argus_dagster.method.rubric.schema import IMPORTANCE_WEIGHT

DEFAULT_ALPHA = 0.5


@dataclass(frozen=True)
class ScoredCriterion:
    criterion_id: str
    importance: str
    type: str
    score: float | None
    hard_cap: int | None = None
    fail_threshold: float = 5.0


@dataclass(frozen=True)
class Aggregate:
    base_score: float | None
    final_score: float | None
    cap: float
    cap_alpha: float
    caps_fired: list[str] = field(default_factory=list)
    n_scored: int = 0
    n_criteria: int = 0


def aggregate(criteria: list[ScoredCriterion], alpha: float = DEFAULT_ALPHA) -> Aggregate:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"cap alpha must lie in [0, 1], got {alpha}")
    scored = [c for c in criteria if c.score is not None]
    if not scored:
        return Aggregate(None, None, 10.0, alpha, [], 0, len(criteria))
    scores = [c.score for c in scored if c.score is not None]  # the same criteria, their scores narrowed to float
    weights = [IMPORTANCE_WEIGHT[c.importance] for c in scored]
    base = sum(w * s for w, s in zip(weights, scores)) / sum(weights)
    fired = [c for c, s in zip(scored, scores) if c.type == "hard" and s < c.fail_threshold]
    caps = [c.hard_cap for c in fired if c.hard_cap is not None]
    cap = float(min(caps)) if caps else 10.0
    final = (1.0 - alpha) * base + alpha * min(base, cap)
    return Aggregate(
        base_score=base,
        final_score=final,
        cap=cap,
        cap_alpha=alpha,
        caps_fired=[c.criterion_id for c in fired if c.hard_cap is not None],
        n_scored=len(scored),
        n_criteria=len(criteria),
    )
