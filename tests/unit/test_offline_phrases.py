"""The offline generator's entity, attribute, count and relation criteria come from the prompt's noun
phrases as spaCy's English parser reads them, checked on real prompts (VBench, VideoPhy), and its
plans use the method's tools: dino_sim against ``reference`` beside the CPU measures."""

from __future__ import annotations

import json
import re

import pytest

from argus_dagster.method.evidence.plan import normalize_plan
from argus_dagster.method.evidence.tools.registry import embedded_suite
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.rubric.offline import generate_offline
from argus_dagster.method.rubric.phrases import main_phrase, noun_phrases


def _ids(rubric):
    return {c.id: c for c in rubric.criteria}


@pytest.fixture(scope="module")
def vbench(real_data):
    return json.loads((real_data / "vbench" / "VBench_full_info.json").read_text())


@pytest.fixture(scope="module")
def videophy_prompts(real_data):
    names = sorted(p.stem for p in (real_data / "videophy").rglob("*.mp4"))
    prompts = [re.sub(r"_\d+$", "", n).replace("_", " ") for n in names]
    assert len(prompts) >= 20
    return prompts


def test_the_issues_examples():
    fox = _ids(generate_offline(InputInstance("fox", "A red fox jumps over a log.")))
    assert fox["entity_presence"].evidence_plan.target_entity == "red fox"
    assert fox["attribute_red_fox"].criterion.startswith("The fox is red")
    chef = _ids(generate_offline(InputInstance("c", "A chef slices two sirloin steaks while young children watch.")))
    counts = {k: c for k, c in chef.items() if c.dimension == 3}
    assert list(counts) == ["count_sirloin_steaks"]  # never count_sirloin, count_young
    assert counts["count_sirloin_steaks"].criterion == "Exactly 2 sirloin steaks are visible."
    assert chef["entity_presence"].evidence_plan.target_entity == "chef"
    assert "presence_young_children" in chef


def test_vbench_objects_are_the_annotated_ones(vbench):
    """VBench annotates the object of its object-class prompts: the main entity is that object."""
    cases = [(e["prompt_en"], e["auxiliary_info"]["object_class"]["object"]) for e in vbench
             if "object_class" in (e.get("auxiliary_info") or {})]
    assert len(cases) == 79
    wrong = [(p, o) for p, o in cases if getattr(main_phrase(noun_phrases(p)), "text", None) != o]
    assert len(wrong) <= 2, wrong


def test_vbench_multiple_objects_and_colours(vbench):
    multi = [(e["prompt_en"], e["auxiliary_info"]["multiple_objects"]["object"].split(" and ")) for e in vbench
             if "multiple_objects" in (e.get("auxiliary_info") or {})]
    wrong = [(p, o) for p, o in multi if [ph.text for ph in noun_phrases(p)] != o]
    assert len(multi) == 82 and len(wrong) <= 3, wrong
    colours = [(e["prompt_en"], e["auxiliary_info"]["color"]["color"]) for e in vbench
               if "color" in (e.get("auxiliary_info") or {})]
    wrong = [(p, c) for p, c in colours if c not in (main_phrase(noun_phrases(p)).attributes or ())]
    assert len(colours) == 85 and len(wrong) <= 1, wrong


def test_vbench_spatial_relations_name_both_objects_in_the_claims_order(vbench):
    cases = [(e["prompt_en"], e["auxiliary_info"]["spatial_relationship"]["spatial_relationship"]) for e in vbench
             if "spatial_relationship" in (e.get("auxiliary_info") or {})]
    right = 0
    for prompt, rel in cases:
        (c,) = [c for c in generate_offline(InputInstance("s", prompt)).criteria if c.dimension == 4]
        a, b = rel["object_a"], rel["object_b"]
        flipped = "right" in rel["relationship"] or "bottom" in rel["relationship"]
        expected = f"{b}, {a}" if flipped else f"{a}, {b}"
        steps = c.evidence_plan.tool_sequence
        assert steps[0]["tool"] == "vlm_qa"  # the semantic read first
        if "left" in rel["relationship"] or "right" in rel["relationship"]:
            right += steps[-1]["tool"] == "spatial_relation" and steps[-1]["args"]["entities"] == expected
        else:  # above/below: no geometric tool measures it
            assert [s["tool"] for s in steps] == ["vlm_qa"]
            right += c.evidence_plan.target_entity == expected
    assert len(cases) == 84 and right >= 80


def test_vbench_counts_only_count_nouns(vbench):
    for e in vbench:
        for c in generate_offline(InputInstance("v", e["prompt_en"])).criteria:
            if c.dimension == 3:
                number = re.search(r"\b(two|three|four|five|six|seven|eight|nine|ten|\d+)\b", e["prompt_en"], re.I)
                assert number, (e["prompt_en"], c.id)


def test_videophy_counts_and_entities(videophy_prompts):
    by_prompt = {p: _ids(generate_offline(InputInstance("p", p))) for p in videophy_prompts}
    knives = by_prompt["Two knives are thrown in a criss-cross pattern, nearly colliding in mid-air before "
                       "striking a stack of wooden blocks"]
    assert knives["count_knives"].criterion == "Exactly 2 knives are visible."
    assert knives["entity_presence"].evidence_plan.target_entity == "knives"
    wood = by_prompt["A carpenter pulls apart two glued pieces of wood using a chisel, resulting in two separate boards"]
    assert wood["entity_presence"].evidence_plan.target_entity == "carpenter"
    assert {k for k, c in wood.items() if c.dimension == 3} == {"count_glued_pieces_of_wood", "count_separate_boards"}
    for prompt, crits in by_prompt.items():
        entity = crits["entity_presence"].evidence_plan.target_entity
        assert entity and all(w in prompt.lower() for w in entity.lower().split()), (prompt, entity)
        for c in crits.values():
            if c.dimension == 3:  # every count is a stated number in the prompt
                assert re.search(r"\b(two|three|four|five|\d+)\b", prompt, re.I), (prompt, c.id)


DINO = {"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}}
CROP_DINO = {"tool": "dino_sim", "args": {"a": "output_crop", "b": "reference"}}


@pytest.mark.parametrize("inst, cid, step, ref", [
    (InputInstance("ti2v", "The woman turns and waves.", first_frame="/in/ff.png"), "first_frame_fidelity", DINO,
     "first_frame"),
    (InputInstance("ts2v", "The toy robot dances.", subject_images=("/in/robot.png",)), "subject_identity", CROP_DINO,
     "subject_image"),
    (InputInstance("tv2v", "Make it snow.", source_video="/in/src.mp4"), "source_preservation", DINO, "source_video"),
    (InputInstance("tsv2v", "Insert the dog.", subject_images=("/in/dog.png",), source_video="/in/src.mp4"),
     "inserted_subject_identity", CROP_DINO, "subject_image"),
])
def test_plans_compare_against_the_reference_and_normalization_drops_what_is_missing(inst, cid, step, ref):
    c = _ids(generate_offline(inst))[cid]
    assert c.evidence_plan.reference_source == ref and step in c.evidence_plan.tool_sequence
    media = set(inst.condition_media)
    with_dino = normalize_plan(c, present_media=media, available_tools=None)
    assert with_dino.reference == ref and "dino_sim" in with_dino.tools()
    assert not {"reference_source", "absent_condition", "no_web_search"} & {r["rule"] for r in with_dino.repairs}
    without = normalize_plan(c, present_media=media, available_tools=embedded_suite().available())
    assert "dino_sim" not in without.tools()
    assert any(r["rule"] == "tool_unavailable" and "dino_sim" in r["detail"] for r in without.repairs)
    if cid in ("first_frame_fidelity", "source_preservation"):  # the CPU measure stays beside it
        assert "ssim_compare" in without.tools()
