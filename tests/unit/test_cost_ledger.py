"""The cost ledger's arithmetic: token counts clamped where a server's ``usage`` is read, the ledger
grouped by stage, task and model with a total, sums that never wrap, a cached share always 0-100%,
and the overview's cost table read cell by cell."""

from html.parser import HTMLParser

import polars as pl
import pytest

from argus_dagster.infra.tables import COSTS
from argus_dagster.method.ledger import TOTAL, cost_summary, cost_table, format_costs, share_text
from argus_dagster.outputs.overview import render_overview
from argus_dagster.vlm.ledger import MAX_TOKENS_PER_ANSWER, CallStats, cached_share, usage_counts


@pytest.mark.parametrize("usage, expected", [
    # (usage as a server sent it, (prompt, completion, cached) as read): expected by hand
    ({"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 64}}, (100, 7, 64)),
    # more cached than sent: all of the prompt was cached, no more
    ({"prompt_tokens": 1, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 2 ** 53 - 1}}, (1, 1, 1)),
    # negative counts are none
    ({"prompt_tokens": -5, "completion_tokens": -1, "prompt_tokens_details": {"cached_tokens": -3}}, (0, 0, 0)),
    # a count no context window holds is read as the bound
    ({"prompt_tokens": 10 ** 30, "completion_tokens": 2 ** 70}, (MAX_TOKENS_PER_ANSWER, MAX_TOKENS_PER_ANSWER, None)),
    # cached without a prompt count: nothing to be a share of
    ({"completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 50}}, (None, 3, None)),
    # not numbers
    ({"prompt_tokens": "12", "completion_tokens": True, "prompt_tokens_details": "x"}, (None, None, None)),
    (None, (None, None, None)),
    ({"prompt_tokens": 12.0, "completion_tokens": float("nan")}, (12, None, None)),
])
def test_usage_counts_are_clamped_where_they_are_read(usage, expected):
    assert usage_counts(usage) == expected


def test_the_cached_share_is_a_share():
    assert cached_share(2 ** 53 - 1, 1) == 1.0  # the finding: 9e15 as a "share"
    assert cached_share(-4, 10) == 0.0 and cached_share(5, 0) is None and cached_share(3, 4) == 0.75
    assert share_text(90071992547409.92) == "100%" and share_text(-2.0) == "0%" and share_text(None) == "-"
    stats = CallStats()
    stats.prompt_tokens, stats.cached_tokens = 1, 2 ** 53 - 1  # as a stage's stats could be summed from anything
    assert stats.as_metadata()["vlm_cached_share"] == 1.0


def _rows(stage_rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([{**{k: 0 for k in COSTS}, **r} for r in stage_rows])


def _stages():
    """Two models' videos, the task's rubrics, a FIRM score: counts chosen so every group's sum is known."""
    videos = _rows([
        {"task": "T2V", "model": "a", "vlm_requests": 10, "prompt_tokens": 4000, "cached_tokens": 3000, "request_ms": 2500},
        {"task": "T2V", "model": "a", "vlm_requests": 6, "prompt_tokens": 3000, "cached_tokens": 2400, "request_ms": 1500},
        {"task": "T2V", "model": "b", "vlm_requests": 10, "prompt_tokens": 2000, "cached_tokens": 1500, "request_ms": 1000},
        {"task": "TI2V", "model": "a", "vlm_requests": 1, "prompt_tokens": 100, "cached_tokens": 0, "request_ms": 10},
    ])
    rubrics = _rows([  # output-blind: no model column
        {"task": "T2V", "input_id": "p1", "vlm_requests": 2, "prompt_tokens": 900, "cached_tokens": 0, "request_ms": 4000},
        {"task": "T2V", "input_id": "p2", "vlm_requests": 1, "prompt_tokens": 800, "cached_tokens": 0, "request_ms": 3000},
    ])
    firm = _rows([{"task": "T2V", "model": "a", "vlm_requests": 5, "prompt_tokens": 700, "cached_tokens": 600,
                   "request_ms": 500}])
    return {"videoargus": videos, "rubrics": rubrics, "firm": firm}


def test_the_ledger_has_a_row_per_stage_task_and_model_and_a_total():
    costs = cost_table(stages=_stages())
    key = [(r["stage"], r["task"], r["model"]) for r in costs.iter_rows(named=True)]
    assert key == [("rubrics", "T2V", ""), ("videoargus", "T2V", "a"), ("videoargus", "T2V", "b"),
                   ("videoargus", "TI2V", "a"), ("firm", "T2V", "a"), (TOTAL, "", "")]
    row = {k: r for k, r in zip(key, costs.iter_rows(named=True))}
    assert row[("rubrics", "T2V", "")]["vlm_requests"] == 3 and row[("rubrics", "T2V", "")]["n_videos"] == 0
    assert row[("rubrics", "T2V", "")]["request_seconds"] == pytest.approx(7.0)
    a = row[("videoargus", "T2V", "a")]
    assert (a["n_videos"], a["vlm_requests"], a["prompt_tokens"], a["cached_tokens"]) == (2, 16, 7000, 5400)
    assert a["request_seconds"] == pytest.approx(4.0) and a["prompt_tokens_per_video"] == pytest.approx(3500)
    assert a["cached_share"] == pytest.approx(5400 / 7000)
    assert row[("firm", "T2V", "a")]["vlm_requests"] == 5  # FIRM's model a is not VideoArgus' model a
    total = row[(TOTAL, "", "")]
    # every request of the evaluation: 3 rubric + 27 VideoArgus + 5 FIRM
    assert total["vlm_requests"] == 35 and total["prompt_tokens"] == 1700 + 9100 + 700
    assert total["request_seconds"] == pytest.approx(7.0 + 5.01 + 0.5)
    assert total["n_videos"] == 4  # the most videos one stage covered
    summary = cost_summary(costs)
    assert summary["vlm_requests"] == 35 and summary["prompt_tokens"] == 11500
    assert summary["cached_share"] == pytest.approx((5400 + 1500 + 600) / 11500)
    text = format_costs(costs)
    assert text.splitlines()[1].split()[:5] == ["rubrics", "T2V", "-", "0", "3"]
    assert text.splitlines()[-1].startswith("total: 35 requests, 12.5 request-seconds, 11500 prompt tokens (65% cached)")


def test_huge_counts_never_wrap_and_cached_never_exceeds_prompt():
    big = _rows([{"task": "T2V", "model": "a", "vlm_requests": 1, "prompt_tokens": 2 ** 62, "cached_tokens": 2 ** 62},
                 {"task": "T2V", "model": "a", "vlm_requests": 1, "prompt_tokens": 2 ** 62, "cached_tokens": 2 ** 62},
                 {"task": "T2V", "model": "b", "vlm_requests": 1, "prompt_tokens": 10, "cached_tokens": 2 ** 53 - 1},
                 {"task": "T2V", "model": "b", "vlm_requests": 1, "prompt_tokens": -7, "cached_tokens": -7}])
    costs = cost_table(big)
    for r in costs.iter_rows(named=True):
        assert r["prompt_tokens"] >= 0 and 0 <= r["cached_tokens"] <= r["prompt_tokens"], r
        assert r["cached_share"] is None or 0 <= r["cached_share"] <= 1, r
    b = costs.filter(pl.col("model") == "b").row(0, named=True)
    assert (b["prompt_tokens"], b["cached_tokens"], b["cached_share"]) == (10, 10, 1.0)
    total = costs.filter(pl.col("stage") == TOTAL).row(0, named=True)
    a = costs.filter(pl.col("model") == "a").row(0, named=True)
    assert total["prompt_tokens"] == a["prompt_tokens"] + 10 > 0  # no wrap into the negative
    assert "%" in format_costs(costs) and all(len(share_text(r["cached_share"])) <= 4 for r in costs.iter_rows(named=True))


class _CostTables(HTMLParser):
    """The overview's cost tables as rows of {header: cell text}, per task section."""

    def __init__(self):
        super().__init__()
        self.task, self.in_costs, self.cell = None, False, None
        self.tables: dict[str, list[dict]] = {}
        self.head: list[str] = []
        self.row: list[str] = []
        self.totals: dict[str, str] = {}
        self.total_key = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and "data-task" in a:
            self.task = a["data-task"]
        if tag == "table" and a.get("class") == "costs":
            self.in_costs, self.head = True, []
            self.tables[self.task] = []
        if self.in_costs and tag == "tr":
            self.row = []
        if self.in_costs and tag in ("td", "th"):
            self.cell = ""
        if tag == "b" and "data-cost" in a:
            self.total_key, self.cell = a["data-cost"], ""

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

    def handle_endtag(self, tag):
        if tag == "b" and self.total_key:
            self.totals[self.total_key], self.total_key, self.cell = self.cell, None, None
        if self.in_costs and tag == "th":
            self.head.append(self.cell)
            self.cell = None
        if self.in_costs and tag == "td":
            self.row.append(self.cell)
            self.cell = None
        if self.in_costs and tag == "tr" and self.row:
            self.tables[self.task].append(dict(zip(self.head, self.row)))
        if tag == "table":
            self.in_costs = False


def test_the_overview_shows_each_stage_and_the_evaluations_total(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    lb = pl.DataFrame([{"task": "T2V", "model": m, "mean_final": 5.0, "ci_low": 4.0, "ci_high": 6.0, "n_videos": 2,
                        "n_errors": 0} for m in ("a", "b")])
    stages = _stages()
    stages["rubrics"] = stages["rubrics"].with_columns(cached_tokens=pl.Series([2 ** 53 - 1, 0]))  # a lying server
    parsed = _CostTables()
    parsed.feed(render_overview(reports, lb, costs=cost_table(stages=stages)))
    rows = {(r["stage"], r["model"]): r for r in parsed.tables["T2V"]}
    assert set(rows) == {("rubrics", "-"), ("videoargus", "a"), ("videoargus", "b"), ("firm", "a")}
    assert rows[("rubrics", "-")]["requests"] == "3" and rows[("rubrics", "-")]["request-seconds"] == "7.0"
    assert rows[("rubrics", "-")]["share cached"] == "53%"  # 900 of 1700: the lie read as all of its prompt
    assert rows[("videoargus", "a")]["prompt tokens per video"] == "3500"
    assert rows[("videoargus", "a")]["share cached"] == "77%"
    assert parsed.totals == {"vlm_requests": "35", "request_seconds": "12.5", "prompt_tokens": "11500",
                             "cached_share": f"{(900 + 5400 + 1500 + 600) / 11500:.0%}"}
