"""Listing the candidate store (``<TASK>/<model>/<input_id>.<ext>``, and samples as
``<input_id>__<k>.<ext>`` or ``<input_id>/<k>.<ext>``) and detecting what changed.

A store lists entries with a *cheap change token* (local files: :func:`~.media.change_token`, which
moves with every edit, a second one in the same second included; S3: the ETag and
size) and gives a *content hash* on demand: the sha256 of the bytes, for both (on S3 remembered per
key, ETag and size, :meth:`~argus_dagster.infra.storage.Storage.sha256`), the hash ``candidate_videos`` records.
:func:`scan` hashes only entries whose token moved since the previous scan, so a scan of an
unchanged store reads directory listings and nothing else. The sensor and the nightly reconcile
share this code; a store on S3 is :class:`S3CandidateStore` with the same interface. A model folder
whose name cannot be a model name (:func:`~argus_dagster.infra.names.model_name_problem`: a name that is
not UTF-8 text too) is left out of the scan with a message in :attr:`ScanResult.problems`, the name
shown with its undecodable bytes escaped, so the other models are scored.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Protocol

from argus_dagster.infra.media import change_token, file_digest
from argus_dagster.infra.names import lookup_names, model_name_problem, shown
from argus_dagster.infra.storage import LOCAL, is_remote, join
from argus_dagster.method.bench import (
    SAMPLE_NAME,
    VIDEO_SUFFIXES,
    manifest_ids,
    model_samples,
    sample_of,
    task_dir,
    task_location,
)
from argus_dagster.method.inputs import Task

# Previous scan: {entry key: [token, content hash]}.
Known = dict[str, list[str]]


@dataclass(frozen=True)
class CandidateEntry:
    task: str
    model: str
    input_id: str  # the stem of the file, or the name of its sample folder (:func:`~.bench.sample_of` reads it)
    key: str  # the entry's location relative to the store (a relative path or an object key)
    token: str  # changes whenever the content may have changed; cheap to read


class CandidateStore(Protocol):
    def entries(self) -> Iterator[CandidateEntry]: ...

    def content_hash(self, entry: CandidateEntry) -> str: ...


class LocalCandidateStore:
    """A candidate folder on a local (or mounted) file system."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def entries(self) -> Iterator[CandidateEntry]:
        for task in Task:
            d = task_dir(self.root, task.value)
            if d is None:
                continue
            for model_dir in sorted(p for p in d.iterdir() if p.is_dir()):
                for entry in sorted(model_dir.iterdir()):
                    files = ([(entry.name, f) for f in sorted(entry.iterdir()) if SAMPLE_NAME.fullmatch(f.stem)]
                             if entry.is_dir() else [(entry.stem, entry)])  # <id>/<k>.mp4 or <id>[__<k>].mp4
                    for name, f in files:
                        if f.suffix.lower() not in VIDEO_SUFFIXES or not f.is_file():
                            continue
                        yield CandidateEntry(task.value, model_dir.name, name, f.relative_to(self.root).as_posix(),
                                             change_token(f.stat()))

    def content_hash(self, entry: CandidateEntry) -> str:
        # The same sha256 candidate_videos records, remembered per process by path and stamp, so
        # a video that argus evaluate checks for staleness is not read again by the run that scores it.

        return file_digest(str(self.root / entry.key))


class S3CandidateStore:
    """The same layout under ``s3://bucket/prefix/``, listed and hashed through a
    :class:`~argus_dagster.infra.storage.Storage`: the token is the ETag and size (a change hint), the
    content hash the sha256 of the bytes, remembered per (key, ETag, size) so an unchanged object is
    not downloaded again."""

    def __init__(self, location: str, storage=None):
        self.location, self.storage = location.rstrip("/"), storage or LOCAL

    def entries(self) -> Iterator[CandidateEntry]:
        tasks = {t.value.lower(): t.value for t in Task}
        for obj in self.storage.list(self.location):
            parts = obj.rel.split("/")
            if len(parts) not in (3, 4) or parts[0].lower() not in tasks:
                continue
            stem, dot, suffix = parts[-1].rpartition(".")
            if not dot or f".{suffix.lower()}" not in VIDEO_SUFFIXES:
                continue
            if len(parts) == 4 and not SAMPLE_NAME.fullmatch(stem):  # <id>/<k>.mp4 only
                continue
            yield CandidateEntry(tasks[parts[0].lower()], parts[1], parts[2] if len(parts) == 4 else stem,
                                 obj.rel, obj.token)

    def content_hash(self, entry: CandidateEntry) -> str:
        return self.storage.sha256(f"{self.location}/{entry.key}", entry.token)


def open_store(location: str, storage=None) -> CandidateStore:
    """The candidate store at a local folder or an ``s3://bucket/prefix``."""
    return S3CandidateStore(location, storage) if str(location).startswith("s3://") else LocalCandidateStore(location)


@dataclass
class ScanResult:
    known: Known  # the new state, to keep as the next scan's ``previous``
    models: dict[str, set[str]]  # {model: tasks it has videos for}
    changed: set[tuple[str, str]]  # (task, model) partitions with a new, changed or removed video
    n_entries: int = 0
    n_hashed: int = 0
    problems: list[str] = field(default_factory=list)  # model folders left out, and why


def scan(store: CandidateStore, previous: Known | None) -> ScanResult:
    """Compare the store with a previous scan; hash only the entries whose token changed."""
    previous = previous or {}
    known: Known = {}
    models: dict[str, set[str]] = {}
    changed: set[tuple[str, str]] = set()
    where: dict[str, tuple[str, str]] = {}
    n = n_hashed = 0
    problems: dict[tuple[str, str], str] = {}
    for e in store.entries():
        problem = model_name_problem(e.model)
        if problem:  # never a partition key: Dagster would reject it, and the other models go on
            problems.setdefault((e.task, e.model), f"{e.task}/{shown(e.model)}: model folder skipped: {problem}; "
                                                   "rename the folder")
            continue
        n += 1
        models.setdefault(e.model, set()).add(e.task)
        where[e.key] = (e.task, e.model)
        prev = previous.get(e.key)
        if prev is not None and prev[0] == e.token:
            known[e.key] = prev
            continue
        digest = store.content_hash(e)
        n_hashed += 1
        known[e.key] = [e.token, digest]
        if prev is None or prev[1] != digest:
            changed.add((e.task, e.model))
    for key in set(previous) - set(known):
        for task, model, _ in key_places(key):
            if model in models:
                changed.add((task, model))  # a removed video: the partition now lacks it
    return ScanResult(known, models, changed, n, n_hashed, [problems[k] for k in sorted(problems)])


def key_places(key: str) -> list[tuple[str, str, str]]:
    """``(task, model, name)`` a store key may be: ``.../<TASK>/<model>/<name>.<ext>``, or
    ``.../<TASK>/<model>/<id>/<k>.<ext>`` with name ``<id>/<k>``."""
    parts = key.replace("\\", "/").split("/")
    stem = parts[-1].rpartition(".")[0]
    out = []
    for depth, name in ((3, stem), (4, "/".join(parts[-2:-1] + [stem]))):
        if len(parts) < depth or (depth == 4 and not SAMPLE_NAME.fullmatch(stem)):
            continue
        task = next((t.value for t in Task if t.value.lower() == parts[-depth].lower()), None)
        if task is not None:
            out.append((task, parts[-depth + 1], name))
    return out


def partition_hashes(known: Known, task: str, model: str) -> dict[str, str]:
    """``{name: content hash}`` of one partition's videos, from a scan's ``known`` state: the name is
    the file's stem (``<id>`` or ``<id>__<k>``) or ``<id>/<k>`` for a sample folder's file
    (:func:`video_hashes` reads them as inputs and samples)."""
    out: dict[str, str] = {}
    for key, (_, digest) in sorted(known.items()):  # two files of one name: the first, as candidate_videos
        for t, m, name in key_places(key):
            if t.lower() == task.lower() and m == model:
                out.setdefault(name, digest)
    return out


def video_hashes(hashes: dict[str, str], input_ids: Iterable[str]) -> dict[tuple[str, str], str]:
    """``{(input_id, sample): content hash}`` from :func:`partition_hashes`, read with the bench's ids
    as ``candidate_videos`` reads the folder (:func:`~argus_dagster.method.bench.sample_of`)."""
    known = {n: i for i in input_ids for n in lookup_names(i)}
    out: dict[tuple[str, str], str] = {}
    for name, digest in sorted(hashes.items()):
        entry, _, sample_file = name.partition("/")
        key = sample_of(entry, sample_file or None, known)
        if key is not None:
            out.setdefault(key, digest)
    return out


@dataclass
class Discovery:
    """What the candidate store holds: ``{model: [tasks]}``, and why anything in it is left out."""

    models: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _has_videos(folder: Path) -> bool:
    """Videos in the folder, or in its sample folders (``<id>/<k>.mp4``)."""
    return any(f.suffix.lower() in VIDEO_SUFFIXES or (f.is_dir() and any(
        g.suffix.lower() in VIDEO_SUFFIXES for g in f.iterdir())) for f in folder.iterdir())


def nearest(name: str, known: Iterable[str], n: int = 3, fold_case: bool = False) -> list[str]:
    """The names of ``known`` closest to a misspelt ``name``, the closest first (none when nothing is close)."""
    known = list(known)
    if not fold_case:
        return difflib.get_close_matches(name, known, n=n, cutoff=0.6)
    by_folded = {k.lower(): k for k in known}
    return [by_folded[m] for m in difflib.get_close_matches(name.lower(), list(by_folded), n=n, cutoff=0.6)]


def unknown_models(asked: Iterable[str], found: Iterable[str], where: str | Path) -> str:
    """One line for ``--model`` names with no videos: each with the nearest model names found, else
    every model found (the first twenty)."""
    found = sorted(found)
    parts = []
    for name in asked:
        close = nearest(name, found, fold_case=True)
        parts.append(f"{name!r}" + (f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""))
    listed = ", ".join(found[:20]) + (f" and {len(found) - 20} more" if len(found) > 20 else "")
    return (f"--model {', '.join(parts)}: no candidate videos under {where}; "
            + (f"models found: {listed}" if found else "no model folder found (expected <TASK>/<model>/<id>.mp4)"))


def discover(candidates_dir: str | Path, bench_dir: str | Path | None = None, storage=None) -> Discovery:
    """Models with videos under ``candidates/<TASK>/<model>/``, and a message for each thing left out:
    a model folder whose name cannot be a model name, a folder that is no task (or a second spelling
    of one), and, with ``bench_dir``, a task the bench does not have and videos of inputs its
    manifest does not list. A store or bench at an ``s3://`` prefix is listed through ``storage``
    (the storage resource's)."""
    if is_remote(candidates_dir):
        return _discover_listed(str(candidates_dir), bench_dir, storage)
    root = Path(candidates_dir)
    out = Discovery()
    if not root.is_dir():
        return out
    tasks = {t.value.lower(): t.value for t in Task}
    used: dict[str, Path] = {}
    for t in Task:
        d = task_dir(root, t.value)
        if d is not None:
            used[t.value] = d
    for entry in sorted(p for p in root.iterdir() if p.is_dir()):
        task = tasks.get(entry.name.lower())
        if task is None:
            guess = nearest(entry.name, list(tasks.values()), fold_case=True)
            out.problems.append(f"{shown(str(entry))}: not a task folder (expected one of {', '.join(tasks.values())}"
                                + (f"; did you mean {guess[0]}?" if guess else "") + "); its videos are ignored")
        elif used.get(task) is None:  # T2v: the task, in a case no bench uses
            out.problems.append(f"{entry}: did you mean {task}? A task folder is named {task} (or "
                                f"{task.lower()}); rename it, its videos are ignored until then")
        elif used.get(task) != entry:
            out.problems.append(f"{entry}: a second folder for {task} beside {used.get(task)}; its videos are "
                                f"ignored (use one folder named {task})")
    for task, d in used.items():
        bench_task = task_dir(bench_dir, task) if bench_dir is not None else None
        if bench_dir is not None and (bench_task is None or not (bench_task / "manifest.jsonl").is_file()):
            out.problems.append(f"{d}: the bench {bench_dir} has no {task} manifest, so these candidates "
                                f"are not scored (add {task}/manifest.jsonl to the bench)")
            continue
        listed: set[str] | None = None
        if bench_dir is not None:
            listed = manifest_ids(bench_dir, task)
        for m in sorted(p for p in d.iterdir() if p.is_dir()):
            if not _has_videos(m):
                continue
            problem = model_name_problem(m.name)
            if problem:
                out.problems.append(f"{shown(str(m))}: skipped: {problem}; rename the folder")
                continue
            out.models.setdefault(m.name, []).append(task)
            if listed is not None:
                extra = sorted(shown(p.relative_to(m).as_posix()) for iid, _, p in model_samples(m, listed)[0]
                               if iid not in listed)
                if extra:
                    out.problems.append(f"{m}: {len(extra)} videos of inputs the {task} manifest does not list, "
                                        f"not scored: {', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}")
    return out


def _discover_listed(candidates_dir: str, bench_dir: str | Path | None, storage=None) -> Discovery:
    """:func:`discover` of a candidate store at an ``s3://`` prefix, from one listing (the layout the
    sensor reads, :class:`~.candidate_store.S3CandidateStore`); with ``bench_dir``, a task its bench
    has no manifest for is said and left out."""
    storage = storage or LOCAL
    out = Discovery()
    skipped: set[str] = set()
    has_manifest: dict[str, bool] = {}
    for e in S3CandidateStore(candidates_dir, storage).entries():
        problem = model_name_problem(e.model)
        if problem:
            if e.model not in skipped:
                skipped.add(e.model)
                out.problems.append(f"{candidates_dir}/{e.task}/{shown(e.model)}: skipped: {problem}; rename the folder")
            continue
        if bench_dir is not None and e.task not in has_manifest:
            where = task_location(bench_dir, e.task, storage)
            has_manifest[e.task] = where is not None and storage.exists(join(where, "manifest.jsonl"))
            if not has_manifest[e.task]:
                out.problems.append(f"{candidates_dir}/{e.task}: the bench {bench_dir} has no {e.task} manifest, so "
                                    f"these candidates are not scored (add {e.task}/manifest.jsonl to the bench)")
        if bench_dir is not None and not has_manifest[e.task]:
            continue
        tasks = out.models.setdefault(e.model, [])
        if e.task not in tasks:
            tasks.append(e.task)
    return out


