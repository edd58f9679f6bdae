"""Commands that do not surprise: a profile that needs a VLM without one fails before any run, a
misspelt model gets the nearest names, `argus evaluate` says where it froze new rubrics (and with
`--rubrics-in home` leaves the bench folder alone), and its progress line on a terminal names each phase."""

import hashlib
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from argus_dagster.client import cli
from argus_dagster.infra.progress import PHASES
from tests.servers.openai_server import FakeVlmServer, kind_of

from .helpers import t2v_bench

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _no_vlm_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_VLM", "ARGUS_RUBRIC", "ARGUS_BENCH"))}
    return {**env, "ARGUS_HOME": str(home), "PYTHONPATH": str(ROOT), "ARGUS_PROFILE": ""}


def test_vlm_only_without_a_vlm_fails_at_once_naming_the_setting(tmp_path):
    bench, cands = t2v_bench(tmp_path, n_inputs=1)
    home = tmp_path / "home"
    proc = subprocess.run([sys.executable, "-m", "argus_dagster.client.cli", "evaluate", "--bench", str(bench),
                           "--candidates", str(cands), "--profile", "vlm-only"],
                          env=_no_vlm_env(home), capture_output=True, text=True, timeout=120)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode != 0, (proc.returncode, lines)
    assert len(lines) == 1 and "ARGUS_VLM_BASE_URL" in lines[0], lines
    # at once: before any instance was opened, nothing ran and nothing was recorded (`argus evaluations`
    # lists no evaluation of it)
    assert not list(home.rglob("*.db")) and not list(home.rglob("dagster.yaml")), sorted(home.rglob("*"))
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


def _on_a_terminal(cmd: list[str], env: dict, timeout_s: float = 300) -> tuple[int, str]:
    """Run ``cmd`` with its output on a pseudo-terminal (as a person runs it); its exit status and output."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    data = os.read(master, 65536)
                except OSError:  # every end of the terminal closed: the command is done
                    break
                if not data:
                    break
                out += data
        return proc.wait(timeout=30), out.decode("utf-8", "replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_rubrics_in_home_leave_the_bench_alone_and_a_rerun_reuses_them(tmp_path):
    """`--rubrics-in home` freezes new rubrics under ARGUS_HOME and says so; the bench folder is not
    written, and a forced rerun loads them from there (the rubric generator gets no request). The
    first run's output is on a terminal: its progress line names every phase as it comes."""
    bench, cands = t2v_bench(tmp_path, n_inputs=2)
    home = tmp_path / "home"
    before = _tree(bench)
    cmd = [sys.executable, "-m", "argus_dagster.client.cli", "evaluate", "--bench", str(bench), "--candidates", str(cands),
           "--rubrics-in", "home"]
    with FakeVlmServer() as srv:
        env = {**_no_vlm_env(home), "ARGUS_RUBRIC_BASE_URL": srv.base_url, "ARGUS_RUBRIC_MODEL": "rubric-model"}
        status, out = _on_a_terminal(cmd, env)
        assert status == 0, out[-3000:]
        generated = [b for b in srv.bodies() if kind_of(b) == "rubric"]
        assert len(generated) == 2, len(generated)
        frozen = sorted(home.glob("benches/bench/rubrics/*/T2V/*.json"))
        assert [p.name for p in frozen] == ["p0.json", "p1.json"], sorted(home.rglob("*.json"))
        assert f"new rubrics are frozen under {home / 'benches' / 'bench' / 'rubrics'}" in out, out
        assert f"2 new rubrics frozen in {frozen[0].parent}" in out, out
        assert _tree(bench) == before  # not a file added, changed or removed
        for phase in PHASES:  # drawn as each phase begins, however short it is
            assert f"\x1b[2K{phase} · videos " in out, (phase, out[-3000:])
        drawn = [line for line in out.split("\r\x1b[2K") if " · videos " in line]
        assert drawn.index(next(d for d in drawn if d.startswith("rubrics"))) < drawn.index(
            next(d for d in drawn if d.startswith("judging")))

        again = subprocess.run(cmd + ["--force"], env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert "T2V: inputs and rubrics (" in again.stdout and "frozen in" not in again.stdout, again.stdout
        assert len([b for b in srv.bodies() if kind_of(b) == "rubric"]) == 2  # none asked for again
    assert _tree(bench) == before
