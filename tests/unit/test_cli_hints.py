"""Hints that say what is there: `argus evaluations` never prints an epoch date, and a misspelt task
folder gets the task it was meant to be."""

import json

from argus_dagster.client.cli import main
from argus_dagster.method.candidate_store import discover, nearest


def test_an_evaluation_never_scored_is_listed_as_never(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "benches" / "mine" / "vlm-only"
    folder.mkdir(parents=True)
    (folder / "evaluation.json").write_text(json.dumps({
        "bench": "mine", "profile": "vlm-only", "bench_dir": str(tmp_path / "b"), "candidates_dir": str(tmp_path / "c"),
        "bench_hash": "abc", "last_evaluated": 0}))
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path))
    assert main(["evaluations"]) == 0
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.startswith("mine")][0]
    assert "never" in row and "1970" not in out


def test_a_misspelt_task_folder_gets_did_you_mean(tmp_path):
    for name in ("T2v", "t2vv", "ti2v", "notes"):
        (tmp_path / name / "m").mkdir(parents=True)
        (tmp_path / name / "m" / "p0.mp4").write_bytes(b"")
    problems = discover(tmp_path).problems
    said = {p.split(":", 1)[0].rsplit("/", 1)[-1]: p for p in problems}
    assert "did you mean T2V?" in said["T2v"] and "rename it" in said["T2v"]
    assert "did you mean T2V?" in said["t2vv"] and "not a task folder" in said["t2vv"]
    assert "did you mean" not in said["notes"] and "ti2v" not in said  # a task in the released spelling


def test_nearest_names():
    assert nearest("wan2.1", ["wan-2.1", "cogvideo", "hunyuan"]) == ["wan-2.1"]
    assert nearest("CogVideo", ["cogvideo", "hunyuan"], fold_case=True) == ["cogvideo"]
    assert nearest("zzz", ["cogvideo", "hunyuan"]) == []


def test_an_error_under_a_deep_folder_keeps_its_reason():
    """The summary of row errors clips a long error in the middle: its path's start and its reason stay."""
    from argus_dagster.outputs.history_words import error_summary

    path = "/very/deep/" + "folder/" * 30 + "zero.mp4"
    text = error_summary([("TI2V/m", "zero", f"{path}: not a regular file (a link to /dev/zero)")])
    [line] = [ln for ln in text.splitlines() if "'zero'" in ln]
    assert "a link to /dev/zero" in line and "/very/deep/" in line and " … " in line
    assert len(line.split(": ", 1)[1]) <= 160
    short = error_summary([("T2V/m", "p0", "/b/p0.mp4: empty file (0 bytes)")])
    assert "/b/p0.mp4: empty file (0 bytes)" in short  # a short error is whole
