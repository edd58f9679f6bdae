"""``reference`` resolves from the input before a plan runs (method §6): with tiny DINO weights on disk,
a TI2V criterion comparing the output with its first frame and a TS2V criterion comparing it with the
subject image each get a real ``dino_sim`` record through the graph, computed against that medium."""

import json

import cv2
import dagster as dg
import numpy as np
import pytest

from argus_dagster.infra.media import write_video
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.dino import DinoSim
from argus_dagster.method.evidence.tools.models import ModelStore
from argus_dagster.method.evidence.tools.random_models import build_models
from argus_dagster.resources.tools import ToolsResource

from .helpers import graph_resources, load, materialize_task

pytestmark = pytest.mark.integration


def _texture(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    cells = rng.integers(0, 255, (8, 24, 3), dtype=np.uint8)
    return np.kron(cells, np.ones((8, 8, 1), np.uint8))  # 64 x 192


def _clip(seed: int, n: int = 24) -> np.ndarray:
    base = _texture(seed)
    return np.stack([np.roll(base, 3 * i, axis=1)[:, :96] for i in range(n)])


def _criterion(reference_source: str) -> dict:
    return {"id": "reference_similarity", "dimension": 16 if reference_source == "first_frame" else 17,
            "criterion": f"The output keeps the look of the input's {reference_source}.", "type": "soft",
            "importance": "high", "scoring_rule": "10: same look; 5: similar; 0: unrelated.",
            "failure_modes": ["a different look"], "derivable_from": "input_bundle",
            "evidence_plan": {"target_entity": "the scene", "reference_source": reference_source,
                              "tool_sequence": [{"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}}],
                              "aggregation": "cosine similarity"}}


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    root = tmp_path_factory.mktemp("reference")
    bench, cands, home = root / "bench", root / "cands", root / "home"
    models = build_models(root / "models", which=("dino",))
    cases = {"TI2V": ("first_frame", "first.png", 1), "TS2V": ("subject_images", "subject.png", 2)}
    for task, (field, name, seed) in cases.items():
        (bench / task / "rubrics").mkdir(parents=True)
        cv2.imwrite(str(bench / task / name), cv2.cvtColor(_texture(seed)[:, :96], cv2.COLOR_RGB2BGR))
        value = [name] if field == "subject_images" else name
        (bench / task / "manifest.jsonl").write_text(json.dumps({"id": "case", "prompt": "A pattern slides.",
                                                                  field: value}) + "\n")
        ref = "first_frame" if task == "TI2V" else "subject_image"
        crit = _criterion(ref)
        if task == "TS2V":  # written loosely, as released rubrics are: read, and each coercion logged
            crit.update(importance="High", failure_modes="a different look", derivable_from="reference image")
        (bench / task / "rubrics" / "case.json").write_text(json.dumps({"criteria": [crit]}))
        write_video(cands / task / "m" / "case.mp4", _clip(seed), 12)
    resources = {**graph_resources(bench, cands, home),
                 "tools": ToolsResource(models_dir=str(models), cache_dir=str(home / "cache"))}
    instance = dg.DagsterInstance.ephemeral()
    for task in cases:
        materialize_task(task, ["m"], resources, instance)
    return resources, instance, bench, cands, models


@pytest.mark.parametrize("task, medium, image", [("TI2V", "first_frame", "first.png"),
                                                 ("TS2V", "subject_image", "subject.png")])
def test_dino_sim_against_the_inputs_medium(graph, task, medium, image):
    resources, instance, bench, cands, models = graph
    evidence = load("criterion_evidence", resources, instance, dg.MultiPartitionKey({"task": task, "model": "m"}))
    row = evidence.row(0, named=True)
    assert row["plan_status"] == "ok" and json.loads(row["repairs"]) == []
    assert json.loads(row["plan"]) == [{"tool": "dino_sim", "args": {"a": "output_video", "b": "reference"}}]
    (rec,) = json.loads(row["evidence"])
    assert rec["tool"] == "dino_sim" and rec["ok"] is True and rec["b"] == "reference"
    assert -1.0 <= rec["similarity"] <= 1.0 and rec["n_pairs"] == 8

    # The cosine is the one against that medium: the same tool on the medium itself gives the same numbers,
    # and another image gives other numbers.
    tool = DinoSim(ModelStore(str(models), "cpu"))
    direct = MediaStore({"output_video": str(cands / task / "m" / "case.mp4"), medium: str(bench / task / image),
                         "other": str(bench / ("TS2V/subject.png" if task == "TI2V" else "TI2V/first.png"))})
    same = tool.run({"a": "output_video", "b": medium}, direct)
    other = tool.run({"a": "output_video", "b": "other"}, direct)
    assert (rec["similarity"], rec["similarity_min"]) == (same["similarity"], same["similarity_min"])
    assert other["similarity"] != same["similarity"]

    scores = load("criterion_scores", resources, instance, dg.MultiPartitionKey({"task": task, "model": "m"}))
    assert scores["score"][0] is not None  # the evidence-only judge scores a dino_sim measure


def test_loose_fields_are_coerced_and_logged_on_the_rubric_row(graph):
    resources, instance, *_ = graph
    ti2v = load("rubrics", resources, instance, "TI2V").row(0, named=True)
    ts2v = load("rubrics", resources, instance, "TS2V").row(0, named=True)
    assert ti2v["error"] is None and json.loads(ti2v["load_log"]) == []
    assert ts2v["error"] is None
    log = json.loads(ts2v["load_log"])
    assert [line.split(" field ")[1].split(":")[0] for line in log] == ["'importance'", "'failure_modes'",
                                                                        "'derivable_from'"]
    rubric = json.loads(ts2v["rubric_json"])["criteria"][0]
    assert (rubric["importance"], rubric["failure_modes"], rubric["derivable_from"]) == (
        "high", ["a different look"], "input_bundle")
