"""Faults all at once: a 25-video bench (five per task) against a judge that fails, garbles and stalls,
beside an endpoint that is down, with `argus evaluate` killed three times at random points and resumed.

Every run finishes after resuming; no table or report is corrupt; at most one judge concurrency's
worth of answered requests is asked again per kill (the content cache keeps the rest); at most 1% of
criteria end unscored.
"""

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.servers.openai_server import FakeVlmServer, dead_url

# Three killed runs and a resumed one on a 25-video bench: about 300 judge requests, the kills spread across
# the first two thirds of them. Longer than the suite's 5-minute bound per test under load.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
CONCURRENCY = 4  # per endpoint; the pool's bound is twice that, the dead endpoint's half refused


def _digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def test_killed_three_times_under_faults_the_run_resumes_and_loses_nothing(tmp_path):
    sys.path.insert(0, str(ROOT))
    from benchmarks.scale import build_scale_bench

    home = tmp_path / "home"
    bench, cands = build_scale_bench(home, 25, 1)
    evaluation = home / "benches" / "bench" / "default"  # the bench's folder name; the default profile
    rng = random.Random(7)
    with FakeVlmServer(latency_s=0.05, error_rate=0.10, unparseable_rate=0.05, stall_rate=0.02, stall_s=2.0,
                       seed=3) as srv:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("ARGUS_")},
               "ARGUS_HOME": str(home), "DAGSTER_HOME": str(home / "dagster_home"),
               "ARGUS_VLM_BASE_URL": f"{srv.base_url},{dead_url()}", "ARGUS_VLM_MODEL": "faulty-judge",
               "ARGUS_VLM_CONCURRENCY": str(CONCURRENCY), "ARGUS_VLM_TIMEOUT_S": "30", "PYTHONPATH": str(ROOT)}
        cmd = [str(Path(sys.executable).parent / "argus"), "evaluate", "--bench", str(bench), "--candidates", str(cands)]
        kills = []
        for kill_after in sorted(rng.sample(range(20, 210), 3)):  # answered requests before each kill
            log = open(tmp_path / f"run{len(kills)}.log", "w")
            proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            deadline = time.time() + 300
            while srv.answered < kill_after and proc.poll() is None and time.time() < deadline:
                time.sleep(0.05)
            assert proc.poll() is None, f"the run ended before the kill: {(tmp_path / f'run{len(kills)}.log').read_text()[-2000:]}"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            log.close()
            kills.append(srv.answered)
        done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        requests = list(srv.requests)

    # Every video of the bench is on the leaderboard, none in error.
    board = pl.read_parquet(next((evaluation / "storage").glob("leaderboard*")))
    assert sorted(board["task"]) == ["T2V", "TI2V", "TS2V", "TSV2V", "TV2V"], board
    assert board["n_videos"].to_list() == [5] * 5 and board["n_errors"].to_list() == [0] * 5, board
    # No table or report is corrupt.
    tables = sorted((evaluation / "storage").rglob("*.parquet"))
    assert len(tables) >= 5 * 6
    for t in tables:
        pl.read_parquet(t)
    pages = sorted((evaluation / "reports").rglob("*.html"))
    assert len(pages) >= 25
    for page in pages:
        assert page.read_text(encoding="utf-8").rstrip().endswith("</html>"), page
    # A kill can leave a write's temporary file (``.<name>.<pid>.<random>.part``), never a partial entry.
    entries = [p for p in (home / "cache").rglob("*.json") if not p.name.startswith(".")]
    assert entries
    for entry in entries:
        json.loads(entry.read_text(encoding="utf-8"))
    assert all(p.name.startswith(".") and p.name.endswith(".part") for p in home.rglob("*.part"))
    # Answered work asked again: at most one concurrency's worth of the pool per kill.
    answered: dict[str, int] = {}
    for r in requests:
        if r.get("outcome") == "ok":
            answered[_digest(r["body"])] = answered.get(_digest(r["body"]), 0) + 1
    repeated = sum(n - 1 for n in answered.values())
    outcomes = [r.get("outcome") for r in requests]
    scores = pl.concat([pl.read_parquet(t) for t in (evaluation / "storage" / "criterion_scores").rglob("*.parquet")])
    unscored = scores.filter(pl.col("score").is_null()).height
    print(f"kills after {kills} answered; {len(requests)} requests ({outcomes.count('error')} 5xx, "
          f"{outcomes.count('garbage')} garbage); {repeated} answered requests asked again; "
          f"{unscored} of {scores.height} criteria unscored")
    assert repeated <= len(kills) * 2 * CONCURRENCY, (repeated, kills)
    # At most 1% of criteria unscored.
    assert scores.height > 100 and unscored <= 0.01 * scores.height, (unscored, scores.height)
