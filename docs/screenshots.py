"""The README's screenshots, taken again: ``python -m docs.screenshots``.

Builds and evaluates the demo in a temporary ``ARGUS_HOME`` (``--home``: that home, the demo built
and evaluated there unless it has been), serves its reports on loopback as ``argus open`` does, and has headless Chromium (Debian's
``chromium``, driven by Playwright's Python package, as ``tests/integration/test_browser.py`` does)
render the overview, a comparison page and the sample browser into ``docs/img/overview.png``,
``docs/img/comparison.png`` and ``docs/img/samples.png`` (palette PNGs, well under 300 KB each).

Beside them it writes ``docs/img/screenshots.json``: a digest of the HTML that the current code
renders for each page from a fixed fixture (:func:`page_digests`), and each image's sha256.
``tests/unit/test_screenshots.py`` computes the digests again: a change to what the pages show
fails it until the screenshots are taken again with this script. Pixels are never compared (fonts
differ from one machine to the next).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"
RECORD = IMG / "screenshots.json"
MAX_BYTES = 300_000
SCALE = {"comparison.png": 0.75}  # mostly video frames: smaller, to stay well under MAX_BYTES
VIEWPORT = {"width": 1280, "height": 900}
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
                  "--disable-background-networking", "--disable-component-update"]
STAMP = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC")


def _fixture_overview() -> str:
    """The overview page of a fixed two-model evaluation, as the current code renders it."""
    import polars as pl

    from argus_dagster.outputs.overview import render_overview

    lb = pl.DataFrame({"task": ["T2V", "T2V"], "model": ["faithful", "frozen"], "mean_final": [8.1, 3.2],
                       "ci_low": [7.5, 2.4], "ci_high": [8.6, 4.0], "n_videos": [3, 3], "n_errors": [0, 0],
                       "n_scored": [5.0, 5.0], "n_criteria": [7.0, 7.0], "weight_scored": [0.7, 0.7],
                       "judge": ["evidence-only", "evidence-only"], "bench": ["demo", "demo"],
                       "profile": ["default", "default"]})
    videos = pl.DataFrame({"task": ["T2V"] * 6, "model": ["faithful"] * 3 + ["frozen"] * 3,
                           "input_id": ["a", "b", "c"] * 2, "final_score": [8.0, 8.5, 7.8, 3.0, 3.5, 3.1],
                           "error": [None] * 6})
    criteria = pl.DataFrame({"task": ["T2V"] * 6, "model": ["faithful"] * 3 + ["frozen"] * 3,
                             "input_id": ["a"] * 6, "dimension": [9, 12, 13] * 2,
                             "score": [8.0, 9.0, 7.0, 1.0, 2.0, 6.0], "judge": ["evidence-only"] * 6})
    with tempfile.TemporaryDirectory() as reports:
        return render_overview(Path(reports), lb, criterion_scores=criteria, video_scores=videos)


def _fixture_comparison() -> str:
    """The comparison page of a fixed input and two models, as the current code renders it."""
    from argus_dagster.outputs.report import FrameRow, render_comparison

    frame = b"\xff\xd8fixture"  # embedded as it is: the page is the subject here, not the frame
    models = [{"model": m, "final_score": s, "base_score": s, "caps_fired": [], "error": None, "frames": [frame],
               "frame_times": ["0.0 s"], "video": f"_media/{m}.webm", "href": f"../{m}/a.html", "n_criteria": 7,
               "n_scored": 5, "weight_scored": 0.7, "judge": "evidence-only", "scores": {"motion": s, "sharpness": 9.0}}
              for m, s in (("faithful", 8.1), ("frozen", 3.2))]
    return render_comparison(task="TSV2V", input_id="a", prompt="Put the cat from the photo into the video.",
                             models=models, conditions=[FrameRow("subject images", [frame], ["subject 1"]),
                                                        FrameRow("source video", [frame], ["0.0 s"])],
                             source_src="_media/source.webm")


def _fixture_samples() -> str:
    """The sample browser of a fixed two-model evaluation, as the current code renders it."""
    import polars as pl

    from argus_dagster.outputs.samples import render_samples

    videos = pl.DataFrame({"task": ["T2V"] * 6, "model": ["faithful"] * 3 + ["frozen"] * 3,
                           "input_id": ["a", "b", "c"] * 2, "sample": [""] * 6,
                           "base_score": [8.0, 8.5, 7.8, 3.0, 3.5, None], "final_score": [8.0, 8.5, 7.8, 3.0, 3.5, None],
                           "n_scored": [5, 5, 5, 5, 5, 0], "n_criteria": [7] * 6, "weight_scored": [0.7] * 5 + [0.0],
                           "judge": ["evidence-only"] * 5 + [None], "error": [None] * 5 + ["the video could not be decoded"]})
    with tempfile.TemporaryDirectory() as reports:
        return render_samples(Path(reports), videos, None, bench="demo, profile default")


def page_digests() -> dict[str, str]:
    """Per screenshot, the sha256 of the HTML the current code renders for its page from a fixed
    fixture (times of day left out): what the screenshot must have been taken with."""
    pages = {"overview.png": _fixture_overview(), "comparison.png": _fixture_comparison(),
             "samples.png": _fixture_samples()}
    return {name: hashlib.sha256(STAMP.sub("<time>", html).encode("utf-8")).hexdigest()
            for name, html in pages.items()}


def _small_png(png: bytes, scale: float = 1.0) -> bytes:
    """A screenshot as a palette PNG (pages are flat colours and text: 256 colours keep them sharp),
    ``scale``: resized first (a page of video frames)."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    if scale != 1.0:
        img = img.resize((round(img.width * scale), round(img.height * scale)), Image.Resampling.LANCZOS)
    img = img.quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    img.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _evaluated_demo(home: Path) -> None:
    """The demo built and evaluated in ``home``, as `argus demo` does it."""
    env = {**os.environ, "ARGUS_HOME": str(home), "PYTHONPATH": str(ROOT)}
    for name in ("ARGUS_BENCH", "ARGUS_BENCH_DIR", "ARGUS_CANDIDATES_DIR", "ARGUS_PROFILE"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "argus_dagster.client.cli", "demo"], cwd=home, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"argus demo failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")


def take(home: Path, out: Path = IMG) -> dict:
    """The two screenshots of ``home``'s demo evaluation into ``out``, and their record."""
    from playwright.sync_api import sync_playwright

    from argus_dagster.infra.files import write_atomic
    from argus_dagster.outputs.serve import REPORTS_ONLY, serve_in_thread, url_of

    chromium = os.environ.get("ARGUS_CHROMIUM") or "/usr/bin/chromium"
    server = serve_in_thread(home / "benches", 0, REPORTS_ONLY)
    images: dict[str, bytes] = {}
    try:
        overview = url_of(server, "demo/default/reports/index.html")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(overview, wait_until="load")
            # the first task: its leaderboard, interval plot and heat map
            heat = page.locator("section[data-task] svg.heatmap").first.bounding_box()
            images["overview.png"] = page.screenshot(clip={"x": 0, "y": 0, "width": VIEWPORT["width"],
                                                           "height": heat["y"] + heat["height"] + 4})
            # the sample browser, its rows sorted by final score, the lowest first
            samples = browser.new_page(viewport=VIEWPORT)
            samples.goto(url_of(server, "demo/default/reports/samples.html"), wait_until="load")
            samples.locator('table.samples th[data-key="final_score"]').click()
            images["samples.png"] = samples.screenshot()
            samples.close()
            # an edit with subject images: every condition above the models' outputs
            page.locator('section[data-task="TSV2V"] a.compare').first.click()
            page.wait_for_load_state("load")
            page.wait_for_function("Array.from(document.querySelectorAll('video')).every(v => v.readyState >= 2)",
                                   timeout=120_000)
            # down to the first model's output frames
            bottom = page.evaluate("""() => {
              const outputs = document.querySelector('h2.outputs');
              const frames = Array.from(document.querySelectorAll('.frames')).find(
                f => outputs.compareDocumentPosition(f) & Node.DOCUMENT_POSITION_FOLLOWING);
              return frames.getBoundingClientRect().bottom + window.scrollY; }""")
            images["comparison.png"] = page.screenshot(full_page=True, clip={
                "x": 0, "y": 0, "width": VIEWPORT["width"], "height": bottom + 24})
            browser.close()
    finally:
        server.shutdown()
    record = {"pages": page_digests(), "images": {}}
    for name, png in images.items():
        small = _small_png(png, SCALE.get(name, 1.0))
        if len(small) > MAX_BYTES:
            raise SystemExit(f"{name}: {len(small)} bytes, more than {MAX_BYTES}")
        write_atomic(out / name, small)
        record["images"][name] = hashlib.sha256(small).hexdigest()
    write_atomic(out / RECORD.name, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m docs.screenshots", description=__doc__.splitlines()[0])
    p.add_argument("--home", type=Path, help="the ARGUS_HOME whose demo is shown; the demo is built and evaluated "
                   "there first (about a minute) where it has none (default: a temporary one)")
    p.add_argument("--out", type=Path, default=IMG, help="where the images and screenshots.json go (default docs/img)")
    args = p.parse_args(argv)
    if args.home is not None:
        home = args.home.resolve()
        if not (home / "benches" / "demo" / "default" / "reports" / "index.html").is_file():
            home.mkdir(parents=True, exist_ok=True)
            _evaluated_demo(home)
        record = take(home, args.out)
    else:
        with tempfile.TemporaryDirectory(prefix="argus-screenshots-") as tmp:
            _evaluated_demo(Path(tmp))
            record = take(Path(tmp), args.out)
    for name in record["images"]:
        print(f"wrote {args.out / name} ({(args.out / name).stat().st_size // 1000} KB)")
    print(f"wrote {args.out / RECORD.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
