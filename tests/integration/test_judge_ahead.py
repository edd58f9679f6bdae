"""Judging ahead, on the graph: a run that materializes ``criterion_evidence`` and ``criterion_scores``
judges each video in its evidence step as soon as the video's evidence is in. The scores, and the
cost on each row, are those the scores step gives when it judges by itself (one run per asset); the
server saw the same requests; each step's metadata says who asked."""

import dagster as dg
import pytest

from argus_dagster.assets import ALL_ASSETS, SOURCES
from argus_dagster.client.demo import build_demo_bench
from argus_dagster.client.evaluate import run_all
from argus_dagster.client.instance import local_instance
from argus_dagster.client.runs import QUIET
from argus_dagster.definitions import build_definitions
from argus_dagster.infra.settings import record_bench
from tests.servers.openai_server import FakeVlmServer, kind_of

pytestmark = pytest.mark.integration

KEY = str(dg.MultiPartitionKey({"task": "T2V", "model": "faithful"}))
SAME = ["input_id", "sample", "criterion_id", "score", "rationale", "judge", "vlm_requests", "prompt_tokens",
        "completion_tokens", "images_sent", "image_bytes_sent"]


def _metadata(instance, asset: str) -> dict:
    [r] = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[KEY]),
                                          limit=1).records
    return {k: v.value for k, v in r.asset_materialization.metadata.items()}


@pytest.fixture(scope="module")
def two_ways(tmp_path_factory):
    root = tmp_path_factory.mktemp("ahead")
    out = {}
    with FakeVlmServer() as rubric_server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARGUS_RUBRIC_BASE_URL", rubric_server.base_url)
        mp.setenv("ARGUS_RUBRIC_MODEL", "rubric-model")
        mp.setenv("ARGUS_VLM_MODEL", "judge-model")
        bench, cands = build_demo_bench(root / "media", progress=lambda m: None)
        for way in ("together", "apart"):  # the first freezes the rubrics in the bench; the second reads them
            with FakeVlmServer() as judge:
                mp.setenv("ARGUS_VLM_BASE_URL", judge.base_url)
                mp.setenv("ARGUS_HOME", str(root / way))
                mp.setenv("DAGSTER_HOME", str(root / way / "dagster_home"))
                record_bench(bench, cands)
                instance = local_instance()
                if way == "together":
                    run_all(tasks=["T2V"], models=["faithful"], progress=lambda m: None, instance=instance)
                else:  # one asset per run, as a person materializing them one by one in the UI
                    defs = build_definitions()
                    instance.add_dynamic_partitions("candidate_models", ["faithful"])
                    for selection, key in ((["input_instances", "rubrics"], "T2V"),
                                           (["candidate_videos"], KEY), (["criterion_evidence"], KEY),
                                           (["criterion_scores"], KEY)):
                        chosen = [a for a in ALL_ASSETS if {k.to_user_string() for k in a.keys} & set(selection)]
                        assert dg.materialize(ALL_ASSETS + SOURCES, selection=chosen, instance=instance,
                                              resources=defs.resources, partition_key=key, run_config=QUIET).success
                scores = build_definitions().load_asset_value("criterion_scores", instance=instance, partition_key=KEY)
                out[way] = {"scores": scores, "instance": instance, "kinds": [kind_of(b) for b in judge.bodies()],
                            "served": dict(judge.served)}
    return out


def test_judging_ahead_gives_the_scores_and_costs_the_scores_step_gives(two_ways):
    together, apart = two_ways["together"]["scores"], two_ways["apart"]["scores"]
    assert together.height == apart.height > 0 and together["score"].is_not_null().all()
    by = ["input_id", "sample", "criterion_id"]
    assert together.select(SAME).sort(by).equals(apart.select(SAME).sort(by))
    # the server saw the same requests, and the rows' costs sum to what it served
    assert sorted(two_ways["together"]["kinds"]) == sorted(two_ways["apart"]["kinds"])
    for way in ("together", "apart"):
        served, scores = two_ways[way]["served"], two_ways[way]["scores"]
        judged = sum(1 for k in two_ways[way]["kinds"] if k == "judge")
        assert int(scores["vlm_requests"].sum()) == len(two_ways[way]["kinds"]) and judged == scores.height
        assert int(scores["prompt_tokens"].sum()) == served["prompt_tokens"]


def test_each_step_says_who_asked_the_judge(two_ways):
    ahead = _metadata(two_ways["together"]["instance"], "criterion_evidence")
    took = _metadata(two_ways["together"]["instance"], "criterion_scores")
    n = two_ways["together"]["scores"].height
    assert ahead["judged_ahead"] == took["judged_ahead"] == n and ahead["judge_ahead_vlm_calls"] == n
    assert took["vlm_calls"] == 0 and took["cache_hits"] == 0  # made in this run: not reuse
    alone = _metadata(two_ways["apart"]["instance"], "criterion_evidence")
    judged = _metadata(two_ways["apart"]["instance"], "criterion_scores")
    assert alone["judged_ahead"] == 0 and "judge_ahead_vlm_calls" not in alone  # its run did not score
    assert judged["judged_ahead"] == 0 and judged["vlm_calls"] == n
