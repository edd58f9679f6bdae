"""Rubric schema (method §3): validation, error messages, wrappers and content identity."""

from __future__ import annotations

import json

import pytest
from unit_helpers import criterion_dict, rubric_dict

from argus_dagster.method.rubric.schema import IMPORTANCE_WEIGHT, Rubric, RubricError, load_rubric_file, parse_rubric


def test_valid_rubric_parses_with_all_fields():
    data = rubric_dict(
        criterion_dict("presence", dimension=1, type="hard", importance="high", hard_cap=4, fail_threshold=6),
        criterion_dict("style", dimension=14, importance="low"),
    )
    r = parse_rubric(data)
    assert isinstance(r, Rubric)
    assert [c.id for c in r.criteria] == ["presence", "style"]
    c = r.criterion("presence")
    assert (c.dimension, c.type, c.importance, c.hard_cap, c.fail_threshold) == (1, "hard", "high", 4, 6.0)
    assert c.evidence_plan.target_entity == "red car"
    assert c.evidence_plan.tool_sequence[0]["tool"] == "vlm_qa"
    assert len(r.dimensions_considered) == 22
    assert r.generator == {"backend": "test", "model": "none"}
    with pytest.raises(KeyError):
        r.criterion("nope")


def test_defaults_and_normalization():
    raw = criterion_dict("c1", type=" HARD ", importance="Medium", fail_threshold=None)
    raw["id"] = 7
    for key in ("hard_cap", "failure_modes", "derivable_from"):
        raw.pop(key)
    raw["evidence_plan"]["reference_source"] = None
    raw["evidence_plan"]["notes"] = None
    r = parse_rubric(rubric_dict(raw))
    c = r.criteria[0]
    assert c.id == "7"
    assert c.type == "hard" and c.importance == "medium"
    assert c.fail_threshold == 5.0
    assert c.hard_cap is None and c.failure_modes == [] and c.derivable_from == "prompt"
    assert c.evidence_plan.reference_source == "none" and c.evidence_plan.notes == ""


def test_importance_weights_are_the_methods():
    assert IMPORTANCE_WEIGHT == {"high": 3, "medium": 2, "low": 1}


def test_unknown_fields_are_tolerated():
    data = rubric_dict(criterion_dict("c1", rationale_extra="x", weight=99))
    data["release_version"] = "1.2"
    data["criteria"][0]["evidence_plan"]["confidence"] = 0.9
    data["dimensions_considered"][0]["extra"] = True
    r = parse_rubric(data)
    assert r.criteria[0].id == "c1"
    assert "weight" not in r.criteria[0].model_dump()


def test_missing_scoring_rule_names_criterion_and_field():
    bad = criterion_dict("motion_ok")
    del bad["scoring_rule"]
    with pytest.raises(RubricError) as ei:
        parse_rubric(rubric_dict(criterion_dict("fine"), bad), source="r.json")
    msg = str(ei.value)
    assert "'motion_ok'" in msg and "'scoring_rule'" in msg
    assert msg.startswith("r.json: ")
    assert len(ei.value.problems) == 1
    assert "'fine'" not in msg


@pytest.mark.parametrize(
    "field, value",
    [("importance", "urgent"), ("hard_cap", 3), ("dimension", 23), ("dimension", 0), ("type", "medium"),
     ("fail_threshold", 11), ("derivable_from", "web")],
)
def test_invalid_field_names_criterion_and_field(field, value):
    with pytest.raises(RubricError) as ei:
        parse_rubric(rubric_dict(criterion_dict("cam_1", **{field: value})))
    msg = str(ei.value)
    assert "criterion 'cam_1'" in msg
    assert f"field '{field}'" in msg


def test_criterion_without_id_is_located_by_position():
    bad = criterion_dict("x")
    del bad["id"]
    with pytest.raises(RubricError) as ei:
        parse_rubric(rubric_dict(criterion_dict("a"), bad))
    assert "criterion #2 (no id)" in str(ei.value)
    assert "'id'" in str(ei.value)


def test_several_problems_are_all_reported():
    bad = criterion_dict("multi", importance="urgent", hard_cap=3)
    with pytest.raises(RubricError) as ei:
        parse_rubric(rubric_dict(bad))
    fields = " ".join(ei.value.problems)
    assert len(ei.value.problems) == 2
    assert "'importance'" in fields and "'hard_cap'" in fields


def test_empty_criteria_rejected():
    data = rubric_dict()
    data["criteria"] = []
    with pytest.raises(RubricError):
        parse_rubric(data)


def test_duplicate_ids_rejected():
    with pytest.raises(RubricError) as ei:
        parse_rubric(rubric_dict(criterion_dict("dup"), criterion_dict("other"), criterion_dict("dup")))
    assert "'dup'" in str(ei.value) and "duplicate" in str(ei.value)
    assert "'other'" not in str(ei.value)


def test_rubric_wrapper_accepted():
    data = rubric_dict(criterion_dict("wrapped"))
    r = parse_rubric({"rubric": data, "meta": {"x": 1}})
    assert r.criteria[0].id == "wrapped"
    assert r.content_hash() == parse_rubric(data).content_hash()


@pytest.mark.parametrize("data", [[1, 2], "text", None, {"rubric": "not a dict"}])
def test_non_object_rejected(data):
    with pytest.raises(RubricError):
        parse_rubric(data)


def test_load_rubric_file_invalid_json(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"criteria": [ {"id": "a",, }', encoding="utf-8")
    with pytest.raises(RubricError) as ei:
        load_rubric_file(str(p))
    assert "not valid JSON" in str(ei.value)
    assert str(p) in str(ei.value)


def test_load_rubric_file_valid_and_invalid_content(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"rubric": rubric_dict()}), encoding="utf-8")
    assert load_rubric_file(str(good)).criteria[0].id == "c1"
    bad = tmp_path / "bad_field.json"
    bad.write_text(json.dumps(rubric_dict(criterion_dict("z", dimension=40))), encoding="utf-8")
    with pytest.raises(RubricError, match=r"bad_field\.json: .*criterion 'z' field 'dimension'"):
        load_rubric_file(str(bad))


def test_content_hash_stable_and_ignores_generator():
    data = rubric_dict(criterion_dict("a"), criterion_dict("b", dimension=2))
    h1 = parse_rubric(data).content_hash()
    assert h1 == parse_rubric(json.loads(json.dumps(data))).content_hash()
    assert len(h1) == 64 and int(h1, 16) >= 0
    other_gen = dict(data, generator={"backend": "openai", "model": "gpt", "input_hash": "abc"})
    assert parse_rubric(other_gen).content_hash() == h1
    # Unknown (ignored) fields are not part of the identity either.
    assert parse_rubric(dict(data, extra_key=1)).content_hash() == h1


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["criteria"][0].update(importance="low"),
        lambda d: d["criteria"][0].update(criterion="A blue car is visible."),
        lambda d: d["criteria"][1].update(hard_cap=6),
        lambda d: d["criteria"][0]["evidence_plan"]["tool_sequence"].append({"tool": "aesthetic", "args": {}}),
        lambda d: d["criteria"].reverse(),
    ],
)
def test_content_hash_changes_with_criteria(mutate):
    data = rubric_dict(criterion_dict("a"), criterion_dict("b", dimension=2))
    h1 = parse_rubric(data).content_hash()
    mutate(data)
    assert parse_rubric(data).content_hash() != h1
