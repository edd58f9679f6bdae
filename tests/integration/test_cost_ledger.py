"""The cost ledger against the servers' own counts: a demo-like evaluation on the loopback judge and
rubric generator, with FIRM-Video and VEFX run on the same evaluation.

The servers answer with ``usage`` (cached prompt tokens from their prefix caches) and count every
request they received; each server also answers one request with a 500, closes the connection of
another, and answers a third only after the client's timeout (abandoned, as vLLM aborts a request
whose client left). The ledger (every stage's cost columns: rubric generation, VideoArgus, FIRM's
checklists and scores, VEFX) must equal what the servers counted, and the requests about one video
must find its frames in the server's cache.
"""

import threading

import dagster as dg
import polars as pl
import pytest

from argus_dagster.assets import ALL_ASSETS
from argus_dagster.client.demo import build_demo_bench
from argus_dagster.client.evaluate import run_all
from argus_dagster.client.instance import local_instance
from argus_dagster.infra.settings import record_bench
from argus_dagster.infra.tables import COSTS
from argus_dagster.method.ledger import TOTAL
from argus_dagster.resources import resources_for
from tests.servers.openai_server import FakeVlmServer, Scripted, kind_of

pytestmark = pytest.mark.integration

MODELS = ["faithful", "frozen"]
EDIT_MODELS = ["flicker", "frozen"]  # two editors of the demo's TV2V inputs, for VEFX
TIMEOUT_S = 6  # the clients' whole-request deadline; a "slow" answer comes a second after it
SERVED = ("requests", "prompt_tokens", "completion_tokens", "cached_tokens", "images", "image_bytes")
LEDGER_OF = {"requests": "vlm_requests", "prompt_tokens": "prompt_tokens", "completion_tokens": "completion_tokens",
             "cached_tokens": "cached_tokens", "images": "images_sent", "image_bytes": "image_bytes_sent"}


def faults(at: dict[int, Scripted]):
    """A server ``fault``: the n-th request it receives (1-based) gets ``at[n]``, the others their answer."""
    seen, lock = [0], threading.Lock()

    def fault(body: dict) -> Scripted | None:
        with lock:
            seen[0] += 1
            return at.get(seen[0])
    return fault


def three_faults(first: int) -> dict[int, Scripted]:
    """A 500, then a closed connection, then an answer after the client's timeout."""
    return {first: Scripted(status=500, raw=b'{"error": "overloaded"}'), first + 2: Scripted(close=True),
            first + 4: Scripted(content="too late", delay_s=TIMEOUT_S + 1)}


def both(*servers: FakeVlmServer) -> dict[str, int]:
    return {k: sum(s.served[k] for s in servers) for k in SERVED}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    home = tmp_path_factory.mktemp("ledger_home")
    judge = FakeVlmServer(fault=faults(three_faults(4)))
    rubric_server = FakeVlmServer(fault=faults(three_faults(1)))
    with judge, rubric_server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARGUS_HOME", str(home))
        mp.setenv("DAGSTER_HOME", str(home / "dagster_home"))
        mp.setenv("ARGUS_VLM_BASE_URL", judge.base_url)
        mp.setenv("ARGUS_VLM_MODEL", "judge-model")
        mp.setenv("ARGUS_VLM_TIMEOUT_S", str(TIMEOUT_S))
        mp.setenv("ARGUS_RUBRIC_BASE_URL", rubric_server.base_url)
        mp.setenv("ARGUS_RUBRIC_MODEL", "rubric-model")
        mp.setenv("ARGUS_RUBRIC_TIMEOUT_S", str(TIMEOUT_S))
        bench, cands = build_demo_bench(home, progress=lambda m: None)
        record_bench(bench, cands)
        lb = run_all(tasks=["T2V"], models=MODELS, progress=lambda m: None)
        # what the servers had counted when the leaderboard (and its ledger) was written
        at_leaderboard = {"judge": dict(judge.served), "both": both(judge, rubric_server),
                          "kinds": [kind_of(b) for b in judge.bodies()],
                          "outcomes": [r.get("outcome") for r in judge.requests + rubric_server.requests]}
        run_all(tasks=["T2V"], models=MODELS, protocol="firm", progress=lambda m: None)
        run_all(tasks=["TV2V"], models=EDIT_MODELS, protocol="vefx", progress=lambda m: None)
        instance = local_instance()
        defs = dg.Definitions(assets=ALL_ASSETS, resources=resources_for())
        keys = [dg.MultiPartitionKey({"task": "T2V", "model": m}) for m in MODELS]
        tables = {name: pl.concat([defs.load_asset_value(name, instance=instance, partition_key=k) for k in keys])
                  for name in ("criterion_evidence", "criterion_scores", "video_scores")}
        tables["vefx_scores"] = pl.concat([defs.load_asset_value(
            "vefx_scores", instance=instance, partition_key=dg.MultiPartitionKey({"task": "TV2V", "model": m}))
            for m in EDIT_MODELS])
        yield {"lb": lb, "tables": tables, "judge": judge, "rubric_server": rubric_server, "instance": instance,
               "at_leaderboard": at_leaderboard, "served": both(judge, rubric_server)}


def test_the_faults_happened_as_the_servers_saw_them(evaluated):
    outcomes = evaluated["at_leaderboard"]["outcomes"]
    for outcome in ("http_500", "closed", "abandoned"):  # one of each at each server, before the leaderboard
        assert outcomes.count(outcome) == 2, (outcome, outcomes)
    # the rubric stage recorded each of its faults with its outcome
    [record] = evaluated["instance"].fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("rubrics"), asset_partitions=["T2V"]), limit=1).records
    errors = record.asset_materialization.metadata["vlm_request_errors"].value
    assert errors == {"http_500": 1, "connection_closed": 1, "timeout": 1}


def test_the_ledger_equals_what_the_server_served(evaluated):
    served, videos = evaluated["at_leaderboard"]["judge"], evaluated["tables"]["video_scores"]
    kinds = evaluated["at_leaderboard"]["kinds"]
    assert kinds.count("judge") > 0 and kinds.count("qa") > 0  # both kinds of request were made
    total = {k: int(videos[k].sum()) for k in COSTS}
    # every request the judge received, answered or not (the 500, the closed one, the abandoned one)
    assert total["vlm_requests"] == len(kinds) == served["requests"] == served["usage_answers"] + 3
    assert total["prompt_tokens"] == served["prompt_tokens"] > 0
    assert total["completion_tokens"] == served["completion_tokens"] > 0
    assert total["cached_tokens"] == served["cached_tokens"]
    assert total["images_sent"] == served["images"] and total["image_bytes_sent"] == served["image_bytes"] > 0
    assert total["request_ms"] >= 1000 * TIMEOUT_S  # the timed-out request's wait is in its request-seconds
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


def test_the_ledger_asset_and_argus_evaluations_show_the_evaluations_costs(evaluated, capsys):
    from argus_dagster.client.cli import main

    then = evaluated["at_leaderboard"]["both"]  # the rubric generator's requests and the judge's
    # The ledger as the VideoArgus pass left it (its first materialization: FIRM's and VEFX's came after)
    records = evaluated["instance"].fetch_materializations(dg.AssetKey("costs"), limit=10).records
    meta = {k: v.value for k, v in records[-1].asset_materialization.metadata.items()}
    assert list(meta)[:2] == ["costs_vlm_requests", "costs_request_seconds"]  # the totals lead
    assert meta["costs_prompt_tokens"] == then["prompt_tokens"] and meta["costs_vlm_requests"] == then["requests"]
    assert meta["costs_cached_share"] == round(then["cached_tokens"] / then["prompt_tokens"], 4)
    # the table per stage, task and model, and the total (inside a code fence)
    lines = [line for line in meta["costs"].splitlines() if not line.startswith("```")]
    rows = [line.split()[:3] for line in lines[1:-1]]
    assert rows == [["rubrics", "T2V", "-"]] + [["videoargus", "T2V", m] for m in MODELS]
    assert lines[-1].startswith(f"total: {then['requests']} requests, ")
    assert f" {then['prompt_tokens']} prompt tokens " in lines[-1]
    capsys.readouterr()
    assert main(["evaluations"]) == 0
    [line] = capsys.readouterr().out.splitlines()[1:]  # the header, then the one evaluation of this home
    served = evaluated["served"]  # now with FIRM's and VEFX's requests too
    videos = max(evaluated["tables"]["video_scores"].height, evaluated["tables"]["vefx_scores"].height)
    per_video = served["prompt_tokens"] / videos
    share = served["cached_tokens"] / served["prompt_tokens"]
    assert f" {per_video:.0f} " in line and f" {share:.0%} " in line


def test_argus_export_costs_writes_the_whole_ledger_per_stage_task_and_model(evaluated, tmp_path, capsys):
    from argus_dagster.client.cli import main
    from argus_dagster.infra.settings import load_settings

    served, videos = evaluated["served"], evaluated["tables"]["video_scores"]
    out = tmp_path / "costs.csv"
    assert main(["export", "costs", "--out", str(out)]) == 0
    costs = pl.read_csv(out, schema_overrides={"model": pl.String, "task": pl.String})
    keys = [(r["stage"], r["task"], r["model"] or "") for r in costs.iter_rows(named=True)]
    assert keys == ([("rubrics", "T2V", "")] + [("videoargus", "T2V", m) for m in MODELS]
                    + [("firm_checklists", "T2V", "")] + [("firm", "T2V", m) for m in MODELS]
                    + [("vefx", "TV2V", m) for m in sorted(EDIT_MODELS)] + [(TOTAL, "", "")])
    for model in MODELS:  # each VideoArgus row is its model's videos' cost columns summed
        mine = videos.filter(pl.col("model") == model)
        row = costs.filter((pl.col("stage") == "videoargus") & (pl.col("model") == model)).row(0, named=True)
        assert row["n_videos"] == mine.height > 0
        for k in COSTS:
            assert row[k] == int(mine[k].sum()), (model, k)
        assert row["prompt_tokens_per_video"] == pytest.approx(row["prompt_tokens"] / row["n_videos"])
    stage = {s: int(costs.filter(pl.col("stage") == s)["vlm_requests"].sum()) for s in ("firm_checklists", "firm", "vefx")}
    assert all(n > 0 for n in stage.values()), stage  # FIRM's and VEFX's requests are rows of their own
    # the ledger's total is every request both servers received, and what they served
    total = costs.filter(pl.col("stage") == TOTAL).row(0, named=True)
    for k, col in LEDGER_OF.items():
        assert total[col] == served[k] > (0 if k != "cached_tokens" else -1), k
    assert total["vlm_requests"] == int(costs.filter(pl.col("stage") != TOTAL)["vlm_requests"].sum())
    assert total["request_seconds"] >= 2 * TIMEOUT_S  # both timed-out requests' waits
    # the ledger's last run (after VEFX-Bench's pass) wrote it beside the pages: the same rows
    linked = pl.read_csv(load_settings().reports_dir / "exports" / "costs.csv",
                         schema_overrides={"model": pl.String, "task": pl.String})
    assert [(r["stage"], r["task"], r["model"] or "") for r in linked.iter_rows(named=True)] == keys
    assert linked.filter(pl.col("stage") == TOTAL)["vlm_requests"].item() == total["vlm_requests"]
    # the overview shows that ledger's total
    page = (load_settings().reports_dir / "index.html").read_text(encoding="utf-8")
    assert f'VLM requests <b data-cost="vlm_requests">{total["vlm_requests"]}</b>' in page


@pytest.fixture(scope="module")
def vlm_only(evaluated):
    """The same bench under the ``vlm-only`` profile (every plan one ``vlm_qa``), evaluated after the
    tests above read the default one: what both servers received for it, and its ledger."""
    from argus_dagster.client.cli import main

    servers = (evaluated["judge"], evaluated["rubric_server"])
    before = both(*servers)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARGUS_PROFILE", "vlm-only")
        run_all(tasks=["T2V"], models=MODELS, progress=lambda m: None)
    after = both(*servers)
    return {"served": {k: after[k] - before[k] for k in SERVED}, "main": main}


def test_the_vlm_only_profiles_ledger_equals_what_the_servers_received_for_it(vlm_only, tmp_path):
    out = tmp_path / "costs.csv"
    assert vlm_only["main"](["export", "costs", "--profile", "vlm-only", "--out", str(out)]) == 0
    costs = pl.read_csv(out, schema_overrides={"model": pl.String, "task": pl.String})
    assert set(costs["stage"]) == {"rubrics", "videoargus", TOTAL}  # the profile's own evaluation only
    total = costs.filter(pl.col("stage") == TOTAL).row(0, named=True)
    for k, col in LEDGER_OF.items():
        assert total[col] == vlm_only["served"][k], k
    assert total["vlm_requests"] > 0
