"""The cost ledger against the server's own count: a demo-like evaluation on the loopback judge.

The server answers with ``usage`` (cached prompt tokens from its prefix cache) and sums what it
served; the tables' cost columns, summed over the evaluation, must equal those sums, and the
requests about one video must find its frames in the server's cache.
"""

import dagster as dg
import polars as pl
import pytest

from argus_dagster.demo import build_demo_bench
from argus_dagster.runner import local_instance, run_all
from argus_dagster.settings import record_bench
from argus_dagster.tables import COSTS
from assets import ALL_ASSETS
from resources import resources_for
from tests.servers.openai_server import FakeVlmServer, kind_of

pytestmark = pytest.mark.integration

MODELS = ["faithful", "frozen"]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    home = tmp_path_factory.mktemp("ledger_home")
    judge, rubric_server = FakeVlmServer(), FakeVlmServer()
    with judge, rubric_server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARGUS_HOME", str(home))
        mp.setenv("DAGSTER_HOME", str(home / "dagster_home"))
        mp.setenv("ARGUS_VLM_BASE_URL", judge.base_url)
        mp.setenv("ARGUS_VLM_MODEL", "judge-model")
        mp.setenv("ARGUS_RUBRIC_BASE_URL", rubric_server.base_url)
        mp.setenv("ARGUS_RUBRIC_MODEL", "rubric-model")
        bench, cands = build_demo_bench(home, progress=lambda m: None)
        record_bench(bench, cands)
        lb = run_all(tasks=["T2V"], models=MODELS, progress=lambda m: None)
        instance = local_instance()
        defs = dg.Definitions(assets=ALL_ASSETS, resources=resources_for())
        keys = [dg.MultiPartitionKey({"task": "T2V", "model": m}) for m in MODELS]
        tables = {name: pl.concat([defs.load_asset_value(name, instance=instance, partition_key=k) for k in keys])
                  for name in ("criterion_evidence", "criterion_scores", "video_scores")}
        yield {"lb": lb, "tables": tables, "judge": judge, "instance": instance}


def test_the_ledger_equals_what_the_server_served(evaluated):
    served, videos = evaluated["judge"].served, evaluated["tables"]["video_scores"]
    kinds = [kind_of(b) for b in evaluated["judge"].bodies()]
    assert kinds.count("judge") > 0 and kinds.count("qa") > 0  # both kinds of request were made
    total = {k: int(videos[k].sum()) for k in COSTS}
    assert total["vlm_requests"] == len(kinds) == served["usage_answers"]
    assert total["prompt_tokens"] == served["prompt_tokens"] > 0
    assert total["completion_tokens"] == served["completion_tokens"] > 0
    assert total["cached_tokens"] == served["cached_tokens"]
    assert total["images_sent"] == served["images"] and total["image_bytes_sent"] == served["image_bytes"] > 0
    # every video's requests after its first found its system text and frames in the server's cache
    assert total["cached_tokens"] > 0.5 * total["prompt_tokens"]
    # the evidence stage's share is its own rows', the scores' rows add the judge's
    ev, scores = evaluated["tables"]["criterion_evidence"], evaluated["tables"]["criterion_scores"]
    assert int(ev["vlm_requests"].sum()) == kinds.count("qa")
    assert int(scores["vlm_requests"].sum()) == len(kinds)


def test_each_stage_reports_its_costs_in_metadata(evaluated):
    instance = evaluated["instance"]
    meta = {}
    for asset in ("criterion_evidence", "criterion_scores", "video_scores"):
        key = str(dg.MultiPartitionKey({"task": "T2V", "model": "faithful"}))
        [record] = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1).records
        meta[asset] = {k: v.value for k, v in record.asset_materialization.metadata.items()}
    evidence, judged, videos = meta["criterion_evidence"], meta["criterion_scores"], meta["video_scores"]
    # vlm_qa's calls and the judge's: those the evidence step made ahead (judge_ahead_vlm_*) and any
    # the scores step made itself
    for what, cost in (("prompt_tokens", "prompt_tokens"), ("cached_tokens", "cached_tokens"),
                       ("images_sent", "images_sent")):
        spent = evidence[f"vlm_{what}"] + evidence[f"judge_ahead_vlm_{what}"] + judged[f"vlm_{what}"]
        assert spent == videos[f"costs_{cost}"] > 0, what
    assert judged["judged_ahead"] == evidence["judged_ahead"] == judged["n_criteria"]  # all asked ahead
    assert 0 < videos["costs_cached_share"] < 1


def test_the_leaderboard_and_argus_evaluations_show_the_evaluations_costs(evaluated, capsys):
    from argus_dagster.cli import main

    served = evaluated["judge"].served
    [record] = evaluated["instance"].fetch_materializations(dg.AssetKey("leaderboard"), limit=1).records
    meta = {k: v.value for k, v in record.asset_materialization.metadata.items()}
    assert meta["costs_prompt_tokens"] == served["prompt_tokens"]
    assert meta["costs_cached_share"] == round(served["cached_tokens"] / served["prompt_tokens"], 4)
    costs = meta["costs"]  # the table per task x model, and the total
    assert all(f"T2V    {m}" in costs for m in MODELS) and f"total: {served['prompt_tokens']} prompt tokens" in costs
    capsys.readouterr()
    assert main(["evaluations"]) == 0
    [line] = capsys.readouterr().out.splitlines()[1:]  # the header, then the one evaluation of this home
    per_video = served["prompt_tokens"] / evaluated["tables"]["video_scores"].height
    share = served["cached_tokens"] / served["prompt_tokens"]
    assert f" {per_video:.0f} " in line and f" {share:.0%} " in line


def test_argus_export_costs_writes_the_ledger_per_task_and_model(evaluated, tmp_path, capsys):
    from argus_dagster.cli import main
    from argus_dagster.settings import load_settings

    served, videos = evaluated["judge"].served, evaluated["tables"]["video_scores"]
    out = tmp_path / "costs.csv"
    assert main(["export", "costs", "--out", str(out)]) == 0
    costs = pl.read_csv(out)
    assert costs["model"].to_list() == MODELS and costs["task"].to_list() == ["T2V", "T2V"]
    for model in MODELS:  # each row is its model's videos' cost columns summed
        mine = videos.filter(pl.col("model") == model)
        row = costs.filter(pl.col("model") == model).row(0, named=True)
        assert row["n_videos"] == mine.height > 0
        for k in COSTS:
            assert row[k] == int(mine[k].sum()), (model, k)
        assert row["prompt_tokens_per_video"] == pytest.approx(row["prompt_tokens"] / row["n_videos"])
    # and the whole ledger is what the server counted it served
    assert int(costs["prompt_tokens"].sum()) == served["prompt_tokens"] > 0
    assert int(costs["cached_tokens"].sum()) == served["cached_tokens"]
    assert int(costs["images_sent"].sum()) == served["images"]
    # the leaderboard's run wrote the same table beside its pages
    linked = pl.read_csv(load_settings().reports_dir / "exports" / "costs.csv")
    assert linked.equals(costs)
