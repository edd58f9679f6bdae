"""VEFX-Bench's edit evaluation (seed ``002_9bfbab1d8353041b.txt``, the VEFX-Bench evaluation card).

The card: an edit is judged from the **source video, the editing instruction and the edited output
video**, on three decoupled dimensions, each on a **1-4 rubric**: Instruction Following (IF),
Rendering Quality (RQ) and Edit Exclusivity (EE); the **overall score is the arithmetic mean of the
three** ("not a separately annotated dimension"). Evaluators are compared with people by SRCC and
KRCC on raw predictions, PLCC and RMSE after a four-parameter logistic calibration, and pairwise
accuracy within groups that share a source video and instruction (:mod:`argus_dagster.protocols.alignment.metrics`).

Here a VLM judge scores each dimension in its own request, from labelled frames of the source and the
edited video (and the subject image for TSV2V) and the instruction, with the rubric of that dimension
and the definitions of all three in a system text every request of a video shares (a prefix-caching
server prefills it once). Each answer is the visual evidence first, then the integer 1-4; a malformed
answer is shown back and asked again; a failed call leaves that dimension unscored with the reason
and the others proceed. The card names the dimensions and the scale; the wording of each level below
is this project's reading of those names (the card gives no level text): IF is whether the requested
change is made, RQ whether the edited video looks clean and temporally stable as a video, EE whether
the change stays where the instruction puts it and everything else is kept from the source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence, cast

import numpy as np
import polars as pl

from argus_dagster.infra.cache import ContentCache
from argus_dagster.infra.identities import VLM_IRRELEVANT, VlmCall, identity_record, record_key, vlm_call
from argus_dagster.infra.media import SAMPLING_ID
from argus_dagster.method.inputs import EDIT_TASKS
from argus_dagster.method.leaderboard import bootstrap_ci
from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.parsing import scored_object
from argus_dagster.vlm.protocol import chat_json
from argus_dagster.vlm.reply import ParseError, VlmError

IF, RQ, EE = "vefx_instruction_following", "vefx_rendering_quality", "vefx_edit_exclusivity"
OVERALL = "vefx_overall"
# An overall that people annotated themselves: kept as a dimension of its own, never the card's overall.
OVERALL_ANNOTATED = "vefx_overall_annotated"
DIMENSIONS = (IF, RQ, EE)
SHORT = {IF: "if", RQ: "rq", EE: "ee"}
SCALE = (1.0, 4.0)
TASKS = EDIT_TASKS  # what VEFX-Bench judges: the edits
# Evaluator names in alignment tables, and the human dimension each is compared with.
EVALUATORS = {"vefx_if": IF, "vefx_rq": RQ, "vefx_ee": EE, "vefx_overall": OVERALL}
RANGES = {name: SCALE for name in EVALUATORS}
NOMINAL_SCALES = {d: SCALE for d in (*DIMENSIONS, OVERALL, OVERALL_ANNOTATED)}

DEFINITIONS = {
    IF: ("Instruction Following",
         "whether the edited video carries out the editing instruction: the requested change is made, on the "
         "requested target, with the requested attributes and extent",
         {4: "the instruction is fully carried out: every requested change is present and correct",
          3: "mostly carried out: the main change is made, with a minor part missing or slightly off",
          2: "partly carried out: an attempt at the change is visible but a major part is missing or wrong",
          1: "not carried out: no requested change is visible, or the change made is a different one"}),
    RQ: ("Rendering Quality",
         "the visual quality of the edited video as a video: clean, sharp, natural-looking content with "
         "stable appearance over time, judged on the whole frame and most closely on the edited content",
         {4: "clean and natural: no visible artifact, blur, flicker or distortion",
          3: "good: minor artifacts or slight instability that do not distract",
          2: "noticeably flawed: clear artifacts, blur, flicker, warping or unnatural blending",
          1: "severely broken: heavy artifacts, corrupted or collapsing frames, unwatchable"}),
    EE: ("Edit Exclusivity",
         "whether the edit stays exclusive to what the instruction asks to change: regions, subjects, motion "
         "and camera that the instruction leaves alone are preserved from the source video",
         {4: "only the requested content changes; everything else matches the source",
          3: "small unrequested changes (a slight colour or detail shift) outside the edit",
          2: "clear unrequested changes: other objects, the background or the motion are altered",
          1: "the video is largely re-generated: most of what should be kept is changed or lost"}),
}
PROMPT_VERSION = "vefx-judge-1"
JUDGE_MAX_TOKENS = 800


@identity_record
@dataclass(frozen=True)
class VefxJudgmentIdentity:
    """One VEFX judgment of an edit on one dimension."""

    call: VlmCall
    dimension: str
    instruction: str
    media: dict[str, str]
    sampling: str

    IRRELEVANT: ClassVar[tuple[str, ...]] = VLM_IRRELEVANT


def _rubric_text(dimension: str) -> str:
    name, what, levels = DEFINITIONS[dimension]
    return f"{name} ({SHORT[dimension].upper()}): {what}.\n" + "\n".join(
        f"  {k}: {levels[k]}" for k in (4, 3, 2, 1))


SYSTEM = (
    "You evaluate an instruction-guided video edit as VEFX-Bench defines it. You are given the editing "
    "instruction, frames of the source video and frames of the edited video, each in temporal order (and, "
    "where given, a subject image the edit must use). Three decoupled dimensions are scored, each on a 1-4 "
    "rubric; one request asks for one of them, and a problem belongs to the one dimension it concerns "
    "(a missing change is Instruction Following, an artifact is Rendering Quality, an unrequested change "
    "is Edit Exclusivity).\n\n" + "\n\n".join(_rubric_text(d) for d in DIMENSIONS) + "\n\n"
    "Compare the edited frames with the source frames. Give the visual evidence first (what changed and "
    "what did not, where, in which frames), then the integer score. Answer with one JSON object and "
    'nothing else: {"evidence": "<what you see>", "score": <1-4>}'
)


def parse_judgment(text: str) -> dict:
    """``{"evidence": str, "score": int 1-4}``; anything else raises :class:`ParseError`."""
    data, score = scored_object(text, 4)
    evidence = " ".join(str(data.get("evidence") or "").split())
    if not evidence:
        raise ParseError('"evidence" must say what the frames show')
    return {"score": score, "evidence": evidence[:2000]}


def overall(scores: Sequence[float | None]) -> float | None:
    """The card's overall: the arithmetic mean of IF, RQ and EE; None unless all three are scored."""
    vals = list(scores)
    if len(vals) != 3 or any(v is None for v in vals):
        return None
    return round(float(sum(cast(list[float], vals))) / 3.0, 4)


@dataclass
class Judgment:
    dimension: str
    score: int | None = None
    evidence: str = ""
    reason: str = ""


@dataclass(frozen=True)
class EditJob:
    """One edited video: its instruction, and the frames (``Frames`` or image lists) by label:
    ``source_video``, ``subject_image`` (TSV2V), ``output_video``; the digests key the cache."""

    input_id: str
    instruction: str
    frames: dict[str, Any]
    digests: dict[str, str] = field(default_factory=dict)


def _parts(label: str, frames: Any) -> list[Any]:
    images = frames.images() if hasattr(frames, "images") else list(frames or [])
    if not images:
        return []
    times = getattr(frames, "timestamps", None)
    when = f" (t = {', '.join(f'{t:.1f}s' for t in times)})" if times else ""
    return [f"[{label}] {len(images)} frame(s) in temporal order, frame 1 = earliest{when}:", *images]


class VefxJudge:
    """VEFX's three rubric judgments of an edit on one client, each content-addressed in ``cache``
    (namespace ``vefx``): a rerun, or the same video again, makes no call."""

    def __init__(self, client: Any, *, cache: ContentCache | None = None, stats: CallStats | None = None,
                 parse_retries: int = 2):
        self.client = client
        self.cache = cache or ContentCache(None, "vefx")
        self.stats = stats
        self.parse_retries = parse_retries

    @property
    def identity(self) -> dict:
        return {"backend": self.client.backend, "model": self.client.model, "prompt_version": PROMPT_VERSION}

    def judgment_identity(self, job: EditJob, dimension: str) -> VefxJudgmentIdentity:
        """What one judgment depends on: the request (model, the rubric's text, budget), the dimension,
        the instruction, the media's content hashes and the sampling policies."""
        return VefxJudgmentIdentity(
            call=vlm_call(self.client, prompt_version=PROMPT_VERSION, prompt=SYSTEM, max_tokens=JUDGE_MAX_TOKENS,
                          thinking=None),
            dimension=dimension, instruction=job.instruction, media=dict(job.digests), sampling=SAMPLING_ID)

    def judge(self, job: EditJob, dimension: str) -> Judgment:
        key = record_key(self.judgment_identity(job, dimension))
        parts = [f"Editing instruction: {job.instruction}"]
        for label in ("source_video", "subject_image", "output_video"):
            if label in job.frames:
                parts += _parts("edited_video" if label == "output_video" else label, job.frames[label])
        name = DEFINITIONS[dimension][0]
        parts.append(f"Score {name} ({SHORT[dimension].upper()}) now, on its 1-4 rubric.")

        def compute() -> dict:
            msgs = [{"role": "system", "content": [SYSTEM]}, {"role": "user", "content": parts}]
            value, _ = chat_json(self.client, msgs, parse_judgment, parse_retries=self.parse_retries,
                                 max_tokens=JUDGE_MAX_TOKENS, stats=self.stats)
            return value

        try:
            got, _ = self.cache.get_or_compute(key, compute) if job.digests else (compute(), False)
        except (ParseError, VlmError) as exc:
            return Judgment(dimension, reason=f"{SHORT[dimension].upper()} judge: {exc}")
        return Judgment(dimension, got["score"], got["evidence"])

    def evaluate(self, job: EditJob) -> dict[str, Judgment]:
        if "source_video" not in job.frames:
            why = "no source video: VEFX judges an edit against its source (TV2V, TSV2V)"
            return {d: Judgment(d, reason=why) for d in DIMENSIONS}
        return {d: self.judge(job, d) for d in DIMENSIONS}


def score_row(input_id: str, judgments: dict[str, Judgment]) -> dict:
    """One ``vefx_scores`` row: per dimension its score, evidence and the reason it has none; the overall."""
    row: dict[str, Any] = {"input_id": input_id}
    for d in DIMENSIONS:
        j = judgments.get(d) or Judgment(d, reason="not judged")
        s = SHORT[d]
        row[f"{s}_score"] = j.score
        row[f"{s}_evidence"] = j.evidence
        row[f"{s}_reason"] = "" if j.score is not None else (j.reason or "not judged")
    row["overall"] = overall([row[f"{SHORT[d]}_score"] for d in DIMENSIONS])
    missing = [SHORT[d].upper() for d in DIMENSIONS if row[f"{SHORT[d]}_score"] is None]
    row["overall_reason"] = "" if row["overall"] is not None else f"the overall needs all three ({', '.join(missing)} unscored)"
    return row


def unscored_row(input_id: str, reason: str) -> dict:
    return score_row(input_id, {d: Judgment(d, reason=reason) for d in DIMENSIONS})


def row_problems(row: dict) -> list[str]:
    """What is wrong with a stored ``vefx_scores`` row: a score off the 1-4 integers, an unscored
    dimension without a reason, an overall that is not the mean of the three."""
    out = []
    for d in DIMENSIONS:
        s = SHORT[d]
        v = row.get(f"{s}_score")
        if v is None:
            if not (row.get(f"{s}_reason") or "").strip():
                out.append(f"{s}: unscored without a reason")
        elif v != int(v) or not 1 <= v <= 4:
            out.append(f"{s}: score {v} is not an integer 1-4")
    want = overall([row.get(f"{SHORT[d]}_score") for d in DIMENSIONS])
    got = row.get("overall")
    if (want is None) != (got is None) or (want is not None and abs(want - cast(float, got)) > 1e-9):
        out.append(f"overall {got} is not the mean of IF, RQ and EE ({want})")
    return out


# ----------------------------------------------------------------------------------------------------
# Leaderboard per dimension, and the scores as evaluators for `argus align`
# ----------------------------------------------------------------------------------------------------

LEADERBOARD_SCHEMA = {"task": pl.String, "model": pl.String, "dimension": pl.String, "n_videos": pl.Int64,
                      "n_scored": pl.Int64, "mean": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64}
COLUMNS = {IF: "if_score", RQ: "rq_score", EE: "ee_score", OVERALL: "overall"}


def leaderboard(scores: pl.DataFrame) -> pl.DataFrame:
    """Per task, model and dimension (IF, RQ, EE, overall): videos, how many are scored, the mean on
    1-4 and its bootstrap 95% interval; sorted by task, dimension and mean (best first)."""
    rows = []
    if scores.height:
        for (task, model), g in scores.group_by(["task", "model"], maintain_order=True):
            for dim, col in COLUMNS.items():
                vals = g[col].drop_nulls().cast(pl.Float64).to_numpy()
                lo, hi = bootstrap_ci(vals)
                rows.append({"task": task, "model": model, "dimension": dim, "n_videos": g.height,
                             "n_scored": len(vals), "mean": float(np.mean(vals)) if len(vals) else None,
                             "ci_low": lo if len(vals) else None, "ci_high": hi if len(vals) else None})
    df = pl.DataFrame(rows, schema=LEADERBOARD_SCHEMA, orient="row")
    order = pl.col("dimension").replace_strict({d: k for k, d in enumerate(COLUMNS)}, return_dtype=pl.Int64)
    return (df.with_columns(order.alias("_order"))
            .sort(["task", "_order", "mean", "model"], descending=[False, False, True, False], nulls_last=True)
            .drop("_order"))


def format_leaderboard(lb: pl.DataFrame) -> str:
    """One block per task and dimension: models by mean score (1-4), interval and coverage."""
    if lb.height == 0:
        return "no vefx_scores stored"
    out = []
    for (task, dim), g in lb.group_by(["task", "dimension"], maintain_order=True):
        out.append(f"{task} {dim} (1-4)")
        for r in g.iter_rows(named=True):
            mean = "   -  " if r["mean"] is None else f"{r['mean']:.3f}"
            ci = "" if r["mean"] is None else f"  [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
            out.append(f"  {r['model']:<24} {mean}{ci}  ({r['n_scored']}/{r['n_videos']} scored)")
    return "\n".join(out)


def evaluator_scores(vefx_scores: pl.DataFrame) -> pl.DataFrame:
    """``vefx_scores`` as evaluator scores for alignment: ``input_id, model, evaluator, dimension, score``
    (evaluators ``vefx_if``, ``vefx_rq``, ``vefx_ee``, ``vefx_overall``, each compared with the human
    dimension of the same meaning; their scale :data:`RANGES`)."""
    parts = []
    for name, dim in EVALUATORS.items():
        col = COLUMNS[dim]
        if col not in vefx_scores.columns:
            raise ValueError(f"vefx_scores has no {col!r} column (it has {vefx_scores.columns})")
        parts.append(vefx_scores.select(pl.col("input_id").cast(pl.String), pl.col("model").cast(pl.String),
                                        pl.lit(name).alias("evaluator"), pl.lit(dim).alias("dimension"),
                                        pl.col(col).cast(pl.Float64).alias("score")))
    return pl.concat(parts).filter(pl.col("score").is_not_null())


def human_overall(averaged: pl.DataFrame) -> pl.DataFrame:
    """The card's human overall: "the arithmetic mean of IF, RQ, and EE scores, not a separately
    annotated dimension", per video (videos missing one get none). An overall the ratings annotate
    themselves is kept apart as :data:`OVERALL_ANNOTATED`, compared like any other dimension and never
    taken for the card's. ``averaged``: one row per video and dimension (``input_id, model,
    dimension, score``, raters averaged)."""
    averaged = averaged.with_columns(pl.when(pl.col("dimension") == OVERALL).then(pl.lit(OVERALL_ANNOTATED))
                                     .otherwise(pl.col("dimension")).alias("dimension"))
    dims = set(averaged["dimension"].unique().to_list()) if averaged.height else set()
    if not set(DIMENSIONS) <= dims:
        return averaged
    three = averaged.filter(pl.col("dimension").is_in(list(DIMENSIONS)))
    mean = (three.group_by("input_id", "model").agg(pl.col("score").mean(), pl.len().alias("_n"),
                                                    *([pl.col("n_ratings").min()] if "n_ratings" in three.columns else []))
            .filter(pl.col("_n") == 3).drop("_n").with_columns(pl.lit(OVERALL).alias("dimension")))
    return pl.concat([averaged, mean.select(averaged.columns)], how="vertical_relaxed")

