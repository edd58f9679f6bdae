"""Plan normalization (method §6), one test per rule in the method's order."""

from __future__ import annotations

import copy

from unit_helpers import make_criterion

from argus_dagster.method.evidence.plan import normalize_plan
from argus_dagster.method.evidence.vocabulary import TOOL_SPECS

T2V: frozenset[str] = frozenset()
TI2V = frozenset({"first_frame"})
TS2V = frozenset({"subject_image"})
TV2V = frozenset({"source_video"})
TSV2V = frozenset({"subject_image", "source_video"})


def crit(steps, dimension=1, **plan):
    return make_criterion("c", dimension=dimension, evidence_plan={"tool_sequence": steps, **plan})


def rules(plan):
    return [r["rule"] for r in plan.repairs]


def fallback_question(c):
    """What a fallback vlm_qa asks (method §7): the criterion with its failure modes."""
    return f"{c.criterion} Look specifically for these failures: {'; '.join(c.failure_modes)}."


def qa(question="Is there a red car?", on="output_video"):
    return {"tool": "vlm_qa", "args": {"question": question, "on": on}}


# --- a clean plan -------------------------------------------------------------------------------

def test_clean_plan_is_ok_without_repairs():
    c = crit([qa(), {"tool": "aesthetic", "args": {"on": "output_video"}}])
    p = normalize_plan(c, present_media=T2V)
    assert p.status == "ok" and p.repairs == []
    assert p.steps == [qa(), {"tool": "aesthetic", "args": {"on": "output_video"}}]
    assert p.tools() == ["vlm_qa", "aesthetic"]


def test_clean_identity_plan_with_crop_is_ok():
    steps = [{"tool": "sam_track", "args": {"query": "dog", "on": "output_video"}},
             {"tool": "crop_compare", "args": {"crop_from": "output_video", "region": "dog"}},
             {"tool": "dino_sim", "args": {"a": "output_crop", "b": "subject_image"}},
             qa("Same dog as the reference?")]
    p = normalize_plan(crit(steps, dimension=17, reference_source="subject_image"), present_media=TS2V)
    assert p.status == "ok" and p.repairs == []
    assert p.steps == steps


def test_normalization_does_not_mutate_the_criterion():
    steps = [{"tool": "sam_track", "args": {"on": "source_video"}},
             {"tool": "crop_compare", "args": {"crop_from": "output_video", "as": "my_crop"}}]
    c = crit(steps, dimension=2)
    before = copy.deepcopy(c.model_dump())
    p1 = normalize_plan(c, present_media=T2V)
    p2 = normalize_plan(c, present_media=T2V)
    assert c.model_dump() == before
    assert p1.steps == p2.steps and p1.repairs == p2.repairs


# --- 1. malformed or unknown steps ----------------------------------------------------------------

def test_malformed_steps_dropped():
    steps = ["vlm_qa please", {"args": {"on": "output_video"}}, {"tool": "  "},
             {"tool": "vlm_qa", "args": "output_video"}, qa()]
    p = normalize_plan(crit(steps), present_media=T2V)
    assert p.steps == [qa()]
    assert rules(p) == ["malformed_step"] * 4
    assert p.status == "degraded"


def test_flat_args_moved_into_args():
    steps = [{"tool": "ocr", "on": "output_video", "target": "OPEN"},
             {"tool": "vlm_qa", "question": "flat?", "args": {"question": "nested wins", "on": "output_video"}}]
    p = normalize_plan(crit(steps, dimension=7), present_media=T2V)
    assert p.steps[0] == {"tool": "ocr", "args": {"on": "output_video", "target": "OPEN"}}
    assert p.steps[1]["args"]["question"] == "nested wins"
    assert rules(p) == ["malformed_step", "malformed_step"]
    assert "moved top-level keys" in p.repairs[0]["detail"]
    assert p.status == "degraded"


def test_args_none_treated_as_empty():
    p = normalize_plan(crit([{"tool": "aesthetic", "args": None}]), present_media=T2V)
    assert p.steps == [{"tool": "aesthetic", "args": {"on": "output_video"}}]
    assert "malformed_step" not in rules(p)


def test_unknown_tool_dropped():
    p = normalize_plan(crit([{"tool": "teleport", "args": {}}, qa()]), present_media=T2V)
    assert p.steps == [qa()]
    assert rules(p) == ["unknown_tool"]
    assert "teleport" in p.repairs[0]["detail"]
    assert p.status == "degraded"


def test_unavailable_tool_replaced_by_vlm_qa_fallback():
    steps = [{"tool": "sam_track", "args": {"query": "red car", "on": "output_video"}},
             {"tool": "aesthetic", "args": {"on": "output_video"}}]
    c = crit(steps)
    p = normalize_plan(c, present_media=T2V, available_tools={"vlm_qa", "aesthetic"})
    assert p.status == "fallback"
    assert p.tools() == ["aesthetic", "vlm_qa"]
    assert p.steps[-1]["args"] == {"question": fallback_question(c), "on": "output_video"}
    assert rules(p) == ["tool_unavailable", "fallback"]


def test_only_unavailable_tool_becomes_single_vlm_qa():
    c = crit([{"tool": "depth_probe", "args": {"on": "output_video", "query_a": "cat"}}], dimension=4)
    p = normalize_plan(c, present_media=T2V, available_tools={"vlm_qa"})
    assert p.steps == [{"tool": "vlm_qa", "args": {"question": fallback_question(c), "on": "output_video"}}]
    assert p.status == "fallback"
    assert rules(p) == ["tool_unavailable", "empty_plan"]


# --- 2. unresolvable reference source ---------------------------------------------------------------

def test_unresolvable_reference_source_logged():
    for ref, media in [("subject_image", T2V), ("web_search", T2V), ("first_frame", TS2V), ("internet", T2V)]:
        p = normalize_plan(crit([qa()], reference_source=ref), present_media=media)
        assert rules(p) == ["reference_source"], ref
        assert repr(ref) in p.repairs[0]["detail"]
        assert p.status == "degraded"


def test_resolvable_reference_source_not_logged():
    for ref, media, web in [("subject_image", TS2V, False), ("web_search", T2V, True), ("none", T2V, False)]:
        p = normalize_plan(crit([qa()], reference_source=ref), present_media=media, web_search=web)
        assert p.repairs == [] and p.status == "ok", ref


# --- 3. steps on an absent source video ------------------------------------------------------------

def test_absent_source_step_dropped_for_source_dimensions():
    for dim in (18, 19, 20):
        steps = [{"tool": "change_probe", "args": {"a": "source_video", "b": "output_video"}},
                 {"tool": "motion_probe", "args": {"on": "output_video"}}]
        p = normalize_plan(crit(steps, dimension=dim), present_media=T2V)
        assert p.tools() == ["motion_probe"], dim
        assert rules(p) == ["absent_source"]
        assert p.status == "degraded"


def test_absent_source_step_retargeted_to_output_for_other_dimensions():
    steps = [qa("Is the car red?", on="source_video"),
             {"tool": "crop_compare", "args": {"crop_from": "source_video", "region": "car"}},
             qa("Is the crop red?", on="source_crop")]
    p = normalize_plan(crit(steps, dimension=2), present_media=T2V)
    assert p.steps[0] == qa("Is the car red?", on="output_video")
    assert p.steps[1]["args"]["crop_from"] == "output_video"
    assert p.steps[2] == qa("Is the crop red?", on="output_crop")
    assert rules(p) == ["absent_source"] * 3
    assert p.status == "degraded"


def test_source_steps_kept_when_source_present():
    steps = [{"tool": "change_probe", "args": {"a": "source_video", "b": "output_video"}}]
    p = normalize_plan(crit(steps, dimension=18), present_media=TV2V)
    assert p.steps == steps and p.status == "ok"


def test_absent_condition_step_dropped():
    steps = [{"tool": "ssim_compare", "args": {"a": "first_frame", "b": "output_video"}},
             {"tool": "motion_probe", "args": {"on": "output_video"}}]
    p = normalize_plan(crit(steps, dimension=16), present_media=T2V)
    assert "absent_condition" in rules(p)
    assert "ssim_compare" not in p.tools()
    assert p.status == "fallback"
    # The fallback keeps a semantic question for the criterion.
    assert p.tools() == ["motion_probe", "vlm_qa"]
    assert normalize_plan(crit(steps, dimension=16), present_media=TI2V).status == "ok"


def test_absent_subject_step_dropped():
    steps = [{"tool": "dino_sim", "args": {"a": "output_video", "b": "subject_image"}}]
    p = normalize_plan(crit(steps, dimension=17), present_media=T2V)
    assert rules(p)[0] == "absent_condition"
    assert p.tools() == ["vlm_qa"] and p.status == "fallback"


# --- 4. without web search ----------------------------------------------------------------------

def test_without_web_search_retrieval_removed_and_similarity_becomes_recognition_question():
    steps = [{"tool": "web_search", "args": {"query": "Eiffel Tower"}},
             {"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}}]
    c = crit(steps, dimension=1, target_entity="Eiffel Tower", reference_source="web_search")
    p = normalize_plan(c, present_media=T2V, web_search=False)
    assert p.tools() == ["vlm_qa"]
    q = p.steps[0]["args"]
    assert q["on"] == "output_video"
    assert "Eiffel Tower" in q["question"] and "recognizable" in q["question"]
    assert c.criterion in q["question"]
    assert rules(p) == ["reference_source", "no_web_search", "no_web_search"]
    assert p.status == "fallback"


def test_with_web_search_retrieval_kept():
    steps = [{"tool": "web_search", "args": {"query": "Eiffel Tower"}},
             {"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}}]
    c = crit(steps, target_entity="Eiffel Tower", reference_source="web_search")
    p = normalize_plan(c, present_media=T2V, web_search=True)
    assert p.steps == steps and p.status == "ok" and p.repairs == []


# --- 5. fill missing queries --------------------------------------------------------------------

def test_missing_queries_filled_from_target_entity():
    steps = [{"tool": "sam_track", "args": {"on": "output_video"}},
             {"tool": "ocr", "args": {"on": "output_video", "target": ""}},
             {"tool": "spatial_relation", "args": {"on": "output_video", "relation": "count"}},
             {"tool": "vlm_qa", "args": {"on": "output_video"}}]
    c = crit(steps, target_entity="red car", detector_query="")
    p = normalize_plan(c, present_media=T2V)
    assert p.steps[0]["args"]["query"] == "red car"
    assert p.steps[1]["args"]["target"] == "red car"
    assert p.steps[2]["args"]["entities"] == "red car"
    assert p.steps[3]["args"]["question"] == fallback_question(c)
    assert rules(p) == ["fill_missing"] * 4
    assert p.status == "degraded"


def test_detector_query_preferred_for_localizer_queries():
    c = crit([{"tool": "sam_track", "args": {}}], target_entity="the old red car", detector_query="car")
    p = normalize_plan(c, present_media=T2V)
    assert p.steps[0]["args"] == {"query": "car", "on": "output_video"}
    assert rules(p) == ["fill_missing", "fill_missing"]


def test_missing_media_args_filled_with_defaults():
    p = normalize_plan(crit([{"tool": "flicker_probe", "args": {}}]), present_media=T2V)
    assert p.steps == [{"tool": "flicker_probe", "args": {"on": "output_video"}}]
    assert rules(p) == ["fill_missing"]


# --- 6. crop ids belong to the executor -----------------------------------------------------------

def test_crop_ids_removed():
    steps = [{"tool": "crop_compare", "args": {"crop_from": "output_video", "region": "dog", "as": "dog_crop",
                                               "save_as": "x"}},
             {"tool": "dino_sim", "args": {"a": "output_crop", "b": "subject_image"}}]
    p = normalize_plan(crit(steps, dimension=17, reference_source="subject_image"), present_media=TS2V)
    assert p.steps[0]["args"] == {"crop_from": "output_video", "region": "dog"}
    assert rules(p) == ["crop_ids", "crop_ids"]
    assert "dog_crop" in p.repairs[0]["detail"]
    assert p.status == "degraded"


# --- 7. dangling similarity operands ----------------------------------------------------------------

def test_dangling_crop_operand_becomes_output_video():
    steps = [{"tool": "dino_sim", "args": {"a": "output_crop", "b": "subject_image"}}]
    p = normalize_plan(crit(steps, dimension=17, reference_source="subject_image"), present_media=TS2V)
    assert p.steps == [{"tool": "dino_sim", "args": {"a": "output_video", "b": "subject_image"}}]
    assert rules(p) == ["dangling_operand"]
    assert p.status == "degraded"


def test_missing_similarity_operand_filled_from_reference_source():
    steps = [{"tool": "dino_sim", "args": {"a": "output_video"}}]
    p = normalize_plan(crit(steps, dimension=17, reference_source="subject_image"), present_media=TS2V)
    assert p.steps[0]["args"] == {"a": "output_video", "b": "subject_image"}
    assert rules(p) == ["dangling_operand"]


def test_similarity_of_a_medium_with_itself_dropped():
    steps = [{"tool": "ssim_compare", "args": {"a": "output_video", "b": "output_video"}}, qa()]
    p = normalize_plan(crit(steps), present_media=T2V)
    assert p.tools() == ["vlm_qa"]
    assert rules(p) == ["dangling_operand"]
    assert p.status == "fallback"


def test_reference_without_retrieval_dropped_even_with_web_search():
    steps = [{"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}}]
    p = normalize_plan(crit(steps), present_media=T2V, web_search=True)
    assert "dangling_operand" in rules(p)
    assert p.tools() == ["vlm_qa"] and p.status == "fallback"


# --- 8. a retrieval step precedes its consumer ----------------------------------------------------

def test_retrieval_moved_before_consumer():
    steps = [qa(),
             {"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}},
             {"tool": "web_search", "args": {"query": "Golden Gate Bridge"}}]
    p = normalize_plan(crit(steps, reference_source="web_search"), present_media=T2V, web_search=True)
    assert p.tools() == ["vlm_qa", "web_search", "dino_sim"]
    assert rules(p) == ["retrieval_order"]
    assert p.status == "degraded"


def test_retrieval_query_filled_from_web_search_query():
    steps = [{"tool": "web_search", "args": {}}, {"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}}]
    c = crit(steps, reference_source="web_search", web_search_query="Golden Gate Bridge photo")
    p = normalize_plan(c, present_media=T2V, web_search=True)
    assert p.steps[0]["args"]["query"] == "Golden Gate Bridge photo"
    assert rules(p) == ["fill_missing"]


# --- 9. a crop that nothing consumes gets a vlm_qa -------------------------------------------------

def test_unconsumed_crop_gets_vlm_qa_on_the_crop():
    c = crit([{"tool": "crop_compare", "args": {"crop_from": "output_video", "region": "dog"}},
              {"tool": "aesthetic", "args": {"on": "output_video"}}])
    p = normalize_plan(c, present_media=T2V)
    assert p.tools() == ["crop_compare", "vlm_qa", "aesthetic"]
    assert p.steps[1]["args"] == {"question": fallback_question(c), "on": "output_crop"}
    assert rules(p) == ["unconsumed_crop"]
    assert p.status == "degraded"


def test_source_crop_unconsumed_gets_vlm_qa_on_source_crop():
    c = crit([{"tool": "crop_compare", "args": {"crop_from": "source_video", "region": "dog"}}], dimension=19)
    p = normalize_plan(c, present_media=TV2V)
    assert p.steps[1] == {"tool": "vlm_qa", "args": {"question": fallback_question(c), "on": "source_crop"}}
    assert rules(p) == ["unconsumed_crop"]


# --- 10. empty plan ------------------------------------------------------------------------------

def test_empty_plan_becomes_one_vlm_qa_on_criterion_text():
    c = crit([])
    p = normalize_plan(c, present_media=T2V)
    assert p.steps == [{"tool": "vlm_qa", "args": {"question": fallback_question(c), "on": "output_video"}}]
    assert rules(p) == ["empty_plan"]
    assert p.status == "fallback"


# --- VLM-only ablation and overall order ------------------------------------------------------------

def test_vlm_only_mode_replaces_every_plan():
    steps = [{"tool": "sam_track", "args": {"query": "dog", "on": "output_video"}},
             {"tool": "crop_compare", "args": {"crop_from": "output_video", "region": "dog"}},
             {"tool": "dino_sim", "args": {"a": "output_crop", "b": "subject_image"}}]
    c = crit(steps, dimension=17, reference_source="subject_image")
    p = normalize_plan(c, present_media=TS2V, vlm_only=True)
    assert p.steps == [{"tool": "vlm_qa", "args": {"question": fallback_question(c), "on": "output_video"}}]
    assert rules(p) == ["vlm_only"]
    assert p.status == "fallback"


def test_repairs_are_logged_in_method_order():
    steps = [
        "garbage",                                                                   # malformed
        {"tool": "vlm_qa", "args": {"question": "Is the source kept?", "on": "source_video"}},  # absent source
        {"tool": "web_search", "args": {"query": "x"}},                              # no web search
        {"tool": "sam_track", "args": {"on": "output_video"}},                       # fill missing
        {"tool": "crop_compare", "args": {"crop_from": "output_video", "region": "car", "as": "c"}},  # crop ids
        {"tool": "dino_sim", "args": {"a": "output_crop", "b": "output_crop"}},     # dangling (both same)
    ]
    p = normalize_plan(crit(steps, dimension=2, reference_source="subject_image"), present_media=T2V)
    order = ["malformed_step", "reference_source", "absent_source", "no_web_search", "fill_missing",
             "crop_ids", "dangling_operand", "unconsumed_crop"]
    seen = []
    for r in rules(p):
        if r not in seen:
            seen.append(r)
    assert seen[:len(order)] == order
    assert all(s["tool"] in TOOL_SPECS for s in p.steps)
    assert p.status == "fallback"
    assert all(set(r) == {"rule", "detail"} and r["detail"] for r in p.repairs)


# --- fallback questions and references from the input (method §6, §7) ----------------------------

def test_fallback_question_carries_the_failure_modes():
    c = make_criterion("id", dimension=17, failure_modes=["different breed", "collar missing"],
                       evidence_plan={"tool_sequence": []})
    q = normalize_plan(c, present_media=TS2V).steps[0]["args"]["question"]
    assert q.startswith(c.criterion) and "different breed" in q and "collar missing" in q
    bare = make_criterion("bare", failure_modes=[], evidence_plan={"tool_sequence": []})
    assert normalize_plan(bare, present_media=T2V).steps[0]["args"]["question"] == bare.criterion


def test_reference_resolves_from_each_input_medium():
    for ref, media in [("first_frame", TI2V), ("subject_image", TS2V), ("source_video", TV2V),
                       ("subject_image", TSV2V)]:
        steps = [{"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}}]
        p = normalize_plan(crit(steps, dimension=17, reference_source=ref), present_media=media, web_search=False)
        assert p.steps == steps and p.status == "ok" and p.repairs == [], ref
        assert p.reference == ref


def test_reference_from_the_input_makes_a_retrieval_step_redundant():
    steps = [{"tool": "web_search", "args": {"query": "the dog"}},
             {"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}}]
    for web in (False, True):
        p = normalize_plan(crit(steps, dimension=17, reference_source="subject_image"), present_media=TS2V,
                           web_search=web)
        assert p.tools() == ["dino_sim"] and p.reference == "subject_image"
        assert rules(p) == ["input_reference"] and p.status == "degraded"


def test_only_a_search_reference_degrades_without_web_search():
    steps = [{"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}}]
    searched = normalize_plan(crit(steps, reference_source="web_search", target_entity="Eiffel Tower"),
                              present_media=TI2V, web_search=False)
    assert searched.tools() == ["vlm_qa"] and searched.reference == "none" and searched.status == "fallback"
    framed = normalize_plan(crit(steps, reference_source="first_frame"), present_media=TI2V, web_search=False)
    assert framed.tools() == ["dino_sim"] and framed.status == "ok"
