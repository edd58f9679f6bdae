"""CPU evidence tools on synthetic clips, the executor's failure handling, and the evidence-only judge."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from unit_helpers import N_FRAMES, make_criterion, moving_frames, texture

from argus_dagster.method.evidence.executor import run_plan
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.plan import NormalizedPlan
from argus_dagster.method.evidence.tools.classical import (
    ChangeProbe,
    ClassicalAesthetic,
    FlickerProbe,
    MotionProbe,
    SsimCompare,
    ssim,
)
from argus_dagster.method.evidence.tools.ocr import RapidOcr, match_ratio
from argus_dagster.method.evidence.tools.registry import embedded_suite
from argus_dagster.method.judge import EvidenceOnlyJudge, judge_view


@pytest.fixture
def clips(write_clip):
    """Paths of the synthetic clips (24 frames, 96x64, 12 fps)."""
    moving = moving_frames(seed=0)
    rng = np.random.default_rng(5)
    # Per-frame brightness offsets of random sign and size 20-35 levels.
    offsets = rng.choice([-1, 1], N_FRAMES) * rng.uniform(20, 35, N_FRAMES)
    flicker = np.clip(moving.astype(np.float64) + offsets[:, None, None, None], 0, 255).astype(np.uint8)
    noise = np.random.default_rng(9)
    degraded = np.stack([
        np.clip(cv2.GaussianBlur(f, (0, 0), 3).astype(np.float64) + noise.normal(0, 20, f.shape), 0, 255)
        for f in moving]).astype(np.uint8)
    return {
        "moving": write_clip("moving.mp4", moving),
        "frozen": write_clip("frozen.mp4", np.repeat(moving[:1], N_FRAMES, axis=0)),
        "flicker": write_clip("flicker.mp4", flicker),
        "inverted": write_clip("inverted.mp4", 255 - moving),
        "unrelated": write_clip("unrelated.mp4", moving_frames(seed=7)),
        "degraded": write_clip("degraded.mp4", degraded),
    }


def store(**uris):
    return MediaStore(uris)


# --- motion_probe -----------------------------------------------------------------------------------

def test_motion_probe_frozen_clip(clips):
    r = MotionProbe().run({"on": "output_video"}, store(output_video=clips["frozen"]))
    assert r["ok"] is True
    assert r["mean_flow"] < 0.5  # px/s: the flow estimate's own noise
    assert r["static_fraction"] == 1.0
    assert r["n_pairs"] == 23  # every pair of consecutive frames of the 24-frame, 12 fps clip
    assert r["frames_read"] == [[0, 23]]


def test_motion_probe_moving_clip(clips):
    r = MotionProbe().run({}, store(output_video=clips["moving"]))
    # 2 px/frame at 12 fps and 96 px wide = 64 px/s at a 256-px longest side.
    assert 50 < r["mean_flow"] < 80
    assert r["static_fraction"] == 0.0
    assert 0.8 <= r["smoothness"] <= 1.0


# --- flicker_probe ----------------------------------------------------------------------------------

def test_flicker_probe_flags_brightness_flicker(clips):
    r = FlickerProbe().run({"on": "output_video"}, store(output_video=clips["flicker"]))
    assert r["ok"] is True
    assert r["jitter"] > 8.0
    assert r["max_jump"] > 15.0
    assert len(r["flagged_frames"]) >= 5 and r["flagged_fraction"] > 0.5
    assert all(isinstance(t, float) for t in r["flagged_frames"])


def test_flicker_probe_smooth_clip_not_flagged(clips):
    r = FlickerProbe().run({}, store(output_video=clips["moving"]))
    assert r["jitter"] < 1.0
    assert r["flagged_frames"] == [] and r["flagged_fraction"] == 0.0


def test_two_frame_clip_is_not_measurable_and_not_a_failure(write_clip, tmp_path):
    from argus_dagster.infra.cache import ContentCache
    from argus_dagster.method.inputs import InputInstance
    from argus_dagster.method.rubric.offline import generate_offline
    from argus_dagster.method.stages import criterion_evidence_row, judge_criteria

    path = write_clip("two.mp4", moving_frames(n=2), fps=6)
    r = FlickerProbe().run({}, store(output_video=path))
    assert r["ok"] is False and "3 consecutive frames" in r["not_measurable"] and "has 2" in r["not_measurable"]
    assert MotionProbe().run({}, store(output_video=path))["ok"] is True  # one pair is enough for motion
    # Through the pipeline: recorded once (cached), not counted as failed, not retried.
    inst = InputInstance(id="i", prompt="a ball rolls")
    rubric = generate_offline(inst)
    crit = next(c for c in rubric.criteria if c.id == "temporal_stability")
    cache = ContentCache(str(tmp_path / "cache"))
    media = MediaStore({"output_video": path}, {"output_video": "two-frames"})
    row = criterion_evidence_row(inst, crit, media, embedded_suite(), cache=cache)
    assert row["n_failed"] == 0
    again = criterion_evidence_row(inst, crit, MediaStore({"output_video": path}, {"output_video": "two-frames"}),
                                   embedded_suite(), cache=cache)
    assert again["cache_hit"] is True
    [scored] = [s for s in judge_criteria(rubric, [row], EvidenceOnlyJudge()) if s["criterion_id"] == crit.id]
    assert scored["retry"] is False
    assert "not measurable" in scored["rationale"]


# --- ssim / ssim_compare / change_probe --------------------------------------------------------------

def test_ssim_function_identity_and_difference():
    g = cv2.cvtColor(texture(seed=1)[:, :96], cv2.COLOR_RGB2GRAY)
    assert ssim(g, g) == pytest.approx(1.0, abs=1e-9)
    other = cv2.cvtColor(texture(seed=2)[:, :96], cv2.COLOR_RGB2GRAY)
    assert ssim(g, other) < 0.5
    assert ssim(g, 255 - g) < 0.0


def test_ssim_compare_clip_with_itself(clips):
    r = SsimCompare().run({"a": "source_video", "b": "output_video"},
                          store(source_video=clips["moving"], output_video=clips["moving"]))
    assert r["ok"] is True and r["mode"] == "aligned" and r["n_pairs"] == 8
    assert r["ssim"] > 0.99 and r["ssim_min"] > 0.99
    assert r["hist_corr"] > 0.99


def test_ssim_compare_unrelated_clip(clips):
    r = SsimCompare().run({"a": "source_video", "b": "output_video"},
                          store(source_video=clips["moving"], output_video=clips["unrelated"]))
    assert r["ssim"] < 0.5


def test_ssim_compare_image_against_video_uses_first_frame(clips, tmp_path):
    first = moving_frames(seed=0)[0]
    img = tmp_path / "first.png"
    cv2.imwrite(str(img), cv2.cvtColor(first, cv2.COLOR_RGB2BGR))
    r = SsimCompare().run({"a": "first_frame", "b": "output_video"},
                          store(first_frame=str(img), output_video=clips["moving"]))
    assert r["mode"] == "first_frame" and r["n_pairs"] == 1
    assert r["ssim"] > 0.9
    r2 = SsimCompare().run({"a": "first_frame", "b": "output_video"},
                           store(first_frame=str(img), output_video=clips["unrelated"]))
    assert r2["ssim"] < r["ssim"] - 0.4


def test_change_probe_clip_against_itself(clips):
    r = ChangeProbe().run({"a": "source_video", "b": "output_video"},
                          store(source_video=clips["moving"], output_video=clips["moving"]))
    assert r["ok"] is True
    assert r["mean_abs_diff"] == pytest.approx(0.0, abs=0.5)
    assert r["unchanged_fraction"] == 1.0
    assert r["changed_pixel_fraction"] < 0.01


def test_change_probe_against_inverted_copy(clips):
    r = ChangeProbe().run({}, store(source_video=clips["moving"], output_video=clips["inverted"]))
    assert r["mean_abs_diff"] > 40
    assert r["unchanged_fraction"] == 0.0
    assert r["changed_pixel_fraction"] > 0.9


# --- aesthetic ----------------------------------------------------------------------------------

def test_classical_aesthetic_prefers_sharp_clean_frames(write_clip):
    # A real photograph (scikit-image's astronaut), not the blocky test texture, whose 8-px cells are
    # exactly what the blockiness measure looks for.
    from skimage import data

    img = np.ascontiguousarray(data.astronaut()[:256, :384])
    noise = np.random.default_rng(9)
    clean = np.stack([img] * 6)
    degraded = np.stack([np.clip(cv2.GaussianBlur(img, (0, 0), 3).astype(np.float64) + noise.normal(0, 20, img.shape),
                                 0, 255) for _ in range(6)]).astype(np.uint8)
    sharp = ClassicalAesthetic().run({"on": "output_video"}, store(output_video=write_clip("clean.mp4", clean)))
    bad = ClassicalAesthetic().run({"on": "output_video"}, store(output_video=write_clip("bad.mp4", degraded)))
    assert sharp["ok"] and bad["ok"] and sharp["backend"] == "classical"
    assert 0 <= bad["quality"] < sharp["quality"] <= 100
    assert sharp["quality"] - bad["quality"] > 20
    assert bad["noise_sigma"] > sharp["noise_sigma"]
    assert bad["sharpness"] < sharp["sharpness"]


# --- ocr ------------------------------------------------------------------------------------------

def test_match_ratio():
    assert match_ratio("ARGUS", ["the argus sign"]) == 1.0
    assert match_ratio("ARGUS", ["ARGU5"]) == pytest.approx(0.8)
    assert match_ratio("", ["anything"]) == 0.0
    assert match_ratio("ARGUS", []) == 0.0


def test_rapidocr_reads_rendered_text(write_clip):
    frame = np.full((96, 256, 3), 255, np.uint8)
    cv2.putText(frame, "ARGUS", (20, 65), cv2.FONT_HERSHEY_SIMPLEX, 1.8, (0, 0, 0), 4)
    path = write_clip("text.mp4", np.repeat(frame[None], 6, axis=0), fps=6)
    r = RapidOcr().run({"on": "output_video", "target": "ARGUS"}, store(output_video=path))
    assert r["ok"] is True and r["backend"] == "rapidocr"
    assert r["match"] >= 0.8
    assert r["frames_with_match"] > 0.5
    assert any("ARGUS" in line["text"].upper() for line in r["lines"])


# --- executor -------------------------------------------------------------------------------------

def test_run_plan_turns_failures_into_records(clips, tmp_path):
    corrupt = tmp_path / "corrupt.mp4"
    corrupt.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    media = store(output_video=clips["moving"], source_video=str(corrupt), first_frame=str(tmp_path / "nope.png"))
    plan = NormalizedPlan(steps=[
        {"tool": "ssim_compare", "args": {"b": "output_video"}},             # tool raises KeyError
        {"tool": "vlm_qa", "args": {"question": "?", "on": "subject_image"}},  # medium this candidate lacks
        {"tool": "motion_probe", "args": {"on": "source_video"}},            # corrupt file -> MediaError
        {"tool": "ssim_compare", "args": {"a": "first_frame", "b": "output_video"}},  # missing file
        {"tool": "sam_track", "args": {"query": "dog", "on": "output_video"}},  # unavailable tool
        {"tool": "motion_probe", "args": {"on": "output_video"}},            # still runs
    ])
    records = run_plan(plan, media, embedded_suite())
    assert [r["step"] for r in records] == list(range(6))
    assert [r["ok"] for r in records] == [False, False, False, False, False, True]
    assert "KeyError" in records[0]["error"]
    assert "subject_image" in records[1]["error"] and "not available" in records[1]["error"]
    assert str(corrupt) in records[2]["error"]
    assert "nope.png" in records[3]["error"] and "not found" in records[3]["error"]
    assert records[4]["unavailable"] is True
    assert records[5]["mean_flow"] > 2.0
    for r in records:
        assert {"tool", "tool_version", "args", "seconds"} <= set(r)


def test_media_store_decodes_once_per_policy(clips):
    media = store(output_video=clips["moving"])
    plan = NormalizedPlan(steps=[{"tool": "flicker_probe", "args": {"on": "output_video"}},
                                 {"tool": "motion_probe", "args": {"on": "output_video"}},
                                 {"tool": "aesthetic", "args": {"on": "output_video"}}])
    records = run_plan(plan, media, embedded_suite())
    assert all(r["ok"] for r in records)
    assert media.decode_count == 2  # temporal (flicker + motion) and native (aesthetic)


# --- evidence-only judge ---------------------------------------------------------------------------

def view(aggregation="mean"):
    return judge_view(make_criterion("c", evidence_plan={"aggregation": aggregation}))


def flicker_rec(jitter):
    return {"tool": "flicker_probe", "ok": True, "jitter": jitter, "flagged_frames": []}


def test_judge_unavailable_vlm_qa_only_is_unscored(clips):
    media = store(output_video=clips["moving"])
    records = run_plan(NormalizedPlan(steps=[{"tool": "vlm_qa", "args": {"question": "?", "on": "output_video"}}]),
                       media, embedded_suite())
    j = EvidenceOnlyJudge().judge(view(), records)
    assert j.score is None
    assert "unscored" in j.rationale and "vlm_qa" in j.rationale
    assert j.judge == "evidence-only/6"


def test_judge_no_evidence_is_unscored():
    j = EvidenceOnlyJudge().judge(view(), [])
    assert j.score is None and "no evidence" in j.rationale


@pytest.mark.parametrize("jitter, expected", [(0.3, 10), (1.0, 10), (6.93, 5), (48.0, 0), (60.0, 0)])
def test_judge_flicker_calibration(jitter, expected):
    assert EvidenceOnlyJudge().judge(view(), [flicker_rec(jitter)]).score == expected


def test_judge_motion_and_change_calibration():
    j = EvidenceOnlyJudge()
    motion = {"tool": "motion_probe", "ok": True, "mean_flow": 2.0, "static_fraction": 0.0, "smoothness": 1.0}
    assert j.judge(view(), [motion]).score == 5
    assert j.judge(view(), [{**motion, "mean_flow": 5.0, "static_fraction": 1.0}]).score == 0
    change = {"tool": "change_probe", "ok": True, "mean_abs_diff": 7.0, "changed_pixel_fraction": 0.0,
              "unchanged_fraction": 0.0}
    assert j.judge(view(), [change]).score == 5


def test_judge_worst_takes_minimum_mean_otherwise():
    recs = [flicker_rec(0.5), {"tool": "aesthetic", "ok": True, "quality": 40.0}]
    judge = EvidenceOnlyJudge()
    assert judge.judge(view("mean of the measures"), recs).score == 7
    worst = judge.judge(view("worst of the measures"), recs)
    assert worst.score == 4 and "lowest" in worst.rationale
    assert judge.judge(view("take the minimum"), recs).score == 4
    # one sentence naming each measure and its value
    assert judge.judge(view("mean of the measures"), recs).rationale == (
        "7.0/10, the mean of flicker 10.0 (luma jitter 0.50, colour jitter 0.00, 0 flagged frames) and frame quality "
        "4.0 (quality 40.0/100).")
    named = {**recs[1], "backend": "niqe", "sharpness": 0.5, "noise_sigma": 2.0}
    assert judge.judge(view(), [named]).rationale == (
        "Frame quality (quality 40.0/100 (sharpness 0.50, noise sigma 2.00) [niqe]) gives 4.0/10.")


def test_judge_failed_records_not_used_but_reported():
    recs = [{"tool": "motion_probe", "ok": False, "error": "boom"}, flicker_rec(0.5)]
    j = EvidenceOnlyJudge().judge(view("worst"), recs)
    assert j.score == 10
    assert j.rationale == "Flicker (luma jitter 0.50, colour jitter 0.00, 0 flagged frames) gives 10.0/10; not used: motion_probe: boom."


def test_judge_on_real_evidence(clips):
    media = store(output_video=clips["frozen"])
    plan = NormalizedPlan(steps=[{"tool": "motion_probe", "args": {"on": "output_video"}}])
    assert EvidenceOnlyJudge().judge(view(), run_plan(plan, media, embedded_suite())).score == 0


def test_judge_view_hides_importance_type_threshold_cap():
    c = make_criterion("secret", type="hard", importance="high", hard_cap=2, fail_threshold=7,
                       evidence_plan={"aggregation": "worst"})
    v = judge_view(c)
    for hidden in ("importance", "type", "fail_threshold", "hard_cap"):
        assert hidden not in v
    assert v["criterion"] == c.criterion and v["scoring_rule"] == c.scoring_rule
    assert v["failure_modes"] == c.failure_modes and v["aggregation"] == "worst"


def test_ssim_compare_edge_structure_survives_a_colour_inversion(clips):
    """Inverting colours destroys luma SSIM but keeps the edge structure a preservation check needs."""
    r = SsimCompare().run({"a": "source_video", "b": "output_video"},
                          store(source_video=clips["moving"], output_video=clips["inverted"]))
    assert r["ssim"] < 0.3
    assert r["edge_ssim"] > 0.9
    unrelated = SsimCompare().run({"a": "source_video", "b": "output_video"},
                                  store(source_video=clips["moving"], output_video=clips["unrelated"]))
    assert unrelated["edge_ssim"] < r["edge_ssim"] - 0.3
