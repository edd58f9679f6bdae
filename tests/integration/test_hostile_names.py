"""Names from files and folders: a bench name in bench.json is held to the rule of names.py where it
enters, and every command the CLI prints for a user to copy is shell-quoted."""

import json
import re
import shlex

import pytest

from .helpers import t2v_bench

pytestmark = pytest.mark.integration


def test_a_bench_json_name_with_shell_text_is_refused_where_it_enters(tmp_path, monkeypatch, capsys):
    from argus_dagster.client.cli import main

    bench, cands = t2v_bench(tmp_path, n_inputs=1)
    (bench / "bench.json").write_text(json.dumps({"name": "x; touch pwned #"}))
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands)]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and str(bench / "bench.json") in out[0] and "field 'name'" in out[0] and "--name" in out[0]
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--name", "a;b"]) == 2
    assert "--name 'a;b': use letters, digits" in capsys.readouterr().out
    assert not (tmp_path / "pwned").exists()


def test_every_printed_command_is_shell_quoted(tmp_path, monkeypatch, capsys):
    """A bench folder's own name is the bench's name; whatever it holds, the hints parse back to it."""
    from argus_dagster.client.cli import main

    root = tmp_path / "my bench; touch pwned #"
    root.mkdir()
    bench, cands = t2v_bench(root, n_inputs=1)
    folder = bench.parent / "b $(touch pwned2) 'q'"
    bench.rename(folder)
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "--bench", str(folder), "--candidates", str(cands)]) == 0
    out = capsys.readouterr().out
    hint = re.search(r"`(argus open[^`]*)`", out).group(1)
    assert shlex.split(hint) == ["argus", "open", "--bench", folder.name]
    ui = out[out.index("the Dagster UI: argus ui"):].splitlines()[0].split(": ", 1)[1]
    assert shlex.split(ui) == ["argus", "ui", "--bench", folder.name]
    assert not list(tmp_path.rglob("pwned*"))


# Model folders whose names are not UTF-8 (bytes as the file system holds them), beside model ``m``: a
# byte alone and one inside a name; and how each is named in what argus says, counted by hand.
NOT_UTF8_MODELS = {b"\xff": ("\\xff", 1, "DCFF"), b"wan-\xfe2": ("wan-\\xfe2", 5, "DCFE")}


def test_a_model_folder_whose_name_is_not_utf8_is_left_out_and_every_other_model_is_scored(tmp_path, monkeypatch,
                                                                                            capsys):
    """The same policy as a file of such a name inside a model folder (left out, said): the folder is
    left out with a line that names it printably, at evaluate and at the sensor's tick alike."""
    import os
    import shutil

    import dagster as dg
    import polars as pl

    from argus_dagster.assets.sensors import candidate_store_sensor
    from argus_dagster.client.cli import main
    from argus_dagster.client.results import current_leaderboard

    from .helpers import graph_resources

    bench, cands = t2v_bench(tmp_path, n_inputs=2)
    t2v = os.fsencode(cands / "T2V")
    for name in NOT_UTF8_MODELS:
        os.mkdir(t2v + b"/" + name)
        for video in ("p0.mp4", "p1.mp4"):
            shutil.copy(cands / "T2V" / "m" / video, os.fsdecode(t2v + b"/" + name + b"/" + video.encode()))
    shutil.copy(cands / "T2V" / "m" / "p0.mp4", os.fsdecode(t2v + b"/m/\xff.mp4"))  # a file of that kind, as before

    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands)]) == 0
    out = capsys.readouterr().out
    for shown, char, code in NOT_UTF8_MODELS.values():
        line = next(x for x in out.splitlines() if f"/T2V/{shown}: skipped" in x)
        assert line == (f"left out: {cands}/T2V/{shown}: skipped: the model name is not UTF-8 text (character {char} "
                        f"is a lone surrogate, U+{code}); rename the folder")
    assert "m: 1 videos of inputs the T2V manifest does not list, not scored: \\xff.mp4" in out
    board = current_leaderboard().filter(pl.col("task") == "T2V").to_dicts()
    assert [(r["model"], r["n_videos"]) for r in board] == [("m", 2)]

    # The other moment: the daemon's tick of the candidate-store sensor over the same store.
    with dg.instance_for_test() as instance:
        resources = graph_resources(bench, cands, tmp_path / "sensor-home")
        with dg.build_sensor_context(instance=instance, resources=resources) as ctx:
            result = candidate_store_sensor(ctx)
        for req in result.dynamic_partitions_requests:
            instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        for event in result.asset_events:
            instance.report_runless_asset_event(event)
        assert instance.get_dynamic_partitions("candidate_models") == ["m"]
        observed = {e.partition for e in result.asset_events if e.asset_key == dg.AssetKey("candidate_files")}
        assert observed == {dg.MultiPartitionKey({"task": "T2V", "model": "m"})}


def test_a_bench_or_candidates_folder_whose_path_is_not_utf8_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """The bench folder's name is the bench's name, and both paths are written in its tables: a path
    that is not UTF-8 is refused before anything is read."""
    import os

    from argus_dagster.client.cli import main

    bench, cands = t2v_bench(tmp_path, n_inputs=1)
    odd = tmp_path / os.fsdecode(b"bench-\xff")
    bench.rename(odd)
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    for args, label in (([str(odd), str(cands)], "--bench"), ([str(cands), str(odd)], "--candidates")):
        assert main(["evaluate", "--bench", args[0], "--candidates", args[1]]) == 2
        out = capsys.readouterr().out.strip().splitlines()
        # after "<tmp_path>/bench-": the byte is character len(tmp_path) + 8
        assert out == [f"{label} {tmp_path}/bench-\\xff: the folder's path is not UTF-8 text (character "
                       f"{len(str(tmp_path)) + 8} is a lone surrogate, U+DCFF); rename the folder"], out
    assert not (tmp_path / "home").exists()
