"""FIRM-Video's formulas (seed Appendix 1): IF weights and score, WC clean ratios and score, the 1-5
ratings, and one video's IF and WC results scored from its verdicts (the rationale written after the
score is fixed, :mod:`~argus_dagster.protocols.firm.rationales`).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from argus_dagster.protocols.firm.rationales import if_rationale, wc_rationale
from argus_dagster.protocols.firm.types import IF, WC, Checklist, ChecklistError, DimensionResult, Verdict, checked_importance

IF_THRESHOLDS = (0.35, 0.70, 0.85, 1.00)
WC_THRESHOLDS = (0.20, 0.58, 0.78, 0.89)
ALPHA = {1: 1.0, 2: 1.5, 3: 2.5, 4: 3.5, 5: 5.0}


def rating(score: float, thresholds: Sequence[float]) -> int:
    """The 1-5 rating of a score in [0, 1]: 1 plus the number of thresholds it reaches (Appendix 1.3)."""
    if not isinstance(score, (int, float)) or score != score or not 0.0 <= score <= 1.0:
        raise ChecklistError(f"score {score!r} is not in [0, 1]")
    return 1 + sum(1 for t in thresholds if score >= t)


def if_rating(score: float) -> int:
    return rating(score, IF_THRESHOLDS)


def wc_rating(score: float) -> int:
    return rating(score, WC_THRESHOLDS)


def if_weights(importances: Sequence[int]) -> list[float]:
    """``w_i = m_i / Σ m`` (Eq. 1.1)."""
    ms = [checked_importance(m, f"requirement {i + 1}") for i, m in enumerate(importances)]
    if not ms:
        raise ChecklistError("an IF checklist needs at least one requirement")
    total = sum(ms)
    return [m / total for m in ms]


def serialized_weights(importances: Sequence[int]) -> list[float]:
    """The weights as the seed serializes them: two decimals, a positive weight rounded to 0 becomes
    0.01, and the residual goes to the largest weight so that they sum to 1 (Appendix 1.1). Not what
    the score is computed from: the module docstring says why."""
    exact = if_weights(importances)
    w = [max(round(x, 2), 0.01) for x in exact]
    big = max(range(len(w)), key=lambda i: exact[i])
    w[big] = round(w[big] + 1.0 - sum(w), 2)
    return w


def if_score_from_weights(weights: Sequence[float], satisfied: Sequence[bool]) -> float:
    """``s_IF = Σ w_i z_i`` rounded to 4 places (Eq. 1.2), from the weights as given. The score is
    computed only here, from the weights ``firm_checklists`` stores, so the stored rows recompute it to
    the last bit (``math.fsum`` makes the sum independent of the order)."""
    if len(weights) != len(satisfied):
        raise ChecklistError(f"{len(weights)} requirements but {len(satisfied)} verdicts")
    if not weights:
        raise ChecklistError("an IF checklist needs at least one requirement")
    bad = [w for w in weights if not isinstance(w, (int, float)) or w != w or w <= 0]
    if bad or abs(math.fsum(weights) - 1.0) > 1e-9:
        raise ChecklistError(f"IF weights {list(weights)} must be positive and sum to 1 (fix: store m_i / Σ m)")
    return round(math.fsum(w for w, z in zip(weights, satisfied) if z), 4)


def if_score(importances: Sequence[int], satisfied: Sequence[bool]) -> float:
    """``s_IF`` from importances: :func:`if_score_from_weights` of ``w_i = m_i / Σ m``."""
    if len(importances) != len(satisfied):
        raise ChecklistError(f"{len(importances)} requirements but {len(satisfied)} verdicts")
    return if_score_from_weights(if_weights(importances), satisfied)


def clean_ratio(violations: Sequence[bool]) -> float:
    """``c_t = 1 − Σ b_j / |Q_t|`` (Eq. 1.3)."""
    if not violations:
        raise ChecklistError("a WC target needs at least one question")
    return 1.0 - sum(1 for b in violations if b) / len(violations)


def wc_score(targets: Iterable[tuple[int, Sequence[bool]]]) -> float:
    """``s_WC = Σ α(m_t) c_t / Σ α(m_t)`` rounded to 4 places (Eqs. 1.4, 1.5); ``targets`` are
    ``(importance, violations per question)``."""
    num = den = 0.0
    for i, (m, violations) in enumerate(targets):
        a = ALPHA[checked_importance(m, f"target {i + 1}")]
        num += a * clean_ratio(violations)
        den += a
    if den == 0.0:
        raise ChecklistError("a WC checklist needs at least one target")
    return round(num / den, 4)


def score_if(checklist: Checklist, verdicts: Sequence[Verdict]) -> DimensionResult:
    """IF score, rating and rationale from verdicts. An unverifiable requirement counts as not met and
    keeps its weight: the seed's conservative reading (§3.2, Appendix 1.1: "requirements that cannot be
    verified from the video are treated as unsatisfied"), so a video never gains from what cannot be
    seen. ``detail["n_unverifiable"]`` counts them."""
    by_id = {v.item_id: v for v in verdicts}
    missing = [i.id for i in checklist.items if i.id not in by_id]
    if missing:
        raise ChecklistError(f"IF verdicts: no verdict for {', '.join(missing)} (fix: verify every item)")
    ordered = [by_id[i.id] for i in checklist.items]
    z = [v.yes and v.verifiable for v in ordered]
    s = if_score([i.importance for i in checklist.items], z)
    r = if_rating(s)
    res = DimensionResult(IF, s, r, "", "", list(ordered), checklist.content_hash,
                          {"n_unverifiable": sum(1 for v in ordered if not v.verifiable)})
    res.rationale = if_rationale(checklist, ordered, s, r)
    return res


def score_wc(checklist: Checklist, verdicts: Sequence[Verdict], grounding: dict | None = None) -> DimensionResult:
    """WC score, rating and rationale from the verified decisions only (the seed's "aggregate only
    verified decisions"): an unverifiable answer is neither a violation nor clean, so it leaves its
    question out of its target's clean ratio; a target with no verified question leaves the weighted
    sum; a video with no verified question at all is unscored with the reason. Counting an
    unverifiable answer as clean would raise WC for what the verifier could not see."""
    by_id = {v.item_id: v for v in verdicts}
    missing = [i.id for i in checklist.items if i.id not in by_id]
    if missing:
        raise ChecklistError(f"WC verdicts: no verdict for {', '.join(missing)} (fix: verify every item)")
    per_target: dict[str, tuple[int, list[bool]]] = {}
    for i in checklist.items:
        per_target.setdefault(i.target, (i.importance, []))
        v = by_id[i.id]
        if v.verifiable:
            per_target[i.target][1].append(v.yes)
    ordered = [by_id[i.id] for i in checklist.items]
    n_unverifiable = sum(1 for v in ordered if not v.verifiable)
    verified = {t: mb for t, mb in per_target.items() if mb[1]}
    detail = {"scene_summary": (grounding or {}).get("scene_summary", ""), "n_unverifiable": n_unverifiable,
              "targets_unverified": [t for t in per_target if t not in verified]}
    if not verified:
        return DimensionResult(WC, None, None, "", f"WC: none of the {len(ordered)} answers is verified (all "
                               "unverifiable): no decision to aggregate", ordered, checklist.content_hash, detail)
    s = wc_score(verified.values())
    r = wc_rating(s)
    detail["clean_ratio"] = {t: round(clean_ratio(b), 4) for t, (_, b) in verified.items()}
    res = DimensionResult(WC, s, r, "", "", ordered, checklist.content_hash, detail)
    res.rationale = wc_rationale(checklist, ordered, s, r, res.detail["scene_summary"])
    return res
