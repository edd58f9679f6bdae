"""FIRM-Video's results as the terminal prints them: whole column names, 120 columns at most, and every
reason a video is unscored under the table, wrapped, never cut."""

import re

import polars as pl

from argus_dagster.protocols.firm.tables import firm_summary_table, format_firm_summary, unscored_reasons

LONG_REASON = ("IF planner: unusable answer after 3 attempts: no JSON object in the reply (the server answered "
               "with prose about the video instead of the checklist it was asked for)")


def terminal_reasons(text: str) -> list[tuple[str, int, list[str], str]]:
    """The printed "unscored, and why" lines as (dimension, videos, models, reason): each item's wrapped
    lines joined again (a continuation line is indented 6 spaces) and split where it says."""
    body = text.partition("unscored, and why")[2].split("\n")[1:]
    items: list[str] = []
    for line in body:
        if line.startswith("      ") and items:
            items[-1] += " " + line.strip()
        elif line.startswith("  "):
            items.append(line.strip())
    out = []
    for item in items:
        m = re.match(r"(\w+): (\d+) videos?, (.*?): (.*)$", item)
        out.append((m.group(1), int(m.group(2)), m.group(3).split(", "), m.group(4)))
    return out


def _scores() -> pl.DataFrame:
    rows = []
    for model, pq in (("a-model-with-a-rather-long-name-from-a-sweep-of-checkpoints-0001", 4), ("b", None)):
        for i in range(3):
            rows.append({"task": "T2V", "model": model, "input_id": f"p{i}",
                         "if_rating": None, "if_reason": LONG_REASON if model == "b" else "not evaluated",
                         "wc_rating": 3 if i else None, "wc_reason": "" if i else "world coherence needs a VLM",
                         "pq_rating": pq, "pq_reason": "" if pq else "the video could not be decoded"})
    return pl.DataFrame(rows, schema_overrides={f"{d}_rating": pl.Int64 for d in ("if", "wc", "pq")})


def test_whole_names_within_120_columns_and_every_reason_whole():
    scores = _scores()
    text = format_firm_summary(firm_summary_table(scores), unscored_reasons(scores))
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 120, [len(x) for x in lines]
    assert lines[0].split() == ["task", "model", "videos", "IF", "mean", "WC", "mean", "PQ", "mean",
                                "IF", "unscored", "WC", "unscored", "PQ", "unscored"]
    b = next(x.split() for x in lines[2:4] if x.split()[1] == "b")
    assert b == ["T2V", "b", "3", "-", "3.00", "-", "3", "1", "3"]
    long = next(x for x in lines[2:4] if x.split()[1] != "b")
    assert long.split()[1].endswith("…") and long.split()[2:] == ["3", "-", "3.00", "4.00", "3", "1", "0"]
    m = "a-model-with-a-rather-long-name-from-a-sweep-of-checkpoints-0001"
    assert terminal_reasons(text) == [  # each reason whole, wherever a line wrapped it; the most frequent first
        ("IF", 3, ["b"], " ".join(LONG_REASON.split())), ("IF", 3, [m], "not evaluated"),
        ("PQ", 3, ["b"], "the video could not be decoded"), ("WC", 2, [m, "b"], "world coherence needs a VLM")]


def test_every_video_scored_is_said():
    scores = _scores().with_columns(pl.lit(4).alias("if_rating"), pl.lit(4).alias("wc_rating"),
                                    pl.lit(4).alias("pq_rating"))
    text = format_firm_summary(firm_summary_table(scores), unscored_reasons(scores))
    assert text.endswith("every video is scored on every dimension") and "why" not in text
