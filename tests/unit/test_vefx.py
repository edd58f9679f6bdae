"""VEFX-Bench's edit protocol (seed 002, the evaluation card): three dimensions on 1-4 rubrics, the
overall as their arithmetic mean, and human alignment on the ratings' own scale (never the observed
range). Known answers are worked out by hand from the card's text."""

import math

import numpy as np
import polars as pl
import pytest

from argus_dagster.protocols import vefx
from argus_dagster.protocols.alignment import ratings as rt
from argus_dagster.vlm.reply import ParseError


def test_the_overall_is_the_mean_of_if_rq_ee():
    # card: "an overall score (mean of the three dimensions)"
    assert vefx.overall([4, 3, 2]) == 3.0
    assert vefx.overall([4, 4, 3]) == pytest.approx(11 / 3, abs=1e-4)
    assert vefx.overall([1, 1, 1]) == 1.0
    assert vefx.overall([4, None, 2]) is None


def test_the_judge_prompt_carries_the_three_definitions_and_the_1_4_scale():
    for name in ("Instruction Following", "Rendering Quality", "Edit Exclusivity"):
        assert name in vefx.SYSTEM
    assert "1-4 rubric" in vefx.SYSTEM and "source video" in vefx.SYSTEM
    for d in vefx.DIMENSIONS:  # every level of every rubric is in the prompt
        for level, text in vefx.DEFINITIONS[d][2].items():
            assert f"  {level}: {text}" in vefx.SYSTEM
    assert sorted(vefx.DEFINITIONS[vefx.IF][2]) == [1, 2, 3, 4]


@pytest.mark.parametrize("text,score", [('{"evidence": "the woman is gone", "score": 4}', 4),
                                        ('```json\n{"evidence": "half done", "score": "2"}\n```', 2)])
def test_a_judgment_parses(text, score):
    assert vefx.parse_judgment(text)["score"] == score


@pytest.mark.parametrize("text", ['{"evidence": "x", "score": 5}', '{"evidence": "x", "score": 0}',
                                  '{"evidence": "x", "score": 2.5}', '{"evidence": "", "score": 3}',
                                  '{"evidence": "x", "score": true}', "[3]"])
def test_an_answer_off_the_rubric_is_refused(text):
    with pytest.raises(ParseError):
        vefx.parse_judgment(text)


def test_rows_and_their_problems():
    j = {vefx.IF: vefx.Judgment(vefx.IF, 4, "done"), vefx.RQ: vefx.Judgment(vefx.RQ, 3, "soft"),
         vefx.EE: vefx.Judgment(vefx.EE, reason="EE judge: no answer")}
    row = vefx.score_row("e1", j)
    assert (row["if_score"], row["rq_score"], row["ee_score"], row["overall"]) == (4, 3, None, None)
    assert row["ee_reason"] == "EE judge: no answer" and "EE unscored" in row["overall_reason"]
    assert vefx.row_problems(row) == []
    assert vefx.row_problems({**row, "ee_score": 2, "ee_reason": "", "overall": 3.5}) == [
        "overall 3.5 is not the mean of IF, RQ and EE (3.0)"]
    assert vefx.row_problems({**row, "if_score": 5}) == ["if: score 5 is not an integer 1-4"]
    assert vefx.row_problems({**row, "ee_reason": ""}) == ["ee: unscored without a reason"]


def test_the_leaderboard_per_dimension():
    scores = pl.DataFrame({"task": ["TV2V"] * 4, "model": ["a", "a", "b", "b"], "input_id": ["e1", "e2"] * 2,
                           "if_score": [4, 2, 1, 1], "rq_score": [3, 3, 4, 4], "ee_score": [None, 2, 3, 3],
                           "overall": [None, 7 / 3, 8 / 3, 8 / 3]})
    lb = vefx.leaderboard(scores)
    got = {(r["model"], r["dimension"]): (r["mean"], r["n_scored"], r["n_videos"]) for r in lb.iter_rows(named=True)}
    assert got[("a", vefx.IF)] == (3.0, 2, 2) and got[("b", vefx.IF)] == (1.0, 2, 2)
    assert got[("a", vefx.EE)] == (2.0, 1, 2) and got[("b", vefx.RQ)] == (4.0, 2, 2)
    assert got[("a", vefx.OVERALL)][0] == pytest.approx(7 / 3)
    # best first within each dimension
    rq = lb.filter(pl.col("dimension") == vefx.RQ)["model"].to_list()
    assert rq == ["b", "a"]
    text = vefx.format_leaderboard(lb)
    assert "TV2V vefx_instruction_following (1-4)" in text and "(1/2 scored)" in text


def _human(rows, **extra):
    return rt.ratings_from_records([{"input_id": i, "model": m, "dimension": d, "score": s, **extra}
                                    for i, m, d, s in rows], "h.csv")


def _scores(rows):
    return rt.EvaluatorScores(pl.DataFrame(rows, schema=["input_id", "model", "evaluator", "dimension", "score"],
                                           orient="row"), dict(vefx.RANGES))


def test_mae_is_on_the_dimensions_scale_not_the_observed_range():
    """Ratings spanning 2-4 on VEFX's 1-4 scale, an evaluator on 1-4. On 1-4 the predictions 1, 2, 3, 4
    are ratings 1, 2, 3, 4 against 2, 3, 4, 4: errors 1, 1, 1, 0, MAE 0.75. Read on the observed 2-4
    instead, 1-4 would be squeezed to 2, 2.67, 3.33, 4 (ratings 2, 3, 3, 4): MAE 0.25, the wrong answer."""
    human = _human([(f"e{k}", "m", vefx.RQ, s) for k, s in enumerate([2, 3, 4, 4])])
    scores = _scores([(f"e{k}", "m", "vefx_rq", vefx.RQ, float(p)) for k, p in enumerate([1, 2, 3, 4])])
    table = rt.alignment_report(human, scores, n_boot=10)
    row = table.row(0, named=True)
    assert (row["evaluator"], row["dimension"]) == ("vefx_rq", vefx.RQ)
    assert row["mae"] == pytest.approx(0.75) and row["accuracy"] == pytest.approx(0.25)
    # the scale given on the command line wins; the observed range is only what it says it is
    assert rt.alignment_report(human, scores, human_scale=(2, 4), n_boot=10)["mae"][0] == pytest.approx(0.25)


def test_a_declared_scale_is_used_and_an_unknown_one_is_said():
    rows = [(f"i{k}", "m", "overall", s) for k, s in enumerate([2, 3, 4, 4])]
    ev = _scores([(f"i{k}", "m", "x", None, float(p)) for k, p in enumerate([1, 2, 3, 4])])
    ev.ranges = {"x": (1.0, 4.0)}
    declared = _human(rows, scale_min=1, scale_max=4)
    assert declared.scales == {"overall": (1.0, 4.0)}
    assert rt.alignment_report(declared, ev, n_boot=10)["mae"][0] == pytest.approx(0.75)
    plain = _human(rows)
    table = rt.alignment_report(plain, ev, n_boot=10)
    assert math.isnan(table["mae"][0]) and math.isnan(table["accuracy"][0])
    assert not math.isnan(table["srcc"][0])  # rank metrics need no scale
    assert any("'overall': no rating scale declared" in p and "--human-scale" in p for p in plain.problems)
    clash = rt.ratings_from_records([{"input_id": "a", "model": "m", "score": 1, "scale_min": 1, "scale_max": 4},
                                     {"input_id": "b", "model": "m", "score": 2, "scale_min": 1, "scale_max": 5}], "c.csv")
    assert clash.scales == {} and "declares the scale(s)" in clash.problems[0]


def test_firm_dimensions_are_on_1_5_and_t2vscore_declares_1_5():
    scales, problems = rt.human_scales(rt.HumanRatings(pl.DataFrame()), ["instruction_following", vefx.EE])
    assert scales == {"instruction_following": (1.0, 5.0), vefx.EE: (1.0, 4.0)} and problems == []
    t2v = rt.t2vscore_ratings({"1": {"prompt": "p", "models": {"m": [3.5]}}}, "alignment")
    assert t2v.scales == {"alignment": (1.0, 5.0)}


def test_the_human_overall_is_the_mean_of_the_three():
    # card: "The overall human score is the arithmetic mean of IF, RQ, and EE scores"
    avg = _human([("e1", "m", vefx.IF, 4), ("e1", "m", vefx.RQ, 3), ("e1", "m", vefx.EE, 2),
                  ("e2", "m", vefx.IF, 1), ("e2", "m", vefx.RQ, 2)]).averaged()
    out = vefx.human_overall(avg)
    overall = out.filter(pl.col("dimension") == vefx.OVERALL)
    assert overall.select("input_id", "score").rows() == [("e1", 3.0)]  # e2 lacks EE: no overall


def test_an_annotated_overall_is_kept_apart_never_the_human_overall():
    """The card: the overall is "the arithmetic mean of IF, RQ, and EE scores, not a separately annotated
    dimension". People also gave an overall of their own here, the reverse of the mean's order: the
    human overall stays the mean (1, 2, 8/3, 4), the annotated one is a dimension of its own."""
    three = {"e0": (1, 1, 1), "e1": (1, 2, 3), "e2": (3, 3, 2), "e3": (4, 4, 4)}
    annotated = {"e0": 4, "e1": 3, "e2": 2, "e3": 1}
    human = _human([(e, "m", d, s) for e, v in three.items() for d, s in zip(vefx.DIMENSIONS, v)]
                   + [(e, "m", vefx.OVERALL, s) for e, s in annotated.items()])
    scores = _scores([(e, "m", "vefx_overall", vefx.OVERALL, p) for e, p in zip(three, (1.0, 2.0, 2.5, 4.0))]
                     + [(e, "m", "plain", None, p) for e, p in zip(three, (1.0, 2.0, 2.5, 4.0))])
    scores.ranges["plain"] = (1.0, 4.0)
    table = rt.alignment_report(human, scores, n_boot=10)
    got = {(r["evaluator"], r["dimension"]): r for r in table.iter_rows(named=True)}
    assert got[("vefx_overall", vefx.OVERALL)]["n_videos"] == 4
    assert got[("vefx_overall", vefx.OVERALL)]["srcc"] == pytest.approx(1.0)  # the mean's order, not -1
    assert got[("plain", vefx.OVERALL_ANNOTATED)]["srcc"] == pytest.approx(-1.0)  # the annotated one, apart
    assert got[("plain", vefx.OVERALL)]["srcc"] == pytest.approx(1.0)
    avg = vefx.human_overall(human.averaged())
    by = {(r["dimension"], r["input_id"]): r["score"] for r in avg.iter_rows(named=True)}
    assert [by[(vefx.OVERALL, e)] for e in three] == pytest.approx([1.0, 2.0, 8 / 3, 4.0])
    assert [by[(vefx.OVERALL_ANNOTATED, e)] for e in three] == [4.0, 3.0, 2.0, 1.0]


def test_stored_vefx_scores_read_as_evaluators(tmp_path):
    df = pl.DataFrame({"task": ["TV2V"] * 2, "model": ["m", "m"], "input_id": ["e1", "e2"], "sample": ["", ""],
                       "if_score": [4, None], "rq_score": [3, 2], "ee_score": [2, 2], "overall": [3.0, None]})
    df.write_parquet(tmp_path / "TV2V.parquet")
    got = rt.read_scores(tmp_path)
    assert got.ranges == vefx.RANGES
    s = {(r["evaluator"], r["input_id"]): (r["dimension"], r["score"]) for r in got.scores.iter_rows(named=True)}
    assert s[("vefx_if", "e1")] == (vefx.IF, 4.0) and ("vefx_if", "e2") not in s
    assert s[("vefx_overall", "e1")] == (vefx.OVERALL, 3.0) and s[("vefx_ee", "e2")] == (vefx.EE, 2.0)


class _Client:
    backend, model = "fake", "judge"

    def __init__(self, answers):
        self.answers = list(answers)
        self.seen = []

    def chat(self, messages, **kw):
        from argus_dagster.vlm.reply import Reply

        self.seen.append(messages)
        return Reply(text=self.answers.pop(0), latency_s=0.0, attempts=1, endpoint="loop")


def test_the_judge_sees_source_and_edited_frames_and_a_failed_dimension_is_its_own_reason():
    frames = [np.zeros((8, 8, 3), np.uint8)] * 2
    client = _Client(['{"evidence": "done", "score": 4}', "nope", "nope", "nope", '{"evidence": "clean", "score": 3}'])
    judge = vefx.VefxJudge(client, parse_retries=2)
    job = vefx.EditJob("e1", "Remove the woman", {"source_video": frames, "output_video": frames})
    out = judge.evaluate(job)
    assert out[vefx.IF].score == 4 and out[vefx.EE].score == 3
    assert out[vefx.RQ].score is None and out[vefx.RQ].reason.startswith("RQ judge:")
    first = client.seen[0][1]["content"]
    assert first[0] == "Editing instruction: Remove the woman"
    assert any(isinstance(p, str) and p.startswith("[source_video] 2 frame(s)") for p in first)
    assert any(isinstance(p, str) and p.startswith("[edited_video] 2 frame(s)") for p in first)
    assert first[-1] == "Score Instruction Following (IF) now, on its 1-4 rubric."
    no_source = judge.evaluate(vefx.EditJob("t", "A kite", {"output_video": frames}))
    assert all(j.score is None and "no source video" in j.reason for j in no_source.values())
