"""The candidate-store sensor on a real instance: new model, no change, one changed video."""

import json
import os

import dagster as dg
import numpy as np
import pytest

from argus_dagster.candidate_store import LocalCandidateStore, scan
from argus_dagster.media import write_video
from assets import TASK_ASSETS
from assets.partitions import keys_of_run
from assets.sensors import CANDIDATE_KEYS, TASK_KEYS, candidate_run_requests, candidate_store_sensor

from .helpers import graph_resources

pytestmark = pytest.mark.integration


def _clip(seed: int) -> np.ndarray:
    base = np.random.default_rng(seed).integers(0, 255, (48, 128, 3), dtype=np.uint8)
    return np.stack([np.roll(base, 2 * i, axis=1)[:, :64] for i in range(12)])


@pytest.fixture
def store(tmp_path):
    bench, cands, home = tmp_path / "bench", tmp_path / "cands", tmp_path / "home"
    for task in ("T2V", "TV2V"):
        (bench / task).mkdir(parents=True)
    (bench / "T2V" / "manifest.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "prompt": f"A pattern slides left, take {i}."}) + "\n" for i in range(2)))
    write_video(bench / "TV2V" / "src.mp4", _clip(7), 12)
    (bench / "TV2V" / "manifest.jsonl").write_text(
        json.dumps({"id": "e0", "prompt": "Make it darker.", "source_video": "src.mp4"}) + "\n")
    return bench, cands, home


def _tick(instance, resources, cursor=None):
    ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)
    result = candidate_store_sensor(ctx)
    for req in result.dynamic_partitions_requests or []:  # what the daemon does with the request
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    return result


def _partitions(result) -> list[tuple[str, str]]:
    out = []
    for r in result.run_requests or []:
        assert sorted(r.asset_selection) == sorted(CANDIDATE_KEYS)
        keys = [r.partition_key] if r.partition_key else sorted(keys_of_run(r.tags))
        out += [tuple(reversed(str(k).split("|"))) for k in keys]
    return sorted(out)


def test_a_models_neighbouring_tasks_are_one_run_of_a_range_and_others_runs_of_their_own():
    hashes = {("T2V", "a"): {"p0": "1"}, ("TI2V", "a"): {"q": "2"}, ("TS2V", "a"): {"r": "3"},
              ("TSV2V", "a"): {"s": "4"}, ("T2V", "b"): {"p0": "5"}}
    requests = candidate_run_requests(sorted(hashes), lambda t, m: hashes[(t, m)], "sensor", 1)
    ranged = [r for r in requests if r.partition_key_range]
    assert [(r.partition_key_range.start, r.partition_key_range.end) for r in ranged] == [("a|T2V", "a|TS2V")]
    assert keys_of_run(ranged[0].tags) == {"a|T2V", "a|TI2V", "a|TS2V"}
    assert sorted(str(r.partition_key) for r in requests if r.partition_key) == ["a|TSV2V", "b|T2V"]
    assert all(r.tags["argus/judge"] == "1" for r in requests) and len({r.run_key for r in requests}) == 3
    # A changed video in the range gives the range's run a key not used before.
    hashes[("TI2V", "a")] = {"q": "9"}
    again = candidate_run_requests(sorted(hashes), lambda t, m: hashes[(t, m)], "sensor", 1)
    assert {r.run_key for r in again} & {r.run_key for r in requests} == {r.run_key for r in requests if r.partition_key}
    # The nightly reconcile's: the same runs, without keys (it asks again while a partition stays stale).
    nightly = candidate_run_requests(sorted(hashes), None, "nightly_reconcile")
    assert [r.run_key for r in nightly] == [None] * 3 and nightly[0].partition_key_range == ranged[0].partition_key_range
    assert {r.tags["argus/launcher"] for r in nightly} == {"nightly_reconcile"}


def test_sensor_adds_models_and_requests_only_what_changed(store):
    bench, cands, home = store
    resources = graph_resources(bench, cands, home)
    with dg.instance_for_test() as instance:
        for task in ("T2V", "TV2V"):
            assert dg.materialize(TASK_ASSETS, partition_key=task, instance=instance, resources=resources).success
        for iid in ("p0", "p1"):
            write_video(cands / "T2V" / "alpha" / f"{iid}.mp4", _clip(int(iid[1])), 12)
        write_video(cands / "TV2V" / "alpha" / "e0.mp4", _clip(3), 12)

        # A new model folder: the partition is added, one run per task it has videos for.
        first = _tick(instance, resources)
        assert instance.get_dynamic_partitions("candidate_models") == ["alpha"]
        assert _partitions(first) == [("T2V", "alpha"), ("TV2V", "alpha")]
        assert len({r.run_key for r in first.run_requests}) == 2

        # Nothing changed: nothing requested, nothing re-hashed.
        second = _tick(instance, resources, first.cursor)
        assert not second.run_requests and "no change among 3" in second.skip_reason.skip_message
        entries = json.loads(second.cursor)["entries"]
        assert entries == json.loads(first.cursor)["entries"]

        # A touched but identical file is hashed again and requests nothing.
        p1 = cands / "T2V" / "alpha" / "p1.mp4"
        os.utime(p1, ns=(p1.stat().st_atime_ns, p1.stat().st_mtime_ns + 10**9))
        touched = _tick(instance, resources, second.cursor)
        assert not touched.run_requests

        # One changed video of a known model: only its partition; a second model in one task.
        write_video(p1, _clip(11), 12)
        write_video(cands / "T2V" / "beta" / "p0.mp4", _clip(5), 12)
        third = _tick(instance, resources, touched.cursor)
        assert _partitions(third) == [("T2V", "alpha"), ("T2V", "beta")]
        assert sorted(instance.get_dynamic_partitions("candidate_models")) == ["alpha", "beta"]
        fourth = _tick(instance, resources, third.cursor)
        assert not fourth.run_requests

        # The changed video changed back: re-scored again, under a run key not used before.
        write_video(p1, _clip(1), 12)
        fifth = _tick(instance, resources, fourth.cursor)
        assert _partitions(fifth) == [("T2V", "alpha")]
        used = {r.run_key for t in (first, third) for r in t.run_requests}
        assert fifth.run_requests[0].run_key not in used


def test_sensor_materializes_inputs_first_and_holds_the_task_back(store):
    bench, cands, home = store
    resources = graph_resources(bench, cands, home)
    write_video(cands / "T2V" / "alpha" / "p0.mp4", _clip(0), 12)
    with dg.instance_for_test() as instance:
        first = _tick(instance, resources)
        [req] = first.run_requests
        assert sorted(req.asset_selection) == sorted(TASK_KEYS) and req.partition_key == "T2V"
        assert json.loads(first.cursor)["entries"] == {}
        assert dg.materialize(TASK_ASSETS, partition_key="T2V", instance=instance, resources=resources).success
        second = _tick(instance, resources, first.cursor)
        assert _partitions(second) == [("T2V", "alpha")]


def test_a_partition_a_run_is_materializing_is_not_requested_twice(store):
    """A UI backfill's (or the reconcile's) run of a partition is about to start: the sensor leaves it to that
    run, and looks at it again on the next tick (the entries stay out of its cursor)."""
    bench, cands, home = store
    resources = graph_resources(bench, cands, home)

    @dg.op
    def step():
        pass

    @dg.job
    def placeholder():
        step()

    with dg.instance_for_test() as instance:
        assert dg.materialize(TASK_ASSETS, partition_key="T2V", instance=instance, resources=resources).success
        for model in ("alpha", "beta"):
            write_video(cands / "T2V" / model / "p0.mp4", _clip(len(model)), 12)
        queued = instance.create_run_for_job(placeholder, status=dg.DagsterRunStatus.NOT_STARTED,
                                             tags={"dagster/partition": "alpha|T2V", "dagster/backfill": "b1"})
        first = _tick(instance, resources)
        assert _partitions(first) == [("T2V", "beta")]
        assert all("/alpha/" not in k for k in json.loads(first.cursor)["entries"])
        instance.report_run_failed(queued)  # it never ran: the next tick requests the partition
        second = _tick(instance, resources, first.cursor)
        assert _partitions(second) == [("T2V", "alpha")]


def test_scan_hashes_only_entries_whose_token_moved(tmp_path):
    for m in ("a", "b"):
        (tmp_path / "T2V" / m).mkdir(parents=True)
        (tmp_path / "T2V" / m / "x.mp4").write_bytes(m.encode() * 100)
    (tmp_path / "T2V" / "a" / "notes.txt").write_text("not a video")
    store = LocalCandidateStore(tmp_path)
    first = scan(store, None)
    assert first.n_hashed == 2 and first.changed == {("T2V", "a"), ("T2V", "b")}
    again = scan(store, first.known)
    assert again.n_hashed == 0 and not again.changed
    (tmp_path / "T2V" / "b" / "x.mp4").unlink()
    (tmp_path / "T2V" / "b" / "y.mp4").write_bytes(b"new")
    moved = scan(store, again.known)
    assert moved.changed == {("T2V", "b")} and moved.n_hashed == 1


def test_the_same_scan_works_on_an_s3_prefix():
    """The S3 store (moto's server on loopback) through the storage resource: ETag and size as the
    change token, sha256 of the bytes as the content hash, one changed object, one partition."""
    import hashlib
    import socket

    from moto.server import ThreadedMotoServer

    from argus_dagster.candidate_store import S3CandidateStore
    from resources.storage import StorageResource

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        storage = StorageResource(endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                                  aws_access_key_id="test", aws_secret_access_key="test").storage()
        client = storage.client
        client.create_bucket(Bucket="argus")
        for key, body in (("T2V/a/x.mp4", b"1"), ("T2V/a/y.mp4", b"2"), ("tv2v/b/x.mp4", b"3"), ("T2V/a/notes.txt", b"")):
            client.put_object(Bucket="argus", Key=f"cands/{key}", Body=body)
        store = S3CandidateStore("s3://argus/cands", storage)
        first = scan(store, None)
        assert first.models == {"a": {"T2V"}, "b": {"TV2V"}} and first.n_entries == 3
        assert first.known["T2V/a/x.mp4"][1] == hashlib.sha256(b"1").hexdigest()
        assert not scan(store, first.known).changed
        client.put_object(Bucket="argus", Key="cands/tv2v/b/x.mp4", Body=b"changed")
        moved = scan(store, first.known)
        assert moved.changed == {("TV2V", "b")} and moved.n_hashed == 1
        assert moved.known["tv2v/b/x.mp4"][1] == hashlib.sha256(b"changed").hexdigest()
    finally:
        server.stop()
