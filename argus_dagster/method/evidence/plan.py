"""Plan normalization (method §6): repair a criterion's evidence plan before any tool runs.

It works on a symbolic view of which media ids will exist (the input's conditions, the output video,
``reference`` when ``reference_source`` names one of the input's media, crops and retrieved references
registered by earlier steps), so it needs no model. ``reference`` resolves from the input before the
plan runs (the executor registers it, :attr:`NormalizedPlan.reference`); only a reference that was to
come from a search can be missing for lack of a tool. Rules run in the
method's order; every repair is logged with the rule that made it, and the plan is marked ``ok``,
``degraded`` (repaired, specialized evidence kept) or ``fallback`` (specialized evidence replaced by
a ``vlm_qa`` question).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from argus_dagster.method.evidence.vocabulary import CONDITION_MEDIA, TOOL_SPECS, crop_id_for
from argus_dagster.method.rubric.schema import Criterion

SOURCE_DIMENSIONS = frozenset({18, 19, 20})
# Argument names a plan may use to name a crop; crop ids belong to the executor.
_CROP_NAME_ARGS = ("as", "id", "name", "output", "output_id", "save_as", "register_as")


@dataclass
class NormalizedPlan:
    steps: list[dict[str, Any]]
    repairs: list[dict[str, str]] = field(default_factory=list)
    status: str = "ok"
    # The input medium `reference` stands for (first_frame, subject_image, source_video), or "none"
    # when it comes from a search step or not at all.
    reference: str = "none"

    def tools(self) -> list[str]:
        return [s["tool"] for s in self.steps]


def _question(c: Criterion) -> str:
    """A fallback question: the criterion with its failure modes, so the answer looks for them (§7)."""
    modes = [m.strip() for m in c.failure_modes if m and m.strip()]
    if not modes:
        return c.criterion
    return f"{c.criterion} Look specifically for these failures: {'; '.join(modes)}."


def normalize_plan(
    criterion: Criterion,
    *,
    present_media: set[str] | frozenset[str],
    available_tools: set[str] | frozenset[str] | None = None,
    web_search: bool = False,
    vlm_only: bool = False,
) -> NormalizedPlan:
    """Normalize ``criterion``'s evidence plan for an input whose condition media are ``present_media``.

    ``available_tools`` lists the tools this environment can run (None: all of the vocabulary);
    a step of a known but unavailable tool is replaced by a ``vlm_qa`` fallback.
    """
    plan = criterion.evidence_plan
    repairs: list[dict[str, str]] = []
    fallback = False

    def log(rule: str, detail: str) -> None:
        repairs.append({"rule": rule, "detail": detail})

    if vlm_only:
        steps: list[dict[str, Any]] = [{"tool": "vlm_qa", "args": {"question": _question(criterion), "on": "output_video"}}]
        log("vlm_only", "VLM-only ablation: the plan is one vlm_qa on the criterion")
        return NormalizedPlan(steps, repairs, "fallback")

    present = {m for m in present_media if m in CONDITION_MEDIA} | {"output_video"}
    available = set(TOOL_SPECS) if available_tools is None else set(available_tools)
    target = plan.target_entity or plan.detector_query or ""

    # 1. malformed or unknown steps; unavailable tools fall back to vlm_qa.
    steps = []
    for i, raw in enumerate(plan.tool_sequence):
        if not isinstance(raw, dict) or not isinstance(raw.get("tool"), str) or not raw["tool"].strip():
            log("malformed_step", f"dropped step {i}: not an object with a 'tool' name ({raw!r:.80})")
            continue
        name = raw["tool"].strip()
        args = raw.get("args", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            log("malformed_step", f"dropped step {i} ({name}): 'args' is not an object")
            continue
        flat = {k: v for k, v in raw.items() if k not in ("tool", "args")}
        if flat:
            args = {**flat, **args}
            log("malformed_step", f"step {i} ({name}): moved top-level keys {sorted(flat)} into args")
        if name not in TOOL_SPECS:
            log("unknown_tool", f"dropped step {i}: unknown tool {name!r}")
            continue
        if name != "web_search" and name not in available:
            log("tool_unavailable", f"dropped step {i}: {name} is not available in this environment")
            fallback = True
            continue
        steps.append({"tool": name, "args": dict(args)})

    # 2. an unresolvable reference source becomes none; one of the input's media makes `reference`.
    ref = plan.reference_source
    input_reference = ref in CONDITION_MEDIA and ref in present
    resolvable = ref == "none" or input_reference or (ref == "web_search" and web_search)
    reference_source = ref if resolvable else "none"
    if not resolvable:
        log("reference_source", f"reference_source {ref!r} cannot be resolved for this input; set to none")
    # `reference` was to come from a search: the plan says so, or it retrieves one itself.
    from_search = not input_reference and (ref == "web_search" or any(s["tool"] == "web_search" for s in steps))

    # 3. steps on an absent source video: dropped for dimensions 18-20, else retargeted to the output.
    kept = []
    for s in steps:
        spec = TOOL_SPECS[s["tool"]]
        media = [s["args"].get(a) for a in spec.media_args]
        absent_source = "source_video" not in present and any(m in ("source_video", "source_crop") for m in media)
        if absent_source:
            if criterion.dimension in SOURCE_DIMENSIONS:
                log("absent_source", f"dropped {s['tool']}: no source video (dimension {criterion.dimension})")
                continue
            for a in spec.media_args:
                if s["args"].get(a) in ("source_video", "source_crop"):
                    new = "output_video" if s["args"][a] == "source_video" else "output_crop"
                    log("absent_source", f"{s['tool']}.{a}: {s['args'][a]} -> {new} (no source video)")
                    s["args"][a] = new
        absent_cond = [m for m in (s["args"].get(a) for a in spec.media_args)
                       if m in CONDITION_MEDIA and m not in present]
        if absent_cond:
            log("absent_condition", f"dropped {s['tool']}: the input has no {absent_cond[0]}")
            fallback = True
            continue
        kept.append(s)
    steps = kept

    # 4. a reference from the input needs no retrieval; without web search, no retrieval, and only a
    # similarity against a reference that was to come from the search becomes a recognition question.
    if input_reference and any(s["tool"] == "web_search" for s in steps):
        steps = [s for s in steps if s["tool"] != "web_search"]
        log("input_reference", f"removed web_search: `reference` is the input's {ref}")
    if not web_search:
        kept = []
        for s in steps:
            spec = TOOL_SPECS[s["tool"]]
            if s["tool"] == "web_search":
                log("no_web_search", "removed web_search (no search backend configured)")
                continue
            operands = [s["args"].get(a) for a in spec.media_args]
            if from_search and spec.is_similarity and "reference" in operands:
                other = next((m for m in operands if m not in (None, "reference")), "output_video")
                entity = target or "the main subject"
                question = (f"Is {entity} in these frames recognizable as the real, specific {entity} "
                            f"the input refers to? Criterion: {criterion.criterion}")
                log("no_web_search", f"{s['tool']} against reference -> vlm_qa recognition question on {other}")
                s = {"tool": "vlm_qa", "args": {"question": question, "on": other}}
                fallback = True
            kept.append(s)
        steps = kept

    # 5. fill missing queries from the target entity, and default media arguments.
    for s in steps:
        spec, args = TOOL_SPECS[s["tool"]], s["args"]
        fills = {
            "vlm_qa": {"question": _question(criterion)},
            "sam_track": {"query": plan.detector_query or target},
            "crop_compare": {"region": plan.detector_query or target},
            "ocr": {"target": target},
            "depth_probe": {"query_a": plan.detector_query or target},
            "spatial_relation": {"entities": target},
            "web_search": {"query": plan.web_search_query or target},
        }.get(s["tool"], {})
        for key, value in {**fills, **spec.defaults}.items():
            if args.get(key) in (None, "", []) and value:
                args[key] = value
                log("fill_missing", f"{s['tool']}.{key} filled with {value!r:.60}")

    # 6. crop ids belong to the executor.
    for s in steps:
        if s["tool"] == "crop_compare":
            named = [k for k in _CROP_NAME_ARGS if k in s["args"]]
            for k in named:
                log("crop_ids", f"crop_compare.{k}={s['args'].pop(k)!r} removed; crops register as output_crop/source_crop")

    # 7 and 8. walk the plan with the symbolic media set: dangling operands are repaired, retrieval
    # moves before its first consumer.
    if any(s["tool"] == "web_search" for s in steps):
        retrieval = [s for s in steps if s["tool"] == "web_search"]
        first_consumer = next((i for i, s in enumerate(steps)
                               if "reference" in [s["args"].get(a) for a in TOOL_SPECS[s["tool"]].media_args]), None)
        first_retrieval = steps.index(retrieval[0])
        if first_consumer is not None and first_consumer < first_retrieval:
            rest = [s for s in steps if s["tool"] != "web_search"]
            steps = rest[:first_consumer] + retrieval + rest[first_consumer:]
            log("retrieval_order", "moved web_search before its first consumer")

    available_media = set(present) | ({"reference"} if input_reference else set())
    ref_media = reference_source if reference_source in CONDITION_MEDIA else None
    kept = []
    for s in steps:
        spec = TOOL_SPECS[s["tool"]]
        drop = False
        for a in spec.media_args:
            m = s["args"].get(a)
            if m is None and spec.is_similarity:
                m = ref_media if a == "b" and ref_media else "output_video"
                s["args"][a] = m
                log("dangling_operand", f"{s['tool']}.{a} missing -> {m}")
            if m in available_media:
                continue
            repl = {"output_crop": "output_video", "source_crop": "source_video"}.get(m)
            if repl in available_media:
                log("dangling_operand", f"{s['tool']}.{a}: {m} does not exist yet -> {repl}")
                s["args"][a] = repl
            else:
                log("dangling_operand", f"dropped {s['tool']}: operand {a}={m!r} will not exist")
                drop = True
        if spec.is_similarity and not drop and s["args"].get("a") == s["args"].get("b"):
            log("dangling_operand", f"dropped {s['tool']}: both operands are {s['args'].get('a')}")
            drop = True
        if drop:
            fallback = True
            continue
        if s["tool"] == "crop_compare":
            available_media.add(crop_id_for(s["args"].get("crop_from", "output_video")))
        if s["tool"] == "web_search":
            available_media.add("reference")
        kept.append(s)
    steps = kept

    # 9. a crop that nothing consumes gets a vlm_qa.
    for s in list(steps):
        if s["tool"] != "crop_compare":
            continue
        crop = crop_id_for(s["args"].get("crop_from", "output_video"))
        consumed = any(crop in [t["args"].get(a) for a in TOOL_SPECS[t["tool"]].media_args]
                       for t in steps[steps.index(s) + 1:])
        if not consumed:
            steps.insert(steps.index(s) + 1,
                         {"tool": "vlm_qa", "args": {"question": _question(criterion), "on": crop}})
            log("unconsumed_crop", f"added vlm_qa on {crop}, which nothing consumed")

    # Any fallback must leave the criterion a semantic question to answer.
    if fallback and steps and not any(s["tool"] == "vlm_qa" for s in steps):
        steps.append({"tool": "vlm_qa", "args": {"question": _question(criterion), "on": "output_video"}})
        log("fallback", "added vlm_qa on the criterion in place of the unavailable evidence")

    # 10. an empty plan becomes one vlm_qa on the criterion text.
    if not steps:
        steps = [{"tool": "vlm_qa", "args": {"question": _question(criterion), "on": "output_video"}}]
        log("empty_plan", "no executable step left: one vlm_qa on the criterion text")
        fallback = True

    status = "fallback" if fallback else ("degraded" if repairs else "ok")
    return NormalizedPlan(steps, repairs, status, ref if input_reference else "none")
