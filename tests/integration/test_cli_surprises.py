"""Commands that do not surprise: a profile that needs a VLM without one fails before any run, a
misspelt model gets the nearest names, and `argus evaluate` says where it froze new rubrics."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from argus_dagster import cli

from .helpers import t2v_bench

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _no_vlm_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_VLM", "ARGUS_RUBRIC", "ARGUS_BENCH"))}
    return {**env, "ARGUS_HOME": str(home), "PYTHONPATH": str(ROOT), "ARGUS_PROFILE": ""}


def test_vlm_only_without_a_vlm_fails_at_once_naming_the_setting(tmp_path):
    bench, cands = t2v_bench(tmp_path, n_inputs=1)
    home = tmp_path / "home"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "argus_dagster.cli", "evaluate", "--bench", str(bench),
                           "--candidates", str(cands), "--profile", "vlm-only"],
                          env=_no_vlm_env(home), capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode != 0 and took < 10, (proc.returncode, took, lines)
    assert len(lines) == 1 and "ARGUS_VLM_BASE_URL" in lines[0], lines
    # nothing ran and nothing was recorded: `argus evaluations` lists no evaluation of it
    assert not list(home.rglob("evaluation.json")) and not list(home.rglob("*.parquet"))


def test_a_judge_profile_without_an_endpoint_names_the_setting(tmp_path, monkeypatch, capsys):
    bench, cands = t2v_bench(tmp_path, n_inputs=1)
    for k, v in _no_vlm_env(tmp_path / "home").items():
        monkeypatch.setenv(k, v)
    for k in [k for k in os.environ if k.startswith(("ARGUS_VLM", "ARGUS_RUBRIC"))]:
        monkeypatch.delenv(k)
    for profile, variable in (("judge=qwen", "ARGUS_VLM_BASE_URL"), ("rubric=qwen", "ARGUS_VLM_BASE_URL")):
        assert cli.main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--profile", profile]) == 2
        out = capsys.readouterr().out.strip().splitlines()
        assert len(out) == 1 and variable in out[0] and "(or" in out[0], out


def test_a_misspelt_model_gets_the_nearest_names(tmp_path, monkeypatch):
    bench, cands = t2v_bench(tmp_path, n_inputs=1, model="wan-2.1")
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    with pytest.raises(SystemExit) as exc:
        cli.main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--model", "wan2.1", "--plan"])
    text = str(exc.value.code)
    assert "--model 'wan2.1' (did you mean 'wan-2.1'?)" in text and "[" not in text, text
    with pytest.raises(SystemExit) as exc:
        cli.main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--model", "zzz", "--plan"])
    assert "models found: wan-2.1" in str(exc.value.code) and "did you mean" not in str(exc.value.code)


def test_evaluate_says_where_it_froze_new_rubrics(tmp_path, monkeypatch, capsys):
    bench, cands = t2v_bench(tmp_path, n_inputs=2)
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    assert cli.main(["evaluate", "--bench", str(bench), "--candidates", str(cands)]) == 0
    out = capsys.readouterr().out
    folder = bench / "T2V" / "rubrics"
    assert "T2V: inputs and rubrics (" in out and f"; 2 new rubrics frozen in {folder}" in out, out
    assert sorted(p.name for p in folder.iterdir()) == ["p0.json", "p1.json"]
    json.loads((folder / "p0.json").read_text())
    assert cli.main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--force"]) == 0
    assert "frozen in" not in capsys.readouterr().out  # loaded from there: nothing new to say
