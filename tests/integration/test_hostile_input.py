"""Hostile and careless input, met as a user meets it: ids that try to leave the bench, duplicate ids,
names that collide, a byte-order mark, a text file named .png, a full disk, credentials in a URL,
model folders whose names Dagster cannot take."""

import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from argus_dagster.infra.files import part_path
from argus_dagster.infra.media import write_video
from argus_dagster.infra.names import file_name

from .helpers import graph_resources, load, materialize_task, small_clip

pytestmark = pytest.mark.integration

ESCAPE_ID = "../../../escaped"



def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    bench, cands, home = root / "bench", root / "cands", root / "home"
    (bench / "T2V").mkdir(parents=True)
    (bench / "TI2V").mkdir(parents=True)
    absolute_id = str(root / "absolute_target")
    rows = [
        {"id": "v0", "prompt": "A pattern slides left."},                       # line 1, after a BOM
        {"id": ESCAPE_ID, "prompt": "A pattern slides left, escaping."},        # line 2
        {"id": absolute_id, "prompt": "A pattern slides left, absolutely."},    # line 3
        {"id": "猫 cat", "prompt": "A pattern slides left, cat one."},          # line 4
        {"id": "犬 cat", "prompt": "A pattern slides left, cat two."},          # line 5
        {"id": "v0", "prompt": "The same id again, another prompt."},           # line 6: duplicate
        {"id": "bad\nid", "prompt": "A control character in the id."},          # line 7
        {"id": ["v9"], "prompt": "An id that is a list."},                      # line 8
    ]
    (bench / "T2V" / "manifest.jsonl").write_bytes(
        b"\xef\xbb\xbf" + "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8"))
    import cv2
    cv2.imwrite(str(bench / "TI2V" / "first.png"), small_clip(9)[0])
    (bench / "TI2V" / "text.png").write_text("this is a text file, not an image")
    (bench / "TI2V" / "manifest.jsonl").write_text(
        json.dumps({"id": "good", "prompt": "The pattern slides.", "first_frame": "first.png"}) + "\n"
        + json.dumps({"id": "txtpng", "prompt": "The pattern slides.", "first_frame": "text.png"}) + "\n")
    models = ["good model", "good_model"]
    for k, model in enumerate(models):
        for i, iid in enumerate(["v0", "猫 cat", "犬 cat"]):
            write_video(cands / "T2V" / model / f"{iid}.mp4", small_clip(10 * k + i), 12)
    # What an unchecked id would read as its video: <model>/../../../escaped.mp4 and <absolute id>.mp4
    write_video(root / "escaped.mp4", small_clip(30), 12)
    write_video(Path(absolute_id + ".mp4"), small_clip(31), 12)
    for iid in ("good", "txtpng"):
        write_video(cands / "TI2V" / "good_model" / f"{iid}.mp4", small_clip(40), 12)
    before = _files(root)
    resources = graph_resources(bench, cands, home)
    with pytest.MonkeyPatch.context() as mp, dg.instance_for_test() as instance:
        mp.setenv("ARGUS_HOME", str(home))
        materialize_task("T2V", models, resources, instance)
        materialize_task("TI2V", ["good_model"], resources, instance)
        yield {"root": root, "bench": bench, "cands": cands, "home": home, "before": before,
               "resources": resources, "instance": instance, "absolute_id": absolute_id, "mp": mp}


def _key(task: str, model: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"task": task, "model": model})


def test_ids_never_read_or_write_outside_the_bench(hostile):
    h = hostile
    new = _files(h["root"]) - h["before"]
    outside = [p for p in new if not any(d in p.parents for d in (h["bench"], h["cands"], h["home"]))]
    assert outside == []
    assert not (h["root"] / "escaped.json").exists() and not Path(h["absolute_id"] + ".json").exists()
    # The hostile ids are data: their rubrics are frozen inside the bench under their file names.
    rubric_dir = h["bench"] / "T2V" / "rubrics"
    for iid in (ESCAPE_ID, h["absolute_id"]):
        assert (rubric_dir / f"{file_name(iid)}.json").is_file()
    # ... and the videos planted where an unchecked id points are never read as candidates.
    vs = load("video_scores", h["resources"], h["instance"], _key("T2V", "good_model"))
    by_id = {r["input_id"]: r for r in vs.iter_rows(named=True)}
    for iid in (ESCAPE_ID, h["absolute_id"]):
        assert by_id[iid]["final_score"] is None and by_id[iid]["error"].startswith("missing: no video")
    cands = load("candidate_videos", h["resources"], h["instance"], _key("T2V", "good_model"))
    assert all(str(h["cands"]) in u for u in cands["uri"].drop_nulls().to_list())


def test_bad_ids_and_duplicate_ids_are_row_errors(hostile):
    h = hostile
    inputs = load("input_instances", h["resources"], h["instance"], "T2V")
    errors = {r["input_id"]: r["error"] for r in inputs.iter_rows(named=True) if r["error"]}
    assert "line 6" in errors["!line-6"] and "'v0'" in errors["!line-6"] and "first on line 1" in errors["!line-6"]
    assert "line 7 field 'id'" in errors["!line-7"] and "control characters" in errors["!line-7"]
    assert "line 8 field 'id'" in errors["!line-8"] and "must be a string" in errors["!line-8"]
    v0 = inputs.filter(pl.col("input_id") == "v0")
    assert v0.height == 1 and v0["error"][0] is None and v0["prompt"][0] == "A pattern slides left."
    # The first v0 is judged once and counts once; the duplicate line is an error on its own row.
    for model in ("good model", "good_model"):
        vs = load("video_scores", h["resources"], h["instance"], _key("T2V", model))
        assert vs.filter(pl.col("input_id") == "v0").height == 1
        assert vs.filter(pl.col("input_id") == "v0")["final_score"][0] is not None
        assert "input invalid" in vs.filter(pl.col("input_id") == "!line-6")["error"][0]
        assert vs["input_id"].n_unique() == vs.height
    rubrics = load("rubrics", h["resources"], h["instance"], "T2V")
    assert rubrics.filter(pl.col("input_id") == "v0").height == 1


def test_a_manifest_with_a_byte_order_mark_reads_its_first_row(hostile):
    inputs = load("input_instances", hostile["resources"], hostile["instance"], "T2V")
    assert inputs.filter(pl.col("input_id") == "v0")["error"][0] is None
    assert not any((e or "").startswith("line 1:") for e in inputs["error"].to_list())


def test_an_unreadable_condition_image_is_an_input_error(hostile):
    h = hostile
    inputs = load("input_instances", h["resources"], h["instance"], "TI2V")
    err = inputs.filter(pl.col("input_id") == "txtpng")["error"][0]
    assert err is not None and "first_frame" in err and "not a readable image" in err
    vs = load("video_scores", h["resources"], h["instance"], _key("TI2V", "good_model"))
    by_id = {r["input_id"]: r for r in vs.iter_rows(named=True)}
    assert by_id["good"]["final_score"] is not None
    assert by_id["txtpng"]["final_score"] is None and "not a readable image" in by_id["txtpng"]["error"]


def test_report_pages_never_collide(hostile):
    h = hostile
    reports = h["home"] / "reports" / "T2V"
    folders = {p.name for p in reports.iterdir() if p.is_dir() and not p.name.startswith(("_", "compare"))}
    assert folders == {file_name("good model"), "good_model"}
    for model in ("good model", "good_model"):
        df = load("diagnostic_reports", h["resources"], h["instance"], _key("T2V", model))
        paths = df.filter(pl.col("error").is_null())["path"].to_list()
        assert len(paths) == len(set(paths)) == df.filter(pl.col("error").is_null()).height
        cat1 = Path(df.filter(pl.col("input_id") == "猫 cat")["path"][0]).read_text(encoding="utf-8")
        cat2 = Path(df.filter(pl.col("input_id") == "犬 cat")["path"][0]).read_text(encoding="utf-8")
        assert "猫 cat" in cat1 and "犬 cat" in cat2
    compare = (reports / "compare" / "v0.html").read_text(encoding="utf-8")
    assert "good model" in compare and "good_model" in compare
    for iid in ("猫 cat", "犬 cat"):
        page = (reports / "compare" / f"{file_name(iid)}.html").read_text(encoding="utf-8")
        assert iid in page and "good model" in page and "good_model" in page


def test_a_full_disk_is_one_line_on_each_report_row_and_leaves_old_pages_whole(hostile):
    """The disk under a model's reports is full: each page's write fails with the kernel's ENOSPC (the
    file it writes resolves to /dev/full, where every write(2) fails so), and the run goes on."""
    h = hostile
    reports = h["home"] / "reports" / "T2V" / "good_model"
    old = {p: p.read_bytes() for p in reports.glob("*.html")}
    assert old and (reports / "index.html") in old
    # The partition runs in this thread (one partition, Dagster's in-process executor), so each page's
    # write goes through the temporary name part_path gives here: made a link to /dev/full.
    for page in old:
        part_path(page).symlink_to("/dev/full")

    from argus_dagster.assets import CANDIDATE_ASSETS, TASK_ASSETS
    from argus_dagster.assets.reports import diagnostic_reports

    try:
        res = dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS, selection=[diagnostic_reports],
                             partition_key=_key("T2V", "good_model"), instance=h["instance"],
                             resources=h["resources"])
    finally:
        left = [p for p in reports.iterdir() if p.name.endswith(".part")]
        for p in left:
            p.unlink()
    assert res.success
    df = res.output_for_node("diagnostic_reports")
    assert df.height > 0 and df["path"].is_null().all()
    for err in df["error"].to_list():
        assert "\n" not in err and "cannot write" in err and str(reports) in err and "No space left" in err
        assert "free space" in err
    # Nothing is left truncated: the pages from before are intact, and no temporary file remains (each
    # link to /dev/full was written through and removed by the write that failed).
    assert {p: p.read_bytes() for p in reports.glob("*.html")} == old
    assert left == []
    mat = [m for m in res.get_asset_materialization_events()][0].materialization
    assert "cannot write" in mat.metadata["index_error"].value


def test_bad_model_folders_are_skipped_and_the_others_scored(tmp_path, monkeypatch, capsys):
    """`a|b` is Dagster's key separator, `model[1]` and `m*` globs to polars: each is skipped with a
    message, the sensor adds only the good model, and `argus evaluate` still makes the leaderboard."""
    from argus_dagster.assets.sensors import candidate_store_sensor
    from argus_dagster.client.cli import main

    bench, cands, home = tmp_path / "bench", tmp_path / "cands", tmp_path / "home"
    (bench / "T2V").mkdir(parents=True)
    (bench / "T2V" / "manifest.jsonl").write_text(json.dumps({"id": "p0", "prompt": "A pattern slides left."}) + "\n")
    for model in ("a|b", "model[1]", "m*", "m"):  # a table at .../m*/T2V.parquet would be read as a glob
        write_video(cands / "T2V" / model / "p0.mp4", small_clip(3), 12)
    write_video(cands / "T2V" / "m" / "stray.mp4", small_clip(4), 12)
    write_video(cands / "TV2V" / "m" / "e0.mp4", small_clip(5), 12)
    write_video(cands / "T2v2" / "m" / "p0.mp4", small_clip(6), 12)

    monkeypatch.setenv("ARGUS_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dh"))
    (home / "dh").mkdir(parents=True)
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--task", "T2V"]) == 0
    from argus_dagster.client.results import current_leaderboard

    lb = current_leaderboard()
    assert lb.filter(pl.col("task") == "T2V")["model"].to_list() == ["m"]

    from argus_dagster.method.candidate_store import discover

    found = discover(cands, bench)
    assert found.models == {"m": ["T2V"]}  # TV2V: no bench manifest, said below
    text = "\n".join(found.problems)
    assert "a|b" in text and "'|'" in text and "model[1]" in text and "'['" in text and "m*" in text
    assert "stray.mp4" in text and "does not list" in text
    assert "no TV2V manifest" in text and "T2v2" in text and "not a task folder" in text

    resources = graph_resources(bench, cands, home)
    with dg.instance_for_test() as instance:
        with dg.build_sensor_context(instance=instance, resources=resources) as ctx:
            result = candidate_store_sensor(ctx)
        added = [k for r in result.dynamic_partitions_requests for k in r.partition_keys]
        assert added == ["m"]


def _run_database_text(root: Path) -> list[str]:
    """Every text value in the instance's SQLite databases (snapshots are stored zlib-compressed)."""
    import sqlite3
    import zlib

    out = []
    for db in root.rglob("*.db"):
        con = sqlite3.connect(db)
        try:
            for (table,) in con.execute("select name from sqlite_master where type='table'").fetchall():
                for row in con.execute(f'select * from "{table}"'):
                    for v in row:
                        if isinstance(v, bytes):
                            try:
                                v = zlib.decompress(v).decode("utf-8", "replace")
                            except zlib.error:
                                v = v.decode("latin-1")
                        if isinstance(v, str):
                            out.append(v)
        finally:
            con.close()
    assert out, f"no run database under {root}"
    return out


def test_credentials_in_an_endpoint_url_appear_nowhere(tmp_path, monkeypatch, capsys):
    """The judge's URL carries a password and a query key: the run's events, metadata, tables, the
    run database (its job snapshots included) and the CLI's output show the endpoint without them,
    and the calls still reach the server."""
    from argus_dagster.client.printing import backbones
    from argus_dagster.infra.settings import load_settings
    from tests.servers.openai_server import FakeVlmServer

    bench, cands, home = tmp_path / "bench", tmp_path / "cands", tmp_path / "home"
    (bench / "T2V").mkdir(parents=True)
    (bench / "T2V" / "manifest.jsonl").write_text(json.dumps({"id": "p0", "prompt": "A pattern slides left."}) + "\n")
    write_video(cands / "T2V" / "m" / "p0.mp4", small_clip(3), 12)
    with FakeVlmServer() as srv:
        url = srv.base_url.replace("http://", "http://argus:pa55word-XYZ@") + "?api_key=qkey-XYZ&api-version=1"
        for k, v in {"ARGUS_VLM_BASE_URL": url, "ARGUS_VLM_MODEL": "judge", "ARGUS_VLM_API_KEY": "hkey-XYZ",
                     "ARGUS_HOME": str(home), "ARGUS_BENCH_DIR": str(bench), "ARGUS_CANDIDATES_DIR": str(cands)}.items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("ARGUS_RUBRIC_BASE_URL", raising=False)
        from argus_dagster.resources.vlm import vlm_from_env

        vlm = vlm_from_env()
        from argus_dagster.definitions import resources_for

        shown = backbones(resources_for(settings=load_settings()))
        resources = graph_resources(bench, cands, home, vlm=vlm)
        with dg.instance_for_test() as instance:
            materialize_task("T2V", ["m"], resources, instance)
            assert srv.requests
            everything = [shown, repr(vlm.client())]
            for rec in instance.get_run_records():
                everything.append(repr(rec.dagster_run))
            for r in instance.get_runs():
                for e in instance.all_logs(r.run_id):
                    everything.append(repr(e))
            for asset in ("criterion_evidence", "criterion_scores"):
                everything.append(repr(load(asset, resources, instance, _key("T2V", "m")).to_dicts()))
            everything += _run_database_text(Path(instance.root_directory))
    blob = "\n".join(everything) + capsys.readouterr().out
    assert "127.0.0.1" in shown and "***" in shown
    for secret in ("pa55word-XYZ", "qkey-XYZ", "hkey-XYZ"):
        assert secret not in blob
    assert "vlm_requests_by_endpoint" in blob and "api_key=***" in blob


def test_s3_keys_never_write_outside_the_media_cache(tmp_path, s3_endpoint):
    """``s3://bkt/../../../x`` and keys that start with ``/`` are fetched into the cache folder."""
    from argus_dagster.infra.media import local_path
    from argus_dagster.resources.storage import StorageResource

    storage = StorageResource(endpoint_url=s3_endpoint).storage()
    client = storage.client
    client.create_bucket(Bucket="bkt")
    cache = tmp_path / "deep" / "er" / "cache"
    outside_abs = tmp_path / "abs_target.png"
    keys = {"../../../../x.png": b"dots", str(outside_abs): b"absolute", "/etc-like/y.png": b"slash",
            "ok/z.png": b"plain"}
    for key, body in keys.items():
        client.put_object(Bucket="bkt", Key=key, Body=body)
    before = {p for p in tmp_path.rglob("*")}
    for key, body in keys.items():
        got = Path(local_path(f"s3://bkt/{key}", cache_dir=str(cache), storage=storage))
        assert cache in got.parents and got.read_bytes() == body
    new = {p for p in tmp_path.rglob("*")} - before
    assert new and all(p == cache or cache in p.parents or p in cache.parents for p in new)
    assert not outside_abs.exists() and not (tmp_path / "x.png").exists()


def test_align_names_the_file_it_cannot_read(tmp_path, capsys):
    from argus_dagster.client.cli import main

    human = tmp_path / "human.csv"
    human.write_text("input_id,model,score\np0,m,3\np1,m,4\n")
    scores = tmp_path / "scores.csv"
    scores.write_text("input_id,model,evaluator,score\np0,m,e,1\np1,m,e,2\n")
    broken_parquet = tmp_path / "video_scores.parquet"
    broken_parquet.write_bytes(b"PAR1 this is not a parquet file")
    broken_json = tmp_path / "ratings.json"
    broken_json.write_bytes(b"\xff\xfe not json")
    for args, bad in ((["--human", str(human), "--scores", str(broken_parquet)], broken_parquet),
                      (["--human", str(broken_json), "--scores", str(scores)], broken_json)):
        assert main(["align", *args]) == 2
        out = capsys.readouterr().out.strip().splitlines()
        assert len(out) == 1 and str(bad) in out[0] and out[0].startswith("argus align: --")
    out_csv = tmp_path / "out" / "table.csv"
    assert main(["align", "--human", str(human), "--scores", str(scores), "--out", str(out_csv)]) in (0, 1)
    assert out_csv.is_file() and not [p for p in out_csv.parent.iterdir() if p.name.endswith(".part")]
