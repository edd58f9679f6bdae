"""Manifests read line by line as bytes: a bad line is its own row's error and the valid lines are
scored; the rows of bad lines never take a valid input's key."""

import json

import polars as pl
import pytest

from argus_dagster.method.bench import MAX_MANIFEST_LINE, read_task
from argus_dagster.infra.media import write_video

from .helpers import pattern_clip

pytestmark = pytest.mark.integration


def test_a_bad_line_is_an_error_of_that_line_alone_and_never_takes_a_valid_key(tmp_path, monkeypatch, capsys):
    from argus_dagster.client.cli import main

    bench, cands, home = tmp_path / "bench", tmp_path / "cands", tmp_path / "home"
    (bench / "T2V").mkdir(parents=True)
    lines = [
        json.dumps({"id": "line-2", "prompt": "A pattern slides left, first."}).encode(),  # line 1
        b'{"id": "latin1", "prompt": "caf\xe9 au lait"}',                                  # line 2: not UTF-8
        json.dumps({"id": "v3", "prompt": "A pattern slides left, third."}).encode(),      # line 3
        b'{"id": "huge", "prompt": "' + b"x" * (MAX_MANIFEST_LINE + 10) + b'"}',          # line 4: too long
        json.dumps({"id": "v5", "prompt": "A pattern slides left,\u2028fifth."}).encode(),  # a separator inside
        json.dumps({"id": "!line-3", "prompt": "An id in the error rows' space."}).encode(),  # line 6
    ]
    (bench / "T2V" / "manifest.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    for iid in ("line-2", "v3", "v5"):
        write_video(cands / "T2V" / "m" / f"{iid}.mp4", pattern_clip(len(iid)), 12)

    rows = read_task(bench, "T2V")
    by_id = {r["input_id"]: r for r in rows}
    assert len(rows) == len(by_id) == 6  # one row a line, every key its own
    assert by_id["line-2"]["error"] is None and by_id["v3"]["error"] is None and by_id["v5"]["error"] is None
    assert "line 2: not UTF-8 text (byte 32 of the line)" in by_id["!line-2"]["error"]
    assert "line 4: longer than" in by_id["!line-4"]["error"]
    assert "starts with '!'" in by_id["!line-6"]["error"]

    monkeypatch.setenv("ARGUS_HOME", str(home))
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--task", "T2V"]) == 0
    out = capsys.readouterr().out
    assert "line 2: not UTF-8 text" in out and "line 4: longer than" in out
    from argus_dagster.client.results import current_leaderboard

    lb = current_leaderboard()
    row = lb.filter(pl.col("task") == "T2V").to_dicts()
    assert [r["model"] for r in row] == ["m"] and row[0]["mean_final"] is not None
    assert row[0]["n_videos"] == 3 and row[0]["n_errors"] == 3  # line-2, v3, v5 scored; lines 2, 4, 6 errors
