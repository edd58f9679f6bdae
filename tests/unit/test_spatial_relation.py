"""``spatial_relation`` on scenes whose answer is known: a stub localizer puts each entity in a box
chosen here and a stub depth model returns a map built here, so left/right and front/behind have
one right answer, read off the boxes and the map, not off the tool.

(The random-weight detector of test_model_tools.py finds both entities in one box, so only the
shapes and ranges of its records can be checked there.)
"""

from __future__ import annotations

import numpy as np
import pytest
from unit_helpers import H, W

from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.detection import Detection
from argus_dagster.method.evidence.tools.spatial import SpatialRelation

# Boxes (x0, y0, x1, y1) in a 96 x 64 frame: the cat on the left, the dog on the right.
CAT = (4.0, 20.0, 28.0, 44.0)
DOG = (64.0, 16.0, 92.0, 48.0)
NEAR_M, FAR_M, WALL_M = 1.5, 6.0, 12.0


class BoxLocalizer:
    """Each query found in the box given for it (None: not found), in every frame or per frame."""

    version = "stub-boxes"
    threshold = 0.1

    def __init__(self, boxes: dict[str, tuple | list]):
        self.boxes = boxes
        self.calls: list[list[str]] = []

    def _box(self, query: str, i: int):
        b = self.boxes.get(query)
        return b[i % len(b)] if isinstance(b, list) else b

    def detect(self, frames, queries):
        self.calls.append(list(queries))
        return [[[Detection(0.9, self._box(q, i))] if self._box(q, i) is not None else [] for q in queries]
                for i in range(len(frames))]


class MapDepth:
    """A depth map per frame: the wall far, each entity's box at the distance given for it.
    ``larger_is_closer`` as a relative model (inverse depth) or a metric one (metres)."""

    version = "stub-depth"

    def __init__(self, metres: dict[tuple, float], larger_is_closer: bool):
        self.metres = metres
        self.larger_is_closer = larger_is_closer

    def maps(self, frames):
        out = []
        for f in frames:
            m = np.full(f.shape[:2], WALL_M)
            for (x0, y0, x1, y1), d in self.metres.items():
                m[int(y0):int(y1), int(x0):int(x1)] = d
            out.append(1.0 / m if self.larger_is_closer else m)
        return out


@pytest.fixture
def media(write_clip):
    frames = np.full((12, H, W, 3), 90, np.uint8)
    return MediaStore({"output_video": write_clip("scene.mp4", frames)})


def relate(localizer, depth, entities: str, relation: str, media) -> dict:
    return SpatialRelation(localizer, depth).run({"on": "output_video", "entities": entities, "relation": relation},
                                                 media)


@pytest.mark.parametrize("entities, per_frame, holds, verdict", [
    ("cat, dog", "left", 1.0, "cat left of dog"),
    ("dog, cat", "right", 0.0, "cat left of dog"),
])
def test_left_right_reads_the_boxes_in_the_claims_order(media, entities, per_frame, holds, verdict):
    loc = BoxLocalizer({"cat": CAT, "dog": DOG})
    rec = relate(loc, None, entities, "left_right", media)
    assert rec["ok"] and rec["entities"] == [e.strip() for e in entities.split(",")]
    assert loc.calls == [rec["entities"]]
    assert rec["n_both_found"] == rec["n_frames"] > 0 and set(rec["per_frame"]) == {per_frame}
    assert rec["holds_fraction"] == holds and rec["reversed_fraction"] == 1.0 - holds
    assert rec["verdict"] == verdict


def test_left_right_per_frame_follows_an_entity_that_crosses(media):
    """The cat walks from the far left to the far right past a dog in the middle: left, then right."""
    n = relate(BoxLocalizer({"cat": CAT, "dog": DOG}), None, "cat, dog", "left_right", media)["n_frames"]
    xs = np.linspace(0, W - 16, n)
    cat = [(float(x), 20.0, float(x) + 16, 44.0) for x in xs]
    dog = (40.0, 20.0, 56.0, 44.0)  # centre 48
    rec = relate(BoxLocalizer({"cat": cat, "dog": dog}), None, "cat, dog", "left_right", media)
    expected = ["same" if abs(x + 8 - 48) <= 0.02 * W else "left" if x + 8 < 48 else "right" for x in xs]
    assert rec["per_frame"] == expected and expected[0] == "left" and expected[-1] == "right"
    assert rec["holds_fraction"] == round(expected.count("left") / n, 4)


def test_left_right_counts_only_frames_where_both_are_found(media):
    n = relate(BoxLocalizer({"cat": CAT, "dog": DOG}), None, "cat, dog", "left_right", media)["n_frames"]
    cat = [CAT if i % 3 else None for i in range(n)]  # missing in every third frame
    rec = relate(BoxLocalizer({"cat": cat, "dog": DOG}), None, "cat, dog", "left_right", media)
    both = sum(1 for b in cat if b is not None)
    assert rec["n_both_found"] == both and rec["per_frame"] == ["left"] * both
    assert rec["found_fraction"] == [round(both / n, 4), 1.0] and rec["verdict"] == "cat left of dog"


@pytest.mark.parametrize("larger_is_closer", [True, False], ids=["inverse-depth", "metric"])
@pytest.mark.parametrize("entities, cat_m, dog_m, per_frame, holds, verdict", [
    ("cat, dog", NEAR_M, FAR_M, "front", 1.0, "cat in front of dog"),
    ("dog, cat", NEAR_M, FAR_M, "behind", 0.0, "cat in front of dog"),
    ("cat, dog", FAR_M, NEAR_M, "behind", 0.0, "dog in front of cat"),
    ("dog, cat", FAR_M, NEAR_M, "front", 1.0, "dog in front of cat"),
])
def test_front_back_reads_the_depth_map_in_either_orientation(media, larger_is_closer, entities, cat_m, dog_m,
                                                             per_frame, holds, verdict):
    depth = MapDepth({CAT: cat_m, DOG: dog_m}, larger_is_closer)
    rec = relate(BoxLocalizer({"cat": CAT, "dog": DOG}), depth, entities, "front_back", media)
    assert rec["ok"] and rec["n_both_found"] == rec["n_frames"] > 0 and set(rec["per_frame"]) == {per_frame}
    assert rec["holds_fraction"] == holds and rec["reversed_fraction"] == 1.0 - holds
    assert rec["verdict"] == verdict and rec["backend"] == "stub-boxes+stub-depth"


def test_front_back_at_one_depth_is_undetermined(media):
    depth = MapDepth({CAT: FAR_M, DOG: FAR_M}, True)
    rec = relate(BoxLocalizer({"cat": CAT, "dog": DOG}), depth, "cat, dog", "front_back", media)
    assert set(rec["per_frame"]) == {"same"} and rec["holds_fraction"] == 0.0 == rec["reversed_fraction"]
    assert rec["verdict"] == "undetermined"


def test_one_entity_lists_its_horizontal_centres(media):
    rec = relate(BoxLocalizer({"cat": CAT}), None, "cat", "left_right", media)
    assert rec["verdict"] is None and set(rec["center_x"]) == {round((CAT[0] + CAT[2]) / 2 / W, 4)}
