"""Where a command's time goes: start, first judge request, last answer, exit, and the CPU spent in each gap.

Builds the reference bench (``benchmarks.scale``'s: the demo's real clips and stills over the five
tasks, about N videos), starts the loopback OpenAI-compatible server in a process of its own with a
fixed latency, and runs ``argus evaluate --profile vlm-only`` (every criterion one ``vlm_qa`` question
and one judgment) as a user does: a process of its own, in a fresh ``ARGUS_HOME`` each time (cold),
then again with nothing to do (warm). For each run it prints the timeline (seconds from the command's
start to the server's first request, from the first request to the last answer, from the last answer to
the command's exit), the CPU the command spent in each gap (its own and its children's, read from
``/proc`` every few milliseconds), the requests and the judge's bound ``requests x latency /
concurrency``, and the ratio of the command's wall time to that bound. Prints figures; asserts nothing.

    .venv/bin/python -m benchmarks.timeline [--videos 12] [--latency 0.2] [--concurrency 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.scale import build_scale_bench, serving

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float | None:
    """CPU seconds of process ``pid`` and its waited-for children (utime, stime, cutime, cstime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return sum(int(x) for x in fields[11:15]) / TICK


class Sampler(threading.Thread):
    """The CPU a process has spent, sampled every ``every`` seconds with the monotonic clock (the one the
    server stamps its requests with), until the process exits."""

    def __init__(self, pid: int, every: float = 0.005):
        super().__init__(daemon=True)
        self.pid, self.every, self.samples = pid, every, [(time.monotonic(), 0.0)]
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            cpu = _cpu_s(self.pid)
            if cpu is not None:
                self.samples.append((time.monotonic(), cpu))
            time.sleep(self.every)

    def at(self, t: float) -> float:
        """The CPU spent by time ``t`` (the last sample at or before it)."""
        return max((c for s, c in self.samples if s <= t), default=0.0)


def run_once(home: Path, bench: Path, cands: Path, env: dict, conn, n0: int) -> dict:
    """One ``argus evaluate`` in ``home``: its timeline and CPU per gap, and the requests it made."""
    t_start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "argus_dagster.client.cli", "evaluate", "--bench", str(bench),
                             "--candidates", str(cands), "--profile", "vlm-only"], env={**env, "ARGUS_HOME": str(home)},
                            cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampler = Sampler(proc.pid)
    sampler.start()
    before = os.times()
    _, err = proc.communicate()
    t_exit = time.monotonic()
    sampler.done.set()
    sampler.join()
    after = os.times()
    if proc.returncode != 0:
        raise SystemExit(f"argus evaluate failed ({proc.returncode}):\n{err[-2000:]}")
    cpu_total = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    conn.send(("log", n0))
    log = conn.recv()
    firsts = [t for t in log["t"] if t >= t_start]
    answers = [t for t in log["t_answered"] if t is not None and t >= t_start]
    t_first = min(firsts) if firsts else None
    t_last = max(answers) if answers else None
    out = {"requests": len(firsts), "n_total": log["n_total"], "wall": t_exit - t_start, "cpu": cpu_total,
           "max_in_flight": log["max_in_flight"]}
    if t_first is not None and t_last is not None:
        out.update(to_first=t_first - t_start, judged=t_last - t_first, after_last=t_exit - t_last,
                   cpu_to_first=sampler.at(t_first), cpu_judged=sampler.at(t_last) - sampler.at(t_first),
                   cpu_after_last=cpu_total - sampler.at(t_last))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", type=int, default=12, help="at least this many candidate videos (5 tasks)")
    ap.add_argument("--latency", type=float, default=0.2, help="server latency per request, seconds")
    ap.add_argument("--concurrency", type=int, default=8, help="the VLM resource's bound (ARGUS_VLM_CONCURRENCY)")
    ap.add_argument("--repeat", type=int, default=3, help="cold runs (each in a fresh ARGUS_HOME), each followed by a warm one")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="argus_timeline_"))
    try:
        bench, cands = build_scale_bench(root / "source", args.videos, 1)
        n_videos = sum(1 for _ in cands.rglob("*.mp4"))
        with serving(args.latency) as (conn, base_url):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_", "DAGSTER_"))}
            env.update(ARGUS_VLM_BASE_URL=base_url, ARGUS_VLM_MODEL="bench-model",
                       ARGUS_VLM_CONCURRENCY=str(args.concurrency), PYTHONPATH=str(ROOT))
            print(f"reference bench: {n_videos} videos over 5 tasks, profile vlm-only; loopback judge {args.latency * 1000:.0f} ms "
                  f"a request, {args.concurrency} slots; `argus evaluate` as a process of its own, a fresh ARGUS_HOME "
                  "per cold run (its bench folder copied: a run freezes rubrics into it)")
            head = (f"{'run':8} {'requests':>8} {'bound s':>8} {'wall s':>7} {'x bound':>7} | {'to 1st req':>10} "
                    f"{'judged':>7} {'after':>6} | {'CPU to 1st':>10} {'CPU judged':>10} {'CPU after':>9} {'CPU all':>8}")
            print(head)
            n0 = 0
            for k in range(args.repeat):
                home = root / f"home{k}"
                shutil.copytree(root / "source", home)
                for name in ("cold", "warm"):
                    r = run_once(home, home / "bench", home / "candidates", env, conn, n0)
                    n0 = r["n_total"]
                    bound = r["requests"] * args.latency / args.concurrency
                    ratio = f"{r['wall'] / bound:7.2f}" if bound else f"{'-':>7}"
                    gaps = (f"{r['to_first']:10.2f} {r['judged']:7.2f} {r['after_last']:6.2f} | {r['cpu_to_first']:10.2f} "
                            f"{r['cpu_judged']:10.2f} {r['cpu_after_last']:9.2f}" if "to_first" in r
                            else f"{'-':>10} {'-':>7} {'-':>6} | {'-':>10} {'-':>10} {'-':>9}")
                    print(f"{name + str(k + 1):8} {r['requests']:8d} {bound:8.2f} {r['wall']:7.2f} {ratio} | {gaps} "
                          f"{r['cpu']:8.2f}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
