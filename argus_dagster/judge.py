"""Criterion judges (method §7).

A judge sees the criterion, its scoring rule and failure modes, the aggregation hint, the tool evidence
and a few output frames, never importance, type, threshold or cap (:func:`judge_view` is the only
way criteria reach a judge). It returns an integer 0-10 and a rationale, or no score with the reason.

Without a VLM, :class:`EvidenceOnlyJudge` scores only what measurable evidence supports. Its
calibration, per tool (each maps to 0-10, linear between the stated points, clamped):

=============  =====================================================================
flicker_probe  luma jitter <= 1.0 -> 10, >= 8.0 -> 0
motion_probe   mean flow 0 -> 0, >= 0.6 px/step -> 10, capped by 10 x (1 - static share)
aesthetic      technical (or learned) quality 0-100 -> /10
ssim_compare   video vs video: the larger of SSIM and edge SSIM; image vs first frame:
               0.7 SSIM + 0.3 colour-histogram correlation; either way <= 0.3 -> 0, >= 0.9 -> 10
change_probe   the larger of: mean absolute RGB difference to the source (<= 2 -> 0, >= 12 -> 10)
               and share of pixels changed by more than 25 levels (<= 0.5% -> 0, >= 5% -> 10)
ocr            best fuzzy match of the target text: ratio x 10
=============  =====================================================================

Several measures in one criterion are averaged, or the lowest is taken when the aggregation hint
asks for the worst ("worst", "min", "lowest", "any"). A ``vlm_qa`` step without a VLM, or a failed
tool, contributes nothing; a criterion with no measure left stays unscored, with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .rubric.schema import Criterion


def judge_view(c: Criterion) -> dict[str, Any]:
    """The criterion as a judge may see it (method §7): no importance, type, threshold or cap."""
    return {
        "id": c.id,
        "dimension": c.dimension,
        "criterion": c.criterion,
        "scoring_rule": c.scoring_rule,
        "failure_modes": list(c.failure_modes),
        "aggregation": c.evidence_plan.aggregation,
        "target_entity": c.evidence_plan.target_entity,
    }


@dataclass(frozen=True)
class Judgment:
    score: int | None
    rationale: str
    judge: str


def _lin(x: float, lo: float, hi: float) -> float:
    """0 at ``lo``, 1 at ``hi``, clamped (``lo > hi`` inverts)."""
    return float(np.clip((x - lo) / (hi - lo), 0.0, 1.0))


def _flicker(r: dict) -> tuple[float, str]:
    s = 10 * _lin(r["jitter"], 8.0, 1.0)
    return s, f"flicker_probe: luma jitter {r['jitter']:.2f}, {len(r['flagged_frames'])} flagged frames"


def _motion(r: dict) -> tuple[float, str]:
    s = min(10 * _lin(r["mean_flow"], 0.0, 0.6), 10 * (1 - r["static_fraction"]))
    return s, (f"motion_probe: mean flow {r['mean_flow']:.3f} px/step, static share "
               f"{r['static_fraction']:.2f}, smoothness {r['smoothness']:.2f}")


def _aesthetic(r: dict) -> tuple[float, str]:
    extra = f" (sharpness {r['sharpness']:.1f}, noise sigma {r['noise_sigma']:.2f})" if "sharpness" in r else ""
    return r["quality"] / 10.0, f"aesthetic[{r.get('backend', '?')}]: quality {r['quality']:.1f}/100{extra}"


def _ssim(r: dict) -> tuple[float, str]:
    if r["mode"] == "aligned":
        # Video against video (preservation): structure counts, colour may be what the edit changed.
        sim = max(r["ssim"], r["edge_ssim"])
    else:
        # An image against the opening frame (fidelity): structure and colour both count.
        sim = 0.7 * r["ssim"] + 0.3 * max(r["hist_corr"], 0.0)
    return 10 * _lin(sim, 0.3, 0.9), (f"ssim_compare[{r['mode']}]: SSIM {r['ssim']:.3f}, edge SSIM "
                                      f"{r['edge_ssim']:.3f}, colour correlation {r['hist_corr']:.3f}")


def _change(r: dict) -> tuple[float, str]:
    # A global edit moves every pixel a little, a local one (an inserted object) a few pixels a lot.
    s = max(10 * _lin(r["mean_abs_diff"], 2.0, 12.0), 10 * _lin(r["changed_pixel_fraction"], 0.005, 0.05))
    return s, (f"change_probe: mean |diff| {r['mean_abs_diff']:.2f}/255 vs source, "
               f"{r['changed_pixel_fraction']:.1%} of pixels changed, {r['unchanged_fraction']:.0%} of frames unchanged")


def _ocr(r: dict) -> tuple[float, str] | None:
    if "match" not in r:
        return None
    seen = ", ".join(repr(x["text"]) for x in r["lines"][:4]) or "no text"
    return 10 * r["match"], f"ocr: target {r['target']!r} matched {r['match']:.2f} (read {seen})"


MEASURES: dict[str, Callable[[dict], tuple[float, str] | None]] = {
    "flicker_probe": _flicker,
    "motion_probe": _motion,
    "aesthetic": _aesthetic,
    "ssim_compare": _ssim,
    "change_probe": _change,
    "ocr": _ocr,
}
_WORST = re.compile(r"\b(worst|min|minimum|lowest|any)\b", re.IGNORECASE)


class EvidenceOnlyJudge:
    name = "evidence-only"
    version = "1"

    @property
    def identity(self) -> str:
        return f"{self.name}/{self.version}"

    def judge(self, view: dict[str, Any], evidence: list[dict[str, Any]], frames: Any = None) -> Judgment:
        measured: list[tuple[float, str]] = []
        skipped: list[str] = []
        for rec in evidence:
            tool = rec.get("tool", "?")
            if not rec.get("ok"):
                skipped.append(f"{tool}: {rec.get('error', 'failed')}")
                continue
            fn = MEASURES.get(tool)
            m = fn(rec) if fn else None
            if m is None:
                skipped.append(f"{tool}: evidence not measurable without a VLM")
                continue
            measured.append(m)
        if not measured:
            reason = "; ".join(skipped) if skipped else "no evidence"
            return Judgment(None, f"unscored: no measurable evidence ({reason})", self.identity)
        worst = bool(_WORST.search(view.get("aggregation") or ""))
        values = [s for s, _ in measured]
        raw = min(values) if worst else float(np.mean(values))
        score = int(np.clip(round(raw), 0, 10))
        how = "lowest" if worst and len(values) > 1 else ("mean" if len(values) > 1 else "measure")
        text = "; ".join(f"{d} -> {s:.1f}" for s, d in measured)
        if skipped:
            text += ". Not used: " + "; ".join(skipped)
        return Judgment(score, f"{score}/10 ({how} of measured evidence): {text}", self.identity)
