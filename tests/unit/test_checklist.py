"""FIRM-Video formulas, parsers, rationales, offline PQ and the export record, with hand-computed cases."""

import json

import numpy as np
import pytest

from argus_dagster.protocols.firm.offline import evaluate_offline, pq_offline, unscored_offline
from argus_dagster.protocols.firm.parsing import (
    parse_grounding,
    parse_if_plan,
    parse_pq,
    parse_rationale,
    parse_verdicts,
    parse_wc_questions,
)
from argus_dagster.protocols.firm.prompts import instruction
from argus_dagster.protocols.firm.scoring import (
    ALPHA,
    clean_ratio,
    if_rating,
    if_score,
    if_score_from_weights,
    if_weights,
    score_if,
    score_wc,
    serialized_weights,
    wc_rating,
    wc_score,
)
from argus_dagster.protocols.firm.tables import (
    FIRM_RANGES,
    checklist_from_rows,
    checklist_rows,
    firm_evaluator_scores,
    if_score_from_rows,
    score_row,
    verdict_rows,
)
from argus_dagster.protocols.firm.training_records import export_records, write_export
from argus_dagster.protocols.firm.types import (
    IF,
    PQ,
    WC,
    Checklist,
    ChecklistError,
    ChecklistItem,
    DimensionResult,
    DroppedItem,
    Verdict,
)
from argus_dagster.vlm.reply import ParseError

# ----------------------------------------------------------------------------------------- ratings


@pytest.mark.parametrize("s, r", [(0.0, 1), (0.3499, 1), (0.35, 2), (0.6999, 2), (0.70, 3), (0.8499, 3),
                                  (0.85, 4), (0.9999, 4), (1.0, 5)])
def test_if_rating_edges(s, r):
    assert if_rating(s) == r


@pytest.mark.parametrize("s, r", [(0.0, 1), (0.1999, 1), (0.20, 2), (0.5799, 2), (0.58, 3), (0.7799, 3),
                                  (0.78, 4), (0.8899, 4), (0.89, 5), (1.0, 5)])
def test_wc_rating_edges(s, r):
    assert wc_rating(s) == r


@pytest.mark.parametrize("bad", [-0.01, 1.0001, float("nan"), "0.5"])
def test_rating_rejects_out_of_range(bad):
    with pytest.raises(ChecklistError):
        if_rating(bad)


# ------------------------------------------------------------------------------------------------ IF


def test_if_weights_and_score_by_hand():
    # m = (5, 3, 2): w = (0.5, 0.3, 0.2); z = (1, 0, 1) -> 0.7 -> rating 3
    assert if_weights([5, 3, 2]) == pytest.approx([0.5, 0.3, 0.2])
    assert if_score([5, 3, 2], [True, False, True]) == 0.7
    assert if_rating(if_score([5, 3, 2], [True, False, True])) == 3
    # m = (1, 2): z = (0, 1) -> 2/3 = 0.6667 (rounded to 4 places) -> rating 2
    assert if_score([1, 2], [False, True]) == 0.6667
    # everything met is exactly 1.0 whatever the weights (a 5 needs every requirement)
    assert if_score([1, 1, 1, 4, 3, 5, 2], [True] * 7) == 1.0
    assert if_rating(if_score([3, 3, 3], [True, True, True])) == 5
    # m = (7 x 1, 13): missing one importance-1 item -> 19/20 = 0.95 -> 4, not 5
    assert if_score([1] * 7 + [5, 5, 3], [False] + [True] * 9) == round(19 / 20, 4)
    assert if_rating(0.95) == 4


def test_if_score_exact_threshold_35():
    # m = (2, 5), only the first met -> 2/7 = 0.2857 -> rating 1
    s = if_score([2, 5], [True, False])
    assert s == 0.2857 and if_rating(s) == 1
    # seven importance-1 items met out of a total importance of 20 -> 0.35 exactly -> rating 2
    s = if_score([1] * 7 + [5] * 2 + [3], [True] * 7 + [False] * 3)  # 7 / 20
    assert s == 0.35 and if_rating(s) == 2


def test_serialized_weights_two_decimals_floor_and_residual():
    assert serialized_weights([1, 1, 1]) == [0.34, 0.33, 0.33]
    w = serialized_weights([1] + [5] * 40)  # 1/201 rounds to 0.00 -> 0.01
    assert w[0] == 0.01 and round(sum(w), 2) == 1.0
    assert serialized_weights([5, 3, 2]) == [0.5, 0.3, 0.2]


@pytest.mark.parametrize("bad", [[0], [6], [2.5], [True], []])
def test_if_importance_must_be_1_to_5(bad):
    with pytest.raises(ChecklistError):
        if_score(bad, [True] * len(bad))


def test_if_score_length_mismatch():
    with pytest.raises(ChecklistError, match="2 requirements but 1 verdicts"):
        if_score([1, 2], [True])


# ------------------------------------------------------------------------------------------------ WC


def test_clean_ratio_and_wc_score_by_hand():
    assert clean_ratio([False, True, False, False]) == 0.75
    # target A m=5 (alpha 5.0), 2 questions, 1 violation -> c = 0.5
    # target B m=2 (alpha 1.5), 1 question, none -> c = 1.0
    # s = (5*0.5 + 1.5*1) / 6.5 = 4/6.5 = 0.615384... -> 0.6154 -> rating 3
    s = wc_score([(5, [True, False]), (2, [False])])
    assert s == 0.6154 and wc_rating(s) == 3
    assert [ALPHA[m] for m in range(1, 6)] == [1.0, 1.5, 2.5, 3.5, 5.0]


def test_wc_score_exact_089_is_five():
    # alpha: m=5 -> 5.0, m=1 -> 1.0; c = (x, 1.0). Choose 100 questions on the m=5 target with 13 violations:
    # c = 0.87; s = (5*0.87 + 1*1.0)/6 = 5.35/6 = 0.891666 -> 0.8917 -> 5.
    s = wc_score([(5, [True] * 13 + [False] * 87), (1, [False])])
    assert s == 0.8917 and wc_rating(s) == 5
    # one target, 100 questions, 11 violations -> exactly 0.89 -> 5; 12 -> 0.88 -> 4
    assert wc_score([(3, [True] * 11 + [False] * 89)]) == 0.89
    assert wc_rating(wc_score([(3, [True] * 11 + [False] * 89)])) == 5
    assert wc_rating(wc_score([(3, [True] * 12 + [False] * 88)])) == 4


def test_wc_rejects_empty_target_and_bad_importance():
    with pytest.raises(ChecklistError):
        wc_score([(3, [])])
    with pytest.raises(ChecklistError):
        wc_score([(0, [False])])
    with pytest.raises(ChecklistError):
        wc_score([])


# ------------------------------------------------------------------------------ scoring from verdicts


def _if_checklist():
    return Checklist(IF, (ChecklistItem("r1", "Is there a red kite?", 5),
                          ChecklistItem("r2", "Is the sky cloudy?", 3),
                          ChecklistItem("r3", "Does the camera pan left?", 2)))


def test_score_if_unverifiable_counts_as_unsatisfied_and_rationale_verbalizes():
    cl = _if_checklist()
    res = score_if(cl, [Verdict("r1", True, "a red kite in frames 1-8"),
                           Verdict("r2", True, "cannot tell", verifiable=False),
                           Verdict("r3", False, "the camera is static")])
    assert res.score == 0.5 and res.rating == 2  # 5/10
    assert "1 of 3 requirements are met" in res.rationale
    assert "Is the sky cloudy? (cannot tell, cannot be verified)" in res.rationale
    assert "0.5000, rating 2/5" in res.rationale
    assert res.checklist_hash == cl.content_hash


def test_score_if_missing_verdict_is_named():
    with pytest.raises(ChecklistError, match="r3"):
        score_if(_if_checklist(), [Verdict("r1", True, ""), Verdict("r2", True, "")])


def test_score_wc_groups_by_target():
    cl = Checklist(WC, (ChecklistItem("q1", "Does the kite deform?", 5, "kite", "structure"),
                        ChecklistItem("q2", "Does the kite change colour?", 5, "kite", "temporal_consistency"),
                        ChecklistItem("q3", "Is the string's motion implausible?", 2, "string moves", "physical_plausibility")))
    res = score_wc(cl, [Verdict("q1", True, "the kite's tail merges into the body in frame 5"),
                           Verdict("q2", False, ""), Verdict("q3", False, "")],
                      {"scene_summary": "A kite flies over a beach."})
    assert res.score == 0.6154 and res.rating == 3
    assert res.detail["clean_ratio"] == {"kite": 0.5, "string moves": 1.0}
    assert res.rationale.startswith("A kite flies over a beach. Violations: kite - structure: the kite's tail")


def _wc_checklist():
    return Checklist(WC, (ChecklistItem("q1", "Does the kite deform?", 5, "kite", "structure"),
                          ChecklistItem("q2", "Does the kite change colour?", 5, "kite", "temporal_consistency"),
                          ChecklistItem("q3", "Does the kite pass through the string?", 5, "kite", "physical_plausibility"),
                          ChecklistItem("q4", "Is the string's motion implausible?", 2, "string moves", "motion_quality"),
                          ChecklistItem("q5", "Does the beach change shape?", 3, "beach", "temporal_consistency")))


def test_score_wc_aggregates_only_verified_decisions():
    # kite (m=5, alpha 5.0): q1 violation, q2 unverifiable, q3 clean -> verified 1 of 2 violated -> c = 0.5
    # string moves (m=2): its only question unverifiable -> the target leaves the sum
    # beach (m=3, alpha 2.5): clean -> c = 1.0
    # s = (5.0 * 0.5 + 2.5 * 1.0) / (5.0 + 2.5) = 5 / 7.5 = 0.6667 -> rating 3 (0.58 <= s < 0.78).
    # Counting unverifiable as clean would give (5 * 2/3 + 1.5 + 2.5) / 9 = 0.8148 -> rating 4.
    vs = [Verdict("q1", True, "the kite folds in frame 4"), Verdict("q2", False, "too small", verifiable=False),
          Verdict("q3", False, ""), Verdict("q4", False, "string not visible", verifiable=False),
          Verdict("q5", False, "")]
    res = score_wc(_wc_checklist(), vs)
    assert (res.score, res.rating) == (0.6667, 3)
    assert res.detail["clean_ratio"] == {"kite": 0.5, "beach": 1.0}
    assert res.detail["targets_unverified"] == ["string moves"] and res.detail["n_unverifiable"] == 2
    assert "Left out as unverifiable: kite: Does the kite change colour?; string moves: Is the string's" in res.rationale
    row = score_row("p1", {WC: res})
    assert (row["wc_score"], row["wc_rating"], row["wc_unverifiable"], row["wc_reason"]) == (0.6667, 3, 2, "")


def test_score_wc_with_no_verified_answer_is_unscored_with_the_reason():
    vs = [Verdict(f"q{k}", False, "dark", verifiable=False) for k in range(1, 6)]
    res = score_wc(_wc_checklist(), vs)
    assert not res.scored and res.score is None and "none of the 5 answers is verified" in res.reason
    assert len(res.verdicts) == 5 and res.checklist_hash == _wc_checklist().content_hash  # still stored
    row = score_row("p1", {WC: res})
    assert row["wc_rating"] is None and row["wc_unverifiable"] == 5 and "none of the 5" in row["wc_reason"]


def test_if_unverifiable_is_not_met_and_counted():
    # the seed's conservative reading: m = (5, 3, 2), r2 unverifiable keeps its weight unmet -> 7/10 = 0.7
    res = score_if(_if_checklist(), [Verdict("r1", True, ""), Verdict("r2", False, "", verifiable=False),
                                        Verdict("r3", True, "")])
    assert (res.score, res.rating, res.detail["n_unverifiable"]) == (0.7, 3, 1)
    assert score_row("p1", {IF: res})["if_unverifiable"] == 1
    assert score_row("p1", {IF: DimensionResult(IF, reason="IF verifier: timeout")})["if_unverifiable"] is None


def test_checklist_hash_ignores_maker_and_round_trips():
    a = Checklist(IF, _if_checklist().items, {"model": "a"})
    b = Checklist(IF, _if_checklist().items, {"model": "b"})
    assert a.content_hash == b.content_hash
    c = Checklist(IF, _if_checklist().items[:2])
    assert c.content_hash != a.content_hash
    assert Checklist.from_json(a.to_json()) == a
    bad = a.to_json()
    bad["items"][0]["importance"] = 1
    with pytest.raises(ChecklistError, match="content_hash"):
        Checklist.from_json(bad)


# -------------------------------------------------------------------------------------------- parsing


def test_parse_if_plan_drops_what_is_heard_and_duplicates_and_keeps_what_is_seen():
    text = json.dumps({"requirements": [
        {"question": "Is there a dog?", "importance": 5, "aspect": "subject"},
        {"question": "Can you hear the dog bark?", "importance": 2},
        {"question": "Is a man playing a musical instrument?", "importance": 4, "aspect": "action"},
        {"question": "Does the dog bark loudly?", "importance": 1},
        {"question": "Is there  a dog?", "importance": "4"},
        {"question": "Does a sign read 'SOUND CITY'?", "importance": 2},
        {"question": "Is the dog brown?", "importance": 3.0}]})
    items, dropped = parse_if_plan("Here you go:\n```json\n" + text + "\n```")
    assert [(i.id, i.question, i.importance) for i in items] == [
        ("r1", "Is there a dog?", 5), ("r2", "Is a man playing a musical instrument?", 4),
        ("r3", "Does a sign read 'SOUND CITY'?", 2), ("r4", "Is the dog brown?", 3)]
    assert [(d.question, d.importance) for d in dropped] == [
        ("Can you hear the dog bark?", 2), ("Does the dog bark loudly?", 1), ("Is there a dog?", 4)]
    assert dropped[0].reason.startswith("audio: ") and "'hear'" in dropped[0].reason
    assert "'loudly'" in dropped[1].reason and dropped[2].reason == "duplicate of r1"


def test_dropped_requirements_are_rows_of_the_stored_checklist():
    items = _if_checklist().items
    cl = Checklist(IF, items, {"model": "m"}, (DroppedItem("Does the dog bark loudly?", 4, "audio: 'loudly'"),))
    rows = checklist_rows("p1", cl)
    assert [(r["item_id"], r["dropped"]) for r in rows] == [("r1", None), ("r2", None), ("r3", None),
                                                            ("x1", "audio: 'loudly'")]
    assert rows[3]["question"] == "Does the dog bark loudly?" and rows[3]["importance"] == 4 and rows[3]["weight"] is None
    back = checklist_from_rows(rows)
    assert back == cl and back.content_hash == Checklist(IF, items).content_hash  # what is left out is no item
    assert back.dropped == cl.dropped
    assert Checklist.from_json(cl.to_json()).dropped == cl.dropped


@pytest.mark.parametrize("text, msg", [
    ("no json here", "no JSON"),
    ('{"reqs": []}', "requirements"),
    ('{"requirements": []}', "non-empty"),
    ('{"requirements": [{"question": "Is it red?", "importance": 7}]}', "1-5"),
    ('{"requirements": [{"question": "", "importance": 2}]}', "non-empty string"),
    ('{"requirements": [{"question": "Is there music?", "importance": 2}]}', "audio"),
])
def test_parse_if_plan_rejects(text, msg):
    with pytest.raises(ParseError, match=msg):
        parse_if_plan(text)


def test_parse_verdicts_strict():
    ok = '{"answers": [{"id": "r2", "answer": "No", "evidence": "x"}, {"id": "r1", "answer": "unverifiable"}]}'
    v = parse_verdicts(ok, ["r1", "r2"], "yes = satisfied")
    assert [(x.item_id, x.yes, x.verifiable) for x in v] == [("r1", False, False), ("r2", False, True)]
    with pytest.raises(ParseError, match="no answer for r2"):
        parse_verdicts('{"answers": [{"id": "r1", "answer": "yes"}]}', ["r1", "r2"], "")
    with pytest.raises(ParseError, match="'r9'"):
        parse_verdicts('{"answers": [{"id": "r9", "answer": "yes"}]}', ["r1"], "")
    with pytest.raises(ParseError, match="must be"):
        parse_verdicts('{"answers": [{"id": "r1", "answer": "maybe"}]}', ["r1"], "")


def test_parse_grounding_and_questions():
    g = parse_grounding(json.dumps({"scene_summary": "A man walks.", "entities": [{"name": "man", "importance": 5}],
                                       "actions": [{"name": "walking", "importance": "3"}]}))
    assert g["targets"] == [{"kind": "entity", "name": "man", "importance": 5},
                            {"kind": "action", "name": "walking", "importance": 3}]
    with pytest.raises(ParseError, match="unique"):
        parse_grounding(json.dumps({"scene_summary": "s", "entities": [{"name": "a", "importance": 1}],
                                       "actions": [{"name": "A", "importance": 1}]}))
    q = parse_wc_questions(json.dumps({"targets": [{"target": "MAN", "questions": [
        {"question": "Does the man's face change?", "aspect": "temporal_consistency"}]}]}), ["man", "walking"])
    assert q == {"man": [("Does the man's face change?", "temporal_consistency")]}
    with pytest.raises(ParseError, match="not one of the grounded"):
        parse_wc_questions('{"targets": [{"target": "dog", "questions": []}]}', ["man"])


def test_parse_pq():
    out = parse_pq('{"defects": [{"id": "blur", "present": "yes", "evidence": "soft"}], "rationale": "Soft.", "score": 3}')
    assert out == {"score": 3, "rationale": "Soft.", "defects": [{"id": "blur", "present": True, "evidence": "soft"}]}
    for bad in ('{"defects": [], "rationale": "r", "score": 6}', '{"defects": [], "rationale": "r", "score": 2.5}',
                '{"defects": [{"id": "wobble", "present": "no"}], "rationale": "r", "score": 2}',
                '{"defects": [], "rationale": "", "score": 2}'):
        with pytest.raises(ParseError):
            parse_pq(bad)


# ---------------------------------------------------------------------------------------- offline PQ


def test_pq_offline_counts_measured_defects():
    recs = [{"tool": "aesthetic", "ok": True, "sharpness": 0.6, "quality": 40.0,
             "components": {"sharpness": 0.2, "noise_sigma": 0.9, "exposure": 0.95, "blockiness": 0.8}},
            {"tool": "flicker_probe", "ok": True, "jitter": 4.2, "color_jitter": 0.5, "flagged_fraction": 0.2},
            {"tool": "motion_probe", "ok": True, "static_fraction": 0.1},
            {"tool": "ocr", "ok": False, "error": "x"}]
    res = pq_offline(recs, width=1280, height=720)
    assert res.rating == 2  # blur, brightness instability, flicker: 5 - 3
    assert res.score is None and res.scored
    assert "Not measured: distortion" in res.rationale
    assert {d["id"] for d in res.detail["defects"] if d["present"]} == {"blur", "brightness_instability", "flicker"}
    clean = pq_offline([{"tool": "motion_probe", "ok": True, "static_fraction": 0.0}])
    assert clean.rating == 5 and "low_resolution" in clean.detail["not_measured"]
    none = pq_offline([{"tool": "flicker_probe", "ok": False, "error": "needs 3 frames"}])
    assert not none.scored and "no usable CPU tool record" in none.reason


def test_pq_offline_from_tools(write_clip):
    import cv2

    from argus_dagster.method.evidence.media_store import MediaStore
    from argus_dagster.method.evidence.tools.classical import ClassicalAesthetic, FlickerProbe, MotionProbe

    board = np.kron((np.indices((8, 12)).sum(0) % 2) * 200 + 25, np.ones((8, 8))).astype(np.uint8)
    still = cv2.GaussianBlur(np.stack([board] * 3, -1), (0, 0), 3)
    frames = np.stack([still] * 24)  # one soft frame, held: frozen and blurred
    path = write_clip("static.mp4", frames)
    media = MediaStore({"output_video": path})
    recs = [dict(tool=t.name, **t.run({"on": "output_video"}, media)) for t in (FlickerProbe(), MotionProbe(),
                                                                              ClassicalAesthetic())]
    res = pq_offline(recs, width=96, height=64)
    present = {d["id"] for d in res.detail["defects"] if d["present"]}
    assert {"frozen", "blur", "low_resolution"} <= present
    assert res.rating == 5 - len(present)


def test_unscored_offline_says_why():
    out = unscored_offline()
    assert set(out) == {IF, WC} and all(not r.scored and "needs a VLM" in r.reason for r in out.values())


# ---------------------------------------------------------------------------------- rows and export


def _results():
    r_if = score_if(_if_checklist(), [Verdict("r1", True, "kite"), Verdict("r2", True, "clouds"),
                                         Verdict("r3", True, "pans")])
    r_wc = DimensionResult(WC, 0.9, 5, "Clean.")
    r_pq = DimensionResult(PQ, None, 4, "Slightly soft.")
    return {IF: r_if, WC: r_wc, PQ: r_pq}


def test_rows():
    rows = checklist_rows("p1", _if_checklist())
    assert [r["weight"] for r in rows] == [0.5, 0.3, 0.2] and rows[0]["importance"] == 5
    assert {r["checklist_hash"] for r in rows} == {_if_checklist().content_hash}
    res = _results()
    row = score_row("p1", res)
    assert (row["if_score"], row["if_rating"], row["wc_rating"], row["pq_rating"]) == (1.0, 5, 5, 4)
    assert row["if_reason"] == "" and "pq_score" not in row
    row = score_row("p1", {**res, IF: DimensionResult(IF, reason="IF verifier: timeout")})
    assert row["if_score"] is None and row["if_reason"] == "IF verifier: timeout"
    vr = verdict_rows("p1", res)
    assert [(r["item_id"], r["verdict"]) for r in vr] == [("r1", "yes"), ("r2", "yes"), ("r3", "yes")]


def test_export_records_shape(tmp_path):
    refs = [f"/v/a.mp4#frame={i}&t={i / 8:.3f}" for i in range(8)]
    recs, why = export_records("T2V/m/p1", "A red kite over a beach.", refs, _results())
    assert why == "" and [r["dimension"] for r in recs] == [IF, WC, PQ]
    r = recs[0]
    assert r["target"] == {"reasoning": _results()[IF].rationale, "score": 5}
    assert "8 frames" in r["instruction"] and "A red kite over a beach." in r["instruction"]
    assert r["messages"][0]["content"].startswith("<image>" * 8 + "You are an expert")
    assert json.loads(r["messages"][1]["content"]) == r["target"] and r["images"] == refs
    partial = {**_results(), WC: DimensionResult(WC, reason="WC verifier: timeout")}
    none, why = export_records("T2V/m/p1", "x", refs, partial)
    assert none == [] and "WC verifier: timeout" in why
    two, _ = export_records("T2V/m/p1", "x", refs, partial, require_all=False)
    assert [r["dimension"] for r in two] == [IF, PQ]
    n = write_export(tmp_path / "firm.jsonl", recs + two)
    lines = (tmp_path / "firm.jsonl").read_text().splitlines()
    assert n == len(lines) == 5 and all(json.loads(x)["target"]["score"] in range(1, 6) for x in lines)


def test_instructions_are_the_seed_appendix():
    text = instruction(WC, "P", 8)
    assert "'world_consistency'" in text and "Text prompt (context only):\nP" in text
    assert text.rstrip().endswith("DO NOT include anything before or after the JSON object.")


def test_checklist_rows_are_the_frozen_store():
    cl = Checklist(IF, _if_checklist().items, {"backend": "openai", "model": "m", "prompt_version": "v"})
    rows = checklist_rows("p1", cl)
    back = checklist_from_rows(list(reversed(rows)))
    assert back == cl and back.content_hash == cl.content_hash and back.maker["model"] == "m"
    rows[1] = {**rows[1], "importance": 1}
    with pytest.raises(ChecklistError, match="do not reproduce"):
        checklist_from_rows(rows)
    with pytest.raises(ChecklistError, match="materialize firm_checklists"):
        checklist_from_rows([])
    wc = Checklist(WC, (ChecklistItem("q1", "Does it deform?", 4, "kite", "structure"),))
    assert checklist_from_rows(checklist_rows("p1", wc)) == wc


def test_if_score_recomputes_from_the_stored_weights():
    """The issue's case: m = [1, 2, 5, 5], every item met but the importance-2 one. Exact weights give
    (1 + 5 + 5) / 13 = 0.846153... -> 0.8462, rating 3 (0.70 <= s < 0.85); the seed's two-decimal weights
    (0.08, 0.15, 0.39, 0.38: the residual 0.01 to the first largest) give 0.85, rating 4. The stored weights are the exact ones, and the
    score recomputes from them."""
    import polars as pl

    from argus_dagster.assets.firm import FIRM_CHECKLISTS, FIRM_SCORES, FIRM_VERDICTS, recompute_problems

    cl = Checklist(IF, tuple(ChecklistItem(f"r{k}", f"Is item {k} there?", m) for k, m in enumerate([1, 2, 5, 5], 1)))
    rows = checklist_rows("p1", cl)
    assert [r["weight"] for r in rows] == [1 / 13, 2 / 13, 5 / 13, 5 / 13]
    assert serialized_weights([1, 2, 5, 5]) == [0.08, 0.15, 0.39, 0.38]
    res = score_if(cl, [Verdict("r1", True, ""), Verdict("r2", False, ""), Verdict("r3", True, ""),
                           Verdict("r4", True, "")])
    assert (res.score, res.rating) == (0.8462, 3)
    verdicts = [{**v, "sample": ""} for v in verdict_rows("p1", {IF: res})]
    assert if_score_from_rows(rows, verdicts) == 0.8462

    def tables(item_rows, score):
        checklists = pl.DataFrame([{k: r.get(k) for k in FIRM_CHECKLISTS} for r in item_rows], schema=FIRM_CHECKLISTS)
        row = {**score_row("p1", {IF: res}), "if_score": score, "sample": "", "wc_reason": "x", "pq_reason": "x"}
        return (pl.DataFrame([{k: row.get(k) for k in FIRM_SCORES}], schema=FIRM_SCORES), checklists,
                pl.DataFrame([{k: v.get(k) for k in FIRM_VERDICTS} for v in verdicts], schema=FIRM_VERDICTS))

    assert recompute_problems(*tables(rows, 0.8462)) == []
    # a score that does not follow from the stored weights is found
    assert any("recomputed 0.8462 / 3" in p for p in recompute_problems(*tables(rows, 0.85)))
    # two-decimal weights stored beside an exact score: the weights are named
    rounded = [{**r, "weight": w} for r, w in zip(rows, serialized_weights([1, 2, 5, 5]))]
    assert any("stored weights are not m_i / Σ m: r1 (0.08" in p for p in recompute_problems(*tables(rounded, 0.8462)))
    with pytest.raises(ChecklistError, match="sum to 1"):
        if_score_from_weights([0.5, 0.4], [True, True])


def test_evaluate_offline():
    out = evaluate_offline([{"tool": "motion_probe", "ok": True, "static_fraction": 0.95}])
    assert out[PQ].rating == 4 and not out[IF].scored and not out[WC].scored
    row = score_row("p1", out)
    assert row["pq_rating"] == 4 and "needs a VLM" in row["if_reason"] and row["wc_score"] is None


def test_firm_scores_as_evaluators_in_alignment():
    import polars as pl

    from argus_dagster.protocols.alignment.metrics import alignment_table

    firm = pl.DataFrame({"input_id": ["p1", "p1", "p1"], "model": ["a", "b", "c"], "if_rating": [5, 3, 1],
                         "wc_rating": [2, None, 4], "pq_rating": [4, 4, 4]})
    ev = firm_evaluator_scores(firm)
    assert ev.height == 8 and set(ev["evaluator"]) == {"firm_if", "firm_wc", "firm_pq"}
    human = pl.DataFrame({"input_id": ["p1"] * 6, "model": ["a", "b", "c"] * 2,
                          "dimension": [IF] * 3 + [PQ] * 3, "score": [5.0, 3, 1, 4, 3, 5]})
    table = alignment_table(human, ev, evaluator_ranges=FIRM_RANGES, human_ranges={IF: (1, 5), PQ: (1, 5)},
                            n_boot=0)
    r = {(x["evaluator"], x["dimension"]): x for x in table.iter_rows(named=True)}
    assert set(r) == {("firm_if", IF), ("firm_pq", PQ)}  # no human WC ratings: no row
    assert r[("firm_if", IF)]["mae"] == 0.0 and r[("firm_if", IF)]["preference_acc"] == 1.0
    # PQ: all 4; humans 4, 3, 5 -> every pair is a human preference the evaluator calls a tie
    assert r[("firm_pq", PQ)]["preference_acc"] == 0.0 and r[("firm_pq", PQ)]["accuracy"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="'pq_rating'"):
        firm_evaluator_scores(firm.drop("pq_rating"))


@pytest.mark.parametrize("text, ok", [
    ("The kite is there; the score board in the back is blurry.", True),
    ("Rating the scene: a kite flies.", True),
    ("3 out of 5 requirements are met; 4/5 of the frames show the kite.", True),
    ("All met, so the score is 5/5.", False),
    ("It deserves a score of 4.", False),
    ("Rating: 2", False),
    ("It is rated 3.", False),
    ("Share met is 0.85.", False),
])
def test_parse_rationale_refuses_stated_scores(text, ok):
    import json as _json

    answer = _json.dumps({"rationale": text})
    if ok:
        assert parse_rationale(answer) == text
    else:
        with pytest.raises(ParseError, match="states a score"):
            parse_rationale(answer)
