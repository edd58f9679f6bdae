"""Frozen rubrics: load the one an input already has, else generate it once and freeze it.

Look-up order: the bench's ``<TASK>/rubrics/<id>.json`` (released rubrics live there), then
``<frozen_dir>/<TASK>/<id>.json`` (``$ARGUS_HOME/benches/<bench>/rubrics/<generator>``); an id that is not a single folder entry (``../x``, ``a/b``)
is looked up and frozen under its :func:`~argus_dagster.infra.names.file_name` only, so no id reads or writes
outside those folders. A rubric this project generated records its input's content
hash and generator; it is regenerated only when either changed. New rubrics are frozen into the
bench when it is writable and holds no rubric of another generator for the input (so two evaluator
profiles with different rubric generators never overwrite each other's), else under ``frozen_dir``
(``$ARGUS_HOME/benches/<bench>/rubrics/<generator>``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, NamedTuple

from argus_dagster.infra.files import WriteError
from argus_dagster.infra.identities import VlmCall, record_key
from argus_dagster.infra.names import lookup_names
from argus_dagster.infra.storage import LOCAL, Storage, join
from argus_dagster.method.bench import bench_rubric_paths
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.rubric.frozen import mark_frozen
from argus_dagster.method.rubric.generate import rubric_identity
from argus_dagster.method.rubric.lenient import read_rubric_file
from argus_dagster.method.rubric.postprocess import postprocess
from argus_dagster.method.rubric.schema import Rubric


def _stale(rubric: Rubric, inst: InputInstance, generator: dict) -> bool:
    g = rubric.generator
    if "input_hash" not in g:  # a released or hand-written rubric: frozen for good
        return False
    if generator.get("call") is not None:  # a VLM generator: the rubric's identity record decides
        return g.get("identity") != record_key(rubric_identity(inst, VlmCall(**generator["call"])))
    return (g.get("input_hash") != inst.content_hash
            or g.get("backend") != generator.get("backend")
            or g.get("model") != generator.get("model")
            or g.get("prompt_version") != generator.get("prompt_version"))


def _other_generator(storage: Storage, path: Path, generator: dict) -> bool:
    """Whether ``path`` holds a rubric that another generator (backend or model) wrote, or a
    released one: it is left as it is."""
    if not storage.exists(path):
        return False
    try:
        g = read_rubric_file(str(path), storage)[0].generator
    except Exception:  # an unreadable file is replaced
        return False
    return "input_hash" not in g or (g.get("backend"), g.get("model")) != (generator.get("backend"), generator.get("model"))


def _write(storage: Storage, path: Path | str, rubric: Rubric) -> bool:
    try:
        storage.write_bytes(path, json.dumps(mark_frozen(rubric.model_dump(mode="json")), indent=2))
        return True
    except WriteError:
        return False


class ResolvedRubric(NamedTuple):
    """An input's frozen rubric, and how it was had."""

    rubric: Rubric
    source: str  # "loaded" (a frozen file read) or "generated" (written now)
    postprocess_log: list[str]  # what post-processing changed
    load_log: list[str]  # each coercion of a lenient read and each criterion left out


def resolve_rubric(
    inst: InputInstance,
    task: str,
    bench_dir: str | Path,
    frozen_dir: str | Path,
    generator: dict,
    generate: Callable[[InputInstance], Rubric],
    freeze_in_bench: bool = True,
    storage: Storage | None = None,
) -> ResolvedRubric:
    """The input's rubric: a frozen one read (``source`` ``loaded``), else one generated and frozen.

    A frozen rubric is read leniently (:mod:`.lenient`): ``load_log`` lists each coercion and each
    criterion left out. Raises :class:`RubricError` only for a rubric with nothing readable.
    ``frozen_dir`` is a folder or an ``s3://`` prefix read and written through ``storage`` (the
    storage resource's; local paths only without it); with ``freeze_in_bench=False`` (a bench read
    from a copy) new rubrics go to ``frozen_dir`` only.
    """
    storage = storage or LOCAL
    has_subject, has_source = bool(inst.subject_images), inst.source_video is not None
    bench_paths = bench_rubric_paths(bench_dir, task, inst.id)
    bench_path = bench_paths[0] if bench_paths else None
    home_paths = [join(frozen_dir, task, f"{name}.json") for name in reversed(lookup_names(inst.id))]
    home_path = home_paths[0]
    candidates: list[str | Path] = [*reversed(bench_paths), *reversed(home_paths)]
    for path in candidates:
        if storage.exists(path):
            rubric, load_log = read_rubric_file(str(path), storage)
            if _stale(rubric, inst, generator):
                continue
            rubric, log = postprocess(rubric, has_subject=has_subject, has_source=has_source)
            return ResolvedRubric(rubric, "loaded", log, load_log)
    rubric = generate(inst)
    rubric, log = postprocess(rubric, has_subject=has_subject, has_source=has_source)
    if not (freeze_in_bench and bench_path is not None and not _other_generator(storage, bench_path, generator)
            and _write(storage, bench_path, rubric)):
        _write(storage, home_path, rubric)
    return ResolvedRubric(rubric, "generated", log, [])
