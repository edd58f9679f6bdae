"""Sampling policies and media errors (method §1, §5), bench manifests, and task inference."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from unit_helpers import moving_frames

from argus_dagster.infra.media import (
    DENSE_POLICY,
    JUDGE_POLICY,
    RUBRIC_POLICY,
    MediaError,
    VideoInfo,
    VideoReader,
    load_image,
    resize_longest,
    sample_indices,
)
from argus_dagster.method.bench import read_task
from argus_dagster.method.inputs import InputInstance, Task, infer_task

# --- sampling policies --------------------------------------------------------------------------


def test_policy_parameters_are_the_methods():
    assert (RUBRIC_POLICY.fps, RUBRIC_POLICY.max_frames) == (2.0, 8)
    assert (DENSE_POLICY.fps, DENSE_POLICY.max_frames) == (6.0, 48)
    assert (JUDGE_POLICY.fps, JUDGE_POLICY.max_frames) == (None, 8)


def test_rubric_policy_2fps_then_thinned_to_8():
    idx = sample_indices(VideoInfo(n_frames=120, fps=24.0, width=64, height=64), RUBRIC_POLICY)
    assert len(idx) == 8 and idx[0] == 0
    assert all(i % 12 == 0 for i in idx)  # on the 2 fps grid
    assert idx == sorted(set(idx)) and idx[-1] == 108


def test_rubric_policy_short_clip_not_thinned():
    idx = sample_indices(VideoInfo(n_frames=72, fps=24.0, width=64, height=64), RUBRIC_POLICY)
    assert idx == [0, 12, 24, 36, 48, 60]


def test_dense_policy_6fps_at_most_48():
    assert sample_indices(VideoInfo(24, 12.0, 96, 64), DENSE_POLICY) == list(range(0, 24, 2))
    idx = sample_indices(VideoInfo(n_frames=240, fps=24.0, width=64, height=64), DENSE_POLICY)
    assert len(idx) == 48 and idx[0] == 0 and all(i % 4 == 0 for i in idx)
    assert all(b > a for a, b in zip(idx, idx[1:]))


def test_judge_policy_8_uniform():
    idx = sample_indices(VideoInfo(n_frames=100, fps=30.0, width=64, height=64), JUDGE_POLICY)
    assert len(idx) == 8 and idx[0] == 0 and idx[-1] == 99
    gaps = np.diff(idx)
    assert gaps.max() - gaps.min() <= 1
    assert sample_indices(VideoInfo(5, 30.0, 64, 64), JUDGE_POLICY) == [0, 1, 2, 3, 4]


def test_slow_clip_and_empty_clip():
    # A clip slower than the policy rate gives every frame (up to the limit).
    assert sample_indices(VideoInfo(6, 1.0, 64, 64), RUBRIC_POLICY) == [0, 1, 2, 3, 4, 5]
    assert sample_indices(VideoInfo(0, 24.0, 64, 64), JUDGE_POLICY) == []


def test_resize_longest_keeps_aspect_and_never_upscales():
    big = np.zeros((1000, 2000, 3), np.uint8)
    assert resize_longest(big).shape == (384, 768, 3)
    small = np.zeros((100, 50, 3), np.uint8)
    assert resize_longest(small) is small


# --- video reader errors -----------------------------------------------------------------------


def test_video_reader_missing_file(tmp_path):
    p = str(tmp_path / "absent.mp4")
    with pytest.raises(MediaError, match="file not found") as ei:
        VideoReader(p)
    assert p in str(ei.value)


def test_video_reader_empty_file(tmp_path):
    p = tmp_path / "empty.mp4"
    p.write_bytes(b"")
    with pytest.raises(MediaError, match=r"empty file \(0 bytes\)") as ei:
        VideoReader(str(p))
    assert str(p) in str(ei.value)


def test_video_reader_corrupt_file(tmp_path):
    p = tmp_path / "corrupt.mp4"
    p.write_bytes(os.urandom(8192))
    with pytest.raises(MediaError, match="cannot be decoded|zero decodable frames") as ei:
        VideoReader(str(p))
    assert str(p) in str(ei.value)


def test_video_reader_reads_written_clip(write_clip):
    r = VideoReader(write_clip("ok.mp4", moving_frames()))
    assert (r.info.n_frames, r.info.fps, r.info.width, r.info.height) == (24, 12.0, 96, 64)
    assert r.info.duration == pytest.approx(2.0)
    fr = r.sample(JUDGE_POLICY)
    assert fr.array.shape == (8, 64, 96, 3) and fr.array.dtype == np.uint8
    assert fr.indices[0] == 0 and fr.timestamps[0] == 0.0
    assert fr.timestamps[-1] == pytest.approx(23 / 12)


def test_load_image_errors(tmp_path):
    with pytest.raises(MediaError, match="file not found"):
        load_image(str(tmp_path / "x.png"))
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not a png")
    with pytest.raises(MediaError, match="not a readable image"):
        load_image(str(bad))


# --- bench manifests ------------------------------------------------------------------------------


def _png(path):
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((8, 8, 3), 128, np.uint8))


def _manifest(folder, lines):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.jsonl").write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")


def test_read_task_row_errors_do_not_stop_the_good_row(tmp_path):
    bench = tmp_path / "bench"
    _png(bench / "T2V" / "frame.png")
    _png(bench / "x.png")  # exists, but outside the task folder
    _manifest(bench / "T2V", [
        {"id": "good", "prompt": "A red car drives along a coast road."},
        {"id": "escape", "prompt": "p", "first_frame": "../x.png"},
        {"id": "missing", "prompt": "p", "first_frame": "nothere.png"},
        '{"id": "broken", "prompt": ',
        {"id": "mismatch", "prompt": "p", "first_frame": "frame.png"},
        "",
        {"prompt": "no id"},
        {"id": "noprompt", "prompt": "   "},
    ])
    rows = read_task(bench, "T2V")
    by_id = {r["input_id"]: r for r in rows}
    assert len(rows) == 7
    assert all(r["task"] == "T2V" for r in rows)
    good = by_id["good"]
    assert good["error"] is None and good["prompt"] == "A red car drives along a coast road."
    assert len(good["content_hash"]) == 64
    assert "outside" in by_id["escape"]["error"] and "'first_frame'" in by_id["escape"]["error"]
    assert "not found" in by_id["missing"]["error"] and "'missing'" in by_id["missing"]["error"]
    assert "line 4" in by_id["!line-4"]["error"] and "not valid JSON" in by_id["!line-4"]["error"]
    assert "listed under T2V" in by_id["mismatch"]["error"] and "TI2V" in by_id["mismatch"]["error"]
    assert "missing field 'id'" in by_id["!line-7"]["error"]
    assert "'prompt'" in by_id["noprompt"]["error"]
    for r in rows:
        if r["error"]:
            assert r["content_hash"] == "" and r["first_frame"] is None


def test_read_task_ti2v_resolves_paths_and_hashes_content(tmp_path):
    bench = tmp_path / "bench"
    _png(bench / "TI2V" / "img" / "a.png")
    _manifest(bench / "TI2V", [{"id": "i1", "prompt": "p", "first_frame": "img/a.png"},
                               {"id": "i2", "prompt": "q", "first_frame": "img/a.png"}])
    rows = read_task(bench, "TI2V")
    assert [r["error"] for r in rows] == [None, None]
    assert rows[0]["first_frame"] == str((bench / "TI2V" / "img" / "a.png").resolve())
    assert rows[0]["content_hash"] != rows[1]["content_hash"]  # prompts differ
    assert InputInstance.from_row(rows[0]).task == Task.TI2V


def test_read_task_released_lowercase_layout(tmp_path):
    bench = tmp_path / "bench"
    _manifest(bench / "t2v", [{"id": "a", "prompt": "A cat."}])
    rows = read_task(bench, "T2V")
    assert len(rows) == 1 and rows[0]["error"] is None and rows[0]["input_id"] == "a"
    assert read_task(bench, "TI2V") == []


def test_read_task_field_aliases(tmp_path):
    bench = tmp_path / "bench"
    src = bench / "TV2V" / "src" / "s1.mp4"
    src.parent.mkdir(parents=True)
    src.write_bytes(b"fake video bytes")  # manifests are read without decoding media
    _manifest(bench / "TV2V", [{"input_id": "e1", "instruction": "Make the car blue.", "video": "src/s1.mp4"}])
    rows = read_task(bench, "TV2V")
    assert rows[0]["error"] is None
    assert rows[0]["input_id"] == "e1" and rows[0]["prompt"] == "Make the car blue."
    assert rows[0]["source_video"] == str(src.resolve())


def test_read_task_subject_image_string_alias(tmp_path):
    bench = tmp_path / "bench"
    _png(bench / "TS2V" / "subj.png")
    _manifest(bench / "TS2V", [{"uid": 3, "caption": "My dog surfing.", "subject_image": "subj.png"}])
    rows = read_task(bench, "TS2V")
    assert rows[0]["error"] is None and rows[0]["input_id"] == "3"
    assert rows[0]["subject_images"] == [str((bench / "TS2V" / "subj.png").resolve())]


# --- task inference (method §1) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "first_frame, subject_images, source_video, task",
    [(False, False, False, Task.T2V), (True, False, False, Task.TI2V), (False, True, False, Task.TS2V),
     (False, False, True, Task.TV2V), (False, True, True, Task.TSV2V)],
)
def test_infer_task_table(first_frame, subject_images, source_video, task):
    assert infer_task(first_frame=first_frame, subject_images=subject_images, source_video=source_video) is task


@pytest.mark.parametrize("subject_images, source_video", [(True, False), (False, True), (True, True)])
def test_infer_task_rejects_first_frame_with_other_conditions(subject_images, source_video):
    with pytest.raises(ValueError, match="first frame"):
        infer_task(first_frame=True, subject_images=subject_images, source_video=source_video)


def test_editing_tasks_and_condition_media():
    assert [t.value for t in Task if t.is_editing] == ["TV2V", "TSV2V"]
    inst = InputInstance("x", "p", subject_images=("a.png", "b.png"), source_video="v.mp4")
    assert inst.task == Task.TSV2V
    assert inst.condition_media == {"subject_image": "a.png", "source_video": "v.mp4"}


def test_manifest_ids_are_the_ids_read_task_keys_its_rows_by_without_opening_media(tmp_path):
    """The ids the candidate discovery matches files against: every line's valid id, the first line of
    each, whether or not the media it names read (no image is opened: a text file named .png is one
    of them); lines with no valid id list none."""
    from argus_dagster.infra.names import ERROR_ROW_MARK
    from argus_dagster.method.bench import manifest_ids

    d = tmp_path / "TI2V"
    d.mkdir()
    (d / "fake.png").write_text("not an image")
    lines = [json.dumps({"id": "ok", "prompt": "p", "first_frame": "fake.png"}).encode(),  # bad image: still listed
             json.dumps({"id": 7, "prompt": "p", "first_frame": "missing.png"}).encode(),  # numbered ids count
             json.dumps({"id": "ok", "prompt": "again"}).encode(),  # a second line of an id: no new id
             json.dumps({"id": True, "prompt": "p"}).encode(),
             json.dumps({"id": "", "prompt": "p"}).encode(),
             json.dumps({"prompt": "no id"}).encode(),
             b"{not json", b"\xff\xfe", b"", json.dumps(["a", "list"]).encode()]
    (d / "manifest.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    rows = read_task(tmp_path, "TI2V")
    from_rows = {r["input_id"] for r in rows if not r["input_id"].startswith(ERROR_ROW_MARK)}
    assert manifest_ids(tmp_path, "TI2V") == from_rows == {"ok", "7"}
    assert any(r["input_id"] == "ok" and r["error"] for r in rows)  # read_task did open the image
    assert manifest_ids(tmp_path, "T2V") == set()
