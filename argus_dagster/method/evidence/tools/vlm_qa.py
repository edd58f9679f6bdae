"""``vlm_qa``: a criterion-specific question answered by a VLM on the frames of the media it names."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from argus_dagster.infra.identities import vlm_call
from argus_dagster.infra.media import JUDGE_POLICY, Frames, MediaError
from argus_dagster.method import video_prompt  # VIDEO_SYSTEM read at call time: the shared opening text
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.video_prompt import frames_label, video_messages
from argus_dagster.vlm.parsing import strip_think
from argus_dagster.vlm.protocol import chat_json
from argus_dagster.vlm.reply import ParseError, VlmError

NO_VLM = "vlm_qa unavailable: no VLM is configured (set ARGUS_VLM_BASE_URL and ARGUS_VLM_MODEL)"


class NoVlmQa:
    """The embedded default has no VLM: every call says so explicitly (:data:`NO_VLM`)."""

    name = "vlm_qa"
    version = "none"

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        return {
            "ok": False,
            "unavailable": True,
            "error": NO_VLM,
            "question": args.get("question", ""),
        }


QA_PROMPT_VERSION = "qa-3"  # asked without thinking (method §7); the question follows the video's frames
QA_MAX_TOKENS = 300
QA_INSTRUCTIONS = (
    "You answer one question about the frames of a video or image, for an evaluation. Describe only what "
    "is visible; say so when it cannot be seen. Be specific and short (at most three sentences)."
)


_ANSWER_CHARS = 2000  # a few hundred tokens are asked for; a server that ignores that is cut here


def _answer(text: str) -> str:
    answer = strip_think(text)
    if not answer:
        raise ParseError("empty answer")
    if len(answer) > _ANSWER_CHARS:
        answer = answer[:_ANSWER_CHARS] + f" ...(answer cut at {_ANSWER_CHARS} characters)"
    return answer


def qa_version(backend: str, model: str) -> str:
    """Part of the evidence cache key: another model or prompt gives other answers."""
    return f"{backend}:{model}:{QA_PROMPT_VERSION}"


class VlmQa:
    """``vlm_qa`` on a VLM: the question and ~8 frames of the named media (an image is one frame).

    Every request opens as the candidate's judge requests do (:mod:`argus_dagster.method.video_prompt`): the
    common system text and the output video's frames, so a prefix-caching server prefills them once
    per video. A question about other media (a crop, the source video, a reference) gets those frames
    after the shared ones, and the question comes last."""

    name = "vlm_qa"

    def __init__(self, client, *, stats=None, parse_retries: int = 2):
        self.client = client
        self.stats = stats
        self.parse_retries = parse_retries
        self.version = qa_version(client.backend, client.model)

    @property
    def config(self) -> dict[str, Any]:
        """Part of a step's identity: the request (model, instructions, budget), never the endpoints."""
        return asdict(vlm_call(self.client, prompt_version=QA_PROMPT_VERSION, prompt=(video_prompt.VIDEO_SYSTEM, QA_INSTRUCTIONS),
                               max_tokens=QA_MAX_TOKENS, thinking=False))

    def also_reads(self, args: dict[str, Any], media: MediaStore) -> tuple[str, ...]:
        """A question about other media still opens with the output video's frames (the shared prefix)."""
        on = args.get("on") or "output_video"
        return ("output_video",) if on != "output_video" and media.has("output_video") else ()

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        on = args.get("on") or "output_video"
        question = str(args.get("question") or "").strip()
        if not question:
            return {"ok": False, "error": "vlm_qa step has no question"}
        frames = media.frames(on, JUDGE_POLICY)
        shared: Frames | None
        if on == "output_video":
            shared, extra = frames, []
        else:
            try:
                shared = media.frames("output_video", JUDGE_POLICY) if media.has("output_video") else None
            except MediaError:  # an output that cannot be decoded: the question goes with its own media only
                shared = None
            extra = [frames_label(on, frames, video=media.is_video(on)), *frames.images()]
        messages = video_messages(shared, [QA_INSTRUCTIONS, f"Question (about [{on}]): {question}"], extra=extra)
        try:
            answer, _ = chat_json(self.client, messages, _answer, parse_retries=self.parse_retries,
                                  max_tokens=QA_MAX_TOKENS, stats=self.stats, thinking=False)
        except (ParseError, VlmError) as exc:
            return {"ok": False, "error": f"vlm_qa: {exc}", "question": question, "on": on}
        return {"ok": True, "question": question, "on": on, "answer": answer, "n_frames": len(frames.array)}
