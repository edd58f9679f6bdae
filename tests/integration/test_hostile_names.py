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
