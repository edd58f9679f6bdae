"""Runs a command asks for beyond the pass, on every selected partition with scores: the judge's noise
(``argus evaluate --repeat K``) and the controls (``--controls N``), each followed by what reads them.
Neither asset carries an automation condition: they run when asked."""

from __future__ import annotations

import time
from typing import Protocol

import dagster as dg
import polars as pl

from argus_dagster.client.results import load_stored
from argus_dagster.client.runs import RunSpec, launch, partition_ranges
from argus_dagster.infra.storage import Storage
from argus_dagster.outputs.history_words import split_partition


class Evaluation(Protocol):
    """What these runs need of the command's evaluation (:class:`argus_dagster.client.evaluate.Evaluation`)."""

    @property
    def instance(self) -> dg.DagsterInstance: ...

    @property
    def defs(self) -> dg.Definitions: ...

    @property
    def partitions(self) -> set[tuple[str, str]]: ...

    @property
    def storage(self) -> Storage: ...


def _scored_ranges(ev: Evaluation, asset: str, ops: dict, progress, elapsed, tags: dict[str, str], words: str) -> bool:
    """Materialize ``asset`` (run when asked: the judge's noise, the controls) with config ``ops`` on
    every selected partition with scores, in the fewest range runs; False where none has scores."""
    scored = ev.instance.get_materialized_partitions(dg.AssetKey("video_scores"))
    wanted = {(t, m): (asset,) for t, m in ev.partitions if str(dg.MultiPartitionKey({"task": t, "model": m})) in scored}
    if not wanted:
        progress(f"{elapsed()} {words}: no scored partition")
        return False
    model_order = list(ev.instance.get_dynamic_partitions("candidate_models"))
    resources = ev.defs.resources
    assert resources is not None  # build_definitions always binds the evaluation's resources
    for selection, keys in partition_ranges(wanted, model_order):
        t0 = time.perf_counter()
        launch(ev.instance, resources, RunSpec("asked", selection, keys, tags=tags, ops={asset: ops}), progress)
        where = ", ".join(" x ".join(split_partition(key)) for key in keys)
        progress(f"{elapsed()} {words}: {where} ({time.perf_counter() - t0:.1f}s)")
    return True


def judge_noise_runs(ev: Evaluation, repeat: tuple[int, int], progress, elapsed, tags: dict[str, str]) -> pl.DataFrame | None:
    """``--repeat K``: the judge's noise measured on every selected partition with scores (one range
    run per task or model, as the pass's), then the leaderboard, which resamples it with the inputs."""
    k, n = repeat
    words = f"the judge's noise, up to {n} video{'s' if n != 1 else ''} judged {k} times more"
    if _scored_ranges(ev, "judge_noise", {"repeat": k, "videos": n}, progress, elapsed, tags, words):
        resources = ev.defs.resources
        assert resources is not None
        t0 = time.perf_counter()
        launch(ev.instance, resources, RunSpec("leaderboard", ["leaderboard"], tags=tags), progress)
        progress(f"{elapsed()} leaderboard, with the judge's noise ({time.perf_counter() - t0:.1f}s)")
    return load_stored(ev.instance, "leaderboard", storage=ev.storage)


def control_runs(ev: Evaluation, n: int, progress, elapsed, tags: dict[str, str]) -> None:
    """``--controls N``: control candidates of N videos of every selected partition with scores, then
    the table per task and kind, whose checks say what this evaluator cannot tell apart."""
    words = f"controls of up to {n} video{'s' if n != 1 else ''} (reversed, frozen, shuffled, another input's, an edit's source)"
    if not _scored_ranges(ev, "control_scores", {"videos": n}, progress, elapsed, tags, words):
        return
    resources = ev.defs.resources
    assert resources is not None
    result = launch(ev.instance, resources, RunSpec("asked", ["controls"], tags=tags), progress)
    for check in result.get_asset_check_evaluations():
        said = check.metadata.get("sentence")
        if said is not None and check.metadata.get("n_kinds") and check.metadata["n_kinds"].value:
            task = check.check_name.rsplit("_", 1)[-1]
            progress(f"{elapsed()} controls, {task}: {said.value}")
