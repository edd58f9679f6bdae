"""The overview's FIRM-Video and VEFX-Bench sections hold the stored tables' values, and a protocol that
has not run has no section."""

import re

import polars as pl

from argus_dagster.outputs.protocol_sections import firm_section, vefx_section, vefx_unscored
from argus_dagster.protocols import vefx
from argus_dagster.protocols.firm.tables import firm_summary_table


def _items(html: str) -> list[tuple[str, int, str, str]]:
    """The section's "unscored, and why" list as (dimension, videos, models, reason), item by item."""
    return [(d, int(n), m, r) for d, n, m, r in re.findall(
        r'<li data-dimension="([^"]+)" data-videos="(\d+)">.*?<span class="models">([^<]*)</span>.*?'
        r'<span class="reason">([^<]*)</span></li>', html)]


def test_firm_cells_are_the_summary_of_the_stored_rows():
    scores = pl.DataFrame({"task": ["T2V"] * 4, "model": ["a", "a", "b", "b"], "input_id": ["p0", "p1"] * 2,
                           "if_rating": [4, 5, None, None], "if_reason": ["", "", "IF needs a VLM", "IF needs a VLM"],
                           "wc_rating": [3, None, 2, 2], "wc_reason": ["", "timed out", "", ""],
                           "pq_rating": [4, 4, 1, 2], "pq_reason": [""] * 4},
                          schema_overrides={"if_rating": pl.Int64})
    html = firm_section(scores)
    cells = re.findall(r'<tr data-task="T2V" data-model="(\w)">(.*?)</tr>', html)
    summary = {r["model"]: r for r in firm_summary_table(scores).iter_rows(named=True)}
    for model, row in cells:
        got = dict(re.findall(r'data-key="(\w+)">([^<]*)<', row))
        r = summary[model]
        assert got == {k: "–" if r[k] is None else f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k])
                       for k in got}, model
        assert len(got) == 7
    assert [m for m, _ in cells] == ["a", "b"]
    assert _items(html) == [("IF", 2, "b", "IF needs a VLM"), ("WC", 1, "a", "timed out")]
    assert firm_section(None) == firm_section(scores.head(0)) == ""


def test_vefx_cells_are_the_stored_board_and_reasons_say_why():
    scores = pl.DataFrame({"task": ["TV2V"] * 3, "model": ["e", "e", "n"], "input_id": ["x", "y", "x"],
                           "if_score": [3, None, 1], "rq_score": [4, None, 2], "ee_score": [2, None, 1],
                           "overall": [3.0, None, 4 / 3], "if_reason": ["", "input invalid: no source", ""],
                           "rq_reason": ["", "input invalid: no source", ""], "ee_reason": ["", "input invalid: no source", ""],
                           "overall_reason": ["", "the overall needs all three (IF, RQ, EE unscored)", ""]})
    board = vefx.leaderboard(scores)
    html = vefx_section(board, scores)
    for r in board.iter_rows(named=True):
        name = {vefx.IF: "IF", vefx.RQ: "RQ", vefx.EE: "EE", vefx.OVERALL: "overall"}[r["dimension"]]
        row = re.search(rf'<tr data-task="TV2V" data-model="{r["model"]}">(.*?)</tr>', html).group(1)
        cell = re.search(rf'data-dimension="{name}"[^>]*>(.*?)</td>', row).group(1)
        assert re.sub("<[^>]+>", " ", cell).split() == (
            [f"{r['mean']:.2f}", f"[{r['ci_low']:.2f},", f"{r['ci_high']:.2f}]", f"{r['n_scored']}/{r['n_videos']}",
             "scored"])
    # the better overall first
    assert html.index('data-model="e"') < html.index('data-model="n"')
    why = vefx_unscored(scores)
    assert why.select("dimension", "n_videos").rows() == [("EE", 1), ("IF", 1), ("RQ", 1), ("overall", 1)]
    assert _items(html) == [(d, 1, "e", "input invalid: no source") for d in ("EE", "IF", "RQ")] + [
        ("overall", 1, "e", "the overall needs all three (IF, RQ, EE unscored)")]
    assert vefx_section(None) == ""
