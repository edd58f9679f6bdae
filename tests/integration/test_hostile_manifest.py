"""Manifests read line by line as bytes: a bad line is its own row's error and the valid lines are
scored; the rows of bad lines never take a valid input's key."""

import json

import polars as pl
import pytest

from argus_dagster.infra.media import write_video
from argus_dagster.method.bench import MAX_MANIFEST_LINE, read_task

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


# Manifest lines whose strings hold a lone surrogate, written as the JSON escape a tool would write
# (json.loads makes the character; no UTF-8 writer can encode it): the line, its row's key, the field
# its error names, and where the surrogate is (character, code point), counted by hand.
SURROGATE_LINES = [
    ('{"id": "x\\udfff", "prompt": "A pattern slides left, second."}', "!line-2", "field 'id'", 2, "DFFF"),
    ('{"id": "s3", "prompt": "A cat \\ud800 sits."}', "s3", "field 'prompt'", 7, "D800"),
    ('{"id": "s4", "caption": "\\udc80 A pattern slides."}', "s4", "field 'caption'", 1, "DC80"),  # an alias
    ('{"id": "s5", "prompt": "A pattern slides.", "note\\udfff": 1}', "s5", "a field name", 5, "DFFF"),
]


def _surrogate_bench(root):
    """A T2V manifest of good lines (one with an escaped pair, which is text) around
    :data:`SURROGATE_LINES` (lines 2-5), and model ``m``'s video of every id a line names."""
    bench, cands = root / "bench", root / "cands"
    (bench / "T2V").mkdir(parents=True)
    good = [json.dumps({"id": "v1", "prompt": "A pattern slides left, first."}),
            '{"id": "pair", "prompt": "A pattern slides left \\ud83d\\ude00, sixth."}',
            json.dumps({"id": "v7", "prompt": "A pattern slides left, seventh."})]
    lines = good[:1] + [line for line, *_ in SURROGATE_LINES] + good[1:]
    (bench / "T2V" / "manifest.jsonl").write_text("\n".join(lines) + "\n", encoding="ascii")
    for i, iid in enumerate(("v1", "s3", "s4", "s5", "pair", "v7")):
        write_video(cands / "T2V" / "m" / f"{iid}.mp4", pattern_clip(i + 20), 12)
    return bench, cands


def test_a_line_with_a_lone_surrogate_is_refused_on_its_own_row_and_the_good_lines_are_scored(tmp_path, monkeypatch,
                                                                                              capsys):
    from argus_dagster.client.cli import main
    from argus_dagster.client.results import current_leaderboard, row_errors, stored_partitions

    bench, cands = _surrogate_bench(tmp_path)
    by_id = {r["input_id"]: r for r in read_task(bench, "T2V")}
    assert len(by_id) == 7
    for line_no, (_, key, field, char, code) in enumerate(SURROGATE_LINES, start=2):
        expected = f"line {line_no}: {field}: not UTF-8 text (character {char} is a lone surrogate, U+{code})"
        assert expected in by_id[key]["error"], by_id[key]["error"]
    assert by_id["pair"]["error"] is None and "\U0001F600" in by_id["pair"]["prompt"]  # a whole pair is text
    assert by_id["v1"]["error"] is None and by_id["v7"]["error"] is None

    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands)]) == 0
    capsys.readouterr()
    scores = stored_partitions("video_scores", tasks=["T2V"])["m|T2V"]
    scored = {r["input_id"] for r in scores.iter_rows(named=True) if r["final_score"] is not None}
    assert scored == {"v1", "pair", "v7"}
    errors = {iid: error for _, iid, error in row_errors(["T2V"])}
    assert {key for _, key, *_ in SURROGATE_LINES} <= set(errors)
    assert all("not UTF-8 text" in errors[key] for _, key, *_ in SURROGATE_LINES)

    # Another moment: a bad line and a good one added to the manifest the evaluation has read.
    with (bench / "T2V" / "manifest.jsonl").open("a", encoding="ascii") as fh:
        fh.write('{"id": "v9", "prompt": "A pattern slides left, ninth."}\n'
                 '{"id": "s10", "prompt": "A pattern \\udbff slides."}\n')
    for iid in ("v9", "s10"):
        write_video(cands / "T2V" / "m" / f"{iid}.mp4", pattern_clip(len(iid) + 40), 12)
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands)]) == 0
    scores = stored_partitions("video_scores", tasks=["T2V"])["m|T2V"]
    assert {r["input_id"] for r in scores.iter_rows(named=True) if r["final_score"] is not None} == {"v1", "pair", "v7",
                                                                                                    "v9"}
    errors = {iid: error for _, iid, error in row_errors(["T2V"])}
    assert "line 9: field 'prompt': not UTF-8 text (character 11 is a lone surrogate, U+DBFF)" in errors["s10"]
    board = current_leaderboard().filter(pl.col("task") == "T2V").to_dicts()
    assert [(r["model"], r["n_videos"]) for r in board] == [("m", 4)]
