"""FIRM-Video's check-before-score protocol (seed ``001_a78e89d3e52e635c.txt``, §3.2, §3.3, Appendix 1).

Three dimensions, each rated 1-5 from verified checklist decisions rather than from an impression:

- **Instruction Following (IF).** A text planner turns the prompt into atomic yes/no requirements with
  importance ``m ∈ {1..5}``, requirements about what is heard left out (the planner is told, and
  :mod:`~argus_dagster.protocols.firm.audio` checks what it returns; ``firm_checklists`` keeps each one
  left out with its reason). The checklist is output-blind: made once per input,
  frozen with a content hash (like rubrics) and shared by every candidate of the input. A verifier
  answers every requirement from the video's ordered frames with short visual evidence; an
  unverifiable requirement counts as unsatisfied and keeps its weight (the seed's conservative
  reading). ``s_IF = Σ w_i z_i`` with ``w_i = m_i / Σ m``, rounded to 4 places, rated with the
  thresholds 0.35 / 0.70 / 0.85 / 1.00 (a 5 needs every requirement met). The weights are exact, and
  ``firm_checklists`` stores them as computed (float64), so ``if_score`` recomputes from the stored
  rows (:func:`if_score_from_weights`). The seed's two-decimal serialization
  (:func:`serialized_weights`) is not what scores: it moves ratings (``m = [1, 2, 5, 5]`` with the
  importance-2 item unmet is 11/13 = 0.8462, rating 3, but 0.85, rating 4, from two-decimal weights).
- **World Coherence (WC).** A grounding model describes the video *without the prompt* (scene
  summary, entities, actions, importance per target). A text planner writes verification questions
  per target (entities: temporal consistency and structure; actions: motion quality and physical
  plausibility), using the prompt only to tell intended fantasy or style from violations; targets
  left without questions are asked for again once. A verifier that sees neither the prompt nor the
  importance answers "yes" for a violation. ``c_t = 1 − violations / questions`` per target,
  ``α(m) = 1.0 / 1.5 / 2.5 / 3.5 / 5.0``, ``s_WC = Σ α c / Σ α`` rounded to 4 places, rated with
  0.20 / 0.58 / 0.78 / 0.89. Only verified decisions aggregate (the seed's abstract and §6): an
  "unverifiable" answer leaves its question out of its target's ``c_t``, a target without a verified
  question leaves the sum, and a video without any is unscored with the reason (:func:`score_wc`).
  ``firm_scores`` counts the unverifiable answers of both dimensions.
- **Perceptual Quality (PQ).** A generic defect checklist (:data:`PQ_CHECKLIST`); the VLM answers each
  defect, writes the rationale and the 1-5 rating itself (as the seed's evaluator does), the prompt
  only to tell intended style from defect. Without a VLM, :func:`pq_offline` rates the defects the
  CPU tools measure (blur, noise, exposure, compression, flicker, colour instability, frozen video)
  and says which it could not; IF and WC then stay unscored with the reason
  (:func:`unscored_offline`), as criteria without measurable evidence do in the VideoArgus path.

Rationales (:func:`if_rationale`, :func:`wc_rationale`) are written from the verified decisions after
the score is fixed: a template verbalizes them, so no rationale can move a score. With
``word_rationales=True`` the model rewords the decisions (the seed's LLM step,
:meth:`FirmEvaluator.reword`): it never sees the score, a wording that states one is refused, and the
score and rating stay as computed. :func:`export_records` makes §3.3's instances of one video
as it is scored (frame references; the asset counts the videos it leaves out); the training data a
trainer loads (frames as image files, the condition media, prose reasoning) is written from the
stored tables by :mod:`~argus_dagster.protocols.firm.export`.

Every VLM call goes through :func:`~argus_dagster.vlm.protocol.chat_json` with a strict parser (a malformed
answer is shown back and asked again, at most ``parse_retries`` times) and every prompt carries a
version string that enters the cache keys, beside the client's backend and model, the video's digest,
the condition media's digests and the frame sampling (``media.SAMPLING_ID``). A failed call never
raises out of the per-video functions: the dimension is unscored and the row says why.

**Other tasks.** The definitions are the seed's for T2V. What carries over, and what is done here:
TI2V and TS2V: IF's planner and verifier also receive the condition images (first frame, subject
images) as labelled references (``references``), so requirements such as "starts from the given
frame" or "keeps the subject's identity" are planned and verified; TV2V and TSV2V: the prompt is an
edit instruction, the planner sees the source video's frames and plans the edit's requirements
(including preservation of what the instruction leaves alone), and the verifier sees source and
output frames, labelled. WC and PQ judge the output alone and carry over unchanged (grounding stays
prompt-blind and condition-blind). The thresholds and α are the seed's, calibrated on T2V; they are
used as they are for every task.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Sequence

import polars as pl

from argus_dagster.protocols.firm.audio import audio_reason
from argus_dagster.infra.cache import ContentCache
from argus_dagster.infra.identities import FirmCallIdentity, record_key, vlm_call
from argus_dagster.infra.media import SAMPLING_ID
from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.parsing import extract_json, scored_object
from argus_dagster.vlm.protocol import chat_json
from argus_dagster.vlm.reply import ParseError, VlmError

# ----------------------------------------------------------------------------------------------------
# Formulas (Appendix 1)
# ----------------------------------------------------------------------------------------------------

IF, WC, PQ = "instruction_following", "world_coherence", "perceptual_quality"
DIMENSIONS = (IF, WC, PQ)
SHORT = {IF: "if", WC: "wc", PQ: "pq"}
IF_THRESHOLDS = (0.35, 0.70, 0.85, 1.00)
WC_THRESHOLDS = (0.20, 0.58, 0.78, 0.89)
ALPHA = {1: 1.0, 2: 1.5, 3: 2.5, 4: 3.5, 5: 5.0}


class ChecklistError(ValueError):
    """A checklist, verdict list or score input that breaks the protocol's rules (the message says which)."""


def _importance(m: Any, where: str) -> int:
    if isinstance(m, bool) or not isinstance(m, (int, float)) or m != int(m) or not 1 <= int(m) <= 5:
        raise ChecklistError(f"{where}: importance {m!r} is not an integer 1-5 (fix: give each item 1..5)")
    return int(m)


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
    ms = [_importance(m, f"requirement {i + 1}") for i, m in enumerate(importances)]
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
        a = ALPHA[_importance(m, f"target {i + 1}")]
        num += a * clean_ratio(violations)
        den += a
    if den == 0.0:
        raise ChecklistError("a WC checklist needs at least one target")
    return round(num / den, 4)


# ----------------------------------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChecklistItem:
    """One yes/no question. IF: ``target`` is empty and ``aspect`` is the requirement's kind; WC:
    ``target`` names the grounded entity or action and ``aspect`` what the question checks."""

    id: str
    question: str
    importance: int
    target: str = ""
    aspect: str = ""


@dataclass(frozen=True)
class DroppedItem:
    """A planned item left out of the checklist, and why (``audio: ...``, ``duplicate of r2``, ``no
    questions``). ``importance`` is the planner's, or None where it gave none."""

    question: str
    importance: int | None
    reason: str

    @classmethod
    def from_json(cls, data: Any) -> "DroppedItem":
        if isinstance(data, str):  # "reason: question", as checklists cached before this record kept it
            reason, _, question = data.partition(": ")
            return cls(question or reason, None, reason if question else "")
        return cls(data["question"], data.get("importance"), data["reason"])


@dataclass(frozen=True)
class Checklist:
    """A frozen checklist. Its identity is :attr:`content_hash` (items only); ``maker`` says who made
    it (backend, model, prompt version) and ``dropped`` what the planner gave that was left out; neither
    is part of the identity."""

    dimension: str
    items: tuple[ChecklistItem, ...]
    maker: dict = field(default_factory=dict, compare=False)
    dropped: tuple[DroppedItem, ...] = field(default=(), compare=False)

    @property
    def content_hash(self) -> str:
        body = {"dimension": self.dimension, "items": [asdict(i) for i in self.items]}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def to_json(self) -> dict:
        return {"dimension": self.dimension, "items": [asdict(i) for i in self.items], "maker": dict(self.maker),
                "dropped": [asdict(d) for d in self.dropped], "content_hash": self.content_hash}

    @classmethod
    def from_json(cls, data: dict) -> "Checklist":
        items = tuple(ChecklistItem(**i) for i in data["items"])
        dropped = tuple(DroppedItem.from_json(d) for d in data.get("dropped") or ())
        c = cls(data["dimension"], items, dict(data.get("maker") or {}), dropped)
        if data.get("content_hash") not in (None, c.content_hash):
            raise ChecklistError("stored checklist: content_hash does not match its items (fix: delete the entry)")
        return c


@dataclass(frozen=True)
class Verdict:
    """One item's answer. IF: ``yes`` = satisfied; WC: ``yes`` = violation. ``evidence`` is the
    verifier's short visual description (or why there is no usable answer)."""

    item_id: str
    yes: bool
    evidence: str
    verifiable: bool = True


@dataclass
class DimensionResult:
    """One video on one dimension: score (IF, WC), rating, rationale, or the reason it has none."""

    dimension: str
    score: float | None = None
    rating: int | None = None
    rationale: str = ""
    reason: str = ""  # why unscored
    verdicts: list[Verdict] = field(default_factory=list)
    checklist_hash: str = ""
    detail: dict = field(default_factory=dict)  # WC grounding, PQ defects

    @property
    def scored(self) -> bool:
        return self.rating is not None


# ----------------------------------------------------------------------------------------------------
# Parsing (strict: anything off raises ParseError, which chat_json shows back and asks again)
# ----------------------------------------------------------------------------------------------------

def _obj(text: str, key: str) -> Any:
    data = extract_json(text)
    if not isinstance(data, dict) or key not in data:
        raise ParseError(f'the answer is not a JSON object with a "{key}" field')
    return data[key]


def _int_importance(raw: Any, where: str) -> int:
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw.strip())
    try:
        return _importance(raw, where)
    except ChecklistError as exc:
        raise ParseError(str(exc)) from None


_TEXT_CHARS = 2000  # an answer's text field as stored and shown (a server may ignore max_tokens)


def _text(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ParseError(f"{where}: expected a non-empty string, got {repr(raw)[:80]}")
    text = " ".join(raw.split())
    return text if len(text) <= _TEXT_CHARS else text[:_TEXT_CHARS] + f" ...(cut at {_TEXT_CHARS} characters)"


def parse_if_plan(text: str) -> tuple[list[ChecklistItem], list[DroppedItem]]:
    """``{"requirements": [{"question", "importance", "aspect"?}]}`` → items and what was left out:
    requirements about what is heard (:func:`~argus_dagster.protocols.firm.audio.audio_reason`, the
    safety net behind the planner's instruction) and duplicates, each with its reason."""
    reqs = _obj(text, "requirements")
    if not isinstance(reqs, list) or not reqs:
        raise ParseError('"requirements" must be a non-empty list')
    items: list[ChecklistItem] = []
    dropped: list[DroppedItem] = []
    seen: dict[str, str] = {}
    for k, r in enumerate(reqs, start=1):
        if not isinstance(r, dict):
            raise ParseError(f"requirement {k} is not an object")
        q = _text(r.get("question"), f"requirement {k} question")
        m = _int_importance(r.get("importance"), f"requirement {k}")
        heard = audio_reason(q)
        if heard:
            dropped.append(DroppedItem(q, m, f"audio: {heard}"))
            continue
        if q.lower() in seen:
            dropped.append(DroppedItem(q, m, f"duplicate of {seen[q.lower()]}"))
            continue
        aspect = r.get("aspect") if isinstance(r.get("aspect"), str) else ""
        items.append(ChecklistItem(f"r{len(items) + 1}", q, m, "", aspect.strip()))
        seen[q.lower()] = items[-1].id
    if not items:
        raise ParseError("no visual requirement left after leaving out the audio ones: list what is seen")
    return items, dropped


def parse_verdicts(text: str, ids: Sequence[str], yes_means: str) -> list[Verdict]:
    """``{"answers": [{"id", "answer": "yes"|"no"|"unverifiable", "evidence"}]}`` with every id once.

    ``unverifiable`` (or ``unknown``) is kept as not-verifiable; the caller decides what it counts as.
    """
    answers = _obj(text, "answers")
    if not isinstance(answers, list):
        raise ParseError('"answers" must be a list')
    wanted = set(ids)
    got: dict[str, Verdict] = {}
    for k, a in enumerate(answers, start=1):
        if not isinstance(a, dict):
            raise ParseError(f"answer {k} is not an object")
        iid = str(a.get("id", "")).strip()
        if iid not in wanted:
            raise ParseError(f"answer {k}: id {iid!r} is not one of the questions ({', '.join(ids)})")
        raw = str(a.get("answer", "")).strip().lower()
        if raw not in ("yes", "no", "unverifiable", "unknown"):
            raise ParseError(f'answer for {iid}: "answer" must be "yes" or "no" ({yes_means}), got {raw!r}')
        evidence = " ".join(str(a.get("evidence") or "").split())
        got[iid] = Verdict(iid, raw == "yes", evidence, verifiable=raw in ("yes", "no"))
    missing = [i for i in ids if i not in got]
    if missing:
        raise ParseError(f"no answer for {', '.join(missing)}: answer every question")
    return [got[i] for i in ids]


def parse_grounding(text: str) -> dict:
    """``{"scene_summary", "entities": [{"name", "importance"}], "actions": [...]}``."""
    data = extract_json(text)
    if not isinstance(data, dict):
        raise ParseError("the answer is not a JSON object")
    summary = _text(data.get("scene_summary"), "scene_summary")
    targets = []
    for kind in ("entities", "actions"):
        lst = data.get(kind)
        if not isinstance(lst, list):
            raise ParseError(f'"{kind}" must be a list')
        for k, t in enumerate(lst, start=1):
            if not isinstance(t, dict):
                raise ParseError(f"{kind} {k} is not an object")
            targets.append({"kind": "entity" if kind == "entities" else "action",
                            "name": _text(t.get("name"), f"{kind} {k} name"),
                            "importance": _int_importance(t.get("importance"), f"{kind} {k}")})
    if not targets:
        raise ParseError("no entity and no action grounded: list what the video shows")
    names = [t["name"].lower() for t in targets]
    if len(set(names)) != len(names):
        raise ParseError("target names must be unique")
    return {"scene_summary": summary, "targets": targets}


def parse_wc_questions(text: str, target_names: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """``{"targets": [{"target", "questions": [{"question", "aspect"}]}]}`` → questions per known target
    (unknown targets are an error; missing ones are the caller's coverage check)."""
    lst = _obj(text, "targets")
    if not isinstance(lst, list):
        raise ParseError('"targets" must be a list')
    known = {n.lower(): n for n in target_names}
    out: dict[str, list[tuple[str, str]]] = {}
    for k, t in enumerate(lst, start=1):
        if not isinstance(t, dict):
            raise ParseError(f"target {k} is not an object")
        name = _text(t.get("target"), f"target {k}")
        if name.lower() not in known:
            raise ParseError(f"target {name!r} is not one of the grounded targets ({', '.join(target_names)})")
        qs = t.get("questions")
        if not isinstance(qs, list):
            raise ParseError(f"target {name!r}: \"questions\" must be a list")
        out[known[name.lower()]] = [(_text(q.get("question") if isinstance(q, dict) else q, f"{name} question"),
                                     (q.get("aspect") or "") if isinstance(q, dict) else "") for q in qs]
    return out


# A stated score: "score of 4", "rating: 2", "rated 5", "0.85" (a checklist score). Counts such as
# "3 out of 5 requirements" are decisions, not scores, and pass.
_SCORE_WORDS = re.compile(r"\b((score|rating)\s*(of|is|:|=)?\s*[0-5](\.\d+)?\b|rated\s+[1-5]|0\.\d{2,4})",
                          re.IGNORECASE)


def parse_rationale(text: str) -> str:
    """``{"rationale": "..."}``; a rationale that states a score is refused (the score is fixed elsewhere)."""
    out = _text(_obj(text, "rationale"), "rationale")
    if _SCORE_WORDS.search(out):
        raise ParseError("the rationale states a score or rating: verbalize the decisions only")
    return out


def parse_pq(text: str) -> dict:
    """``{"defects": [{"id", "present": "yes"|"no", "evidence"}], "rationale", "score": 1-5}``."""
    data, score = scored_object(text, 5)
    rationale = _text(data.get("rationale"), "rationale")
    defects = data.get("defects")
    if not isinstance(defects, list):
        raise ParseError('"defects" must be a list')
    known = {d for d, _ in PQ_CHECKLIST}
    found = []
    for k, d in enumerate(defects, start=1):
        if not isinstance(d, dict) or d.get("id") not in known:
            raise ParseError(f"defect {k}: id must be one of {sorted(known)}")
        present = str(d.get("present", "")).strip().lower()
        if present not in ("yes", "no"):
            raise ParseError(f'defect {d["id"]}: "present" must be "yes" or "no"')
        evidence = " ".join(str(d.get("evidence") or "").split())
        found.append({"id": d["id"], "present": present == "yes", "evidence": evidence})
    return {"score": score, "rationale": rationale, "defects": found}


# ----------------------------------------------------------------------------------------------------
# Prompts (each has a version that enters every cache key)
# ----------------------------------------------------------------------------------------------------

IF_PLAN_VERSION = "firm-if-plan-2"
IF_VERIFY_VERSION = "firm-if-verify-1"
WC_GROUND_VERSION = "firm-wc-ground-1"
WC_QUESTIONS_VERSION = "firm-wc-questions-1"
WC_VERIFY_VERSION = "firm-wc-verify-2"
PQ_VERSION = "firm-pq-1"
RATIONALE_VERSION = "firm-rationale-1"
PROMPT_VERSIONS = {"if_plan": IF_PLAN_VERSION, "if_verify": IF_VERIFY_VERSION, "wc_ground": WC_GROUND_VERSION,
                   "wc_questions": WC_QUESTIONS_VERSION, "wc_verify": WC_VERIFY_VERSION, "pq": PQ_VERSION,
                   "rationale": RATIONALE_VERSION}

IF_PLAN_SYSTEM = (
    "You decompose a video-generation prompt into atomic requirements. List every visual element the "
    "prompt asks for (subjects, attributes, counts, actions, scene, style, camera or viewpoint, temporal "
    "order of events) as yes/no questions, one observable requirement per question, each with an "
    "importance from 1 (minor detail) to 5 (essential). The video is judged from its frames, without sound: "
    "leave out requirements about what is heard (a sound or noise, loudness or silence, a voice, the words "
    "spoken or their topic, music or a song as heard, a tune), and keep what is seen, also when it relates "
    "to sound (a musician or an instrument being played, a person speaking, singing or giving a speech, a "
    "dog barking, a loudspeaker, a sign whose text names a sound). Of an act qualified by how it sounds "
    "(\"barks loudly\"), ask only the act that is seen (\"Is the dog barking?\"). Answer with one JSON "
    "object and nothing else: "
    '{"requirements": [{"question": "<yes/no question>", "importance": <1-5>, "aspect": "<subject|attribute|'
    'action|scene|style|camera|temporal|count>"}]}'
)
IF_VERIFY_SYSTEM = (
    "You verify requirements of a video-generation prompt against the generated video, given as frames "
    "in temporal order. For each question answer \"yes\" only when the frames show the requirement is met, "
    "\"no\" when they show it is not, \"unverifiable\" when the frames cannot tell; give brief visual "
    "evidence (what you see, and in which frames). Answer with one JSON object and nothing else: "
    '{"answers": [{"id": "<question id>", "answer": "yes|no|unverifiable", "evidence": "<short>"}]}'
)
WC_GROUND_SYSTEM = (
    "You ground a generated video: describe what it shows, from its frames in temporal order, without "
    "judging it. Give a short scene summary, the entities (people, animals, objects, structures) and the "
    "actions or interactions, each with an importance from 1 (peripheral) to 5 (central to the video). "
    "Include peripheral entities and brief actions. Answer with one JSON object and nothing else: "
    '{"scene_summary": "<2-3 sentences>", "entities": [{"name": "<unique name>", "importance": <1-5>}], '
    '"actions": [{"name": "<unique name>", "importance": <1-5>}]}'
)
WC_QUESTIONS_SYSTEM = (
    "You write verification questions that detect violations of common sense and physics in a generated "
    "video. For each target write 2-4 yes/no questions where \"yes\" means a violation was observed. For "
    "an entity ask about temporal consistency (identity, shape, colour, count stay the same; no sudden "
    "appearance or disappearance) and structure (no deformed, fused or missing parts). For an action ask "
    "about motion quality (smooth, continuous, natural) and physical plausibility (contact, gravity, "
    "cause and effect). The generation prompt is given only so that intended fantasy, stylization or "
    "unusual motion it asks for is not phrased as a violation. Answer with one JSON object and nothing "
    'else: {"targets": [{"target": "<target name as given>", "questions": [{"question": "<yes = violation>", '
    '"aspect": "<temporal_consistency|structure|motion_quality|physical_plausibility>"}]}]}'
)
WC_VERIFY_SYSTEM = (
    "You inspect a video for violations of common sense and physics, from its frames in temporal order. "
    "For each question answer \"yes\" when the frames show the violation it asks about, \"no\" when the "
    "thing is seen and no violation is observed, and \"unverifiable\" when the frames cannot tell (the thing is not "
    "visible, or too small or brief to judge), with brief visual evidence. Answer with one JSON object and "
    'nothing else: {"answers": [{"id": "<question id>", "answer": "yes|no|unverifiable", "evidence": "<short>"}]}'
)
PQ_SYSTEM = (
    "You inspect a video for perceptual defects, from its frames in temporal order. Go through the "
    "checklist, say for each defect whether it is present, then write a rationale that follows the "
    "checklist and rate the perceptual quality from 1 (severe defects) to 5 (no visible defect). The "
    "generation prompt is context only: a look it asks for (stylized, dark, grainy, unusual camera) is "
    "not a defect, and how well the video follows it is not judged here. Answer with one JSON object and "
    'nothing else: {"defects": [{"id": "<defect id>", "present": "yes|no", "evidence": "<short>"}], '
    '"rationale": "<checklist-based rationale>", "score": <1-5>}'
)

RATIONALE_SYSTEM = (
    "You turn the verified decisions of a video evaluation into a concise rationale. For instruction "
    "following, first summarize the requirements that are met, then explain the unmet or incorrectly "
    "fulfilled ones. For world coherence, start with a brief scene summary, then the major violations "
    "organized by target and aspect. Use only the decisions given; add nothing, and do not state a score. "
    'Answer with one JSON object and nothing else: {"rationale": "<3-6 sentences>"}'
)

PQ_CHECKLIST: tuple[tuple[str, str], ...] = (
    ("low_resolution", "low resolution or upscaling softness"),
    ("blur", "global or local blur, lack of sharpness"),
    ("noise", "noise or grain that is not a style"),
    ("exposure", "over- or under-exposure, clipped highlights or crushed shadows"),
    ("brightness_instability", "brightness changing from frame to frame"),
    ("color_instability", "colour shifts or unstable white balance over time"),
    ("flicker", "flicker or temporal jitter"),
    ("compression", "compression artifacts: blocking, banding, ringing"),
    ("distortion", "local warping, smearing, ghosting or other low-level distortion"),
    ("frozen", "a frozen or nearly static video where motion is expected"),
)

# The evaluation instructions of the seed's Appendix 4, one per dimension (the export's "instruction").
_FRAMES_LINE = ("The video is given as {n} frames uniformly sampled in temporal order (frame 1 = earliest, frame "
                "{n} = latest). Judge only from these {n} frames.")
_OUTPUT = ("FIRST give a brief reasoning, THEN give the score.\nYour output must be a valid JSON object and nothing "
           "else, in exactly the following format:\n{{\n\"reasoning\": \"<reasoning>\",\n\"score\": <score>\n}}\n"
           "DO NOT include anything before or after the JSON object.")
INSTRUCTIONS = {
    IF: ("You are an expert for evaluating how well an AI-generated video follows its text prompt.\n" + _FRAMES_LINE +
         "\nWe evaluate the dimension 'instruction_following': how accurately and completely the video follows the "
         "text prompt, including requested subjects, attributes, actions, scene, style, camera/viewpoint, and "
         "temporal event order.\nText prompt:\n{prompt}\nBased on the video content, the text prompt, and the "
         "dimension definition, please evaluate the video's instruction_following and give the score. The score "
         "must be an integer in the range of 1 - 5. " + _OUTPUT),
    PQ: ("You are an expert for evaluating the perceptual quality of AI-generated videos.\n" + _FRAMES_LINE +
         "\nWe evaluate the dimension 'visual_quality': the perceptual and technical quality of the rendered video, "
         "including resolution, overall and local clarity, sharpness or blurriness, brightness and color stability, "
         "flicker, compression artifacts, and low-level visual distortions that affect the viewing experience.\n"
         "Text prompt (context only):\n{prompt}\nThe text prompt is provided so that you can recognize intentional "
         "creative choices it requests (e.g. a stylized look, a non-realistic scene, an unusual camera) and NOT "
         "penalize them on this dimension. DO NOT judge how faithfully the video follows the prompt here - that is "
         "covered by a separate dimension.\nBased on the video content and the dimension definition, please "
         "evaluate the video's visual_quality and give the score. The score must be an integer in the range of "
         "1 - 5. " + _OUTPUT),
    WC: ("You are an expert for evaluating whether an AI-generated video is coherent with the real world.\n" +
         _FRAMES_LINE + "\nWe evaluate the dimension 'world_consistency': whether the video contains any violations "
         "of everyday knowledge, common sense, or basic physical laws, including temporal inconsistencies, "
         "unnatural or incoherent motion, physically implausible interactions, and structural abnormalities or "
         "deformities in objects or characters.\nText prompt (context only):\n{prompt}\nThe text prompt is "
         "provided so that you can recognize intentional creative choices it requests (e.g. a non-realistic scene "
         "or a deliberately fantastical setup) and NOT penalize them on this dimension. DO NOT judge how "
         "faithfully the video follows the prompt here - that is covered by a separate dimension.\nBased on the "
         "video content and the dimension definition, please evaluate the video's world_consistency and give the "
         "score. The score must be an integer in the range of 1 - 5. " + _OUTPUT),
}


def instruction(dimension: str, prompt: str, n_frames: int) -> str:
    """The seed's Appendix 4 evaluation instruction for ``dimension``, filled in."""
    return INSTRUCTIONS[dimension].format(n=n_frames, prompt=prompt)


# ----------------------------------------------------------------------------------------------------
# The protocol on a VLM
# ----------------------------------------------------------------------------------------------------


def _frame_parts(label: str, frames: Any) -> list[Any]:
    """``frames``: a :class:`~argus_dagster.infra.media.Frames` (timestamps shown) or a list of images."""
    if frames is None:
        return []
    images = frames.images() if hasattr(frames, "images") else list(frames)
    if not images:
        return []
    times = getattr(frames, "timestamps", None)
    when = f" (t = {', '.join(f'{t:.1f}s' for t in times)})" if times else ""
    return [f"[{label}] {len(images)} frames in temporal order, frame 1 = earliest{when}:", *images]


def _ref_parts(references: dict[str, Any] | None) -> list[Any]:
    parts: list[Any] = []
    for label, frames in (references or {}).items():
        parts += _frame_parts(label, frames)
    return parts


def _identity(client: Any, version: str) -> dict:
    return {"backend": client.backend, "model": client.model, "prompt_version": version}


ASK_MAX_TOKENS = 1500
RATIONALE_MAX_TOKENS = 600


def firm_call(step: str) -> tuple[str, str, int]:
    """``(prompt version, system text, max tokens)`` of one FIRM-Video call (read when asked, so the
    module's constants are the truth)."""
    return {"if_plan": (IF_PLAN_VERSION, IF_PLAN_SYSTEM, ASK_MAX_TOKENS),
            "if_verify": (IF_VERIFY_VERSION, IF_VERIFY_SYSTEM, ASK_MAX_TOKENS),
            "wc_ground": (WC_GROUND_VERSION, WC_GROUND_SYSTEM, ASK_MAX_TOKENS),
            "wc_questions": (WC_QUESTIONS_VERSION, WC_QUESTIONS_SYSTEM, ASK_MAX_TOKENS),
            "wc_verify": (WC_VERIFY_VERSION, WC_VERIFY_SYSTEM, ASK_MAX_TOKENS),
            "pq": (PQ_VERSION, PQ_SYSTEM, ASK_MAX_TOKENS),
            "rationale": (RATIONALE_VERSION, RATIONALE_SYSTEM, RATIONALE_MAX_TOKENS)}[step]


def _checklist_json(items: Sequence[ChecklistItem]) -> str:
    # Only id and question: the verifiers never see importance (nor, for WC, the target's weight).
    return json.dumps([{"id": i.id, "question": i.question} for i in items], indent=1)


class FirmEvaluator:
    """The FIRM-Video protocol on one client. ``cache`` (a :class:`ContentCache`, namespace ``firm``)
    makes every call content-addressed: a checklist planned once is reused by every video of the input
    and by every rerun, with no second planner call."""

    def __init__(self, client: Any, *, cache: ContentCache | None = None, stats: CallStats | None = None,
                 parse_retries: int = 2, word_rationales: bool = False):
        self.client = client
        self.cache = cache or ContentCache(None, "firm")
        self.stats = stats
        self.parse_retries = parse_retries
        self.word_rationales = word_rationales

    def call_identity(self, step: str, **inputs: Any) -> FirmCallIdentity:
        """What one call of the protocol depends on: which step, the request on this client (model,
        the step's prompt version and text, budget) and what the step is given (``inputs``)."""
        version, system, max_tokens = firm_call(step)
        return FirmCallIdentity(step=step, call=vlm_call(self.client, prompt_version=version, prompt=system,
                                                         max_tokens=max_tokens, thinking=None), inputs=inputs)

    def _ask(self, system: str, parts: list[Any], parse, max_tokens: int = ASK_MAX_TOKENS):
        msgs = [{"role": "system", "content": [system]}, {"role": "user", "content": parts}]
        value, _ = chat_json(self.client, msgs, parse, parse_retries=self.parse_retries, max_tokens=max_tokens,
                             stats=self.stats)
        return value

    # -- IF -------------------------------------------------------------------------------------------
    def plan_if(self, prompt: str, *, references: dict[str, Any] | None = None,
                reference_digests: dict[str, str] | None = None) -> Checklist:
        """The output-blind IF checklist of one input. Raises :class:`ParseError` / :class:`VlmError`
        (the caller records the input's reason); a stored checklist is returned without a call."""
        maker = _identity(self.client, IF_PLAN_VERSION)
        key = record_key(self.call_identity("if_plan", prompt=prompt, references=reference_digests or {}))

        def compute() -> dict:
            parts = [f"Prompt: {prompt}", *_ref_parts(references),
                     "Decompose the prompt into atomic visual requirements now."]
            items, dropped = self._ask(IF_PLAN_SYSTEM, parts, parse_if_plan)
            return Checklist(IF, tuple(items), maker, tuple(dropped)).to_json()

        data, _ = self.cache.get_or_compute(key, compute)
        return Checklist.from_json(data)

    def verify_if(self, checklist: Checklist, prompt: str, frames: Any, *, video_digest: str = "",
                  references: dict[str, Any] | None = None,
                  reference_digests: dict[str, str] | None = None) -> DimensionResult:
        res = DimensionResult(IF, checklist_hash=checklist.content_hash)
        key = record_key(self.call_identity("if_verify", checklist=checklist.content_hash, prompt=prompt,
                                            video=video_digest, references=reference_digests or {},
                                            sampling=SAMPLING_ID))
        ids = [i.id for i in checklist.items]

        def compute() -> list[dict]:
            parts = [f"Prompt: {prompt}", *_ref_parts(references), *_frame_parts("output_video", frames),
                     "Checklist:\n" + _checklist_json(checklist.items), "Answer every question now."]
            verdicts = self._ask(IF_VERIFY_SYSTEM, parts, lambda t: parse_verdicts(t, ids, "yes = satisfied"))
            return [asdict(v) for v in verdicts]

        try:
            raw, _ = self.cache.get_or_compute(key, compute) if video_digest else (compute(), False)
        except (ParseError, VlmError) as exc:
            res.reason = f"IF verifier: {exc}"
            return res
        return score_if(checklist, [Verdict(**v) for v in raw])

    # -- WC -------------------------------------------------------------------------------------------
    def ground_wc(self, frames: Any, *, video_digest: str = "") -> dict:
        """Scene summary and targets of the video, without the prompt."""
        key = record_key(self.call_identity("wc_ground", video=video_digest, sampling=SAMPLING_ID))

        def compute() -> dict:
            parts = [*_frame_parts("video", frames), "Ground this video now."]
            return self._ask(WC_GROUND_SYSTEM, parts, parse_grounding)

        return self.cache.get_or_compute(key, compute)[0] if video_digest else compute()

    def wc_checklist(self, grounding: dict, prompt: str) -> Checklist:
        """Verification questions per grounded target; targets left without questions are asked for
        once more (the seed's coverage check), and any still missing are recorded in ``dropped``."""
        maker = _identity(self.client, WC_QUESTIONS_VERSION)
        key = record_key(self.call_identity("wc_questions", grounding=grounding, prompt=prompt))

        def compute() -> dict:
            targets = grounding["targets"]
            names = [t["name"] for t in targets]
            questions: dict[str, list[tuple[str, str]]] = {}
            todo = targets
            for _ in range(2):
                listing = json.dumps([{"target": t["name"], "kind": t["kind"]} for t in todo], indent=1)
                parts = [f"Generation prompt (context only): {prompt}",
                         f"Scene summary: {grounding['scene_summary']}", "Targets:\n" + listing,
                         "Write the verification questions now."]
                got = self._ask(WC_QUESTIONS_SYSTEM, parts, lambda t: parse_wc_questions(t, names))
                questions.update({k: v for k, v in got.items() if v})
                todo = [t for t in targets if t["name"] not in questions]
                if not todo:
                    break
            items, n = [], 0
            for t in targets:
                for q, aspect in questions.get(t["name"], []):
                    n += 1
                    items.append(ChecklistItem(f"q{n}", q, t["importance"], t["name"], aspect))
            dropped = tuple(DroppedItem(t["name"], t["importance"], "no questions") for t in todo)
            if not items:
                raise ParseError("no verification question for any grounded target")
            return Checklist(WC, tuple(items), maker, dropped).to_json()

        data, _ = self.cache.get_or_compute(key, compute)
        return Checklist.from_json(data)

    def evaluate_wc(self, prompt: str, frames: Any, *, video_digest: str = "") -> DimensionResult:
        res = DimensionResult(WC)
        try:
            grounding = self.ground_wc(frames, video_digest=video_digest)
            checklist = self.wc_checklist(grounding, prompt)
        except (ParseError, VlmError) as exc:
            res.reason = f"WC checklist: {exc}"
            return res
        res.checklist_hash = checklist.content_hash
        ids = [i.id for i in checklist.items]
        key = record_key(self.call_identity("wc_verify", checklist=checklist.content_hash, video=video_digest,
                                            sampling=SAMPLING_ID))

        def compute() -> list[dict]:
            # Neither the prompt nor any importance reaches this verifier.
            parts = [*_frame_parts("video", frames), "Questions:\n" + _checklist_json(checklist.items),
                     "Answer every question now."]
            verdicts = self._ask(WC_VERIFY_SYSTEM, parts, lambda t: parse_verdicts(t, ids, "yes = violation"))
            return [asdict(v) for v in verdicts]

        try:
            raw, _ = self.cache.get_or_compute(key, compute) if video_digest else (compute(), False)
        except (ParseError, VlmError) as exc:
            res.reason = f"WC verifier: {exc}"
            return res
        out = score_wc(checklist, [Verdict(**v) for v in raw], grounding)
        # The video's own WC checklist, so that its score can be recomputed from stored rows.
        out.detail["items"] = [asdict(i) for i in checklist.items]
        return out

    # -- PQ -------------------------------------------------------------------------------------------
    def evaluate_pq(self, prompt: str, frames: Any, *, video_digest: str = "") -> DimensionResult:
        res = DimensionResult(PQ)
        key = record_key(self.call_identity("pq", prompt=prompt, video=video_digest, checklist=PQ_CHECKLIST,
                                            sampling=SAMPLING_ID))
        listing = json.dumps([{"id": d, "defect": text} for d, text in PQ_CHECKLIST], indent=1)

        def compute() -> dict:
            parts = [f"Generation prompt (context only): {prompt}", *_frame_parts("video", frames),
                     "Defect checklist:\n" + listing, "Inspect the video now."]
            return self._ask(PQ_SYSTEM, parts, parse_pq)

        try:
            out, _ = self.cache.get_or_compute(key, compute) if video_digest else (compute(), False)
        except (ParseError, VlmError) as exc:
            res.reason = f"PQ evaluator: {exc}"
            return res
        res.rating = out["score"]
        res.rationale = out["rationale"]  # the evaluator's own checklist-based rationale, used as is
        res.detail = {"defects": out["defects"], "source": "vlm"}
        return res

    # -- one video ------------------------------------------------------------------------------------
    def evaluate(self, prompt: str, frames: Any, checklist: Checklist | None, *, video_digest: str = "",
                 references: dict[str, Any] | None = None, reference_digests: dict[str, str] | None = None,
                 if_reason: str = "") -> dict[str, DimensionResult]:
        """All three dimensions of one video; ``checklist`` is the input's frozen IF checklist (None
        with ``if_reason`` when planning failed: IF is then unscored with that reason)."""
        if checklist is None:
            r_if = DimensionResult(IF, reason=if_reason or "no IF checklist for this input")
        else:
            r_if = self.verify_if(checklist, prompt, frames, video_digest=video_digest, references=references,
                                  reference_digests=reference_digests)
        out = {IF: r_if, WC: self.evaluate_wc(prompt, frames, video_digest=video_digest),
               PQ: self.evaluate_pq(prompt, frames, video_digest=video_digest)}
        if self.word_rationales:
            for d in (IF, WC):
                if out[d].scored:
                    self.reword(out[d])
        return out

    # -- rationales -----------------------------------------------------------------------------------
    def reword(self, result: DimensionResult) -> None:
        """Replace a scored IF/WC result's template rationale with the model's wording of the same
        decisions (seed §3.3). The model gets the decisions only, never the score or the rating, and the
        result's score and rating are not touched; a failed call keeps the template and says so."""
        template = result.rationale
        decisions = template.rsplit(" Importance-weighted", 1)[0]  # the decisions, without the numbers
        key = record_key(self.call_identity("rationale", dimension=result.dimension, decisions=decisions))

        def compute() -> str:
            parts = [f"Dimension: {result.dimension}", "Verified decisions:\n" + decisions,
                     "Write the rationale now."]
            return self._ask(RATIONALE_SYSTEM, parts, parse_rationale, max_tokens=RATIONALE_MAX_TOKENS)

        try:
            text, _ = self.cache.get_or_compute(key, compute)
        except (ParseError, VlmError) as exc:
            result.detail["rationale_source"] = f"template ({exc})"
            return
        result.rationale = text
        result.detail["rationale_source"] = "model"


# ----------------------------------------------------------------------------------------------------
# A task's inputs and a model's videos (what the assets call)
# ----------------------------------------------------------------------------------------------------


def plan_checklists(evaluator: FirmEvaluator, prompts: dict[str, str], *,
                    references: dict[str, tuple[dict[str, Any], dict[str, str]]] | None = None,
                    max_workers: int = 4, costs: dict[str, dict] | None = None
                    ) -> tuple[list[dict], dict[str, Checklist | str]]:
    """``firm_checklists`` rows and, per input, its checklist or the reason it has none. ``references``
    maps an input id to ``(condition frames by label, their digests)`` for TI2V/TS2V/TV2V/TSV2V.
    ``costs``, when given, receives each input's planner cost (:meth:`CallStats.costs`; zeros for a
    checklist from the cache)."""
    from argus_dagster.vlm.ledger import cost_ledger
    from argus_dagster.vlm.priorities import request_pool

    def one(iid: str) -> Checklist | str:
        refs, digests = (references or {}).get(iid, (None, None))
        with cost_ledger() as spent:
            try:
                return evaluator.plan_if(prompts[iid], references=refs, reference_digests=digests)
            except (ParseError, VlmError) as exc:
                return f"IF planner: {exc}"
            finally:
                if costs is not None:
                    costs[iid] = spent.costs()

    with request_pool(max(1, max_workers)) as pool:
        out = dict(zip(prompts, pool.map(one, list(prompts))))
    rows = [r for iid, c in out.items() if isinstance(c, Checklist) for r in checklist_rows(iid, c)]
    return rows, out


@dataclass(frozen=True)
class VideoJob:
    """One candidate video to evaluate. ``load_frames`` returns its sampled frames (a
    :class:`~argus_dagster.infra.media.Frames`) and may raise: the row then records why."""

    input_id: str
    prompt: str
    video_uri: str
    video_digest: str
    load_frames: Callable[[], Any]
    references: dict[str, Any] | None = None
    reference_digests: dict[str, str] | None = None


@dataclass
class FirmTables:
    verdicts: list[dict] = field(default_factory=list)
    scores: list[dict] = field(default_factory=list)
    export: list[dict] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # videos without export records, and why
    results: list[dict[str, DimensionResult]] = field(default_factory=list)  # per job, in job order


def evaluate_videos(evaluator: FirmEvaluator | None, jobs: Sequence[VideoJob],
                    checklists: dict[str, Checklist | str], *, video_prefix: str = "", max_workers: int = 4,
                    offline_records: Callable[[VideoJob], tuple[list[dict], int | None, int | None]] | None = None
                    ) -> FirmTables:
    """Every job's verdict rows, score row and export records; a video that fails (its frames, a call)
    gets its reasons in the row and the rest proceeds. ``evaluator=None`` is the offline path:
    ``offline_records(job)`` gives the CPU tool records and the video's width and height. Each score
    row carries what the video's calls cost (:meth:`CallStats.costs`: the ledger's FIRM stage)."""
    from argus_dagster.vlm.ledger import cost_ledger
    from argus_dagster.vlm.priorities import request_pool

    def costed(job: VideoJob) -> tuple[VideoJob, dict[str, DimensionResult], list[str], dict]:
        with cost_ledger() as spent:
            done = one(job)
        return (*done, spent.costs())

    def one(job: VideoJob) -> tuple[VideoJob, dict[str, DimensionResult], list[str]]:
        try:
            frames = job.load_frames()
        except Exception as exc:  # a video that cannot be read: every dimension says so
            why = f"video {job.video_uri}: {exc}"
            return job, {d: DimensionResult(d, reason=why) for d in DIMENSIONS}, []
        refs = frame_refs(job.video_uri, frames)
        if evaluator is None:
            if offline_records is None:
                no_pq = DimensionResult(PQ, reason="PQ offline: no CPU tool records")
                return job, {**unscored_offline(), PQ: no_pq}, refs
            recs, w, h = offline_records(job)
            return job, evaluate_offline(recs, width=w, height=h), refs
        cl = checklists.get(job.input_id, "no IF checklist for this input")
        res = evaluator.evaluate(job.prompt, frames, cl if isinstance(cl, Checklist) else None,
                                 video_digest=job.video_digest, references=job.references,
                                 reference_digests=job.reference_digests,
                                 if_reason=cl if isinstance(cl, str) else "")
        return job, res, refs

    out = FirmTables()
    with request_pool(max(1, max_workers)) as pool:
        done = list(pool.map(costed, jobs))
    for job, res, refs, spent in done:
        out.results.append(res)
        out.verdicts += verdict_rows(job.input_id, res)
        out.scores.append({**score_row(job.input_id, res), "frames": refs, **spent})
        recs, why = export_records(f"{video_prefix}{job.input_id}", job.prompt, refs, res)
        out.export += recs
        if why:
            out.left_out.append(why)
    return out


# ----------------------------------------------------------------------------------------------------
# Scores from verdicts, and rationales that verbalize them
# ----------------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------------
# Offline (no VLM): PQ from the CPU tools, IF and WC unscored
# ----------------------------------------------------------------------------------------------------

# Documented calibration of the measurable defects (numbers as FlickerProbe, MotionProbe and
# ClassicalAesthetic report them; the quality components are ClassicalAesthetic's native-resolution
# measures on 0-1, where clean real clips sit near 1).
PQ_OFFLINE_LIMITS = {
    "low_resolution": "shorter side < 360 px",
    "blur": "sharpness component < 0.35",
    "noise": "noise component < 0.35",
    "exposure": "exposure component < 0.35",
    "compression": "blockiness component < 0.35",
    "brightness_instability": "luma jitter > 3.0 levels",
    "color_instability": "colour jitter > 3.0 levels",
    "flicker": "share of flagged frames > 0.10",
    "frozen": "static share of steps > 0.90, over 60% repeated frames, or a freeze of 1 s or more",
}
OFFLINE_UNMEASURED = ("distortion",)
PQ_OFFLINE_VERSION = "firm-pq-offline-2"


# A native-resolution quality component (0-1, 1 = a clean real clip) under this is a defect.
DEFECT_BELOW = 0.35


def pq_offline(records: Iterable[dict], *, width: int | None = None, height: int | None = None) -> DimensionResult:
    """PQ rating from CPU tool records (``flicker_probe``, ``motion_probe``, ``aesthetic``): 5 minus one
    per measured defect, at least 1. Defects no record measures are named as not measured; with no
    usable record at all the dimension stays unscored."""
    recs = {r.get("tool"): r for r in records if r.get("ok")}
    found: dict[str, str] = {}
    measured: list[str] = []
    if width and height:
        measured.append("low_resolution")
        if min(width, height) < 360:
            found["low_resolution"] = f"{width}x{height}"
    a = recs.get("aesthetic")
    c = (a or {}).get("components") or {}
    if c:  # the native-resolution measures, each on 0-1 (1 = clean): a defect below DEFECT_BELOW
        for defect, comp in (("blur", "sharpness"), ("noise", "noise_sigma"), ("exposure", "exposure"),
                             ("compression", "blockiness")):
            if comp in c:
                measured.append(defect)
                if c[comp] < DEFECT_BELOW:
                    found[defect] = f"{comp} {a.get(comp, c[comp]):.2f} ({c[comp]:.2f} of clean)"
    f = recs.get("flicker_probe")
    if f:
        measured += ["brightness_instability", "color_instability", "flicker"]
        if f["jitter"] > 3.0:
            found["brightness_instability"] = f"luma jitter {f['jitter']:.2f}"
        if f.get("color_jitter", 0.0) > 3.0:
            found["color_instability"] = f"colour jitter {f['color_jitter']:.2f}"
        if f["flagged_fraction"] > 0.10:
            found["flicker"] = f"{f['flagged_fraction']:.0%} of frames flagged"
    m = recs.get("motion_probe")
    if m:
        measured.append("frozen")
        freeze, copies = m.get("longest_freeze_s", 0.0), m.get("duplicate_fraction", 0.0)
        if m.get("static_fraction", 0.0) > 0.90 or copies > 0.6 or freeze >= 1.0:
            found["frozen"] = (f"static share {m.get('static_fraction', 0.0):.2f}, {copies:.0%} repeated frames, "
                               f"longest freeze {freeze:.1f}s")
    unmeasured = [d for d, _ in PQ_CHECKLIST if d not in measured]
    if not measured:
        return DimensionResult(PQ, reason="PQ offline: no usable CPU tool record (flicker_probe, motion_probe, "
                               "aesthetic) for this video", detail={"source": PQ_OFFLINE_VERSION})
    r = max(1, 5 - len(found))
    text = (("Measured defects: " + "; ".join(f"{d.replace('_', ' ')} ({why})" for d, why in found.items()) + ".")
            if found else "No measured defect.")
    text += f" Checked without a VLM: {', '.join(measured)}. Not measured: {', '.join(unmeasured)}. Rating {r}/5."
    defects = [{"id": d, "present": d in found, "evidence": found.get(d, "")} for d in measured]
    return DimensionResult(PQ, None, r, text, "", [], "", {"defects": defects, "not_measured": unmeasured,
                                                          "source": PQ_OFFLINE_VERSION})


def unscored_offline() -> dict[str, DimensionResult]:
    reason = "unscored: {} needs a VLM (checklist verification from frames); none is configured"
    return {IF: DimensionResult(IF, reason=reason.format("instruction following")),
            WC: DimensionResult(WC, reason=reason.format("world coherence"))}


def evaluate_offline(records: Iterable[dict], *, width: int | None = None,
                     height: int | None = None) -> dict[str, DimensionResult]:
    """All three dimensions of one video without a VLM: PQ from the CPU tool records, IF and WC unscored."""
    return {**unscored_offline(), PQ: pq_offline(records, width=width, height=height)}


# ----------------------------------------------------------------------------------------------------
# Tables and the reward-model export
# ----------------------------------------------------------------------------------------------------


def checklist_rows(input_id: str, checklist: Checklist) -> list[dict]:
    """``firm_checklists`` rows: input_id, dimension, item_id, target, aspect, question, importance,
    weight (IF: the exact ``m_i / Σ m`` the score is computed from, :func:`if_weights`), checklist_hash,
    maker (JSON: who planned it), dropped (null). Then one row per planned item left out, ``x1``,
    ``x2``..., with its question, importance and ``dropped`` (the reason) and no weight."""
    weights = if_weights([i.importance for i in checklist.items]) if checklist.dimension == IF else \
        [None] * len(checklist.items)
    base = {"input_id": input_id, "dimension": checklist.dimension, "checklist_hash": checklist.content_hash,
            "maker": json.dumps(checklist.maker, sort_keys=True)}
    kept = [{**base, "item_id": i.id, "target": i.target, "aspect": i.aspect, "question": i.question,
             "importance": i.importance, "weight": w, "dropped": None} for i, w in zip(checklist.items, weights)]
    left_out = [{**base, "item_id": f"x{k}", "target": "", "aspect": "", "question": d.question,
                 "importance": d.importance, "weight": None, "dropped": d.reason}
                for k, d in enumerate(checklist.dropped, start=1)]
    return kept + left_out


def checklist_from_rows(rows: Sequence[dict]) -> Checklist:
    """The checklist that :func:`checklist_rows` stored (rows of one input and dimension, any order):
    the ``firm_checklists`` table is the frozen store the verifiers of every model read. Raises
    :class:`ChecklistError` when the rows disagree on the hash or do not reproduce it."""
    left_out = [r for r in rows if r.get("dropped")]
    rows = [r for r in rows if not r.get("dropped")]
    if not rows:
        raise ChecklistError("no checklist rows for this input (fix: materialize firm_checklists first)")
    hashes = {r["checklist_hash"] for r in rows}
    dims = {r["dimension"] for r in rows}
    if len(hashes) != 1 or len(dims) != 1:
        raise ChecklistError(f"input {rows[0].get('input_id')!r}: rows of {len(hashes)} checklists and "
                             f"{len(dims)} dimensions mixed (fix: pass one input's rows of one dimension)")
    order = sorted(rows, key=lambda r: int(re.sub(r"\D", "", r["item_id"]) or 0))
    maker = json.loads(order[0].get("maker") or "{}")
    items = tuple(ChecklistItem(r["item_id"], r["question"], int(r["importance"]), r.get("target") or "",
                                r.get("aspect") or "") for r in order)
    dropped = tuple(DroppedItem(r["question"], r.get("importance"), r["dropped"])
                    for r in sorted(left_out, key=lambda r: int(re.sub(r"\D", "", r["item_id"]) or 0)))
    c = Checklist(dims.pop(), items, maker, dropped)
    if c.content_hash != hashes.pop():
        raise ChecklistError(f"input {rows[0].get('input_id')!r}: the stored rows do not reproduce their "
                             "checklist_hash (fix: re-materialize firm_checklists)")
    return c


def if_score_from_rows(item_rows: Sequence[dict], verdicts: Sequence[dict]) -> float:
    """``if_score`` recomputed from what is stored: the ``weight`` of each ``firm_checklists`` item
    (one input's IF rows; rows left out, ``dropped``, are no items) and the video's ``firm_verdicts``
    rows (``verdict`` yes and ``verifiable``: met). Raises :class:`ChecklistError` when a weight is not
    the item's ``m_i / Σ m`` or an item has no verdict."""
    items = [r for r in item_rows if not r.get("dropped") and not r.get("error")]
    if not items:
        raise ChecklistError("no stored IF items for this input (fix: materialize firm_checklists first)")
    exact = if_weights([r["importance"] for r in items])
    off = [f"{r['item_id']} ({r['weight']!r}, not {w!r})" for r, w in zip(items, exact) if r.get("weight") != w]
    if off:
        raise ChecklistError(f"stored weights are not m_i / Σ m: {', '.join(off)} (fix: re-materialize "
                             "firm_checklists)")
    by_id = {v["item_id"]: v for v in verdicts}
    missing = [r["item_id"] for r in items if r["item_id"] not in by_id]
    if missing:
        raise ChecklistError(f"IF verdicts: no stored verdict for {', '.join(missing)}")
    met = [by_id[r["item_id"]]["verdict"] == "yes" and bool(by_id[r["item_id"]]["verifiable"]) for r in items]
    return if_score_from_weights([r["weight"] for r in items], met)


def verdict_rows(input_id: str, results: dict[str, DimensionResult]) -> list[dict]:
    """``firm_verdicts`` rows: input_id, dimension, item_id, verdict (yes/no), verifiable, evidence, checklist_hash."""
    return [{"input_id": input_id, "dimension": d, "item_id": v.item_id, "verdict": "yes" if v.yes else "no",
             "verifiable": v.verifiable, "evidence": v.evidence, "checklist_hash": r.checklist_hash}
            for d, r in results.items() for v in r.verdicts]


def score_row(input_id: str, results: dict[str, DimensionResult]) -> dict:
    """One ``firm_scores`` row; a missing dimension or an unscored one has nulls and its reason;
    ``if_unverifiable`` / ``wc_unverifiable`` count the answers that could not be verified."""
    row: dict[str, Any] = {"input_id": input_id}
    for d in DIMENSIONS:
        s = SHORT[d]
        r = results.get(d)
        if d != PQ:
            row[f"{s}_score"] = r.score if r else None
        row[f"{s}_rating"] = r.rating if r else None
        row[f"{s}_rationale"] = r.rationale if r else ""
        row[f"{s}_reason"] = (r.reason if r else "not evaluated") if not (r and r.scored) else ""
        if d != PQ:  # answers the verifier could not give from the frames; null where none was asked
            row[f"{s}_unverifiable"] = sum(1 for v in r.verdicts if not v.verifiable) if r and r.verdicts else None
    wc = results.get(WC)
    row["wc_scene"] = (wc.detail.get("scene_summary") or "") if wc else ""  # the grounding's summary (export prose)
    return row


FIRM_EVALUATORS = {"if": "firm_if", "wc": "firm_wc", "pq": "firm_pq"}
FIRM_RANGES = {name: (1.0, 5.0) for name in FIRM_EVALUATORS.values()}


def firm_evaluator_scores(firm_scores: pl.DataFrame, dimensions: dict[str, str | None] | None = None) -> pl.DataFrame:
    """``firm_scores`` as evaluator scores for :func:`~argus_dagster.protocols.alignment.metrics.alignment_table`:
    ``input_id, model, evaluator (firm_if/firm_wc/firm_pq), dimension, score`` (the 1-5 rating; pass
    :data:`FIRM_RANGES` as its ``evaluator_ranges``). ``dimensions`` names the human dimension each one
    is compared with (default: the FIRM names; ``None`` as a value compares it with every dimension)."""
    dims = {"if": IF, "wc": WC, "pq": PQ} if dimensions is None else dimensions
    parts = []
    for short, name in FIRM_EVALUATORS.items():
        col = f"{short}_rating"
        if col not in firm_scores.columns:
            raise ValueError(f"firm_scores has no {col!r} column (it has {firm_scores.columns})")
        parts.append(firm_scores.select(pl.col("input_id").cast(pl.String), pl.col("model").cast(pl.String),
                                        pl.lit(name).alias("evaluator"),
                                        pl.lit(dims.get(short), dtype=pl.String).alias("dimension"),
                                        pl.col(col).cast(pl.Float64).alias("score")))
    return pl.concat(parts).filter(pl.col("score").is_not_null())


def frame_refs(video_uri: str, frames: Any) -> list[str]:
    """``<uri>#frame=<index>&t=<seconds>`` per sampled frame (what the instance's images are)."""
    idx = getattr(frames, "indices", None) or range(len(frames.array if hasattr(frames, "array") else frames))
    ts = getattr(frames, "timestamps", None) or [None] * len(idx)
    return [f"{video_uri}#frame={i}" + (f"&t={t:.3f}" if t is not None else "") for i, t in zip(idx, ts)]


def export_records(video_id: str, prompt: str, refs: Sequence[str], results: dict[str, DimensionResult], *,
                   require_all: bool = True) -> tuple[list[dict], str]:
    """Training instances of one video (seed §3.3), and why none were made.

    One per dimension: ``id``, ``dimension``, ``prompt``, ``frames`` (references), ``instruction`` (the
    Appendix 4 instruction), ``target`` (``{"reasoning", "score"}``), and the same instance as
    ``messages`` (one ``<image>`` token per frame, then the instruction; the answer is the target JSON)
    with ``images`` for SFT frameworks. With ``require_all`` (the seed keeps only videos valid on all
    three dimensions) a video with an unscored dimension yields none.
    """
    missing = [d for d in DIMENSIONS if not (results.get(d) and results[d].scored)]
    if require_all and missing:
        why = "; ".join(f"{d}: {results[d].reason if d in results else 'not evaluated'}" for d in missing)
        return [], f"{video_id}: left out, not every dimension is scored ({why})"
    out = []
    for d in DIMENSIONS:
        r = results.get(d)
        if not (r and r.scored):
            continue
        instr = instruction(d, prompt, len(refs))
        target = {"reasoning": r.rationale, "score": r.rating}
        out.append({"id": f"{video_id}/{SHORT[d]}", "video_id": video_id, "dimension": d, "prompt": prompt,
                    "frames": list(refs), "instruction": instr, "target": target,
                    "messages": [{"role": "user", "content": "<image>" * len(refs) + instr},
                                 {"role": "assistant", "content": json.dumps(target, ensure_ascii=False)}],
                    "images": list(refs)})
    return out, ""


def export_from_rows(rows: Iterable[dict], prompts: dict[str, str], *, video_prefix: str = "",
                     require_all: bool = True) -> tuple[list[dict], list[str]]:
    """Training instances rebuilt from stored ``firm_scores`` rows (with their ``frames`` column), so
    an export reads the table and calls nothing. Returns the instances and the videos left out, with why.
    A video is named ``<prefix><input_id>``, and ``#<k>`` for sample ``k`` of the input."""
    records, left_out = [], []
    for r in rows:
        iid = r["input_id"]
        video = f"{video_prefix}{iid}" + (f"#{r['sample']}" if r.get("sample") else "")
        if iid not in prompts:
            left_out.append(f"{video}: no prompt for this input")
            continue
        res = {}
        for d in DIMENSIONS:
            s = SHORT[d]
            res[d] = DimensionResult(d, r.get(f"{s}_score"), r.get(f"{s}_rating"), r.get(f"{s}_rationale") or "",
                                     r.get(f"{s}_reason") or "")
        recs, why = export_records(video, prompts[iid], list(r.get("frames") or []), res,
                                   require_all=require_all)
        records += recs
        if why:
            left_out.append(why)
    return records, left_out


def write_export(path: Any, records: Iterable[dict]) -> int:
    """Write instances as JSON lines (whole: a temporary name, then a rename); returns how many."""
    from argus_dagster.infra.files import write_atomic

    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    write_atomic(path, ("\n".join(lines) + "\n") if lines else "")
    return len(lines)
