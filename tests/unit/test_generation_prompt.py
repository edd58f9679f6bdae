"""The generator's one instruction carries every rule method §4 lists (checked rule by rule), and
the checkable rules are enforced on its answers."""

from __future__ import annotations

import pytest
from unit_helpers import criterion_dict, rubric_dict

from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.rubric.generate import MAX_OUTPUT_TOKENS, input_message, rule_problems, system_prompt
from argus_dagster.method.rubric.schema import parse_rubric
from argus_dagster.method.rubric.taxonomy import DIMENSIONS

PROMPT = " ".join(system_prompt().split())  # line breaks folded

RULES = {
    "checklist over all 22 with dimensions_considered": ["Walk all 22 dimensions", "all 22 of them", "dimensions_considered"],
    "conditional dimensions and their inputs": ["16 (first-frame fidelity) only with a first frame",
                                                "17 (subject identity) only with subject image(s)",
                                                "no-attribute-confusion criterion when there are several",
                                                "18, 19 and 20 only with a source video",
                                                "21 only with a source video and a subject", "22 only for reference editing"],
    "identity from the reference, no invented criteria": ["features actually seen in the reference",
                                                          "Never invent identity or preservation criteria"],
    "merge and checkable alone": ["Merge criteria that check the same property", "checkable on its own"],
    "fields": ["names locatable entities", "2, 4 or 6 for hard criteria; null for soft ones", "concrete failures",
               '"prompt" or "input_bundle"', "every step names the media it works on", "output_crop / source_crop"],
    "tools": ["vlm_qa is the default tool", "sam_track, then crop_compare", "dino_sim against reference or source_crop",
              "Prefer aesthetic to vlm_qa", "semantic side of style"],
    "web_search only when both hold": ["web_search ONLY when both hold", "one canonical look",
                                       "no visual prior", "web_search_query is the exact name",
                                       "With a visual prior in the input, reference_source is that medium"],
    "geometric tools only for their property": ["spatial_relation only when", "depth_probe only for",
                                                "flicker_probe only for", "AFTER a vlm_qa step", '"just in case"'],
    "hard-cap discipline": ["no other merit redeems", "would a reasonable, generally good output plausibly trip this?",
                            "At most 1-2 hard criteria", "Prefer cap 6; 4 for severe; 2 for catastrophic"],
    "task emphasis": ["first-frame fidelity (importance medium)", "frozen on the first frame scores low",
                      "pure aesthetics at most medium", "besides identity, separate criteria"],
    "coverage over trimming": ["merging true duplicates", "Always keep, each as its own criterion",
                               "overall text-video alignment (15)", "9-14 criteria"],
    "reference-conditioned importance": ["camera motion (10), generic scene (6), generic action (5) and event order (8)",
                                         "The one exception", '"high" is reserved for'],
    "edit priority and degenerate edit": ["Edit following (18) is its own criterion with importance \"high\"",
                                          "inserted-subject identity (21) is also \"high\"",
                                          "at most \"medium\"", "nearly identical to the source, frozen or trivially changed",
                                          "one hard criterion under dimension 18 for edit degeneracy, hard_cap 2",
                                          "static overlay or pasted cut-out", "heavy warping", "per-frame flicker",
                                          "garbled blob", "natural, stable, well-integrated, MOVING part",
                                          "6 only for non-edit mild fundamental failures"],
    "JSON answer": ["one JSON object and nothing else"],
}


@pytest.mark.parametrize("rule", list(RULES))
def test_the_instruction_carries_the_rule(rule):
    missing = [p for p in RULES[rule] if p not in PROMPT]
    assert not missing, f"{rule}: {missing}"


def test_every_dimension_and_tool_is_named():
    assert all(f"{k}. {v}" in system_prompt() for k, v in DIMENSIONS.items())
    for tool in ("vlm_qa", "sam_track", "crop_compare", "dino_sim", "ocr", "web_search", "aesthetic", "depth_probe",
                 "spatial_relation", "flicker_probe"):
        assert f"- {tool}:" in system_prompt()


def test_room_to_answer():
    assert MAX_OUTPUT_TOKENS >= 16000


def test_the_user_turn_states_facts_not_rules():
    text = "\n".join(p for p in input_message(InputInstance("x", "A red kite flies."))["content"] if isinstance(p, str))
    assert "Inputs present: first frame: no; subject images: 0; source video: no." in text
    assert "Prompt (verbatim): A red kite flies." in text
    assert "importance" not in text and "hard" not in text


def test_rule_problems_on_a_text_only_input():
    r = parse_rubric(rubric_dict(criterion_dict("ident", dimension=17),
                                 criterion_dict("h1", type="hard", hard_cap=None),
                                 criterion_dict("s1", type="soft", hard_cap=4)))
    problems = rule_problems(r, InputInstance("x", "A kite."))
    assert problems == [
        "criterion 'ident' field 'dimension': 17 (subject identity) needs an input this one does not have; "
        "remove the criterion or use a general dimension",
        "criterion 'h1' field 'hard_cap': a hard criterion needs a cap of 2, 4 or 6",
        "criterion 's1' field 'hard_cap': a soft criterion has hard_cap null"]
    assert rule_problems(parse_rubric(rubric_dict(criterion_dict("ok"))), InputInstance("x", "A kite.")) == []
