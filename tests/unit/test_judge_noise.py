"""The judge's own noise (``argus evaluate --repeat``): the spread of repeated judgments, computed here
independently with numpy, and what it does to the leaderboard: intervals that resample repeats with
inputs, ranks that say whether they hold under it, a deterministic judge's band of zero."""

import numpy as np
import polars as pl
import pytest

from argus_dagster.method import judge_noise as jn
from argus_dagster.method.leaderboard import build_leaderboard, format_leaderboard, noise_text

# What the terminal and the overview say of a deterministic judge's noise.
BAND = ("the judge's noise: none, a band of zero (a deterministic judge: the same evidence always gets the same "
        "score), so every rank holds under it")


def _videos(means: dict[str, float], n_inputs: int = 20, judge: str = "vlm judge-x", seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    base = rng.uniform(-1.5, 1.5, n_inputs)  # inputs differ; every model sees the same inputs
    rows = [{"task": "T2V", "model": m, "input_id": f"i{i:02d}", "sample": "", "final_score": float(mu + base[i]),
             "judge": judge, "n_scored": 4, "n_criteria": 4, "weight_scored": 1.0}
            for m, mu in means.items() for i in range(n_inputs)]
    return pl.DataFrame(rows)


def _noise(models: list[str], sd: float, k: int = 5, videos: int = 8, judge: str = "vlm judge-x",
           seed: int = 1) -> pl.DataFrame:
    """Repeats whose final scores scatter uniformly by +-sd*sqrt(3) (standard deviation sd) around each
    video's own level; two criteria per repeat."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in models:
        for v in range(videos):
            level = rng.uniform(3, 8)
            for r in range(k):
                final = level + rng.uniform(-1, 1) * sd * np.sqrt(3)
                rows += [{"task": "T2V", "model": m, "input_id": f"i{v:02d}", "sample": "", "repeat": r,
                          "criterion_id": c, "score": final + d, "judge": judge, "final_score": final}
                         for c, d in (("c1", 0.0), ("c2", 1.0))]
    return pl.DataFrame(rows, schema=jn.JUDGE_NOISE)


def test_spread_and_judge_sd_equal_a_pooled_within_video_standard_deviation():
    noise = _noise(["a"], sd=0.8, k=4, videos=6)
    finals = noise.unique(["input_id", "repeat"]).sort("input_id", "repeat")
    by_video = [g["final_score"].to_numpy() for _, g in finals.group_by("input_id", maintain_order=True)]
    pooled = np.sqrt(sum(((x - x.mean()) ** 2).sum() for x in by_video) / sum(len(x) - 1 for x in by_video))
    assert jn.judge_sd(jn.final_deviations(noise, "T2V", "a")) == pytest.approx(pooled, rel=1e-12)
    spread = jn.criterion_spread(noise)
    assert spread["criterion_id"].to_list() == ["c1", "c2"]
    assert spread["sd"].to_list() == pytest.approx([pooled, pooled], rel=1e-12)  # c2 is c1 moved by 1
    assert spread["n_videos"].to_list() == [6, 6] and spread["repeats"].to_list() == [4, 4]


def test_the_same_score_every_time_is_exactly_no_noise():
    noise = _noise(["a"], sd=0.0)
    assert jn.judge_sd(jn.final_deviations(noise, "T2V")) == 0.0
    assert jn.criterion_spread(noise)["sd"].to_list() == [0.0, 0.0]
    assert jn.judge_sd(np.array([])) is None


def test_the_sample_of_videos_is_the_same_every_run_and_capped():
    keys = [(f"i{i}", s) for i in range(30) for s in ("", "s1")]
    first = jn.sample_videos(keys, 8, salt="T2V|a")
    assert len(first) == 8 and first == jn.sample_videos(list(reversed(keys)), 8, salt="T2V|a")
    assert first != jn.sample_videos(keys, 8, salt="T2V|b")  # another partition, other videos
    assert jn.sample_videos(keys[:3], 8) == sorted(keys[:3])


def test_a_deterministic_judge_leaves_the_leaderboard_as_it_was_and_every_rank_holds():
    videos = _videos({"a": 7.0, "b": 6.9, "c": 3.0})
    plain = build_leaderboard(videos)
    noisy = build_leaderboard(videos, noise=_noise(["a", "b", "c"], sd=0.0))
    for col in ("mean_final", "ci_low", "ci_high", "rank", "rank_low", "rank_high"):
        assert noisy[col].to_list() == plain[col].to_list(), col
    assert noisy["judge_sd"].to_list() == [0.0, 0.0, 0.0]
    assert noisy["rank_holds_under_noise"].to_list() == [True, True, True]
    assert plain["judge_sd"].to_list() == [None] * 3 and plain["rank_holds_under_noise"].to_list() == [None] * 3
    line = [ln.strip() for ln in format_leaderboard(noisy).splitlines() if "judge's noise" in ln]
    assert line == [noise_text(noisy.to_dicts())] == [BAND]


def test_two_models_closer_than_the_noise_do_not_hold_their_ranks():
    videos = _videos({"a": 7.0, "b": 6.9, "c": 3.0})
    noisy = build_leaderboard(videos, noise=_noise(["a", "b", "c"], sd=1.0, k=5, videos=16))
    holds = dict(zip(noisy["model"].to_list(), noisy["rank_holds_under_noise"].to_list()))
    assert holds == {"a": False, "b": False, "c": True}
    sd = dict(zip(noisy["model"].to_list(), noisy["judge_sd"].to_list()))
    assert all(0.75 < v < 1.25 for v in sd.values()), sd  # sd 1 measured on 16 videos x 5 repeats (64 df)
    plain = build_leaderboard(videos)
    width = (noisy["ci_high"] - noisy["ci_low"]).to_list()
    assert all(w > p for w, p in zip(width, (plain["ci_high"] - plain["ci_low"]).to_list()))  # inputs and repeats
    text = noise_text(noisy.to_dicts())
    assert text is not None and text.endswith("the ranks of a, b do not hold under it")


def test_noise_of_another_judge_says_nothing_of_this_one():
    videos = _videos({"a": 7.0, "b": 6.9})
    other = build_leaderboard(videos, noise=_noise(["a", "b"], sd=1.0, judge="vlm judge-y"))
    assert other["judge_sd"].to_list() == [None, None]
    assert other["ci_low"].to_list() == build_leaderboard(videos)["ci_low"].to_list()


def test_a_model_never_judged_again_takes_the_task_s_noise():
    videos = _videos({"a": 7.0, "b": 6.9})
    lb = build_leaderboard(videos, noise=_noise(["a"], sd=1.0))
    sd = dict(zip(lb["model"].to_list(), lb["judge_sd"].to_list()))
    assert sd["b"] == pytest.approx(sd["a"])


def test_the_overview_says_a_deterministic_judge_has_a_band_of_zero_and_which_ranks_do_not_hold():
    import html
    import re

    from argus_dagster.outputs.overview import render_overview

    def read(lb) -> tuple[list[str], dict[str, str]]:
        page = render_overview("/nonexistent-reports", lb)
        lines = [html.unescape(t) for t in re.findall(r'<p class="judge-noise muted">(.*?)</p>', page)]
        cells = dict(re.findall(r'<tr data-model="([^"]+)">.*?<td class="judge-noise"[^>]*>(.*?)</td>', page, re.S))
        return lines, cells

    videos = _videos({"a": 7.0, "b": 6.9, "c": 3.0})
    lines, cells = read(build_leaderboard(videos, noise=_noise(["a", "b", "c"], sd=0.0)))
    assert lines == [noise_text(build_leaderboard(videos, noise=_noise(["a", "b", "c"], sd=0.0)).to_dicts())]
    assert lines == [BAND]
    assert cells == {"a": "sd 0.00, rank holds", "b": "sd 0.00, rank holds", "c": "sd 0.00, rank holds"}
    noisy = build_leaderboard(videos, noise=_noise(["a", "b", "c"], sd=1.0, videos=16))
    lines, cells = read(noisy)
    assert lines[0].endswith("the ranks of a, b do not hold under it")
    sd = dict(zip(noisy["model"].to_list(), noisy["judge_sd"].to_list()))
    assert cells == {m: f"sd {sd[m]:.2f}, rank " + ("holds" if m == "c" else "does not hold") for m in "abc"}
    lines, cells = read(build_leaderboard(videos))  # never measured: no column, no line
    assert lines == [] and cells == {}
