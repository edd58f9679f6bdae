"""End to end through the real ``dagster-webserver`` on loopback: the project's workspace.yaml, its
GraphQL API for the asset graph and partitions, a partition materialization launched through it,
and the materialization's metadata read back."""

import json
import os
import shutil
import time

import pytest

from argus_dagster.client.demo import BEST_MODEL

from .helpers import REPO, start_webserver, stop
from .helpers import GraphQL as Client

pytestmark = pytest.mark.integration
MODEL = BEST_MODEL
MULTI_KEY = f"{MODEL}|T2V"  # dimensions in name order: model, task


@pytest.fixture(scope="module")
def server(tmp_path_factory, demo_bench_in):
    root = tmp_path_factory.mktemp("web")
    home, dagster_home = root / "argus", root / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text(
        "run_coordinator:\n  module: dagster._core.run_coordinator\n  class: DefaultRunCoordinator\n"
        "telemetry:\n  enabled: false\n")
    bench, cands = demo_bench_in(home)
    for d in [*bench.iterdir(), *cands.iterdir(), *(cands / "T2V").iterdir()]:  # one task, one model
        if d.is_dir() and d.name not in ("T2V", MODEL):
            shutil.rmtree(d)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "DAGSTER_HOME": str(dagster_home),
           "ARGUS_HOME": str(home)}
    proc, client = start_webserver(root, env)
    try:
        yield client, home
    finally:
        stop(proc)





def _launch(client: Client, assets: list[str], tags: dict[str, str]) -> str:
    jobs = client("query($r: RepositorySelector!) { repositoryOrError(repositorySelector: $r) { ... on Repository "
                  "{ jobs { name } } } }", r=REPO)["repositoryOrError"]["jobs"]
    job = next(j["name"] for j in jobs if j["name"].startswith("__ASSET_JOB"))
    params = {"selector": {**REPO, "jobName": job, "assetSelection": [{"path": [a]} for a in assets]},
              "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]}}
    res = client("mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename "
                 "... on LaunchRunSuccess { run { runId } } ... on PythonError { message } "
                 "... on InvalidSubsetError { message } ... on RunConfigValidationInvalid { errors { message } } } }",
                 p=params)["launchRun"]
    assert res["__typename"] == "LaunchRunSuccess", res
    return res["run"]["runId"]


def _wait(client: Client, run_id: str, timeout: float = 150) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = client("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", id=run_id)
        status = status["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            assert status == "SUCCESS", status
            return
        time.sleep(1)
    raise AssertionError(f"run {run_id} did not finish in {timeout}s")


def _metadata(client: Client, asset: str, partition: str) -> dict:
    data = client(
        "query($k: AssetKeyInput!, $p: [String!]) { assetOrError(assetKey: $k) { ... on Asset { "
        "assetMaterializations(partitions: $p, limit: 1) { partition metadataEntries { label "
        "... on IntMetadataEntry { intValue } ... on FloatMetadataEntry { floatValue } "
        "... on MarkdownMetadataEntry { mdStr } ... on PathMetadataEntry { path } "
        "... on TextMetadataEntry { text } ... on TableMetadataEntry { table { records } } } } } } }",
        k={"path": [asset]}, p=[partition])
    [mat] = data["assetOrError"]["assetMaterializations"]
    assert mat["partition"] == partition
    return {e["label"]: next((v for k, v in e.items() if k != "label"), None) for e in mat["metadataEntries"]}


def test_graph_partitions_launch_and_metadata_through_graphql(server):
    client, home = server
    nodes = client("{ assetNodes { assetKey { path } dependencyKeys { path } "
                   "partitionDefinition { dimensionTypes { name } } } }")["assetNodes"]
    graph = {"/".join(n["assetKey"]["path"]): sorted("/".join(d["path"]) for d in n["dependencyKeys"]) for n in nodes}
    assert graph["video_scores"] == ["aggregation_config", "candidate_videos", "criterion_scores"]
    assert graph["candidate_videos"] == ["candidate_files", "input_instances"]  # the videos, an observed source
    assert "video_scores" in graph["diagnostic_reports"] and graph["leaderboard"] == ["criterion_scores", "judge_noise", "video_scores"]
    dims = {"/".join(n["assetKey"]["path"]): [d["name"] for d in (n["partitionDefinition"] or {}).get("dimensionTypes", [])]
            for n in nodes}
    assert dims["video_scores"] == ["model", "task"]

    # The model becomes a partition through the API, as a person would add it in the UI.
    added = client("mutation($r: RepositorySelector!, $n: String!, $k: String!) { addDynamicPartition("
                   "repositorySelector: $r, partitionsDefName: $n, partitionKey: $k) { __typename } }",
                   r=REPO, n="candidate_models", k=MODEL)["addDynamicPartition"]
    assert added["__typename"] == "AddDynamicPartitionSuccess", added
    keys = client("query($k: AssetKeyInput!) { assetNodeOrError(assetKey: $k) { ... on AssetNode { "
                  "partitionKeysByDimension { name partitionKeys } } } }", k={"path": ["video_scores"]})
    by_dim = {d["name"]: d["partitionKeys"] for d in keys["assetNodeOrError"]["partitionKeysByDimension"]}
    assert by_dim["model"] == [MODEL] and "T2V" in by_dim["task"]

    _wait(client, _launch(client, ["input_instances", "rubrics"], {"dagster/partition": "T2V"}))
    candidate_assets = ["candidate_videos", "criterion_evidence", "criterion_scores", "video_scores", "diagnostic_reports"]
    _wait(client, _launch(client, candidate_assets, {"dagster/partition": MULTI_KEY,
                                                     "dagster/partition/model": MODEL, "dagster/partition/task": "T2V"}))

    scores = _metadata(client, "video_scores", MULTI_KEY)
    assert scores["n_videos"] == 3 and scores["n_errors"] == 0 and 0 < scores["mean_final"] <= 10
    reports = _metadata(client, "diagnostic_reports", MULTI_KEY)
    assert reports["n_reports"] == 3 and reports["index"] == f"reports/T2V/{MODEL}/index.html"  # the evaluation's
    assert [p for p in home.glob(f"benches/*/*/{reports['index']}") if p.is_file()], reports["index"]
    crit = _metadata(client, "criterion_scores", MULTI_KEY)
    assert crit["score_delta_summary"] == "first materialization of this partition"

    # The model now returns a still for one input: the re-run's metadata says which criteria moved.
    from argus_dagster.infra.media import VideoReader, write_video

    video = home / "candidates" / "T2V" / MODEL / "bunny.mp4"
    reader = VideoReader(str(video))
    write_video(video, reader.get([0] * reader.info.n_frames), reader.info.fps)
    _wait(client, _launch(client, candidate_assets, {"dagster/partition": MULTI_KEY,
                                                     "dagster/partition/model": MODEL, "dagster/partition/task": "T2V"}))
    crit = _metadata(client, "criterion_scores", MULTI_KEY)
    moved = [json.loads(r) for r in crit["score_delta"]["records"]]
    assert moved and {r["input_id"] for r in moved} == {"bunny"} and crit["n_videos_moved"] == 1
    assert "`bunny`:" in crit["score_delta_summary"]
