"""Model-backed tools on tiny random-weight checkpoints, saved in the Hugging Face layout to a temp folder
and loaded through the same path as a real checkpoint: shapes, ranges and the evidence records."""

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from argus_dagster.infra.media import DENSE_POLICY, JUDGE_POLICY, write_video
from argus_dagster.method.evidence.executor import run_plan
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.plan import NormalizedPlan
from argus_dagster.method.evidence.tools import UnavailableTool
from argus_dagster.method.evidence.tools.aesthetic_model import AestheticHead
from argus_dagster.method.evidence.tools.detection import Detector
from argus_dagster.method.evidence.tools.models import ModelStore, ModelUnavailable
from argus_dagster.method.evidence.tools.random_models import build_models
from argus_dagster.method.evidence.tools.registry import MODEL_BACKED, FallbackTool, model_suite
from argus_dagster.method.evidence.tools.vision import image_embeddings
from argus_dagster.method.judge import EvidenceOnlyJudge

N, H, W = 24, 64, 96


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    return build_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def suite(models_dir):
    return model_suite(str(models_dir))


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> dict[str, str]:
    """A red square moving right over a textured background, and a still of its first frame."""
    d = tmp_path_factory.mktemp("clip")
    rng = np.random.default_rng(1)
    frames = np.repeat((rng.random((H, W, 3)) * 80).astype(np.uint8)[None], N, axis=0).copy()
    for i in range(N):
        cv2.rectangle(frames[i], (8 + 2 * i, 20), (28 + 2 * i, 40), (220, 30, 30), -1)
    write_video(d / "out.mp4", frames, 12.0)
    cv2.imwrite(str(d / "subject.png"), frames[0][..., ::-1])
    return {"output_video": str(d / "out.mp4"), "subject_image": str(d / "subject.png")}


def run(suite, name, args, media):
    return run_plan(NormalizedPlan([{"tool": name, "args": args}]), media, suite)[0]


def test_a_missing_models_folder_names_the_missing_path(tmp_path):
    s = model_suite(str(tmp_path))
    for name in MODEL_BACKED:
        tool = s.get(name)
        assert isinstance(tool, UnavailableTool)
        assert str(tmp_path) in tool.reason and "is missing" in tool.reason
    assert s.get("dino_sim").reason == f"model folder {tmp_path / 'dino'} is missing"
    assert s.get("depth_probe").reason == f"model folder {tmp_path / 'depth'} is missing"
    assert not set(MODEL_BACKED) & s.available()
    with pytest.raises(ModelUnavailable, match="ARGUS_MODELS_DIR"):
        ModelStore(None).folder("dino")
    (tmp_path / "dino").mkdir()
    with pytest.raises(ModelUnavailable, match=r"dino lacks config\.json"):
        ModelStore(tmp_path).folder("dino")


def test_an_unreadable_checkpoint_makes_only_its_tools_unavailable(tmp_path, models_dir):
    (tmp_path / "detector").mkdir()
    (tmp_path / "detector" / "config.json").write_text("{not json")
    s = model_suite(str(tmp_path))
    assert isinstance(s.get("sam_track"), UnavailableTool)
    assert "detector" in s.get("sam_track").reason
    assert "flicker_probe" in s.available() and "ocr" in s.available()


def test_learned_aesthetic_falls_back_to_classical_and_says_why(tmp_path, clip):
    s = model_suite(str(tmp_path))
    tool = s.get("aesthetic")
    assert isinstance(tool, FallbackTool)
    rec = run(s, "aesthetic", {"on": "output_video"}, MediaStore(clip))
    assert rec["ok"] and rec["backend"] == "classical"
    assert rec["fallback"] == f"learned aesthetic unavailable: model folder {tmp_path / 'aesthetic'} is missing"
    assert "fallback to classical-6" in s.describe()["aesthetic"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message when no CUDA device exists")
def test_cuda_without_a_device_is_unavailable_not_a_crash(models_dir):
    s = model_suite(str(models_dir), device="cuda")
    assert "torch sees no CUDA device" in s.get("dino_sim").reason


def test_models_load_once_per_store(models_dir):
    store = ModelStore(models_dir)
    calls = []

    def loader(folder, device):
        calls.append(folder)
        return object()

    first = store.get("dino", loader)
    assert store.get("dino", loader) is first and len(calls) == 1 and store.loaded() == ["dino"]


def test_the_tools_resource_builds_one_suite_per_configuration(models_dir):
    from argus_dagster.resources.tools import ToolsResource

    a = ToolsResource(models_dir=str(models_dir)).suite()
    assert ToolsResource(models_dir=str(models_dir)).suite() is a
    assert "dino_sim" in a.available()
    assert ToolsResource(models_dir=str(models_dir), web_search_key="k").web_search is False  # no URL: off


def test_dino_embeddings_and_similarity(suite, clip):
    media = MediaStore(clip)
    dino = suite.get("dino_sim")
    frames = media.frames("output_video", JUDGE_POLICY).array
    emb = image_embeddings(dino.model, list(frames))
    assert emb.shape == (len(frames), 32)
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    same = run(suite, "dino_sim", {"a": "subject_image", "b": "subject_image"}, media)
    assert same["ok"] and same["similarity"] == pytest.approx(1.0, abs=1e-4)
    rec = run(suite, "dino_sim", {"a": "output_video", "b": "subject_image"}, media)
    assert rec["ok"] and rec["n_pairs"] == len(frames) and rec["backend"] == "dinov2-32"
    assert -1.0 <= rec["similarity_min"] <= rec["similarity"] <= rec["similarity_max"] <= 1.0
    assert rec["tool_version"] == "dinov2-32"


def test_detector_boxes_follow_each_models_normalization():
    det = Detector.__new__(Detector)  # the conversion only; the detector itself is loaded below
    pred = np.array([[0.5, 0.25, 0.5, 0.25]])
    det.model_type = "owlv2"  # relative to the frame padded to a square of the longer side (200)
    assert det._boxes(pred, 100, 200).tolist() == [[50.0, 25.0, 150.0, 75.0]]
    det.model_type = "owlvit"  # relative to the frame itself
    assert det._boxes(pred, 100, 200).tolist() == [[50.0, 12.5, 150.0, 37.5]]


def test_sam_track_crop_and_similarity_chain(suite, clip):
    media = MediaStore(clip)
    plan = NormalizedPlan([
        {"tool": "sam_track", "args": {"query": "red square", "on": "output_video"}},
        {"tool": "crop_compare", "args": {"crop_from": "output_video", "region": "red square"}},
        {"tool": "dino_sim", "args": {"a": "output_crop", "b": "subject_image"}},
    ])
    track, crop, sim = run_plan(plan, media, suite)
    n = len(media.frames("output_video", DENSE_POLICY).array)
    assert track["ok"] and track["n_frames"] == n == len(track["frames"])
    assert track["n_detected_frames"] == len(set(range(0, n, 4)) | {n - 1})
    assert 0.0 <= track["coverage"] <= 1.0 and 0.0 <= track["max_score"] <= 1.0
    for f in track["frames"]:
        assert f["source"] in ("detected", "tracked", "absent", "lost")
        if f["found"]:
            x0, y0, x1, y1 = f["box"]
            assert 0 <= x0 < x1 <= W and 0 <= y0 < y1 <= H and 0 < f["score"] <= 1
    assert track["coverage"] >= track["detected_coverage"] * track["n_detected_frames"] / n
    best = track["best"]
    assert crop["ok"] and crop["registered"] == "output_crop" and crop["origin"] == "sam_track:red square"
    assert crop["box"] == best["box"] and crop["t"] == best["t"]
    image = media.frames("output_crop", JUDGE_POLICY).array[0]
    assert list(image.shape[1::-1]) == crop["crop_size"]
    assert sim["ok"] and sim["n_pairs"] == 1 and -1 <= sim["similarity"] <= 1
    assert media.decode_count == 1  # the dense sample, shared by tracking and the crop


def test_crop_compare_detects_afresh_without_a_track(suite, clip):
    media = MediaStore(clip)
    rec = run(suite, "crop_compare", {"crop_from": "output_video", "region": "red square"}, media)
    assert rec["ok"] and rec["origin"] == "detection" and media.has("output_crop")
    missing = run(suite, "crop_compare", {"crop_from": "output_video", "region": ""}, MediaStore(clip))
    assert not missing["ok"] and "region" in missing["error"]


def test_depth_maps_and_depth_probe(suite, clip):
    media = MediaStore(clip)
    probe = suite.get("depth_probe")
    frames = list(media.frames("output_video", DENSE_POLICY).array[:3])
    maps = probe.depth.maps(frames)
    assert [m.shape for m in maps] == [(H, W)] * 3 and all(np.isfinite(m).all() for m in maps)
    assert probe.depth.larger_is_closer  # Depth Anything (relative) predicts inverse depth
    rec = run(suite, "depth_probe", {"on": "output_video", "query_a": "red square", "query_b": "background"}, media)
    assert rec["ok"] and rec["n_frames"] == min(16, len(media.frames("output_video", DENSE_POLICY).array))
    assert 0.0 <= rec["depth_change"] <= 1.0
    assert len(rec["frames"]) == rec["n_frames"]
    if rec["n_both_found"]:
        assert rec["a_in_front_fraction"] + rec["b_in_front_fraction"] <= 1.0
        assert rec["front"] in ("red square", "background", "undetermined")
    for f in rec["frames"]:
        assert 0.0 <= f.get("a_closeness", 0.0) <= 1.0
        assert 0.0 <= f.get("occlusion", 0.0) <= f.get("box_overlap", 1.0) + 1e-9
    scene = run(suite, "depth_probe", {"on": "output_video"}, media)
    assert scene["ok"] and "frames" not in scene and scene["depth_change"] == rec["depth_change"]


def test_spatial_relation_records(suite, clip):
    media = MediaStore(clip)
    count = run(suite, "spatial_relation", {"on": "output_video", "entities": "red square", "relation": "count",
                                            "expected": "one"}, media)
    assert count["ok"] and len(count["counts"]) == count["n_frames"] and count["expected"] == 1
    assert count["count"] == int(np.floor(np.median(count["counts"])))
    assert count["count_error"] == abs(count["count"] - 1) and 0 <= count["count_stable_fraction"] <= 1
    for relation in ("left_right", "front_back"):
        rec = run(suite, "spatial_relation", {"on": "output_video", "entities": "red square, background",
                                              "relation": relation}, media)
        assert rec["ok"] and rec["entities"] == ["red square", "background"]
        assert len(rec["per_frame"]) == rec["n_both_found"] <= rec["n_frames"]
        if rec["n_both_found"]:
            assert rec["holds_fraction"] + rec["reversed_fraction"] <= 1.0
    one = run(suite, "spatial_relation", {"on": "output_video", "entities": "red square", "relation": "left_right"},
              media)
    assert one["ok"] and one["verdict"] is None and all(0 <= x <= 1 for x in one["center_x"])
    bad = run(suite, "spatial_relation", {"on": "output_video", "entities": "a", "relation": "above"}, media)
    assert not bad["ok"] and "above" in bad["error"]


def test_front_back_needs_the_depth_model(tmp_path, models_dir, clip):
    (tmp_path / "detector").symlink_to(models_dir / "detector")
    s = model_suite(str(tmp_path))
    assert "spatial_relation" in s.available() and "depth_probe" not in s.available()
    rec = run(s, "spatial_relation", {"on": "output_video", "entities": "a, b", "relation": "front_back"},
              MediaStore(clip))
    assert not rec["ok"] and rec["unavailable"] and "depth" in rec["error"]


def test_learned_aesthetic_record(suite, clip):
    rec = run(suite, "aesthetic", {"on": "output_video"}, MediaStore(clip))
    assert rec["ok"] and rec["backend"] == "learned" and rec["n_frames"] == 8
    assert 0 <= rec["quality_min"] <= rec["quality"] <= 100
    assert 0 <= rec["technical_quality"] <= 100 and rec["sharpness"] > 0  # classical measures beside it


def test_aesthetic_head_maths_and_checks(tmp_path):
    from safetensors.numpy import save_file

    w0 = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]], np.float32)
    w2 = np.array([[1.0, 1.0]], np.float32)
    save_file({"layers.0.weight": w0, "layers.0.bias": np.array([0.5, 0.0], np.float32),
               "layers.2.weight": w2, "layers.2.bias": np.array([1.0], np.float32)}, str(tmp_path / "head.safetensors"))
    (tmp_path / "head.json").write_text(json.dumps({"normalize_embedding": True, "score_range": [1, 10]}))
    head = AestheticHead(tmp_path)
    raw = head(np.array([[3.0, 4.0, 0.0]]))  # normalized (0.6, 0.8, 0) -> (1.1, 1.6) -> 3.7
    assert raw == pytest.approx([3.7])
    assert head.to_quality(np.array([1.0, 5.5, 10.0, 12.0])) == pytest.approx([0, 50, 100, 100])
    save_file({"layers.0.weight": w0, "layers.1.weight": np.ones((1, 5), np.float32)}, str(tmp_path / "head.safetensors"))
    with pytest.raises(ValueError, match="do not chain"):
        AestheticHead(tmp_path)


def test_frames_are_decoded_once_per_policy_across_tools(suite, clip):
    media = MediaStore(clip)
    steps = [{"tool": t, "args": a} for t, a in [
        ("sam_track", {"query": "red square", "on": "output_video"}),
        ("spatial_relation", {"on": "output_video", "entities": "red square", "relation": "count"}),
        ("depth_probe", {"on": "output_video", "query_a": "red square"}),
        ("aesthetic", {"on": "output_video"}),
        ("dino_sim", {"a": "output_video", "b": "subject_image"}),
        ("flicker_probe", {"on": "output_video"}),
    ]]
    records = run_plan(NormalizedPlan(steps), media, suite)
    assert all(r["ok"] for r in records), [r.get("error") for r in records]
    # dense (tracking, depth, counts), judge (learned aesthetic, dino), native (classical quality
    # beside the learned one) and temporal (flicker on consecutive frames)
    assert media.decode_count == 4


def test_the_evidence_only_judge_reads_the_model_tools():
    judge = EvidenceOnlyJudge()
    view = {"aggregation": "mean"}
    track = {"tool": "sam_track", "ok": True, "query": "cat", "coverage": 0.75, "n_frames": 12,
             "best": {"score": 0.4}}
    sim = {"tool": "dino_sim", "ok": True, "a": "output_crop", "b": "subject_image", "similarity": 0.5,
           "similarity_min": 0.4, "n_pairs": 1}
    j = judge.judge(view, [track, sim])
    assert abs(j.score - (7.5 + 5.0) / 2) <= 0.05 and "found in 75% of 12 frames" in j.rationale
    rel = {"tool": "spatial_relation", "ok": True, "relation": "left_right", "verdict": "cat left of dog",
           "holds_fraction": 0.9, "n_both_found": 10}
    assert judge.judge(view, [rel]).score == 9
    count = {"tool": "spatial_relation", "ok": True, "relation": "count", "entities": ["cat"], "count": 3,
             "counts": [3, 3, 2], "expected": 2, "count_error": 1}
    assert judge.judge(view, [count]).score == 5
    del count["expected"]
    assert judge.judge(view, [count]).score is None
