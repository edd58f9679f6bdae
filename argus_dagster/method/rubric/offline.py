"""A deterministic rubric generator for use without an LLM.

It follows the rules of method §2-§4 as far as rules can: criteria come from the conditions present
(first frame, subject images, source video) and from what the prompt states literally (quoted text,
counts, spatial relations, camera moves, styles). Entities, their attributes and their counts are
the prompt's noun phrases as an English parser reads them (:mod:`.phrases`), not word patterns. It
never sees a candidate. Plans use the method's tools as the VLM generator would: identity, first-frame
fidelity and preservation compare against ``reference`` (the matching input medium) with ``dino_sim``
beside the CPU measures, geometric tools follow a ``vlm_qa`` step. A rubric describes what to check,
not what the current environment can check: normalization drops what it lacks (method §6).
"""

from __future__ import annotations

import re
from typing import Any

from argus_dagster.method.inputs import InputInstance, Task
from argus_dagster.method.rubric.phrases import Phrase, main_phrase, noun_phrases
from argus_dagster.method.rubric.postprocess import postprocess
from argus_dagster.method.rubric.schema import Rubric, parse_rubric
from argus_dagster.method.rubric.taxonomy import DIMENSIONS, applicable

PROMPT_VERSION = "offline-5"
GENERATOR = {"backend": "offline", "model": "rules", "prompt_version": PROMPT_VERSION}

# A quote mark opens/closes only at a word boundary, so apostrophes ("the dog's bed") are not quotes.
_QUOTED = re.compile(r"(?<!\w)[\"“']([^\"”']{2,60})[\"”'](?!\w)")
# The stated relation and whether the entity named first is the left/front one of the claim.
_SPATIAL = {
    "left_right": re.compile(r"\b(?:to|on|at) the (left|right) of\b|\b(left|right) of\b", re.I),
    "front_back": re.compile(r"\b(in front of|behind)\b", re.I),
    # No geometric tool measures above/below: a vlm_qa question alone.
    "above_below": re.compile(r"\b(on (?:the )?top of|on (?:the )?bottom of|above|below|underneath|beneath)\b", re.I),
}
_GEOMETRIC_RELATIONS = ("left_right", "front_back")
_RELATION_WORDS = {"left_right": "left of", "front_back": "in front of", "above_below": "above"}
_CAMERA = re.compile(r"\b(zoom(s|ing)? (in|out)|zoom|pan(s|ning)?|tilt(s|ing)?|dolly|tracking shot|orbit(s|ing)?|camera)\b", re.I)
_STYLE = re.compile(r"\b(in the style of [\w\s]+|[\w]+ style|watercolou?r|cartoon|anime|oil painting|sketch|pixel art|"
                    r"black[- ]and[- ]white|sepia|cinematic|claymation|3d render|vintage|noir)\b", re.I)


def main_entity(prompt: str) -> str:
    """The entity the prompt is about: its subject noun phrase, as the parser reads it."""
    main = main_phrase(noun_phrases(prompt, skip_spans=tuple(_QUOTED.findall(prompt))))
    return main.text if main else "main subject"


def _spatial_entities(prompt: str, phrases: list[Phrase], relation: str, m: re.Match) -> list[str] | None:
    """The two phrases around a stated relation, in the order the tool's claim reads them."""
    before = [ph for ph in phrases if ph.start < m.start()]
    after = [ph for ph in phrases if ph.start >= m.end()]
    if not before or not after:
        return None
    a, b = before[-1].text, after[0].text
    word = m.group(0).lower()
    # "a on the right of b" is "b left of a"; "a below b" is "b above a"
    flipped = any(w in word for w in ("right", "behind", "bottom", "below", "beneath", "underneath"))
    return [b, a] if flipped else [a, b]


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


def _dino(a: str, b: str = "reference") -> dict:
    return {"tool": "dino_sim", "args": {"a": a, "b": b}}


def generate_offline(inst: InputInstance) -> Rubric:
    """Write the rubric for ``inst`` from its conditions and the prompt's literal statements."""
    task = inst.task
    p = inst.prompt
    quoted = _QUOTED.findall(p)
    phrases = noun_phrases(p, skip_spans=tuple(quoted))
    main = main_phrase(phrases)
    entity = main.text if main else "main subject"
    has_ff, has_subj, has_src = task == Task.TI2V, task in (Task.TS2V, Task.TSV2V), task.is_editing
    crit: list[dict[str, Any]] = []
    ids: set[str] = set()

    def add(c: dict[str, Any]) -> None:
        while c["id"] in ids:
            c["id"] += "_2"
        ids.add(c["id"])
        crit.append(c)

    if not has_src:
        add(_criterion(
            "entity_presence", 1, f"The {entity} named in the prompt is present and clearly visible.",
            importance="high", kind="hard", cap=4, target=entity,
            rule=_rule(f"the {entity} is clearly present throughout", "present but partly wrong or briefly",
                       f"no {entity} appears"),
            failure_modes=[f"{entity} missing", f"wrong kind of {entity}"],
            tools=[_qa(f"Is there a {entity} clearly visible in the video? Describe it."),
                   {"tool": "sam_track", "args": {"query": entity, "on": "output_video"}}]))
        # Every other salient entity named gets its own presence check (a counted one is checked by its count).
        for ph in [x for x in phrases if x is not main and not x.count][:3]:
            add(_criterion(
                f"presence_{ph.key}", 1, f"The {ph.text} named in the prompt appears.", importance="medium",
                target=ph.text, rule=_rule(f"the {ph.text} is clearly visible", "barely or briefly visible",
                                           f"no {ph.text}"),
                failure_modes=[f"{ph.text} missing"],
                tools=[_qa(f"Is there a {ph.text} in the video?"),
                       {"tool": "sam_track", "args": {"query": ph.text, "on": "output_video"}}]))
        salient = [main] + [x for x in phrases if x is not main][:3] if main else []
        for ph in [x for x in salient if x.attributes]:
            attrs = " and ".join(ph.attributes)
            add(_criterion(
                f"attribute_{ph.key}", 2, f"The {ph.head} is {attrs}, as the prompt binds it: the attribute "
                f"belongs to the {ph.head}, not to another object.", importance="high", target=ph.text,
                rule=_rule(f"the {ph.head} is clearly {attrs}", "partly, or the attribute drifts",
                           f"the {ph.head} is not {attrs}, or another object is"),
                failure_modes=[f"{ph.head} not {attrs}", "attribute on the wrong object"],
                tools=[_qa(f"What does the {ph.head} look like? Is it {attrs}?")]))
    for i, qtext in enumerate(quoted):
        add(_criterion(
            f"text_{i}", 7, f"The on-screen text reads exactly \"{qtext}\".", importance="high",
            target=qtext, rule=_rule("the text is legible and spelled exactly", "partly legible or misspelled",
                                     "no such text"),
            failure_modes=["text missing", "garbled letters", "misspelling"],
            tools=[{"tool": "ocr", "args": {"on": "output_video", "target": qtext}}]))
    for ph in [x for x in phrases if x.count]:
        n, noun = ph.count, ph.text
        add(_criterion(
            f"count_{ph.key}", 3, f"Exactly {n} {noun} are visible.", importance="high", target=noun,
            rule=_rule(f"exactly {n} {noun} throughout", "the count is off by one or changes", "count clearly wrong"),
            failure_modes=["wrong count", "count changes over time"],
            tools=[_qa(f"How many {noun} are visible? Expected {n}."),
                   {"tool": "spatial_relation", "args": {"on": "output_video", "entities": noun, "relation": "count"}}]))
    for relation, rx in _SPATIAL.items():
        m = rx.search(p)
        pair = _spatial_entities(p, phrases, relation, m) if m else None
        if m:
            steps = [_qa(f"Does this hold in the video: {m.group(0)}? Which object is where?")]
            if pair and relation in _GEOMETRIC_RELATIONS:
                steps.append({"tool": "spatial_relation", "args": {"on": "output_video", "entities": ", ".join(pair),
                                                                   "relation": relation}})
            add(_criterion(
                f"spatial_{relation}", 4, f"The spatial relation stated in the prompt holds: '{m.group(0)}'"
                + (f" ({pair[0]} {_RELATION_WORDS[relation]} {pair[1]})." if pair else "."),
                importance="high", target=", ".join(pair) if pair else entity,
                rule=_rule("the relation holds in every frame", "holds in some frames", "the relation is reversed or absent"),
                failure_modes=["relation reversed", "entities missing"], tools=steps))
    camera = _CAMERA.search(p)
    if camera:
        add(_criterion(
            "camera_motion", 10, f"The camera moves as the prompt states ({camera.group(0)}).",
            importance="medium", rule=_rule("the stated camera move is clear and steady", "a different or weak move",
                                            "static or contrary camera"),
            failure_modes=["static camera", "wrong direction"],
            tools=[{"tool": "motion_probe", "args": {"on": "output_video"}}, _qa("Describe the camera motion.")]))
    style = _STYLE.search(p)
    if style:
        add(_criterion(
            "style", 14, f"The video has the requested style: {style.group(0)}.", importance="medium",
            rule=_rule("the style is unmistakable throughout", "partly or inconsistently styled", "no trace of the style"),
            failure_modes=["style missing", "style drifts"],
            tools=[_qa(f"Is the video rendered in this style: {style.group(0)}?")]))

    if has_ff:
        add(_criterion(
            "first_frame_fidelity", 16, "The video starts from the given first frame: same content, layout and colours.",
            importance="medium", reference="first_frame", derivable="input_bundle",
            rule=_rule("the opening frame matches the given image", "recognizably the image but altered",
                       "a different image"),
            failure_modes=["different opening content", "colour shift", "layout change"],
            tools=[{"tool": "ssim_compare", "args": {"a": "first_frame", "b": "output_video"}}, _dino("output_video")]))
        add(_criterion(
            "motion_from_first_frame", 9, "Starting from the first frame, the scene moves as the prompt asks; "
            "a video frozen on the first frame fails.", importance="high", derivable="input_bundle",
            rule=_rule("clear, natural motion from the first frame", "little or unnatural motion", "frozen"),
            failure_modes=["frozen on the first frame", "jerky motion"],
            tools=[{"tool": "motion_probe", "args": {"on": "output_video"}},
                   _qa("Does the scene move naturally from its first frame as described?")]))
    elif not has_src:
        add(_criterion(
            "motion_quality", 9, f"The {entity} and scene move in the way the prompt describes; motion is "
            "present, continuous and plausible.", importance="high",
            rule=_rule("clear, continuous, plausible motion", "weak or partly implausible motion", "no motion"),
            failure_modes=["frozen video", "stutter", "implausible motion"],
            tools=[{"tool": "motion_probe", "args": {"on": "output_video"}},
                   _qa("Is the motion continuous and physically plausible?")]))

    # With a source video too, inserted_subject_identity (dimension 21) checks the same property with
    # the same evidence; one merged criterion keeps the rubric at most 2 hard criteria (method §4).
    if has_subj and not has_src:
        add(_criterion(
            "subject_identity", 17, "The subject of the reference image appears with the same identity "
            "(shape, colours, distinctive details).", importance="high", kind="hard", cap=4,
            target="the reference subject", query="main subject", reference="subject_image", derivable="input_bundle",
            rule=_rule("unmistakably the same subject", "similar but with changed details", "a different subject or absent"),
            failure_modes=["identity drift", "subject missing", "generic look-alike"],
            tools=[{"tool": "sam_track", "args": {"query": "main subject", "on": "output_video"}},
                   {"tool": "crop_compare", "args": {"crop_from": "output_video", "region": "main subject"}},
                   _dino("output_crop"),
                   _qa("Is the subject in the video the same as the one in the reference image?")]))

    if has_src:
        add(_criterion(
            "edit_following", 18, f"The edit instruction is carried out: {p}", importance="high",
            derivable="input_bundle", reference="source_video",
            rule=_rule("the requested edit is fully and visibly applied", "partly applied", "not applied"),
            failure_modes=["edit not applied", "wrong edit", "edit only on some frames"],
            tools=[{"tool": "change_probe", "args": {"a": "source_video", "b": "output_video", "instruction": p}},
                   _qa(f"Compared with the source, has this edit been applied: {_quote(p)}")]))
        add(_criterion(
            "source_preservation", 19, "Content the instruction does not touch is preserved from the source "
            "(layout, objects, background). An output nearly identical to the source, frozen or trivially changed "
            "did not perform the edit and must not score high here.", importance="medium", reference="source_video",
            derivable="input_bundle",
            rule=_rule("everything outside the edit is preserved", "noticeable unintended changes", "the source is lost"),
            failure_modes=["background replaced", "objects lost"],
            tools=[{"tool": "ssim_compare", "args": {"a": "source_video", "b": "output_video"}}, _dino("output_video")]))
        add(_criterion(
            "structure_motion_preservation", 20, "The source's structure and motion carry over to the output. An "
            "output nearly identical to the source or frozen did not perform the edit and must not score high here.",
            importance="medium", reference="source_video", derivable="input_bundle",
            rule=_rule("same structure and motion as the source", "motion weakened or altered", "frozen or restructured"),
            failure_modes=["frozen output", "motion changed"],
            tools=[{"tool": "motion_probe", "args": {"on": "output_video"}},
                   {"tool": "ssim_compare", "args": {"a": "source_video", "b": "output_video"}}]))
        add(_criterion(
            "degenerate_edit", 18, "The output is a real edit: it changes the source about as much as the "
            "instruction asks (not nearly unchanged), is not frozen, and the edit is not present only as a "
            "static overlay, warp or flicker.", importance="high", kind="hard",
            cap=2, reference="source_video", derivable="input_bundle", aggregation="worst of the measures",
            rule=_rule("a genuine, temporally coherent edit", "a weak or partly degenerate edit",
                       "unchanged source, frozen frames or flicker"),
            failure_modes=["output equals source", "frozen", "static overlay", "flicker"],
            tools=[_qa("Compared with the source, is the edit a natural, stable, moving part of the scene in every "
                       "frame, or is the output nearly unchanged, frozen, or the edit only a static overlay, a warp, "
                       "a flicker or a garbled blob?"),
                   {"tool": "change_probe", "args": {"a": "source_video", "b": "output_video", "instruction": p,
                                                     "check": "degenerate"}},
                   {"tool": "motion_probe", "args": {"on": "output_video"}},
                   {"tool": "flicker_probe", "args": {"on": "output_video"}}]))
        if has_subj:
            add(_criterion(
                "inserted_subject_identity", 21, "The subject inserted by the edit has the reference subject's identity.",
                importance="high", kind="hard", cap=4, target="the reference subject", query="main subject",
                reference="subject_image", derivable="input_bundle",
                rule=_rule("the inserted subject is unmistakably the reference", "similar with changed details",
                           "a different subject or none inserted"),
                failure_modes=["identity drift", "not inserted"],
                tools=[{"tool": "sam_track", "args": {"query": "main subject", "on": "output_video"}},
                       {"tool": "crop_compare", "args": {"crop_from": "output_video", "region": "main subject"}},
                       _dino("output_crop")]))
            add(_criterion(
                "compositing", 22, "The inserted subject is composited naturally: lighting, scale and edges match the scene.",
                importance="medium", derivable="input_bundle",
                rule=_rule("seamless composite", "visible seams or lighting mismatch", "pasted-on look"),
                failure_modes=["hard edges", "lighting mismatch", "wrong scale"],
                tools=[_qa("Does the inserted subject blend naturally with the scene?"),
                       {"tool": "aesthetic", "args": {"on": "output_video"}}]))

    add(_criterion(
        "temporal_stability", 12, "The video is temporally stable: no flicker, popping, brightness jumps, jumps or stutter.",
        importance="medium",
        aggregation="worst of the measures",
        rule=_rule("perfectly stable", "occasional flicker or jumps", "constant flicker"),
        failure_modes=["brightness flicker", "colour popping", "frames out of order", "jumps or stutter"],
        tools=[_qa("Does the video flicker, pop or jump in brightness or colour, or stutter, anywhere?"),
               {"tool": "flicker_probe", "args": {"on": "output_video"}},
               {"tool": "motion_probe", "args": {"on": "output_video"}}]))
    add(_criterion(
        "visual_quality", 13, "Frames are sharp, clean and well exposed, free of blur, noise and artifacts.",
        importance="medium",
        rule=_rule("crisp, clean frames", "soft, noisy or partly degraded", "heavily blurred or noisy"),
        failure_modes=["blur", "noise", "compression artifacts"],
        tools=[{"tool": "aesthetic", "args": {"on": "output_video"}}]))
    add(_criterion(
        "overall_alignment", 15, f"Overall, the video matches the prompt: {p}", importance="high",
        rule=_rule("every stated element is realized", "the gist is right, details wrong", "unrelated to the prompt"),
        failure_modes=["missing elements", "contradicts the prompt"],
        tools=[_qa(f"How well does the video match this prompt: {_quote(p)}")]))
    if not has_src:
        add(_criterion(
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
