"""Why a protocol left videos unscored, counted: the one reading of a scores table's ``<value>`` and
``<reason>`` columns that FIRM-Video's and VEFX-Bench's tables, terminal lines and page sections share."""

from __future__ import annotations

import polars as pl

SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {"dimension": pl.String, "reason": pl.String, "n_videos": pl.UInt32,
                                                      "models": pl.List(pl.String)}


def unscored_reasons(scores: pl.DataFrame | None, columns: dict[str, tuple[str, str]]) -> pl.DataFrame:
    """Per dimension (a key of ``columns``, which names its value and reason columns) and reason: the
    videos of ``scores`` it left without a value and the models they are of; the most frequent first."""
    parts = [scores.filter(pl.col(value).is_null()).select(
                 pl.lit(name).alias("dimension"), pl.col(reason).fill_null("").alias("reason"),
                 pl.col("model").cast(pl.String))
             for name, (value, reason) in columns.items()
             if scores is not None and value in scores.columns and reason in scores.columns]
    parts = [p for p in parts if p.height]
    if not parts:
        return pl.DataFrame(schema=SCHEMA)
    return (pl.concat(parts).group_by("dimension", "reason", maintain_order=True)
            .agg(pl.len().cast(pl.UInt32).alias("n_videos"), pl.col("model").unique().sort().alias("models"))
            .sort(["n_videos", "dimension", "reason"], descending=[True, False, False]))
