"""Controls (what this evaluator tells apart): the control videos made from a model's own frames, the
other input a prompt swap takes, which criteria caught a control, and the table and sentence per task."""

import numpy as np
import polars as pl
import pytest

from argus_dagster.method import controls as ct


def _clip(n: int = 12) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 255, size=(n, 8, 10, 3), dtype=np.uint8)


def test_control_frames_reverse_freeze_and_shuffle_the_video_s_own_frames():
    clip = _clip()
    np.testing.assert_array_equal(ct.control_frames("reversed", clip), clip[::-1])
    frozen = ct.control_frames("frozen", clip)
    assert frozen.shape == clip.shape and all(np.array_equal(f, clip[0]) for f in frozen)
    shuffled = ct.control_frames("shuffled", clip, seed=3)
    assert sorted(map(bytes, shuffled)) == sorted(map(bytes, clip))  # the same frames
    assert not np.array_equal(shuffled, clip)
    np.testing.assert_array_equal(shuffled, ct.control_frames("shuffled", clip, seed=3))  # the same every run
    for seed in range(50):  # never the original order, whatever the seed
        assert not np.array_equal(ct.control_frames("shuffled", clip[:2], seed=seed), clip[:2])
    with pytest.raises(ValueError):
        ct.control_frames("prompt_swap", clip)


def test_a_control_that_is_its_original_again_is_recognized():
    clip = _clip()
    still = np.repeat(clip[:1], 12, axis=0)
    assert ct.same_frames(ct.control_frames("frozen", still), still)
    assert ct.same_frames(ct.control_frames("reversed", still), still)
    assert not ct.same_frames(ct.control_frames("reversed", clip), clip)
    noise = np.random.default_rng(1).integers(-1, 2, size=still.shape)  # a re-encoding's difference
    assert ct.same_frames(np.clip(still.astype(int) + noise, 0, 255).astype(np.uint8), still)
    assert not ct.same_frames(np.clip(still.astype(int) + 3 * noise, 0, 255).astype(np.uint8), still)


def test_edits_get_their_source_as_a_control_and_a_prompt_swap_takes_the_next_input():
    assert ct.kinds_for("T2V") == ("frozen", "shuffled", "reversed", "prompt_swap")
    assert ct.kinds_for("TV2V")[-1] == "source" and ct.kinds_for("TSV2V")[-1] == "source"
    assert ct.swap_partner(["b", "a", "c", "a"], "a") == "b"
    assert ct.swap_partner(["b", "a", "c"], "c") == "a"  # wraps
    assert ct.swap_partner(["a"], "a") is None and ct.swap_partner(["a", "b"], "z") is None


def test_the_criteria_that_caught_a_control_fell_by_a_point_or_more():
    original = [{"criterion_id": "motion", "score": 9.0}, {"criterion_id": "text", "score": 8.0},
                {"criterion_id": "look", "score": 6.0}, {"criterion_id": "vlm", "score": None}]
    control = [{"criterion_id": "motion", "score": 2.0}, {"criterion_id": "text", "score": 7.5},
               {"criterion_id": "look", "score": 5.0}, {"criterion_id": "vlm", "score": 1.0}]
    assert ct.caught_criteria(original, control) == ["look", "motion"]


def _rows(task: str, kind: str, outcomes: list[tuple[float, float, list[str]]]) -> list[dict]:
    return [{"task": task, "model": f"m{i}", "input_id": f"i{i}", "sample": "", "control": kind, "uri": "x",
             "original_score": o, "control_score": c, "caught": c <= o - ct.CAUGHT_BY, "criteria": crit,
             "judge": "evidence-only", "error": None} for i, (o, c, crit) in enumerate(outcomes)]


def test_the_table_per_task_and_kind_and_its_sentence():
    rows = (_rows("T2V", "frozen", [(8, 2, ["motion"]), (7, 1, ["motion", "look"])])
            + _rows("T2V", "reversed", [(8, 8, []), (7, 6.9, [])])
            + _rows("T2V", "prompt_swap", [(8, 7, ["text"]), (7, 7, []), (6, 6, []), (5, 5, [])])
            + _rows("T2V", "shuffled", [(8, 3, ["motion"]), (7, 2, ["motion"])]))
    rows.append({**rows[0], "control": "reversed", "control_score": None, "caught": None, "error": "boom"})  # unscored
    table = ct.summarize(pl.DataFrame(rows, schema=ct.CONTROL_SCORES))
    got = {r["control"]: (r["n"], r["caught_share"], r["criteria"]) for r in table.iter_rows(named=True)}
    assert got == {"frozen": (2, 1.0, "motion (2 of 2), look (1 of 2)"), "shuffled": (2, 1.0, "motion (2 of 2)"),
                   "reversed": (2, 0.0, None), "prompt_swap": (4, 0.25, "text (1 of 4)")}
    assert table["control"].to_list() == ["frozen", "shuffled", "reversed", "prompt_swap"]  # the kinds' order
    assert ct.controls_sentence(table) == ("this evaluator tells frozen and shuffled apart on 100% of inputs, "
                                           "a swapped prompt on 25%, reversed on 0%")
    assert ct.controls_sentence(table.head(0)) is None
