"""The cost ledger: what every VLM request of an evaluation cost, one row per stage, task and model and a
total, from the ``COSTS`` columns its stage tables carry (the ``costs`` asset, ``argus export costs``,
``argus evaluations``, the overview)."""

from __future__ import annotations

import polars as pl

from argus_dagster.infra.tables import COSTS

# The cost ledger's stages: the stored table whose rows carry each stage's ``COSTS`` (rubric generation
# and FIRM's checklists are output-blind: their rows have no model), in the order the ledger lists them.
LEDGER_STAGES = {"rubrics": "rubrics", "videoargus": "video_scores", "firm_checklists": "firm_checklists",
                 "firm": "firm_scores", "vefx": "vefx_scores"}
TOTAL = "total"
# No row of a stored table can hold more of any count than this (a video's answers, each at most
# vlm.MAX_TOKENS_PER_ANSWER): a larger or negative value is read clamped, and sums are taken in 128 bits
# and kept at most the largest 64-bit integer, so no sum wraps.
ROW_BOUND = 2 ** 40
_INT64_MAX = 2 ** 63 - 1
LEDGER = {"stage": pl.String, "task": pl.String, "model": pl.String, "n_videos": pl.Int64, **COSTS,
          "request_seconds": pl.Float64, "prompt_tokens_per_video": pl.Float64, "cached_share": pl.Float64}


def _stage_rows(stage: str, table: pl.DataFrame) -> pl.DataFrame:
    """One stage's stored rows summed per task and model (``""`` for an output-blind stage)."""
    present = [k for k in COSTS if k in table.columns]  # tables written before a column was kept lack it
    if "cached_tokens" in present:  # a row never caches more than its prompt
        prompt = pl.col("prompt_tokens").fill_null(0) if "prompt_tokens" in present else pl.lit(0)
        table = table.with_columns(pl.min_horizontal(pl.col("cached_tokens").fill_null(0), prompt).alias("cached_tokens"))
    model = pl.col("model").fill_null("") if "model" in table.columns else pl.lit("")
    videos = pl.len() if "model" in table.columns else pl.lit(0, pl.Int64)
    return (table.with_columns(model.alias("model"), pl.lit(stage).alias("stage"))
            .group_by("stage", "task", "model")
            .agg(videos.cast(pl.Int64).alias("n_videos"),
                 *[pl.col(k).fill_null(0).clip(0, ROW_BOUND).cast(pl.Int128).sum().clip(0, _INT64_MAX)
                   .cast(pl.Int64).alias(k) for k in present])
            .with_columns(*[pl.lit(0, pl.Int64).alias(k) for k in COSTS if k not in present]))


def cost_table(video_scores: pl.DataFrame | None = None, *, stages: dict[str, pl.DataFrame | None] | None = None
               ) -> pl.DataFrame:
    """The cost ledger: what every VLM request of an evaluation cost, one row per stage, task and
    model, and a last row (stage ``total``) for the whole evaluation.

    ``stages`` maps a stage of :data:`LEDGER_STAGES` to its stored table (``video_scores`` alone is
    the ``videoargus`` stage). Each row sums its rows' ``COSTS`` (requests as the server saw them,
    retries, tokens, images, ``request_ms``), with ``request_seconds``, the prompt tokens per video
    (for a stage that scores videos) and the share of prompt tokens the server had cached (0-1).
    The total's ``n_videos`` is the most videos any stage covered. Empty without any row."""
    tables = dict(stages or {})
    if video_scores is not None:
        tables["videoargus"] = video_scores
    parts = [_stage_rows(stage, t) for stage, t in tables.items() if t is not None and t.height]
    if not parts:
        return pl.DataFrame(schema=LEDGER)
    order = {s: i for i, s in enumerate(LEDGER_STAGES)}
    rows = pl.concat([p.select("stage", "task", "model", "n_videos", *COSTS) for p in parts])
    rows = rows.sort(pl.col("stage").replace_strict(order, default=len(order), return_dtype=pl.Int64), "task", "model")
    total = rows.select(pl.lit(TOTAL).alias("stage"), pl.lit("").alias("task"), pl.lit("").alias("model"),
                        pl.col("n_videos").sum().over("stage").max().alias("n_videos"),
                        *[pl.col(k).cast(pl.Int128).sum().clip(0, _INT64_MAX).cast(pl.Int64).alias(k) for k in COSTS])
    out = pl.concat([rows, total.select(rows.columns)])
    return out.with_columns(
        (pl.col("request_ms") / 1000).alias("request_seconds"),
        pl.when(pl.col("n_videos") > 0).then(pl.col("prompt_tokens") / pl.col("n_videos"))
        .otherwise(None).alias("prompt_tokens_per_video"),
        pl.when(pl.col("prompt_tokens") > 0)
        .then(pl.min_horizontal("cached_tokens", "prompt_tokens") / pl.col("prompt_tokens"))
        .otherwise(None).alias("cached_share")).select(list(LEDGER))


def ledger_total(costs: pl.DataFrame) -> dict | None:
    """The ledger's ``total`` row, None when it has none."""
    if not costs.height or "stage" not in costs.columns:
        return None
    total = costs.filter(pl.col("stage") == TOTAL)
    return total.row(0, named=True) if total.height else None


def cost_summary(costs: pl.DataFrame) -> dict:
    """One evaluation's totals (the ledger's ``total`` row): videos, requests, request-seconds, tokens,
    prompt tokens per video and the share cached (0-1)."""
    total = ledger_total(costs) or {}
    n = int(total.get("n_videos") or 0)
    prompt, cached = int(total.get("prompt_tokens") or 0), int(total.get("cached_tokens") or 0)
    return {"n_videos": n, "vlm_requests": int(total.get("vlm_requests") or 0),
            "request_seconds": float(total.get("request_seconds") or 0.0),
            "prompt_tokens": prompt, "cached_tokens": cached,
            "completion_tokens": int(total.get("completion_tokens") or 0),
            "images_sent": int(total.get("images_sent") or 0),
            "prompt_tokens_per_video": prompt / n if n else None,
            "cached_share": min(max(cached, 0), prompt) / prompt if prompt > 0 else None}


def share_text(share: float | None) -> str:
    """A cached share as a person reads it: ``-`` when unknown, else a percentage of 0-100%."""
    if share is None or share != share:
        return "-"
    return f"{min(max(share, 0.0), 1.0):.0%}"


def format_costs(costs: pl.DataFrame) -> str:
    """The cost ledger as plain text, one line per stage, task and model, and the evaluation's total."""
    lines = [f"{'stage':<15} {'task':<6} {'model':<18} {'videos':>6} {'requests':>8} {'req s':>8} {'retries':>7} "
             f"{'parse':>5} {'prompt tok':>11} {'cached':>7} {'compl tok':>9} {'images':>7} {'image MB':>8} "
             f"{'prompt tok/video':>16}"]
    for r in costs.iter_rows(named=True):
        if r["stage"] == TOTAL:
            continue
        per_video = "-" if r["prompt_tokens_per_video"] is None else f"{r['prompt_tokens_per_video']:.0f}"
        lines.append(f"{r['stage']:<15} {r['task']:<6} {r['model'] or '-':<18} {r['n_videos']:>6} {r['vlm_requests']:>8} "
                     f"{r['request_seconds']:>8.1f} {r['vlm_retries']:>7} {r['vlm_parse_retries']:>5} "
                     f"{r['prompt_tokens']:>11} {share_text(r['cached_share']):>7} {r['completion_tokens']:>9} "
                     f"{r['images_sent']:>7} {r['image_bytes_sent'] / 1e6:>8.1f} {per_video:>16}")
    total = cost_summary(costs)
    if total["prompt_tokens"]:
        per_video = "-" if total["prompt_tokens_per_video"] is None else f"{total['prompt_tokens_per_video']:.0f}"
        lines.append(f"total: {total['vlm_requests']} requests, {total['request_seconds']:.1f} request-seconds, "
                     f"{total['prompt_tokens']} prompt tokens ({share_text(total['cached_share'])} cached), "
                     f"{per_video} per video; {total['completion_tokens']} completion tokens")
    else:
        lines.append(f"total: {total['vlm_requests']} requests, no VLM tokens reported")
    return "\n".join(lines)
