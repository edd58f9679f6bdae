"""What the graph reads from outside it, as observable source assets: Dagster's records of the inputs.

Each source is observed as a ``DataVersion``, the hash of its content, per partition like its
consumers:

* ``bench_files`` (task): the task's manifest and condition files (its ``rubrics/`` aside);
* ``rubric_files`` (task): the frozen rubrics a person wrote or edited: the bench's ``<TASK>/rubrics/``
  and the generator's frozen folder, less the rubrics this project generated and froze, untouched since
  (their ``generator.frozen_hash`` still matches their content: they are the ``rubrics`` asset's own
  output, not an input);
* ``candidate_files`` (task x model): the partition's videos, ``{name: sha256}``;
* ``rubric_generator_config``, ``tool_suite_config``, ``judge_config``, ``aggregation_config`` (unpartitioned): the evaluator's
  parts, as the configured resources describe them (backend, model, prompt and tool versions, α).

The assets that read them declare them as dependencies, so Dagster records with each materialization
the data version it read, and its own staleness says what changed ("upstream data version changed")
in the UI, in GraphQL and to the automation conditions (:mod:`assets.automation`). The observations
come from the candidate-store sensor (every tick, only what changed), from ``argus evaluate`` (before
it asks what to run), and from the observation jobs (the UI's "Observe sources", and the
nightly schedule); all of them compute the same versions with :func:`source_versions`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, cast

import dagster as dg

from argus_dagster.infra.media import SAMPLING_ID, MediaError, file_digest, regular_file
from argus_dagster.infra.names import file_name
from argus_dagster.infra.storage import Storage, is_remote, join
from argus_dagster.method.bench import task_location
from argus_dagster.method.candidate_store import open_store, partition_hashes, scan
from argus_dagster.method.evidence.tools.vlm_qa import qa_version
from argus_dagster.method.inputs import ALL_TASKS
from argus_dagster.method.rubric.frozen import written_as_generated
from argus_dagster.outputs.history_words import evaluator_label
from argus_dagster.records import DATA_VERSION_TAG
from argus_dagster.records.automation import latest_records
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.judging import JudgeResource, RubricGeneratorResource, ScoringResource
from argus_dagster.resources.storage import StorageResource
from argus_dagster.resources.tools import ToolsResource
from argus_dagster.resources.vlm import VlmResource

from .partitions import task_model_partitions, task_partitions

GROUP = "sources"


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ---------------------------------------------------------------- the versions, from the resources

def _files(storage: Storage, folder: str | None, skip: str | None = None) -> dict[str, str]:
    """``{relative path: sha256}`` of the files under a folder or an ``s3://`` prefix (on S3 each
    object's sha256 is remembered by its ETag: nothing is downloaded twice)."""
    if folder is None:
        return {}
    return {o.rel: _content(storage, o) for o in storage.list(folder) if skip is None or o.rel.split("/")[0] != skip}


def _content(storage: Storage, obj) -> str:
    """A listed file's sha256; one that cannot be read (a FIFO, a link to a device, gone) stands in
    the version by what is wrong with it: the rows that read it say the same, and the rest proceed."""
    try:
        return storage.sha256(obj.uri, obj.token) if is_remote(obj.uri) else file_digest(obj.uri)
    except (MediaError, OSError) as exc:
        return f"unreadable: {exc}"


def bench_files_version(bench_dir, task: str, storage: Storage) -> str:
    """The content of a task's bench files (manifest, conditions), its ``rubrics/`` aside."""
    return digest(_files(storage, task_location(bench_dir, task, storage), skip="rubrics"))


def generator_folder(frozen_root, generator: dict) -> str:
    """Where the rubrics of one generator (backend and model) are frozen: profiles that share the
    generator share them (a folder or an ``s3://`` prefix, as ``frozen_root``)."""
    return join(frozen_root, file_name(f"{generator.get('backend')}-{generator.get('model')}"))


def rubric_files_version(bench_dir, frozen_dir, task: str, storage: Storage) -> str:
    """The frozen rubrics of a task that are inputs: every file of the bench's ``<TASK>/rubrics/`` and
    of ``frozen_dir/<TASK>`` but those this project generated and nobody changed since."""
    folder = task_location(bench_dir, task, storage)
    out = {}
    for where, root in (("bench", join(folder, "rubrics") if folder else None), ("frozen", join(frozen_dir, task))):
        if root is None:
            continue
        for o in storage.list(root):
            try:
                if not is_remote(o.uri):
                    regular_file(o.uri)  # never opens a FIFO or a device a link points at
                data = storage.read_bytes(o.uri)
            except (MediaError, OSError) as exc:
                out[f"{where}/{o.rel}"] = f"unreadable: {exc}"
                continue
            if not written_as_generated(data):
                out[f"{where}/{o.rel}"] = hashlib.sha256(data).hexdigest()
    return digest(out)


def candidate_files_version(hashes: dict[str, str]) -> str:
    """A partition's videos, ``{name: sha256}`` (:func:`~argus_dagster.method.candidate_store.partition_hashes`)."""
    return digest(sorted(hashes.items()))


def evaluator_versions(rubric_generator: RubricGeneratorResource, rubric_vlm: VlmResource, tools: ToolsResource,
                       vlm: VlmResource, judge: JudgeResource, scoring: ScoringResource) -> dict[str, str]:
    """The version of each part of the evaluator, as the configured resources describe it."""
    tool_versions = dict(tools.suite().versions())
    if vlm.configured:
        tool_versions["vlm_qa"] = qa_version(vlm.backend, vlm.model_name())
    suite = digest({"tools": tool_versions, "vlm_only": tools.vlm_only, "web_search": tools.web_search,
                    "sampling": SAMPLING_ID})
    return {"rubric_generator_config": digest(rubric_generator.identity(rubric_vlm)),
            "tool_suite_config": suite,
            "judge_config": digest(judge.identity(vlm)),
            "aggregation_config": digest({"cap_alpha": scoring.cap_alpha})}


def evaluator_labels(rubric_generator: RubricGeneratorResource, rubric_vlm: VlmResource, tools: ToolsResource,
                     vlm: VlmResource, judge: JudgeResource, scoring: ScoringResource) -> dict[str, str]:
    """Each part of the evaluator in a person's words (recorded with its observation as ``evaluator``:
    a plan says "judge: evidence-only -> openai:Qwen2.5-VL-7B" from them)."""
    qa = f" + vlm_qa by {evaluator_label(judge.identity(vlm))}" if vlm.configured else ""
    return {"rubric_generator_config": evaluator_label(rubric_generator.identity(rubric_vlm)),
            "tool_suite_config": f"{'vlm-only' if tools.vlm_only else 'tools'}{qa}",
            "judge_config": evaluator_label(judge.identity(vlm)),
            "aggregation_config": f"cap alpha {scoring.cap_alpha:g}"}


# ---------------------------------------------------------------- the source assets

def _observe_task_files(version_of) -> dg.DataVersionsByPartition:
    return dg.DataVersionsByPartition({t: dg.DataVersion(version_of(t)) for t in ALL_TASKS})


@dg.observable_source_asset(partitions_def=task_partitions, group_name=GROUP,
                            description="A task's manifest and condition files in the bench (its rubrics/ aside).")
def bench_files(bench: BenchResource, storage: StorageResource) -> dg.DataVersionsByPartition:
    return _observe_task_files(lambda t: bench_files_version(bench.bench_path(), t, storage.storage()))


@dg.observable_source_asset(partitions_def=task_partitions, group_name=GROUP,
                            description="A task's frozen rubrics that a person wrote or edited.")
def rubric_files(bench: BenchResource, storage: StorageResource, rubric_generator: RubricGeneratorResource,
                 rubric_vlm: VlmResource) -> dg.DataVersionsByPartition:
    frozen = generator_folder(bench.frozen_rubrics_path(), rubric_generator.identity(rubric_vlm))
    return _observe_task_files(lambda t: rubric_files_version(bench.bench_path(), frozen, t, storage.storage()))


@dg.observable_source_asset(partitions_def=task_model_partitions, group_name=GROUP,
                            description="A model's candidate videos for a task (name and sha256 of each).")
def candidate_files(context, bench: BenchResource, storage: StorageResource) -> dg.DataVersionsByPartition:
    result = scan(open_store(str(bench.candidates_path()), storage.storage()), None)
    known = set(context.instance.get_dynamic_partitions("candidate_models"))
    return dg.DataVersionsByPartition({
        str(dg.MultiPartitionKey({"task": t, "model": m})): dg.DataVersion(
            candidate_files_version(partition_hashes(result.known, t, m)))
        for m, tasks in result.models.items() if m in known for t in tasks})


def _evaluator_source(part: str, description: str):
    @dg.observable_source_asset(name=part, group_name=GROUP, description=description)
    def observe(rubric_generator: RubricGeneratorResource, rubric_vlm: VlmResource, tools: ToolsResource,
                vlm: VlmResource, judge: JudgeResource, scoring: ScoringResource) -> dg.DataVersion:
        return dg.DataVersion(evaluator_versions(rubric_generator, rubric_vlm, tools, vlm, judge, scoring)[part])

    return observe


rubric_generator_config = _evaluator_source("rubric_generator_config", "The rubric generator: backend, model, prompt version.")
tool_suite_config = _evaluator_source("tool_suite_config", "The evidence tools: each tool's version, the VLM's QA prompt, sampling.")
judge_config = _evaluator_source("judge_config", "The criterion judge: backend, model, prompt version.")
aggregation_config = _evaluator_source("aggregation_config", "Aggregation: the hard-cap α.")

SOURCES = [bench_files, rubric_files, candidate_files, rubric_generator_config, tool_suite_config, judge_config,
           aggregation_config]

# Observation jobs (an asset job holds one partitions definition): the UI's "Observe sources" and
# the nightly schedule run them; the sensor and argus evaluate observe without a run.
OBSERVE_JOBS = [
    dg.define_asset_job("observe_bench_files", selection=[bench_files.key, rubric_files.key],
                        description="Observes every task's bench files and frozen rubrics."),
    dg.define_asset_job("observe_candidate_files", selection=[candidate_files.key],
                        description="Observes every candidate video (all hashed again): what changed becomes "
                                    "stale, and the automation sensor scores it."),
    dg.define_asset_job("observe_evaluator", selection=[rubric_generator_config.key, tool_suite_config.key,
                                                        judge_config.key, aggregation_config.key],
                        description="Observes the evaluator's parts as the resources configure them."),
]


# ---------------------------------------------------------------- observations from outside a run

@dataclass(frozen=True)
class Observed:
    """One source partition's version now (``partition`` None for an unpartitioned source)."""
    asset: str
    partition: str | None
    version: str
    label: str = ""  # an evaluator part in words (evaluator_labels)

    def event(self) -> dg.AssetObservation:
        return dg.AssetObservation(asset_key=self.asset, partition=self.partition,
                                   tags={DATA_VERSION_TAG: self.version},
                                   metadata={"evaluator": self.label} if self.label else None)


def source_versions(resources: Mapping[str, Any], tasks: Iterable[str], partitions: Iterable[tuple[str, str]],
                    known: dict) -> list[Observed]:
    """The versions of the sources of ``tasks`` and of the ``(task, model)`` partitions, with the
    evaluation's resources (``known``: a candidate-store scan's state, :func:`~argus_dagster.method.candidate_store.scan`)."""
    bench, storage = resources["bench"], resources["storage"].storage()
    frozen = generator_folder(bench.frozen_rubrics_path(),
                              resources["rubric_generator"].identity(resources["rubric_vlm"]))
    out = []
    for task in sorted(set(tasks)):
        out.append(Observed("bench_files", task, bench_files_version(bench.bench_path(), task, storage)))
        out.append(Observed("rubric_files", task, rubric_files_version(bench.bench_path(), frozen, task, storage)))
    for task, model in sorted(set(partitions)):
        out.append(Observed("candidate_files", str(dg.MultiPartitionKey({"task": task, "model": model})),
                            candidate_files_version(partition_hashes(known, task, model))))
    evaluator = {k: resources[k] for k in ("rubric_generator", "rubric_vlm", "tools", "vlm", "judge", "scoring")}
    labels = evaluator_labels(**evaluator)
    out += [Observed(name, None, version, labels[name]) for name, version in evaluator_versions(**evaluator).items()]
    return out


def changed_observations(instance: dg.DagsterInstance, observed: list[Observed]) -> list[Observed]:
    """The observations whose version differs from what the instance recorded last (the others
    would only repeat it): each source's latest observation per partition, read once."""
    records = latest_records(instance)
    # Each record read as an observation holds one (EventLogRecord types it optional).
    recorded = {a: {p: cast(dg.AssetObservation, r.asset_observation).tags.get(DATA_VERSION_TAG)
                    for p, r in records.latest(dg.AssetKey(a), observed=True).items()}
                for a in sorted({o.asset for o in observed})}
    return [o for o in observed if recorded[o.asset].get(o.partition) != o.version]


def report(instance: dg.DagsterInstance, observed: list[Observed]) -> None:
    for o in observed:
        instance.report_runless_asset_event(o.event())
