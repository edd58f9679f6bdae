"""The VLM rubric generator: one prompt for all five tasks (method §2-§4).

The generator sees the input only (prompt, first frame, subject images, source-video frames at 2 fps,
at most 8, each labelled with its role), never a candidate. Its answer is parsed leniently (fences,
prose, ``<think>`` blocks), validated against the schema, repaired once by showing the model the
validation errors, and post-processed (§4) by the rubric store like every other rubric.
"""

from __future__ import annotations

from typing import Any

from ..evidence.vocabulary import TOOL_SPECS
from ..instances import InputInstance, Task
from ..media import RUBRIC_POLICY, MediaError, VideoReader, load_image
from ..vlm import CallStats, ParseError, VlmClient, VlmError, chat_json, extract_json
from .schema import Rubric, RubricError, parse_rubric
from .taxonomy import DIMENSIONS, applicable

PROMPT_VERSION = "rubric-1"

_TASK_EMPHASIS = {
    Task.T2V: ("Text-to-video. Prompt following and motion plausibility are high importance; pure "
               "aesthetics at most medium. Keep separate criteria for entity presence, attribute binding, "
               "any stated spatial relation or count, overall alignment and style."),
    Task.TI2V: ("Image-to-video from a first frame. First-frame fidelity (medium) and motion quality from that "
                "frame (high) are separate criteria; a video frozen on the first frame scores low on motion."),
    Task.TS2V: ("Subject-to-video. Besides subject identity, keep separate criteria for scene objects and "
                "attributes, overall alignment and requested style. Camera (10), generic scene (6), generic "
                "action (5) and event order (8) criteria are low unless the prompt is about them."),
    Task.TV2V: ("Video editing: the prompt is an edit instruction for the source video. Edit following is its "
                "own high criterion; preservation criteria are at most medium; include exactly one hard "
                "'degenerate edit' criterion (output nearly unchanged from the source, frozen, or the edit "
                "only a static overlay, warp or flicker) with hard_cap 2. Edit caps: 2 catastrophic, 4 severe. "
                "Camera, generic scene, generic action and event order criteria are low."),
    Task.TSV2V: ("Reference video editing: insert or replace with the subject of the reference image(s) in the "
                 "source video. Edit following (18) and inserted-subject identity (21) are high with hard caps "
                 "of at most 2; preservation at most medium; include one hard 'degenerate edit' criterion with "
                 "hard_cap 2. Camera, generic scene, generic action and event order criteria are low."),
}

_TOOLS = {
    "vlm_qa": "question, on: a criterion-specific question answered by a VLM on that media's frames",
    "sam_track": "query, on: text-prompted localization and tracking; per-frame presence, boxes, coverage",
    "crop_compare": "crop_from, region: crop the tracked entity; registers output_crop / source_crop",
    "dino_sim": "a, b: embedding similarity of two media ids (identity, fidelity)",
    "ocr": "on, target: recognized on-screen text against the expected text",
    "web_search": "query: a retrieved reference image registered as `reference` (optional)",
    "aesthetic": "on: aesthetic and technical quality 0-100",
    "depth_probe": "on, query_a, query_b: which entity is in front, occlusion ratio",
    "spatial_relation": "on, entities, relation (left_right | front_back | count)",
    "flicker_probe": "on: dense luma statistics for flicker and temporal stability",
    "motion_probe": "on: optical-flow amount, static share and smoothness",
    "ssim_compare": "a, b: structural similarity of two media (preservation, fidelity)",
    "change_probe": "a, b: how much and where the output differs from the source",
}


def system_prompt() -> str:
    dims = "\n".join(f"{k}. {v}" for k, v in DIMENSIONS.items())
    tools = "\n".join(f"- {name}: {_TOOLS[name]}" for name in TOOL_SPECS if name in _TOOLS)
    return f"""You write evaluation rubrics for generated and edited videos. You see the INPUT only, never a
candidate video: the rubric is written once, frozen, and applied to every candidate of this input.

The 22 dimensions (a dimension is a label, not a slot: it yields zero, one or several criteria):
{dims}
Dimensions 1-15 apply to every input. 16 needs a first frame; 17 needs subject images; 18, 19, 20 and 22
need a source video; 21 needs a source video and subject images. Never write identity or preservation
criteria without the reference or source they compare against.

Rules:
- Each criterion verifies one property and names locatable entities. Merge criteria that check the same
  property with the same evidence; drop only criteria every output would pass or fail alike. Rich prompts
  usually give 9-14 criteria; short ones fewer.
- type "hard" only for fundamental failures (main subject absent, wrong identity, must-preserve region
  destroyed, edit not performed); at most 1-2 hard criteria. hard_cap is 2, 4, 6 or null: prefer 6; 4
  for severe; 2 for catastrophic. Soft criteria have hard_cap null. fail_threshold defaults to 5.
- importance is high, medium or low. scoring_rule states the 0-10 integer scale in words (what earns 10,
  about 5 and 0).
- derivable_from is "prompt" or "input_bundle" (needs the images or source video).
- Evidence plans: tool_sequence is an ordered list of {{"tool": name, "args": {{...}}}}; every step names the
  media it works on. Media ids: output_video, source_video, first_frame, subject_image, and derived
  reference, output_crop, source_crop. Use tools with restraint: most criteria need only vlm_qa (plus
  aesthetic for visual quality or style). spatial_relation and depth_probe only when the input states a
  spatial relation, count or occlusion; flicker_probe only for a flicker or stability criterion.
Tools:
{tools}

Answer with one JSON object and nothing else:
{{"task_understanding": "one sentence",
 "dimensions_considered": [{{"dimension": 1, "included": true, "reason": "one line"}}, ... all 22 ...],
 "criteria": [{{"id": "snake_case_id", "dimension": 1, "criterion": "...", "type": "hard|soft",
   "importance": "high|medium|low", "scoring_rule": "...", "hard_cap": 2|4|6|null, "fail_threshold": 5,
   "failure_modes": ["..."], "derivable_from": "prompt|input_bundle",
   "evidence_plan": {{"target_entity": "...", "detector_query": "...", "tool_sequence": [...],
     "reference_source": "subject_image|first_frame|source_video|web_search|none", "web_search_query": "",
     "aggregation": "how the evidence maps to 0-10", "notes": ""}}}}]}}"""


def input_message(inst: InputInstance) -> dict[str, Any]:
    """The user turn: task, prompt, and each condition's frames labelled by role."""
    task = inst.task
    present = {"first_frame": inst.first_frame is not None, "subject": bool(inst.subject_images),
               "source": inst.source_video is not None}
    allowed = [d for d in DIMENSIONS if applicable(d, first_frame=present["first_frame"],
                                                     subject=present["subject"], source=present["source"])]
    parts: list[Any] = [
        f"Task: {task.value}. {_TASK_EMPHASIS[task]}",
        f"Dimensions that may yield criteria for this input: {allowed}.",
        f"{'Edit instruction' if task.is_editing else 'Prompt'} (verbatim): {inst.prompt}",
    ]
    if inst.first_frame:
        parts += ["[first_frame] the image the video must start from:", load_image(inst.first_frame)]
    for i, path in enumerate(inst.subject_images, start=1):
        parts += [f"[subject_image {i}] the subject whose identity must be kept:", load_image(path)]
    if inst.source_video:
        frames = VideoReader(inst.source_video).sample(RUBRIC_POLICY)
        times = ", ".join(f"{t:.1f}s" for t in frames.timestamps)
        parts.append(f"[source_video] {len(frames.array)} frames sampled at 2 fps (t = {times}):")
        parts += frames.images()
    parts.append("Write the rubric for this input now, as one JSON object.")
    return {"role": "user", "content": parts}


def _parse(text: str) -> Rubric:
    data = extract_json(text)
    try:
        return parse_rubric(data)
    except RubricError as exc:
        raise _Invalid(exc.problems) from None


class _Invalid(ParseError):
    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("the rubric does not validate: " + "; ".join(problems[:12]))


def generate_with_vlm(inst: InputInstance, client: VlmClient, *, stats: CallStats | None = None,
                      parse_retries: int = 1, max_tokens: int = 4096) -> Rubric:
    """Ask the VLM for ``inst``'s rubric; one repair round with the validation errors.

    Raises :class:`RubricError` naming what was wrong, or :class:`VlmError` when no answer came.
    """
    try:
        messages = [{"role": "system", "content": [system_prompt()]}, input_message(inst)]
    except MediaError as exc:
        raise RubricError([f"cannot read the input's media for the generator: {exc}"], f"input {inst.id!r}") from None
    try:
        rubric, _ = chat_json(client, messages, _parse, parse_retries=parse_retries, max_tokens=max_tokens,
                              stats=stats)
    except ParseError as exc:
        raise RubricError([f"generated rubric unusable after {parse_retries} repair(s): {exc}"],
                          f"input {inst.id!r}") from None
    except VlmError as exc:
        raise RubricError([f"rubric generation failed: {exc}"], f"input {inst.id!r}") from None
    rubric.generator = {"backend": client.backend, "model": client.model, "prompt_version": PROMPT_VERSION,
                        "input_hash": inst.content_hash}
    return rubric


def generator_identity(client_backend: str, model: str) -> dict[str, str]:
    return {"backend": client_backend, "model": model, "prompt_version": PROMPT_VERSION}


__all__ = ["PROMPT_VERSION", "generate_with_vlm", "generator_identity", "system_prompt", "input_message"]
