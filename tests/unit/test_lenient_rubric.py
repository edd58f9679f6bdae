"""Rubrics load leniently, as released rubrics are written: coerce what has one obvious meaning, default
what is missing, log each change, and reject only what cannot be read (one criterion at a time)."""

from __future__ import annotations

import json

import pytest
from unit_helpers import criterion_dict, rubric_dict

from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.rubric.lenient import DEFAULT_SCORING_RULE, read_rubric
from argus_dagster.method.rubric.schema import RubricError, parse_rubric
from argus_dagster.method.rubric.store import resolve_rubric


def load_released(tmp_path, data, task="TS2V", text=None):
    """Write ``<bench>/<task>/rubrics/case.json`` and load it through the rubric store."""
    inst = InputInstance("case", "A corgi runs.", subject_images=("/in/corgi.png",))
    path = tmp_path / "bench" / task / "rubrics" / "case.json"
    path.parent.mkdir(parents=True)
    path.write_text(text if text is not None else json.dumps(data), encoding="utf-8")
    rubric, source, _, load_log = resolve_rubric(inst, task, tmp_path / "bench", tmp_path / "home", {},
                                                 lambda i: pytest.fail("must not generate"))
    assert source == "loaded"
    return {c.id: c for c in rubric.criteria}, load_log


def test_the_issues_loose_fields_are_read_and_each_coercion_logged(tmp_path):
    loose = criterion_dict("identity", dimension="17", type="HARD", importance="High", hard_cap="6",
                           failure_modes="the corgi turns into another dog", derivable_from="reference image",
                           evidence_plan=None)
    loose["evidence_plan"] = None
    c, log = load_released(tmp_path, rubric_dict(criterion_dict("fine"), loose))
    ident = c["identity"]
    assert (ident.dimension, ident.type, ident.importance, ident.hard_cap) == (17, "hard", "high", 6)
    assert ident.failure_modes == ["the corgi turns into another dog"]
    assert ident.derivable_from == "input_bundle"
    assert ident.evidence_plan.tool_sequence == [] and ident.evidence_plan.reference_source == "none"
    fields = [line.split(" field ")[1].split(":")[0] for line in log]
    assert fields == ["'dimension'", "'hard_cap'", "'type'", "'importance'", "'failure_modes'", "'evidence_plan'",
                      "'derivable_from'"]
    assert all(line.startswith("criterion 'identity' field") for line in log)
    assert c["fine"].importance == "high"


@pytest.mark.parametrize("raw, cap", [("6", 6), (" 4 ", 4), (2.0, 2), ("cap 4", 4), ("null", None), ("None", None),
                                      ("", None), (None, None)])
def test_cap_spellings(raw, cap):
    r, _ = read_rubric(rubric_dict(criterion_dict("c", type="hard", hard_cap=raw)))
    assert r.criteria[0].hard_cap == cap


@pytest.mark.parametrize("raw", [3, "High", "HARD", True, "seven"])
def test_a_cap_with_no_obvious_meaning_becomes_none_and_is_logged(raw):
    r, log = read_rubric(rubric_dict(criterion_dict("c", type="hard", hard_cap=raw)))
    assert r.criteria[0].hard_cap is None and r.criteria[0].type == "hard"
    assert any("'hard_cap'" in line and "no cap" in line for line in log)


def test_missing_fields_get_defaults():
    bare = {"id": "bare", "criterion": "The corgi is visible."}
    r, log = read_rubric({"criteria": [bare]})
    c = r.criteria[0]
    assert (c.dimension, c.type, c.importance, c.hard_cap, c.fail_threshold) == (15, "soft", "medium", None, 5.0)
    assert c.scoring_rule == DEFAULT_SCORING_RULE and c.failure_modes == [] and c.derivable_from == "prompt"
    assert {line.split(" field ")[1].split(":")[0] for line in log} == {"'dimension'", "'type'", "'importance'",
                                                                       "'scoring_rule'", "'evidence_plan'",
                                                                       "'derivable_from'"}


def test_a_cap_without_a_type_means_hard():
    r, _ = read_rubric({"criteria": [{"id": "x", "criterion": "The corgi is there.", "hard_cap": 4}]})
    assert r.criteria[0].type == "hard" and r.criteria[0].hard_cap == 4


@pytest.mark.parametrize("dim, expected", [("17", 17), ("D17", 17), ("dimension 3", 3), (4.0, 4),
                                           ("subject identity", 17), ("camera motion", 10)])
def test_dimension_spellings(dim, expected):
    r, _ = read_rubric(rubric_dict(criterion_dict("c", dimension=dim)))
    assert r.criteria[0].dimension == expected


def test_plan_spellings():
    steps = ["vlm_qa", {"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}}]
    r, log = read_rubric(rubric_dict(criterion_dict("c", evidence_plan={"tool_sequence": steps,
                                                                         "reference_source": "Subject Image",
                                                                         "target_entity": ["corgi", "dog"]})))
    plan = r.criteria[0].evidence_plan
    assert plan.tool_sequence[0] == {"tool": "vlm_qa", "args": {}}
    assert plan.reference_source == "subject_image" and plan.target_entity == "corgi, dog"
    r2, _ = read_rubric(rubric_dict(criterion_dict("c", evidence_plan={"tool_sequence": {"tool": "ocr"},
                                                                        "reference_source": "the internet"})))
    assert r2.criteria[0].evidence_plan.tool_sequence == [{"tool": "ocr"}]
    assert r2.criteria[0].evidence_plan.reference_source == "none"


def test_unknown_derivable_from_follows_the_reference():
    r, _ = read_rubric(rubric_dict(criterion_dict("a", derivable_from="web"),
                                   criterion_dict("b", derivable_from="web",
                                                  evidence_plan={"reference_source": "first_frame"})))
    assert [c.derivable_from for c in r.criteria] == ["prompt", "input_bundle"]


def test_a_criterion_without_text_is_rejected_alone(tmp_path):
    no_text = criterion_dict("mute")
    del no_text["criterion"]
    c, log = load_released(tmp_path, rubric_dict(criterion_dict("kept"), no_text, "not an object"))
    assert list(c) == ["kept"]
    rejected = [line for line in log if line.startswith("rejected")]
    assert len(rejected) == 2
    assert "'mute'" in rejected[0] and "'criterion'" in rejected[0]


def test_text_under_another_name_is_read():
    alt = criterion_dict("alt")
    alt["description"] = alt.pop("criterion")
    r, log = read_rubric(rubric_dict(alt))
    assert r.criteria[0].criterion == "A red car is clearly visible."
    assert any("read from 'description'" in line for line in log)


def test_duplicate_ids_are_renamed_not_rejected():
    r, log = read_rubric(rubric_dict(criterion_dict("dup"), criterion_dict("dup", dimension=2)))
    assert [c.id for c in r.criteria] == ["dup", "dup_2"]
    assert any("duplicate id" in line for line in log)


def test_a_clean_rubric_has_an_empty_log_and_the_strict_hash():
    data = rubric_dict(criterion_dict("a", type="hard", hard_cap=4), criterion_dict("b", dimension=2))
    r, log = read_rubric(data)
    assert log == [] and r.content_hash() == parse_rubric(data).content_hash()


@pytest.mark.parametrize("text, why", [('{"criteria": [', "not valid JSON"), ('{"criteria": []}', "no criteria"),
                                       ('[1, 2]', "expected a JSON object"),
                                       ('{"criteria": [{"id": "x"}]}', "no readable criterion")])
def test_what_cannot_be_read_is_rejected_with_the_reason(tmp_path, text, why):
    with pytest.raises(RubricError) as ei:
        load_released(tmp_path, None, text=text)
    assert why in str(ei.value) and "case.json" in str(ei.value)


def test_dimensions_considered_entries_are_coerced_or_dropped():
    data = rubric_dict(criterion_dict("a"))
    data["dimensions_considered"] = [{"dimension": "1", "included": "yes", "reason": "r"}, {"included": True}, "x"]
    r, log = read_rubric(data)
    assert [(d.dimension, d.included) for d in r.dimensions_considered] == [(1, True)]
    assert sum("dimensions_considered" in line for line in log) == 3
