"""The candidate-store sensor on a real instance (new model, no change, one changed video), and what
Dagster's automation conditions request after its observations."""

import json
import os
import time

import dagster as dg
import pytest

from argus_dagster.assets import ALL_ASSETS, AUTOMATED_ASSETS, CANDIDATE_ASSETS, SOURCES, TASK_ASSETS
from argus_dagster.assets.sensors import candidate_store_sensor
from argus_dagster.infra.media import SETTLE_NS, write_video
from argus_dagster.method.candidate_store import LocalCandidateStore, scan

from .helpers import graph_resources, small_clip

pytestmark = pytest.mark.integration
AUTOMATED_KEYS = [a.key for a in AUTOMATED_ASSETS]



@pytest.fixture
def store(tmp_path):
    bench, cands, home = tmp_path / "bench", tmp_path / "cands", tmp_path / "home"
    for task in ("T2V", "TV2V"):
        (bench / task).mkdir(parents=True)
    (bench / "T2V" / "manifest.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "prompt": f"A pattern slides left, take {i}."}) + "\n" for i in range(2)))
    write_video(bench / "TV2V" / "src.mp4", small_clip(7), 12)
    (bench / "TV2V" / "manifest.jsonl").write_text(
        json.dumps({"id": "e0", "prompt": "Make it darker.", "source_video": "src.mp4"}) + "\n")
    return bench, cands, home


def _tick(instance, resources, cursor=None):
    """One tick, and what the daemon does with its result: new partitions added, observations recorded."""
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources) as ctx:  # nested resources
        result = candidate_store_sensor(ctx)
    for req in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    for event in result.asset_events or []:
        instance.report_runless_asset_event(event)
    return result


def _observed(result) -> list[tuple[str, str | None]]:
    return sorted((e.asset_key.to_user_string(), e.partition) for e in result.asset_events or [])


class Automation:
    """The automation sensor's question between ticks: which partitions of the candidate assets (and
    of the task assets) its conditions request, with its cursor kept from one tick to the next."""

    def __init__(self, resources):
        self.defs = dg.Definitions(assets=ALL_ASSETS + SOURCES, resources=resources)
        self.cursor = None

    def requested(self, instance) -> dict[str, list[str]]:
        result = dg.evaluate_automation_conditions(defs=self.defs, instance=instance, cursor=self.cursor,
                                                   asset_selection=dg.AssetSelection.assets(*AUTOMATED_KEYS))
        self.cursor = result.cursor
        out = {}
        for key in AUTOMATED_KEYS:
            got = sorted(str(p) for p in result.get_requested_partitions(key))
            if got:
                out[key.to_user_string()] = got
        return out


def _candidates(requested: dict[str, list[str]]) -> list[str]:
    """The partitions the candidate assets are requested for (each asset of a partition alike)."""
    per_asset = {a.key.to_user_string(): requested.get(a.key.to_user_string(), []) for a in CANDIDATE_ASSETS}
    assert len({tuple(v) for v in per_asset.values()}) == 1, per_asset
    return next(iter(per_asset.values()))


def _score(instance, resources, keys: list[str]) -> None:
    """What the automation sensor's runs do with a request: the candidate assets of each partition."""
    for key in keys:
        assert dg.materialize(ALL_ASSETS + SOURCES, selection=CANDIDATE_ASSETS, partition_key=key,
                              instance=instance, resources=resources).success


def _settle() -> None:
    """Wait until the files just written have settled: a file changed within its file system's clock
    tick is hashed again at every look (``media.settled``), however its stamp reads."""
    time.sleep(SETTLE_NS / 1e9 + 0.05)


def test_sensor_adds_models_and_observes_only_what_changed(store):
    bench, cands, home = store
    resources = graph_resources(bench, cands, home)
    automation = Automation(resources)
    with dg.instance_for_test() as instance:
        for task in ("T2V", "TV2V"):
            assert dg.materialize(TASK_ASSETS + SOURCES, selection=TASK_ASSETS, partition_key=task,
                                  instance=instance, resources=resources).success
        for iid in ("p0", "p1"):
            write_video(cands / "T2V" / "alpha" / f"{iid}.mp4", small_clip(int(iid[1])), 12)
        write_video(cands / "TV2V" / "alpha" / "e0.mp4", small_clip(3), 12)

        # A new model folder: the partition is added and its videos observed, per task it has videos for;
        # the automation conditions then request exactly those partitions.
        first = _tick(instance, resources)
        assert instance.get_dynamic_partitions("candidate_models") == ["alpha"]
        assert ("candidate_files", "alpha|T2V") in _observed(first) and ("candidate_files", "alpha|TV2V") in _observed(first)
        assert {a for a, _ in _observed(first)} == {"bench_files", "rubric_files", "candidate_files", "judge_config",
                                                    "tool_suite_config", "rubric_generator_config", "aggregation_config"}
        # The tasks' inputs were materialized before their sources were observed: Dagster calls them stale
        # (a new dependency), and they run again once, with their sources.
        asked = automation.requested(instance)
        assert asked["input_instances"] == asked["rubrics"] == ["T2V", "TV2V"], asked
        for task in ("T2V", "TV2V"):
            assert dg.materialize(TASK_ASSETS + SOURCES, selection=TASK_ASSETS, partition_key=task,
                                  instance=instance, resources=resources).success
        asked = automation.requested(instance)
        assert _candidates(asked) == ["alpha|T2V", "alpha|TV2V"] and "input_instances" not in asked, asked
        _score(instance, resources, _candidates(asked))

        # Nothing changed: nothing observed, nothing requested. The videos were just written at the first
        # look, and the reports linked them since (a link moves a file's change time): they are read once
        # more; the look after that reads nothing again.
        _settle()
        second = _tick(instance, resources, first.cursor)
        assert not second.asset_events and "no change among 3" in second.skip_reason.skip_message
        assert {k: v[1] for k, v in json.loads(second.cursor)["entries"].items()} == \
            {k: v[1] for k, v in json.loads(first.cursor)["entries"].items()}
        again = _tick(instance, resources, second.cursor)
        assert not again.asset_events and json.loads(again.cursor)["entries"] == json.loads(second.cursor)["entries"]
        assert _candidates(automation.requested(instance)) == []

        # A touched but identical file is hashed again and observes nothing.
        p1 = cands / "T2V" / "alpha" / "p1.mp4"
        os.utime(p1, ns=(p1.stat().st_atime_ns, p1.stat().st_mtime_ns + 10**9))
        touched = _tick(instance, resources, second.cursor)
        assert not touched.asset_events

        # One changed video of a known model, and a second model in one task: only their partitions.
        write_video(p1, small_clip(11), 12)
        write_video(cands / "T2V" / "beta" / "p0.mp4", small_clip(5), 12)
        third = _tick(instance, resources, touched.cursor)
        assert _observed(third) == [("candidate_files", "alpha|T2V"), ("candidate_files", "beta|T2V")]
        assert sorted(instance.get_dynamic_partitions("candidate_models")) == ["alpha", "beta"]
        asked = _candidates(automation.requested(instance))
        assert asked == ["alpha|T2V", "beta|T2V"]
        _score(instance, resources, asked)
        assert _candidates(automation.requested(instance)) == []
        fourth = _tick(instance, resources, third.cursor)
        assert not fourth.asset_events

        # The changed video changed back: observed again (another data version than the last).
        write_video(p1, small_clip(1), 12)
        fifth = _tick(instance, resources, fourth.cursor)
        assert _observed(fifth) == [("candidate_files", "alpha|T2V")]


def test_a_new_tasks_inputs_run_first_and_its_partitions_after(store):
    bench, cands, home = store
    resources = graph_resources(bench, cands, home)
    automation = Automation(resources)
    write_video(cands / "T2V" / "alpha" / "p0.mp4", small_clip(0), 12)
    with dg.instance_for_test() as instance:
        _tick(instance, resources)
        first = automation.requested(instance)
        assert first["input_instances"] == first["rubrics"] == ["T2V"] and _candidates(first) == []
        assert dg.materialize(TASK_ASSETS + SOURCES, selection=TASK_ASSETS, partition_key="T2V", instance=instance,
                              resources=resources).success
        assert _candidates(automation.requested(instance)) == ["alpha|T2V"]


def test_runs_take_ranges_of_a_tasks_neighbouring_models():
    """argus evaluate's runs: per task, a range over models next to each other in the partitions'
    order; a partition that needs fewer assets runs apart."""
    from argus_dagster.client.runs import Plan, runs_of

    every = {a.key.to_user_string(): {"a|T2V", "b|T2V", "d|T2V", "a|TI2V"} for a in CANDIDATE_ASSETS}
    every["criterion_scores"] |= {"c|T2V"}
    every["video_scores"] |= {"c|T2V"}
    every["diagnostic_reports"] |= {"c|T2V"}
    runs = runs_of(Plan({**every, "input_instances": {"T2V"}, "rubrics": {"T2V"}, "leaderboard": {None}}),
                   ["a", "b", "c", "d"])
    assert [(run.kind, run.keys) for run in runs] == [
        ("task", ["T2V"]), ("partition", ["a|T2V", "b|T2V"]), ("partition", ["d|T2V"]),
        ("partition", ["c|T2V"]), ("partition", ["a|TI2V"]), ("leaderboard", [])]
    assert runs[3].selection == ["criterion_scores", "video_scores", "diagnostic_reports"]


def test_scan_hashes_only_entries_whose_token_moved(tmp_path):
    for m in ("a", "b"):
        (tmp_path / "T2V" / m).mkdir(parents=True)
        (tmp_path / "T2V" / m / "x.mp4").write_bytes(m.encode() * 100)
    (tmp_path / "T2V" / "a" / "notes.txt").write_text("not a video")
    store = LocalCandidateStore(tmp_path)
    _settle()
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

    from argus_dagster.method.candidate_store import S3CandidateStore
    from argus_dagster.resources.storage import StorageResource

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
