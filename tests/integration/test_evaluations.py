"""Two benches and two profiles in one ARGUS_HOME: each evaluation keeps its own tables, instance and
leaderboard, whatever the others do, also when they run at the same time."""

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from argus_dagster.client.evaluate import run_all
from argus_dagster.client.results import current_leaderboard
from argus_dagster.infra.environment import SettingError
from argus_dagster.infra.media import write_video
from argus_dagster.infra.settings import evaluation_settings, load_settings, record_evaluation

from .helpers import pattern_clip

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]



def _bench(root: Path, name: str, models: list[str], seed: int) -> tuple[Path, Path]:
    """A T2V bench of two inputs (the same ids in every bench) and its candidate store."""
    bench, cands = root / name / "bench", root / name / "cands"
    (bench / "T2V").mkdir(parents=True)
    rows = [{"id": f"p{i}", "prompt": f"A textured pattern slides to the left, {name} take {i}."} for i in range(2)]
    (bench / "T2V" / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (bench / "bench.json").write_text(json.dumps({"name": name}))
    for j, model in enumerate(models):
        for i in range(2):
            write_video(cands / "T2V" / model / f"p{i}.mp4", pattern_clip(seed + 10 * j + i), 12)
    return bench, cands


def test_benches_and_profiles_never_touch_each_other(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    a = evaluation_settings(*_bench(tmp_path, "alpha", ["m1", "m2"], 0))
    b = evaluation_settings(*_bench(tmp_path, "beta", ["m3"], 100))
    a_ablation = evaluation_settings(a.bench_dir, a.candidates_dir, profile="vlm-only")
    assert (a.bench, b.bench, a_ablation.evaluation) == ("alpha", "beta", "alpha/vlm-only")

    record_evaluation(a)
    lb_a = run_all(progress=lambda m: None, settings=a)
    assert set(lb_a["model"]) == {"m1", "m2"} and set(lb_a["bench"]) == {"alpha"} and set(lb_a["profile"]) == {"default"}
    stored_a = current_leaderboard(settings=a)
    assert stored_a.equals(lb_a)
    rubrics_a = sorted(p.read_text() for p in a.frozen_rubrics_dir.rglob("*.json"))

    record_evaluation(b)  # the same input ids, another bench: its own rubrics, tables, instance
    lb_b = run_all(progress=lambda m: None, settings=b)
    assert set(lb_b["model"]) == {"m3"} and set(lb_b["bench"]) == {"beta"}
    record_evaluation(a_ablation)  # another profile of bench alpha: stored apart
    lb_ab = run_all(progress=lambda m: None, settings=a_ablation)
    assert set(lb_ab["profile"]) == {"vlm-only"} and set(lb_ab["model"]) == {"m1", "m2"}
    # Without a VLM the ablation scores nothing, and that is its own leaderboard, not alpha's.
    assert lb_ab["n_videos"].sum() == 0

    assert current_leaderboard(settings=a).equals(stored_a)
    assert sorted(p.read_text() for p in a.frozen_rubrics_dir.rglob("*.json")) == rubrics_a
    assert a.dagster_home != b.dagster_home != a_ablation.dagster_home
    # The default for later commands is the evaluation recorded last; --bench/--profile name another.
    assert load_settings().evaluation == "alpha/vlm-only"
    assert load_settings(bench="beta").evaluation == "beta/default"
    assert load_settings(bench="alpha", profile="default").evaluation == "alpha/default"
    with pytest.raises(SettingError, match="no such bench"):
        load_settings(bench="gamma")
    # A second folder cannot take a recorded bench's name.
    other, _ = _bench(tmp_path / "other", "alpha", ["m9"], 7)
    with pytest.raises(SettingError, match="taken by"):
        evaluation_settings(other, tmp_path / "x")


def test_two_benches_evaluated_at_once_both_succeed(tmp_path):
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_", "DAGSTER_"))}
    env.update(ARGUS_HOME=str(home), PYTHONPATH=str(ROOT))
    argus = str(Path(sys.executable).parent / "argus")
    procs = {}
    for name, models, seed in (("left", ["a", "b"], 0), ("right", ["c"], 50)):
        bench, cands = _bench(tmp_path, name, models, seed)
        procs[name] = subprocess.Popen([argus, "evaluate", "--bench", str(bench), "--candidates", str(cands)],
                                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for name, p in procs.items():
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, f"{name}:\n{out[-3000:]}"
        assert f"evaluation {name}/default" in out
    for name, models in (("left", {"a", "b"}), ("right", {"c"})):
        out = subprocess.run([argus, "leaderboard", "--bench", name], env=env, capture_output=True, text=True,
                             check=True).stdout
        assert out.startswith(f"Leaderboard of {name}/default")
        lines = out.splitlines()
        head = next(i for i, line in enumerate(lines) if " model " in line)  # below any ranking per dimension
        at = lines[head].index(" model ") + 1  # the model column, as read
        end = next(i for i in range(head, len(lines)) if lines[i].strip().startswith("*"))  # the table's footnote
        shown = {line[at:].split()[0] for line in lines[head + 1:end]}
        assert shown == models, out
        table = pl.read_parquet(home / "benches" / name / "default" / "storage" / "leaderboard.parquet")
        assert set(table["model"]) == models and set(table["bench"]) == {name}


def test_a_profiles_judge_and_rubric_models_are_the_ones_asked(tmp_path, monkeypatch):
    """``judge=<model>`` and ``rubric=<model>`` reach the endpoint in every run (Dagster rebuilds a run's
    resources from their constructor's arguments, so a copied resource must be built, not patched), and
    the judge's bound holds over the worker processes that execute the runs."""
    from tests.servers.openai_server import FakeVlmServer

    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    bench, cands = _bench(tmp_path, "gamma", ["m1", "m2", "m3"], 7)
    with FakeVlmServer(latency_s=0.05) as srv:
        for k, v in {"ARGUS_VLM_BASE_URL": srv.base_url, "ARGUS_VLM_MODEL": "base-judge",
                     "ARGUS_VLM_CONCURRENCY": "2"}.items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("ARGUS_RUBRIC_BASE_URL", raising=False)
        settings = evaluation_settings(bench, cands, profile="judge=other-judge,rubric=other-writer")
        board = run_all(progress=lambda m: None, settings=settings)
        asked = [r["body"]["model"] for r in srv.requests]
    assert set(board["model"]) == {"m1", "m2", "m3"}
    assert asked.count("other-writer") == 2  # one rubric per input
    assert set(asked) == {"other-judge", "other-writer"}, sorted(set(asked))
    assert srv.max_in_flight <= 2 + 2, srv.max_in_flight  # one bound per endpoint and model name
