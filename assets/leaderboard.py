"""The leaderboard across every materialized task x model partition."""


import dagster as dg
import polars as pl

from argus_dagster.leaderboard import build_leaderboard, format_leaderboard
from argus_dagster.tables import VIDEO_SCORES, frame


@dg.asset(code_version="1", group_name="reports", kinds={"polars"},
          ins={"video_scores": dg.AssetIn(metadata={"allow_missing_partitions": True})})
def leaderboard(context: dg.AssetExecutionContext, video_scores: dict[str, pl.DataFrame]) -> dg.Output[pl.DataFrame]:
    """Mean final score per task and model, with a bootstrap 95% interval and the video count."""
    frames = [df for df in video_scores.values() if df is not None and df.height]
    scores = pl.concat(frames) if frames else frame([], VIDEO_SCORES)
    lb = build_leaderboard(scores)
    return dg.Output(lb, metadata={
        "n_partitions": len(frames), "n_rows": lb.height,
        "leaderboard": dg.MetadataValue.md("```\n" + format_leaderboard(lb) + "\n```"),
    })


@dg.asset_check(asset=leaderboard, description="Means lie in 0-10 and inside their intervals.")
def leaderboard_in_range(leaderboard: pl.DataFrame) -> dg.AssetCheckResult:
    lb = leaderboard.filter(pl.col("mean_final").is_not_null())
    bad = lb.filter((pl.col("mean_final") < 0) | (pl.col("mean_final") > 10)
                    | (pl.col("ci_low") > pl.col("mean_final") + 1e-9) | (pl.col("ci_high") < pl.col("mean_final") - 1e-9))
    return dg.AssetCheckResult(passed=bad.height == 0, metadata={"n_bad": bad.height, "n_rows": lb.height})
