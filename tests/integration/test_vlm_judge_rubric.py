"""Rubric generation, the criterion judge and vlm_qa against the loopback OpenAI-compatible server."""

import json

import cv2
import numpy as np
import pytest

from argus_dagster.infra.media import JUDGE_POLICY, write_video
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.registry import ToolSuite, embedded_suite
from argus_dagster.method.evidence.tools.vlm_qa import QA_PROMPT_VERSION, VlmQa
from argus_dagster.method.gather import collect_evidence
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.judge import JUDGE_PROMPT_VERSION, VlmJudge, judge_view
from argus_dagster.method.rubric.generate import PROMPT_VERSION, generate_with_vlm, system_prompt
from argus_dagster.method.rubric.postprocess import postprocess
from argus_dagster.method.rubric.schema import RubricError, parse_rubric
from argus_dagster.method.stages import judge_criteria
from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.openai_compatible import OpenAICompatibleClient
from tests.servers.openai_server import Scripted, dead_url, kind_of, n_images, request_text, rubric_for

pytestmark = pytest.mark.integration

TASKS = ("T2V", "TI2V", "TS2V", "TV2V", "TSV2V")


@pytest.fixture()
def client(server):
    return OpenAICompatibleClient(server.base_url, "judge-model", backoff_s=0.01, seed=0)


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    d = tmp_path_factory.mktemp("vlm_media")
    rng = np.random.default_rng(1)
    frames = np.stack([np.roll(rng.integers(0, 255, (64, 96, 3), dtype=np.uint8), 2 * i, axis=1) for i in range(36)])
    write_video(d / "source.mp4", frames, 12.0)
    write_video(d / "output.mp4", frames[:, :, ::-1], 12.0)
    for name in ("first.png", "subject.png"):
        cv2.imwrite(str(d / name), rng.integers(0, 255, (80, 120, 3), dtype=np.uint8))
    return d


def instance(task: str, media) -> InputInstance:
    kw = {}
    if task == "TI2V":
        kw["first_frame"] = str(media / "first.png")
    if task in ("TS2V", "TSV2V"):
        kw["subject_images"] = (str(media / "subject.png"),)
    if task in ("TV2V", "TSV2V"):
        kw["source_video"] = str(media / "source.mp4")
    return InputInstance(id=f"in_{task.lower()}", prompt=f"A {task} prompt about a red kite.", content_hash=f"h{task}", **kw)


@pytest.mark.parametrize("task", TASKS)
def test_a_valid_rubric_for_every_task(task, server, client, media):
    stats = CallStats()
    inst = instance(task, media)
    rubric = generate_with_vlm(inst, client, stats=stats)
    rubric, _ = postprocess(rubric, has_subject=bool(inst.subject_images), has_source=inst.source_video is not None)
    g = rubric.generator
    assert {k: g[k] for k in ("backend", "model", "prompt_version", "input_hash")} == {
        "backend": "openai", "model": "judge-model", "prompt_version": PROMPT_VERSION, "input_hash": inst.content_hash}
    # What the generator was told travels with the rubric (for its report): the one instruction and the request.
    assert g["instruction"] == system_prompt() and "rule_problems" not in g
    assert inst.prompt in g["request"] and "[image]" in g["request"] or task == "T2V"
    assert server.requests[0]["body"]["max_tokens"] >= 16000
    assert [c.id for c in rubric.criteria] == [c["id"] for c in rubric_for(task)["criteria"]]
    body = server.requests[0]["body"]
    text = request_text(body)
    assert f"Task: {task} (a label only" in text and inst.prompt in text
    # Conditions are attached and labelled by role: the source at 2 fps, at most 8 frames (3 s clip: 6).
    expect = {"[first_frame]": task == "TI2V", "[subject_image 1]": task in ("TS2V", "TSV2V"),
              "[source_video] 6 frames sampled at 2 fps": task in ("TV2V", "TSV2V")}
    for label, present in expect.items():
        assert (label in text) == present, label
    assert n_images(body) == (task == "TI2V") + (task in ("TS2V", "TSV2V")) + 6 * (task in ("TV2V", "TSV2V"))
    assert stats.calls == 1 and stats.prompt_tokens > 0


@pytest.mark.parametrize("wrap", [
    lambda s: f"```json\n{s}\n```",
    lambda s: f"Sure! Here is the rubric you asked for:\n\n{s}\n\nLet me know if you need changes.",
    lambda s: f"<think>First list the dimensions... {{\"draft\": 1}}</think>\n{s}",
])
def test_rubric_answers_are_parsed_leniently(wrap, server, client, media):
    server.queue(Scripted(content=wrap(json.dumps(rubric_for("T2V")))))
    assert len(generate_with_vlm(instance("T2V", media), client).criteria) == 5
    assert len(server.requests) == 1


def test_an_invalid_rubric_is_repaired_once_with_the_validation_errors(server, client, media):
    bad = rubric_for("T2V")
    bad["criteria"][1]["importance"] = "urgent"
    bad["criteria"][2]["dimension"] = 31
    server.queue(Scripted(content=json.dumps(bad)))
    rubric = generate_with_vlm(instance("T2V", media), client)
    assert rubric.criterion("action").importance == "high"
    repair = request_text(server.requests[1]["body"])
    assert "criterion 'action' field 'importance'" in repair and "criterion 'temporal_quality' field 'dimension'" in repair


def test_a_rubric_still_invalid_after_the_repair_is_a_recorded_error(server, client, media):
    bad = rubric_for("T2V")
    bad["criteria"][0]["type"] = "critical"
    server.queue(Scripted(content=json.dumps(bad)), Scripted(content=""))
    with pytest.raises(RubricError, match=r"input 'in_t2v'.*unusable after 1 repair"):
        generate_with_vlm(instance("T2V", media), client)
    assert len(server.requests) == 2


def test_rubric_generation_that_gets_no_answer_is_a_recorded_error(media):
    c = OpenAICompatibleClient(dead_url(), "m", max_retries=1, backoff_s=0.01)
    with pytest.raises(RubricError, match="rubric generation failed: VLM call failed after 2 attempts"):
        generate_with_vlm(instance("T2V", media), c)


# -- the judge ---------------------------------------------------------------------------------------

def judged(server, client, media, *answers: str, rubric_task: str = "T2V"):
    server.queue(*[Scripted(content=a) for a in answers])
    rubric = parse_rubric(rubric_for(rubric_task))
    c = rubric.criteria[0]
    frames = MediaStore({"output_video": str(media / "output.mp4")}).frames("output_video", JUDGE_POLICY)
    return VlmJudge(client, parse_retries=2).judge(judge_view(c), [{"tool": "vlm_qa", "ok": True, "answer": "yes"}], frames)


@pytest.mark.parametrize("answer, score", [
    ('{"score": 7, "rationale": "clear"}', 7),
    ('```json\n{"score": 3, "rationale": "weak"}\n```', 3),
    ('The subject is there. {"score": 9, "rationale": "visible"} That is all.', 9),
    ('{"score": "8/10", "rationale": "mostly"}', 8),
    ('{"score": 14, "rationale": "over"}', 10),
    ('{"score": -2, "rationale": "under"}', 0),
    ('<think>{"score": 1}</think>{"score": 6.6, "rationale": "r"}', 7),
])
def test_judge_answers(answer, score, server, client, media):
    j = judged(server, client, media, answer)
    assert j.score == score and j.judge == f"vlm/openai/judge-model/{JUDGE_PROMPT_VERSION}"
    # A score outside the scale is clamped, and the row says from what.
    assert ("outside 0-10: clamped to" in j.rationale) == (answer.startswith('{"score": 14') or answer.startswith('{"score": -2'))


@pytest.mark.parametrize("bad", ["", '{"score": 7', '{"rationale": "no score"}', '{"score": "high"}', "no idea"])
def test_judge_retries_an_unusable_answer(bad, server, client, media):
    j = judged(server, client, media, bad, '{"score": 5, "rationale": "ok"}')
    assert j.score == 5 and len(server.requests) == 2


def test_judge_gives_up_after_bounded_retries_and_leaves_the_criterion_unscored(server, client, media):
    j = judged(server, client, media, "", "nothing", "{broken")
    assert j.score is None and j.rationale.startswith("unscored: unusable answer after 3 attempts")
    assert len(server.requests) == 3


def test_the_judge_sees_the_view_evidence_and_frames_but_never_weights_or_caps(server, client, media):
    rubric = parse_rubric(rubric_for("TV2V"))
    rubric, _ = postprocess(rubric, has_subject=False, has_source=True)
    rows = [{"criterion_id": c.id, "evidence": json.dumps([{"tool": "change_probe", "ok": True,
                                                            "mean_abs_diff": 9.5}]), "error": None}
            for c in rubric.criteria]
    frames = MediaStore({"output_video": str(media / "output.mp4")}).frames("output_video", JUDGE_POLICY)
    out = judge_criteria(rubric, rows, VlmJudge(client), frames=frames)
    assert all(r["score"] is not None for r in out)
    bodies = server.bodies("judge")
    assert len(bodies) == len(rubric.criteria)
    for body in bodies:
        text = request_text(body)
        for hidden in ("importance", "hard_cap", "fail_threshold", '"type"', "derivable_from"):
            assert hidden not in text, hidden
        view = json.loads(text.split("Criterion:\n", 1)[1].split("\nTool evidence:", 1)[0])
        assert set(view) == {"id", "dimension", "criterion", "scoring_rule", "failure_modes", "aggregation",
                             "target_entity"}
        assert "mean_abs_diff" in text and n_images(body) == len(frames.array) == 8


def test_every_request_about_a_video_opens_with_the_same_system_text_and_frames(server, client, media):
    """A prefix-caching server prefills a video's frames once: vlm_qa questions and judgments of one
    candidate share everything up to and including the frames, and differ only after them."""
    store = MediaStore({"output_video": str(media / "output.mp4"), "subject_image": str(media / "subject.png")},
                       {"output_video": "digest-of-output"})
    qa = VlmQa(client)
    qa.run({"question": "Is the kite red?", "on": "output_video"}, store)
    qa.run({"question": "Same subject?", "on": "subject_image"}, store)
    rubric = parse_rubric(rubric_for("T2V"))
    rows = [{"criterion_id": c.id, "evidence": json.dumps([{"tool": "vlm_qa", "ok": True, "answer": "yes"}]),
             "error": None} for c in rubric.criteria]
    judge_criteria(rubric, rows, VlmJudge(client), frames=store.frames("output_video", JUDGE_POLICY))
    bodies = server.bodies()
    assert [kind_of(b) for b in bodies] == ["qa", "qa"] + ["judge"] * len(rubric.criteria)

    def opening(body):  # the system text, then the user message up to its last shared frame
        user = body["messages"][1]["content"]
        return body["messages"][0]["content"], user[:9]

    first = opening(bodies[0])
    assert first[1][0]["text"].startswith("[output_video] 8 frames (t = ")
    assert all(p["type"] == "image_url" for p in first[1][1:])
    for body in bodies[1:]:
        assert opening(body) == first
        # what differs comes after the frames
        assert body["messages"][1]["content"][9]["type"] == "text"
    assert "criterion judge" in bodies[-1]["messages"][1]["content"][9]["text"]
    assert "You answer one question" in bodies[0]["messages"][1]["content"][9]["text"]


# -- vlm_qa and the VLM-only ablation -----------------------------------------------------------------

def test_vlm_qa_answers_on_the_frames_of_the_media_it_names(server, client, media):
    store = MediaStore({"output_video": str(media / "output.mp4"), "subject_image": str(media / "subject.png")})
    qa = VlmQa(client)
    rec = qa.run({"question": "Is the kite red?", "on": "output_video"}, store)
    assert rec["ok"] and rec["answer"].startswith("Yes") and rec["n_frames"] == 8
    rec = qa.run({"question": "What is shown?", "on": "subject_image"}, store)
    # The output video's 8 frames first (shared with every request about the video), the image after them.
    body = server.requests[-1]["body"]
    assert rec["n_frames"] == 1 and n_images(body) == 8 + 1
    parts = body["messages"][1]["content"]
    assert [p["type"] for p in parts[:10]] == ["text"] + ["image_url"] * 8 + ["text"]
    assert parts[9]["text"] == "[subject_image] image:" and parts[10]["type"] == "image_url"
    assert parts[-1]["text"] == "Question (about [subject_image]): What is shown?"
    assert qa.version == f"openai:judge-model:{QA_PROMPT_VERSION}"
    server.queue(*[Scripted(content="") for _ in range(3)])
    rec = qa.run({"question": "Anything?", "on": "output_video"}, store)
    assert not rec["ok"] and "unusable answer after 3 attempts" in rec["error"]


def test_vlm_only_replaces_every_plan_with_one_vlm_qa(server, client, media):
    inst = instance("TV2V", media)
    rubric = parse_rubric(rubric_for("TV2V"))
    base = embedded_suite()
    suite = ToolSuite({**base.tools, "vlm_qa": VlmQa(client)})
    rows = collect_evidence(inst, rubric, str(media / "output.mp4"), suite, vlm_only=True)
    assert [[s["tool"] for s in json.loads(r["plan"])] for r in rows] == [["vlm_qa"]] * len(rows)
    assert all(r["n_ok"] == 1 for r in rows)
    assert len(server.bodies("qa")) == len(rubric.criteria) and all(kind_of(b) == "qa" for b in server.bodies())


def test_a_generated_rubric_is_frozen_until_its_input_generator_or_prompt_changes(server, client, media, tmp_path,
                                                                                    monkeypatch):
    from argus_dagster.method.rubric import generate as gen
    from argus_dagster.method.rubric.store import resolve_rubric

    inst = instance("T2V", media)

    def resolve(inst, identity):
        return resolve_rubric(inst, "T2V", tmp_path / "bench", tmp_path / "frozen", identity,
                              lambda i: generate_with_vlm(i, client))

    identity = gen.generator_identity("openai", "judge-model")
    assert resolve(inst, identity)[1] == "generated" and len(server.requests) == 1
    assert resolve(inst, identity)[1] == "loaded" and len(server.requests) == 1
    changed = InputInstance(id=inst.id, prompt=inst.prompt + " At dusk.", content_hash="another")
    assert resolve(changed, identity)[1] == "generated" and len(server.requests) == 2
    assert resolve(changed, gen.generator_identity("openai", "other-model"))[1] == "generated"
    monkeypatch.setattr(gen, "PROMPT_VERSION", "rubric-next")
    assert resolve(changed, gen.generator_identity("openai", "judge-model"))[1] == "generated"
    assert resolve(changed, gen.generator_identity("openai", "judge-model"))[1] == "loaded"
    assert len(server.requests) == 4


def test_one_instruction_for_every_task_and_the_user_turn_states_only_facts(server, client, media):
    for task in TASKS:
        generate_with_vlm(instance(task, media), client)
    systems = {json.dumps(b["messages"][0]) for b in server.bodies("rubric")}
    assert len(systems) == 1  # the same instruction, whatever the task
    ts2v = request_text(server.bodies("rubric")[2])
    assert "Inputs present: first frame: no; subject images: 1; source video: no." in ts2v


def test_a_rule_broken_in_the_answer_is_named_in_the_repair(server, client, media):
    bad = rubric_for("TV2V")
    bad["criteria"] = [c for c in bad["criteria"] if c["id"] != "degenerate_edit"]
    bad["criteria"][0]["dimension"] = 17  # subject identity, without a subject
    bad["dimensions_considered"] = bad["dimensions_considered"][:20]
    server.queue(Scripted(content=json.dumps(bad)))
    rubric = generate_with_vlm(instance("TV2V", media), client)
    repair = request_text(server.requests[1]["body"])
    assert "failed validation on 3 point(s)" in repair
    assert "criterion 'edit_following' field 'dimension': 17 (subject identity) needs an input" in repair
    assert "dimensions [21, 22] are not reported" in repair
    assert "no hard degenerate-edit criterion under dimension 18 with hard_cap 2" in repair
    assert "degenerate_edit" in [c.id for c in rubric.criteria]


def test_a_rule_still_broken_after_the_repair_is_accepted_and_recorded(server, client, media):
    bad = rubric_for("T2V")
    for c in bad["criteria"][:3]:
        c.update(type="hard", hard_cap=6)
    server.queue(Scripted(content=json.dumps(bad)), Scripted(content=json.dumps(bad)))
    rubric = generate_with_vlm(instance("T2V", media), client)
    assert rubric.generator["rule_problems"] == ["rubric: 3 hard criteria; at most 2 (make the others soft)"]


def test_a_last_answer_with_loose_fields_is_read_leniently_and_recorded(server, client, media):
    bad = rubric_for("T2V")
    bad["criteria"][1]["importance"] = "urgent"
    bad["criteria"][2]["hard_cap"] = "6"
    server.queue(Scripted(content=json.dumps(bad)), Scripted(content=json.dumps(bad)))
    rubric = generate_with_vlm(instance("T2V", media), client)
    assert rubric.criterion("action").importance == "medium" and rubric.criterion("temporal_quality").hard_cap == 6
    assert len(server.requests) == 2
    problems = rubric.generator["rule_problems"]
    assert any(p.startswith("read leniently: criterion 'action' field 'importance'") for p in problems)
    # a soft criterion with a cap breaks a rule: recorded too
    assert "criterion 'temporal_quality' field 'hard_cap': a soft criterion has hard_cap null" in problems


def counted(client, **kw) -> VlmJudge:
    """A judge whose calls are counted (as the assets' are): each row's ledger sees them."""
    return VlmJudge(client, stats=CallStats(), **kw)


def _rows_for(rubric):
    return [{"criterion_id": c.id, "evidence": json.dumps([{"tool": "vlm_qa", "ok": True, "answer": "yes"}]),
             "error": None} for c in rubric.criteria]


def test_judgments_made_ahead_are_taken_once_by_the_same_run_with_their_cost(server, client, media, tmp_path):
    """criterion_evidence's step judges ahead (``ahead=True``) into the cache; the same run's
    criterion_scores takes each judgment with its cost and asks nothing; another run finds a hit
    costing nothing."""
    from argus_dagster.infra.cache import ContentCache

    rubric = parse_rubric(rubric_for("T2V"))
    cache = ContentCache(tmp_path / "cache", "judgments")
    store = MediaStore({"output_video": str(media / "output.mp4")}, {"output_video": "sha-out"})
    frames = store.frames("output_video", JUDGE_POLICY)
    ahead = judge_criteria(rubric, _rows_for(rubric), counted(client), frames=frames, cache=cache,
                           video_sha256="sha-out", run_id="run-1", ahead=True)
    n = len(rubric.criteria)
    assert all(r["asked"] for r in ahead) and len(server.bodies("judge")) == n
    taken = judge_criteria(rubric, _rows_for(rubric), counted(client), frames=frames, cache=cache,
                           video_sha256="sha-out", run_id="run-1", claimed={})
    assert len(server.bodies("judge")) == n  # nothing asked again
    assert [r["score"] for r in taken] == [r["score"] for r in ahead]
    assert all(r["judged_ahead"] and not r["cache_hit"] and not r["asked"] for r in taken)
    for made, took in zip(ahead, taken):  # the cost the evidence step paid is on the scores' rows
        assert took["prompt_tokens"] == made["prompt_tokens"] > 0 and took["vlm_requests"] == made["vlm_requests"] == 1
        assert took["images_sent"] == made["images_sent"] == 8
    later = judge_criteria(rubric, _rows_for(rubric), counted(client), frames=frames, cache=cache,
                           video_sha256="sha-out", run_id="run-2", claimed={})
    assert all(r["cache_hit"] and not r["judged_ahead"] and r["prompt_tokens"] == 0 for r in later)
    assert len(server.bodies("judge")) == n


def test_an_identical_video_takes_a_judgment_made_ahead_once(server, client, media, tmp_path):
    """Two samples with the same bytes share judgment keys: the first row to take one carries its
    cost, the second is a hit (the ledger counts each request once)."""
    from argus_dagster.infra.cache import ContentCache

    rubric = parse_rubric(rubric_for("T2V"))
    cache = ContentCache(tmp_path / "cache", "judgments")
    frames = MediaStore({"output_video": str(media / "output.mp4")}).frames("output_video", JUDGE_POLICY)
    judge_criteria(rubric, _rows_for(rubric), counted(client), frames=frames, cache=cache, video_sha256="same",
                   run_id="run-1", ahead=True)
    claimed: dict = {}
    first, second = (judge_criteria(rubric, _rows_for(rubric), counted(client), frames=frames, cache=cache,
                                    video_sha256="same", run_id="run-1", claimed=claimed) for _ in range(2))
    assert all(r["judged_ahead"] and r["prompt_tokens"] > 0 for r in first)
    assert all(r["cache_hit"] and not r["judged_ahead"] and r["prompt_tokens"] == 0 for r in second)


def test_an_unscored_judgment_made_ahead_stands_in_its_run_and_is_asked_again_by_the_next(server, client, media,
                                                                                          tmp_path):
    from argus_dagster.infra.cache import ContentCache

    rubric = parse_rubric(rubric_for("T2V"))
    rubric.criteria[:] = rubric.criteria[:1]
    cache = ContentCache(tmp_path / "cache", "judgments")
    frames = MediaStore({"output_video": str(media / "output.mp4")}).frames("output_video", JUDGE_POLICY)
    server.queue(*[Scripted(content="no idea")] * 3)  # three unusable answers: unscored
    [ahead] = judge_criteria(rubric, _rows_for(rubric), counted(client, parse_retries=2), frames=frames,
                             cache=cache, video_sha256="v", run_id="run-1", ahead=True)
    assert ahead["score"] is None and ahead["retry"] and len(server.requests) == 3
    [taken] = judge_criteria(rubric, _rows_for(rubric), counted(client, parse_retries=2), frames=frames,
                             cache=cache, video_sha256="v", run_id="run-1", claimed={})
    assert taken["score"] is None and taken["judged_ahead"] and taken["retry"] and len(server.requests) == 3
    assert taken["vlm_parse_retries"] == 2 and taken["vlm_requests"] == 3
    [again] = judge_criteria(rubric, _rows_for(rubric), counted(client, parse_retries=2), frames=frames,
                             cache=cache, video_sha256="v", run_id="run-2", claimed={})
    assert again["asked"] and again["score"] is not None and len(server.requests) == 4


def test_judge_video_says_when_the_judge_was_asked_without_frames(server, client, media, tmp_path):
    """A video that cannot be decoded: the judge asked about it saw no frames (``blind``); a step that
    takes every judgment from the cache or from its run's evidence step asks nothing and says nothing."""
    from argus_dagster.infra.cache import ContentCache
    from argus_dagster.method.stages import judge_video

    rubric = parse_rubric(rubric_for("T2V"))
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video at all" * 100)
    cache = ContentCache(tmp_path / "cache", "judgments")
    rows, blind = judge_video(rubric, _rows_for(rubric), counted(client), str(broken), "sha-broken", cache=cache,
                              run_id="run-1", ahead=True)
    assert blind and all(r["asked"] for r in rows)
    assert all(n_images(b) == 0 for b in server.bodies("judge"))
    taken, blind = judge_video(rubric, _rows_for(rubric), counted(client), str(broken), "sha-broken", cache=cache,
                               run_id="run-1", claimed={})
    assert not blind and all(r["judged_ahead"] and not r["asked"] for r in taken)
    rows, blind = judge_video(rubric, _rows_for(rubric), counted(client), str(media / "output.mp4"), "sha-ok",
                              cache=cache, run_id="run-2")
    assert not blind and all(r["asked"] and r["score"] is not None for r in rows)
