"""Ranks that say what they know: equal scores share a rank, every rank has an interval from the
bootstrap over inputs that gives the score's, the order of means is checked against the pairwise
comparisons, and a ranking on less than half of the rubric weight says so, on every page that shows it
(the pages' tables parsed, each value read in its row and column)."""

import json
import time
from html.parser import HTMLParser

import polars as pl
import pytest

from argus_dagster.method.leaderboard import build_leaderboard, format_leaderboard
from argus_dagster.outputs.export import encode
from argus_dagster.outputs.overview import render_evaluations_index, render_overview


class Tables(HTMLParser):
    """Every ``<table>`` of a page as ``{class: [rows]}``, a row being the text of its cells (th and td)."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._rows = self._cell = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._rows = self.tables.setdefault(dict(attrs).get("class", ""), [])
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._rows = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def tables(page: str) -> dict[str, list[list[str]]]:
    parser = Tables()
    parser.feed(page)
    return parser.tables


def cell(rows: list[list[str]], row: str, column: str) -> str:
    """The value in column ``column`` of the row named ``row`` (by its model cell, else its first cell)."""
    head = rows[0]
    j = head.index(column)
    key = head.index("model") if "model" in head else 0
    found = [r for r in rows[1:] if r[key] == row]
    assert len(found) == 1, (row, rows)
    return found[0][j]


def videos(scores: dict[str, dict[str, list[float]]], task: str = "T2V") -> pl.DataFrame:
    """``{model: {input_id: [final scores of its videos]}}`` as video scores (samples numbered)."""
    rows = [{"task": task, "model": m, "input_id": i, "sample": str(k) if len(v) > 1 else "", "final_score": s}
            for m, per in scores.items() for i, v in per.items() for k, s in enumerate(v)]
    return pl.DataFrame(rows, schema_overrides={"final_score": pl.Float64})


def by_model(lb: pl.DataFrame) -> dict[str, dict]:
    return {r["model"]: r for r in lb.iter_rows(named=True)}


# Five models with the same videos' scores: mean (5.0 + 5.5 + 5.64) / 3 = 5.38 each.
TIED = {m: {"a": [5.0], "b": [5.5], "c": [5.64]} for m in ("alpha", "bravo", "charlie", "delta", "echo")}


def _home(tmp_path, lb: pl.DataFrame) -> dict[str, list[list[str]]]:
    root = tmp_path / "benches"
    folder = root / "bench" / "default"
    (folder / "storage").mkdir(parents=True)
    (folder / "evaluation.json").write_text(json.dumps({"bench": "bench", "profile": "default", "bench_dir": "/b",
                                                        "last_evaluated": time.time()}))
    lb.write_parquet(folder / "storage" / "leaderboard.parquet")
    return tables(render_evaluations_index(root))


def test_equal_scores_share_a_rank_and_no_leader_is_named(tmp_path):
    lb = build_leaderboard(videos(TIED))
    rows = by_model(lb)
    assert {m: r["mean_final"] for m, r in rows.items()} == pytest.approx({m: 5.38 for m in TIED})
    # Competition ranking: all five are first, every resample ties them too, and all share the top.
    assert {m: (r["rank"], r["rank_low"], r["rank_high"], r["shares_top"]) for m, r in rows.items()} == {
        m: (1, 1, 1, True) for m in TIED}
    text = format_leaderboard(lb).splitlines()
    listed = {line.split()[2]: line.split()[0] for line in text if line.split()[2:3] and line.split()[2] in TIED}
    assert listed == {m: "1" for m in TIED}
    assert "  no single leader: alpha, bravo, charlie, delta, echo share the top" in "\n".join(text)
    # The overview's leaderboard table: rank 1 on each model's row.
    page = tables(render_overview(tmp_path / "reports", lb, video_scores=videos(TIED)))
    for m in TIED:
        assert cell(page["leaderboard sortable"], m, "rank") == "1"
        assert cell(page["leaderboard sortable"], m, "95% rank") == "1"
    # The home page names no leader, and says which models share the top.
    home = _home(tmp_path, lb)["leaderboard"]
    leading = cell(home, "bench / default", "leading model per task (mean final 0-10)")
    assert leading == "T2V: no single leader, alpha, bravo, charlie, delta, echo share the top"


def test_the_home_page_names_the_leader_that_holds_rank_1_alone(tmp_path):
    # Every input: first above second by 3 points; the first is rank 1 in every resample.
    lb = build_leaderboard(videos({"second": {"a": [4.0], "b": [5.0], "c": [6.0]},
                                   "first": {"a": [7.0], "b": [8.0], "c": [9.0]}}))
    rows = by_model(lb)
    assert (rows["first"]["rank"], rows["first"]["rank_low"], rows["first"]["rank_high"]) == (1, 1, 1)
    assert (rows["second"]["rank"], rows["second"]["rank_low"], rows["second"]["rank_high"]) == (2, 2, 2)
    assert rows["second"]["shares_top"] is False
    home = _home(tmp_path, lb)["leaderboard"]
    assert cell(home, "bench / default", "leading model per task (mean final 0-10)") == "T2V: first 8.00"


def _heavy(n_heavy: int, n_inputs: int = 10) -> dict[str, list[float]]:
    """``n_heavy`` inputs with 20 videos scoring 10 each, the others one video scoring 0."""
    return {f"i{k}": ([10.0] * 20 if k < n_heavy else [0.0]) for k in range(n_inputs)}


def test_the_interval_resamples_inputs_and_divides_by_their_videos():
    """One input of ten has 20 videos scoring 10, the nine others one video scoring 0. The mean is over
    videos: 200 / 29. A resample draws ten inputs; with k draws of the heavy one its mean is
    200k / (20k + 10 - k). k ~ Binomial(10, 0.1): P(k = 0) = 0.349, so the 2.5th percentile is 0;
    P(k <= 2) = 0.930 and P(k <= 3) = 0.987, so the 97.5th percentile is k = 3: 600 / 67 = 8.96.
    (Resampling videos gives about [5.2, 8.6]; the mean of the inputs' means, [0, 0.4]; dividing
    by the inputs drawn, up to 60.)"""
    lb = build_leaderboard(videos({"m": _heavy(1)}))
    r = by_model(lb)["m"]
    assert r["mean_final"] == pytest.approx(200 / 29) and r["n_videos"] == 29
    assert r["ci_low"] == pytest.approx(0.0, abs=1e-12)
    assert r["ci_high"] == pytest.approx(600 / 67)


@pytest.mark.parametrize("n_heavy, heavy_interval, steady_interval", [
    # P(no heavy input drawn) = 0.9^10 = 0.349: the heavy model is below the steady one in 35% of resamples
    (1, (1, 2), (1, 2)),
    # 0.8^10 = 0.107: still more than 2.5%
    (2, (1, 2), (1, 2)),
    # 0.6^10 = 0.006: less than 2.5%, so each takes one rank in 95% of the resamples
    (4, (1, 1), (2, 2)),
])
def test_rank_intervals_come_from_the_same_bootstrap_over_inputs(n_heavy, heavy_interval, steady_interval):
    """``heavy``: the inputs of :func:`_heavy` (mean at least 200/29 = 6.9 whenever a heavy input is
    drawn, 0 otherwise); ``steady``: one video scoring 5 on each of the same ten inputs (5 in every
    resample). Resampled videos would put heavy first in every resample (its 29+ videos average 6.9
    give or take 0.9)."""
    lb = build_leaderboard(videos({"steady": {f"i{k}": [5.0] for k in range(10)}, "heavy": _heavy(n_heavy)}))
    rows = by_model(lb)
    assert (rows["heavy"]["rank"], rows["steady"]["rank"]) == (1, 2)
    assert (rows["heavy"]["rank_low"], rows["heavy"]["rank_high"]) == heavy_interval
    assert (rows["steady"]["rank_low"], rows["steady"]["rank_high"]) == steady_interval
    assert rows["steady"]["shares_top"] is (steady_interval[0] == 1)
    text = format_leaderboard(lb)
    said = [line.strip() for line in text.splitlines()]
    assert any(line.startswith("no single leader: heavy, steady share the top") for line in said) is (steady_interval[0] == 1)


def test_a_model_ranked_above_one_that_beats_it_on_most_inputs_says_so(tmp_path):
    # reversed: mean 5.5, above original (3.75), yet original scores higher on b, c and d.
    scores = {"reversed": {"a": [10.0], "b": [4.0], "c": [4.0], "d": [4.0]},
              "original": {"a": [0.0], "b": [5.0], "c": [5.0], "d": [5.0]},
              "blurry": {"a": [1.0], "b": [1.0], "c": [1.0], "d": [1.0]}}
    lb = build_leaderboard(videos(scores))
    rows = by_model(lb)
    assert [r["model"] for r in lb.iter_rows(named=True)] == ["reversed", "original", "blurry"]
    assert rows["reversed"]["loses_to"] == "original on 3 of 4 inputs"
    assert rows["original"]["loses_to"] is None and rows["blurry"]["loses_to"] is None
    assert "  reversed is ranked above, but loses to original on 3 of 4 inputs" in format_leaderboard(lb)
    page = tables(render_overview(tmp_path / "reports", lb, video_scores=videos(scores)))
    board = page["leaderboard sortable"]
    assert cell(board, "reversed", "loses to") == "original on 3 of 4 inputs"
    assert cell(board, "original", "loses to") == "–"
    # The win matrix agrees: row original, column reversed is 3 of 4 (75%); the other way 25%.
    matrix = page["winrate"]
    assert cell(matrix, "original", "reversed").startswith("75%")
    assert cell(matrix, "reversed", "original").startswith("25%")
    assert cell(matrix, "reversed", "blurry").startswith("100%") and cell(matrix, "blurry", "reversed").startswith("0%")


def test_a_ranking_on_less_than_half_the_weight_crowns_no_leader_and_leads_with_each_dimension(tmp_path):
    """T2V scored on 3 of 8 criteria, 39% of the weight: physical plausibility (d11) and overall
    alignment (d15) have no score on any video, motion (d9) on some. faithful has the higher final
    score, but frozen leads visual quality: the terminal, the overview and the home page name no
    overall leader, lead with the ranking per measured dimension, and mark the overall rank."""
    vids = videos({"faithful": {"a": [6.0], "b": [7.0]}, "frozen": {"a": [2.0], "b": [3.0]}}).with_columns(
        pl.lit(0.39).alias("weight_scored"), pl.lit(3).alias("n_scored"), pl.lit(8).alias("n_criteria"))
    quality = {"faithful": 7.0, "frozen": 8.0}
    motion = {"faithful": 5.0, "frozen": 1.0}
    crit = pl.DataFrame([{"task": "T2V", "model": m, "input_id": i, "dimension": d, "score": s}
                         for m in ("faithful", "frozen") for i in ("a", "b")
                         for d, s in ((11, None), (15, None), (13, quality[m]), (9, motion[m] if i == "a" else None))],
                        schema_overrides={"score": pl.Float64})
    lb = build_leaderboard(vids, criteria=crit)
    rows = by_model(lb)
    assert rows["faithful"]["partial_evidence"] is True
    assert rows["faithful"]["not_judged"] == "physical plausibility, overall text-video alignment"
    assert (rows["frozen"]["dimensions"], rows["frozen"]["dimension_means"]) == ([9, 13], [1.0, 8.0])
    said = ("the ranking rests on partial evidence: the scored criteria cover 39% of the rubric weight "
            "(not judged: physical plausibility, overall text-video alignment)")
    text = format_leaderboard(lb).splitlines()
    assert text[:5] == ["T2V", f"  no overall leader: {said}", "  per measured dimension (mean criterion score, best first):",
                        "    9 motion: faithful 5.00 > frozen 1.00", "    13 visual/frame quality: frozen 8.00 > faithful 7.00"]
    assert text[6].startswith("   (1)         1  faithful") and text[7].startswith("   (2)")
    assert "  (rank): the overall rank, on partial evidence: not a verdict" in text
    page = render_overview(tmp_path / "reports", lb, video_scores=vids)
    assert f'<span class="partial-evidence">{said}</span>' in page and "No overall leader" in page
    found = tables(page)
    ranking = found["dimension-ranking"]
    assert cell(ranking, "13 visual/frame quality", "leads") == "frozen"
    assert cell(ranking, "9 motion", "ranking") == "faithful 5.00 > frozen 1.00"
    assert cell(found["leaderboard sortable"], "faithful", "rank") == "(1)"
    head = found["leaderboard sortable"][0]  # each column once; the dimension means in the ranking above, not as cells
    assert len(head) == len(set(head)) and not {"dimensions", "dimension means"} & set(head), head
    home = _home(tmp_path, lb)["leaderboard"]
    assert cell(home, "bench / default", "leading model per task (mean final 0-10)") == (
        f"T2V: no overall leader ({said}); per dimension: motion: faithful; visual/frame quality: frozen")
    # Half the weight or more: no such note, the leader named, the rank as it is.
    whole = build_leaderboard(vids.with_columns(pl.lit(0.5).alias("weight_scored")), criteria=crit)
    assert not whole["partial_evidence"].any() and "partial evidence" not in format_leaderboard(whole)
    assert "no overall leader" not in format_leaderboard(whole)
    assert cell(tables(render_overview(tmp_path / "r2", whole, video_scores=vids))["leaderboard sortable"],
                "faithful", "rank") == "1"
    assert cell(_home(tmp_path / "h2", whole)["leaderboard"], "bench / default",
                "leading model per task (mean final 0-10)") == "T2V: faithful 6.50"


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_every_export_has_the_ranks(fmt, tmp_path):
    lb = build_leaderboard(videos({**TIED, "last": {"a": [1.0], "b": [1.0], "c": [1.0]}}))
    data = encode(lb, fmt)
    path = tmp_path / f"lb.{fmt}"
    path.write_bytes(data)
    back = {"json": lambda: pl.DataFrame(json.loads(data)), "csv": lambda: pl.read_csv(path),
            "parquet": lambda: pl.read_parquet(path)}[fmt]()
    ranks = {r["model"]: (r["rank"], r["rank_low"], r["rank_high"]) for r in back.iter_rows(named=True)}
    assert ranks == {**{m: (1, 1, 1) for m in TIED}, "last": (6, 6, 6)}
