"""A deterministic rubric generator for use without an LLM.

It follows the rules of method §2-§4 as far as rules can: criteria come from the conditions present
(first frame, subject images, source video) and from what the prompt states literally (quoted text,
counts, spatial relations, camera moves, styles). It never sees a candidate. Criteria it cannot
measure without a VLM still get a ``vlm_qa`` plan: a rubric describes what to check, not what the
current environment can check.
"""

from __future__ import annotations

import re
from typing import Any

from ..instances import InputInstance, Task
from .postprocess import postprocess
from .schema import Rubric, parse_rubric
from .taxonomy import DIMENSIONS, applicable

PROMPT_VERSION = "offline-3"
GENERATOR = {"backend": "offline", "model": "rules", "prompt_version": PROMPT_VERSION}

_NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
# A quote mark opens/closes only at a word boundary, so apostrophes ("the dog's bed") are not quotes.
_QUOTED = re.compile(r"(?<!\w)[\"“']([^\"”']{2,60})[\"”'](?!\w)")
_COUNT = re.compile(r"\b(two|three|four|five|six|seven|eight|nine|ten|\d{1,2})\s+([a-z]+)", re.IGNORECASE)
_SPATIAL = {
    "left_right": re.compile(r"\b(to the (left|right) of|on the (left|right) of|left of|right of)\b", re.I),
    "front_back": re.compile(r"\b(in front of|behind|occlud\w*)\b", re.I),
}
_CAMERA = re.compile(r"\b(zoom(s|ing)? (in|out)|zoom|pan(s|ning)?|tilt(s|ing)?|dolly|tracking shot|orbit(s|ing)?|camera)\b", re.I)
_STYLE = re.compile(r"\b(in the style of [\w\s]+|watercolou?r|cartoon|anime|oil painting|sketch|pixel art|"
                    r"black[- ]and[- ]white|sepia|cinematic|claymation|3d render|vintage|noir)\b", re.I)
_ARTICLE_NP = re.compile(r"\b(?:a|an|the)\s+((?:[a-z-]+\s){0,2}[a-z-]+)", re.I)
_STOP = {"is", "are", "was", "walks", "runs", "rides", "moves", "with", "in", "on", "at", "of", "and", "while",
         "that", "which", "slowly", "quickly", "into", "from", "to", "over", "under", "near", "by"}


def main_entity(prompt: str) -> str:
    """The first noun phrase after an article, trimmed at the first function word or verb."""
    m = _ARTICLE_NP.search(prompt)
    if not m:
        words = re.findall(r"[A-Za-z-]+", prompt)
        return " ".join(words[:2]).lower() or "the main subject"
    words = []
    for w in m.group(1).split():
        if w.lower() in _STOP:
            break
        words.append(w.lower())
    return " ".join(words) or "the main subject"


def _rule(ten: str, five: str, zero: str) -> str:
    return f"10: {ten}. 5: {five}. 0: {zero}. Integer 0-10."


def _criterion(cid: str, dim: int, text: str, *, importance: str, rule: str, tools: list[dict],
               target: str = "", query: str = "", kind: str = "soft", cap: int | None = None,
               failure_modes: list[str] | None = None, reference: str = "none",
               aggregation: str = "mean of the measures", derivable: str = "prompt") -> dict[str, Any]:
    return {
        "id": cid, "dimension": dim, "criterion": text, "type": kind, "importance": importance,
        "scoring_rule": rule, "hard_cap": cap, "fail_threshold": 5, "failure_modes": failure_modes or [],
        "derivable_from": derivable,
        "evidence_plan": {
            "target_entity": target, "detector_query": query or target, "tool_sequence": tools,
            "reference_source": reference, "web_search_query": "", "aggregation": aggregation, "notes": "",
        },
    }


def _quote(prompt: str) -> str:
    """A prompt inside a question: quoted, so its own final stop does not run into the question mark."""
    return f"\"{prompt.strip()}\"?"


def _qa(question: str, on: str = "output_video") -> dict:
    return {"tool": "vlm_qa", "args": {"question": question, "on": on}}


def generate_offline(inst: InputInstance) -> Rubric:
    """Write the rubric for ``inst`` from its conditions and the prompt's literal statements."""
    task = inst.task
    p = inst.prompt
    entity = main_entity(p)
    has_ff, has_subj, has_src = task == Task.TI2V, task in (Task.TS2V, Task.TSV2V), task.is_editing
    crit: list[dict[str, Any]] = []

    if not has_src:
        crit.append(_criterion(
            "entity_presence", 1, f"The {entity} named in the prompt is present and clearly visible.",
            importance="high", kind="hard", cap=4, target=entity,
            rule=_rule(f"the {entity} is clearly present throughout", "present but partly wrong or briefly",
                       f"no {entity} appears"),
            failure_modes=[f"{entity} missing", f"wrong kind of {entity}"],
            tools=[{"tool": "sam_track", "args": {"query": entity, "on": "output_video"}},
                   _qa(f"Is there a {entity} clearly visible in the video? Describe it.")]))
    for qtext in _QUOTED.findall(p):
        crit.append(_criterion(
            f"text_{len(crit)}", 7, f"The on-screen text reads exactly \"{qtext}\".", importance="high",
            target=qtext, rule=_rule("the text is legible and spelled exactly", "partly legible or misspelled",
                                     "no such text"),
            failure_modes=["text missing", "garbled letters", "misspelling"],
            tools=[{"tool": "ocr", "args": {"on": "output_video", "target": qtext}}]))
    for word, noun in _COUNT.findall(p):
        n = _NUMBER_WORDS.get(word.lower(), word)
        crit.append(_criterion(
            f"count_{noun.replace(' ', '_').lower()}", 3, f"Exactly {n} {noun} are visible.",
            importance="high", target=noun,
            rule=_rule(f"exactly {n} {noun} throughout", "the count is off by one or changes", "count clearly wrong"),
            failure_modes=["wrong count", "count changes over time"],
            tools=[{"tool": "spatial_relation", "args": {"on": "output_video", "entities": noun, "relation": "count"}},
                   _qa(f"How many {noun} are visible? Expected {n}.")]))
    for relation, rx in _SPATIAL.items():
        m = rx.search(p)
        if m:
            crit.append(_criterion(
                f"spatial_{relation}", 4, f"The spatial relation stated in the prompt holds: '{m.group(0)}'.",
                importance="high", target=entity,
                rule=_rule("the relation holds in every frame", "holds in some frames", "the relation is reversed or absent"),
                failure_modes=["relation reversed", "entities missing"],
                tools=[{"tool": "spatial_relation", "args": {"on": "output_video", "entities": entity, "relation": relation}},
                       _qa(f"Does this hold in the video: {m.group(0)}?")]))
    if _CAMERA.search(p):
        crit.append(_criterion(
            "camera_motion", 10, f"The camera moves as the prompt states ({_CAMERA.search(p).group(0)}).",
            importance="medium", rule=_rule("the stated camera move is clear and steady", "a different or weak move",
                                            "static or contrary camera"),
            failure_modes=["static camera", "wrong direction"],
            tools=[{"tool": "motion_probe", "args": {"on": "output_video"}}, _qa("Describe the camera motion.")]))
    style = _STYLE.search(p)
    if style:
        crit.append(_criterion(
            "style", 14, f"The video has the requested style: {style.group(0)}.", importance="medium",
            rule=_rule("the style is unmistakable throughout", "partly or inconsistently styled", "no trace of the style"),
            failure_modes=["style missing", "style drifts"],
            tools=[_qa(f"Is the video rendered in this style: {style.group(0)}?")]))

    if has_ff:
        crit.append(_criterion(
            "first_frame_fidelity", 16, "The video starts from the given first frame: same content, layout and colours.",
            importance="medium", reference="first_frame", derivable="input_bundle",
            rule=_rule("the opening frame matches the given image", "recognizably the image but altered",
                       "a different image"),
            failure_modes=["different opening content", "colour shift", "layout change"],
            tools=[{"tool": "ssim_compare", "args": {"a": "first_frame", "b": "output_video"}}]))
        crit.append(_criterion(
            "motion_from_first_frame", 9, "Starting from the first frame, the scene moves as the prompt asks; "
            "a video frozen on the first frame fails.", importance="high", derivable="input_bundle",
            rule=_rule("clear, natural motion from the first frame", "little or unnatural motion", "frozen"),
            failure_modes=["frozen on the first frame", "jerky motion"],
            tools=[{"tool": "motion_probe", "args": {"on": "output_video"}},
                   _qa("Does the scene move naturally from its first frame as described?")]))
    elif not has_src:
        crit.append(_criterion(
            "motion_quality", 9, f"The {entity} and scene move in the way the prompt describes; motion is "
            "present, continuous and plausible.", importance="high",
            rule=_rule("clear, continuous, plausible motion", "weak or partly implausible motion", "no motion"),
            failure_modes=["frozen video", "stutter", "implausible motion"],
            tools=[{"tool": "motion_probe", "args": {"on": "output_video"}},
                   _qa("Is the motion continuous and physically plausible?")]))

    # With a source video too, inserted_subject_identity (dimension 21) checks the same property with
    # the same evidence; one merged criterion keeps the rubric at most 2 hard criteria (method §4).
    if has_subj and not has_src:
        crit.append(_criterion(
            "subject_identity", 17, "The subject of the reference image appears with the same identity "
            "(shape, colours, distinctive details).", importance="high", kind="hard", cap=4,
            target="the reference subject", query="main subject", reference="subject_image", derivable="input_bundle",
            rule=_rule("unmistakably the same subject", "similar but with changed details", "a different subject or absent"),
            failure_modes=["identity drift", "subject missing", "generic look-alike"],
            tools=[{"tool": "sam_track", "args": {"query": "main subject", "on": "output_video"}},
                   {"tool": "crop_compare", "args": {"crop_from": "output_video", "region": "main subject"}},
                   {"tool": "dino_sim", "args": {"a": "output_crop", "b": "subject_image"}},
                   _qa("Is the subject in the video the same as the one in the reference image?")]))

    if has_src:
        crit.append(_criterion(
            "edit_following", 18, f"The edit instruction is carried out: {p}", importance="high",
            derivable="input_bundle", reference="source_video",
            rule=_rule("the requested edit is fully and visibly applied", "partly applied", "not applied"),
            failure_modes=["edit not applied", "wrong edit", "edit only on some frames"],
            tools=[{"tool": "change_probe", "args": {"a": "source_video", "b": "output_video", "instruction": p}},
                   _qa(f"Compared with the source, has this edit been applied: {_quote(p)}")]))
        crit.append(_criterion(
            "source_preservation", 19, "Content the instruction does not touch is preserved from the source "
            "(layout, objects, background).", importance="medium", reference="source_video", derivable="input_bundle",
            rule=_rule("everything outside the edit is preserved", "noticeable unintended changes", "the source is lost"),
            failure_modes=["background replaced", "objects lost"],
            tools=[{"tool": "ssim_compare", "args": {"a": "source_video", "b": "output_video"}}]))
        crit.append(_criterion(
            "structure_motion_preservation", 20, "The source's structure and motion carry over to the output.",
            importance="medium", reference="source_video", derivable="input_bundle",
            rule=_rule("same structure and motion as the source", "motion weakened or altered", "frozen or restructured"),
            failure_modes=["frozen output", "motion changed"],
            tools=[{"tool": "motion_probe", "args": {"on": "output_video"}},
                   {"tool": "ssim_compare", "args": {"a": "source_video", "b": "output_video"}}]))
        crit.append(_criterion(
            "degenerate_edit", 18, "The output is a real edit: it changes the source about as much as the "
            "instruction asks (not nearly unchanged), is not frozen, and the edit is not present only as a "
            "static overlay, warp or flicker.", importance="high", kind="hard",
            cap=2, reference="source_video", derivable="input_bundle", aggregation="worst of the measures",
            rule=_rule("a genuine, temporally coherent edit", "a weak or partly degenerate edit",
                       "unchanged source, frozen frames or flicker"),
            failure_modes=["output equals source", "frozen", "static overlay", "flicker"],
            tools=[{"tool": "change_probe", "args": {"a": "source_video", "b": "output_video", "instruction": p,
                                                     "check": "degenerate"}},
                   {"tool": "motion_probe", "args": {"on": "output_video"}},
                   {"tool": "flicker_probe", "args": {"on": "output_video"}}]))
        if has_subj:
            crit.append(_criterion(
                "inserted_subject_identity", 21, "The subject inserted by the edit has the reference subject's identity.",
                importance="high", kind="hard", cap=4, target="the reference subject", query="main subject",
                reference="subject_image", derivable="input_bundle",
                rule=_rule("the inserted subject is unmistakably the reference", "similar with changed details",
                           "a different subject or none inserted"),
                failure_modes=["identity drift", "not inserted"],
                tools=[{"tool": "sam_track", "args": {"query": "main subject", "on": "output_video"}},
                       {"tool": "crop_compare", "args": {"crop_from": "output_video", "region": "main subject"}},
                       {"tool": "dino_sim", "args": {"a": "output_crop", "b": "subject_image"}}]))
            crit.append(_criterion(
                "compositing", 22, "The inserted subject is composited naturally: lighting, scale and edges match the scene.",
                importance="medium", derivable="input_bundle",
                rule=_rule("seamless composite", "visible seams or lighting mismatch", "pasted-on look"),
                failure_modes=["hard edges", "lighting mismatch", "wrong scale"],
                tools=[_qa("Does the inserted subject blend naturally with the scene?"),
                       {"tool": "aesthetic", "args": {"on": "output_video"}}]))

    crit.append(_criterion(
        "temporal_stability", 12, "The video is temporally stable: no flicker, popping, brightness jumps, jumps or stutter.",
        importance="medium",
        aggregation="worst of the measures",
        rule=_rule("perfectly stable", "occasional flicker or jumps", "constant flicker"),
        failure_modes=["brightness flicker", "colour popping", "frames out of order", "jumps or stutter"],
        tools=[{"tool": "flicker_probe", "args": {"on": "output_video"}},
               {"tool": "motion_probe", "args": {"on": "output_video"}}]))
    crit.append(_criterion(
        "visual_quality", 13, "Frames are sharp, clean and well exposed, free of blur, noise and artifacts.",
        importance="medium",
        rule=_rule("crisp, clean frames", "soft, noisy or partly degraded", "heavily blurred or noisy"),
        failure_modes=["blur", "noise", "compression artifacts"],
        tools=[{"tool": "aesthetic", "args": {"on": "output_video"}}]))
    crit.append(_criterion(
        "overall_alignment", 15, f"Overall, the video matches the prompt: {p}", importance="high",
        rule=_rule("every stated element is realized", "the gist is right, details wrong", "unrelated to the prompt"),
        failure_modes=["missing elements", "contradicts the prompt"],
        tools=[_qa(f"How well does the video match this prompt: {_quote(p)}")]))
    if not has_src:
        crit.append(_criterion(
            "physical_plausibility", 11, "Objects move and interact in a physically plausible way.",
            importance="medium",
            rule=_rule("fully plausible", "minor violations", "impossible physics throughout"),
            failure_modes=["objects merging", "impossible motion"],
            tools=[_qa("Is anything physically implausible in this video?")]))

    used = {c["dimension"] for c in crit}
    considered = [
        {"dimension": d, "included": d in used,
         "reason": ("a criterion checks it" if d in used else
                    "not applicable: its condition is absent" if not applicable(d, first_frame=has_ff, subject=has_subj, source=has_src)
                    else "the input states nothing specific to check")}
        for d in DIMENSIONS
    ]
    body = {
        "task_understanding": f"{task.value}: {p}",
        "dimensions_considered": considered,
        "criteria": crit,
        "generator": {**GENERATOR, "input_hash": inst.content_hash},
    }
    rubric = parse_rubric(body, f"offline rubric for {inst.id}")
    rubric, _ = postprocess(rubric, has_subject=has_subj, has_source=has_src)
    return rubric
