"""Criterion judges (method §7).

A judge sees the criterion, its scoring rule and failure modes, the aggregation hint, the tool evidence
and a few output frames, never importance, type, threshold or cap (:func:`judge_view` is the only
way criteria reach a judge). It returns a score 0-10 and a rationale, or no score with the reason: the
VLM judge answers a whole number (method §7), the evidence-only judge its measure to one decimal.

Without a VLM, :class:`EvidenceOnlyJudge` scores only what measurable evidence supports. Its
calibration, per tool (each maps to 0-10, linear between the stated points, clamped):

=============  =====================================================================
flicker_probe  the larger of block-coherent luma and colour jitter on consecutive
               frames, on a log scale: <= 1 -> 10, 6.9 -> 5, >= 48 -> 0 (an alternation of
               +-3 levels every frame: jitter 12 -> 3.6)
motion_probe   coherence: 10 x the product of one share per defect (each 1 where the clip
               shows none; a second defect costs its own share, not nothing): jump share
               (<= 0.03 -> 1, >= 0.25 -> 0), duplicated-frame share in a moving clip (<= 0.1 -> 1,
               >= 0.6 -> 0; a film cadence repeats 20%), longest freeze (<= 0.1 s -> 1, >= 1 s
               -> 0), motion reversals over at least 8 steps (<= 0.3 -> 1, >= 0.8 -> 0; real
               to-and-fro motion reaches 0.5), speed surplus against neighbouring steps
               (<= 0.05 -> 1, >= 0.6 -> 0), jump rate, steps beyond 1.5x their neighbours
               per second (0 -> 1, >= 10 -> 0: every jump costs; a cut in 2 s of clip reads
               about 2) and order displacement, the mean log2 distance in frames from each
               frame to its most similar frame when that is not a neighbour (<= 0.15 -> 1,
               >= 2 -> 0; real clips in order: below 0.1, swaps inside blocks of 4: 0.1-0.9,
               of 8: 0.5-1.5, a full shuffle: 2-4). Incoherence is reported, not scored: a
               fast real clip (or one whose frames are far apart) reaches a shuffled clip's
               1.0. For a temporal-quality criterion (dimension 12) that is the score;
               otherwise it is multiplied by the amount of motion: steady flow (motion that
               persists over 4 steps) 0 -> 0, >= 4 px/s (256 px) -> 1, at most 1 - static
               share
aesthetic      technical (or learned) quality 0-100 -> /10
ssim_compare   video vs video: the larger of SSIM and edge SSIM; image vs first frame:
               0.7 SSIM + 0.3 colour-histogram correlation; either way <= 0.3 -> 0, >= 0.9 -> 10
change_probe   with a measurable edit instruction: fulfilment of the requested property x 10;
               for an edit-degeneracy check (``check: degenerate``) with a known expected
               change: change / expected change <= 0.15 -> 0, >= 0.5 -> 10; otherwise the
               larger of: mean absolute RGB difference to the source (<= 2 -> 0, >= 12 -> 10)
               and share of pixels changed by more than 25 levels (<= 0.5% -> 0, >= 5% -> 10)
ocr            best fuzzy match of the target text: ratio x 10
dino_sim       cosine similarity of DINO embeddings <= 0.2 -> 0, >= 0.8 -> 10
sam_track      share of the clip where the queried entity is found (detected or tracked) x 10
spatial_       left_right / front_back: share of frames (both entities found) where the relation
relation       holds in the order the entities are listed x 10; count with an expected number:
               10 - 5 x |median count - expected|; otherwise no measure
=============  =====================================================================

A probe that could not measure this clip (``not_measurable``: too few frames, one flat colour)
contributes nothing and says why; it is a property of the clip, so it is not retried.
Several measures in one criterion are averaged, or the lowest is taken when the aggregation hint
asks for the worst ("worst", "min", "lowest", "any"). The result is kept to one decimal, not rounded to
a whole point: it is a measurement, and rounding it would make a clean clip and a mildly blurred, noisy
or recoloured copy of it tie (7.4 and 6.6 both read 7), so the evidence-only judge could not rank
what it measured apart. A VLM's answer is a whole number as method §7 asks. A ``vlm_qa`` step
without a VLM, or a failed tool, contributes nothing; a criterion with no measure left stays
unscored, with the reason.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from argus_dagster.infra.identities import EvidenceJudgeIdentity, VlmCall, vlm_call
from argus_dagster.method import video_prompt  # read at call time: the shared opening text
from argus_dagster.method.evidence.tools.measures import dino_sim_measure, sam_track_measure, spatial_relation_measure
from argus_dagster.method.rubric.schema import Criterion
from argus_dagster.method.video_prompt import video_messages
from argus_dagster.vlm.parsing import extract_json
from argus_dagster.vlm.protocol import chat_json
from argus_dagster.vlm.reply import ParseError, VlmError


def judgment_evidence(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool records as a judge gets them: without run times, which say nothing about the video
    and would make the same evidence look new."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


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
    score: float | None  # a VLM judge's is a whole number; the evidence-only judge's has one decimal
    rationale: str
    judge: str


def _lin(x: float, lo: float, hi: float) -> float:
    """0 at ``lo``, 1 at ``hi``, clamped (``lo > hi`` inverts)."""
    return float(np.clip((x - lo) / (hi - lo), 0.0, 1.0))


def _flicker(r: dict, view: dict | None = None) -> tuple[float, str]:
    x = max(r["jitter"], r.get("color_jitter", 0.0))
    # On a log scale: doubling the flicker costs the same at any level, so strengths stay apart.
    s = 10 * _lin(float(np.log(max(x, 1e-3))), float(np.log(48.0)), 0.0)
    return s, (f"flicker_probe: luma jitter {r['jitter']:.2f}, colour jitter {r.get('color_jitter', 0.0):.2f}, "
               f"{len(r['flagged_frames'])} flagged frames")


def _coherence(r: dict) -> tuple[float, str]:
    parts = [_lin(r.get("jump_fraction", 0.0), 0.25, 0.03), _lin(r.get("duplicate_fraction", 0.0), 0.6, 0.1),
             _lin(r.get("longest_freeze_s", 0.0), 1.0, 0.1),
             _lin(r.get("speed_surplus", 0.0), 0.6, 0.05), _lin(r.get("jump_rate", 0.0), 10.0, 0.0),
             _lin(r.get("order_displacement", 0.0), 2.0, 0.15)]
    if r.get("reversal_steps", 0) >= 8:  # a few steps of to-and-fro motion say nothing about order
        parts.append(_lin(r.get("reversal_fraction", 0.0), 0.8, 0.3))
    # Each defect costs its own share: a second one on top of the worst is not free.
    # In words, only what is there: the defects that cost (every count is in the evidence record).
    found = [text for cost, text in (
        (parts[0] * parts[4], f"{len(r.get('jump_times', []))} jumps ({r.get('jump_rate', 0.0):.2f}/s)"),
        (parts[1], f"{r.get('duplicate_fraction', 0.0):.0%} duplicated frames"),
        (parts[2], f"a {r.get('longest_freeze_s', 0.0):.2f} s freeze"),
        (parts[3], f"speed surplus {r.get('speed_surplus', 0.0):.2f}"),
        (parts[5], f"{r.get('out_of_order_fraction', 0.0):.0%} of frames out of order"),
        (parts[6] if len(parts) > 6 else 1.0, f"{r.get('reversal_fraction', 0.0):.0%} motion reversals")) if cost < 1.0]
    return 10 * float(np.prod(parts)), ", ".join(found) or "no jump, freeze, duplicate or reversal"


def _motion(r: dict, view: dict | None = None) -> tuple[float, str]:
    coherence, how = _coherence(r)
    if (view or {}).get("dimension") == 12:
        return coherence, f"motion_probe (temporal coherence): {how}"
    flow = r.get("steady_flow", r["mean_flow"])
    amount = min(_lin(flow, 0.0, 4.0), 1 - r["static_fraction"])
    # Enough motion and coherent motion: a slow clip whose frames jump is worse than either alone.
    return amount * coherence, (f"motion_probe: steady flow {flow:.2f} px/s, static share {r['static_fraction']:.2f}, "
                                f"{how}")


def _aesthetic(r: dict, view: dict | None = None) -> tuple[float, str]:
    extra = f" (sharpness {r['sharpness']:.2f}, noise sigma {r['noise_sigma']:.2f})" if "sharpness" in r else ""
    backend = f"[{r['backend']}]" if r.get("backend") else ""
    return r["quality"] / 10.0, f"aesthetic{backend}: quality {r['quality']:.1f}/100{extra}"


def _ssim(r: dict, view: dict | None = None) -> tuple[float, str]:
    if r["mode"] == "aligned":
        # Video against video (preservation): structure counts, colour may be what the edit changed.
        sim = max(r["ssim"], r["edge_ssim"])
    else:
        # An image against the opening frame (fidelity): structure and colour both count.
        sim = 0.7 * r["ssim"] + 0.3 * max(r["hist_corr"], 0.0)
    return 10 * _lin(sim, 0.3, 0.9), (f"ssim_compare[{r['mode']}]: SSIM {r['ssim']:.3f}, edge SSIM "
                                      f"{r['edge_ssim']:.3f}, colour correlation {r['hist_corr']:.3f}")


def _change(r: dict, view: dict | None = None) -> tuple[float, str]:
    seen = (f"mean |diff| {r['mean_abs_diff']:.2f}/255 vs source, {r['changed_pixel_fraction']:.1%} of pixels "
            f"changed, {r['unchanged_fraction']:.0%} of frames unchanged")
    edit = (r.get("edit") or {}).get("kind", "unknown")
    if (r.get("args") or {}).get("check") == "degenerate":
        if r.get("change_vs_expected") is not None:
            return 10 * _lin(r["change_vs_expected"], 0.15, 0.5), (
                f"change_probe: {seen}; the requested {edit} edit would change the source by "
                f"{r['expected_change']:.2f}/255, the output changed {r['change_vs_expected']:.2f}x that")
    elif r.get("fulfilment") is not None:
        return 10 * r["fulfilment"], (f"change_probe: requested {edit} edit carried out to "
                                      f"{r['fulfilment']:.0%} ({r.get('edit_measure', '')}); {seen}")
    # A global edit moves every pixel a little, a local one (an inserted object) a few pixels a lot.
    s = max(10 * _lin(r["mean_abs_diff"], 2.0, 12.0), 10 * _lin(r["changed_pixel_fraction"], 0.005, 0.05))
    return s, f"change_probe: {seen}"


def _ocr(r: dict, view: dict | None = None) -> tuple[float, str] | None:
    if "match" not in r:
        return None
    seen = ", ".join(repr(x["text"]) for x in r["lines"][:4]) or "no text"
    return 10 * r["match"], f"ocr: target {r['target']!r} matched {r['match']:.2f} (read {seen})"


# Each measure reads one tool record; those of this module also read the criterion as the judge sees it.
VIEW_AWARE = frozenset({"flicker_probe", "motion_probe", "aesthetic", "ssim_compare", "change_probe", "ocr"})
MEASURES: dict[str, Callable[..., tuple[float, str] | None]] = {
    "flicker_probe": _flicker,
    "motion_probe": _motion,
    "aesthetic": _aesthetic,
    "ssim_compare": _ssim,
    "change_probe": _change,
    "ocr": _ocr,
    "dino_sim": dino_sim_measure,
    "sam_track": sam_track_measure,
    "spatial_relation": spatial_relation_measure,
}
_WORST = re.compile(r"\b(worst|min|minimum|lowest|any)\b", re.IGNORECASE)


class EvidenceOnlyJudge:
    name = "evidence-only"
    version = "6"
    needs_frames = False
    deterministic = True  # an unscored criterion stays unscored on a rerun

    @property
    def identity(self) -> str:
        return f"{self.name}/{self.version}"

    @property
    def cache_identity(self) -> EvidenceJudgeIdentity:
        return EvidenceJudgeIdentity(name=self.name, version=self.version)

    def judge(self, view: dict[str, Any], evidence: list[dict[str, Any]], frames: Any = None) -> Judgment:
        measured: list[tuple[float, str]] = []
        skipped: list[str] = []
        for rec in evidence:
            tool = rec.get("tool", "?")
            if rec.get("not_measurable"):
                skipped.append(f"{tool}: not measurable on this clip: {rec['not_measurable']}")
                continue
            if not rec.get("ok"):
                skipped.append(f"{tool}: {rec.get('error', 'failed')}")
                continue
            fn = MEASURES.get(tool)
            m = (fn(rec, view) if tool in VIEW_AWARE else fn(rec)) if fn else None
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
        score = round(float(np.clip(raw, 0.0, 10.0)), 1)
        return Judgment(score, rationale_sentence(score, worst, measured, skipped), self.identity)


# A measure's name in words, by the tool (and view) its record's text starts with.
MEASURE_WORDS = {"flicker_probe": "flicker", "motion_probe": "motion", "motion_probe (temporal coherence)": "temporal coherence",
                 "aesthetic": "frame quality", "ssim_compare": "similarity to the reference",
                 "change_probe": "change from the source", "ocr": "on-screen text", "dino_sim": "DINO similarity",
                 "sam_track": "tracking", "spatial_relation": "spatial relation"}


def measure_words(text: str) -> tuple[str, str]:
    """``("flicker", "luma jitter 0.42, ...")`` from a measure's ``"flicker_probe: luma jitter 0.42, ..."``
    (a backend or mode in brackets after the tool follows the value: ``quality 61.0/100 [niqe]``)."""
    tool, _, value = text.partition(": ")
    base, _, bracket = tool.partition("[")
    words = MEASURE_WORDS.get(tool) or MEASURE_WORDS.get(base) or tool
    return words, (f"{value} [{bracket}" if bracket else value)


def rationale_sentence(score: float, worst: bool, measured: list[tuple[float, str]], skipped: list[str]) -> str:
    """The evidence-only judge's rationale, one sentence naming each measure and its value:
    ``Flicker (luma jitter 0.42, colour jitter 0.10, 0 flagged frames) gives 9.1/10.``, or for several
    ``6.2/10, the mean of flicker 9.1 (...) and frame quality 3.4 (...)``; then what was not used."""
    named = [(s, *measure_words(d)) for s, d in measured]
    if len(named) == 1:
        _, words, value = named[0]
        text = f"{words[:1].upper()}{words[1:]} ({value}) gives {score:.1f}/10"
    else:
        items = [f"{words} {s:.1f} ({value})" for s, words, value in named]
        text = (f"{score:.1f}/10, the {'lowest' if worst else 'mean'} of "
                + ", ".join(items[:-1]) + f" and {items[-1]}")
    if skipped:
        text += "; not used: " + "; ".join(skipped)
    return text + "."


# ------------------------------------------------------------------------------------- VLM judge

JUDGE_PROMPT_VERSION = "judge-4"  # the instructions follow the video's frames (video_prompt)
JUDGE_MAX_TOKENS = 400
_EVIDENCE_CHARS = 6000

# Method §7: the judge weighs the tool evidence and the frames together; a measurement is evidence,
# not a verdict. The instructions come after the video's frames, which every request about the video
# shares (video_prompt), so they speak of the frames as given above.
JUDGE_INSTRUCTIONS = (
    "You are the criterion judge of a video evaluation. You get, with the frames of the output video above, "
    "one criterion of a frozen rubric (what to verify, its 0-10 scoring rule, its failure modes and how "
    "evidence maps to a score) and the records of the tools that ran for it. Score only this criterion, by "
    "its scoring rule. Weigh the tool evidence and the frames together: a measurement (a similarity, a "
    "detection, a count, a flicker or motion statistic, an OCR reading, another model's answer) is evidence, "
    "not a verdict. Check it against what the frames show; where they disagree, decide which to trust and "
    "why (a tool can miss, mis-detect or measure the wrong region; a few frames can miss what happens "
    "between them). A step that failed or was unavailable is no evidence either way. Look for each listed "
    "failure mode. Answer with one JSON object and nothing else: "
    '{"score": <integer 0-10>, "rationale": "<one to three sentences naming the evidence and frames that '
    'decided>"}'
)


def compact_evidence(evidence: list[dict[str, Any]], limit: int = _EVIDENCE_CHARS) -> str:
    """The tool records as the judge reads them: long lists shortened, the whole bounded in size."""
    def shrink(v: Any, depth: int = 0) -> Any:
        if isinstance(v, float):
            return round(v, 4)
        if isinstance(v, list):
            items = [shrink(x, depth + 1) for x in v[:12]]
            return items + [f"... {len(v) - 12} more"] if len(v) > 12 else items
        if isinstance(v, dict):
            return {k: shrink(x, depth + 1) for k, x in v.items()}
        return v

    text = json.dumps([shrink(r) for r in evidence], default=str)
    return text if len(text) <= limit else text[:limit] + " ...(truncated)"


_NUMBER = re.compile(r"\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)")
_RATIONALE_CHARS = 2000


def parse_judgment(text: str) -> tuple[int, str]:
    """``(score, rationale)`` from an answer. A score that is not a finite number (``Infinity``,
    ``1e999``, a 400-digit integer, the string ``"1e309"``) is refused with the reason: asked again,
    and the criterion left unscored if it stays so. A finite score outside 0-10 is clamped, and the
    rationale says from what. The rationale is bounded in size."""
    data = extract_json(text)
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]
    if not isinstance(data, dict) or "score" not in data:
        raise ParseError("the answer has no \"score\" field")
    raw = data["score"]
    shown = repr(raw) if not isinstance(raw, int) or abs(raw) < 10 ** 12 else f"an integer of {len(str(abs(raw)))} digits"
    if isinstance(raw, str):
        m = _NUMBER.match(raw[:100])
        if not m:
            raise ParseError(f"score {raw[:40]!r} is not a number")
        raw = m.group(1)
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise ParseError(f"score {shown[:40]} is not a number")
    try:
        value = float(raw)
    except OverflowError:  # an integer too large for a float
        value = math.inf
    if not math.isfinite(value):
        raise ParseError(f"score {shown[:40]} is not a finite number")
    rationale = str(data.get("rationale") or data.get("reason") or "").strip()
    if len(rationale) > _RATIONALE_CHARS:
        rationale = rationale[:_RATIONALE_CHARS] + f" ...(rationale cut at {_RATIONALE_CHARS} characters)"
    score = int(np.clip(round(value), 0, 10))
    if not 0 <= value <= 10:
        rationale = f"[the judge answered {shown[:40]}, outside 0-10: clamped to {score}] {rationale}".strip()
    return score, rationale


def vlm_judge_identity(backend: str, model: str) -> str:
    return f"vlm/{backend}/{model}/{JUDGE_PROMPT_VERSION}"


class VlmJudge:
    """The criterion judge of method §7 on a VLM: the judge view, the evidence and ~8 output frames."""

    name = "vlm"
    needs_frames = True
    deterministic = False  # an unscored criterion (a failed or unusable answer) is asked again next run

    def __init__(self, client, *, stats=None, parse_retries: int = 2):
        self.client = client
        self.stats = stats
        self.parse_retries = parse_retries

    @property
    def identity(self) -> str:
        return vlm_judge_identity(self.client.backend, self.client.model)

    @property
    def cache_identity(self) -> VlmCall:
        """The judge's part of a judgment's identity: the model, the instructions (the video's shared
        system text included) and the request's budget."""
        return vlm_call(self.client, prompt_version=JUDGE_PROMPT_VERSION,
                        prompt=(video_prompt.VIDEO_SYSTEM, JUDGE_INSTRUCTIONS), max_tokens=JUDGE_MAX_TOKENS, thinking=False)

    def messages(self, view: dict[str, Any], evidence: list[dict[str, Any]], frames: Any = None) -> list[dict]:
        """The video's shared opening (system text and frames), then the instructions, the criterion,
        the evidence and the request to score: what differs between criteria comes last."""
        return video_messages(frames, [
            JUDGE_INSTRUCTIONS,
            "Criterion:\n" + json.dumps(view, indent=1),
            "Tool evidence:\n" + (compact_evidence(evidence) if evidence else "none"),
            "Score this criterion now.",
        ])

    def judge(self, view: dict[str, Any], evidence: list[dict[str, Any]], frames: Any = None) -> Judgment:
        msgs = self.messages(view, evidence, frames)
        try:
            (score, rationale), reply = chat_json(self.client, msgs, parse_judgment, parse_retries=self.parse_retries,
                                                  max_tokens=JUDGE_MAX_TOKENS, stats=self.stats, thinking=False)
        except ParseError as exc:
            return Judgment(None, f"unscored: {exc}", self.identity)
        except VlmError as exc:
            return Judgment(None, f"unscored: judge call failed: {exc}", self.identity)
        rationale = rationale or "(no rationale given)"
        if getattr(reply, "cut", None) is not None:
            rationale += f" [the judge's answer was cut at {reply.cut} characters]"
        return Judgment(score, rationale, self.identity)
