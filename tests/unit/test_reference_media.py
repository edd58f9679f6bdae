"""``reference`` stands for the input's medium (method §6): the first frame, the subject image, or the
source video's middle frame; a retrieved reference replaces it; its cache identity is that medium's."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from unit_helpers import make_criterion, moving_frames

from argus_dagster.infra.media import JUDGE_POLICY, MediaError, VideoReader
from argus_dagster.method.evidence.executor import run_plan
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.plan import normalize_plan


def write_image(path: str, rgb: np.ndarray) -> None:
    cv2.imwrite(path, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))


def test_source_video_reference_is_its_middle_frame(write_clip, tmp_path):
    src = write_clip("src.mp4", moving_frames(3, n=25))
    store = MediaStore({"source_video": src, "output_video": src}, {"source_video": "abc"})
    assert not store.has("reference")
    scope = store.scope()
    scope.use_reference("source_video")
    got = scope.frames("reference", JUDGE_POLICY)
    reader = VideoReader(src)
    assert got.indices == (12,) and np.array_equal(got.array[0], reader.get([12])[0])
    assert scope.has("reference") and not scope.is_video("reference")
    assert scope.digest("reference") == "abc:middle"
    assert not store.has("reference")  # per criterion: other scopes are untouched
    scope.register("reference", np.zeros((4, 4, 3), np.uint8))  # a retrieved reference replaces it
    assert scope.frames("reference", JUDGE_POLICY).array.shape == (1, 4, 4, 3) and scope.stands_for("reference") is None


def test_image_references_and_bad_sources(tmp_path):
    img = np.full((8, 8, 3), 200, np.uint8)
    path = str(tmp_path / "subject.png")
    write_image(path, img)
    scope = MediaStore({"subject_image": path}, {"subject_image": "d1"}).scope()
    scope.use_reference("subject_image")
    assert np.array_equal(scope.frames("reference", JUDGE_POLICY).array[0], img)
    assert scope.digest("reference") == "d1:image"
    with pytest.raises(MediaError, match="reference_source 'web_search'"):
        scope.use_reference("web_search")


def test_executor_registers_the_reference_before_the_plan_runs(tmp_path):
    img = np.full((8, 8, 3), 90, np.uint8)
    path = str(tmp_path / "ff.png")
    write_image(path, img)
    c = make_criterion("ff", dimension=16, evidence_plan={
        "reference_source": "first_frame",
        "tool_sequence": [{"tool": "vlm_qa", "args": {"question": "Same as the first frame?", "on": "reference"}}]})
    plan = normalize_plan(c, present_media={"first_frame"})
    assert plan.reference == "first_frame" and plan.status == "ok"

    class Echo:
        name, version = "vlm_qa", "echo"

        def run(self, args, media):
            return {"ok": True, "mean": float(media.frames(args["on"], JUDGE_POLICY).array.mean())}

    class Suite:
        def get(self, name):
            return Echo()

    (rec,) = run_plan(plan, MediaStore({"first_frame": path}).scope(), Suite())
    assert rec["ok"] and rec["mean"] == 90.0


def test_closing_a_store_closes_its_decoders_and_a_later_use_reopens(write_clip):
    """A candidate's decoders are closed when its work is done (decord decodes ahead into buffers of
    its own: a reader left for the garbage collector holds them until it runs), every scope's at once."""
    from argus_dagster.infra.media import SamplingPolicy

    src = write_clip("out.mp4", moving_frames(5, n=25))
    store = MediaStore({"output_video": src})
    scope = store.scope()
    first = scope.frames("output_video", JUDGE_POLICY)
    [reader] = store._shared.readers.values()
    assert not reader.closed
    store.close()
    assert reader.closed and not store._shared.readers and not store._shared.frames
    with pytest.raises(MediaError, match="closed"):
        reader.get([0])
    # used again (another policy after all), the store opens the video anew and decodes the same frames
    dense = SamplingPolicy("dense_test", fps=None, max_frames=8, max_side=JUDGE_POLICY.max_side)
    again = scope.frames("output_video", dense)
    assert again.array.shape[0] == 8 and not next(iter(store._shared.readers.values())).closed
    assert np.array_equal(VideoReader(src, max_side=JUDGE_POLICY.max_side).get([first.indices[0]])[0], first.array[0])
