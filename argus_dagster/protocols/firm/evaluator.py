"""The FIRM-Video protocol on one VLM client: the IF planner and verifier, WC grounding, questions and
verifier, the PQ evaluator and the reworded rationale, each call content-addressed in the cache.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, ClassVar, Sequence

from argus_dagster.infra.cache import ContentCache
from argus_dagster.infra.identities import VLM_IRRELEVANT, VlmCall, identity_record, record_key, vlm_call
from argus_dagster.infra.media import SAMPLING_ID
from argus_dagster.protocols.firm.parsing import (
    parse_grounding,
    parse_if_plan,
    parse_pq,
    parse_rationale,
    parse_verdicts,
    parse_wc_questions,
)
from argus_dagster.protocols.firm.prompts import PQ_CHECKLIST, firm_call
from argus_dagster.protocols.firm.scoring import score_if, score_wc
from argus_dagster.protocols.firm.types import IF, PQ, WC, Checklist, ChecklistItem, DimensionResult, DroppedItem, Verdict
from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.protocol import chat_json
from argus_dagster.vlm.reply import ParseError, VlmError


@identity_record
@dataclass(frozen=True)
class FirmCallIdentity:
    """One FIRM-Video call: which step of the protocol, the request, and what it was given
    (``inputs``: the prompt, checklist hash, video and reference hashes, sampling, as the step reads them)."""

    step: str
    call: VlmCall
    inputs: dict[str, Any] = field(default_factory=dict)

    IRRELEVANT: ClassVar[tuple[str, ...]] = VLM_IRRELEVANT


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


def _checklist_json(items: Sequence[ChecklistItem]) -> str:
    # Only id and question: the verifiers never see importance (nor, for WC, the target's weight).
    return json.dumps([{"id": i.id, "question": i.question} for i in items], indent=1)


def _wc_checklist_of(targets: Sequence[dict], questions: dict[str, list[tuple[str, str]]], maker: dict) -> Checklist:
    """The WC checklist of the grounded ``targets`` from the questions written for them (``q1``, ``q2``...
    in target order, each with its target's importance); a target without questions is left out with
    the reason. Raises :class:`ParseError` when no target has a question."""
    items: list[ChecklistItem] = []
    for t in targets:
        for q, aspect in questions.get(t["name"], []):
            items.append(ChecklistItem(f"q{len(items) + 1}", q, t["importance"], t["name"], aspect))
    dropped = tuple(DroppedItem(t["name"], t["importance"], "no questions") for t in targets
                    if t["name"] not in questions)
    if not items:
        raise ParseError("no verification question for any grounded target")
    return Checklist(WC, tuple(items), maker, dropped)


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
        request = firm_call(step)
        return FirmCallIdentity(step=step, call=vlm_call(self.client, prompt_version=request.version,
                                                         prompt=request.system, max_tokens=request.max_tokens,
                                                         thinking=None), inputs=inputs)

    def _maker(self, step: str) -> dict:
        """Who made a checklist: this client's backend and model, and the step's prompt version."""
        return {"backend": self.client.backend, "model": self.client.model,
                "prompt_version": firm_call(step).version}

    def _ask(self, step: str, parts: list[Any], parse: Callable[[str], Any]) -> Any:
        """One request of ``step`` (its system text and token budget, :func:`firm_call`), parsed strictly."""
        request = firm_call(step)
        msgs = [{"role": "system", "content": [request.system]}, {"role": "user", "content": parts}]
        value, _ = chat_json(self.client, msgs, parse, parse_retries=self.parse_retries,
                             max_tokens=request.max_tokens, stats=self.stats)
        return value

    def _per_video(self, key: str, compute: Callable[[], Any], video_digest: str) -> Any:
        """``compute()`` through the cache when the video has a digest to key it by, else called as is."""
        return self.cache.get_or_compute(key, compute)[0] if video_digest else compute()

    # -- IF -------------------------------------------------------------------------------------------
    def plan_if(self, prompt: str, *, references: dict[str, Any] | None = None,
                reference_digests: dict[str, str] | None = None) -> Checklist:
        """The output-blind IF checklist of one input. Raises :class:`ParseError` / :class:`VlmError`
        (the caller records the input's reason); a stored checklist is returned without a call."""
        maker = self._maker("if_plan")
        key = record_key(self.call_identity("if_plan", prompt=prompt, references=reference_digests or {}))

        def compute() -> dict:
            parts = [f"Prompt: {prompt}", *_ref_parts(references),
                     "Decompose the prompt into atomic visual requirements now."]
            items, dropped = self._ask("if_plan", parts, parse_if_plan)
            return Checklist(IF, tuple(items), maker, tuple(dropped)).to_json()

        data, _ = self.cache.get_or_compute(key, compute)
        return Checklist.from_json(data)

    def verify_if(self, checklist: Checklist, prompt: str, frames: Any, *, video_digest: str = "",
                  references: dict[str, Any] | None = None,
                  reference_digests: dict[str, str] | None = None) -> DimensionResult:
        """IF of one video: every requirement of ``checklist`` answered from the frames (and the
        condition media, labelled), then scored; a failed call leaves IF unscored with the reason."""
        key = record_key(self.call_identity("if_verify", checklist=checklist.content_hash, prompt=prompt,
                                            video=video_digest, references=reference_digests or {},
                                            sampling=SAMPLING_ID))
        ids = [i.id for i in checklist.items]

        def compute() -> list[dict]:
            parts = [f"Prompt: {prompt}", *_ref_parts(references), *_frame_parts("output_video", frames),
                     "Checklist:\n" + _checklist_json(checklist.items), "Answer every question now."]
            verdicts = self._ask("if_verify", parts, lambda t: parse_verdicts(t, ids, "yes = satisfied"))
            return [asdict(v) for v in verdicts]

        try:
            raw = self._per_video(key, compute, video_digest)
        except (ParseError, VlmError) as exc:
            return DimensionResult(IF, reason=f"IF verifier: {exc}", checklist_hash=checklist.content_hash)
        return score_if(checklist, [Verdict(**v) for v in raw])

    # -- WC -------------------------------------------------------------------------------------------
    def ground_wc(self, frames: Any, *, video_digest: str = "") -> dict:
        """Scene summary and targets of the video, without the prompt."""
        key = record_key(self.call_identity("wc_ground", video=video_digest, sampling=SAMPLING_ID))

        def compute() -> dict:
            parts = [*_frame_parts("video", frames), "Ground this video now."]
            return self._ask("wc_ground", parts, parse_grounding)

        return self._per_video(key, compute, video_digest)

    def _wc_questions(self, grounding: dict, prompt: str) -> dict[str, list[tuple[str, str]]]:
        """Questions per grounded target name; targets left without questions are asked for once more
        (the seed's coverage check), and those still without are absent."""
        targets = grounding["targets"]
        names = [t["name"] for t in targets]
        questions: dict[str, list[tuple[str, str]]] = {}
        todo = targets
        for _ in range(2):
            listing = json.dumps([{"target": t["name"], "kind": t["kind"]} for t in todo], indent=1)
            parts = [f"Generation prompt (context only): {prompt}",
                     f"Scene summary: {grounding['scene_summary']}", "Targets:\n" + listing,
                     "Write the verification questions now."]
            got = self._ask("wc_questions", parts, lambda t: parse_wc_questions(t, names))
            questions.update({k: v for k, v in got.items() if v})
            todo = [t for t in targets if t["name"] not in questions]
            if not todo:
                break
        return questions

    def wc_checklist(self, grounding: dict, prompt: str) -> Checklist:
        """Verification questions per grounded target (:meth:`_wc_questions`); targets still without
        questions are recorded in ``dropped``."""
        maker = self._maker("wc_questions")
        key = record_key(self.call_identity("wc_questions", grounding=grounding, prompt=prompt))

        def compute() -> dict:
            questions = self._wc_questions(grounding, prompt)
            return _wc_checklist_of(grounding["targets"], questions, maker).to_json()

        data, _ = self.cache.get_or_compute(key, compute)
        return Checklist.from_json(data)

    def _verify_wc(self, checklist: Checklist, frames: Any, video_digest: str) -> list[Verdict]:
        """The WC verifier's answers (yes = violation). Raises :class:`ParseError` / :class:`VlmError`."""
        ids = [i.id for i in checklist.items]
        key = record_key(self.call_identity("wc_verify", checklist=checklist.content_hash, video=video_digest,
                                            sampling=SAMPLING_ID))

        def compute() -> list[dict]:
            # Neither the prompt nor any importance reaches this verifier.
            parts = [*_frame_parts("video", frames), "Questions:\n" + _checklist_json(checklist.items),
                     "Answer every question now."]
            verdicts = self._ask("wc_verify", parts, lambda t: parse_verdicts(t, ids, "yes = violation"))
            return [asdict(v) for v in verdicts]

        return [Verdict(**v) for v in self._per_video(key, compute, video_digest)]

    def evaluate_wc(self, prompt: str, frames: Any, *, video_digest: str = "") -> DimensionResult:
        """WC of one video: grounded without the prompt, questions written per target, verified, scored;
        a failed step leaves WC unscored with the reason."""
        try:
            grounding = self.ground_wc(frames, video_digest=video_digest)
            checklist = self.wc_checklist(grounding, prompt)
        except (ParseError, VlmError) as exc:
            return DimensionResult(WC, reason=f"WC checklist: {exc}")
        try:
            verdicts = self._verify_wc(checklist, frames, video_digest)
        except (ParseError, VlmError) as exc:
            return DimensionResult(WC, reason=f"WC verifier: {exc}", checklist_hash=checklist.content_hash)
        out = score_wc(checklist, verdicts, grounding)
        # The video's own WC checklist, so that its score can be recomputed from stored rows.
        out.detail["items"] = [asdict(i) for i in checklist.items]
        return out

    # -- PQ -------------------------------------------------------------------------------------------
    def evaluate_pq(self, prompt: str, frames: Any, *, video_digest: str = "") -> DimensionResult:
        """PQ of one video: the VLM answers the defect checklist, writes the rationale and rates it."""
        key = record_key(self.call_identity("pq", prompt=prompt, video=video_digest, checklist=PQ_CHECKLIST,
                                            sampling=SAMPLING_ID))
        listing = json.dumps([{"id": d, "defect": text} for d, text in PQ_CHECKLIST], indent=1)

        def compute() -> dict:
            parts = [f"Generation prompt (context only): {prompt}", *_frame_parts("video", frames),
                     "Defect checklist:\n" + listing, "Inspect the video now."]
            return self._ask("pq", parts, parse_pq)

        try:
            out = self._per_video(key, compute, video_digest)
        except (ParseError, VlmError) as exc:
            return DimensionResult(PQ, reason=f"PQ evaluator: {exc}")
        # The evaluator's own checklist-based rationale, used as is.
        return DimensionResult(PQ, rating=out["score"], rationale=out["rationale"],
                               detail={"defects": out["defects"], "source": "vlm"})

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
            return self._ask("rationale", parts, parse_rationale)

        try:
            text, _ = self.cache.get_or_compute(key, compute)
        except (ParseError, VlmError) as exc:
            result.detail["rationale_source"] = f"template ({exc})"
            return
        result.rationale = text
        result.detail["rationale_source"] = "model"
