"""Human ratings read strictly: a rating outside the scale its dimension declares is refused and its
row named; a video rated more than once by one rater (or with no rater named) is reported with how
its ratings were combined; a CSV saved with a UTF-8 byte-order mark reads like one without.
Expected figures are worked out by hand beside each assert."""

import math

import polars as pl
import pytest

from argus_dagster.client import cli
from argus_dagster.protocols import vefx
from argus_dagster.protocols.alignment import ratings as rt


def _scores(rows, ranges=None):
    return rt.EvaluatorScores(pl.DataFrame(rows, schema=["input_id", "model", "evaluator", "dimension", "score"],
                                           orient="row"), ranges or {})


def test_ratings_outside_the_nominal_scale_are_refused_and_named():
    """VEFX's IF is rated on 1-4. Rows 2 (9) and 4 (0) are off it: refused, named by their row; the MAE
    is read on the three left. Evaluator 1, 4, 2 on its own 1-4 against people's 3, 2, 4: errors 2, 2,
    2, MAE 2. Had 9 and 0 been kept (evaluator 3, 3): errors 6 and 3 more, MAE 3."""
    human = rt.ratings_from_records([{"input_id": i, "model": "m", "dimension": vefx.IF, "score": s}
                                     for i, s in zip("abcde", (3, 9, 2, 0, 4))], "h.csv")
    scores = _scores([(i, "m", "judge", None, p) for i, p in zip("abcde", (1.0, 3.0, 4.0, 3.0, 2.0))],
                     {"judge": (1.0, 4.0)})
    row = rt.alignment_report(human, scores, n_boot=10).row(0, named=True)
    assert row["n_videos"] == 3 and row["mae"] == pytest.approx(2.0)
    refused = [p for p in human.problems if "outside" in p]
    assert len(refused) == 2, human.problems
    assert "h.csv row 2" in refused[0] and "9" in refused[0] and "1-4" in refused[0] and "refused" in refused[0]
    assert "h.csv row 4" in refused[1] and "b/m" not in refused[1] and "d/m" in refused[1]


def test_a_declared_scale_and_a_given_one_are_the_ones_held():
    rows = [{"input_id": i, "model": "m", "score": s, "scale_min": 1, "scale_max": 5}
            for i, s in zip("abcd", (1, 5, 7, 2.5))]
    declared = rt.ratings_from_records(rows, "d.csv")
    scores = _scores([(i, "m", "judge", None, p) for i, p in zip("abcd", (1.0, 2.0, 3.0, 4.0))])
    table = rt.alignment_report(declared, scores, n_boot=10)
    assert table["n_videos"][0] == 3  # the 7 on a declared 1-5 is refused
    assert any("d.csv row 3" in p and "1-5" in p for p in declared.problems), declared.problems
    # a scale given for the run (--human-scale 0 10) holds the 7
    given = rt.ratings_from_records(rows, "d.csv")
    assert rt.alignment_report(given, scores, human_scale=(0, 10), n_boot=10)["n_videos"][0] == 4
    assert not any("outside" in p for p in given.problems)


def test_duplicate_ratings_are_reported_with_how_they_were_combined(tmp_path):
    """Rater r1 rated a twice (3, 4): those count once, as 3.5, then with r2's 2: a's score 2.75 (the
    three pooled would give 3). b has two ratings and no rater named (1, 2): averaged to 1.5."""
    p = tmp_path / "h.csv"
    p.write_text("input_id,model,rater,score\na,m,r1,3\na,m,r1,4\na,m,r2,2\nb,m,,1\nb,m,,2\nc,m,r1,4\n")
    human = rt.read_human(p)
    avg = {r["input_id"]: r["score"] for r in human.averaged().iter_rows(named=True)}
    assert avg == {"a": pytest.approx(2.75), "b": pytest.approx(1.5), "c": 4.0}
    rt.alignment_report(human, _scores([(i, "m", "judge", None, float(k)) for k, i in enumerate("abc")]), n_boot=0)
    dup = [x for x in human.problems if "a/m" in x and "r1" in x]
    assert len(dup) == 1 and "rows 1, 2" in dup[0] and "averaged to 3.5" in dup[0], human.problems
    anon = [x for x in human.problems if "b/m" in x]
    assert len(anon) == 1 and "rows 4, 5" in anon[0] and "no rater" in anon[0] and "1.5" in anon[0], human.problems
    assert not any("c/m" in x for x in human.problems)


def test_a_csv_with_a_byte_order_mark_reads(tmp_path):
    text = "input_id,model,score\na,m,3\nb,m,4\n"
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "plain.csv").write_text(text)
    bom, plain = rt.read_human(tmp_path / "bom.csv"), rt.read_human(tmp_path / "plain.csv")
    assert bom.ratings.equals(plain.ratings) and bom.ratings.height == 2 and not bom.problems
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + b'{"input_id": "a", "model": "m", "score": 3}\n')
    assert rt.read_human(tmp_path / "bom.jsonl").ratings["score"].to_list() == [3.0]


def test_argus_align_refuses_off_scale_rows_and_reads_a_bom(tmp_path, capsys):
    """The command as a person runs it: a BOM-prefixed CSV on VEFX's 1-4 IF with one 9; the table is
    computed on the rest (MAE as in the first test, without rows b and d) and the 9's row is named."""
    human = tmp_path / "ratings.csv"
    human.write_bytes(b"\xef\xbb\xbf" + f"input_id,model,dimension,score\na,m,{vefx.IF},3\nb,m,{vefx.IF},9\n"
                      f"c,m,{vefx.IF},2\ne,m,{vefx.IF},4\n".encode())
    scores = tmp_path / "scores.csv"
    scores.write_text("input_id,model,evaluator,score\na,m,judge,1\nb,m,judge,3\nc,m,judge,4\ne,m,judge,2\n")
    out = tmp_path / "align.csv"
    assert cli.main(["align", "--human", str(human), "--scores", str(scores), "--n-boot", "10", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"{human} row 2" in text and "outside" in text
    row = pl.read_csv(out).row(0, named=True)
    assert row["n_videos"] == 3 and row["mae"] == pytest.approx(2.0) and not math.isnan(row["srcc"])
