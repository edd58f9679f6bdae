"""The deterministic offline rubric generator follows method §2-§4 for every task."""

from __future__ import annotations

import pytest

from argus_dagster.method.evidence.plan import normalize_plan
from argus_dagster.method.inputs import InputInstance, Task
from argus_dagster.method.rubric.offline import generate_offline, main_entity
from argus_dagster.method.rubric.postprocess import postprocess
from argus_dagster.method.rubric.schema import parse_rubric

# Fake paths: generation reads only which conditions are present, never the files.
INSTANCES = {
    Task.T2V: InputInstance("t2v", 'Three dogs run on a beach past a sign reading "SURF CLUB", the camera pans left.'),
    Task.TI2V: InputInstance("ti2v", "The woman in the picture turns and waves.", first_frame="/nope/ff.png"),
    Task.TS2V: InputInstance("ts2v", "The toy robot dances in a kitchen, watercolor style.",
                             subject_images=("/nope/robot.png",)),
    Task.TV2V: InputInstance("tv2v", "Replace the red car with a blue truck.", source_video="/nope/src.mp4"),
    Task.TSV2V: InputInstance("tsv2v", "Insert the dog from the photo next to the bench.",
                              subject_images=("/nope/dog.png",), source_video="/nope/src.mp4"),
}
TASKS = list(INSTANCES)


def _rubric(task):
    inst = INSTANCES[task]
    assert inst.task == task
    return generate_offline(inst)


def _ids(r):
    return {c.id: c for c in r.criteria}


@pytest.mark.parametrize("task", TASKS)
def test_rubric_validates_and_round_trips(task):
    r = _rubric(task)
    again = parse_rubric(r.model_dump(mode="json"))
    assert again.content_hash() == r.content_hash()
    assert r.generator["backend"] == "offline"
    assert r.task_understanding.startswith(task.value)
    assert len({c.id for c in r.criteria}) == len(r.criteria)


@pytest.mark.parametrize("task", TASKS)
def test_generation_is_deterministic(task):
    assert _rubric(task).content_hash() == _rubric(task).content_hash()


@pytest.mark.parametrize("task", TASKS)
def test_all_22_dimensions_considered(task):
    r = _rubric(task)
    assert [d.dimension for d in r.dimensions_considered] == list(range(1, 23))
    used = {c.dimension for c in r.criteria}
    for d in r.dimensions_considered:
        assert d.included == (d.dimension in used)
        assert d.reason


GEOMETRIC = {"flicker_probe", "depth_probe", "spatial_relation"}


@pytest.mark.parametrize("task", TASKS)
def test_geometric_tools_follow_a_vlm_qa_step(task):
    """Method §4: a geometric tool is added after a vlm_qa step (the semantic read first, the measure
    as a cross-check), never instead of it; flicker_probe only where flicker is what is checked."""
    for c in _rubric(task).criteria:
        tools = [s["tool"] for s in c.evidence_plan.tool_sequence]
        for i, t in enumerate(tools):
            if t in GEOMETRIC:
                assert "vlm_qa" in tools[:i], f"{c.id}: {t} without a vlm_qa step before it ({tools})"
        if "flicker_probe" in tools:
            assert c.dimension == 12 or "flicker" in " ".join(c.failure_modes), c.id


@pytest.mark.parametrize("task", TASKS)
def test_at_most_two_hard_criteria(task):
    hard = [c for c in _rubric(task).criteria if c.type == "hard"]
    assert 1 <= len(hard) <= 2
    assert all(c.hard_cap in (2, 4, 6) for c in hard)


@pytest.mark.parametrize("task", TASKS)
def test_rubric_is_a_fixed_point_of_postprocessing(task):
    inst = INSTANCES[task]
    r = _rubric(task)
    _, log = postprocess(r, has_subject=bool(inst.subject_images), has_source=inst.source_video is not None)
    assert log == []


@pytest.mark.parametrize("task", TASKS)
def test_conditional_dimensions_only_with_their_input(task):
    dims = {c.dimension for c in _rubric(task).criteria}
    allowed = {Task.T2V: set(), Task.TI2V: {16}, Task.TS2V: {17}, Task.TV2V: {18, 19, 20},
               Task.TSV2V: {17, 18, 19, 20, 21, 22}}[task]
    assert dims & set(range(16, 23)) <= allowed


def test_t2v_has_no_conditional_dimension():
    assert all(c.dimension <= 15 for c in _rubric(Task.T2V).criteria)


def test_quoted_text_gives_ocr_criterion():
    c = _ids(_rubric(Task.T2V))
    ocr = [x for x in c.values() if x.dimension == 7]
    assert len(ocr) == 1
    plan = ocr[0].evidence_plan
    assert plan.target_entity == "SURF CLUB"
    assert plan.tool_sequence[0]["tool"] == "ocr" and plan.tool_sequence[0]["args"]["target"] == "SURF CLUB"


@pytest.mark.parametrize("prompt, target", [("A shop window with the word 'SALE' painted on it.", "SALE"),
                                            ("A neon sign that says “OPEN LATE” at night.", "OPEN LATE")])
def test_other_quote_marks(prompt, target):
    r = generate_offline(InputInstance("q", prompt))
    assert [c.evidence_plan.target_entity for c in r.criteria if c.dimension == 7] == [target]


def test_apostrophes_are_not_quotes():
    r = generate_offline(InputInstance("a", "The cat's bowl sits next to the dog's bed in a child's room."))
    assert not any(c.dimension == 7 for c in r.criteria)
    r2 = generate_offline(InputInstance("b", "A baker's shop with a sign reading \"FRESH BREAD\"."))
    assert [c.evidence_plan.target_entity for c in r2.criteria if c.dimension == 7] == ["FRESH BREAD"]


def test_count_criterion():
    counts = [c for c in _rubric(Task.T2V).criteria if c.dimension == 3]
    assert len(counts) == 1
    c = counts[0]
    assert "3" in c.criterion and "dogs" in c.criterion
    steps = c.evidence_plan.tool_sequence
    assert {"tool": "spatial_relation", "args": {"on": "output_video", "entities": c.evidence_plan.target_entity,
                                                  "relation": "count"}} in steps
    assert "dogs" in c.evidence_plan.target_entity


def test_no_count_criterion_without_a_number():
    r = generate_offline(InputInstance("n", "A dog runs on a beach."))
    assert not any(c.dimension == 3 for c in r.criteria)


def test_t2v_camera_and_motion():
    c = _ids(_rubric(Task.T2V))
    assert c["camera_motion"].dimension == 10 and c["camera_motion"].importance == "medium"
    assert c["motion_quality"].importance == "high"
    assert c["entity_presence"].type == "hard"
    assert c["overall_alignment"].importance == "high"


def test_ti2v_first_frame_and_motion_are_separate():
    c = _ids(_rubric(Task.TI2V))
    ff, motion = c["first_frame_fidelity"], c["motion_from_first_frame"]
    assert ff.dimension == 16 and ff.importance == "medium" and ff.evidence_plan.reference_source == "first_frame"
    assert motion.dimension == 9 and motion.importance == "high"
    assert "motion_probe" in [s["tool"] for s in motion.evidence_plan.tool_sequence]
    assert "motion_quality" not in c


def test_ts2v_subject_identity():
    c = _ids(_rubric(Task.TS2V))
    ident = c["subject_identity"]
    assert ident.dimension == 17 and ident.type == "hard"
    assert ident.evidence_plan.reference_source == "subject_image"
    assert c["style"].dimension == 14
    assert c["overall_alignment"].dimension == 15


def test_tv2v_degenerate_edit_is_hard_with_cap_2():
    c = _ids(_rubric(Task.TV2V))
    d = c["degenerate_edit"]
    assert d.type == "hard" and d.hard_cap == 2 and d.importance == "high"
    assert {s["tool"] for s in d.evidence_plan.tool_sequence} >= {"change_probe", "motion_probe", "flicker_probe"}
    assert c["edit_following"].importance == "high" and c["edit_following"].dimension == 18
    assert c["source_preservation"].importance in ("medium", "low")
    assert "entity_presence" not in c


def test_tsv2v_edit_and_inserted_identity_at_least_high():
    r = _rubric(Task.TSV2V)
    for c in r.criteria:
        if c.dimension in (18, 21):
            assert c.importance == "high", c.id
            assert c.type == "soft" or c.hard_cap <= 2, c.id
    c = _ids(r)
    assert c["inserted_subject_identity"].dimension == 21 and c["inserted_subject_identity"].hard_cap == 2
    assert c["compositing"].dimension == 22


@pytest.mark.parametrize("task", TASKS)
def test_plans_normalize_for_their_input(task):
    """Plans are written against the input's own media: no condition or source step is repaired away."""
    inst = INSTANCES[task]
    for c in _rubric(task).criteria:
        p = normalize_plan(c, present_media=set(inst.condition_media), web_search=False)
        assert not {"absent_source", "absent_condition", "reference_source", "unknown_tool",
                    "malformed_step"} & {x["rule"] for x in p.repairs}, (c.id, p.repairs)


@pytest.mark.parametrize("prompt, entity", [("A red fox runs over a log.", "red fox"),
                                            ("The old man walks slowly.", "old man"),
                                            ("Fireworks over a city", "fireworks"),
                                            ("A red fox jumps over a log.", "red fox"),
                                            ("A chef slices two sirloin steaks while young children watch.", "chef")])
def test_main_entity(prompt, entity):
    assert main_entity(prompt) == entity
