"""Table contracts between stages (polars schemas). Other tools and later stages read these columns.

A row about one video names it by ``model``, ``input_id`` and ``sample``: ``""`` for the single video
of an input (``<id>.mp4``), the sample number for one of several (``<id>__<k>.mp4``, ``<id>/<k>.mp4``).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from argus_dagster.infra.storage import LOCAL, join

S, F, I, B = pl.String, pl.Float64, pl.Int64, pl.Boolean

# What a row's VLM calls cost in the run that wrote it (none for work taken from the cache): requests
# (retries included), transport and parse retries, the answers' prompt, cached-prompt and completion
# tokens (``usage``), images and their JPEG bytes sent, and the requests' latencies summed (``request_ms``,
# request-milliseconds). Summed per video, per stage x task x model and per evaluation (the cost ledger,
# :func:`argus_dagster.method.ledger.cost_table`).
COSTS = {"vlm_requests": I, "vlm_retries": I, "vlm_parse_retries": I, "prompt_tokens": I, "cached_tokens": I,
         "completion_tokens": I, "images_sent": I, "image_bytes_sent": I, "request_ms": I}
INPUT_INSTANCES = {"task": S, "input_id": S, "prompt": S, "first_frame": S, "subject_images": pl.List(S),
                   "source_video": S, "content_hash": S, "error": S}
RUBRICS = {"task": S, "input_id": S, "rubric_hash": S, "rubric_json": S, "source": S, "generator_backend": S,
           "generator_model": S, "prompt_version": S, "n_criteria": I, "n_hard": I, "postprocess_log": S,
           "load_log": S, "error": S, **COSTS}
CANDIDATE_VIDEOS = {"task": S, "model": S, "input_id": S, "sample": S, "uri": S, "sha256": S, "n_frames": I, "fps": F,
                    "width": I, "height": I, "duration": F, "error": S}
CRITERION_EVIDENCE = {"task": S, "model": S, "input_id": S, "sample": S, "criterion_id": S, "rubric_hash": S,
                      "video_sha256": S, "plan": S, "repairs": S, "plan_status": S, "tools": pl.List(S),
                      "evidence": S, "n_ok": I, "seconds": F, "n_cached": I, "cache_hit": B,
                      "error": S, **COSTS}
# ``score`` 0-10 or null: a VLM judge's whole number (method §7), the evidence-only judge's measure to one decimal.
# Its COSTS are its evidence's and its judgment's together.
CRITERION_SCORES = {"task": S, "model": S, "input_id": S, "sample": S, "criterion_id": S, "dimension": I, "type": S,
                    "importance": S, "hard_cap": I, "fail_threshold": F, "score": F, "rationale": S, "judge": S,
                    "cache_hit": B, **COSTS}
# Coverage: ``weight_scored`` is the share of importance weight (high 3, medium 2, low 1) scored,
# ``judge`` who scored, ``needs_vlm`` the criteria only a VLM judge could score.
VIDEO_SCORES = {"task": S, "model": S, "input_id": S, "sample": S, "base_score": F, "final_score": F, "cap_alpha": F,
                "caps_fired": pl.List(S), "n_scored": I, "n_criteria": I, "weight_scored": F, "judge": S,
                "needs_vlm": pl.List(S), "error": S, **COSTS}
# The interval is over videos' final scores, which cover only the scored criteria (``ci_scope``).
# ``rank``: competition rank of the mean (ties share it); ``rank_low``-``rank_high``: the ranks the model
# takes in 95% of the same bootstrap's resamples; ``shares_top``: rank 1 lies in that interval;
# ``loses_to``: models ranked below it that beat it on most shared inputs; ``partial_evidence``: the scored
# criteria cover less than half of the rubric weight; ``not_judged``: the dimensions left unscored;
# ``dimensions`` and ``dimension_means``: the model's mean criterion score per measured dimension (by number),
# what leads where a ranking rests on partial evidence. ``judge_sd``: the judge's own standard deviation on
# a video's final score, measured by ``argus evaluate --repeat`` (0 for a deterministic judge; null where
# never measured); ``rank_holds_under_noise``: the rank stays in 95% of draws of that noise alone.
LEADERBOARD = {"bench": S, "profile": S, "task": S, "model": S, "mean_final": F, "ci_low": F, "ci_high": F, "n_videos": I, "n_errors": I,
               "n_scored": F, "n_criteria": F, "weight_scored": F, "covers": S, "judge": S, "needs_vlm": pl.List(S),
               "ci_scope": S, "rank": I, "rank_low": I, "rank_high": I, "shares_top": B, "loses_to": S,
               "partial_evidence": B, "not_judged": S, "dimensions": pl.List(I), "dimension_means": pl.List(F),
               "judge_sd": F, "rank_holds_under_noise": B}


def frame(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """A DataFrame with exactly ``schema``'s columns, in order, also when ``rows`` is empty."""
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema, orient="row")


def read_stored(path: str | Path | None, store=None, columns: list[str] | None = None) -> pl.DataFrame | None:
    """The one reader of a table an IO manager stored: the parquet file (or ``s3://`` object, read
    through ``store``) at ``path``, or None when there is no path or it is gone or unreadable (pruned
    by retention, removed by hand, being replaced). A relative ``path`` (as materializations record
    their tables) is the evaluation's that ``store`` serves (:meth:`~argus_dagster.infra.storage.Storage.resolve`)."""
    if path is None:
        return None
    store = store or LOCAL
    where = store.resolve(path)  # outside the guard: a storage that serves no evaluation is a setting to fix
    try:
        return pl.read_parquet(io.BytesIO(store.read_bytes(where)), columns=columns)
    except Exception:  # a file gone, being replaced or damaged: the reader says "none" rather than fail
        return None


def recorded_path(metadata: Mapping[str, Any], partition: Any = None) -> str | None:
    """Where a materialization's table is, as its IO manager recorded it in the materialization's
    metadata: ``path``, or ``paths`` by partition for a run of many partitions (one file each);
    relative to the evaluation's folder (absolute in records made before)."""
    path = metadata["path"].value if "path" in metadata else None
    if path is None and "paths" in metadata:
        path = (metadata["paths"].value or {}).get(str(partition))
    return str(path) if path is not None else None


def recorded_version(metadata: Mapping[str, Any], partition: Any = None) -> str | None:
    """The immutable copy of a materialization's table its IO manager recorded: ``stored_version``, or
    ``stored_versions`` by partition for a run of many partitions; None for a record without one."""
    kept = metadata["stored_version"].value if "stored_version" in metadata else None
    if kept is None and "stored_versions" in metadata:
        kept = (metadata["stored_versions"].value or {}).get(str(partition))
    return str(kept) if kept is not None else None


def recorded_table(record, store=None, columns: list[str] | None = None) -> pl.DataFrame | None:
    """The table a materialization record (Dagster's ``EventLogRecord``) points at, read through
    ``store`` (:func:`read_stored`), or None when there is no record or its table is gone.

    The record's own version is read (what that materialization wrote, whatever ran since); the
    current path only where the record kept none (made before versions were kept) or retention
    removed it."""
    if record is None:
        return None
    m = record.asset_materialization
    kept = read_stored(recorded_version(m.metadata, m.partition), store, columns)
    return kept if kept is not None else read_stored(recorded_path(m.metadata, m.partition), store, columns)


def stored_table(storage_dir: Path | str, asset: str, store=None) -> pl.DataFrame | None:
    """An asset's stored table (every partition's parquet file together), or None where there is none;
    ``storage_dir`` is a folder, or an ``s3://`` prefix read through ``store``.

    The layout is the parquet IO managers': ``<asset>.parquet`` unpartitioned, a folder of
    ``<partition...>.parquet`` files partitioned."""
    store = store or LOCAL
    one = join(storage_dir, f"{asset}.parquet")
    files = [one] if store.exists(one) else [o.uri for o in store.list(join(storage_dir, asset))
                                             if o.rel.endswith(".parquet")]
    # a file being replaced or damaged: that partition is left out of the page
    frames = [f for f in (read_stored(f, store) for f in files) if f is not None and f.height]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None
