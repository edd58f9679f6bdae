"""The demo graph end to end with its VLMs on loopback servers, configured the way a user does it.

The judge's pool has three endpoints, one of them dead, and both live ones answer 10% of requests
with a 500 and 5% with an unparseable answer; the rubric generator has its own endpoint and model.
At most 1% of criteria may end unscored, the key appears nowhere, and the calls are in metadata.
"""

import html
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import dagster as dg
import polars as pl
import pytest

from argus_dagster.assets import ALL_ASSETS
from argus_dagster.client.demo import build_demo_bench
from argus_dagster.client.evaluate import run_all
from argus_dagster.client.instance import local_instance
from argus_dagster.infra.settings import record_bench
from argus_dagster.method.judge import JUDGE_PROMPT_VERSION
from argus_dagster.method.rubric.generate import PROMPT_VERSION, system_prompt
from argus_dagster.resources import resources_for
from tests.servers.openai_server import FakeVlmServer, dead_url, kind_of

pytestmark = pytest.mark.integration

KEY = "sk-argus-test-0123456789abcdef"
MODELS = ["faithful", "frozen"]


@pytest.fixture(scope="module")
def vlm_run(tmp_path_factory):
    home = tmp_path_factory.mktemp("vlm_home")
    servers = [FakeVlmServer(latency_s=0.02, error_rate=0.10, unparseable_rate=0.05, seed=s) for s in (1, 2)]
    rubric_server = FakeVlmServer(latency_s=0.02)
    for s in (*servers, rubric_server):
        s.start()
    dead = dead_url()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("ARGUS_HOME", str(home))
            mp.setenv("DAGSTER_HOME", str(home / "dagster_home"))
            mp.setenv("ARGUS_VLM_BASE_URL", ",".join([servers[0].base_url, dead, servers[1].base_url]))
            mp.setenv("ARGUS_VLM_MODEL", "judge-model")
            mp.setenv("ARGUS_VLM_API_KEY", KEY)
            mp.setenv("ARGUS_VLM_CONCURRENCY", "4")
            mp.setenv("ARGUS_RUBRIC_BASE_URL", rubric_server.base_url)
            mp.setenv("ARGUS_RUBRIC_MODEL", "rubric-model")
            bench, cands = build_demo_bench(home, progress=lambda m: None)
            record_bench(bench, cands)
            lb = run_all(models=MODELS, progress=lambda m: None)
            instance = local_instance()
            defs = dg.Definitions(assets=ALL_ASSETS, resources=resources_for())
            tables = {}
            for name in ("rubrics", "criterion_scores", "criterion_evidence"):
                keys = ([t for t in sorted(set(lb["task"]))] if name == "rubrics" else
                        [dg.MultiPartitionKey({"task": t, "model": m}) for t in sorted(set(lb["task"])) for m in MODELS])
                tables[name] = pl.concat([defs.load_asset_value(name, instance=instance, partition_key=k) for k in keys],
                                         how="diagonal_relaxed")
            yield {"home": home, "lb": lb, "instance": instance, "tables": tables, "servers": servers,
                   "rubric_server": rubric_server, "dead": dead}
    finally:
        for s in (*servers, rubric_server):
            s.stop()


def test_every_partition_is_scored_by_the_vlm_judge(vlm_run):
    lb, scores = vlm_run["lb"], vlm_run["tables"]["criterion_scores"]
    assert lb.height == 5 * len(MODELS) and lb["n_errors"].max() == 0
    assert set(scores["judge"]) == {f"vlm/openai/judge-model/{JUDGE_PROMPT_VERSION}"}  # never the evidence-only judge
    unscored = scores.filter(pl.col("score").is_null())
    assert unscored.height <= 0.01 * scores.height, unscored.select("criterion_id", "rationale").to_dicts()


def test_rubrics_come_from_their_own_backbone(vlm_run):
    rubrics = vlm_run["tables"]["rubrics"]
    assert rubrics["error"].null_count() == rubrics.height
    assert set(rubrics["generator_backend"]) == {"openai"} and set(rubrics["generator_model"]) == {"rubric-model"}
    assert set(rubrics["prompt_version"]) == {PROMPT_VERSION}
    assert {kind_of(b) for b in vlm_run["rubric_server"].bodies()} == {"rubric"}
    assert len(vlm_run["rubric_server"].bodies()) == rubrics.height  # once per input
    judged = [b for s in vlm_run["servers"] for b in s.bodies()]
    assert {kind_of(b) for b in judged} == {"judge", "qa"} and all(b["model"] == "judge-model" for b in judged)


def test_vlm_qa_evidence_comes_from_the_pool(vlm_run):
    ev = vlm_run["tables"]["criterion_evidence"]
    qa = ev.filter(pl.col("tools").list.contains("vlm_qa"))
    assert qa.height > 0 and qa["evidence"].str.contains('"answer"').all()


def test_calls_are_in_the_metadata_of_the_stage_that_made_them(vlm_run):
    instance = vlm_run["instance"]
    key = dg.MultiPartitionKey({"task": "T2V", "model": "faithful"})
    ev = instance.get_latest_materialization_event(dg.AssetKey("criterion_scores"))
    assert ev is not None
    recs = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=dg.AssetKey("criterion_scores"),
                                                                 asset_partitions=[str(key)]), limit=1).records
    md = recs[0].asset_materialization.metadata
    assert md["vlm"].value == "openai:judge-model"
    # The same run's evidence step judged each video as soon as its evidence was in: those calls are
    # in its metadata (judge_ahead_vlm_*), and the scores step says how many of its judgments they are.
    [evidence] = instance.fetch_materializations(dg.AssetRecordsFilter(
        asset_key=dg.AssetKey("criterion_evidence"), asset_partitions=[str(key)]), limit=1).records
    ahead = evidence.asset_materialization.metadata
    assert ahead["judge_ahead"].value.startswith("vlm/openai/judge-model/")
    assert md["judged_ahead"].value == ahead["judged_ahead"].value > 0
    assert ahead["judge_ahead_vlm_calls"].value >= ahead["judged_ahead"].value  # parse retries are calls too
    assert ahead["judge_ahead_vlm_requests"].value >= ahead["judge_ahead_vlm_calls"].value
    assert ahead["judge_ahead_vlm_latency_mean_s"].value >= 0.02
    assert md["vlm_calls"].value == 0  # nothing was left for the scores step to ask
    rub = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=dg.AssetKey("rubrics"),
                                                                asset_partitions=["T2V"]), limit=1).records
    assert rub[0].asset_materialization.metadata["vlm_calls"].value == 3
    # The dead endpoint was tried (by whichever stage called first), failed to connect, and was excluded.
    dead_counts = [r.asset_materialization.metadata[m].value.get(vlm_run["dead"], 0)
                   for stage in ("criterion_evidence", "criterion_scores")
                   for r in instance.fetch_materializations(dg.AssetKey(stage), limit=100).records
                   for m in ("vlm_requests_by_endpoint", "judge_ahead_vlm_requests_by_endpoint")
                   if m in r.asset_materialization.metadata]
    assert 1 <= sum(dead_counts) <= 8


def test_the_api_key_is_in_no_file_log_or_metadata(vlm_run):
    key = KEY.encode()
    seen = []
    for root, _, files in os.walk(vlm_run["home"]):
        for f in files:
            if key in Path(root, f).read_bytes():
                seen.append(os.path.join(root, f))
    assert seen == []
    # It was sent, though: every request to the pool carried it.
    assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for s in vlm_run["servers"] for r in s.requests)
    assert all("Authorization" not in r["headers"] for r in vlm_run["rubric_server"].requests)


def test_each_report_shows_what_the_rubric_generator_was_told(vlm_run):
    pages = [p for p in Path(vlm_run["home"]).rglob("*.html") if "<h2>Scored criteria</h2>" in p.read_text()]
    assert len(pages) >= vlm_run["tables"]["rubrics"].height
    told = html.escape(system_prompt(), quote=True)
    for page in pages:
        text = page.read_text()
        assert "what the rubric generator was told" in text and told in text, page
        assert "rubric-model" in text


def test_judge_and_vlm_qa_requests_ask_not_to_think(vlm_run):
    judged = [b for s in vlm_run["servers"] for b in s.bodies()]
    assert judged and all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in judged)


def test_the_pages_of_the_vlm_profile_and_both_protocols_in_a_browser(vlm_run):
    """The demo evaluated with the loopback judge (the VLM profile), then FIRM-Video on T2V and
    VEFX-Bench on TV2V through the same judge pool; the overview read in headless Chromium: a section
    per task with its models, the FIRM-Video and VEFX-Bench sections cell by cell as the stored tables
    hold them, no console error and no link to a file that is not there; a report names the VLM judge
    and carries no "no VLM" notice. (Its last test: the protocols' requests follow the others'.)"""
    from argus_dagster.client.results import stored_partitions, vefx_board
    from argus_dagster.infra.settings import load_settings
    from argus_dagster.outputs.protocol_sections import VEFX_NAMES
    from argus_dagster.outputs.report import NO_VLM_NOTICE
    from argus_dagster.protocols.firm.tables import firm_summary_table

    from .chromium import launched, open_file

    assert run_all(models=MODELS, tasks=["T2V"], protocol="firm", progress=lambda m: None) is None
    run_all(models=MODELS, tasks=["TV2V"], protocol="vefx", progress=lambda m: None)
    instance, reports = local_instance(), load_settings().reports_dir
    firm = firm_summary_table(pl.concat(stored_partitions("firm_scores", instance, ["T2V"]).values()))
    board = vefx_board()
    with launched() as browser:
        page, errors = open_file(browser, reports / "index.html")
        tasks = page.locator("section[data-task]").evaluate_all("ss => ss.map(s => s.dataset.task)")
        assert sorted(tasks) == sorted(set(vlm_run["lb"]["task"]))
        shown = page.locator("section#firm table.firm tbody tr").evaluate_all(
            "rs => rs.map(r => [r.dataset.task, r.dataset.model, Object.fromEntries("
            "Array.from(r.querySelectorAll('td[data-key]')).map(c => [c.dataset.key, c.textContent]))])")
        assert [(t, m) for t, m, _ in shown] == list(zip(firm["task"], firm["model"]))
        for (_, _, cells), r in zip(shown, firm.iter_rows(named=True)):
            assert cells == {k: ("–" if r[k] is None else f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k]))
                             for k in cells}
        assert firm["mean_if"].drop_nulls().len() == len(MODELS)  # the checklists were answered by the judge
        vefx_cells = page.locator("section#vefx table.vefx tbody td[data-dimension]").evaluate_all(
            "cs => cs.map(c => [c.closest('tr').dataset.model, c.dataset.dimension, c.dataset.sort || null])")
        stored = {(r["model"], VEFX_NAMES[r["dimension"]]): r["mean"] for r in board.iter_rows(named=True)}
        assert len(vefx_cells) == len(stored) == 4 * len(MODELS)
        for model, dim, value in vefx_cells:
            want = stored[(model, dim)]
            assert (value is None) == (want is None) and (want is None or float(value) == pytest.approx(want, abs=1e-6))
        links = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
        missing = [h for h in links if h.startswith("file:") and not Path(unquote(urlsplit(h).path)).exists()]
        assert errors == [] and missing == [], (errors, missing)
        page.close()
    report = reports / "T2V" / "faithful" / f"{sorted(vlm_run['tables']['rubrics'].filter(pl.col('task') == 'T2V')['input_id'])[0]}.html"
    text = report.read_text()
    assert NO_VLM_NOTICE not in text  # a VLM judged: no notice that none is configured
    # each criterion's rationale cell names its judge beneath it: the VLM's identity, every row
    judges = re.findall(r'<div class="muted">([^<]*)</div></td></tr>', text)
    assert judges and set(judges) == {f"vlm/openai/judge-model/{JUDGE_PROMPT_VERSION}"}, judges
