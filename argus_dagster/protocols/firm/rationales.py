"""Rationales that verbalize one video's verified IF and WC decisions (seed §3.3), written from the
decisions after the score is fixed, so no rationale can move a score.
"""

from __future__ import annotations

from typing import Sequence

from argus_dagster.protocols.firm.types import Checklist, Verdict


def if_rationale(checklist: Checklist, verdicts: Sequence[Verdict], score: float, rating_: int) -> str:
    """Satisfied requirements first, then the unmet ones with their evidence (seed §3.3)."""
    met = [(i, v) for i, v in zip(checklist.items, verdicts) if v.yes and v.verifiable]
    unmet = [(i, v) for i, v in zip(checklist.items, verdicts) if not (v.yes and v.verifiable)]
    out = [f"{len(met)} of {len(verdicts)} requirements are met."]
    if met:
        out.append("Met: " + "; ".join(f"{i.question} ({v.evidence or 'seen'})" for i, v in met) + ".")
    if unmet:
        out.append("Not met: " + "; ".join(
            f"{i.question} ({v.evidence or 'no evidence'}{'' if v.verifiable else ', cannot be verified'})"
            for i, v in unmet) + ".")
    out.append(f"Importance-weighted share met: {score:.4f}, rating {rating_}/5.")
    return " ".join(out)


def wc_rationale(checklist: Checklist, verdicts: Sequence[Verdict], score: float, rating_: int,
                 scene_summary: str = "") -> str:
    """The scene first, then the violations by target and aspect (seed §3.3), then the questions left
    out as unverifiable."""
    out = [scene_summary.strip()] if scene_summary.strip() else []
    bad: dict[str, list[str]] = {}
    unverified: list[str] = []
    for i, v in zip(checklist.items, verdicts):
        if not v.verifiable:
            unverified.append(f"{i.target}: {i.question}")
        elif v.yes:
            aspect = f"{i.aspect.replace('_', ' ')}: " if i.aspect else ""
            bad.setdefault(i.target, []).append(f"{aspect}{v.evidence or i.question}")
    if bad:
        out.append("Violations: " + " ".join(f"{t} - {'; '.join(x)}." for t, x in bad.items()))
    else:
        out.append("No violation of common sense or physics was observed.")
    if unverified:
        out.append("Left out as unverifiable: " + "; ".join(unverified) + ".")
    out.append(f"Importance-weighted clean ratio: {score:.4f}, rating {rating_}/5.")
    return " ".join(out)
