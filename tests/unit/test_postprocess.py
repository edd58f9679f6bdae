"""Deterministic rubric post-processing keyed on the input's conditions (method §4)."""

from __future__ import annotations

import pytest

from argus_dagster.rubric.postprocess import is_preservation, postprocess
from argus_dagster.rubric.schema import parse_rubric
from unit_helpers import criterion_dict, make_criterion, rubric_dict

CONDITIONS = {
    "T2V": dict(has_subject=False, has_source=False),
    "TS2V": dict(has_subject=True, has_source=False),
    "TV2V": dict(has_subject=False, has_source=True),
    "TSV2V": dict(has_subject=True, has_source=True),
}


def _rubric(*crits):
    return parse_rubric(rubric_dict(*crits))


def _by_id(rubric):
    return {c.id: c for c in rubric.criteria}


@pytest.mark.parametrize("dim", [5, 6, 8, 10])
@pytest.mark.parametrize("task", ["TS2V", "TV2V", "TSV2V"])
def test_generic_dimensions_become_low_with_subject_or_source(dim, task):
    r = _rubric(criterion_dict(f"d{dim}", dimension=dim, importance="high"),
                criterion_dict("other", dimension=9, importance="high"))
    out, log = postprocess(r, **CONDITIONS[task])
    c = _by_id(out)
    assert c[f"d{dim}"].importance == "low"
    assert c["other"].importance == "high"
    assert any(line.startswith(f"d{dim}: importance high -> low") for line in log)


@pytest.mark.parametrize("dim", [5, 6, 8, 10])
def test_t2v_rubric_untouched(dim):
    r = _rubric(criterion_dict("a", dimension=dim, importance="high"),
                criterion_dict("keep_preserved", dimension=19, importance="high", type="hard", hard_cap=6),
                criterion_dict("e", dimension=18, importance="low", type="hard", hard_cap=6))
    out, log = postprocess(r, **CONDITIONS["T2V"])
    assert log == []
    assert out.content_hash() == r.content_hash()


def test_low_stays_low_and_is_not_logged():
    r = _rubric(criterion_dict("cam", dimension=10, importance="low"))
    out, log = postprocess(r, **CONDITIONS["TS2V"])
    assert out.criteria[0].importance == "low" and log == []


@pytest.mark.parametrize(
    "cid, dim, expected",
    [("x", 19, True), ("background_preservation", 13, True), ("Preserve_layout", 2, True),
     ("identity_consistency", 17, True), ("unchanged_regions", 6, True), ("edit_following", 18, False),
     ("motion", 9, False)],
)
def test_is_preservation(cid, dim, expected):
    assert is_preservation(make_criterion(cid, dimension=dim)) is expected


@pytest.mark.parametrize("task", ["TV2V", "TSV2V"])
def test_preservation_at_most_medium_and_cap_at_most_4_with_source(task):
    r = _rubric(
        criterion_dict("locality", dimension=19, importance="high", type="hard", hard_cap=6),
        criterion_dict("bg_unchanged", dimension=13, importance="high", type="hard", hard_cap=None),
        criterion_dict("style_consistency", dimension=14, importance="medium", type="soft", hard_cap=6),
        criterion_dict("already_ok_preserved", dimension=19, importance="low", type="hard", hard_cap=2),
        criterion_dict("quality", dimension=13, importance="high", type="hard", hard_cap=6),
    )
    out, log = postprocess(r, **CONDITIONS[task])
    c = _by_id(out)
    assert c["locality"].importance == "medium" and c["locality"].hard_cap == 4
    assert c["bg_unchanged"].importance == "medium" and c["bg_unchanged"].hard_cap == 4
    assert c["style_consistency"].importance == "medium" and c["style_consistency"].hard_cap == 4
    # Stricter settings are kept: at most means never raised.
    assert c["already_ok_preserved"].importance == "low" and c["already_ok_preserved"].hard_cap == 2
    # Not a preservation criterion: unchanged.
    assert c["quality"].importance == "high" and c["quality"].hard_cap == 6
    assert "locality: hard_cap 6 -> 4 (preservation criterion)" in log
    assert "bg_unchanged: hard_cap None -> 4 (preservation criterion)" in log
    assert not any(line.startswith("already_ok_preserved") or line.startswith("quality") for line in log)


def test_preservation_untouched_without_source():
    r = _rubric(criterion_dict("identity_consistency", dimension=17, importance="high", type="hard", hard_cap=6))
    out, log = postprocess(r, **CONDITIONS["TS2V"])
    assert out.criteria[0].importance == "high" and out.criteria[0].hard_cap == 6 and log == []


def test_dims_18_21_at_least_high_caps_at_most_2_with_subject_and_source():
    r = _rubric(
        criterion_dict("edit", dimension=18, importance="low", type="hard", hard_cap=6),
        criterion_dict("inserted", dimension=21, importance="medium", type="hard", hard_cap=4),
        criterion_dict("edit_soft", dimension=18, importance="medium", type="soft", hard_cap=None),
        criterion_dict("edit_hard_nocap", dimension=18, importance="high", type="hard", hard_cap=None),
    )
    out, log = postprocess(r, **CONDITIONS["TSV2V"])
    c = _by_id(out)
    assert c["edit"].importance == "high" and c["edit"].hard_cap == 2
    assert c["inserted"].importance == "high" and c["inserted"].hard_cap == 2
    assert c["edit_soft"].importance == "high" and c["edit_soft"].hard_cap is None
    assert c["edit_hard_nocap"].hard_cap == 2
    assert "edit: importance low -> high (subject and source present)" in log
    assert "inserted: hard_cap 4 -> 2 (subject and source present)" in log


@pytest.mark.parametrize("task", ["TS2V", "TV2V"])
def test_dims_17_18_21_untouched_unless_both_present(task):
    r = _rubric(criterion_dict("edit", dimension=18, importance="medium", type="hard", hard_cap=6),
                criterion_dict("ident", dimension=17, importance="medium", type="hard", hard_cap=6))
    out, log = postprocess(r, **CONDITIONS[task])
    c = _by_id(out)
    assert c["edit"].importance == "medium" and c["edit"].hard_cap == 6
    assert c["ident"].hard_cap == 6
    assert log == []


def test_dim_17_cap_at_most_2_with_subject_and_source():
    r = _rubric(criterion_dict("ident", dimension=17, importance="medium", type="hard", hard_cap=6),
                criterion_dict("ident2", dimension=17, importance="medium", type="hard", hard_cap=2))
    out, log = postprocess(r, **CONDITIONS["TSV2V"])
    c = _by_id(out)
    assert c["ident"].hard_cap == 2 and c["ident"].importance == "medium"
    assert c["ident2"].hard_cap == 2
    assert log == ["ident: hard_cap 6 -> 2 (subject and source present)"]


def test_criteria_never_deleted_and_order_kept():
    crits = [criterion_dict(f"c{d}", dimension=d, importance="high", type="hard" if d % 2 else "soft",
                            hard_cap=6 if d % 2 else None) for d in range(1, 23)]
    r = _rubric(*crits)
    for task, cond in CONDITIONS.items():
        out, _ = postprocess(r, **cond)
        assert [c.id for c in out.criteria] == [c.id for c in r.criteria], task
    # The input rubric is not modified in place.
    assert all(c.importance == "high" for c in r.criteria)


def test_postprocess_is_idempotent():
    r = _rubric(criterion_dict("locality", dimension=19, importance="high", type="hard", hard_cap=6),
                criterion_dict("inserted", dimension=21, importance="low", type="hard", hard_cap=6),
                criterion_dict("cam", dimension=10, importance="high"))
    once, log1 = postprocess(r, **CONDITIONS["TSV2V"])
    twice, log2 = postprocess(once, **CONDITIONS["TSV2V"])
    assert log1 and log2 == []
    assert twice.content_hash() == once.content_hash()
