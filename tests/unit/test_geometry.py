"""Geometry of the localization tools on synthetic boxes, depth maps and clips whose answer is known."""

import numpy as np
import pytest

from argus_dagster.method.evidence.tools.detection import Detection, crop, propagate_box, split_entities, track_boxes
from argus_dagster.method.evidence.tools.geometry import (
    box_overlap,
    closeness,
    count_instances,
    depth_occlusion,
    fraction,
    front_entity,
    horizontal_relation,
    iou,
    median_count,
    nms,
    region_closeness,
)
from argus_dagster.method.evidence.tools.spatial import parse_count


def test_iou_and_nms():
    assert iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert iou((0, 0, 10, 10), (10, 0, 20, 10)) == 0.0
    assert iou((0, 0, 10, 10), (5, 0, 15, 10)) == pytest.approx(50 / 150)
    boxes = [(0, 0, 10, 10), (1, 1, 11, 11), (50, 50, 60, 60)]
    assert nms(boxes, [0.9, 0.8, 0.7]) == [0, 2]
    assert nms(boxes, [0.5, 0.8, 0.7]) == [1, 2]


def test_counting_merges_duplicates_and_ignores_weak_boxes():
    boxes = [(0, 0, 10, 10), (1, 0, 11, 10), (30, 0, 40, 10), (60, 0, 70, 10), (90, 0, 100, 10)]
    scores = [0.9, 0.85, 0.6, 0.4, 0.05]
    assert count_instances(boxes, scores, threshold=0.3) == 3  # duplicate merged, 0.05 too weak
    assert count_instances(boxes, scores, threshold=0.7) == 1
    assert median_count([3, 3, 4, 3, 2]) == 3
    assert median_count([2, 3]) == 2  # half rounds down: a flicker of extras does not count
    assert median_count([]) == 0


def test_left_right_from_box_centres():
    cat, dog = (10, 40, 50, 80), (120, 30, 170, 90)
    assert horizontal_relation(cat, dog, frame_width=200) == "left"
    assert horizontal_relation(dog, cat, frame_width=200) == "right"
    assert horizontal_relation((98, 0, 102, 5), (99, 50, 103, 60), frame_width=200) == "same"
    assert fraction(["left", "left", "right", "same"], "left") == 0.5
    assert fraction([], "left") is None


def _scene(larger_is_closer: bool) -> tuple[np.ndarray, tuple, tuple]:
    """A wall 10 m away, a box at 2 m (front) overlapping a box at 5 m (back) on its right half."""
    metres = np.full((100, 200), 10.0)
    back = (100, 20, 180, 80)
    front = (60, 30, 140, 90)
    metres[20:80, 100:180] = 5.0
    metres[30:90, 60:140] = 2.0
    depth = 1.0 / metres if larger_is_closer else metres
    return depth, front, back


@pytest.mark.parametrize("larger_is_closer", [True, False])
def test_front_back_and_occlusion_from_a_depth_map(larger_is_closer):
    depth, front, back = _scene(larger_is_closer)
    close = closeness(depth, larger_is_closer)
    assert front_entity(close, front, back) == "a"
    assert front_entity(close, back, front) == "b"
    assert region_closeness(close, front) > region_closeness(close, back)
    # The front box covers x 100-140 of the back box's 100-180, over y 30-80 of 20-80.
    expected = (40 * 50) / (80 * 60)
    assert box_overlap(front, back) == pytest.approx(expected)
    assert depth_occlusion(close, front, back) == pytest.approx(expected)


def test_occlusion_counts_only_the_front_entitys_pixels():
    # The front box spans background as well as the entity: only the entity hides the back one.
    metres = np.full((100, 200), 10.0)
    metres[20:80, 100:180] = 5.0  # back entity
    metres[30:90, 60:100] = 2.0  # the front entity itself stops at x = 100
    front, back = (60, 30, 140, 90), (100, 20, 180, 80)
    close = closeness(metres, larger_is_closer=False)
    assert box_overlap(front, back) > 0.4
    assert depth_occlusion(close, front, back) == 0.0


def test_entities_at_equal_depth_tie():
    flat = np.full((50, 50), 3.0)
    assert front_entity(flat, (0, 0, 10, 10), (20, 20, 30, 30)) == "tie"


def _moving_square(n: int = 12, step: int = 4) -> np.ndarray:
    rng = np.random.default_rng(0)
    base = (rng.random((80, 160, 3)) * 60).astype(np.uint8)  # textured background
    frames = np.repeat(base[None], n, axis=0).copy()
    pattern = (rng.random((20, 20, 3)) * 255).astype(np.uint8)
    for i in range(n):
        x = 10 + step * i
        frames[i, 30:50, x:x + 20] = pattern
    return frames


def test_template_match_follows_a_moving_patch():
    frames = _moving_square()
    moved = propagate_box(frames[0], frames[1], (10, 30, 30, 50))
    assert moved is not None
    box, score = moved
    assert box == (14.0, 30.0, 34.0, 50.0) and score > 0.99
    assert propagate_box(frames[0], frames[1], (10, 30, 12, 50)) is None  # too thin to match


def test_tracking_fills_frames_between_detections():
    frames = _moving_square(n=12, step=4)
    detected = {0: Detection(0.9, (10, 30, 30, 50)), 8: Detection(0.8, (42, 30, 62, 50)), 11: None}
    track = track_boxes(frames, detected)
    assert [s for _, s in track][:9] == ["detected"] + ["tracked"] * 7 + ["detected"]
    assert track[11] == (None, "absent")  # a detection frame keeps the detector's answer
    for i in range(1, 8):
        det, _ = track[i]
        assert det.box == (10.0 + 4 * i, 30.0, 30.0 + 4 * i, 50.0)
        assert 0 < det.score <= 0.9
    # Frames 9 and 10 come from the detection on frame 8, carried forward.
    assert track[9][0].box == (46.0, 30.0, 66.0, 50.0) and track[9][1] == "tracked"


def test_tracking_drops_a_box_that_no_longer_matches():
    frames = _moving_square(n=6)
    frames[3:] = 0  # the scene vanishes: nothing to match
    track = track_boxes(frames, {0: Detection(0.9, (10, 30, 30, 50))})
    assert [s for _, s in track] == ["detected", "tracked", "tracked", "lost", "lost", "lost"]


def test_crop_pads_and_clips_to_the_frame():
    frame = np.zeros((50, 100, 3), np.uint8)
    assert crop(frame, (10, 10, 30, 20)).shape == (12, 24, 3)  # 10% of the size added on each side
    assert crop(frame, (95, 40, 100, 50)).shape[:2] == (11, 6)
    assert crop(frame, (100, 50, 100, 50)).shape[:2] == (1, 1)  # degenerate box still one pixel


def test_entity_lists_and_expected_counts():
    assert split_entities("a red car, a dog") == ["a red car", "a dog"]
    assert split_entities("cat and dog") == ["cat", "dog"]
    assert split_entities(["cat", " dog "]) == ["cat", "dog"]
    assert split_entities("") == []
    assert parse_count("three") == 3 and parse_count("4") == 4 and parse_count(2) == 2
    assert parse_count("many") is None and parse_count(None) is None
