"""`argus export leaderboard|videos|criteria`: the stored tables of an evaluated bench, as CSV, JSON and
parquet files that read back to the same values."""

import io
import json

import polars as pl
import pytest

from argus_dagster.client import cli
from argus_dagster.client.results import current_leaderboard, stored_partitions
from tests.skips import machine_lacks

from .helpers import pattern_clip

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """A T2V bench of two inputs and two models, evaluated by `argus evaluate` in its own ARGUS_HOME."""
    from argus_dagster.infra.media import write_video

    root = tmp_path_factory.mktemp("exports")
    bench, cands = root / "bench", root / "cands"
    (bench / "T2V").mkdir(parents=True)
    rows = [{"id": f"p{i}", "prompt": f"A textured pattern slides to the left, take {i}."} for i in range(2)]
    (bench / "T2V" / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for j, model in enumerate(("moving", "still")):
        for i in range(2):
            clip = pattern_clip(10 * j + i)
            write_video(cands / "T2V" / model / f"p{i}.mp4", clip if model == "moving" else clip[:1].repeat(24, 0), 12)
    mp = pytest.MonkeyPatch()
    mp.setenv("ARGUS_HOME", str(root / "home"))
    mp.delenv("ARGUS_BENCH", raising=False)
    mp.delenv("ARGUS_BENCH_DIR", raising=False)
    mp.delenv("ARGUS_PROFILE", raising=False)
    try:
        assert cli.main(["evaluate", "--bench", str(bench), "--candidates", str(cands)]) == 0
        yield root
    finally:
        mp.undo()


def test_leaderboard_csv_parses_back_to_the_stored_table(evaluated, monkeypatch, capsys):
    out = evaluated / "lb.csv"
    assert cli.main(["export", "leaderboard", "--format", "csv", "--out", str(out)]) == 0
    assert f"wrote 2 rows of bench/default's leaderboard to {out}" in capsys.readouterr().out
    stored = current_leaderboard()
    back = pl.read_csv(out, schema_overrides={"needs_vlm": pl.String})
    assert back.columns == stored.columns and back.height == stored.height == 2
    assert back["model"].to_list() == stored["model"].to_list()  # best first, as stored
    for col in ("mean_final", "ci_low", "ci_high", "n_scored", "n_criteria", "weight_scored"):
        assert back[col].to_list() == pytest.approx(stored[col].to_list()), col
    assert back["n_videos"].to_list() == stored["n_videos"].to_list() == [2, 2]
    # a list column is its items joined by "; " (an empty list an empty field)
    joined = [("; ".join(v) or None) for v in stored["needs_vlm"].to_list()]
    assert back["needs_vlm"].to_list() == joined
    assert any(joined), "the evidence-only judge leaves criteria that need a VLM: the list is not empty"
    assert stored["mean_final"][0] > stored["mean_final"][1]  # the moving clips rank above the frozen ones


def test_videos_json_and_criteria_parquet_keep_every_value(evaluated, capsys):
    videos, criteria = evaluated / "v.json", evaluated / "c.parquet"
    assert cli.main(["export", "videos", "--format", "json", "--out", str(videos)]) == 0
    assert cli.main(["export", "criteria", "--format", "parquet", "--out", str(criteria), "--task", "t2v"]) == 0
    stored_v = pl.concat(stored_partitions("video_scores").values()).sort("model", "input_id")
    named = {"bench": pl.String, "profile": pl.String}
    back_v = pl.read_json(videos, schema={**named, **stored_v.schema}).sort("model", "input_id")
    # every row names its evaluation first, then the stored columns, every value as stored
    assert back_v.columns[:2] == ["bench", "profile"] and back_v.drop("bench", "profile").equals(stored_v)
    assert back_v.height == 4 and set(back_v["bench"]) == {"bench"} and set(back_v["profile"]) == {"default"}
    assert isinstance(json.loads(videos.read_text())[0]["caps_fired"], list)  # lists stay lists in JSON
    stored_c = pl.concat(stored_partitions("criterion_scores").values()).sort("model", "input_id", "criterion_id")
    back_c = pl.read_parquet(criteria).sort("model", "input_id", "criterion_id")
    assert back_c.columns[:2] == ["bench", "profile"] and back_c.drop("bench", "profile").equals(stored_c)
    assert back_c.height > 4 and set(back_c["bench"]) == {"bench"} and set(back_c["profile"]) == {"default"}


def test_export_to_standard_output_and_of_a_task_not_evaluated(evaluated, capsys):
    assert cli.main(["export", "videos", "--out", "-"]) == 0
    text = capsys.readouterr().out
    table = pl.read_csv(io.StringIO(text))
    assert table.height == 4 and set(table["model"]) == {"moving", "still"}
    assert cli.main(["export", "leaderboard", "--task", "TI2V", "--out", str(evaluated / "x.csv")]) == 1
    assert "nothing stored of TI2V for bench/default" in capsys.readouterr().out
    assert not (evaluated / "x.csv").exists()
    assert cli.main(["export", "criteria", "--format", "parquet", "--out", "-"]) == 2
    assert cli.main(["export", "firm"]) == 2  # firm writes a file named with --out
    assert "--out" in capsys.readouterr().out


def test_default_file_is_named_after_the_evaluation_under_the_homes_exports(evaluated, monkeypatch, capsys,
                                                                           tmp_path):
    here = tmp_path / "a-repository"  # where the command runs: left as it was
    here.mkdir()
    monkeypatch.chdir(here)
    assert cli.main(["export", "leaderboard", "--format", "json"]) == 0
    assert cli.main(["export", "videos"]) == 0  # CSV
    assert list(here.iterdir()) == []
    exports = evaluated / "home" / "exports"
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].endswith(f"to {exports / 'bench-default-leaderboard.json'} (json; columns: docs/exports.md)")
    assert printed[1].endswith(f"to {exports / 'bench-default-videos.csv'} (csv; columns: docs/exports.md)")
    videos = pl.read_csv(exports / "bench-default-videos.csv")
    assert set(videos["bench"]) == {"bench"} and set(videos["profile"]) == {"default"} and videos.height == 4
    rows = json.loads((exports / "bench-default-leaderboard.json").read_text())
    assert [r["model"] for r in rows] == ["moving", "still"] and isinstance(rows[0]["needs_vlm"], list)
    # moving scores above still on both inputs: first and second in every resample of the inputs
    assert [(r["rank"], r["rank_low"], r["rank_high"], r["shares_top"]) for r in rows] == [(1, 1, 1, True),
                                                                                       (2, 2, 2, False)]


def test_the_leaderboard_materialization_links_the_same_tables(evaluated, capsys):
    import dagster as dg

    from argus_dagster.client.instance import local_instance
    from argus_dagster.infra.settings import load_settings

    settings = load_settings()
    record = local_instance(settings).get_latest_materialization_event(dg.AssetKey("leaderboard"))
    meta = record.asset_materialization.metadata
    for name in ("leaderboard_csv", "leaderboard_json", "videos_csv", "videos_json"):
        assert meta[f"export_{name}"].value.startswith("http://127.0.0.1:"), name
    exported = settings.reports_dir / "exports" / "leaderboard.csv"
    assert meta["export_leaderboard_csv"].value.endswith("/reports/exports/leaderboard.csv")
    out = evaluated / "lb2.csv"
    assert cli.main(["export", "leaderboard", "--out", str(out)]) == 0
    assert exported.read_text() == out.read_text()  # what argus export writes, byte for byte
    videos = pl.read_json(settings.reports_dir / "exports" / "videos.json")
    assert videos.height == 4 and set(videos["model"]) == {"moving", "still"}
    assert videos.columns[:2] == ["bench", "profile"] and set(videos["profile"]) == {"default"}


_OWN_DEV = """set -e
d="$1"; python="$2"; script="$3"
mount -t tmpfs -o mode=755 tmpfs "$d"
for n in 'null 1 3' 'zero 1 5' 'full 1 7' 'random 1 8' 'urandom 1 9'; do set -- $n; mknod -m 666 "$d/$1" c $2 $3; done
ln -s /proc/self/fd "$d/fd"; ln -s /proc/self/fd/1 "$d/stdout"; ln -s /proc/self/fd/2 "$d/stderr"
mkdir "$d/shm" && mount --rbind /dev/shm "$d/shm"
mount --move "$d" /dev
"$python" -c "$script" /dev/full /dev/null /dev/stdout || true
stat -c '%n: %F' /dev/full /dev/null /dev/stdout
"""

_EXPORT_EACH = """import sys
from argus_dagster.client import cli
for out in sys.argv[1:]:
    print(f"rc {out}", cli.main(["export", "videos", "--out", out]), flush=True)
"""


def test_export_to_a_device_is_refused_and_the_device_stays(evaluated, tmp_path):
    """`--out /dev/full`, `/dev/null` and `/dev/stdout` as root, in a mount namespace of the test's own
    whose /dev is a tmpfs of real device nodes (so a write that renamed over them harms no other process)."""
    import os
    import shutil
    import subprocess
    import sys

    from .helpers import ROOT

    if os.geteuid() != 0 or not shutil.which("unshare"):
        machine_lacks("needs root and unshare(1): device nodes in a mount namespace of the test's own")
    scratch = tmp_path / "dev"
    scratch.mkdir()
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", _OWN_DEV, "sh", str(scratch),
                           sys.executable, _EXPORT_EACH], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    if "mount:" in done.stderr and "rc /dev/full" not in done.stdout:
        machine_lacks(f"this machine does not let the test mount: {done.stderr.strip()}")
    lines = done.stdout.strip().splitlines()
    said = {line.split(": ")[1].split(" ")[-1]: line for line in lines if line.startswith("argus export")}
    assert said.keys() == {"/dev/full", "/dev/null", "/dev/stdout"}, done.stdout + done.stderr
    assert lines[-3:] == ["/dev/full: character special file", "/dev/null: character special file",
                          "/dev/stdout: symbolic link"], done.stdout + done.stderr
    assert [line for line in lines if line.startswith("rc ")] == ["rc /dev/full 2", "rc /dev/null 2",
                                                                  "rc /dev/stdout 2"], done.stdout + done.stderr
    assert said["/dev/full"] == ("argus export videos: cannot write /dev/full: a character device is there, not a "
                                 "regular file; give the path of a file (it is created or replaced)")
    assert "cannot write /dev/null: a character device is there" in said["/dev/null"]
    assert "cannot write /dev/stdout: a FIFO (named pipe) is there" in said["/dev/stdout"]  # the pipe it names
    assert not any("wrote " in line for line in lines)
