"""`argus compare` on real generated clips (VideoPhy-2's, ../shared/data) against degraded copies of
them, while another `argus evaluate` adds a model to the same evaluation: the paired numbers are the
stored scores' (checked against scipy's permutation test), the gate fails a frozen copy and passes an
identical one and an improvement, and every flipped criterion links both videos' reports."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from argus_dagster.client.cli import main
from tests.waiting import wait_until

from .helpers import ROOT, videophy_bench

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
N_INPUTS = 8


@pytest.fixture(scope="module")
def layout(real_data, tmp_path_factory):
    """A T2V bench of 8 real clips (their prompts from the file names) and three models: the clips
    (``real``, re-encoded at 256 px wide), the same files (``same``) and each clip frozen on its first
    frame (``frozen``); a fourth, ``shuffled`` (frames in a fixed random order), is added later."""
    from argus_dagster.infra.media import write_video

    root = tmp_path_factory.mktemp("compare")
    bench, cands, clips = videophy_bench(real_data, root, N_INPUTS, width=256, most=32)
    for k, frames in enumerate(clips):
        iid = f"v{k}"
        write_video(cands / "T2V" / "real" / f"{iid}.mp4", frames, 8)
        for copy in ("same", "ckpt@2"):  # the same files; a model name may hold an @
            (cands / "T2V" / copy).mkdir(parents=True, exist_ok=True)
            (cands / "T2V" / copy / f"{iid}.mp4").write_bytes((cands / "T2V" / "real" / f"{iid}.mp4").read_bytes())
        write_video(cands / "T2V" / "frozen" / f"{iid}.mp4", np.repeat(frames[:1], len(frames), axis=0), 8)
        order = np.random.default_rng(k).permutation(len(frames))
        write_video(root / "later" / f"{iid}.mp4", frames[order], 8)
    return {"bench": bench, "cands": cands, "home": root / "home", "later": root / "later"}


def _compare(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["compare", *argv])
    return rc, capsys.readouterr().out


def test_compare_and_gate_on_real_clips_while_another_command_adds_a_model(layout, monkeypatch, capsys):
    bench, cands, home = layout["bench"], layout["cands"], layout["home"]
    monkeypatch.setenv("ARGUS_HOME", str(home))
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--task", "T2V"]) == 0

    from argus_dagster.client.instance import local_instance
    from argus_dagster.infra.settings import load_settings

    settings = load_settings()
    instance = local_instance(settings)
    # Another command beside it: `argus evaluate` scores a model added to the candidates' folder.
    (cands / "T2V" / "shuffled").mkdir()
    for f in layout["later"].iterdir():
        (cands / "T2V" / "shuffled" / f.name).write_bytes(f.read_bytes())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ARGUS_HOME": str(home)}
    before = {r.run_id for r in instance.get_runs()}
    other = subprocess.Popen([sys.executable, "-m", "argus_dagster.client.cli", "evaluate", "--bench", str(bench),
                              "--candidates", str(cands), "--task", "T2V"], env=env, cwd=home.parent,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: any(r.run_id not in before for r in instance.get_runs()) or other.poll() is not None,
                   timeout_s=180, what="the other command's first run")

        # The frozen copies are worse, beyond chance: the gate fails and says why.
        rc, out = _compare(capsys, "real", "frozen", "--gate")
        assert rc == 1, out
        lines = out.splitlines()  # the gate's verdict, then one line per failing task
        at = lines.index("gate: failed")
        assert re.fullmatch(rf"  T2V: frozen is worse than real by \d+\.\d\d \(95% interval -\d+\.\d\d to -\d+\.\d\d "
                            rf"on {N_INPUTS} inputs, p = [\d.]+\), beyond the margin 0", lines[at + 1]), lines[at:]
        rc, out = _compare(capsys, "real", "frozen", "--gate", "--format", "json")
        assert rc == 1
        result = json.loads(out)
        [overall] = [r for r in result["rows"] if r["dimension"] == "overall"]
        assert result["gate"]["passed"] is False and len(result["gate"]["reasons"]) == 1

        # The numbers are the stored scores', paired by input (scipy's permutation test beside ours).
        from argus_dagster.client.results import stored_partitions

        scores = pl.concat(stored_partitions("video_scores", instance, ["T2V"], settings).values(), how="diagonal_relaxed")
        per = {m: dict(scores.filter(pl.col("model") == m).select("input_id", "final_score").iter_rows())
               for m in ("real", "frozen")}
        diffs = np.array([per["frozen"][i] - per["real"][i] for i in sorted(per["real"])])
        assert overall["n_inputs"] == N_INPUTS and overall["diff"] == pytest.approx(diffs.mean())
        assert overall["mean_a"] == pytest.approx(np.mean(list(per["real"].values())))
        assert overall["p_value"] == pytest.approx(stats.permutation_test(
            (diffs,), np.mean, permutation_type="samples", n_resamples=np.inf).pvalue)
        assert overall["ci_high"] < 0 and overall["p_value"] < 0.05
        assert overall["wins"] + overall["ties"] + overall["losses"] == N_INPUTS
        assert result["a"]["judges"] == ["evidence-only"] and result["a"]["scored_criteria"] > 0
        # Each flipped criterion: both verdicts, both rationales, both reports (pages that exist).
        assert result["flips"], "a frozen clip fails motion criteria the real one passes"
        reports = Path(settings.reports_dir)
        for f in result["flips"]:
            assert {f["verdict_a"], f["verdict_b"]} == {"pass", "fail"} and f["rationale_a"] and f["rationale_b"]
            for side, model in (("report_a", "real"), ("report_b", "frozen")):
                page = f"T2V/{model}/{f['input_id']}.html"
                assert f[side].endswith(page) and (reports / page).is_file(), (f[side], page)

        # The same files: no difference at all, and the gate passes; B better than A passes too.
        rc, out = _compare(capsys, "real", "same", "--gate", "--format", "json")
        same = json.loads(out)
        [row] = [r for r in same["rows"] if r["dimension"] == "overall"]
        assert rc == 0 and row["diff"] == 0 and row["ties"] == N_INPUTS and row["p_value"] == 1.0 and not same["flips"]
        rc, out = _compare(capsys, "frozen", "real", "--gate")
        assert rc == 0 and [line for line in out.splitlines() if line.startswith("gate: ")] == [
            "gate: passed (no task where real is worse than frozen by more than 0 with its interval below zero and p < 0.05)"], out
        # A margin wider than the drop lets it through.
        drop = -overall["diff"]
        rc, out = _compare(capsys, "real", "frozen", "--gate", "--margin", f"{drop + 0.5:.2f}")
        assert rc == 0, out
    finally:
        out_other, _ = other.communicate(timeout=400)
    assert other.returncode == 0, out_other

    # After it: the added model compares too; the frozen comparison has not moved.
    rc, out = _compare(capsys, "real", "frozen", "--gate", "--format", "json")
    assert rc == 1 and json.loads(out)["rows"] == result["rows"]
    rc, out = _compare(capsys, "real", "shuffled", "--format", "json")
    assert rc == 0 and [r for r in json.loads(out)["rows"] if r["dimension"] == "overall"][0]["n_inputs"] == N_INPUTS


def test_one_model_in_two_evaluations_and_what_compare_cannot_compare(layout, monkeypatch, capsys):
    """MODEL@BENCH/PROFILE: the same videos under a second bench (a copy of the first, another name)
    are the same scores: no difference. Sides that name nothing say so in one line."""
    import shutil

    monkeypatch.setenv("ARGUS_HOME", str(layout["home"]))
    first = layout["bench"]
    if not (layout["home"]).exists():
        assert main(["evaluate", "--bench", str(first), "--candidates", str(layout["cands"]), "--task", "T2V"]) == 0
    copy = first.parent / "copy"
    if not copy.exists():
        shutil.copytree(first / "T2V", copy / "T2V", ignore=shutil.ignore_patterns("rubrics"))
    assert main(["evaluate", "--bench", str(copy), "--candidates", str(layout["cands"]), "--task", "T2V",
                 "--model", "real", "--name", "copy"]) == 0
    from argus_dagster.infra.settings import load_settings

    other = load_settings()  # the evaluation just made is the latest: the bare MODEL names it
    assert other.bench == "copy"
    rc, out = _compare(capsys, f"real@bench/{other.profile}", "real", "--format", "json")
    result = json.loads(out)
    [row] = [r for r in result["rows"] if r["dimension"] == "overall"]
    assert rc == 0 and row["n_inputs"] == N_INPUTS and row["diff"] == 0 and row["ties"] == N_INPUTS, row
    assert result["a"]["evaluation"] != result["b"]["evaluation"] and result["a"]["name"] == f"real@bench/{other.profile}"
    rc, out = _compare(capsys, "real", "nobody")
    assert rc == 2 and out.strip() == ("argus compare: no stored scores of 'nobody' in copy/default "
                                       "(its models: real)")  # the copy, evaluated last, out
    rc, out = _compare(capsys, "real", "real")
    assert rc == 2 and out.strip() == "argus compare: A and B are the same scores (real in copy/default)", out
    # A model whose name holds an @ is that model, not a profile of another evaluation
    rc, out = _compare(capsys, "real", "ckpt@2", "--bench", "bench", "--format", "json")
    both = json.loads(out)
    assert rc == 0 and both["b"]["model"] == "ckpt@2" and both["b"]["evaluation"] == both["a"]["evaluation"]
    assert [r["diff"] for r in both["rows"] if r["dimension"] == "overall"] == [0]
    for margin, said in (("nan", "give a finite number"), ("-1", "give points of the 0-10 final score")):
        with pytest.raises(SystemExit) as refused:  # a margin that is no number of points is refused where it is read
            main(["compare", "real", "ckpt@2", "--gate", "--margin", margin])
        err = capsys.readouterr().err
        assert refused.value.code == 2 and f"--margin: '{margin}': {said}" in err, err
    rc, out = _compare(capsys, "real", "real@vlm-only")
    assert rc == 2 and out.startswith(f"nothing evaluated yet for {other.bench}/vlm-only"), out
