"""The embedded default's probes on generated clips with known answers: flicker at the clip's own rate,
frames out of order, blur at 1080p, clips a probe cannot measure, edits that know the instruction, and
the coverage every score carries."""

from __future__ import annotations

import re

import cv2
import numpy as np
import polars as pl
import pytest
from skimage import data

from argus_dagster.infra.media import DENSE_POLICY, VideoInfo, runs, sample_indices, window_indices
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.classical import (
    ChangeProbe,
    ClassicalAesthetic,
    FlickerProbe,
    MotionProbe,
    black_tint,
    blockiness,
    blockiness_component,
    frame_quality,
    neutral_cast,
    order_displacement,
    persistent_flow,
    quality_components,
)
from argus_dagster.method.evidence.tools.edits import parse_edit
from argus_dagster.method.judge import EvidenceOnlyJudge
from argus_dagster.method.leaderboard import build_leaderboard, coverage_text, format_leaderboard
from argus_dagster.method.stages import score_video
from argus_dagster.outputs.report import render_index

STABILITY = {"id": "temporal_stability", "dimension": 12, "aggregation": "worst of the measures"}


def panning(n: int = 24, shift: int = 3, width: int = 192, height: int = 128) -> np.ndarray:
    """A real photograph (scikit-image's astronaut) panned ``shift`` px per frame."""
    img = data.astronaut()
    return np.stack([np.ascontiguousarray(img[100:100 + height, 40 + shift * i: 40 + shift * i + width]) for i in range(n)])


def store(**uris):
    return MediaStore(uris)


def judge(view: dict, *records: dict):
    return EvidenceOnlyJudge().judge(view, [{"tool": name, **r} for name, r in records])


# --- sampling -----------------------------------------------------------------------------------------

def test_temporal_windows_are_consecutive_and_bounded():
    assert window_indices(40, 96, 3) == list(range(40))
    idx = window_indices(1000, 96, 3)
    assert len(idx) == 96 and idx[:32] == list(range(32)) and idx[-1] == 999
    assert [len(r) for r in runs(idx)] == [32, 32, 32]


# --- flicker at the clip's own rate ------------------------------------------------------------------

def test_12fps_alternating_flicker_is_seen(write_clip):
    clean = panning()
    sign = np.where(np.arange(len(clean)) % 2 == 0, 1.0, -1.0)[:, None, None, None]
    flicker = np.clip(clean + 8.0 * sign, 0, 255).astype(np.uint8)
    # The method's 6 fps dense policy reads every other frame of a 12 fps clip: every frame it reads
    # has the same sign, so the alternation would be invisible to it.
    dense = sample_indices(VideoInfo(24, 12.0, 192, 128), DENSE_POLICY)
    assert len({int(sign[i, 0, 0, 0]) for i in dense}) == 1
    bad = FlickerProbe().run({}, store(output_video=write_clip("flicker.mp4", flicker)))
    good = FlickerProbe().run({}, store(output_video=write_clip("clean.mp4", clean)))
    assert bad["frames_read"] == [[0, 23]] and bad["n_frames"] == 24
    assert bad["jitter"] > 20 and good["jitter"] < 1.0
    assert judge(STABILITY, ("flicker_probe", bad)).score < 1.5
    assert judge(STABILITY, ("flicker_probe", good)).score >= 9


def test_colour_flicker_at_constant_brightness(write_clip):
    clean = panning()
    sign = np.where(np.arange(len(clean)) % 2 == 0, 1.0, -1.0)[:, None, None, None]
    hue = np.clip(clean + sign * np.array([10.0, -5.0, 0.0]), 0, 255).astype(np.uint8)
    r = FlickerProbe().run({}, store(output_video=write_clip("hue.mp4", hue)))
    assert r["color_jitter"] > 5 * FlickerProbe().run({}, store(output_video=write_clip("c.mp4", clean)))["color_jitter"]


# --- temporal coherence ------------------------------------------------------------------------------

def test_shuffled_clip_scores_far_below_the_ordered_one(write_clip):
    clean = panning(n=32)
    shuffled = clean[np.random.default_rng(0).permutation(len(clean))]
    recs = {}
    for name, frames in (("clean", clean), ("shuffled", shuffled)):
        media = store(output_video=write_clip(f"{name}.mp4", frames))
        recs[name] = (FlickerProbe().run({}, media), MotionProbe().run({}, media))
    assert recs["shuffled"][1]["incoherence"] > 0.8 > 0.4 > recs["clean"][1]["incoherence"]
    assert recs["shuffled"][1]["reversal_fraction"] > 0.3 and recs["clean"][1]["reversal_fraction"] < 0.1
    clean_score = judge(STABILITY, ("flicker_probe", recs["clean"][0]), ("motion_probe", recs["clean"][1])).score
    shuffled_score = judge(STABILITY, ("flicker_probe", recs["shuffled"][0]), ("motion_probe", recs["shuffled"][1])).score
    assert clean_score >= 8 and shuffled_score <= 3


def test_order_displacement_known_answer():
    """Frames of one grey level each, 8 levels apart, with positions 4 and 8 swapped: frame 4 (level
    of 8) is nearest to frame 7, 3 away; frame 8 (level of 4) to frame 3, 5 away; every other frame
    has a neighbour as near as any frame (ties count as in order)."""
    levels = np.arange(16) * 8.0
    levels[[4, 8]] = levels[[8, 4]]
    frames = np.broadcast_to(levels[:, None, None], (16, 4, 4)).astype(np.uint8)
    share, disp = order_displacement(frames)
    assert share == pytest.approx(2 / 16)
    assert disp == pytest.approx((np.log2(3) + np.log2(5)) / 16)
    ordered = np.broadcast_to((np.arange(16) * 8.0)[:, None, None], (16, 4, 4)).astype(np.uint8)
    assert order_displacement(ordered) == (0.0, 0.0)


def test_order_displacement_grows_with_how_far_frames_are_moved(write_clip):
    clean = panning(n=48, shift=2)
    rng = np.random.default_rng(0)

    def shuffled(block: int) -> np.ndarray:
        idx = np.arange(len(clean))
        return clean[np.concatenate([rng.permutation(idx[i:i + block]) for i in range(0, len(idx), block)])]

    recs = {name: MotionProbe().run({}, store(output_video=write_clip(f"{name}.mp4", frames)))
            for name, frames in (("clean", clean), ("b4", shuffled(4)), ("b8", shuffled(8)), ("all", shuffled(48)))}
    d = [recs[k]["order_displacement"] for k in ("clean", "b4", "b8", "all")]
    assert d[0] < 0.15 and d[0] < d[1] < d[2] < d[3] and d[3] > 2.5
    assert recs["clean"]["out_of_order_fraction"] < 0.1 < 0.25 < recs["b4"]["out_of_order_fraction"]
    scores = [judge(STABILITY, ("motion_probe", {"ok": True, "order_displacement": x})).score for x in d]
    assert scores[0] == 10 and scores[0] > scores[1] > scores[2] > scores[3] == 0


def test_frozen_stretch_and_dropped_frames(write_clip):
    clean = panning(n=40, shift=2)
    idx = np.arange(40)
    idx[10:22] = 10  # 12 frames frozen
    frozen = MotionProbe().run({}, store(output_video=write_clip("freeze.mp4", clean[idx])))
    assert frozen["duplicate_fraction"] > 0.2 and frozen["longest_freeze_s"] >= 0.5
    dropped = MotionProbe().run({}, store(output_video=write_clip("drop.mp4", np.concatenate([clean[:15], clean[27:]]))))
    ok = MotionProbe().run({}, store(output_video=write_clip("ok.mp4", clean)))
    assert dropped["speed_surplus"] > ok["speed_surplus"] + 0.05
    assert ok["duplicate_fraction"] == 0.0 and ok["jump_times"] == []


def _low_contrast(frames: np.ndarray, gain: float = 0.08, level: float = 60.0) -> np.ndarray:
    """The clip at a twelfth of its contrast around a dim level (a night or foggy scene)."""
    f = frames.astype(np.float32)
    return np.clip((f - f.mean()) * gain + level, 0, 255).astype(np.uint8)


def test_still_low_contrast_clip_is_not_a_frozen_stretch(write_clip):
    still = _low_contrast(np.stack([panning(n=1)[0]] * 36))
    noisy = np.clip(still + np.random.default_rng(0).normal(0, 1.0, still.shape), 0, 255).astype(np.uint8)
    frozen_idx = np.r_[0:10, [10] * 14, 24:36]  # 14 copies of frame 10 in a moving clip
    moving_frozen = _low_contrast(panning(n=36, shift=2)[frozen_idx])
    slow = _low_contrast(panning(n=36, shift=1))
    recs = {name: MotionProbe().run({}, store(output_video=write_clip(f"{name}.mp4", frames)))
            for name, frames in (("still", still), ("noisy", noisy), ("frozen", moving_frozen), ("slow", slow))}
    def as_frozen(r: dict) -> int:  # the score of the frozen-frame measures alone
        keep = ("duplicate_fraction", "longest_freeze_s")
        return judge(STABILITY, ("motion_probe", {"ok": True, **{k: r[k] for k in keep}})).score

    for name in ("still", "slow"):
        assert recs[name]["longest_freeze_s"] == 0.0 and recs[name]["duplicate_fraction"] == 0.0, name
        assert judge(STABILITY, ("motion_probe", recs[name])).score >= 9, name
    # Faint noise on a still frame: the encoder repeats some frames, a few short copies at most.
    assert recs["noisy"]["longest_freeze_s"] < 0.3 and as_frozen(recs["noisy"]) >= 9
    assert recs["frozen"]["duplicate_fraction"] > 0.2 and recs["frozen"]["longest_freeze_s"] >= 0.5
    assert as_frozen(recs["frozen"]) <= 4 and judge(STABILITY, ("motion_probe", recs["frozen"])).score <= 4
    # One frame repeated throughout, at full contrast: a frozen video.
    copies = MotionProbe().run({}, store(output_video=write_clip("copies.mp4", np.stack([panning(n=1)[0]] * 36))))
    assert copies["static_fraction"] > 0.9 and copies["longest_freeze_s"] >= 2.0 and as_frozen(copies) == 0


def test_jump_rate_grows_with_the_stretch_left_out(write_clip):
    clean = panning(n=60, shift=2)
    rates = []
    for k in (0, 2, 4, 8):  # three stretches of k frames left out of a steady pan
        keep = [i for i in range(60) if not any(s <= i < s + k for s in (12, 27, 42))]
        r = MotionProbe().run({}, store(output_video=write_clip(f"drop{k}.mp4", clean[keep], fps=24.0)))
        rates.append(r["jump_rate"])
    assert rates[0] < 0.2 and rates[0] < rates[1] < rates[2] < rates[3]
    scores = [judge(STABILITY, ("motion_probe", {"ok": True, "jump_rate": x})).score for x in rates]
    assert scores[0] == 10 and scores == sorted(scores, reverse=True) and scores[3] <= 8


def test_two_frames_left_out_of_a_fast_pan_are_jumps_a_faster_shot_is_not(write_clip):
    fast = panning(n=48, shift=5)
    keep = [i for i in range(48) if not any(s <= i < s + 2 for s in (12, 24, 36))]  # 3x steps
    ok = MotionProbe().run({}, store(output_video=write_clip("fast.mp4", fast, fps=8.0)))
    dropped = MotionProbe().run({}, store(output_video=write_clip("fast_drop.mp4", fast[keep], fps=8.0)))
    assert ok["jump_rate"] < 0.2 < dropped["jump_rate"]
    assert judge(STABILITY, ("motion_probe", dropped)).score < judge(STABILITY, ("motion_probe", ok)).score
    # A shot that speeds up (2 px, then 5 px per frame): larger steps among larger steps, no jump.
    img = data.astronaut()
    xs = np.r_[np.arange(0, 48, 2), 48 + np.arange(1, 25) * 5]
    speeding = np.stack([np.ascontiguousarray(img[100:228, 40 + x: 232 + x]) for x in xs])
    r = MotionProbe().run({}, store(output_video=write_clip("speeding.mp4", speeding, fps=24.0)))
    assert r["jump_rate"] < 0.5


def test_persistent_flow_known_answers():
    rng = np.random.default_rng(0)
    steady = [np.full((8, 8, 2), (0.6, 0.8), np.float32)] * 4  # 1 px per step, one direction
    assert persistent_flow(steady) == pytest.approx(1.0, rel=1e-6)
    to_and_fro = [steady[0], -steady[0]] * 2  # back where it started after 4 steps
    assert persistent_flow(to_and_fro) == pytest.approx(0.0, abs=1e-6)
    # Flow of length 1 in a fresh direction at every step and pixel: about a quarter survives.
    angles = rng.uniform(0, 2 * np.pi, (4, 64, 64))
    noise = [np.stack([np.cos(a), np.sin(a)], axis=2).astype(np.float32) for a in angles]
    assert 0.15 < persistent_flow(noise) < 0.35
    drift = np.full((64, 64, 2), (0.6, 0.8), np.float32)
    assert persistent_flow([f + drift for f in noise]) > persistent_flow(noise) + 0.5


def test_fresh_noise_neither_hides_copies_nor_passes_for_motion(write_clip):
    idx = np.r_[0:12, [12] * 10, 22:40]  # 10 copies in a slow pan
    slow = panning(n=40, shift=1)[idx]
    noisy = np.clip(slow + np.random.default_rng(1).normal(0, 8.0, slow.shape), 0, 255).astype(np.uint8)
    clean = MotionProbe().run({}, store(output_video=write_clip("slow.mp4", slow)))
    grainy = MotionProbe().run({}, store(output_video=write_clip("slow_noisy.mp4", noisy)))
    # The copies differ by noise alone: no more two frames apart than one apart, far less than the pan.
    assert clean["duplicate_fraction"] > 0.2 and abs(grainy["duplicate_fraction"] - clean["duplicate_fraction"]) < 0.05
    assert grainy["longest_freeze_s"] >= 0.5
    # Noise lifts the per-step flow more than the flow that persists over 4 steps.
    assert grainy["steady_flow"] - clean["steady_flow"] < grainy["mean_flow"] - clean["mean_flow"]
    motion = {"id": "motion_quality", "dimension": 9, "aggregation": "mean"}
    assert judge(motion, ("motion_probe", grainy)).score <= judge(motion, ("motion_probe", clean)).score + 0.5


# --- frame quality at native resolution --------------------------------------------------------------

def sharp_1080p(seed: int = 0) -> np.ndarray:
    """A 1920x1080 frame with detail at the pixel scale: photographs tiled at full size, and text."""
    rng = np.random.default_rng(seed)
    tiles = [data.astronaut(), data.chelsea(), data.coffee(), data.rocket()]
    frame = np.zeros((1080, 1920, 3), np.uint8)
    for y in range(0, 1080, 270):
        for x in range(0, 1920, 320):
            t = tiles[int(rng.integers(len(tiles)))]
            oy, ox = rng.integers(0, t.shape[0] - 270), rng.integers(0, t.shape[1] - 320)
            frame[y:y + 270, x:x + 320] = t[oy:oy + 270, ox:ox + 320]
    for i in range(12):
        cv2.putText(frame, "ARGUS 1080p", (40 + 150 * i, 90 * (i + 1)), cv2.FONT_HERSHEY_SIMPLEX, 1.2, (255, 255, 255), 2)
    return frame


def test_1080p_blur_is_seen_at_native_resolution(write_clip):
    sharp = sharp_1080p()
    blurred = cv2.GaussianBlur(sharp, (0, 0), 3)
    a = ClassicalAesthetic().run({}, store(output_video=write_clip("sharp.mp4", np.stack([sharp] * 3))))
    b = ClassicalAesthetic().run({}, store(output_video=write_clip("blur.mp4", np.stack([blurred] * 3))))
    assert a["resolution"] == [1920, 1080] == b["resolution"]
    assert b["sharpness"] < 0.6 < a["sharpness"]
    assert a["quality"] - b["quality"] > 20
    view = {"id": "visual_quality", "dimension": 13, "aggregation": "mean"}
    assert judge(view, ("aesthetic", b)).score <= 4 < judge(view, ("aesthetic", a)).score


def test_noise_and_compression_lower_quality(write_clip):
    img = np.ascontiguousarray(data.astronaut()[:384, :512])
    noisy = np.clip(img + np.random.default_rng(1).normal(0, 15, img.shape), 0, 255).astype(np.uint8)
    jpeg = cv2.imdecode(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 5])[1], cv2.IMREAD_UNCHANGED)
    q = {name: ClassicalAesthetic().run({}, store(output_video=write_clip(f"{name}.mp4", np.stack([f] * 3))))
         for name, f in (("clean", img), ("noisy", noisy), ("jpeg", jpeg))}
    assert q["noisy"]["noise_sigma"] > 3 * q["clean"]["noise_sigma"]
    assert q["jpeg"]["blockiness"] > q["clean"]["blockiness"] + 0.5
    assert q["clean"]["quality"] > q["noisy"]["quality"] + 10 and q["clean"]["quality"] > q["jpeg"]["quality"] + 5


def blocky(inner: int, border: int, size: int = 256) -> np.ndarray:
    """A grey frame f(x) + f(y) whose neighbouring pixels differ by ``inner`` inside 8-px blocks and by
    ``border`` across their borders (climbing and descending block by block, so it stays in range)."""
    step = np.where(np.arange(size - 1) % 8 == 7, border, inner) * np.where((np.arange(size - 1) // 8) % 2, -1, 1)
    f = np.r_[0, np.cumsum(step)]
    g = (f[None, :] + f[:, None]).astype(np.float64)
    g = g - g.min() + 20
    return np.repeat(g.astype(np.uint8)[..., None], 3, axis=2)


def test_blockiness_is_read_on_the_border_ratio_log_scale():
    # Borders differing 2x the insides: blockiness 1; on the log scale between ratio 1.1 (-> 1) and 4 (-> 0)
    # that is log(2/4) / log(1.1/4) = 0.535 (linear in blockiness it was (3 - 1) / 2.9 = 0.69).
    g = cv2.cvtColor(blocky(3, 6), cv2.COLOR_RGB2GRAY).astype(np.float64)
    assert blockiness(g) == pytest.approx(1.0, abs=1e-4)
    assert quality_components(frame_quality(blocky(3, 6)))["blockiness"] == pytest.approx(np.log(0.5) / np.log(1.1 / 4), abs=1e-3)
    assert blockiness(cv2.cvtColor(blocky(3, 12), cv2.COLOR_RGB2GRAY).astype(np.float64)) == pytest.approx(3.0, abs=1e-4)
    assert quality_components(frame_quality(blocky(3, 12)))["blockiness"] == pytest.approx(0.0, abs=1e-6)
    assert blockiness_component(0.1) == pytest.approx(1.0) and blockiness_component(0.0) == 1.0
    assert blockiness_component(np.sqrt(1.1 * 4) - 1) == pytest.approx(0.5)  # the geometric midpoint
    # JPEG at falling quality: the measure rises and its component falls at every step, as does the quality.
    img = np.ascontiguousarray(data.astronaut()[:384, :512])
    jpegs = [img] + [cv2.imdecode(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, q])[1], cv2.IMREAD_UNCHANGED)
                     for q in (30, 15, 5)]
    m = [frame_quality(f) for f in jpegs]
    comps = [quality_components(x)["blockiness"] for x in m]
    assert [x["blockiness"] for x in m] == sorted(x["blockiness"] for x in m)
    assert comps[0] > comps[1] > comps[2] > comps[3] and comps[0] > 0.95 and comps[1] < 0.8


def test_colour_cast_lowers_quality_with_its_strength(write_clip):
    img = np.ascontiguousarray(data.astronaut()[:384, :512])
    casts = [np.clip(img + np.array([a, 0.3 * a, -a], np.float32), 0, 255).astype(np.uint8) for a in (0, 10, 25, 50)]
    m = [frame_quality(f) for f in casts]
    assert m[0]["neutral_cast"] < 8.0  # a real photograph has near-grey surfaces
    assert [x["neutral_cast"] for x in m] == sorted(x["neutral_cast"] for x in m) and m[3]["neutral_cast"] > 20.0
    q = [ClassicalAesthetic().run({}, store(output_video=write_clip(f"cast{i}.mp4", np.stack([f] * 3))))["quality"]
         for i, f in enumerate(casts)]
    # Every cast costs, mildly: without a reference a cast and a scene coloured by intent look alike.
    assert q[0] > q[1] > q[2] > q[3] and q[0] - q[3] > 8
    # The darkest surfaces tell a cast from a warm scene: near black in every channel until a cast tints them.
    tints = [x["black_tint"] for x in m]
    assert tints[0] < 0.2 and tints == sorted(tints) and tints[1] > tints[0] + 0.1 and tints[2] > 0.5
    # A colourful scene by intent: ten saturated hues, and grey (a road, a wall) on an eighth of it.
    bands = [np.full((64, 96, 3), (h, 220, 200), np.uint8) for h in range(0, 180, 18)]
    hsv = np.concatenate(bands + [np.full((96, 96, 3), (0, 0, 128), np.uint8)])
    colourful = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
    assert neutral_cast(colourful) < 3.0


def test_black_tint_known_answers():
    grey = np.tile(np.linspace(0, 255, 256, dtype=np.float32)[None, :, None], (64, 1, 3))
    assert black_tint(grey.astype(np.uint8)) < 0.01  # neutral shadows
    tinted = np.clip(grey + np.array([20, 6, -20], np.float32), 0, 255).astype(np.uint8)
    assert abs(black_tint(tinted) - 22 / (22 + 16)) < 0.05  # the darkest 2%: about (22, 8, 0)
    red = np.zeros((64, 256, 3), np.uint8)
    red[..., 0] = 200  # one channel alone
    assert black_tint(red) > 0.9


# --- clips a probe cannot measure ----------------------------------------------------------------------

def test_one_colour_clip_is_not_measurable(write_clip):
    flat = np.full((12, 64, 96, 3), 128, np.uint8)
    media = store(output_video=write_clip("flat.mp4", flat))
    for probe in (ClassicalAesthetic(), MotionProbe()):
        r = probe.run({}, media)
        assert r["ok"] is False and "one flat colour" in r["not_measurable"]
    assert FlickerProbe().run({}, media)["jitter"] == 0.0  # a steady grey clip does not flicker: measurable
    j = judge({"id": "v", "dimension": 13, "aggregation": "mean"}, ("aesthetic", ClassicalAesthetic().run({}, media)))
    assert j.score is None and "not measurable on this clip" in j.rationale


# --- edits that know the instruction -----------------------------------------------------------------

@pytest.mark.parametrize("text, kind, extra", [
    ("Make the video black and white.", "grayscale", {}),
    ("Turn the scene into sepia tones", "sepia", {}),
    ("Invert the colours", "invert", {}),
    ("Make the video brighter", "brighter", {}),
    ("Blur the background", "blur", {}),
    ("Change the color of the red industrial trailer to a bright yellow", "colour", {"target": "yellow"}),
    ("Restore the natural colors, replacing the black and white style with a full-color rendition.", "colourize", {}),
    ("Remove the woman with the grey backpack walking on the right side of the frame.", "remove", {"region": "right"}),
    ("Add a red balloon in the top left corner", "add", {"region": "top"}),
    ("Render it in anime style", "style", {}),
    ("Perform a smooth zoom in on the distant peaks", "unknown", {}),
])
def test_parse_edit(text, kind, extra):
    req = parse_edit(text)
    assert req.kind == kind
    for k, v in extra.items():
        assert getattr(req, k) == v


def _grey(frames: np.ndarray) -> np.ndarray:
    return np.repeat(np.stack([cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames])[..., None], 3, axis=3)


def test_black_and_white_edit_is_measured_against_the_request(write_clip):
    src = panning()
    h, w = src.shape[1:3]
    zoom = np.stack([cv2.resize(f[h // 6: -h // 6, w // 6: -w // 6], (w, h)) for f in src])
    half = src.copy()
    half[:, :, : w // 2] = _grey(src)[:, :, : w // 2]
    args = {"a": "source_video", "b": "output_video", "instruction": "Make the video black and white."}
    source = write_clip("src.mp4", src)

    def probe(frames, name, check=None):
        return ChangeProbe().run({**args, **({"check": check} if check else {})},
                                 store(source_video=source, output_video=write_clip(name, frames)))

    follow = {"id": "edit_following", "dimension": 18, "aggregation": "mean"}
    degenerate = {"id": "degenerate_edit", "dimension": 18, "aggregation": "worst"}
    correct, unchanged, wrong, partial = (probe(_grey(src), "bw.mp4"), probe(src, "same.mp4"),
                                          probe(zoom, "zoom.mp4"), probe(half, "half.mp4"))
    assert correct["edit"]["kind"] == "grayscale" and correct["fulfilment"] > 0.9
    # the zoom-in shows more of the astronaut's white suit, so a little more grey area
    assert unchanged["fulfilment"] < 0.05 and wrong["fulfilment"] < 0.2
    assert 0.3 < partial["fulfilment"] < 0.7
    scores = {k: judge(follow, ("change_probe", r)).score for k, r in
              (("correct", correct), ("unchanged", unchanged), ("wrong", wrong), ("partial", partial))}
    assert scores["correct"] >= 9 and scores["unchanged"] < 1.5 and scores["wrong"] < 1.5 and 3 <= scores["partial"] <= 7
    # Degeneracy: the change measured against the change the request implies for this source.
    rec = probe(src, "same2.mp4", check="degenerate")
    assert judge(degenerate, ("change_probe", {**rec, "args": {"check": "degenerate"}})).score == 0
    rec = probe(_grey(src), "bw2.mp4", check="degenerate")
    assert judge(degenerate, ("change_probe", {**rec, "args": {"check": "degenerate"}})).score == 10


def test_black_and_white_edit_of_a_nearly_grey_clip_is_not_degenerate(write_clip):
    dull = np.clip(_grey(panning()).astype(np.int16) + np.array([3, 0, -2]), 0, 255).astype(np.uint8)  # a faint tint
    args = {"a": "source_video", "b": "output_video", "instruction": "Make the video black and white.", "check": "degenerate"}
    r = ChangeProbe().run(args, store(source_video=write_clip("dull.mp4", dull), output_video=write_clip("bw.mp4", _grey(dull))))
    assert r["changed_pixel_fraction"] < 0.005  # a fixed pixel-fraction rule would call this "nothing done"
    assert r["expected_change"] < 3 and r["change_vs_expected"] > 0.5
    assert judge({"id": "degenerate_edit", "dimension": 18, "aggregation": "worst"},
                 ("change_probe", {**r, "args": {"check": "degenerate"}})).score == 10
    assert r["fulfilment"] == pytest.approx(1.0, abs=0.05)


# --- coverage in every score -------------------------------------------------------------------------

def _rows():
    base = {"type": "soft", "hard_cap": None, "fail_threshold": 5.0}
    return [
        {**base, "criterion_id": "motion_quality", "importance": "high", "score": 8, "judge": "evidence-only/2"},
        {**base, "criterion_id": "temporal_stability", "importance": "medium", "score": 9, "judge": "evidence-only/2"},
        {**base, "criterion_id": "visual_quality", "importance": "medium", "score": 6, "judge": "evidence-only/2"},
        {**base, "criterion_id": "entity_presence", "importance": "high", "score": None, "judge": "evidence-only/2"},
        {**base, "criterion_id": "overall_alignment", "importance": "high", "score": None, "judge": "evidence-only/2"},
        {**base, "criterion_id": "physical_plausibility", "importance": "medium", "score": None, "judge": "evidence-only/2"},
    ]


def test_video_score_carries_its_coverage():
    v = score_video(_rows(), 0.5)
    assert (v["n_scored"], v["n_criteria"]) == (3, 6)
    assert v["weight_scored"] == pytest.approx(7 / 15, abs=1e-4)
    assert v["judge"] == "evidence-only"
    assert v["needs_vlm"] == ["entity_presence", "overall_alignment", "physical_plausibility"]


def test_leaderboard_and_pages_show_coverage_next_to_the_score():
    v = score_video(_rows(), 0.5)
    vs = pl.DataFrame([{"task": "T2V", "model": "m", "input_id": str(i), **v, "error": None} for i in range(3)])
    lb = build_leaderboard(vs)
    row = lb.row(0, named=True)
    assert row["n_scored"] == 3 and row["n_criteria"] == 6 and row["judge"] == "evidence-only"
    assert row["ci_scope"] == "scored criteria only"
    text = format_leaderboard(lb)
    assert row["covers"] == "3 of 6 criteria on all 3 videos"
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("rank"))  # below the ranking per dimension
    head = re.split(r"\s{2,}", lines[at].strip())
    assert re.split(r"\s{2,}", lines[at + 1].strip())[head.index("covers")] == "3 of 6 criteria on all 3 videos · evidence-only"
    # A table stored before the whole count was kept: the means, and the text says so.
    assert coverage_text(5, 25 / 3, "evidence-only") == "mean 5 of 8.3 criteria · evidence-only"
    assert "interval covers the scored criteria only" in text
    assert "needs a VLM (not scored): entity_presence, overall_alignment, physical_plausibility" in text
    page = render_index(task="T2V", model="m", rows=[{"input_id": "0", **v}])
    assert "3 of 6 criteria · evidence-only · 47% of the weight" in page and "overall_alignment" in page


def test_scores_in_range_holds_the_vlm_judge_to_whole_numbers():
    from argus_dagster.assets.checks import scores_in_range
    from argus_dagster.method.judge import vlm_judge_identity

    vlm = vlm_judge_identity("openai", "m")
    df = pl.DataFrame({"input_id": ["a", "b", "c"], "sample": ["", "", ""], "criterion_id": ["x", "y", "z"],
                       "score": [7.4, 7.5, 6.0], "rationale": ["r"] * 3,
                       "judge": [EvidenceOnlyJudge().identity, vlm, vlm]})
    result = scores_in_range(df)
    assert not result.passed and result.metadata["n_out_of_range"].value == 1
    assert "`b` `y`: the VLM judge's score 7.5 is not a whole number" in result.metadata["problems"].md_str
    assert scores_in_range(df.filter(pl.col("input_id") != "b")).passed  # one decimal is the measure's own
