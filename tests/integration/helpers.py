"""Materializing the graph against a bench folder with an explicit instance and storage folder."""

import re
from pathlib import Path

import dagster as dg
import polars as pl

from argus_dagster.assets import ALL_ASSETS, ALL_CHECKS, CANDIDATE_ASSETS, TASK_ASSETS
from argus_dagster.resources import (
    BenchResource,
    JudgeResource,
    RubricGeneratorResource,
    ScoringResource,
    StorageResource,
    ToolsResource,
    VlmResource,
)
from argus_dagster.resources.storage import StorageIOManager

# ``argus evaluate``'s progress lines, as a person reads them: a run it made (``[  12.3s] what (1.3s; why)``)
# and a run in flight it waits for (``  what is being materialized by run 1a2b3c4d; waiting``).
_RAN = re.compile(r"\[\s*[\d.]+s\] (?P<what>.+?) \((?P<s>[\d.]+)s(?: for \d+ partitions)?(?:; (?P<why>.+))?\)")
_WAITS = re.compile(r"  (?P<what>.+) (?:is|are) being materialized by run (?P<run>[0-9a-f]{8}); waiting")


def said_runs(lines: list[str]) -> dict[str, str | None]:
    """The runs a command said it made: ``{what it ran: why, or None}`` (``pages: overview, ...``)."""
    return {m["what"]: m["why"] for m in map(_RAN.fullmatch, lines) if m}


def said_waits(lines: list[str]) -> list[tuple[list[str], str]]:
    """The runs in flight a command said it waited for: ``(what they materialize, run id's first 8)``."""
    return [(m["what"].split(", "), m["run"]) for m in map(_WAITS.fullmatch, lines) if m]


def graph_settings(root: Path, bench: Path, candidates: Path):
    """The settings of an evaluation (bench ``test``, profile ``default``) under the ARGUS_HOME ``root``:
    :func:`graph_resources` at its ``evaluation_dir`` stores where the command line's readers, given
    these settings, find the tables (materializations record them relative to the evaluation)."""
    from argus_dagster.infra.settings import Settings

    return Settings(home=root, bench_dir=bench, candidates_dir=candidates, bench="test", profile="default")


def graph_resources(bench: Path, candidates: Path, home: Path, vlm: VlmResource | None = None,
                    rubric_vlm: VlmResource | None = None) -> dict:
    """The embedded default (no VLM) unless VLM resources are given."""
    storage = StorageResource(media_cache_dir=str(home / "media"), hash_index=str(home / "cache"), evaluation_dir=str(home))
    return {
        "vlm": vlm or VlmResource(),
        "rubric_vlm": rubric_vlm or vlm or VlmResource(),
        "bench": BenchResource(bench="test", profile="default", bench_dir=str(bench), candidates_dir=str(candidates),
                               frozen_rubrics_dir=str(home / "rubrics"), reports_dir=str(home / "reports"),
                               storage_dir=str(home / "storage"), human_dir=str(home / "human")),
        "tools": ToolsResource(cache_dir=str(home / "cache")),
        "rubric_generator": RubricGeneratorResource(),
        "judge": JudgeResource(),
        "scoring": ScoringResource(),
        "storage": storage,
        "io_manager": StorageIOManager(storage=storage, base_dir=str(home / "storage")),  # as the CLI's resources
    }


def materialize_task(task: str, models: list[str], resources: dict, instance: dg.DagsterInstance) -> None:
    instance.add_dynamic_partitions("candidate_models", models)
    assert dg.materialize(TASK_ASSETS, partition_key=task, instance=instance, resources=resources).success
    for model in models:
        key = dg.MultiPartitionKey({"task": task, "model": model})
        res = dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS, selection=CANDIDATE_ASSETS, partition_key=key,
                             instance=instance, resources=resources)
        assert res.success


def load(asset: str, resources: dict, instance: dg.DagsterInstance, partition_key=None) -> pl.DataFrame:
    defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, resources=resources)
    return defs.load_asset_value(asset, instance=instance, partition_key=partition_key)


def pattern_clip(seed: int, n: int = 24, height: int = 64, width: int = 96, step: int = 3):
    """A textured pattern sliding left ``step`` pixels a frame: real motion, decodable, no media in git.
    The clip every integration file writes (``small_clip``: the 12-frame 48x64 one)."""
    import numpy as np

    base = np.random.default_rng(seed).integers(0, 255, (height, 2 * width, 3), dtype=np.uint8)
    return np.stack([np.roll(base, step * i, axis=1)[:, :width] for i in range(n)])


def small_clip(seed: int, n: int = 12):
    """:func:`pattern_clip`, 12 frames of 48x64 sliding 2 pixels a frame."""
    return pattern_clip(seed, n, height=48, width=64, step=2)


def t2v_bench(root: Path, n_inputs: int = 3, model: str = "m", n_frames: int = 24) -> tuple[Path, Path]:
    """``root/bench`` (a T2V manifest of ``n_inputs`` prompts) and ``root/cands`` with ``model``'s videos."""
    import json

    from argus_dagster.infra.media import write_video

    bench, cands = root / "bench", root / "cands"
    (bench / "T2V").mkdir(parents=True)
    rows = [{"id": f"p{i}", "prompt": f"A textured pattern slides to the left, take {i}."} for i in range(n_inputs)]
    (bench / "T2V" / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for i in range(n_inputs):
        write_video(cands / "T2V" / model / f"p{i}.mp4", pattern_clip(i, n_frames), 12)
    return bench, cands


def videophy_bench(real_data: Path, root: Path, n_inputs: int, width: int, most: int) -> tuple[Path, Path, list]:
    """``root/bench`` (a T2V manifest of the first ``n_inputs`` of VideoPhy-2's example clips, their prompts
    from their file names, ids ``v0``, ``v1``...) and ``root/cands`` (empty), and each clip's frames (RGB,
    ``width`` pixels wide, at most ``most``) for the caller's models."""
    import json

    import cv2
    import numpy as np

    clips = sorted((real_data / "videophy" / "VIDEOPHY2" / "examples").glob("*.mp4"))[:n_inputs]
    assert len(clips) == n_inputs, clips
    bench, cands = root / "bench", root / "cands"
    (bench / "T2V").mkdir(parents=True)
    (bench / "T2V" / "manifest.jsonl").write_text("".join(
        json.dumps({"id": f"v{k}", "prompt": clip.stem.replace("_", " ")}) + "\n" for k, clip in enumerate(clips)))
    frames = []
    for clip in clips:
        cap, out = cv2.VideoCapture(str(clip)), []
        while len(out) < most:
            ok, frame = cap.read()
            if not ok:
                break
            h, w = frame.shape[:2]
            out.append(cv2.cvtColor(cv2.resize(frame, (width, round(h * width / w / 2) * 2)), cv2.COLOR_BGR2RGB))
        cap.release()
        frames.append(np.stack(out))
    return bench, cands, frames


def without_argus_settings(monkeypatch) -> None:
    """The shell's VLM, rubric, bench and profile settings unset: the evidence-only default."""
    import os

    for k in [k for k in os.environ if k.startswith(("ARGUS_VLM", "ARGUS_RUBRIC", "ARGUS_BENCH", "ARGUS_PROFILE"))]:
        monkeypatch.delenv(k)


def stop(proc) -> None:
    """Terminate a server or daemon started by a test, killing it if it does not stop."""
    import subprocess

    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


class GraphQL:
    """The GraphQL API of a ``dagster-webserver`` on loopback (what the UI itself calls)."""

    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}/graphql"

    def __call__(self, query: str, **variables) -> dict:
        import json
        import urllib.request

        req = urllib.request.Request(self.url, data=json.dumps({"query": query, "variables": variables}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            body = json.loads(resp.read())
        assert "errors" not in body, body["errors"]
        return body["data"]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_webserver(root: Path, env: dict, timeout: float = 90, cwd: Path | None = None):
    """``dagster-webserver`` on the project's workspace.yaml (in ``cwd``, default the project) on a
    loopback port, once its code location has loaded: ``(process, GraphQL client)``; its log is
    ``root/webserver.log``. Stop it with :func:`stop`."""
    import subprocess
    import sys
    import time
    import urllib.error

    port = free_port()
    log = open(root / "webserver.log", "w")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "dagster-webserver"), "-w", "workspace.yaml",
                             "-h", "127.0.0.1", "-p", str(port)], cwd=cwd or ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    client = GraphQL(port)
    deadline = time.time() + timeout
    while True:
        try:
            data = client("{ workspaceOrError { ... on Workspace { locationEntries { name "
                          "locationOrLoadError { __typename ... on PythonError { message } } } } } }")
            entry = data["workspaceOrError"]["locationEntries"][0]
            if entry["locationOrLoadError"] and entry["locationOrLoadError"]["__typename"] == "RepositoryLocation":
                return proc, client
            assert entry["locationOrLoadError"] is None or "message" not in entry["locationOrLoadError"], entry
        except (OSError, urllib.error.URLError):
            pass
        if proc.poll() is not None or time.time() > deadline:
            stop(proc)
            raise AssertionError(f"webserver did not come up: {(root / 'webserver.log').read_text()[-3000:]}")
        time.sleep(0.5)


ROOT = Path(__file__).resolve().parents[2]


# The evaluated demo's extras (conftest.evaluated_demo): a T2V model whose name is not a plain file name
# (the best model's videos again), and people's ratings of the demo's four T2V models.
DEMO_ODD_MODEL = "faithful 猫 #2"
DEMO_HUMAN_T2V = {"faithful": 5, "blurry": 3, "flicker": 2, "frozen": 1}

REPO = {"repositoryLocationName": "argus_dagster", "repositoryName": "__repository__"}

# A real daemon in a test ticks the sensors every few seconds, not every minute (the shipped 60 s and 30 s).
FAST_SENSORS = {"ARGUS_SENSOR_INTERVAL_S": "3", "ARGUS_AUTOMATION_INTERVAL_S": "3"}


def stop_sensors(graphql: GraphQL) -> None:
    """Sensors off, so the daemon executes a backfill alone (the candidate-store sensor would score the
    same partitions, the automation sensor the leaderboard)."""
    for name in ("candidate_store_sensor", "default_automation_condition_sensor"):
        sensor = graphql("query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { __typename "
                         "... on Sensor { id } } }", s={**REPO, "sensorName": name})["sensorOrError"]
        assert sensor["__typename"] == "Sensor", sensor
        res = graphql("mutation($id: String) { stopSensor(id: $id) { __typename } }", id=sensor["id"])["stopSensor"]
        assert res["__typename"] == "StopSensorMutationResult", res


def backfill_as_the_ui_does(root: Path, env: dict, partitions_by_asset: list[dict], timeout: float = 400) -> str:
    """A backfill launched through the webserver's GraphQL ``launchPartitionBackfill`` (what the UI
    sends) and executed by a real ``dagster-daemon``, both on the instance ``env["DAGSTER_HOME"]``
    names; waits until it is done and returns its id (logs: ``root/webserver.log``, ``root/daemon.log``).

    Done: every run the backfill launched succeeded, the last of them the leaderboard's (downstream of
    every other asset, so launched once all the rest is materialized), or the daemon already marked it
    completed. The daemon plans a backfill every 30 s (Dagster's fixed daemon interval, no setting of
    the instance changes it): the wait ends on the leaderboard run's success, not on the next planning
    that would only record it."""
    import subprocess
    import sys
    import time

    assert ["leaderboard"] in [p["assetKey"]["path"] for p in partitions_by_asset], partitions_by_asset
    web, graphql = start_webserver(root, env)
    daemon = None
    try:
        stop_sensors(graphql)
        launched = graphql("mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) { "
                           "__typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }",
                           p={"partitionsByAssets": partitions_by_asset})["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        backfill = launched["backfillId"]
        log = open(root / "daemon.log", "w")
        daemon = subprocess.Popen([str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", "workspace.yaml"],
                                  cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline, status, runs = time.time() + timeout, None, []
        while time.time() < deadline:
            status = graphql("query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill "
                             "{ status } } }", id=backfill)["partitionBackfillOrError"]["status"]
            runs = graphql("query($f: RunsFilter) { runsOrError(filter: $f) { ... on Runs { results { runId status "
                           "assetSelection { path } } } } }",
                           f={"tags": [{"key": "dagster/backfill", "value": backfill}]})["runsOrError"]["results"]
            failed = [r for r in runs if r["status"] in ("FAILURE", "CANCELED", "CANCELING")]
            assert not failed, (failed, (root / "daemon.log").read_text()[-3000:])
            if status not in ("REQUESTED", "CANCELING"):
                break
            if runs and all(r["status"] == "SUCCESS" for r in runs) and any(
                    ["leaderboard"] in [a["path"] for a in r["assetSelection"] or []] for r in runs):
                status = "RUNS_SUCCEEDED"
                break
            assert daemon.poll() is None, (root / "daemon.log").read_text()[-3000:]
            time.sleep(1)
        assert status in ("COMPLETED_SUCCESS", "RUNS_SUCCEEDED"), (status, runs, (root / "daemon.log").read_text()[-3000:])
        return backfill
    finally:
        if daemon is not None:
            stop(daemon)
        stop(web)


def partitions_by_asset(task: str, keys: list[str], assets: dict[str, list[str]]) -> list[dict]:
    """``launchPartitionBackfill``'s selection: the task's inputs and rubrics, the candidate assets over
    the task x model keys ``keys`` (a range from the first to the last), the leaderboard and the cost
    ledger (what "Materialize all" selects of the unpartitioned assets the pages follow)."""
    return ([{"assetKey": {"path": [a]}, "partitions": {"range": {"start": task, "end": task}}} for a in assets["task"]]
            + [{"assetKey": {"path": [a]}, "partitions": {"range": {"start": keys[0], "end": keys[-1]}}}
               for a in assets["candidate"]]
            + [{"assetKey": {"path": ["leaderboard"]}}, {"assetKey": {"path": ["costs"]}}])


def evaluation_in(monkeypatch, home: Path, bench: Path, cands: Path):
    """The settings of ``bench`` evaluated in the ARGUS_HOME ``home`` (set in the environment, as a
    user's shell would)."""
    from argus_dagster.infra.settings import load_settings

    for k, v in {"ARGUS_HOME": str(home), "ARGUS_BENCH_DIR": str(bench), "ARGUS_CANDIDATES_DIR": str(cands)}.items():
        monkeypatch.setenv(k, v)
    return load_settings()


class Daemon:
    """What the daemon does between two looks at an instance: a tick of the candidate-store sensor (its
    new partitions and observations recorded), then the automation sensor's question, each with the
    cursor it kept from its last tick. :meth:`tick` returns the requests, ``{asset: [partitions]}``."""

    def __init__(self, instance: dg.DagsterInstance, resources: dict):
        from argus_dagster.assets import SOURCES

        self.instance, self.resources = instance, resources
        self.defs = dg.Definitions(assets=ALL_ASSETS + SOURCES, resources=resources)
        self.sensor_cursor = self.automation_cursor = None
        self.last = None  # the sensor's last result

    def tick(self) -> dict[str, list[str]]:
        from argus_dagster.assets import AUTOMATED_ASSETS
        from argus_dagster.assets.sensors import candidate_store_sensor

        with dg.build_sensor_context(instance=self.instance, resources=self.resources,
                                     cursor=self.sensor_cursor) as ctx:
            result = candidate_store_sensor(ctx)
        self.last, self.sensor_cursor = result, result.cursor
        for req in result.dynamic_partitions_requests or []:
            self.instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        for event in result.asset_events or []:
            self.instance.report_runless_asset_event(event)
        asked = dg.evaluate_automation_conditions(
            defs=self.defs, instance=self.instance, cursor=self.automation_cursor,
            asset_selection=dg.AssetSelection.assets(*[a.key for a in AUTOMATED_ASSETS]))
        self.automation_cursor = asked.cursor
        return {a.key.to_user_string(): sorted(str(p) for p in asked.get_requested_partitions(a.key))
                for a in AUTOMATED_ASSETS if asked.get_requested_partitions(a.key)}


def sensor_then_automation(instance: dg.DagsterInstance, resources: dict) -> dict[str, list[str]]:
    """The daemon's first look at an instance (:class:`Daemon`): what it would request."""
    return Daemon(instance, resources).tick()


def firm_run(task: str, model: str | None = None, with_inputs: bool = False):
    """One FIRM-Video run, as ``argus evaluate --protocol firm`` launches one: a task's checklists (with
    ``with_inputs``, the input table they read), or a task x model's verdicts and scores (and the
    candidate table)."""
    import dagster as dg

    from argus_dagster.client.runs import RunSpec
    from argus_dagster.definitions import ROLES

    if model is None:
        return RunSpec("firm", (["input_instances"] if with_inputs else []) + list(ROLES.firm_task), [task])
    key = str(dg.MultiPartitionKey({"task": task, "model": model}))
    return RunSpec("firm", (["candidate_videos"] if with_inputs else []) + list(ROLES.firm_candidate), [key])
