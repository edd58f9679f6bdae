"""Output-blind assets, partitioned by task: input instances and their frozen rubrics."""

import json
import time
from typing import cast

import dagster as dg
import polars as pl

from argus_dagster.assets.versions import content_version, volatile_metadata
from argus_dagster.infra.storage import is_remote, join
from argus_dagster.infra.tables import COSTS, INPUT_INSTANCES, RUBRICS, frame
from argus_dagster.method import bench as bench_lib
from argus_dagster.method.gather import each
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.rubric.schema import RubricError
from argus_dagster.method.rubric.store import resolve_rubric
from argus_dagster.records.automation import RETRY_ROUND
from argus_dagster.records.lineage import rubric_delta_metadata
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.judging import RubricGeneratorResource
from argus_dagster.resources.storage import StorageResource
from argus_dagster.resources.vlm import VlmResource
from argus_dagster.vlm.ledger import CallStats, cost_ledger
from argus_dagster.vlm.priorities import STAGE_RUBRICS

from .automation import UP_TO_DATE, retry_round
from .partitions import BACKFILL, each_partition, task_partitions
from .sources import bench_files, generator_folder, rubric_files, rubric_generator_config

# What each asset's data version leaves out (assets.versions): nothing of an input.
INPUT_INSTANCES_VOLATILE: tuple[str, ...] = ()
# How this run got each rubric ("generated" once, "loaded" from its frozen file on every later run):
# the rubric itself is the same; and what generating it cost in this run (the cost ledger's rubric stage).
RUBRICS_VOLATILE = ("source", *COSTS)


@dg.asset(backfill_policy=BACKFILL, partitions_def=task_partitions, code_version="1", group_name="inputs", kinds={"polars"},
          deps=[bench_files], automation_condition=UP_TO_DATE, metadata=volatile_metadata(INPUT_INSTANCES_VOLATILE))
@each_partition
def input_instances(context: dg.AssetExecutionContext, bench: BenchResource,
                    storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """One row per input of the task's manifest: prompt, condition paths (``s3://`` URIs for a bench
    on S3), content hash, or the error."""
    task = context.partition_key
    rows = bench_lib.read_task_at(bench.bench_path(), task, storage.storage())
    df = frame(rows, INPUT_INSTANCES)
    errors = df.filter(pl.col("error").is_not_null())
    for r in errors.iter_rows(named=True):
        context.log.warning(f"{task} input {r['input_id']}: {r['error']}")
    return dg.Output(df, data_version=content_version(df, INPUT_INSTANCES_VOLATILE), metadata={
        "bench": str(bench.bench_path()), "n_inputs": df.height, "n_errors": errors.height,
        "errors": dg.MetadataValue.md("\n".join(f"- `{r['input_id']}`: {r['error']}" for r in errors.iter_rows(named=True)) or "none"),
    })


def _frozen_in(new: list[str], task: str, bench_dir, frozen, started: float) -> list[str]:
    """The folders the rubrics of ``new`` inputs were written to: the bench's ``<TASK>/rubrics`` where
    the file there was written by this run, else the frozen-rubrics folder of the generator."""
    folders = set()
    for iid in new:
        paths = bench_lib.bench_rubric_paths(bench_dir, task, iid) if bench_dir is not None else []
        if paths and paths[0].is_file() and paths[0].stat().st_mtime >= started - 1:
            folders.add(str(paths[0].parent))
        else:
            folders.add(join(frozen, task))
    return sorted(folders)


@dg.asset(backfill_policy=BACKFILL, partitions_def=task_partitions, code_version="3", group_name="inputs", kinds={"polars"},
          deps=[rubric_files, rubric_generator_config], automation_condition=UP_TO_DATE,
          metadata=volatile_metadata(RUBRICS_VOLATILE))
@each_partition
def rubrics(context: dg.AssetExecutionContext, input_instances: pl.DataFrame, bench: BenchResource,
            rubric_generator: RubricGeneratorResource, rubric_vlm: VlmResource,
            storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """One frozen rubric per input: loaded if the bench (or the frozen rubrics) has it, else generated
    once. A bench on S3 is read from its local copy and never written: new rubrics are frozen under
    the frozen-rubrics location (on S3 too in the aws environment), as they are for any bench whose
    evaluation keeps them in the home (``rubrics_in="home"``)."""
    task = context.partition_key
    started = time.time()
    bench_dir = bench.bench_path()
    remote_bench = is_remote(bench_dir)
    freeze_in_bench = not remote_bench and bench.rubrics_in != "home"
    readable_bench = storage.storage().local_copy(bench_dir) if remote_bench else bench_dir
    generator = rubric_generator.identity(rubric_vlm)
    # One folder per generator (backend and model): profiles that share a generator share its rubrics.
    frozen = generator_folder(bench.frozen_rubrics_path(), generator)
    stats = CallStats()
    failed_generation: set[str] = set()  # inputs whose rubric the generator failed to make: tried again

    def generate(inst: InputInstance):
        try:
            return rubric_generator.generate(inst, rubric_vlm, stats, storage.storage())
        except Exception:
            failed_generation.add(inst.id)
            raise

    def one(r: dict) -> dict:
        base = {"task": task, "input_id": r["input_id"]}
        if r["error"]:
            return {**base, "error": f"input invalid: {r['error']}"}
        inst = InputInstance.from_row(r)
        # What generating this input's rubric cost (a failed generation too), on its row: the ledger's
        # rubric stage (none for a rubric loaded from its frozen file).
        with cost_ledger() as spent:
            try:
                rubric, source, log, load_log = resolve_rubric(inst, task, readable_bench, frozen, generator, generate,
                                                               freeze_in_bench=freeze_in_bench,
                                                               storage=storage.storage())
            except RubricError as exc:
                rubric = None
                context.log.warning(f"{task} input {inst.id}: {exc}")
                failed = {**base, "error": str(exc)}
        if rubric is None:
            return {**failed, **spent.costs()}
        g = rubric.generator
        return {**base, **spent.costs(), "rubric_hash": rubric.content_hash(),
                "rubric_json": json.dumps(rubric.model_dump(mode="json")), "source": source,
                "generator_backend": g.get("backend", "unknown"), "generator_model": g.get("model", "unknown"),
                "prompt_version": g.get("prompt_version", "unknown"), "n_criteria": len(rubric.criteria),
                "n_hard": sum(c.type == "hard" for c in rubric.criteria), "postprocess_log": json.dumps(log),
                "load_log": json.dumps(load_log), "error": None}

    # Inputs are independent: with a VLM generator their calls overlap up to its concurrency bound.
    workers = rubric_vlm.workers() if rubric_vlm.configured else 1
    rows = each(list(input_instances.iter_rows(named=True)), one, workers=workers, stage=STAGE_RUBRICS)
    df = frame(rows, RUBRICS)
    ok = df.filter(pl.col("error").is_null())
    new = ok.filter(pl.col("source") == "generated")["input_id"].to_list()
    return dg.Output(df, data_version=content_version(df, RUBRICS_VOLATILE), metadata={
        "n_rubrics": ok.height, "n_errors": df.height - ok.height,
        # Rubrics that could not be made for a valid input (a generator that failed): tried again.
        "n_retryable": len(failed_generation), RETRY_ROUND: retry_round(context, len(failed_generation)),
        "n_loaded": ok.filter(pl.col("source") == "loaded").height,
        "n_coerced": ok.filter(pl.col("load_log") != "[]").height,
        "n_generated": len(new),
        # Where the new rubrics were frozen (the bench's folder, else the home's), said by argus evaluate.
        "frozen_in": dg.MetadataValue.json(_frozen_in(new, task, readable_bench if freeze_in_bench else None, frozen,
                                                      started)),
        "mean_criteria": float(cast(float, ok["n_criteria"].mean())) if ok.height else 0.0,
        "rubric_hashes": dg.MetadataValue.json({r["input_id"]: r["rubric_hash"] for r in ok.iter_rows(named=True)}),
        **rubric_delta_metadata(context, df, storage.storage()),
        "generator": f"{generator['backend']}:{generator['model']}:{generator['prompt_version']}",
        **({k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in stats.as_metadata().items()}
           if rubric_vlm.configured else {}),
    })
