"""`argus evaluate --repeat K` against a loopback judge whose answers carry a known noise (a fixed score
plus -1, 0 or +1 drawn uniformly: standard deviation sqrt(2/3)), while another `argus evaluate --force`
re-scores the same evaluation beside it: the stored repeats measure that noise, the leaderboard's
export carries `judge_sd` and `rank_holds_under_noise`, and two models whose videos are the same files
(closer than any noise) are reported as not holding their ranks, on the terminal and on the overview."""

import json
import math
import os
import random
import re
import subprocess
import sys
import threading

import numpy as np
import polars as pl
import pytest

from argus_dagster.client import cli
from tests.servers.openai_server import FakeVlmServer, default_answer, kind_of
from tests.waiting import wait_until

from .helpers import ROOT, t2v_bench, without_argus_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
NOISE_SD = math.sqrt(2 / 3)  # of a score 6 + U{-1, 0, +1}


class NoisyJudge:
    """Answers a criterion judgment with 6 plus -1, 0 or +1 at random (seeded; safe across the server's
    threads); every other request as the loopback server usually does."""

    def __init__(self, seed: int = 7):
        self.rng, self.lock = random.Random(seed), threading.Lock()

    def __call__(self, body: dict) -> str:
        if kind_of(body) != "judge":
            return default_answer(body)
        with self.lock:
            score = 6 + self.rng.choice((-1, 0, 1))
        return json.dumps({"score": score, "rationale": f"The evidence supports {score}/10."})


def _row_cell(page: str, model: str, cls: str) -> str:
    """The text of the cell of class ``cls`` in the leaderboard row of ``model``."""
    row = re.search(rf'<tr data-model="{re.escape(model)}">(.*?)</tr>', page, re.S)
    assert row, model
    cell = re.search(rf'<td class="{cls}"[^>]*>(.*?)</td>', row.group(1), re.S)
    assert cell, (model, cls)
    return cell.group(1)


def test_repeat_measures_a_known_judge_noise_while_another_command_rescores(tmp_path, monkeypatch, capsys):
    bench, cands = t2v_bench(tmp_path, n_inputs=6, model="m")
    (cands / "T2V" / "twin").mkdir()
    for f in (cands / "T2V" / "m").iterdir():  # the same files: closer than any noise
        (cands / "T2V" / "twin" / f.name).write_bytes(f.read_bytes())
    without_argus_settings(monkeypatch)
    home = tmp_path / "home"
    monkeypatch.setenv("ARGUS_HOME", str(home))
    where = ["--bench", str(bench), "--candidates", str(cands)]
    with FakeVlmServer(answer=NoisyJudge()) as srv:
        monkeypatch.setenv("ARGUS_VLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("ARGUS_VLM_MODEL", "judge")
        assert cli.main(["evaluate", *where]) == 0

        from argus_dagster.client.instance import local_instance
        from argus_dagster.client.results import stored_partitions
        from argus_dagster.infra.settings import load_settings

        settings = load_settings()
        instance = local_instance(settings)
        before = {r.run_id for r in instance.get_runs()}
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        other = subprocess.Popen([sys.executable, "-m", "argus_dagster.client.cli", "evaluate", "--force", *where],
                                 env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_until(lambda: any(r.run_id not in before for r in instance.get_runs()) or other.poll() is not None,
                       timeout_s=180, what="the other command's first run")
            judged_before = len(srv.bodies("judge"))
            capsys.readouterr()
            assert cli.main(["evaluate", *where, "--repeat", "5", "--repeat-videos", "6"]) == 0
            out = capsys.readouterr().out
        finally:
            said, _ = other.communicate(timeout=300)
        assert other.returncode == 0, said
        assert len(srv.bodies("judge")) > judged_before  # judged again: the cache bypassed

    lines = [re.sub(r"^\[\s*[\d.]+s\]\s*", "", line) for line in out.splitlines()]
    assert any(re.fullmatch(r"the judge's noise, up to 6 videos judged 5 times more: T2V x \S+(, T2V x \S+)* "
                            r"\([\d.]+s\)", line) for line in lines), out

    # The repeats as stored: 6 videos of each model x 5 repeats x every criterion
    parts = stored_partitions("judge_noise", instance, ["T2V"], settings)
    noise = pl.concat(list(parts.values()))
    assert sorted(noise["model"].unique().to_list()) == ["m", "twin"]
    assert set(noise["repeat"].unique().to_list()) == set(range(5))
    per_video = noise.group_by("model", "input_id", "sample", "criterion_id").agg(pl.col("score"))
    assert per_video.height == noise.height // 5
    squares = sum(float(((np.array(s) - np.mean(s)) ** 2).sum()) for s in per_video["score"].to_list())
    measured = math.sqrt(squares / (per_video.height * 4))  # pooled, 4 degrees of freedom a criterion
    assert abs(measured - NOISE_SD) < 0.12, (measured, NOISE_SD)  # hundreds of degrees of freedom

    # The spread per criterion, as `argus export noise` writes it: each near the judge's known noise
    capsys.readouterr()
    assert cli.main(["export", "noise", "--format", "json", "--out", "-"]) == 0
    spread = json.loads(capsys.readouterr().out)
    assert {(r["model"], r["criterion_id"]) for r in spread} == set(zip(per_video["model"], per_video["criterion_id"]))
    assert all(r["repeats"] == 5 and r["n_videos"] == 6 for r in spread), spread
    assert all(abs(r["sd"] - NOISE_SD) < 0.35 for r in spread), [r["sd"] for r in spread]  # 24 degrees of freedom each

    # The leaderboard's export: the judge's noise on each row, the twins' ranks not holding under it
    capsys.readouterr()
    assert cli.main(["export", "leaderboard", "--format", "json", "--out", "-"]) == 0
    exported = json.loads(capsys.readouterr().out)
    rows = {r["model"]: r for r in (exported if isinstance(exported, list) else exported["rows"]) if r["task"] == "T2V"}
    assert set(rows) == {"m", "twin"}
    assert rows["m"]["mean_final"] == rows["twin"]["mean_final"]  # the same files, the same cached judgments
    for r in rows.values():
        assert 0 < r["judge_sd"] < NOISE_SD, r  # a video's final score averages its criteria's noise
        assert r["rank_holds_under_noise"] is False

    # Where a person reads it: the terminal's leaderboard and the overview's table
    assert cli.main(["leaderboard"]) == 0
    text = capsys.readouterr().out
    [line] = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("the judge's noise:")]
    assert re.fullmatch(r"the judge's noise: sd [\d.]+(-[\d.]+)? on a video's final score \(judged again, --repeat\); "
                        r"the ranks of (m, twin|twin, m) do not hold under it", line), line
    page = (settings.reports_dir / "index.html").read_text()
    for model in ("m", "twin"):
        cell = _row_cell(page, model, "judge-noise")
        assert re.fullmatch(r"sd [\d.]+, rank does not hold", cell), cell
        assert float(cell.split()[1].rstrip(",")) == pytest.approx(rows[model]["judge_sd"], abs=0.005)
