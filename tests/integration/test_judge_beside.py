"""A new judge is a new evaluation beside the old one: after an evidence-only evaluation, configuring a
VLM judge (docs/vlm.md) and running `argus evaluate` again, with no profile named, stores the new scores
as an evaluation of their own (`judge=<model>`), says so in one line, and leaves the first as it was,
while another `argus evaluate --force` re-scores the first beside it. The home page shows both side by
side with their judges; `argus compare` works across them; naming the profile re-scores it in place."""

import json
import os
import re
import subprocess
import sys

import pytest

from argus_dagster.client import cli
from argus_dagster.infra.media import write_video
from tests.servers.openai_server import FakeVlmServer
from tests.waiting import wait_until

from .helpers import ROOT, pattern_clip, t2v_bench, without_argus_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _home_rows(path) -> dict[str, list[str]]:
    """The home's index: per ``bench / profile`` row, its cells' text."""
    page = path.read_text()
    rows = {}
    for m in re.finditer(r'<tr data-bench="([^"]*)" data-profile="([^"]*)">(.*?)</tr>', page, re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", m.group(3), re.S)]
        rows[f"{m.group(1)}/{m.group(2)}"] = cells
    return rows


def test_a_new_judge_scores_an_evaluation_of_its_own_beside_the_old(tmp_path, monkeypatch, capsys):
    from argus_dagster.client.instance import local_instance
    from argus_dagster.infra.settings import evaluation_settings

    bench, cands = t2v_bench(tmp_path, n_inputs=3, model="m")
    for i in range(3):
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(10 + i), 12)
    without_argus_settings(monkeypatch)
    home = tmp_path / "home"
    monkeypatch.setenv("ARGUS_HOME", str(home))
    where = ["--bench", str(bench), "--candidates", str(cands)]
    assert cli.main(["evaluate", *where]) == 0  # the evidence-only judge: bench/default
    first = evaluation_settings(bench, cands, profile="default")
    board_before = (first.reports_dir / "exports" / "leaderboard.csv").read_bytes()
    capsys.readouterr()

    with FakeVlmServer() as srv:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the other command: evidence-only, as before
        instance = local_instance(first)
        before = {r.run_id for r in instance.get_runs()}
        other = subprocess.Popen([sys.executable, "-m", "argus_dagster.client.cli", "evaluate", "--force", *where],
                                 env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_until(lambda: any(r.run_id not in before for r in instance.get_runs()) or other.poll() is not None,
                       timeout_s=180, what="the other command's first run")
            monkeypatch.setenv("ARGUS_VLM_BASE_URL", srv.base_url)
            monkeypatch.setenv("ARGUS_VLM_MODEL", "judge")
            assert cli.main(["evaluate", "--plan", *where]) == 0  # the plan says where the scores would go
            plan = capsys.readouterr().out.splitlines()
            assert len(srv.requests) == 0
            assert cli.main(["evaluate", *where]) == 0
            out = capsys.readouterr().out.splitlines()
        finally:
            said, _ = other.communicate(timeout=300)
        assert other.returncode == 0, said
        assert said.splitlines()[0].startswith("evaluation bench/default: ")  # the other command stayed on the first

        moved = ("the judge openai:judge is not the one bench/default was scored with (evidence-only): its scores "
                 "are the evaluation bench/judge=judge, beside it (--profile default re-scores bench/default instead)")
        assert plan[0] == moved and plan[1].startswith("evaluation bench/judge=judge: "), plan[:3]
        assert out[0] == moved and out[1].startswith("evaluation bench/judge=judge: "), out[:3]
        assert len(srv.bodies("judge")) > 0  # the new judge scored the new evaluation

        # Again, with nothing new: the same evaluation, and it is up to date (its record names its judge)
        assert cli.main(["evaluate", *where]) == 0
        again = capsys.readouterr().out.splitlines()
        assert again[0] == moved

        # Naming the profile re-scores the first in place, as asked
        assert cli.main(["evaluate", "--plan", "--profile", "default", *where]) == 0
        named = capsys.readouterr().out.splitlines()
        assert named[0].startswith("evaluation bench/default: ") and moved not in named

    second = evaluation_settings(bench, cands, profile="judge=judge")
    assert json.loads(second.record_path.read_text())["evaluator"] == "openai:judge"
    assert json.loads(first.record_path.read_text())["evaluator"] == "evidence-only"

    # Both readable, side by side on the home page, each with its own judge
    rows = _home_rows(home / "benches" / "index.html")
    assert set(rows) == {"bench/default", "bench/judge=judge"}
    assert rows["bench/default"][4] == "evidence-only" and rows["bench/judge=judge"][4] == "openai:judge", rows
    assert cli.main(["leaderboard", "--profile", "default"]) == 0
    assert cli.main(["leaderboard", "--profile", "judge=judge"]) == 0
    capsys.readouterr()
    assert (first.reports_dir / "exports" / "leaderboard.csv").read_bytes().splitlines()[0] == board_before.splitlines()[0]

    # argus compare across them: the same model under each judge
    assert cli.main(["compare", "m@default", "m@judge=judge", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["a"]["evaluation"] == "bench/default" and result["b"]["evaluation"] == "bench/judge=judge"
    assert result["a"]["judges"] == ["evidence-only"] and result["b"]["judges"] == ["vlm judge"]
    [overall] = [r for r in result["rows"] if r["dimension"] == "overall"]
    assert overall["n_inputs"] == 3
