"""Many writers, one truth, as a person meets them: ``argus`` commands started together on one
evaluation (the mechanisms, in one process: :mod:`tests.integration.test_writers`).

- Commands started together on a new evaluation: none fails, and its instance has one schema head.
- Two forced passes at once, each with its own judge: each pass's ``video_scores`` is computed from its
  own ``criterion_scores``, and ``argus history`` lists each pass's runs.

Everything waits on a process's exit, never on a sleep.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from argus_dagster.method.stages import score_video
from tests.integration.helpers import t2v_bench
from tests.integration.test_writers import heads
from tests.servers.openai_server import FakeVlmServer, default_answer, kind_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
ARGUS = str(Path(sys.executable).parent / "argus")


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_", "DAGSTER_"))}
    env.update(ARGUS_HOME=str(home), PYTHONPATH=str(ROOT), **extra)
    return env


def test_commands_started_together_on_a_fresh_home(tmp_path):
    """``argus evaluate --plan`` twice and ``argus history`` started at once on a new evaluation, three
    times (the first time with ``argus evaluate`` and ``argus leaderboard`` too): none fails with a
    traceback, and the instance has one schema head afterwards. (The race itself, ten times over with
    four processes each: :func:`test_an_instance_is_made_once_by_processes_started_together`.)"""
    bench, cands = t2v_bench(tmp_path / "bench", n_inputs=1)
    where = ["--bench", str(bench), "--candidates", str(cands)]
    for round_ in range(3):
        home = tmp_path / f"home{round_}"
        commands = [["evaluate", "--plan", *where], ["evaluate", "--plan", *where], ["history", "--bench", "bench"]]
        commands += [["evaluate", *where], ["leaderboard", "--bench", "bench"]] if round_ == 0 else []
        procs = [subprocess.Popen([ARGUS, *c], env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True) for c in commands]
        outs = [p.communicate(timeout=300)[0] for p in procs]
        for command, p, out in zip(commands, procs, outs):
            assert "Traceback" not in out, f"{command}:\n{out[-3000:]}"
            if command[0] == "evaluate":
                assert p.returncode == 0, f"{command}:\n{out[-3000:]}"
            else:  # nothing evaluated yet, or not all of it: a line that says so, and an exit status of 0 to 2
                assert p.returncode in (0, 1, 2), f"{command}:\n{out[-3000:]}"
        instance_home = home / "benches" / "bench" / "default" / "dagster_home"
        found = heads(instance_home)
        assert found and set(found.values()) == {1}, found
    # the evaluation the first round made answers every later command
    out = subprocess.run([ARGUS, "history", "--bench", "bench"], env=_env(tmp_path / "home0"), capture_output=True,
                         text=True)
    first = out.stdout.splitlines()[0] if out.stdout else ""
    assert out.returncode == 0 and re.fullmatch(r"History of video_scores in bench/default \(\d+ materializations, "
                                                r"oldest first\)", first), out.stdout + out.stderr


def _judge_of(score: int):
    """A loopback judge that gives every criterion ``score`` (the rest as the default server answers)."""

    def answer(body: dict) -> str:
        if kind_of(body) == "judge":
            return json.dumps({"score": score, "rationale": f"This judge always says {score}/10."})
        return default_answer(body)

    return answer


def test_two_forced_passes_each_with_its_own_judge(tmp_path):
    """Two ``argus evaluate --force`` at once on one evaluation, one judge saying 2 and one saying 9,
    content cache off, twice: every ``video_scores`` materialization is derived from the
    ``criterion_scores`` its own run stored (recomputed here from them), and ``argus history`` names
    that run's judge; whoever starts second says which run it waits for, or runs alone."""
    bench, cands = t2v_bench(tmp_path / "bench", n_inputs=2)
    home = tmp_path / "home"
    where = ["--bench", str(bench), "--candidates", str(cands)]
    with FakeVlmServer(answer=_judge_of(2), latency_s=0.02) as low, FakeVlmServer(answer=_judge_of(9),
                                                                                  latency_s=0.02) as high:
        envs = {name: _env(home, ARGUS_VLM_BASE_URL=srv.base_url, ARGUS_VLM_MODEL="judge", ARGUS_CACHE="off",
                           ARGUS_RUBRIC_BASE_URL=low.base_url, ARGUS_RUBRIC_MODEL="writer")
                for name, srv in (("low", low), ("high", high))}
        first = subprocess.run([ARGUS, "evaluate", *where], env=envs["low"], capture_output=True, text=True)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        for _ in range(2):
            procs = {name: subprocess.Popen([ARGUS, "evaluate", "--force", *where], env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True) for name, env in envs.items()}
            outs = {name: p.communicate(timeout=300)[0] for name, p in procs.items()}
            for name, p in procs.items():
                assert p.returncode == 0, f"{name}:\n{outs[name][-3000:]}"
    instance = dg.DagsterInstance.from_config(str(home / "benches" / "bench" / "default" / "dagster_home"))
    from argus_dagster.records.history import materializations

    scores = {s.run_id: s for s in materializations(instance, "video_scores")}
    criteria = {s.run_id: s for s in materializations(instance, "criterion_scores")}
    assert len(scores) == 5, sorted(scores)  # the first evaluation and four forced passes
    judged = set()
    for run_id, stored in scores.items():
        assert run_id in criteria, f"video_scores of run {run_id} has no criterion_scores of its own run"
        evaluation = home / "benches" / "bench" / "default"  # tables are recorded relative to it
        assert stored.table.startswith("storage/") and criteria[run_id].table.startswith("storage/"), stored.table
        videos = pl.read_parquet(evaluation / stored.table)
        crit = pl.read_parquet(evaluation / criteria[run_id].table)
        said = set(crit.drop_nulls("score")["score"].to_list())
        assert len(said) == 1, said  # one judge's scores, never both
        judged |= said
        for row in videos.iter_rows(named=True):
            group = crit.filter((pl.col("input_id") == row["input_id"]) & (pl.col("sample") == row["sample"]))
            again = score_video(group.to_dicts(), row["cap_alpha"])
            assert again["final_score"] == pytest.approx(row["final_score"]), (run_id, row)
    assert judged == {2.0, 9.0}
    history = subprocess.run([ARGUS, "history", "--bench", "bench"], env=_env(home), capture_output=True, text=True)
    assert history.returncode == 0, history.stdout + history.stderr
    lines = history.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("time (UTC)"))
    at = lines[header].index("run ")
    listed = {line[at:at + 8] for line in lines[header + 1:] if line.strip()}
    assert listed == {r[:8] for r in scores}, (listed, sorted(scores))

def test_diff_names_a_replaced_video_while_a_third_pass_is_judging(tmp_path):
    """Two passes, a model's video replaced between them; then a third, forced pass is held at the
    judge (the loopback server holds its requests: that pass has stored its videos and evidence, not
    its scores) while ``argus diff`` runs beside it. The diff compares the two finished passes and names
    the replaced video as the input that moved; the in-flight pass's records are not read into it. The
    third pass then finishes."""
    from argus_dagster.infra.media import write_video
    from tests.integration.helpers import pattern_clip

    bench, cands = t2v_bench(tmp_path / "bench", n_inputs=2)
    home = tmp_path / "home"
    where = ["--bench", str(bench), "--candidates", str(cands)]
    with FakeVlmServer(answer=_judge_of(6), latency_s=0.01) as srv:
        env = _env(home, ARGUS_VLM_BASE_URL=srv.base_url, ARGUS_VLM_MODEL="judge", ARGUS_RUBRIC_BASE_URL=srv.base_url,
                   ARGUS_RUBRIC_MODEL="writer")
        for replace in (False, True):
            if replace:
                write_video(cands / "T2V" / "m" / "p0.mp4", pattern_clip(77)[::-1].copy(), 12)
            done = subprocess.run([ARGUS, "evaluate", *where], env=env, capture_output=True, text=True)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        srv.hold_after(0)  # the third pass's first request, and every one after it, waits
        third = subprocess.Popen([ARGUS, "evaluate", "--force", *where], env={**env, "ARGUS_CACHE": "off"},
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            srv.wait_received(len(srv.requests) + 1, timeout_s=240)  # the third pass is in flight, at the VLM
            diff = subprocess.run([ARGUS, "diff", "--bench", "bench"], env=env, capture_output=True, text=True,
                                  timeout=300)
        finally:
            srv.release()
        out = third.communicate(timeout=300)[0]
    assert third.returncode == 0, out[-3000:]
    assert diff.returncode == 0, diff.stdout[-3000:] + diff.stderr[-3000:]
    changed = diff.stdout.split("\nwhat changed between them:\n", 1)[1].split("\nwhy the later pass ran", 1)[0]
    parts = dict(line.strip().split(": ", 1) for line in changed.splitlines()
                 if line.startswith("  ") and not line.startswith("    "))
    assert parts["inputs"] == "candidate_files (1 partition)", diff.stdout
    assert parts["code"] == "the same" and parts["rubrics"] == "0 inputs got another rubric", diff.stdout
    moved = re.findall(r"^  T2V x m (p\d): [\d.]+ -> [\d.]+ \([+-][\d.]+\)$", diff.stdout, re.M)
    assert set(moved) <= {"p0"}, diff.stdout  # only the replaced video's score can have moved
