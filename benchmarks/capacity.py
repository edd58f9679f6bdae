"""Per-video cost of an evaluation, measured, and what a full-size evaluation takes from it.

Starts the loopback OpenAI-compatible judge (a process of its own, fixed latency) and evaluates two
benches of ``benchmarks.scale`` (the demo's real clips and stills, 5 tasks, ``--models`` models) that
differ only in their number of inputs per task, each cold with ``argus evaluate``'s runner in a
process of its own and a fresh ``ARGUS_HOME``. The difference between the two gives the marginal cost
of one video (what grows with the videos: requests, bytes, CPU, tables, cache, reports), the smaller
one the fixed cost of a partition run. Per bench it records: VLM requests by kind and their request
and response bytes, the process's CPU seconds and peak RSS, each step's wall time (from the instance's
step stats), and the bytes of the tables, the content cache, the reports, the candidate videos and
the Dagster instance.

Then it extrapolates to ``--target`` (default 20 models x 1000 inputs x 5 tasks): judge calls, bytes
to the judge, storage, runs, and the Kubernetes figures (pods, CPU hours, memory per pod, GPU hours
as the evidence step's pod time, and the judge throughput and concurrency a target wall time needs).

    .venv/bin/python -m benchmarks.capacity [--inputs 1,4] [--models 2] [--latency 0.2] [--concurrency 8] \\
        [--target 20,1000,5] [--hours 24] [--judge-latency 2.0]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("input_instances", "rubrics", "candidate_videos", "criterion_evidence", "criterion_scores", "video_scores",
         "diagnostic_reports", "leaderboard")


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def measure_one(inputs: int, models: int) -> dict:
    """In this process (a child of :func:`main`, ARGUS_HOME and the judge set in its environment):
    build the bench, evaluate it cold, and return the figures."""
    sys.path.insert(0, str(ROOT))
    from argus_dagster.client.evaluate import run_all
    from argus_dagster.client.instance import local_instance
    from argus_dagster.infra.settings import load_settings, record_bench
    from benchmarks.scale import build_scale_bench

    home = Path(os.environ["ARGUS_HOME"])
    bench, cands = build_scale_bench(home / "media", 5 * inputs * models, models)
    record_bench(bench, cands)
    settings = load_settings()
    instance = local_instance()
    r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    run_all(progress=lambda _m: None)
    wall = time.perf_counter() - w0
    r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    steps: dict[str, list[float]] = {}
    runs = instance.get_runs()
    for run in runs:
        for stat in instance.get_run_step_stats(run.run_id):
            if stat.start_time and stat.end_time:
                steps.setdefault(stat.step_key, []).append(stat.end_time - stat.start_time)
    n_videos = sum(1 for _ in cands.rglob("*.mp4"))
    pod = run_worker(settings, cands)
    return {
        "inputs": inputs, "models": models, "videos": n_videos, "runs": len(runs), "wall_s": wall,
        "cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime) + (c1.ru_utime - c0.ru_utime)
        + (c1.ru_stime - c0.ru_stime),
        "peak_rss_mb": max(r1.ru_maxrss, c1.ru_maxrss) / 1024,
        "steps_s": {k: sum(v) for k, v in steps.items()}, "step_runs": {k: len(v) for k, v in steps.items()},
        "bytes": {"tables": _du(settings.storage_dir), "cache": _du(settings.cache_dir),
                  "reports": _du(settings.reports_dir), "candidates": _du(cands),
                  "instance": _du(settings.dagster_home)},
        "pod": pod,
    }


def run_worker(settings, cands: Path) -> dict:
    """One task x model partition re-materialized as a run worker (a Kubernetes run pod, an ECS task)
    materializes it: ``dagster asset materialize`` in a process of its own, with an empty content
    cache (so every tool step and judgment is computed again). Its CPU seconds, peak RSS and wall time."""
    task, model = "T2V", sorted(p.name for p in (cands / "T2V").iterdir())[0]
    env = {**os.environ, "DAGSTER_HOME": str(settings.dagster_home), "ARGUS_CACHE": str(settings.home / "pod_cache")}
    # Started from a small launcher process: a child forked from this one would count this process's
    # resident pages in its own peak.
    launcher = ("import json, resource, subprocess, sys, time; w0 = time.perf_counter(); "
                "subprocess.run(sys.argv[1:], check=True, capture_output=True); "
                "r = resource.getrusage(resource.RUSAGE_CHILDREN); "
                "print(json.dumps([time.perf_counter() - w0, r.ru_utime + r.ru_stime, r.ru_maxrss / 1024]))")
    done = subprocess.run([sys.executable, "-c", launcher, str(Path(sys.executable).parent / "dagster"), "asset",
                           "materialize", "-m", "argus_dagster.location", "--select", ",".join(STEPS[2:7]),
                           "--partition", f"{model}|{task}"], cwd=ROOT, env=env, check=True, capture_output=True,
                          text=True)
    wall, cpu, rss = json.loads(done.stdout.strip().splitlines()[-1])
    return {"videos": sum(1 for _ in (cands / task / model).glob("*.mp4")), "wall_s": wall, "cpu_s": cpu,
            "peak_rss_mb": rss}


def _bench(conn, inputs: int, models: int, base_url: str, concurrency: int, n0: int, root: Path) -> tuple[dict, int]:
    home = root / f"inputs{inputs}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_", "DAGSTER_"))}
    env.update(ARGUS_HOME=str(home), ARGUS_VLM_BASE_URL=base_url, ARGUS_VLM_MODEL="bench-model",
               ARGUS_VLM_CONCURRENCY=str(concurrency), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "benchmarks.capacity", "--one", f"{inputs},{models}"], cwd=ROOT,
                          env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    fig = json.loads(done.stdout.strip().splitlines()[-1])
    conn.send(("log", n0))
    log = conn.recv()
    kinds = log["kinds"]
    fig["requests"] = {k: kinds.count(k) for k in sorted(set(kinds))}
    fig["request_bytes"] = {k: sum(b for b, kk in zip(log["bytes"], kinds) if kk == k) for k in fig["requests"]}
    fig["response_bytes"] = {k: sum(b for b, kk in zip(log["response_bytes"], kinds) if kk == k) for k in fig["requests"]}
    return fig, log["n_total"]


def _gb(b: float) -> str:
    return f"{b / 1e9:,.1f} GB" if b >= 1e8 else f"{b / 1e6:,.1f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", default="1,4", help="inputs per task of the two benches (small,large)")
    ap.add_argument("--models", type=int, default=2, help="models per task in both benches")
    ap.add_argument("--latency", type=float, default=0.2, help="loopback judge latency per request, seconds")
    ap.add_argument("--concurrency", type=int, default=8, help="the judge's bound (ARGUS_VLM_CONCURRENCY)")
    ap.add_argument("--target", default="20,1000,5", help="models,inputs per task,tasks of the full evaluation")
    ap.add_argument("--hours", type=float, default=24.0, help="target wall time of the full evaluation, hours")
    ap.add_argument("--judge-latency", type=float, default=2.0,
                    help="a real judge's latency per request (s), for the concurrency the target needs")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        inputs, models = map(int, args.one.split(","))
        print(json.dumps(measure_one(inputs, models)))
        return

    sys.path.insert(0, str(ROOT))
    from benchmarks.scale import serving

    small_n, large_n = map(int, args.inputs.split(","))
    root = Path(tempfile.mkdtemp(prefix="argus_capacity_"))
    try:
        with serving(args.latency) as (conn, base_url):
            small, n0 = _bench(conn, small_n, args.models, base_url, args.concurrency, 0, root)
            large, _ = _bench(conn, large_n, args.models, base_url, args.concurrency, n0, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    for fig in (small, large):
        print(f"bench {fig['inputs']} input(s)/task x {fig['models']} models x 5 tasks = {fig['videos']} videos, "
              f"{fig['runs']} runs: wall {fig['wall_s']:.1f} s, CPU {fig['cpu_s']:.1f} s, peak RSS {fig['peak_rss_mb']:.0f} MB; "
              f"requests {fig['requests']}; request bytes {sum(fig['request_bytes'].values()):,}, "
              f"response bytes {sum(fig['response_bytes'].values()):,}; bytes {fig['bytes']}")
        print("  step wall s: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(fig["steps_s"].items())))

    dv = large["videos"] - small["videos"]
    d_inputs = 5 * (large_n - small_n)  # inputs across the five tasks

    def per_video(get) -> float:
        return (get(large) - get(small)) / dv

    def per_input(get) -> float:
        return (get(large) - get(small)) / d_inputs

    judge_kinds = [k for k in large["requests"] if k != "rubric"]
    v = {
        "judge requests": per_video(lambda f: sum(f["requests"].get(k, 0) for k in judge_kinds)),
        "request bytes": per_video(lambda f: sum(f["request_bytes"].get(k, 0) for k in judge_kinds)),
        "response bytes": per_video(lambda f: sum(f["response_bytes"].get(k, 0) for k in judge_kinds)),
        "CPU s": per_video(lambda f: f["cpu_s"]),
        "evidence step s": per_video(lambda f: f["steps_s"].get("criterion_evidence", 0.0)),
        "candidate steps s": per_video(lambda f: sum(f["steps_s"].get(k, 0.0) for k in STEPS[2:7])),
        "table bytes": per_video(lambda f: f["bytes"]["tables"]),
        "cache bytes": per_video(lambda f: f["bytes"]["cache"]),
        "report bytes": per_video(lambda f: f["bytes"]["reports"]),
        "candidate bytes": per_video(lambda f: f["bytes"]["candidates"]),
        "instance bytes": per_video(lambda f: f["bytes"]["instance"]),
    }
    rubric_req = per_input(lambda f: f["requests"].get("rubric", 0))
    rubric_bytes = per_input(lambda f: f["request_bytes"].get("rubric", 0))
    print(f"\nper video (marginal, {dv} videos between the two benches):")
    for k, x in v.items():
        print(f"  {k:<18}{x:>14,.3f}")
    print(f"per input: rubric requests {rubric_req:.2f}, rubric request bytes {rubric_bytes:,.0f}")
    print(f"peak RSS of the evaluating process: {small['peak_rss_mb']:.0f} MB ({small['videos']} videos), "
          f"{large['peak_rss_mb']:.0f} MB ({large['videos']} videos)")
    fixed_cpu = (small["cpu_s"] - v["CPU s"] * small["videos"]) / max(1, small["runs"])
    print(f"fixed CPU per run (the small bench's CPU less its videos' marginal CPU, over its {small['runs']} runs): "
          f"{fixed_cpu:.2f} s")

    ps, pl_ = small["pod"], large["pod"]
    pod_cpu_video = (pl_["cpu_s"] - ps["cpu_s"]) / (pl_["videos"] - ps["videos"])
    pod_rss_video = (pl_["peak_rss_mb"] - ps["peak_rss_mb"]) / (pl_["videos"] - ps["videos"])
    pod_cpu_fixed = ps["cpu_s"] - pod_cpu_video * ps["videos"]
    pod_rss_fixed = ps["peak_rss_mb"] - pod_rss_video * ps["videos"]
    for name, p in (("small", ps), ("large", pl_)):
        print(f"run worker ({name} bench, one partition of {p['videos']} video(s), empty cache): wall {p['wall_s']:.1f} s, "
              f"CPU {p['cpu_s']:.1f} s, peak RSS {p['peak_rss_mb']:.0f} MB")
    print(f"run worker: fixed {pod_cpu_fixed:.1f} CPU s and {pod_rss_fixed:.0f} MB; per video of its partition "
          f"{pod_cpu_video:.2f} CPU s and {pod_rss_video:.1f} MB")

    models, inputs, tasks = map(int, args.target.split(","))
    videos = models * inputs * tasks
    partitions = models * tasks
    calls = v["judge requests"] * videos + rubric_req * inputs * tasks
    sent = v["request bytes"] * videos + rubric_bytes * inputs * tasks
    runs = partitions + tasks + 1  # a run per task x model partition, per task (inputs, rubrics), the leaderboard

    def n_steps(assets: tuple[str, ...]) -> int:  # the measured steps (assets and their checks) of such a run
        return sum(1 for k in large["step_runs"] if any(k == a or k.startswith(a + "_") for a in assets))

    pods = partitions * (1 + n_steps(STEPS[2:7])) + tasks * (1 + n_steps(STEPS[:2])) + 1 + n_steps(STEPS[7:])
    cpu_h = (v["CPU s"] * videos + fixed_cpu * runs) / 3600
    pod_cpu_h = (pod_cpu_video * videos + pod_cpu_fixed * runs) / 3600
    pod_rss = pod_rss_fixed + pod_rss_video * inputs
    gpu_h = v["evidence step s"] * videos / 3600
    seconds = args.hours * 3600
    rate = calls / seconds
    print(f"\ntarget: {models} models x {inputs} inputs x {tasks} tasks = {videos:,} videos, {partitions} partitions")
    print(f"  judge calls        {calls:,.0f} ({v['judge requests'] * videos:,.0f} judge/qa + "
          f"{rubric_req * inputs * tasks:,.0f} rubric)")
    print(f"  bytes to the judge {_gb(sent)}; answers {_gb(v['response bytes'] * videos)}")
    print(f"  storage            tables {_gb(v['table bytes'] * videos)}, cache {_gb(v['cache bytes'] * videos)}, "
          f"reports {_gb(v['report bytes'] * videos)}, candidates {_gb(v['candidate bytes'] * videos)} "
          f"(at this bench's clip size), instance {_gb(v['instance bytes'] * videos)}")
    print(f"  runs               {runs}; on k8s a pod per run and per step (assets and checks): {pods} pods "
          f"({1 + n_steps(STEPS[2:7])} per partition run)")
    print(f"  CPU                {cpu_h:,.1f} CPU hours; evidence-step pod time (GPU hours if one GPU per step) "
          f"{gpu_h:,.1f} h")
    print(f"  run workers        {pod_cpu_h:,.1f} CPU hours as one process per run ({pod_cpu_fixed:.1f} s fixed each); "
          f"peak RSS of a {inputs}-video partition's worker, linear from the two: {pod_rss / 1024:,.1f} GB")
    print(f"  judge throughput   {rate:.2f} requests/s for {args.hours:g} h; at {args.judge_latency:g} s per request "
          f"{math.ceil(rate * args.judge_latency)} requests in flight; {sent / seconds / 1e6:.2f} MB/s to the judge")


if __name__ == "__main__":
    main()
