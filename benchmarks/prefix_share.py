"""How much of what the judge is sent a prefix-caching server could take from its cache.

vLLM and SGLang keep the key/value states of prompt prefixes they have prefilled: a request that
starts with the same text and images as an earlier one is prefilled only from where they differ.
Images are most of a request's tokens, so the figure that matters is the share of image bytes that
lie in a prefix an earlier request already sent.

The loopback judge (a process of its own) records every request body; ``argus evaluate`` runs one
evaluation against it cold, in a fresh ``ARGUS_HOME``. Over the ``vlm_qa`` and judge requests (the
rubric generator's are about inputs, not candidates), in the order the server received them, each
request is read as its sequence of message parts (role, text, image) and matched part by part
against every earlier one (a trie): the image bytes inside the longest common prefix are
**shared**; the image bytes of images that some earlier request carried at all are **possible**
(what a perfect order and layout could share). The images in a shared prefix are the video's own
frames, so a prefix shared is one shared with an earlier request of the same video. It also prints
the server's own prefix-cache emulation (cached prompt tokens in its ``usage``).

    .venv/bin/python -m benchmarks.prefix_share                      # both cases below
    .venv/bin/python -m benchmarks.prefix_share --bench scale --videos 12 --profile vlm-only
    .venv/bin/python -m benchmarks.prefix_share --bench demo --task T2V --profile default
    .venv/bin/python -m benchmarks.prefix_share --code ../other-checkout   # another version's figures
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = (("scale", "vlm-only", None, 12), ("demo", "default", "T2V", 0))


def parts_of(body: dict) -> list[tuple]:
    """A request as the server's chat template sees it: per message its role, then its parts;
    an image is ``("image", digest, bytes)``."""
    out: list[tuple] = []
    for m in body.get("messages", []):
        out.append(("role", m.get("role")))
        content = m.get("content")
        for p in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
            if p.get("type") == "image_url":
                url = p["image_url"]["url"]
                data = base64.b64decode(url.split(",", 1)[1]) if "," in url else url.encode()
                out.append(("image", hashlib.sha1(data).hexdigest(), len(data)))
            else:
                out.append(("text", p.get("text", "")))
    return out


def prefix_share(bodies: list[dict]) -> dict:
    """Image bytes in total, in a prefix shared with an earlier request, and in images sent before."""
    trie: dict = {}
    seen: set[str] = set()
    total = shared = possible = 0
    for body in bodies:
        parts = parts_of(body)
        node, matched = trie, True
        for p in parts:
            size = p[2] if p[0] == "image" else 0
            total += size
            if p[0] == "image":
                possible += size if p[1] in seen else 0
                seen.add(p[1])
            key = p[:2]
            if matched and key in node:
                shared += size
            else:
                matched = False
            node = node.setdefault(key, {})
    return {"requests": len(bodies), "image_bytes": total, "shared": shared, "possible": possible}


def _bench(kind: str, root: Path, videos: int) -> tuple[Path, Path]:
    if kind == "demo":
        from argus_dagster.client.demo import build_demo_bench

        return build_demo_bench(root, progress=lambda m: None)
    from benchmarks.scale import build_scale_bench

    return build_scale_bench(root, videos, 1)


def run_case(conn, base_url: str, kind: str, profile: str, task: str | None, videos: int, start: int,
             code: Path = ROOT) -> tuple[dict, int]:
    from tests.servers.openai_server import kind_of

    root = Path(tempfile.mkdtemp(prefix="argus_prefix_share_"))
    try:
        bench, cands = _bench(kind, root / "media", videos)
        home = root / "home"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARGUS_")}
        env.update(ARGUS_HOME=str(home), ARGUS_VLM_BASE_URL=base_url, ARGUS_VLM_MODEL="bench-model",
                   ARGUS_VLM_CONCURRENCY="8", PYTHONPATH=str(code))
        env.pop("DAGSTER_HOME", None)
        cmd = [str(Path(sys.executable).parent / "argus"), "evaluate", "--bench", str(bench), "--candidates", str(cands),
               "--profile", profile] + (["--task", task] if task else [])
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        wall = time.perf_counter() - t0
        n_videos = sum(1 for p in cands.rglob("*.mp4") if task is None or p.relative_to(cands).parts[0] == task)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    conn.send(("bodies", start))
    log = conn.recv()
    bodies = [b for b in log["bodies"] if kind_of(b) in ("judge", "qa")]
    kinds = [kind_of(b) for b in bodies]
    out = prefix_share(bodies)
    out.update(videos=n_videos, judge=kinds.count("judge"), qa=kinds.count("qa"), wall=wall, served=log["served"])
    return out, start + len(log["bodies"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", choices=("scale", "demo"), help="the README's scale bench or the demo's (default: both cases)")
    ap.add_argument("--videos", type=int, default=12, help="scale bench: at least this many videos (5 tasks, 1 model)")
    ap.add_argument("--profile", default="default", help="the evaluator profile (default, vlm-only, ...)")
    ap.add_argument("--task", help="only this task (e.g. T2V)")
    ap.add_argument("--latency", type=float, default=0.0, help="server latency per request, seconds")
    ap.add_argument("--code", type=Path, default=ROOT,
                    help="evaluate with the project's code in this folder (another version, to compare)")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from benchmarks.scale import serving

    cases = CASES if args.bench is None else ((args.bench, args.profile, args.task, args.videos),)
    print(f"{'bench':<7}{'profile':<10}{'task':<6}{'videos':>7}{'qa':>5}{'judge':>6}{'image MB':>9}"
          f"{'shared':>8}{'possible':>9}{'server cached':>14}{'wall s':>8}")
    start, before = 0, {"prompt_tokens": 0, "cached_tokens": 0}
    with serving(args.latency) as (conn, base_url):
        for kind, profile, task, videos in cases:
            r, start = run_case(conn, base_url, kind, profile, task, videos, start, args.code)
            served = {k: r["served"][k] - before[k] for k in before}  # the server counts from its start
            before = {k: r["served"][k] for k in before}
            cached = served["cached_tokens"] / served["prompt_tokens"] if served["prompt_tokens"] else 0.0
            total = r["image_bytes"] or 1
            print(f"{kind:<7}{profile:<10}{task or 'all':<6}{r['videos']:>7}{r['qa']:>5}{r['judge']:>6}"
                  f"{r['image_bytes'] / 1e6:>9.1f}{r['shared'] / total:>8.1%}{r['possible'] / total:>9.1%}"
                  f"{cached:>14.1%}{r['wall']:>8.1f}")
    print("shared: image bytes in a prefix (system text, frames, ...) an earlier request of the same video sent; "
          "possible: image bytes of images sent before at all; server cached: prompt tokens the loopback "
          "server's prefix cache held (this run's requests, rubric generation included)")


if __name__ == "__main__":
    main()
