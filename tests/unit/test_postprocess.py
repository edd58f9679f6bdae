"""Deterministic rubric post-processing keyed on the input's conditions (method §4), one test per rule.

Rubrics are read the way a bench holds them: ``<task>/rubrics/<id>.json`` in the released layout,
loaded through the rubric store, which post-processes every rubric it returns.
"""

from __future__ import annotations

import json

import pytest
from unit_helpers import criterion_dict, make_criterion, rubric_dict

from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.rubric.postprocess import PRESERVATION_KEYWORDS, is_preservation, postprocess
from argus_dagster.method.rubric.schema import parse_rubric
from argus_dagster.method.rubric.store import resolve_rubric

# Which conditions each task has; the paths are never read (only their presence matters here).
INPUTS = {
    "T2V": dict(),
    "TI2V": dict(first_frame="/in/ff.png"),
    "TS2V": dict(subject_images=("/in/subject.png",)),
    "TV2V": dict(source_video="/in/source.mp4"),
    "TSV2V": dict(subject_images=("/in/subject.png",), source_video="/in/source.mp4"),
}


def released(tmp_path, task, *crits):
    """Write a rubric to ``<bench>/<task>/rubrics/<id>.json`` and load it as the pipeline does."""
    inst = InputInstance("case_001", "A prompt.", **INPUTS[task])
    assert inst.task.value == task
    path = tmp_path / "bench" / task / "rubrics" / "case_001.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rubric_dict(*crits)), encoding="utf-8")

    def never(_):
        raise AssertionError("a released rubric is loaded, never generated")

    rubric, source, log, load_log = resolve_rubric(inst, task, tmp_path / "bench", tmp_path / "home", {}, never)
    assert source == "loaded" and load_log == []
    return {c.id: c for c in rubric.criteria}, log


# --- rule 1: subject image or source video -> dimensions 5, 6, 8, 10 low ---------------------------

@pytest.mark.parametrize("task", ["TS2V", "TV2V", "TSV2V"])
@pytest.mark.parametrize("dim", [5, 6, 8, 10])
def test_rule_1_generic_dimensions_become_low_with_subject_or_source(tmp_path, task, dim):
    c, log = released(tmp_path, task, criterion_dict(f"d{dim}", dimension=dim, importance="high"),
                      criterion_dict("medium_one", dimension=dim, importance="medium"),
                      criterion_dict("other", dimension=9, importance="high"))
    assert c[f"d{dim}"].importance == "low" and c["medium_one"].importance == "low"
    assert c["other"].importance == "high"
    assert f"d{dim}: importance high -> low (rule 1: subject or source present)" in log


@pytest.mark.parametrize("task", ["T2V", "TI2V"])
def test_rule_1_not_for_text_or_plain_image_to_video(tmp_path, task):
    c, log = released(tmp_path, task, criterion_dict("cam", dimension=10, importance="high"),
                      criterion_dict("scene", dimension=6, importance="medium"))
    assert c["cam"].importance == "high" and c["scene"].importance == "medium" and log == []


def test_rule_1_low_stays_low_and_is_not_logged(tmp_path):
    c, log = released(tmp_path, "TS2V", criterion_dict("cam", dimension=10, importance="low"))
    assert c["cam"].importance == "low" and log == []


# --- rule 2 needs subject AND source ---------------------------------------------------------------

@pytest.mark.parametrize("task", ["T2V", "TI2V", "TS2V", "TV2V"])
def test_rule_2_only_with_subject_and_source(tmp_path, task):
    """Plain TV2V gets rule 1 alone: preservation, edit and identity criteria are left as written."""
    c, log = released(
        tmp_path, task,
        criterion_dict("locality", dimension=19, importance="high", type="hard", hard_cap=6),
        criterion_dict("background_preserved", dimension=13, importance="high", type="hard", hard_cap=6),
        criterion_dict("edit", dimension=18, importance="medium", type="hard", hard_cap=6),
        criterion_dict("ident", dimension=17, importance="medium", type="hard", hard_cap=6))
    assert (c["locality"].importance, c["locality"].hard_cap) == ("high", 6)
    assert (c["background_preserved"].importance, c["background_preserved"].hard_cap) == ("high", 6)
    assert (c["edit"].importance, c["edit"].hard_cap) == ("medium", 6)
    assert c["ident"].hard_cap == 6
    assert log == []


def test_rule_2a_edit_and_inserted_subject_at_least_high_cap_at_most_2(tmp_path):
    c, log = released(
        tmp_path, "TSV2V",
        criterion_dict("edit", dimension=18, importance="low", type="hard", hard_cap=6),
        criterion_dict("inserted", dimension=21, importance="medium", type="hard", hard_cap=4),
        criterion_dict("edit_soft", dimension=18, importance="medium", type="soft", hard_cap=6),
        criterion_dict("edit_hard_nocap", dimension=18, importance="high", type="hard", hard_cap=None),
        # dimension 18 wins over the preservation keywords (first branch that matches)
        criterion_dict("edit_preserves_motion", dimension=18, importance="high", type="hard", hard_cap=4))
    assert (c["edit"].importance, c["edit"].hard_cap) == ("high", 2)
    assert (c["inserted"].importance, c["inserted"].hard_cap) == ("high", 2)
    assert (c["edit_soft"].importance, c["edit_soft"].hard_cap) == ("high", 6)  # soft: cap untouched
    assert c["edit_hard_nocap"].hard_cap is None  # a hard criterion without a cap keeps none
    assert (c["edit_preserves_motion"].importance, c["edit_preserves_motion"].hard_cap) == ("high", 2)
    assert "edit: importance low -> high (rule 2a: edit or inserted subject)" in log
    assert "inserted: hard_cap 4 -> 2 (rule 2a: edit or inserted subject)" in log
    assert not any(line.startswith(("edit_soft: hard_cap", "edit_hard_nocap")) for line in log)


def test_rule_2b_subject_identity_cap_at_most_2_before_the_preservation_keywords(tmp_path):
    c, log = released(
        tmp_path, "TSV2V",
        criterion_dict("ident", dimension=17, importance="medium", type="hard", hard_cap=6),
        criterion_dict("ident2", dimension=17, importance="medium", type="hard", hard_cap=2),
        criterion_dict("identity_consistency", dimension=17, importance="high", type="hard", hard_cap=6),
        criterion_dict("ident_nocap", dimension=17, importance="high", type="hard", hard_cap=None),
        criterion_dict("ident_soft", dimension=17, importance="high", type="soft", hard_cap=6))
    assert c["ident"].hard_cap == 2 and c["ident"].importance == "medium"
    assert c["ident2"].hard_cap == 2
    # A dimension-17 id containing "consisten" is an identity criterion: high stays high, cap 2 not 4.
    assert c["identity_consistency"].importance == "high" and c["identity_consistency"].hard_cap == 2
    assert c["ident_nocap"].hard_cap is None and c["ident_soft"].hard_cap == 6
    assert log == ["ident: hard_cap 6 -> 2 (rule 2b: subject identity)",
                   "identity_consistency: hard_cap 6 -> 2 (rule 2b: subject identity)"]


@pytest.mark.parametrize("cid", ["scene_preserved", "structure_motion_fidelity", "motion_preserved_from_source",
                                 "temporal_consistency", "background_preserved", "Unchanged_regions",
                                 "layout_PRESERVATION", "lighting_consistent"])
def test_rule_2c_preservation_keywords(tmp_path, cid):
    c, log = released(tmp_path, "TSV2V", criterion_dict(cid, dimension=13, importance="high", type="hard", hard_cap=6))
    assert (c[cid].importance, c[cid].hard_cap) == ("medium", 4)
    assert log == [f"{cid}: importance high -> medium (rule 2c: preservation criterion)",
                   f"{cid}: hard_cap 6 -> 4 (rule 2c: preservation criterion)"]


def test_rule_2c_preservation_caps_only_on_hard_criteria_with_a_cap(tmp_path):
    c, log = released(
        tmp_path, "TSV2V",
        criterion_dict("locality", dimension=19, importance="high", type="hard", hard_cap=6),
        criterion_dict("bg_unchanged", dimension=13, importance="high", type="hard", hard_cap=None),
        criterion_dict("style_consistency", dimension=14, importance="medium", type="soft", hard_cap=6),
        criterion_dict("already_preserved", dimension=19, importance="low", type="hard", hard_cap=2),
        criterion_dict("quality", dimension=13, importance="high", type="hard", hard_cap=6))
    assert (c["locality"].importance, c["locality"].hard_cap) == ("medium", 4)
    assert (c["bg_unchanged"].importance, c["bg_unchanged"].hard_cap) == ("medium", None)
    assert (c["style_consistency"].importance, c["style_consistency"].hard_cap) == ("medium", 6)
    assert (c["already_preserved"].importance, c["already_preserved"].hard_cap) == ("low", 2)  # never raised
    assert (c["quality"].importance, c["quality"].hard_cap) == ("high", 6)  # not a preservation criterion
    assert log == ["locality: importance high -> medium (rule 2c: preservation criterion)",
                   "locality: hard_cap 6 -> 4 (rule 2c: preservation criterion)",
                   "bg_unchanged: importance high -> medium (rule 2c: preservation criterion)"]


def test_rules_1_and_2_both_apply_to_one_criterion(tmp_path):
    c, log = released(tmp_path, "TSV2V",
                      criterion_dict("scene_preserved", dimension=6, importance="high", type="hard", hard_cap=6))
    assert (c["scene_preserved"].importance, c["scene_preserved"].hard_cap) == ("low", 4)


@pytest.mark.parametrize(
    "cid, dim, expected",
    [("x", 19, True), ("background_preservation", 13, True), ("Preserve_layout", 2, True),
     ("identity_consistency", 17, True), ("unchanged_regions", 6, True), ("structure_motion", 20, True),
     ("edit_following", 18, False), ("motion", 9, False)],
)
def test_is_preservation(cid, dim, expected):
    assert is_preservation(make_criterion(cid, dimension=dim)) is expected


def test_keywords_are_the_methods():
    assert set(PRESERVATION_KEYWORDS) == {"preserv", "consisten", "unchanged", "background_preserved",
                                          "scene_preserved", "structure_motion", "motion_preserved",
                                          "temporal_consistency"}


def test_criteria_never_deleted_order_kept_input_untouched():
    crits = [criterion_dict(f"c{d}", dimension=d, importance="high", type="hard" if d % 2 else "soft",
                            hard_cap=6 if d % 2 else None) for d in range(1, 23)]
    r = parse_rubric(rubric_dict(*crits))
    for cond in ({"has_subject": s, "has_source": v} for s in (False, True) for v in (False, True)):
        out, _ = postprocess(r, **cond)
        assert [c.id for c in out.criteria] == [c.id for c in r.criteria]
    assert all(c.importance == "high" for c in r.criteria)


def test_postprocess_is_idempotent():
    r = parse_rubric(rubric_dict(criterion_dict("locality", dimension=19, importance="high", type="hard", hard_cap=6),
                                 criterion_dict("inserted", dimension=21, importance="low", type="hard", hard_cap=6),
                                 criterion_dict("cam", dimension=10, importance="high")))
    once, log1 = postprocess(r, has_subject=True, has_source=True)
    twice, log2 = postprocess(once, has_subject=True, has_source=True)
    assert log1 and log2 == []
    assert twice.content_hash() == once.content_hash()
