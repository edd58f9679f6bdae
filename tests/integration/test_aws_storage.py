"""The aws environment end to end on a real S3 endpoint (moto's server on loopback): the bench and the
candidate store are in a bucket, and the tables, the content cache, the frozen rubrics and the
reports are written to S3 through the storage resource. The scores are those of the local run of the
same bench, a presigned link from the metadata opens the report over HTTP, and the evaluated
partition is up to date for the sensor and the staleness rule (sha256, not the ETag)."""

import urllib.request
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from argus_dagster.assets import ALL_ASSETS, costs, site
from argus_dagster.assets.leaderboard import leaderboard
from argus_dagster.infra import storage as storage_lib
from argus_dagster.method.candidate_store import open_store, scan
from argus_dagster.outputs.overview import stored_table
from argus_dagster.records.lineage import latest_record

from .helpers import Daemon, materialize_task

pytestmark = pytest.mark.integration

BUCKET, INPUTS = "argus", "argus-inputs"
COMPARED = ["input_id", "sample", "base_score", "final_score", "n_scored", "n_criteria", "error"]


def _upload(client, folder: Path, bucket: str, prefix: str) -> None:
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{p.relative_to(folder).as_posix()}", Body=p.read_bytes())


def _run(resources: dict, instance: dg.DagsterInstance) -> None:
    materialize_task("T2V", ["m"], resources, instance)
    assert dg.materialize(ALL_ASSETS, selection=[leaderboard, costs, site], instance=instance, resources=resources).success


def _scores(storage_dir, store=None) -> pl.DataFrame:
    return stored_table(storage_dir, "video_scores", store).select(COMPARED).sort("input_id", "sample")


def test_aws_environment_matches_the_local_run_and_links_its_reports(tmp_path, moto_endpoint, local_t2v_run,
                                                                      monkeypatch):
    # The bench, its videos and their local run (conftest.local_t2v_run, shared with test_aws_daemon).
    bench, cands, local_storage = local_t2v_run["bench"], local_t2v_run["cands"], local_t2v_run["storage"]
    local_scores = _scores(local_storage)
    assert local_scores.height == 2 and local_scores["final_score"].null_count() == 0

    # The same bench and videos in a bucket; everything the run writes under s3://argus/eval/.
    for k, v in {"ARGUS_ENV": "aws", "ARGUS_HOME": str(tmp_path / "home"), "ARGUS_S3_ENDPOINT_URL": moto_endpoint,
                 "ARGUS_BENCH_DIR": f"s3://{INPUTS}/bench", "ARGUS_CANDIDATES_DIR": f"s3://{INPUTS}/cands",
                 "ARGUS_BENCH": "b", "ARGUS_S3_BUCKET": BUCKET, "ARGUS_S3_PREFIX": "eval",
                 "ARGUS_S3_PRESIGN_EXPIRY_S": "600"}.items():
        monkeypatch.setenv(k, v)
    from argus_dagster.resources import resources_for

    resources = resources_for()
    storage = resources["storage"].storage()
    client = storage.client
    for b in (BUCKET, INPUTS):
        client.create_bucket(Bucket=b)
    _upload(client, bench, INPUTS, "bench")
    _upload(client, cands, INPUTS, "cands")
    evaluation = f"s3://{BUCKET}/eval/benches/b/default"
    assert resources["bench"].storage_dir == f"{evaluation}/storage"
    assert resources["bench"].reports_dir == f"{evaluation}/reports"
    assert resources["tools"].cache_dir == f"s3://{BUCKET}/eval/cache"

    with dg.instance_for_test() as instance:
        daemon = Daemon(instance, resources)
        daemon.tick()  # the sources observed first, as the daemon's sensor does
        _run(resources, instance)

        # The same scores, read back from the tables on S3.
        aws_scores = _scores(f"{evaluation}/storage", storage)
        assert aws_scores.equals(local_scores), (aws_scores, local_scores)
        board = stored_table(f"{evaluation}/storage", "leaderboard", storage)
        assert board["mean_final"].to_list() == pytest.approx(stored_table(local_storage,
                                                                           "leaderboard")["mean_final"].to_list())
        videos = stored_table(f"{evaluation}/storage", "candidate_videos", storage)
        assert all(u.startswith(f"s3://{INPUTS}/cands/T2V/m/") for u in videos["uri"].to_list())

        # Rubrics, cache entries, pages and the overview are objects in the bucket; nothing under ARGUS_HOME.
        keys = {o.rel for o in storage.list(f"s3://{BUCKET}/eval")}
        assert {"benches/b/default/reports/T2V/m/p0.html", "benches/b/default/reports/T2V/m/index.html",
                "benches/b/default/reports/T2V/compare/p0.html", "benches/b/default/reports/index.html"} <= keys
        assert any(k.startswith("benches/b/rubrics/") and k.endswith("/T2V/p0.json") for k in keys)
        assert any(k.startswith("cache/evidence/") for k in keys) and any(k.startswith("cache/judgments/") for k in keys)
        assert not (tmp_path / "home" / "benches").exists()

        # A presigned link from the materialization's metadata opens the page over HTTP.
        key = str(dg.MultiPartitionKey({"task": "T2V", "model": "m"}))
        meta = latest_record(instance, "diagnostic_reports", key).asset_materialization.metadata
        url = meta["index_url"].value
        assert url.startswith(f"{moto_endpoint}/{BUCKET}/eval/benches/b/default/reports/T2V/m/index.html?")
        assert "Signature" in url and "Expires" in url
        with urllib.request.urlopen(url, timeout=10) as resp:
            page = resp.read().decode("utf-8")
        assert resp.status == 200 and "p0" in page and "<html" in page.lower()
        # The report plays its video by a presigned link to a WebM copy beside the pages (the clip is mp4v).
        import re

        report = storage.read_text(f"{evaluation}/reports/T2V/m/p0.html")
        [src] = re.findall(r'<video [^>]*src="([^"]+)"', report)
        assert src.startswith(f"{moto_endpoint}/{BUCKET}/eval/benches/b/default/reports/T2V/_media/")
        with urllib.request.urlopen(src.replace("&amp;", "&"), timeout=10) as resp:
            assert resp.status == 200 and resp.read()[:4] == b"\x1aE\xdf\xa3"  # a WebM (Matroska) file
        overview = latest_record(instance, "site").asset_materialization.metadata["overview_url"].value
        with urllib.request.urlopen(overview, timeout=10) as resp:
            assert 'data-task="T2V"' in resp.read().decode("utf-8")
        from argus_dagster.client.overview_link import stored_overview
        from argus_dagster.infra.settings import load_settings

        with urllib.request.urlopen(stored_overview(load_settings()), timeout=10) as resp:  # what argus open prints
            assert 'data-task="T2V"' in resp.read().decode("utf-8")

        # Up to date on the next look: the daemon's sensors observe the sources (the videos' sha256 from
        # the ETag index) and request nothing.
        found = scan(open_store(f"s3://{INPUTS}/cands", storage), None)
        assert daemon.tick() == {}
        # Another process (nothing in memory, an empty media cache) reads the sha256 from the index
        # in the content cache: nothing is downloaded again.
        fresh = storage_lib.Storage(lambda: client, cache_dir=tmp_path / "fresh", hash_index=f"s3://{BUCKET}/eval/cache")
        assert scan(open_store(f"s3://{INPUTS}/cands", fresh), None).known == found.known
        assert not (tmp_path / "fresh").exists()
        assert daemon.tick() == {} and "no change among 2" in daemon.last.skip_reason.skip_message

        # argus evaluate asks the same question: nothing to run.
        from argus_dagster.client.evaluate import run_all

        said: list[str] = []
        assert run_all(tasks=["T2V"], instance=instance, progress=said.append) is not None
        assert any("T2V: inputs and rubrics up to date" in line for line in said), said
        assert any("T2V x m: up to date" in line for line in said) and any("every partition up to date" in line
                                                                            for line in said), said

        # A changed video on S3 is observed, and only its partition is requested.
        client.put_object(Bucket=INPUTS, Key="cands/T2V/m/p1.mp4", Body=(cands / "T2V" / "m" / "p0.mp4").read_bytes())
        moved = scan(open_store(f"s3://{INPUTS}/cands", storage), found.known)
        assert moved.changed == {("T2V", "m")} and moved.n_hashed == 1
        asked = daemon.tick()
        assert asked["candidate_videos"] == ["m|T2V"] and "input_instances" not in asked, asked


def test_objects_are_fetched_again_only_when_their_etag_moves(tmp_path, moto_endpoint):
    import hashlib

    from argus_dagster.resources.storage import StorageResource

    s = StorageResource(endpoint_url=moto_endpoint, media_cache_dir=str(tmp_path / "media"),
                        presign_expiry_s=60).storage()
    s.client.create_bucket(Bucket="bkt")
    uri = "s3://bkt/cands/T2V/m/x.mp4"
    s.write_bytes(uri, b"one")
    first = Path(s.fetch(uri))
    assert tmp_path / "media" in first.parents and first.read_bytes() == b"one"
    assert s.sha256(uri) == hashlib.sha256(b"one").hexdigest()
    mtime = first.stat().st_mtime_ns
    assert s.fetch(uri) == str(first) and first.stat().st_mtime_ns == mtime  # unchanged: not downloaded
    s.write_bytes(uri, b"two")
    assert Path(s.fetch(uri)).read_bytes() == b"two" and s.sha256(uri) == hashlib.sha256(b"two").hexdigest()
    with pytest.raises(FileNotFoundError):
        s.fetch("s3://bkt/cands/T2V/m/none.mp4")
    with urllib.request.urlopen(s.link(uri), timeout=10) as resp:
        assert resp.read() == b"two"

    # A copy of a prefix follows the bucket: changed objects again, removed ones gone.
    s.write_bytes("s3://bkt/bench/T2V/manifest.jsonl", "{}\n")
    s.write_bytes("s3://bkt/bench/T2V/a.png", b"a")
    copy = s.local_copy("s3://bkt/bench")
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()) == [
        "T2V/a.png", "T2V/manifest.jsonl"]
    s.client.delete_object(Bucket="bkt", Key="bench/T2V/a.png")
    s.write_bytes("s3://bkt/bench/T2V/manifest.jsonl", "{}\n{}\n")
    assert s.local_copy("s3://bkt/bench") == copy and not (copy / "T2V" / "a.png").exists()
    assert (copy / "T2V" / "manifest.jsonl").read_text() == "{}\n{}\n"


def test_on_s3_a_machine_with_an_empty_home_finds_the_profiles_and_ratings(tmp_path, moto_endpoint, monkeypatch):
    """With tables on S3, the profiles of a bench (for backbone robustness) and its people's ratings are
    what the bucket holds, not what one machine's ARGUS_HOME recorded: this process's home is empty."""
    import io

    import polars as pl

    from argus_dagster.infra.names import folder_name
    from argus_dagster.resources.bench import BenchResource
    from argus_dagster.resources.storage import StorageResource

    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "empty_home"))
    s = StorageResource(endpoint_url=moto_endpoint, media_cache_dir=str(tmp_path / "media")).storage()
    s.client.create_bucket(Bucket="bkt")
    home = "s3://bkt/argus/benches/b"

    def parquet(df: pl.DataFrame) -> bytes:
        buf = io.BytesIO()
        df.write_parquet(buf)
        return buf.getvalue()

    odd = "judge=Qwen/Qwen2.5-VL-72B"  # a name its folder cannot hold as it is
    assert "~" in folder_name(odd)
    scores = parquet(pl.DataFrame({"task": ["T2V"], "model": ["m"], "final_score": [5.0]}))
    for profile in ("default", "vlm-only", odd):
        s.write_bytes(f"{home}/{folder_name(profile)}/storage/video_scores/m|T2V.parquet", scores)
    s.write_bytes(f"{home}/{folder_name(odd)}/storage/leaderboard.parquet",
                  parquet(pl.DataFrame({"bench": ["b"], "profile": [odd], "task": ["T2V"]})))
    # Folders that are not scored evaluations: reports only, and an evaluation with nothing stored yet.
    s.write_bytes(f"{home}/reports-only/reports/index.html", "<html></html>")
    s.write_bytes(f"{home}/pending/storage/input_instances/T2V.parquet", scores)
    s.write_bytes(f"{home}/human/T2V.csv", "input_id,model,score\np0,m,4\np1,m,bad\n")

    bench = BenchResource(bench="b", profile="default", storage_dir=f"{home}/default/storage",
                          human_dir=f"{home}/human")
    assert sorted(bench.profiles(s)) == sorted(["default", "vlm-only", odd])
    assert bench.profile_storage(odd) == f"{home}/{folder_name(odd)}/storage"
    files = bench.human_files(s)
    assert list(files) == ["T2V"] and tmp_path / "media" in files["T2V"].parents
    assert files["T2V"].read_text() == "input_id,model,score\np0,m,4\np1,m,bad\n"
    # Its problems name the object, not the machine's copy of it.
    from argus_dagster.protocols.alignment.ratings import read_human

    problems = read_human(files["T2V"], source=f"{home}/human/T2V.csv").problems
    assert problems and all(f"{home}/human/T2V.csv" in p and str(tmp_path) not in p for p in problems), problems
    assert not (tmp_path / "empty_home").exists() or not any((tmp_path / "empty_home").rglob("*.json"))
