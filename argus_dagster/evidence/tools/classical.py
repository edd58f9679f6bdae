"""Weight-free tools of the embedded default: flicker, motion, frame quality, similarity, change.

Each returns measured numbers only; mapping numbers to 0-10 scores is the evidence-only judge's job
(``argus_dagster.judge``), so the evidence stays reusable by a VLM judge.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from ...media import DENSE_POLICY, JUDGE_POLICY, resize_longest
from ..media_store import MediaStore

ANALYSIS_SIDE = 256


def _gray(frames: np.ndarray, side: int = ANALYSIS_SIDE) -> np.ndarray:
    return np.stack([cv2.cvtColor(resize_longest(f, side), cv2.COLOR_RGB2GRAY) for f in frames])


def _luma(frames: np.ndarray) -> np.ndarray:
    f = frames.astype(np.float32)
    return 0.299 * f[..., 0] + 0.587 * f[..., 1] + 0.114 * f[..., 2]


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM of two grayscale images of equal size (Gaussian window, sigma 1.5, as Wang et al.)."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    blur = lambda x: cv2.GaussianBlur(x, (11, 11), 1.5)  # noqa: E731
    mu_a, mu_b = blur(a), blur(b)
    var_a = blur(a * a) - mu_a**2
    var_b = blur(b * b) - mu_b**2
    cov = blur(a * b) - mu_a * mu_b
    num = (2 * mu_a * mu_b + c1) * (2 * cov + c2)
    den = (mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2)
    return float(np.mean(num / den))


def hist_corr(a: np.ndarray, b: np.ndarray) -> float:
    """Correlation of hue-saturation histograms of two RGB images, in [-1, 1]."""
    ha = cv2.calcHist([cv2.cvtColor(a, cv2.COLOR_RGB2HSV)], [0, 1], None, [30, 32], [0, 180, 0, 256])
    hb = cv2.calcHist([cv2.cvtColor(b, cv2.COLOR_RGB2HSV)], [0, 1], None, [30, 32], [0, 180, 0, 256])
    cv2.normalize(ha, ha)
    cv2.normalize(hb, hb)
    return float(cv2.compareHist(ha, hb, cv2.HISTCMP_CORREL))


def gradient_map(gray: np.ndarray) -> np.ndarray:
    """Sobel gradient magnitude scaled to 0-255: structure independent of colour and polarity."""
    g = gray.astype(np.float64)
    mag = np.hypot(cv2.Sobel(g, cv2.CV_64F, 1, 0, ksize=3), cv2.Sobel(g, cv2.CV_64F, 0, 1, ksize=3))
    return np.clip(mag / 4.0, 0, 255)


def _match(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Resize ``b`` to ``a``'s size (both at the analysis resolution)."""
    a = resize_longest(a, ANALYSIS_SIDE)
    b = cv2.resize(b, (a.shape[1], a.shape[0]), interpolation=cv2.INTER_AREA)
    return a, b


class FlickerProbe:
    """Dense luma and colour statistics over time (method §5 ``flicker_probe``).

    ``jitter`` is the mean absolute second difference of per-frame mean luma (0-255 levels): smooth
    brightness changes have near-zero second differences, frame-to-frame flicker does not. Frames
    whose second difference exceeds ``flag_level`` are flagged with their timestamps.
    """

    name = "flicker_probe"
    version = "1"
    flag_level = 4.0

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        fr = media.frames(args.get("on", "output_video"), DENSE_POLICY)
        if len(fr.array) < 3:
            return {"ok": False, "error": f"needs at least 3 frames, got {len(fr.array)}"}
        small = np.stack([cv2.resize(f, (32, 32), interpolation=cv2.INTER_AREA) for f in fr.array])
        luma = _luma(small).mean(axis=(1, 2))
        chroma = small.astype(np.float32).mean(axis=(1, 2))  # (T, 3)
        d2 = np.abs(np.diff(luma, n=2))
        d2c = np.abs(np.diff(chroma, n=2, axis=0)).mean(axis=1)
        jumps = np.abs(np.diff(luma))
        flagged = [round(fr.timestamps[i + 1], 3) for i in np.flatnonzero(d2 > self.flag_level)]
        return {
            "ok": True,
            "n_frames": len(fr.array),
            "jitter": round(float(d2.mean()), 4),
            "color_jitter": round(float(d2c.mean()), 4),
            "max_jump": round(float(jumps.max()), 4),
            "flagged_frames": flagged,
            "flagged_fraction": round(len(flagged) / len(d2), 4),
        }


class MotionProbe:
    """Motion amount and smoothness from dense optical flow (Farneback, OpenCV).

    Magnitudes are in pixels per sampled step at a 256-px longest side, so clips of different sizes
    compare. ``static_fraction`` is the share of steps with almost no motion (a frozen video: 1.0).
    """

    name = "motion_probe"
    version = "1"
    static_level = 0.05

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        fr = media.frames(args.get("on", "output_video"), DENSE_POLICY)
        if len(fr.array) < 2:
            return {"ok": False, "error": f"needs at least 2 frames, got {len(fr.array)}"}
        gray = _gray(fr.array)
        mags = []
        for prev, nxt in zip(gray[:-1], gray[1:]):
            flow = cv2.calcOpticalFlowFarneback(prev, nxt, None, 0.5, 3, 15, 3, 5, 1.2, 0)
            mags.append(float(np.linalg.norm(flow, axis=2).mean()))
        m = np.asarray(mags)
        mean = float(m.mean())
        accel = float(np.abs(np.diff(m)).mean()) if len(m) > 1 else 0.0
        return {
            "ok": True,
            "n_pairs": len(m),
            "mean_flow": round(mean, 4),
            "max_flow": round(float(m.max()), 4),
            "static_fraction": round(float((m < self.static_level).mean()), 4),
            # 1 = steady motion, 0 = magnitude changing as much as it moves.
            "smoothness": round(float(np.clip(1.0 - accel / (mean + 1e-6), 0.0, 1.0)), 4) if mean > 1e-3 else 1.0,
        }


def frame_quality(frame: np.ndarray) -> dict[str, float]:
    """Classical technical quality of one RGB frame.

    sharpness: mean of the strongest 10% of Sobel gradients after a light blur (noise-robust edge
    strength); noise: Immerkaer's noise sigma estimate; exposure: mean luma and clipped share;
    contrast: RMS contrast (std of luma).
    """
    g = cv2.cvtColor(resize_longest(frame, 512), cv2.COLOR_RGB2GRAY).astype(np.float64)
    smooth = cv2.GaussianBlur(g, (0, 0), 1.0)
    gx = cv2.Sobel(smooth, cv2.CV_64F, 1, 0, ksize=3)
    gy = cv2.Sobel(smooth, cv2.CV_64F, 0, 1, ksize=3)
    mag = np.hypot(gx, gy).ravel()
    top = np.sort(mag)[-max(1, mag.size // 10):]
    kernel = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], np.float64)
    conv = np.abs(cv2.filter2D(g, cv2.CV_64F, kernel))[1:-1, 1:-1]
    h, w = g.shape
    sigma = float(np.sqrt(np.pi / 2) * conv.sum() / (6 * max(w - 2, 1) * max(h - 2, 1)))
    return {
        "sharpness": float(top.mean()),
        "noise_sigma": sigma,
        "mean_luma": float(g.mean()),
        "clipped_fraction": float(((g < 3) | (g > 252)).mean()),
        "contrast": float(g.std()),
    }


def technical_quality(m: dict[str, float]) -> float:
    """0-100 technical quality from :func:`frame_quality` numbers (documented calibration).

    sharpness 20 -> 0, 120 -> 1; noise sigma 1.5 -> 1, 10 -> 0; exposure best at mid-grey with few
    clipped pixels; RMS contrast 50 or more -> 1. Weighted 0.4 / 0.3 / 0.15 / 0.15.
    """
    sharp = np.clip((m["sharpness"] - 20.0) / 100.0, 0, 1)
    noise = np.clip(1.0 - (m["noise_sigma"] - 1.5) / 8.5, 0, 1)
    exposure = np.clip(1.0 - abs(m["mean_luma"] - 118.0) / 118.0 - 2.0 * m["clipped_fraction"], 0, 1)
    contrast = np.clip(m["contrast"] / 50.0, 0, 1)
    return float(100.0 * (0.4 * sharp + 0.3 * noise + 0.15 * exposure + 0.15 * contrast))


class ClassicalAesthetic:
    """``aesthetic`` without learned weights: classical technical quality, 0-100, per judge frame."""

    name = "aesthetic"
    version = "classical-1"

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        fr = media.frames(args.get("on", "output_video"), JUDGE_POLICY)
        per = [frame_quality(f) for f in fr.array]
        scores = [technical_quality(m) for m in per]
        mean = {k: round(float(np.mean([m[k] for m in per])), 4) for k in per[0]}
        return {
            "ok": True,
            "backend": "classical",
            "quality": round(float(np.mean(scores)), 2),
            "quality_min": round(float(np.min(scores)), 2),
            "worst_frame_time": round(fr.timestamps[int(np.argmin(scores))], 3),
            **mean,
        }


class SsimCompare:
    """Structural (SSIM on luma), edge-structure (SSIM on gradient magnitude, unchanged by colour
    edits or inversion) and colour (hue-saturation histogram) similarity of two media.

    An image against a video is compared with the video's first frame (first-frame fidelity); two
    videos are compared frame by frame at the same relative times.
    """

    name = "ssim_compare"
    version = "2"

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        a_id, b_id = args["a"], args["b"]
        fa = media.frames(a_id, JUDGE_POLICY).array
        fb = media.frames(b_id, JUDGE_POLICY).array
        if len(fa) == 1 or len(fb) == 1:
            pairs = [(fa[0], fb[0])]
            mode = "first_frame"
        else:
            n = min(len(fa), len(fb))
            ia = np.linspace(0, len(fa) - 1, n).round().astype(int)
            ib = np.linspace(0, len(fb) - 1, n).round().astype(int)
            pairs = [(fa[i], fb[j]) for i, j in zip(ia, ib)]
            mode = "aligned"
        ss, es, hc = [], [], []
        for x, y in pairs:
            x, y = _match(x, y)
            gx, gy = cv2.cvtColor(x, cv2.COLOR_RGB2GRAY), cv2.cvtColor(y, cv2.COLOR_RGB2GRAY)
            ss.append(ssim(gx, gy))
            es.append(ssim(gradient_map(gx), gradient_map(gy)))
            hc.append(hist_corr(x, y))
        return {
            "ok": True,
            "mode": mode,
            "n_pairs": len(pairs),
            "ssim": round(float(np.mean(ss)), 4),
            "ssim_min": round(float(np.min(ss)), 4),
            "edge_ssim": round(float(np.mean(es)), 4),
            "hist_corr": round(float(np.mean(hc)), 4),
        }


class ChangeProbe:
    """How much the output differs from the source (catches the "did nothing" edit).

    ``mean_abs_diff`` is the mean absolute RGB difference (0-255) of time-aligned frames;
    ``unchanged_fraction`` the share of aligned frames that are nearly identical to the source.
    """

    name = "change_probe"
    version = "1"
    unchanged_level = 3.0

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        fa = media.frames(args.get("a", "source_video"), JUDGE_POLICY).array
        fb = media.frames(args.get("b", "output_video"), JUDGE_POLICY).array
        n = min(len(fa), len(fb))
        ia = np.linspace(0, len(fa) - 1, n).round().astype(int)
        ib = np.linspace(0, len(fb) - 1, n).round().astype(int)
        diffs, changed, ss = [], [], []
        for i, j in zip(ia, ib):
            x, y = _match(fa[i], fb[j])
            d = np.abs(x.astype(np.int16) - y.astype(np.int16))
            diffs.append(float(d.mean()))
            changed.append(float((d.max(axis=2) > 25).mean()))
            ss.append(ssim(cv2.cvtColor(x, cv2.COLOR_RGB2GRAY), cv2.cvtColor(y, cv2.COLOR_RGB2GRAY)))
        diffs_arr = np.asarray(diffs)
        return {
            "ok": True,
            "n_pairs": n,
            "mean_abs_diff": round(float(diffs_arr.mean()), 4),
            "changed_pixel_fraction": round(float(np.mean(changed)), 4),
            "unchanged_fraction": round(float((diffs_arr < self.unchanged_level).mean()), 4),
            "ssim": round(float(np.mean(ss)), 4),
        }
