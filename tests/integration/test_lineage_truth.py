"""Dagster's lineage is the truth. After each of six changes (a new model folder, a replaced video, an
edited prompt, a hand-edited frozen rubric, a tool's version bumped, the judge model changed), three
views name the same partitions:

* the UI's: ``staleStatus`` per partition from a real ``dagster-webserver``'s GraphQL, with the cause;
* the daemon's: the candidate-store sensor's observations, then the automation sensor's requests;
* ``argus evaluate --plan``;

and after ``argus evaluate`` every partition is fresh again. Every process runs the project from a copy
of its code on ``PYTHONPATH`` (so a tool's version can be bumped in it), with the loopback
OpenAI-compatible server as rubric generator and judge.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from argus_dagster.infra.media import write_video

from .helpers import ROOT, pattern_clip, start_webserver, stop, t2v_bench

pytestmark = pytest.mark.integration
CANDIDATE = ["candidate_videos", "criterion_evidence", "criterion_scores", "video_scores", "diagnostic_reports"]
TASK = ["input_instances", "rubrics"]

STALE = """query($keys: [AssetKeyInput!], $partitions: [String!]) {
  assetNodes(assetKeys: $keys) { assetKey { path }
    staleStatusByPartition(partitions: $partitions)
    staleCausesByPartition(partitions: $partitions) { key { path } partitionKey reason category dependency { path }
                                                      dependencyPartitionKey } } }"""


class World:
    """The bench, the code copy, the servers and the environment every process of the test shares."""

    def __init__(self, root: Path):
        from tests.servers.openai_server import FakeVlmServer

        self.root = root
        self.code = root / "code"
        for package in ("argus_dagster", "assets", "resources"):
            shutil.copytree(ROOT / package, self.code / package, ignore=shutil.ignore_patterns("__pycache__"),
                            symlinks=True)  # argus_dagster/assets stays a link to the copy of assets/
        shutil.copy(ROOT / "workspace.yaml", self.code / "workspace.yaml")
        self.bench, self.cands = t2v_bench(root, n_inputs=2)
        self.vlm = FakeVlmServer().start()
        home = root / "home"
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root),
                    "PYTHONPATH": f"{self.code}:{ROOT}", "ARGUS_HOME": str(home),
                    "ARGUS_BENCH_DIR": str(self.bench), "ARGUS_CANDIDATES_DIR": str(self.cands),
                    "ARGUS_VLM_BASE_URL": self.vlm.base_url, "ARGUS_VLM_MODEL": "judge-a",
                    "ARGUS_RUBRIC_BASE_URL": self.vlm.base_url, "ARGUS_RUBRIC_MODEL": "rubric-a",
                    "DAGSTER_HOME": str(home / "benches" / "bench" / "default" / "dagster_home")}
        self.evaluated = {("T2V", "m")}
        self.webserver = self.graphql = None

    def run(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run([sys.executable, *args], cwd=self.root, env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    def evaluate(self) -> str:
        # the profile named: a changed judge re-scores this evaluation, whose lineage the views show
        return self.run("-m", "argus_dagster.client.cli", "evaluate", "--bench", str(self.bench),
                        "--candidates", str(self.cands), "--profile", "default")

    def plan(self) -> dict[str, list[str]]:
        out = self.run("-m", "argus_dagster.client.cli", "evaluate", "--plan", "--bench", str(self.bench),
                       "--candidates", str(self.cands), "--profile", "default")
        asked = {}
        for line in out.splitlines():
            asset, sep, keys = line.strip().partition(": ")
            if sep and asset in TASK + CANDIDATE + ["leaderboard"]:
                asked[asset] = [k for k in keys.split(", ") if k != "(unpartitioned)"]
        return asked

    def daemon(self) -> dict[str, list[str]]:
        return json.loads(self.run(str(ROOT / "tests" / "integration" / "daemon_tick.py"), str(self.root / "daemon.json")))

    def ui(self) -> dict[str, dict[str, tuple[str, list]]]:
        """``{asset: {partition: (stale status, root causes)}}`` over the evaluated partitions."""
        out = {}
        for assets, keys in ((TASK, sorted({t for t, _ in self.evaluated})),
                             (CANDIDATE, sorted(f"{m}|{t}" for t, m in self.evaluated))):
            data = self.graphql(STALE, keys=[{"path": [a]} for a in assets], partitions=keys)
            for node in data["assetNodes"]:
                out[node["assetKey"]["path"][0]] = {
                    k: (status, causes) for k, status, causes in zip(keys, node["staleStatusByPartition"],
                                                                     node["staleCausesByPartition"])}
        return out


def partitions(per_asset: dict, evaluated: set) -> set[tuple[str, str]]:
    """The ``(task, model)`` partitions ``per_asset`` names: a task's key stands for its every partition."""
    out = set()
    for keys in per_asset.values():
        for key in keys:
            if "|" in key:
                model, task = key.split("|")
                out.add((task, model))
            else:
                out |= {(t, m) for t, m in evaluated if t == key}
    return out & evaluated


def stale_in_ui(ui: dict) -> dict[str, list[str]]:
    return {asset: [k for k, (status, _) in parts.items() if status != "FRESH"] for asset, parts in ui.items()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = World(tmp_path_factory.mktemp("truth"))
    try:
        w.evaluate()
        w.webserver, w.graphql = start_webserver(w.root, w.env, cwd=w.code)
        assert w.daemon() == {}  # the daemon's first look: nothing to do
        yield w
    finally:
        if w.webserver is not None:
            stop(w.webserver)
        w.vlm.stop()


def check(world: World, expected: set[tuple[str, str]], cause: tuple[str, str] | None = None) -> None:
    """The three views name ``expected``; ``cause``: an asset and the dependency the UI names as the
    root cause; after argus evaluate, every partition is fresh."""
    daemon = world.daemon()
    plan = world.plan()
    ui = world.ui()
    assert partitions(stale_in_ui(ui), world.evaluated) == expected, ui
    assert partitions(daemon, world.evaluated) == expected, daemon
    assert partitions(plan, world.evaluated) == expected, plan
    if cause:
        asset, dependency = cause
        causes = [c for key, (_, cs) in ui[asset].items() for c in cs]
        # Dagster's root cause: the source (or the asset) whose data version moved, e.g. "candidate_files
        # m|T2V has a new data version".
        assert any([dependency] in (c["key"]["path"], (c["dependency"] or {}).get("path")) for c in causes), causes
    out = world.evaluate()
    assert "scored" in out, out
    after = world.ui()
    assert all(status == "FRESH" for parts in after.values() for status, _ in parts.values()), after
    lb = world.graphql(STALE.replace("staleStatusByPartition(partitions: $partitions)", "staleStatus")
                       .replace("staleCausesByPartition(partitions: $partitions) {", "staleCauses {")
                       .replace(", $partitions: [String!]", ""), keys=[{"path": ["leaderboard"]}])
    assert lb["assetNodes"][0]["staleStatus"] == "FRESH", lb
    assert world.plan() == {}


def test_everything_is_fresh_after_the_first_evaluation(world):
    assert partitions(stale_in_ui(world.ui()), world.evaluated) == set()
    assert world.plan() == {}


def test_a_new_model_folder(world):
    for i in range(2):
        write_video(world.cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(20 + i), 12)
    world.evaluated.add(("T2V", "n"))
    check(world, {("T2V", "n")})


def test_a_replaced_video(world):
    write_video(world.cands / "T2V" / "m" / "p0.mp4", pattern_clip(30), 12)
    check(world, {("T2V", "m")}, cause=("candidate_videos", "candidate_files"))


def test_an_edited_prompt(world):
    manifest = world.bench / "T2V" / "manifest.jsonl"
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[1]["prompt"] = "A textured pattern slides to the right."
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    check(world, {("T2V", "m"), ("T2V", "n")}, cause=("input_instances", "bench_files"))


def test_a_hand_edited_frozen_rubric(world):
    [rubric] = (world.bench / "T2V" / "rubrics").glob("p0.json")
    data = json.loads(rubric.read_text())
    data["criteria"] = data["criteria"][:-1]
    rubric.write_text(json.dumps(data, indent=2))
    check(world, {("T2V", "m"), ("T2V", "n")}, cause=("rubrics", "rubric_files"))


def test_a_tools_version_bumped(world):
    source = world.code / "argus_dagster" / "method" / "evidence" / "tools" / "classical.py"
    text = source.read_text()
    assert text.count('name = "flicker_probe"\n    version = "2"') == 1
    source.write_text(text.replace('name = "flicker_probe"\n    version = "2"', 'name = "flicker_probe"\n    version = "3"'))
    check(world, {("T2V", "m"), ("T2V", "n")}, cause=("criterion_evidence", "tool_suite_config"))


def test_the_judge_model_changed(world):
    world.env["ARGUS_VLM_MODEL"] = "judge-b"
    check(world, {("T2V", "m"), ("T2V", "n")}, cause=("criterion_scores", "judge_config"))
