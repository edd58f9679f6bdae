"""The FIRM-Video protocol against the loopback OpenAI-compatible server: planner, verifiers, grounding,
PQ, garbage answers and retries, a frozen checklist reused through the content cache, and the export."""

import json

import numpy as np
import pytest

from argus_dagster.infra.cache import ContentCache
from argus_dagster.infra.media import Frames
from argus_dagster.protocols.firm.batch import OfflineRecords, VideoJob, evaluate_videos, plan_checklists
from argus_dagster.protocols.firm.evaluator import FirmEvaluator
from argus_dagster.protocols.firm.prompts import IF_PLAN_VERSION
from argus_dagster.protocols.firm.scoring import if_rating, if_score, score_if, wc_rating, wc_score
from argus_dagster.protocols.firm.training_records import export_from_rows, export_records, frame_refs, write_export
from argus_dagster.protocols.firm.types import IF, PQ, WC
from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.openai_compatible import OpenAICompatibleClient
from argus_dagster.vlm.reply import ParseError
from tests.servers.openai_server import Scripted, n_images, request_text

pytestmark = pytest.mark.integration

PROMPT = "A red kite over a beach, two children running and a dog chasing them"


@pytest.fixture()
def client(server):
    return OpenAICompatibleClient(server.base_url, "firm-model", backoff_s=0.01, seed=0)


def frames(seed: int, n: int = 8) -> Frames:
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 255, (n, 48, 64, 3), dtype=np.uint8)
    return Frames(arr, tuple(range(0, 3 * n, 3)), tuple(i * 0.25 for i in range(n)))


def test_planner_is_output_blind_and_frozen_through_the_cache(server, client, tmp_path):
    cache_dir = tmp_path / "cache"
    first = FirmEvaluator(client, cache=ContentCache(cache_dir, "firm")).plan_if(PROMPT)
    plans = server.bodies("firm_if_plan")
    assert len(plans) == 1 and n_images(plans[0]) == 0  # the prompt only, no candidate video
    assert f"Prompt: {PROMPT}" in request_text(plans[0])
    assert [i.question for i in first.items][:2] == ["Does the video show A red kite over a beach?",
                                                     "Does the video show two children running?"]
    assert first.items[0].importance == 5 and first.maker["prompt_version"] == IF_PLAN_VERSION
    # a second model's evaluation (a new evaluator, a new process) reuses the frozen checklist
    second = FirmEvaluator(OpenAICompatibleClient(server.base_url, "firm-model"),
                           cache=ContentCache(cache_dir, "firm")).plan_if(PROMPT)
    assert second.content_hash == first.content_hash and len(server.bodies("firm_if_plan")) == 1
    # another planner model or prompt version is another checklist
    FirmEvaluator(OpenAICompatibleClient(server.base_url, "other-planner"),
                  cache=ContentCache(cache_dir, "firm")).plan_if(PROMPT)
    assert len(server.bodies("firm_if_plan")) == 2


def test_planner_garbage_is_asked_again_then_fails_with_the_reason(server, client):
    stats = CallStats()
    ev = FirmEvaluator(client, stats=stats, parse_retries=2)
    server.queue(Scripted(content="I think the prompt has a kite."),
                 Scripted(content='{"requirements": [{"question": "Is there a kite?", "importance": 9}]}'))
    cl = ev.plan_if(PROMPT)
    assert len(cl.items) == 3 and stats.parse_retries == 2
    third = server.bodies("firm_if_plan")[2]
    assert "importance 9 is not an integer 1-5" in request_text(third)  # the reason is shown back
    server.queue(*[Scripted(content="{broken") for _ in range(3)])
    with pytest.raises(ParseError, match="after 3 attempts"):
        ev.plan_if("another prompt")


def test_if_verifier_sees_prompt_frames_and_no_importance(server, client):
    ev = FirmEvaluator(client)
    cl = ev.plan_if(PROMPT)
    res = ev.verify_if(cl, PROMPT, frames(1))
    body = server.bodies("firm_if_verify")[0]
    text = request_text(body)
    assert n_images(body) == 8 and PROMPT in text and "importance" not in text.split("Checklist:")[1]
    assert res.scored and len(res.verdicts) == len(cl.items)
    z = [v.yes for v in res.verdicts]
    assert res.score == if_score([i.importance for i in cl.items], z)
    assert res.rating == if_rating(res.score) and res.checklist_hash == cl.content_hash


def test_if_verifier_failure_is_a_reason_not_an_exception(server, client):
    ev = FirmEvaluator(client, parse_retries=1)
    cl = ev.plan_if(PROMPT)
    server.queue(Scripted(content='{"answers": [{"id": "r1", "answer": "yes"}]}'),
                 Scripted(content='{"answers": []}'))
    res = ev.verify_if(cl, PROMPT, frames(1))
    assert not res.scored and res.reason.startswith("IF verifier:") and "no answer for r1" in res.reason
    server.queue(Scripted(status=400, raw=b'{"error": "bad"}'))
    res = ev.verify_if(cl, PROMPT, frames(2))
    assert not res.scored and "HTTP 400" in res.reason


def test_wc_grounding_is_prompt_blind_and_verifier_sees_neither_prompt_nor_importance(server, client):
    ev = FirmEvaluator(client)
    res = ev.evaluate_wc(PROMPT, frames(3), video_digest="v3")
    ground, = server.bodies("firm_wc_ground")
    questions, = server.bodies("firm_wc_questions")
    verify, = server.bodies("firm_wc_verify")
    assert n_images(ground) == 8 and "kite" not in request_text(ground)
    assert n_images(questions) == 0 and f"context only): {PROMPT}" in request_text(questions)
    vt = request_text(verify)
    assert n_images(verify) == 8 and "kite" not in vt and "importance" not in vt.split("Questions:")[1]
    assert res.scored and len(res.verdicts) == 6  # 3 targets x 2 questions
    # recompute from the verdicts: target importances 5, 2, 4 from the grounding answer
    cl_targets = {"main subject": 5, "background": 2, "main subject moves": 4}
    per = {}
    for k, v in enumerate(res.verdicts):
        per.setdefault(list(cl_targets)[k // 2], []).append(v.yes)
    assert res.score == wc_score([(cl_targets[t], b) for t, b in per.items()])
    assert res.rating == wc_rating(res.score)
    assert res.detail["scene_summary"] == "A scene shown in 8 frames."


def test_wc_targets_without_questions_are_asked_for_again(server, client):
    ev = FirmEvaluator(client)
    server.queue(Scripted(content=json.dumps({"scene_summary": "A dog runs.",
                                              "entities": [{"name": "dog", "importance": 4}],
                                              "actions": [{"name": "running", "importance": 3}]})),
                 Scripted(content=json.dumps({"targets": [{"target": "dog", "questions": [
                     {"question": "Does the dog grow a fifth leg?", "aspect": "structure"}]}]})))
    res = ev.evaluate_wc("a dog", frames(4))
    qs = server.bodies("firm_wc_questions")
    assert len(qs) == 2
    second = request_text(qs[1]).split("Targets:")[1]
    assert '"running"' in second and '"dog"' not in second
    assert res.scored and len(res.verdicts) == 3


def test_pq_and_the_full_video(server, client):
    ev = FirmEvaluator(client)
    cl = ev.plan_if(PROMPT)
    out = ev.evaluate(PROMPT, frames(5), cl, video_digest="v5")
    assert all(out[d].scored for d in (IF, WC, PQ))
    pq, = server.bodies("firm_pq")
    assert f"context only): {PROMPT}" in request_text(pq) and n_images(pq) == 8
    assert out[PQ].rating in range(1, 6) and out[PQ].rationale.startswith("Checked 10 defects in 8 frames")
    # without a cache a rerun asks again, and the deterministic server answers the same
    n = len(server.requests)
    again = ev.evaluate(PROMPT, frames(5), cl, video_digest="v5")
    assert len(server.requests) > n  # no cache configured: asked again (the next test caches)
    assert again[IF].score == out[IF].score


def test_two_models_share_one_checklist_and_export_one_record_per_video_and_dimension(server, client, tmp_path):
    cache = ContentCache(tmp_path / "cache", "firm")
    prompts = {"p1": PROMPT, "p2": "A snowman melting in the sun"}
    records, checklists = [], {}
    for m, model in enumerate(("model_a", "model_b")):
        ev = FirmEvaluator(OpenAICompatibleClient(server.base_url, "firm-model"), cache=cache)
        for k, (pid, prompt) in enumerate(prompts.items()):
            cl = ev.plan_if(prompt)
            checklists.setdefault(pid, cl.content_hash)
            assert cl.content_hash == checklists[pid]
            fr = frames(10 * m + k)
            res = ev.evaluate(prompt, fr, cl, video_digest=f"{model}/{pid}")
            recs, why = export_records(f"T2V/{model}/{pid}", prompt, frame_refs(f"/c/{model}/{pid}.mp4", fr), res)
            assert why == ""
            records += recs
    assert len(server.bodies("firm_if_plan")) == 2  # one per input, not per video
    n_requests = len(server.requests)
    ev = FirmEvaluator(OpenAICompatibleClient(server.base_url, "firm-model"), cache=cache)
    rerun = ev.evaluate(PROMPT, frames(0), ev.plan_if(PROMPT), video_digest="model_a/p1")
    assert len(server.requests) == n_requests and rerun[IF].scored  # all from the cache
    path = tmp_path / "firm.jsonl"
    assert write_export(path, records) == 12
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert sorted((r["video_id"], r["dimension"]) for r in lines) == sorted(
        (f"T2V/{m}/{p}", d) for m in ("model_a", "model_b") for p in prompts for d in (IF, WC, PQ))
    assert all(len(r["frames"]) == 8 and r["frames"][0].endswith("#frame=0&t=0.000") for r in lines)


def test_condition_references_reach_planner_and_verifier_and_the_key(server, client, tmp_path):
    """TI2V: the first frame goes to the planner and the verifier, labelled; its digest is in the key."""
    cache = ContentCache(tmp_path / "cache", "firm")
    ev = FirmEvaluator(client, cache=cache)
    refs = {"first_frame": [frames(7).array[0]]}
    cl = ev.plan_if("The kite from the first frame rises", references=refs, reference_digests={"first_frame": "d1"})
    plan = server.bodies("firm_if_plan")[0]
    assert n_images(plan) == 1 and "[first_frame] 1 frames" in request_text(plan)
    ev.plan_if("The kite from the first frame rises", references=refs, reference_digests={"first_frame": "d2"})
    assert len(server.bodies("firm_if_plan")) == 2  # another condition image is another checklist
    ev.verify_if(cl, "The kite from the first frame rises", frames(8), references=refs)
    verify = server.bodies("firm_if_verify")[0]
    assert n_images(verify) == 9 and "[first_frame]" in request_text(verify)
    for digest in ("d1", "d1", "d2"):  # cached per condition digest: the repeat is free, another digest is not
        ev.verify_if(cl, "The kite from the first frame rises", frames(8), video_digest="v8", references=refs,
                     reference_digests={"first_frame": digest})
    assert len(server.bodies("firm_if_verify")) == 3


def test_task_level_helpers_record_failures_and_proceed(server, client, tmp_path):
    from argus_dagster.infra.media import MediaError

    ev = FirmEvaluator(client, cache=ContentCache(tmp_path / "cache", "firm"))
    server.queue(*[Scripted(content="{nope") for _ in range(3)])  # the first input's planner fails
    rows, checklists = plan_checklists(ev, {"p_bad": "a cat", "p1": PROMPT}, max_workers=1)
    assert isinstance(checklists["p_bad"], str) and checklists["p_bad"].startswith("IF planner:")
    assert {r["input_id"] for r in rows} == {"p1"} and rows[0]["checklist_hash"] == checklists["p1"].content_hash

    def broken():
        raise MediaError("/c/m/p1b.mp4: cannot decode")

    jobs = [VideoJob("p1", PROMPT, "/c/m/p1.mp4", "d1", lambda: frames(1)),
            VideoJob("p_bad", "a cat", "/c/m/p_bad.mp4", "d2", lambda: frames(2)),
            VideoJob("p1", PROMPT, "/c/m/p1b.mp4", "d3", broken)]
    out = evaluate_videos(ev, jobs, checklists, video_prefix="T2V/m/", max_workers=2)
    s = {(r["input_id"], i): r for i, r in enumerate(out.scores)}
    assert s[("p1", 0)]["if_rating"] in range(1, 6) and s[("p1", 0)]["if_reason"] == ""
    assert s[("p_bad", 1)]["if_rating"] is None and s[("p_bad", 1)]["if_reason"].startswith("IF planner:")
    assert s[("p_bad", 1)]["wc_rating"] is not None  # the other dimensions still ran
    assert all("cannot decode" in s[("p1", 2)][f"{d}_reason"] for d in ("if", "wc", "pq"))
    assert [r["video_id"] for r in out.export] == ["T2V/m/p1"] * 3 and len(out.left_out) == 2
    # the stored score rows rebuild the same export without a call
    n = len(server.requests)
    again, left = export_from_rows(out.scores, {"p1": PROMPT, "p_bad": "a cat"}, video_prefix="T2V/m/")
    assert again == out.export and left == out.left_out and len(server.requests) == n
    assert export_from_rows(out.scores[:1], {})[1] == ["p1: no prompt for this input"]
    # IF verdicts of p1 match its stored checklist rows one to one
    if_items = sorted(r["item_id"] for r in out.verdicts if r["dimension"] == IF)
    assert if_items == sorted(r["item_id"] for r in rows)
    # offline: PQ from the records given, IF and WC unscored with the reason
    off = evaluate_videos(None, jobs[:1], {}, offline_records=lambda j: OfflineRecords(
        [{"tool": "motion_probe", "ok": True, "static_fraction": 1.0}], 1280, 720))
    assert off.scores[0]["pq_rating"] == 4 and "needs a VLM" in off.scores[0]["wc_reason"] and off.export == []


def test_grounding_and_pq_garbage_is_asked_again(server, client):
    stats = CallStats()
    ev = FirmEvaluator(client, stats=stats, parse_retries=2)
    server.queue(Scripted(content='{"scene_summary": "x", "entities": [{"name": "a", "importance": 0}], "actions": []}'))
    res = ev.evaluate_wc(PROMPT, frames(6))
    assert res.scored and stats.parse_retries == 1
    assert "importance 0 is not an integer 1-5" in request_text(server.bodies("firm_wc_ground")[1])
    server.queue(Scripted(content='{"defects": [], "rationale": "fine", "score": 7}'),
                 Scripted(content="<think>hmm</think>"))
    pq = ev.evaluate_pq(PROMPT, frames(6))
    assert pq.scored and stats.parse_retries == 3 and len(server.bodies("firm_pq")) == 3
    server.queue(*[Scripted(content='{"defects": [], "rationale": "fine", "score": "five"}') for _ in range(3)])
    pq = ev.evaluate_pq(PROMPT, frames(6))
    assert not pq.scored and pq.reason.startswith("PQ evaluator:") and "integer 1-5" in pq.reason
    server.queue(*[Scripted(status=500, raw=b"{}") for _ in range(6)])
    wc = FirmEvaluator(OpenAICompatibleClient(server.base_url, "m", max_retries=1, backoff_s=0.01)).evaluate_wc(
        PROMPT, frames(6))
    assert not wc.scored and wc.reason.startswith("WC checklist:") and "server error 500" in wc.reason


def test_reworded_rationales_never_see_or_move_the_score(server, client):
    ev = FirmEvaluator(client, word_rationales=True)
    cl = ev.plan_if(PROMPT)
    plain = FirmEvaluator(client).evaluate(PROMPT, frames(9), cl)
    n_before = len(server.bodies("firm_rationale"))
    worded = ev.evaluate(PROMPT, frames(9), cl)
    bodies = server.bodies("firm_rationale")[n_before:]
    assert len(bodies) == 2 and all("rating" not in request_text(b).split("Verified decisions:")[1] for b in bodies)
    for d in (IF, WC):
        assert (worded[d].score, worded[d].rating) == (plain[d].score, plain[d].rating)
        assert worded[d].rationale.startswith("In short: ") and worded[d].detail["rationale_source"] == "model"
    # a wording that states a score is refused and asked again; exhausted, the template stays
    r = score_if(cl, worded[IF].verdicts)
    server.queue(*[Scripted(content='{"rationale": "All met, so the score is 5/5."}') for _ in range(3)])
    ev.reword(r)
    assert r.rationale == score_if(cl, worded[IF].verdicts).rationale
    assert r.detail["rationale_source"].startswith("template (") and "states a score" in r.detail["rationale_source"]
