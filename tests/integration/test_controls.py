"""`argus evaluate --controls N` on real generated clips (VideoPhy-2's, ../shared/data), while another
`argus evaluate` adds a model to the same evaluation beside it: control candidates are made from each
model's own videos and scored like any candidate; the overview's table, read cell by cell in Chromium,
is the stored check results' and `argus export controls`'; a kind the default (evidence-only) judge
cannot see (a clip played backwards) is reported as not caught, and frozen clips are caught."""

import json
import os
import re
import subprocess
import sys

import pytest

from argus_dagster.client.cli import main
from tests.waiting import wait_until

from .chromium import controls_table
from .helpers import ROOT, videophy_bench, without_argus_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
N_INPUTS = 6


@pytest.fixture(scope="module")
def layout(real_data, tmp_path_factory):
    """A T2V bench of 6 real clips (prompts from their file names), model ``real`` (the clips at 192 px);
    ``later`` holds a second model's videos (the clips with every other frame dropped), added while the
    controls are scored."""
    from argus_dagster.infra.media import write_video

    root = tmp_path_factory.mktemp("controls")
    bench, cands, clips = videophy_bench(real_data, root, N_INPUTS, width=192, most=24)
    for k, frames in enumerate(clips):
        write_video(cands / "T2V" / "real" / f"v{k}.mp4", frames, 8)
        write_video(root / "later" / f"v{k}.mp4", frames[::2], 4)
    return {"bench": bench, "cands": cands, "home": root / "home", "later": root / "later"}


def test_controls_on_real_clips_while_another_command_adds_a_model(layout, monkeypatch, capsys):
    import dagster as dg

    from argus_dagster.client.instance import local_instance
    from argus_dagster.infra.settings import load_settings

    bench, cands, home = layout["bench"], layout["cands"], layout["home"]
    monkeypatch.setenv("ARGUS_HOME", str(home))
    without_argus_settings(monkeypatch)
    where = ["--bench", str(bench), "--candidates", str(cands)]
    assert main(["evaluate", *where]) == 0
    settings = load_settings()
    instance = local_instance(settings)

    # Another command beside it: `argus evaluate` scores a model added to the candidates' folder.
    (cands / "T2V" / "halved").mkdir()
    for f in layout["later"].iterdir():
        (cands / "T2V" / "halved" / f.name).write_bytes(f.read_bytes())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = {r.run_id for r in instance.get_runs()}
    other = subprocess.Popen([sys.executable, "-m", "argus_dagster.client.cli", "evaluate", *where], env=env,
                             cwd=home.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: any(r.run_id not in before for r in instance.get_runs()) or other.poll() is not None,
                   timeout_s=180, what="the other command's first run")
        capsys.readouterr()
        assert main(["evaluate", *where, "--model", "real", "--controls", str(N_INPUTS)]) == 0
        out = capsys.readouterr().out
    finally:
        said, _ = other.communicate(timeout=600)
    assert other.returncode == 0, said

    lines = [re.sub(r"^\[\s*[\d.]+s\]\s*", "", line) for line in out.splitlines()]
    [said_t2v] = [line for line in lines if line.startswith("controls, T2V: ")]

    # The stored check results: one per task; T2V's names what the evidence-only judge cannot see
    check = instance.get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey("controls"), "tells_controls_apart_T2V"))
    assert check is not None and check.evaluation is not None
    meta = {k: v.value for k, v in check.evaluation.metadata.items()}
    assert meta["sentence"] == said_t2v.removeprefix("controls, T2V: ")
    table_md = [line.strip("|").split("|") for line in str(meta["table"]).splitlines()[2:]]
    stored = {c.strip(): (n.strip(), caught.strip(), crit.strip()) for c, n, caught, crit in table_md}
    assert set(stored) == {"frozen", "shuffled", "reversed", "prompt_swap"}
    assert all(n == str(N_INPUTS) for n, _, _ in stored.values()), stored
    assert stored["frozen"][1] == "100%" and stored["frozen"][2] != "-"  # every frozen clip caught, and by what
    assert "reversed" in str(meta["not_caught"]).split(", ")  # the default does not see a clip played backwards
    assert check.evaluation.passed is False  # a kind it cannot see: the check says so
    assert sorted(str(meta["not_caught"]).split(", ")) == sorted(
        k for k, (_, caught, _) in stored.items() if int(caught.rstrip("%")) < 50)

    # argus export controls: the same rows
    capsys.readouterr()
    assert main(["export", "controls", "--format", "json", "--out", "-"]) == 0
    exported = {r["control"]: r for r in json.loads(capsys.readouterr().out) if r["task"] == "T2V"}
    for kind, (n, caught, crit) in stored.items():
        assert exported[kind]["n"] == int(n) and f"{exported[kind]['caught_share']:.0%}" == caught
        assert (exported[kind]["criteria"] or "-") == crit

    # The overview, where a person reads it: the sentence and every cell are the check's
    sentence, rows = controls_table(settings.reports_dir / "index.html")
    assert sentence == f"{meta['sentence']} (judged by evidence-only)"
    assert {k: (n, caught, "-" if crit == "–" else crit) for k, (n, caught, crit) in rows.items()} == stored


def test_controls_on_the_demo_read_in_a_browser(evaluated_demo, tmp_path):
    """The demo (T2V), as `argus demo --controls` scores it: the overview's table is the stored check's,
    and a clip played backwards, which the evidence-only default cannot see, is reported as not caught."""
    import shutil

    import dagster as dg

    from argus_dagster.client.instance import local_instance
    from argus_dagster.infra.settings import evaluation_settings

    home = tmp_path / "argus"
    shutil.copytree(evaluated_demo["home"], home, symlinks=True)
    for record in (home / "benches").rglob("*.json"):  # the copy's records name the copy's bench folder
        record.write_text(record.read_text().replace(str(evaluated_demo["home"]), str(home)))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "ARGUS_HOME": str(home),
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "argus_dagster.client.cli", "evaluate", "--bench", str(home / "bench"),
                           "--candidates", str(home / "candidates"), "--name", "demo", "--task", "T2V",
                           "--controls", "1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    settings = evaluation_settings(home / "bench", home / "candidates", name="demo", profile="default", home=home)
    check = local_instance(settings).get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey("controls"), "tells_controls_apart_T2V"))
    assert check is not None and check.evaluation is not None
    meta = {k: v.value for k, v in check.evaluation.metadata.items()}
    table_md = [line.strip("|").split("|") for line in str(meta["table"]).splitlines()[2:]]
    stored = {c.strip(): (n.strip(), caught.strip(), crit.strip()) for c, n, caught, crit in table_md}
    assert set(stored) == {"frozen", "shuffled", "reversed", "prompt_swap"}
    assert stored["reversed"][1] == "0%" and "reversed" in str(meta["not_caught"]).split(", ")
    said = [m.group(1) for line in done.stdout.splitlines()
            if (m := re.fullmatch(r"\[\s*[\d.]+s\] controls, T2V: (.*)", line))]
    assert said == [meta["sentence"]]
    sentence, rows = controls_table(settings.reports_dir / "index.html")
    assert sentence == f"{meta['sentence']} (judged by evidence-only)"
    assert {k: (n, caught, "-" if crit == "–" else crit) for k, (n, caught, crit) in rows.items()} == stored
