"""FIRM-Video through the Dagster graph, against the loopback judge and offline.

The checklists are planned once per input and frozen: a second model, and a second materialization,
make no planner call (counted at the server). The stored scores recompute from the stored items and
verdicts, the export rebuilt from the stored rows has one valid record per video and dimension, and
without a VLM PQ comes from the CPU tools while IF and WC say why they are unscored.
"""

import json
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pytest

from argus_dagster.assets.firm import FIRM_SCORES, FIRM_VERDICTS, recompute_problems
from argus_dagster.client.results import export_firm, firm_summary
from argus_dagster.client.runs import RunSpec, execute
from argus_dagster.infra.media import write_video
from argus_dagster.infra.tables import COSTS
from argus_dagster.protocols.firm.offline import PQ_OFFLINE_VERSION
from argus_dagster.protocols.firm.scoring import if_rating, wc_rating, wc_score
from argus_dagster.protocols.firm.tables import checklist_from_rows, firm_summary_table
from argus_dagster.protocols.firm.types import DIMENSIONS, IF, WC
from argus_dagster.resources import VlmResource
from tests.servers.openai_server import FakeVlmServer, kind_of

from .helpers import firm_run, graph_resources, graph_settings, load, pattern_clip

pytestmark = pytest.mark.integration
MODELS = ("m", "m2")
PROMPTS = {f"p{i}": f"A red kite over a beach and a dog running, take {i}" for i in range(3)}



def _bench(root: Path) -> tuple[Path, Path]:
    bench, cands = root / "bench", root / "cands"
    (bench / "T2V").mkdir(parents=True)
    (bench / "T2V" / "manifest.jsonl").write_text("".join(json.dumps({"id": i, "prompt": p}) + "\n"
                                                          for i, p in PROMPTS.items()))
    for m, model in enumerate(MODELS):
        for i in range(len(PROMPTS)):
            write_video(cands / "T2V" / model / f"p{i}.mp4", pattern_clip(10 * m + i), 12)
    return bench, cands


def _kinds(srv, n0: int) -> list[str]:
    return [kind_of(r["body"]) for r in srv.requests[n0:]]


@pytest.fixture(scope="module")
def online(tmp_path_factory):
    root = tmp_path_factory.mktemp("firm")
    bench, cands = _bench(root)
    with FakeVlmServer() as srv, dg.instance_for_test() as instance:
        vlm = VlmResource(backend="openai", base_urls=srv.base_url, model="judge-a", concurrency=3)
        settings = graph_settings(root / "argus", bench, cands)
        res = graph_resources(bench, cands, settings.evaluation_dir, vlm=vlm)
        instance.add_dynamic_partitions("candidate_models", list(MODELS))
        log = {}
        n0 = len(srv.requests)
        assert execute(instance, res, firm_run("T2V", with_inputs=True)).success
        log["checklists"] = _kinds(srv, n0)
        for model in MODELS:
            n0 = len(srv.requests)
            out = execute(instance, res, firm_run("T2V", model, with_inputs=True))
            assert out.success
            log[model] = _kinds(srv, n0)
            log[f"{model} checks"] = out.get_asset_check_evaluations()
        first = load("firm_checklists", res, instance, "T2V")
        n0 = len(srv.requests)
        assert execute(instance, res, firm_run("T2V")).success  # a second materialization of the checklists
        log["again"] = _kinds(srv, n0)
        yield {"srv": srv, "instance": instance, "res": res, "log": log, "first": first, "root": root,
               "settings": settings}


def _key(model: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"task": "T2V", "model": model})


def test_checklists_are_planned_once_and_frozen_across_models_and_runs(online):
    log = online["log"]
    assert log["checklists"].count("firm_if_plan") == len(PROMPTS)
    for model in MODELS:  # verifying a model's videos never plans
        assert log[model].count("firm_if_plan") == 0
        assert log[model].count("firm_if_verify") == len(PROMPTS)
    assert log["again"] == []  # the content cache answers the re-materialization
    again = load("firm_checklists", online["res"], online["instance"], "T2V")
    assert again.drop(*COSTS).equals(online["first"].drop(*COSTS))
    # the planner's requests are the first run's cost (the cost ledger); the cache's answers cost nothing
    assert int(online["first"]["vlm_requests"].sum()) == len(PROMPTS) and int(again["vlm_requests"].sum()) == 0
    rows = online["first"]
    assert rows["error"].null_count() == rows.height and set(rows["input_id"]) == set(PROMPTS)
    assert set(rows["dimension"]) == {IF} and rows["importance"].is_between(1, 5).all()
    for _, g in rows.group_by("input_id"):  # the stored rows are the checklist: they reproduce its hash
        assert checklist_from_rows(g.to_dicts()).content_hash == g["checklist_hash"][0]


def test_scores_recompute_from_the_stored_items_and_verdicts(online):
    res, instance = online["res"], online["instance"]
    checklists = load("firm_checklists", res, instance, "T2V")
    for model in MODELS:
        evals = {e.check_name: e for e in online["log"][f"{model} checks"]}
        assert evals["firm_scores_recompute"].passed
        scores = load("firm_scores", res, instance, _key(model))
        verdicts = load("firm_verdicts", res, instance, _key(model))
        assert list(scores.columns) == list(FIRM_SCORES) and list(verdicts.columns) == list(FIRM_VERDICTS)
        assert scores.height == len(PROMPTS) and scores["if_rating"].null_count() == 0
        assert scores["wc_rating"].null_count() == 0 and scores["pq_rating"].null_count() == 0
        assert set(scores["pq_source"]) == {"vlm"}
        for r in scores.iter_rows(named=True):
            v = verdicts.filter(pl.col("input_id") == r["input_id"])
            items = checklists.filter(pl.col("input_id") == r["input_id"]).sort("item_id")
            iv = {x["item_id"]: x for x in v.filter(pl.col("dimension") == IF).iter_rows(named=True)}
            assert set(iv) == set(items["item_id"])  # every frozen item answered, nothing else
            m = items["importance"].to_list()
            z = [iv[i]["verdict"] == "yes" and iv[i]["verifiable"] for i in items["item_id"]]
            assert r["if_score"] == round(sum(a for a, b in zip(m, z) if b) / sum(m), 4)
            assert r["if_rating"] == if_rating(r["if_score"])
            wc = v.filter(pl.col("dimension") == WC)
            per: dict[str, tuple[int, list[bool]]] = {}
            for x in wc.iter_rows(named=True):
                per.setdefault(x["target"], (x["importance"], []))[1].append(x["verdict"] == "yes" and x["verifiable"])
            assert r["wc_score"] == wc_score(per.values()) and r["wc_rating"] == wc_rating(r["wc_score"])
        assert recompute_problems(scores, checklists, verdicts) == []
        # a stored verdict flipped is found
        flipped = verdicts.with_columns(pl.when((pl.col("dimension") == IF) & (pl.col("item_id") == "r1"))
                                        .then(pl.when(pl.col("verdict") == "yes").then(pl.lit("no")).otherwise(pl.lit("yes")))
                                        .otherwise(pl.col("verdict")).alias("verdict"))
        assert any("recomputed" in p for p in recompute_problems(scores, checklists, flipped))


def test_export_has_one_valid_record_per_video_and_dimension(online, tmp_path):
    from PIL import Image

    from argus_dagster.protocols.firm.export import JSONL, if_reasoning

    out = tmp_path / "firm"
    res = export_firm(out, instance=online["instance"], settings=online["settings"])
    lines = [json.loads(x) for x in (out / JSONL).read_text().splitlines()]
    assert res.n_instances == len(lines) == len(MODELS) * len(PROMPTS) * 3 and res.left_out == []
    assert sorted((r["video_id"], r["dimension"]) for r in lines) == sorted(
        (f"T2V/{m}/{p}", d) for m in MODELS for p in PROMPTS for d in DIMENSIONS)
    verdicts = {m: load("firm_verdicts", online["res"], online["instance"], _key(m)) for m in MODELS}
    for r in lines:
        pid = r["video_id"].rsplit("/", 1)[1]
        assert r["prompt"] == PROMPTS[pid] and r["target"]["score"] in range(1, 6) and r["target"]["reasoning"]
        assert r["image_roles"] == ["output_video"] * 8 and len(r["images"]) == 8
        for p in r["images"]:  # files beside the JSON lines, not references into a video
            assert not p.startswith("/") and "#" not in p
            with Image.open(out / p) as im:
                assert im.size == (96, 64)
        assert r["messages"][1]["content"] == json.dumps(r["target"], ensure_ascii=False)
        if r["dimension"] == IF:  # the verifier's own evidence, in prose
            v = verdicts[r["model"]].filter((pl.col("input_id") == pid) & (pl.col("dimension") == IF))
            assert r["target"]["reasoning"] == if_reasoning(v.to_dicts())
            assert all(e in r["target"]["reasoning"] for e in v["evidence"])
    summary = firm_summary(instance=online["instance"], settings=online["settings"])
    assert summary["n_videos"].to_list() == [len(PROMPTS)] * len(MODELS)


def test_offline_pq_from_the_cpu_tools_and_if_wc_unscored_with_the_reason(tmp_path):
    bench, cands = _bench(tmp_path)
    settings = graph_settings(tmp_path / "argus", bench, cands)
    res = graph_resources(bench, cands, settings.evaluation_dir)  # no VLM
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("candidate_models", ["m"])
        assert execute(instance, res, firm_run("T2V", with_inputs=True)).success
        out = execute(instance, res, firm_run("T2V", "m", with_inputs=True))
        assert out.success
        rows = load("firm_checklists", res, instance, "T2V")
        assert rows.height == len(PROMPTS) and rows["error"].str.contains("needs a VLM").all()
        scores = load("firm_scores", res, instance, _key("m"))
        assert scores["if_rating"].null_count() == scores["wc_rating"].null_count() == len(PROMPTS)
        assert scores["if_reason"].str.contains("instruction following needs a VLM").all()
        assert scores["wc_reason"].str.contains("world coherence needs a VLM").all()
        assert scores["pq_rating"].is_between(1, 5).all() and set(scores["pq_source"]) == {PQ_OFFLINE_VERSION}
        assert scores["pq_rationale"].str.contains("Checked without a VLM").all()
        assert load("firm_verdicts", res, instance, _key("m")).height == 0
        assert all(e.passed for e in out.get_asset_check_evaluations())
        res = export_firm(tmp_path / "x", instance=instance, settings=settings)
        assert res.n_instances == 0 and len(res.left_out) == len(PROMPTS)
        assert all("not valid on every dimension" in x for x in res.left_out)


def test_a_failed_plan_is_an_error_row_and_the_rest_proceed(tmp_path):
    from tests.servers.openai_server import Scripted

    bench, cands = _bench(tmp_path)
    with FakeVlmServer() as srv, dg.instance_for_test() as instance:
        vlm = VlmResource(backend="openai", base_urls=srv.base_url, model="judge-a", concurrency=1)
        res = graph_resources(bench, cands, tmp_path / "home", vlm=vlm)
        instance.add_dynamic_partitions("candidate_models", ["m"])
        srv.queue(*[Scripted(content="{not json") for _ in range(3)])  # every attempt of the first plan
        assert execute(instance, res, firm_run("T2V", with_inputs=True)).success
        rows = load("firm_checklists", res, instance, "T2V")
        bad = rows.filter(pl.col("error").is_not_null())
        assert bad.height == 1 and bad["error"][0].startswith("IF planner:") and bad["checklist_hash"][0] is None
        assert set(rows.filter(pl.col("error").is_null())["input_id"]) == set(PROMPTS) - set(bad["input_id"])
        out = execute(instance, res, firm_run("T2V", "m", with_inputs=True))
        assert out.success and all(e.passed for e in out.get_asset_check_evaluations())
        scores = load("firm_scores", res, instance, _key("m"))
        failed = scores.filter(pl.col("input_id") == bad["input_id"][0]).row(0, named=True)
        assert failed["if_rating"] is None and failed["if_reason"].startswith("IF planner:")
        assert failed["wc_rating"] is not None and failed["pq_rating"] is not None  # the other dimensions ran
        assert scores.filter(pl.col("input_id") != bad["input_id"][0])["if_rating"].null_count() == 0


def test_ti2v_first_frame_reaches_planner_and_verifier_and_a_missing_video_is_a_reason(tmp_path):
    """TI2V: the condition image goes to the planner and to the IF verifier, labelled (the firm
    package's docstring says what carries over); a model without a video for an input gets that reason on every
    dimension."""
    import cv2

    from tests.servers.openai_server import n_images, request_text

    bench, cands = tmp_path / "bench", tmp_path / "cands"
    (bench / "TI2V").mkdir(parents=True)
    cv2.imwrite(str(bench / "TI2V" / "q0.png"), pattern_clip(5)[0])
    (bench / "TI2V" / "manifest.jsonl").write_text(
        json.dumps({"id": "q0", "prompt": "The pattern from the first frame slides left", "first_frame": "q0.png"}) + "\n"
        + json.dumps({"id": "q1", "prompt": "The pattern slides right", "first_frame": "q0.png"}) + "\n")
    write_video(cands / "TI2V" / "m" / "q0.mp4", pattern_clip(5), 12)  # no video for q1
    with FakeVlmServer() as srv, dg.instance_for_test() as instance:
        vlm = VlmResource(backend="openai", base_urls=srv.base_url, model="judge-a", concurrency=2)
        settings = graph_settings(tmp_path / "argus", bench, cands)
        res = graph_resources(bench, cands, settings.evaluation_dir, vlm=vlm)
        instance.add_dynamic_partitions("candidate_models", ["m"])
        assert execute(instance, res, firm_run("TI2V", with_inputs=True)).success
        plans = srv.bodies("firm_if_plan")
        assert len(plans) == 2 and all(n_images(b) == 1 and "[first_frame] 1 frames" in request_text(b) for b in plans)
        out = execute(instance, res, firm_run("TI2V", "m", with_inputs=True))
        assert out.success and all(e.passed for e in out.get_asset_check_evaluations())
        verify, = srv.bodies("firm_if_verify")
        assert n_images(verify) == 1 + 8 and "[first_frame]" in request_text(verify)
        scores = load("firm_scores", res, instance, dg.MultiPartitionKey({"task": "TI2V", "model": "m"}))
        by_id = {r["input_id"]: r for r in scores.iter_rows(named=True)}
        assert by_id["q0"]["if_rating"] is not None
        assert all(by_id["q1"][f"{d}_rating"] is None and "missing: no video" in by_id["q1"][f"{d}_reason"]
                   for d in ("if", "wc", "pq"))
        # the export: instruction following shows the first frame before the video's frames, as judged
        from PIL import Image

        res = export_firm(tmp_path / "out", instance=instance, settings=settings)
        assert res.n_videos == 1 and len(res.left_out) == 1 and res.left_out[0].startswith("TI2V/m/q1: left out")
        recs = {r["dimension"]: r for r in map(json.loads, (tmp_path / "out" / "train.jsonl").read_text().splitlines())}
        assert recs[IF]["image_roles"] == ["first_frame"] + ["output_video"] * 8
        assert "starting from the given first frame" in recs[IF]["instruction"]
        assert recs[WC]["image_roles"] == ["output_video"] * 8
        with Image.open(tmp_path / "out" / recs[IF]["images"][0]) as im:
            first = np.asarray(im.convert("RGB"), dtype=float)
        assert first.shape == (64, 96, 3)  # the condition image itself (JPEG), not a frame of the video
        png = pattern_clip(5)[0][:, :, ::-1].astype(float)  # cv2.imwrite took the array as BGR: the file's RGB
        assert np.abs(first - png).mean() < np.abs(first - png[:, :, ::-1]).mean()


def test_each_video_has_a_page_with_its_checklist_verdicts_and_evidence(online):
    """Each video's FIRM-Video page, read in headless Chromium: its three ratings as firm_scores holds
    them, and each checklist item of IF and WC with its verdict in words and the verifier's evidence as
    firm_verdicts holds them; the partition's index lists every video with its ratings and links it."""
    from .chromium import launched, open_file

    res, instance = online["res"], online["instance"]
    folder = Path(res["bench"].reports_path()) / "T2V" / "m" / "firm"
    scores = load("firm_scores", res, instance, _key("m"))
    verdicts = load("firm_verdicts", res, instance, _key("m"))
    # IF asks whether a requirement is met, WC whether the video violates coherence (yes = a violation)
    words = {(IF, True, "yes"): "met", (IF, True, "no"): "not met", (WC, True, "yes"): "violation",
             (WC, True, "no"): "no violation"}
    # the pages, as a command ends: the site reads firm_scores as Dagster recorded it (no leaderboard yet)
    assert execute(instance, res, RunSpec("site", ["site"])).success
    with launched() as browser:
        # the overview's FIRM-Video section, with the loopback judge's IF and WC scored: each cell the
        # stored firm_scores' summary, each model's name a link to its pages
        overview, errors = open_file(browser, Path(res["bench"].reports_path()) / "index.html")
        shown = overview.locator("section#firm table.firm tbody tr").evaluate_all(
            "rs => rs.map(r => [r.dataset.model, r.querySelector('a.firm-index') !== null,"
            " Object.fromEntries(Array.from(r.querySelectorAll('td[data-key]')).map(c => [c.dataset.key, c.textContent]))])")
        every = pl.concat([load("firm_scores", res, instance, _key(m)) for m in MODELS])
        summary = firm_summary_table(every)
        assert [m for m, _, _ in shown] == summary["model"].to_list() and all(linked for _, linked, _ in shown)
        for (_, _, cells), r in zip(shown, summary.iter_rows(named=True)):
            assert cells == {k: ("–" if r[k] is None else f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k]))
                             for k in cells}, cells
        assert summary["mean_if"].null_count() == 0 and summary["mean_wc"].null_count() == 0
        assert errors == [], errors
        overview.close()
        index, errors = open_file(browser, folder / "_index.html")
        listed = index.locator("table.firm-index tbody tr").evaluate_all(
            "rs => rs.map(r => [r.dataset.input, r.querySelector('a').getAttribute('href'),"
            " ['if', 'wc', 'pq'].map(k => r.querySelector('td[data-key=' + k + ']').textContent)])")
        assert [(i, [int(x) for x in ratings]) for i, _, ratings in listed] == [
            (r["input_id"], [r["if_rating"], r["wc_rating"], r["pq_rating"]]) for r in scores.iter_rows(named=True)]
        assert errors == [], errors
        index.close()
        for input_id, link, _ in listed:
            page, errors = open_file(browser, folder / link)
            row = scores.filter(pl.col("input_id") == input_id).row(0, named=True)
            ratings = dict(page.locator(".ratings > div").evaluate_all(
                "ds => ds.map(d => [d.dataset.dimension, d.querySelector('b').textContent])"))
            assert ratings == {s: str(row[f"{s}_rating"]) for s in ("if", "wc", "pq")}, ratings
            for dim, short in ((IF, "if"), (WC, "wc")):
                shown = page.locator(f'section[data-dimension="{short}"] table.checklist tbody tr').evaluate_all(
                    "rs => rs.map(r => [r.dataset.item, r.querySelector('td.verdict').textContent,"
                    " r.querySelector('td.evidence').textContent])")
                stored = verdicts.filter((pl.col("input_id") == input_id) & (pl.col("dimension") == dim))
                assert shown and shown == [[v["item_id"], words.get((dim, v["verifiable"], v["verdict"]), "cannot tell"),
                                            v["evidence"] or ""]
                                           for v in stored.iter_rows(named=True)], (input_id, dim)
            assert errors == [], errors
            page.close()
    assert len(listed) == len(PROMPTS)
