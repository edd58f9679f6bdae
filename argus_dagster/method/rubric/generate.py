"""The VLM rubric generator: one prompt for all five tasks (method §2-§4).

The generator sees the input only (prompt, first frame, subject images, source-video frames at 2 fps,
at most 8, each labelled with its role), never a candidate. Its instruction carries every rule of
method §4 and is the same for every task (the user turn states which inputs are present, nothing
else). The answer is parsed leniently (fences, prose, ``<think>`` blocks), validated against the
schema and the checkable rules, repaired once by listing each failed field and rule, and
post-processed (§4) by the rubric store like every other rubric.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from argus_dagster.infra.identities import RubricIdentity, VlmCall, record_key, vlm_call
from argus_dagster.infra.media import RUBRIC_POLICY, SAMPLING_ID, MediaError, VideoReader, load_image
from argus_dagster.method.evidence.vocabulary import TOOL_SPECS
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.rubric.lenient import read_rubric
from argus_dagster.method.rubric.schema import Rubric, RubricError, parse_rubric
from argus_dagster.method.rubric.taxonomy import DIMENSIONS, applicable
from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.parsing import extract_json
from argus_dagster.vlm.protocol import VlmClient, chat_json
from argus_dagster.vlm.reply import ParseError, VlmError

PROMPT_VERSION = "rubric-2"
# A rich rubric with plans runs to several thousand tokens (method §4: the release allows 16,000).
MAX_OUTPUT_TOKENS = 16384

_TOOLS = {
    "vlm_qa": "question, on: a criterion-specific question a VLM answers on that media's frames (the default tool)",
    "sam_track": "query, on: text-prompted localization and tracking; per-frame presence, boxes, coverage",
    "crop_compare": "crop_from, region: crop the tracked entity; registers output_crop / source_crop",
    "dino_sim": "a, b: self-supervised embedding similarity of two media ids (identity, fidelity, preservation)",
    "ocr": "on, target: recognized on-screen text against the expected text",
    "web_search": "query: a retrieved reference image registered as `reference` (see when it is allowed)",
    "aesthetic": "on: aesthetic and technical quality 0-100",
    "depth_probe": "on, query_a, query_b: which entity is in front, occlusion ratio",
    "spatial_relation": "on, entities, relation (left_right | front_back | count)",
    "flicker_probe": "on: dense luma/colour statistics for flicker, brightness jitter, strobing",
    "motion_probe": "on: optical-flow amount, static share and smoothness",
    "ssim_compare": "a, b: structural similarity of two media (fidelity to a first frame, preservation)",
    "change_probe": "a, b: how much and where the output differs from the source",
}


def system_prompt() -> str:
    """The one instruction for all five tasks (method §4); it never branches on a task label."""
    dims = "\n".join(f"{k}. {v}" for k, v in DIMENSIONS.items())
    tools = "\n".join(f"- {name}: {_TOOLS[name]}" for name in TOOL_SPECS if name in _TOOLS)
    return f"""You write evaluation rubrics for generated and edited videos. You see the INPUT only, never a
candidate video: the rubric is written once, frozen, and applied to every candidate of this input. The
same instructions hold for every kind of input; what the input contains (a prompt, a first frame,
subject images, a source video) decides what applies. A task label, if given, is only advisory.

THE 22 DIMENSIONS (a dimension is a taxonomy label, not a slot: it yields zero, one or several criteria)
{dims}

1. SCOPE BY CHECKLIST
- Walk all 22 dimensions. For each, decide whether this input makes it applicable; if so, write one or
  more criteria specific to THIS input. Report every dimension in "dimensions_considered" with
  "included" (true/false) and a one-line reason, all 22 of them.
- Dimensions 1-15 may apply to any input. Conditional dimensions only when their input is present:
  16 (first-frame fidelity) only with a first frame; 17 (subject identity) only with subject image(s):
  one identity criterion per subject, plus a no-attribute-confusion criterion when there are several
  subjects (their features must not be swapped or blended); 18, 19 and 20 only with a source video;
  21 only with a source video and a subject; 22 only for reference editing (subject inserted into a
  source video).
- Identity criteria cite the features actually seen in the reference image (markings, colours, shape,
  clothing, logo), not a template. Never invent identity or preservation criteria without the
  reference or source they compare against.
- Merge criteria that check the same property with the same evidence. Each criterion must be
  checkable on its own.

2. FIELDS OF A CRITERION
- "criterion" names locatable entities ("the corgi", "the sky region", "the sign text"), never "good
  quality" in general.
- "type": "hard" only for a fundamental failure (see 6); otherwise "soft".
- "hard_cap": 2, 4 or 6 for hard criteria; null for soft ones. "fail_threshold": 5 unless there is a
  reason for another value.
- "importance": "high", "medium" or "low". "scoring_rule": the 0-10 integer scale in words (what earns
  10, about 5 and 0). "failure_modes": a list of concrete failures. "derivable_from": "prompt" or
  "input_bundle" (it needs the images or the source video).
- "evidence_plan": "target_entity", "detector_query" (a short text prompt for the localizer),
  "tool_sequence" (ordered steps {{"tool": name, "args": {{...}}}}; every step names the media it works
  on), "reference_source", "web_search_query", "aggregation" (how the evidence maps to 0-10) and
  "notes". Media ids: output_video (the default subject), source_video, first_frame, subject_image,
  reference (whatever reference_source points to: the subject image, the first frame, the source
  video's middle frame, or a retrieved image), output_crop / source_crop (a crop made by an earlier
  crop_compare step).

3. TOOLS
{tools}
- vlm_qa is the default tool: action, scene, count, style, semantics.
- For the identity or preservation of a specific entity: localize and crop it (sam_track, then
  crop_compare), then compare (dino_sim against reference or source_crop).
- Prefer aesthetic to vlm_qa for aesthetic / visual-appeal judgments (dimensions 13 and 14); vlm_qa
  keeps the semantic side of style ("is it the requested anime style").
- web_search ONLY when both hold: (a) the text names a specific entity with one canonical look (a
  character, a logo, a landmark, a car model; not a class such as "a dog" or "a man"), and (b) the
  input gives no visual prior for it (no subject image; for edits, no source region showing it). Then
  reference_source is "web_search" and web_search_query is the exact name. With a visual prior in the
  input, reference_source is that medium ("subject_image", "first_frame" or "source_video").
- Geometric tools only for their property: spatial_relation only when the criterion itself is about a
  stated left/right or front/back relation or a count; depth_probe only for a stated depth order or
  occlusion / interpenetration; flicker_probe only for a flicker / brightness-jitter / strobing
  criterion (dimension 12), not for "looks smooth". When used, a geometric tool comes AFTER a vlm_qa
  step (the semantic read first, the measurement as a cross-check), never instead of it. No geometric
  tool "just in case": over-instrumenting adds noise that does not help ranking.

4. TASK EMPHASIS (by what the input contains)
- A first frame is present: first-frame fidelity (importance medium) and the quality of the motion
  that evolves from that frame (importance high) are separate criteria; a video frozen on the first
  frame scores low on motion.
- Text only: prompt following (entity, attribute, action binding, count, layout) and motion
  plausibility are high; pure aesthetics at most medium. Separate criteria for entity presence,
  attribute binding, any stated relation or count, overall alignment, and style / aesthetic quality.
- A subject is present: besides identity, separate criteria for the scene's objects and attributes,
  overall alignment and the requested style.

5. COVERAGE OVER TRIMMING
- Trimming means only merging true duplicates and dropping criteria that every plausible output
  passes or fails alike.
- Always keep, each as its own criterion: overall text-video alignment (15); entity presence (1) and
  attribute binding (2) for every salient entity named; any stated relation or count (4, 3); style /
  aesthetic quality (13, 14) whenever a look or genre is implied.
- No fixed number: rich prompts usually give 9-14 criteria, short ones fewer.

6. HARD-CAP DISCIPLINE
- Hard only when violating it makes the video a failure no other merit redeems: the main subject
  absent, the wrong identity, a must-preserve region clearly altered, the instructed edit not
  performed. Minor wobble, a small local artifact, mild inconsistency or partial compliance is soft.
- The test before marking a criterion hard: "would a reasonable, generally good output plausibly trip
  this?" If yes, it is soft.
- At most 1-2 hard criteria. Prefer cap 6; 4 for severe; 2 for catastrophic identity or preservation
  breaks.

7. REFERENCE-CONDITIONED IMPORTANCE (a subject image or a source video is present; not for text-only or
   plain image-to-video inputs)
- Criteria of camera motion (10), generic scene (6), generic action (5) and event order (8) are kept but
  get importance "low". The one exception: the instruction itself is about the camera or that action;
  then that criterion is the edit and keeps its importance.
- "high" is reserved for identity / the correct edit, the subject's key attributes and requested style,
  the subject's own motion quality (9) and visual quality (13).

8. EDIT PRIORITY AND THE DEGENERATE EDIT (a source video is present)
- Edit following (18) is its own criterion with importance "high"; with a subject too, inserted-subject
  identity (21) is also "high".
- Its question asks whether the edited content is a natural, stable, well-integrated, MOVING part of the
  scene across all sampled frames, in contrast to a result that is present but not integrated (a
  static overlay or pasted cut-out, a heavily warped region, per-frame flicker, a garbled blob that does
  not move with the scene), which scores low.
- Preservation criteria (19, and any criterion about background / scene / structure / motion
  preservation, temporal consistency or unchanged regions) have importance at most "medium", and their
  text says that an output nearly identical to the source, frozen or trivially changed did not perform
  the edit and must not score high on preservation.
- Add one hard criterion under dimension 18 for edit degeneracy, hard_cap 2: the output is nearly
  unchanged from the source, frozen, the edit was not performed, or it is present only as a degenerate
  artifact (a static overlay or pasted cut-out, heavy warping, per-frame flicker, a garbled blob that
  does not move with the scene).
- Caps on editing inputs: 2 for a fundamental edit failure (edit absent, wrong inserted identity, a
  must-preserve region destroyed), 4 for severe but partial, 6 only for non-edit mild fundamental
  failures.

ANSWER with one JSON object and nothing else (no prose, no code fence):
{{"task_understanding": "one sentence",
 "dimensions_considered": [{{"dimension": 1, "included": true, "reason": "one line"}}, ... all 22 ...],
 "criteria": [{{"id": "snake_case_id", "dimension": 1, "criterion": "...", "type": "hard|soft",
   "importance": "high|medium|low", "scoring_rule": "...", "hard_cap": 2|4|6|null, "fail_threshold": 5,
   "failure_modes": ["..."], "derivable_from": "prompt|input_bundle",
   "evidence_plan": {{"target_entity": "...", "detector_query": "...", "tool_sequence": [...],
     "reference_source": "subject_image|first_frame|source_video|web_search|none", "web_search_query": "",
     "aggregation": "how the evidence maps to 0-10", "notes": ""}}}}]}}"""


def input_message(inst: InputInstance, storage=None) -> dict[str, Any]:
    """The user turn: what the input contains, the prompt verbatim, and each condition's frames by role.

    It states facts only (which inputs are present); the rules live in :func:`system_prompt`."""
    present = {"first_frame": inst.first_frame is not None, "subject": bool(inst.subject_images),
               "source": inst.source_video is not None}
    allowed = [d for d in DIMENSIONS if applicable(d, first_frame=present["first_frame"],
                                                     subject=present["subject"], source=present["source"])]
    n_subjects = len(inst.subject_images)
    parts: list[Any] = [
        f"Task: {inst.task.value} (a label only; the inputs below decide).",
        "Inputs present: "
        f"first frame: {'yes' if present['first_frame'] else 'no'}; "
        f"subject images: {n_subjects}; source video: {'yes' if present['source'] else 'no'}.",
        f"Dimensions whose input is present (the others are not applicable): {allowed}.",
        f"{'Edit instruction' if present['source'] else 'Prompt'} (verbatim): {inst.prompt}",
    ]
    if inst.first_frame:
        parts += ["[first_frame] the image the video must start from:", load_image(inst.first_frame, storage=storage)]
    for i, path in enumerate(inst.subject_images, start=1):
        parts += [f"[subject_image {i}] the subject whose identity must be kept:", load_image(path, storage=storage)]
    if inst.source_video:
        frames = VideoReader(inst.source_video, storage=storage).sample(RUBRIC_POLICY)
        times = ", ".join(f"{t:.1f}s" for t in frames.timestamps)
        parts.append(f"[source_video] {len(frames.array)} frames sampled at 2 fps (t = {times}):")
        parts += frames.images()
    parts.append("Write the rubric for this input now, as one JSON object.")
    return {"role": "user", "content": parts}


def rule_problems(rubric: Rubric, inst: InputInstance) -> list[str]:
    """The §4 rules a rubric can be checked against without judgment, each named so it can be fixed."""
    first_frame, subject, source = inst.first_frame is not None, bool(inst.subject_images), inst.source_video is not None
    out = []
    for c in rubric.criteria:
        if not applicable(c.dimension, first_frame=first_frame, subject=subject, source=source):
            out.append(f"criterion {c.id!r} field 'dimension': {c.dimension} ({DIMENSIONS[c.dimension]}) needs an "
                       "input this one does not have; remove the criterion or use a general dimension")
        if c.type == "hard" and c.hard_cap is None:
            out.append(f"criterion {c.id!r} field 'hard_cap': a hard criterion needs a cap of 2, 4 or 6")
        if c.type == "soft" and c.hard_cap is not None:
            out.append(f"criterion {c.id!r} field 'hard_cap': a soft criterion has hard_cap null")
    n_hard = sum(c.type == "hard" for c in rubric.criteria)
    if n_hard > 2:
        out.append(f"rubric: {n_hard} hard criteria; at most 2 (make the others soft)")
    missing = sorted(set(DIMENSIONS) - {d.dimension for d in rubric.dimensions_considered})
    if missing:
        out.append(f"rubric field 'dimensions_considered': dimensions {missing} are not reported (report all 22)")
    if source and not any(c.dimension == 18 and c.type == "hard" and c.hard_cap == 2 for c in rubric.criteria):
        out.append("rubric: a source video is present but there is no hard degenerate-edit criterion under "
                   "dimension 18 with hard_cap 2")
    return out


class _Invalid(ParseError):
    def __init__(self, problems: list[str]):
        self.problems = problems
        listed = "\n".join(f"- {p}" for p in problems[:20])
        more = f"\n- ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"the rubric failed validation on {len(problems)} point(s):\n{listed}{more}\n"
                         "Fix exactly these and answer with the whole rubric again")


class _Validator:
    """Schema and rule validation of each answer. Before the last answer, any failure is sent back
    for repair. The last answer is read the way a loaded rubric is (:mod:`.lenient`: coerced where the
    meaning is obvious, unreadable criteria left out), and a rule it still breaks is accepted
    (post-processing and plan normalization repair what they can); both are recorded."""

    def __init__(self, inst: InputInstance, attempts: int):
        self.inst = inst
        self.left = attempts
        self.accepted_problems: list[str] = []

    def __call__(self, text: str) -> Rubric:
        self.left -= 1
        data = extract_json(text)
        coerced: list[str] = []
        try:
            rubric = parse_rubric(data)
        except RubricError as exc:
            if self.left > 0:
                raise _Invalid(exc.problems) from None
            try:
                rubric, coerced = read_rubric(data)
            except RubricError:
                raise _Invalid(exc.problems) from None
        problems = [f"read leniently: {c}" for c in coerced] + rule_problems(rubric, self.inst)
        if problems and self.left > 0:
            raise _Invalid(problems)
        self.accepted_problems = problems
        return rubric


def request_text(messages: list[dict[str, Any]]) -> str:
    """What the generator was told, as text (images stand as ``[image]``): for the report."""
    out = []
    for m in messages:
        parts = m["content"] if isinstance(m["content"], list) else [m["content"]]
        text = "\n".join(p if isinstance(p, str) else "[image]" for p in parts)
        out.append(f"--- {m['role']} ---\n{text}")
    return "\n".join(out)


def generate_with_vlm(inst: InputInstance, client: VlmClient, *, stats: CallStats | None = None,
                      parse_retries: int = 1, max_tokens: int = MAX_OUTPUT_TOKENS, storage=None) -> Rubric:
    """Ask the VLM for ``inst``'s rubric; a repair round names every field and rule that failed.
    The input's media at ``s3://`` URIs are read through ``storage`` (the storage resource's).

    The rubric's ``generator`` block keeps what the generator was told (``instruction``, ``request``),
    so a report can show it. Raises :class:`RubricError` naming what was wrong, or when no answer came.
    """
    try:
        messages = [{"role": "system", "content": [system_prompt()]}, input_message(inst, storage)]
    except MediaError as exc:
        raise RubricError([f"cannot read the input's media for the generator: {exc}"], f"input {inst.id!r}") from None
    validate = _Validator(inst, parse_retries + 1)
    try:
        rubric, _ = chat_json(client, messages, validate, parse_retries=parse_retries, max_tokens=max_tokens,
                              stats=stats)
    except ParseError as exc:
        raise RubricError([f"generated rubric unusable after {parse_retries} repair(s): {exc}"],
                          f"input {inst.id!r}") from None
    except VlmError as exc:
        raise RubricError([f"rubric generation failed: {exc}"], f"input {inst.id!r}") from None
    rubric.generator = {"backend": client.backend, "model": client.model, "prompt_version": PROMPT_VERSION,
                        "input_hash": inst.content_hash,
                        "identity": record_key(rubric_identity(inst, rubric_request(client, max_tokens))),
                        "instruction": messages[0]["content"][0],
                        "request": request_text(messages[1:])}
    if validate.accepted_problems:
        rubric.generator["rule_problems"] = validate.accepted_problems
    return rubric


def rubric_request(client: Any, max_tokens: int = MAX_OUTPUT_TOKENS) -> VlmCall:
    """The generator's request on ``client`` (anything with the client's ``backend``, ``model`` and
    answer limits): model, instructions, budget."""
    return vlm_call(client, prompt_version=PROMPT_VERSION, prompt=system_prompt(), max_tokens=max_tokens,
                    thinking=None)


def rubric_identity(inst: InputInstance, request: VlmCall) -> RubricIdentity:
    """What a generated rubric depends on: the input's content and the generator's request."""
    return RubricIdentity(input_hash=inst.content_hash, call=request, sampling=SAMPLING_ID)


def generator_identity(client_backend: str, model: str, request: VlmCall | None = None) -> dict[str, Any]:
    """Who writes rubrics; with ``request``, a frozen rubric whose ``identity`` differs from this
    input's :func:`rubric_identity` under it is written again."""
    out: dict[str, Any] = {"backend": client_backend, "model": model, "prompt_version": PROMPT_VERSION}
    if request is not None:
        out["call"] = asdict(request)
    return out


__all__ = ["MAX_OUTPUT_TOKENS", "PROMPT_VERSION", "generate_with_vlm", "generator_identity", "input_message",
           "request_text", "rubric_identity", "rubric_request", "rule_problems", "system_prompt"]
