"""The demo graph with model-backed tools: an empty models folder completes and records every fallback;
tiny random-weight checkpoints put the model tools' records into the same tables."""

import json

import dagster as dg
import pytest

from argus_dagster.method.evidence.tools.random_models import build_models
from argus_dagster.method.evidence.tools.registry import MODEL_BACKED
from argus_dagster.resources.tools import ToolsResource, tools_from_env
from tests.integration.helpers import graph_resources, load, materialize_task

pytestmark = pytest.mark.integration
TASK, MODEL = "TS2V", "faithful"  # subject images: sam_track -> crop_compare -> dino_sim, and aesthetic


@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_bench_in):
    root = tmp_path_factory.mktemp("demo")
    bench, cands = demo_bench_in(root)
    return root, bench, cands


def _materialize(demo, models_dir, name, monkeypatch):
    root, bench, cands = demo
    monkeypatch.setenv("ARGUS_MODELS_DIR", str(models_dir))
    monkeypatch.delenv("ARGUS_DEVICE", raising=False)
    tools = tools_from_env("cpu")
    assert tools.models_dir == str(models_dir) and tools.device == "cpu"
    # A fresh resource, not model_copy: Dagster rebuilds resources from their constructor arguments.
    tools = ToolsResource(device=tools.device, models_dir=tools.models_dir, cache_dir=str(root / name / "cache"))
    resources = {**graph_resources(bench, cands, root / name), "tools": tools}
    instance = dg.DagsterInstance.ephemeral()
    materialize_task(TASK, [MODEL], resources, instance)
    key = dg.MultiPartitionKey({"task": TASK, "model": MODEL})
    return (load("criterion_evidence", resources, instance, key), load("video_scores", resources, instance, key),
            instance)


def _steps(evidence):
    return [(row, rec) for row in evidence.iter_rows(named=True) for rec in json.loads(row["evidence"])]


def test_an_empty_models_folder_completes_and_records_every_fallback(demo, tmp_path_factory, monkeypatch):
    empty = tmp_path_factory.mktemp("empty_models")
    evidence, scores, instance = _materialize(demo, empty, "empty", monkeypatch)
    assert scores["final_score"].null_count() == 0 and scores["error"].null_count() == scores.height
    planned = 0
    for row in evidence.iter_rows(named=True):
        repairs = json.loads(row["repairs"])
        dropped = [r for r in repairs if r["rule"] == "tool_unavailable"]
        planned += len(dropped)
        if dropped:  # every unavailable tool is logged and the criterion falls back to a vlm_qa question
            assert row["plan_status"] == "fallback"
            assert "vlm_qa" in row["tools"]
            assert all(any(t in r["detail"] for t in MODEL_BACKED) for r in dropped)
        assert not set(row["tools"]) & set(MODEL_BACKED)
    assert planned >= 3  # the TS2V rubrics do plan sam_track, crop_compare and dino_sim
    aesthetic = [rec for _, rec in _steps(evidence) if rec["tool"] == "aesthetic"]
    assert aesthetic and all(rec["ok"] and rec["backend"] == "classical" for rec in aesthetic)
    assert all(rec["fallback"] == f"learned aesthetic unavailable: model folder {empty / 'aesthetic'} is missing"
               for rec in aesthetic)
    mat = instance.get_latest_materialization_event(dg.AssetKey("criterion_evidence")).asset_materialization
    versions = mat.metadata["tool_versions"].value
    assert all(versions[t] == "unavailable" for t in MODEL_BACKED)


def test_tiny_checkpoints_put_model_evidence_in_the_tables(demo, tmp_path_factory, monkeypatch):
    models = build_models(tmp_path_factory.mktemp("tiny_models"))
    evidence, scores, _ = _materialize(demo, models, "tiny", monkeypatch)
    assert scores["final_score"].null_count() == 0
    by_tool: dict[str, list[dict]] = {}
    for _, rec in _steps(evidence):
        by_tool.setdefault(rec["tool"], []).append(rec)
    assert {"sam_track", "crop_compare", "dino_sim", "aesthetic"} <= set(by_tool)
    assert all(r["ok"] for r in by_tool["sam_track"] + by_tool["aesthetic"])
    assert all(r["backend"] == "learned" for r in by_tool["aesthetic"])
    for r in by_tool["dino_sim"]:
        assert (r["ok"] and -1 <= r["similarity"] <= 1) or "output_crop" in r["error"]
    for row in evidence.iter_rows(named=True):
        assert not [r for r in json.loads(row["repairs"]) if r["rule"] == "tool_unavailable"]
