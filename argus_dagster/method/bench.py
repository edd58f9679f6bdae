"""Reading a bench: ``<TASK>/manifest.jsonl`` with media paths relative to the manifest's folder.

The released VideoArgusBench layout (``<task>/manifest.jsonl`` with lower-case task folders and
``<task>/rubrics/<id>.json``) reads unchanged; common field spellings of other releases are accepted.
Every row comes back, bad ones with an ``error`` that names the input, the field and the problem, so
the rest of the task proceeds.

Ids are data, never path fragments (:mod:`.names`): a rubric or a candidate is looked up under the id
itself only when the id is a single folder entry, else under its :func:`~.names.file_name`. An id
listed twice in a manifest: the first line stands (as an input, or as the error it has), and every
later line is a row error naming both lines (its row is keyed ``line-<n>``), so no video is judged or
counted twice.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, overload

from argus_dagster.infra.media import MediaError, check_image, file_digest, regular_file
from argus_dagster.infra.names import input_id_problem, json_text_problem, line_key, lookup_names, model_name_problem
from argus_dagster.infra.storage import LOCAL, is_remote, join
from argus_dagster.method.inputs import InputInstance, infer_task, instance_hash

VIDEO_SUFFIXES = (".mp4", ".webm", ".mov", ".mkv", ".avi")
SAMPLE_STEM = re.compile(r"(.+)__(\d+)")
SAMPLE_NAME = re.compile(r"\d+")
_ALIASES = {
    "id": ("id", "input_id", "sample_id", "instance_id", "uid"),
    "prompt": ("prompt", "instruction", "text", "caption", "edit_instruction"),
    "first_frame": ("first_frame", "first_frame_image", "image", "input_image", "image_path"),
    "subject_images": ("subject_images", "subject_image", "subjects", "reference_images", "ref_images"),
    "source_video": ("source_video", "src_video", "video", "input_video", "video_path"),
}


def task_dir(root: str | Path, task: str) -> Path | None:
    """The folder of ``task`` in a bench: ``T2V/`` or the released lower-case ``t2v/``."""
    for name in (task, task.lower()):
        d = Path(root) / name
        if d.is_dir():
            return d
    return None


def task_location(root: str | Path, task: str, storage=None) -> str | None:
    """:func:`task_dir` of a bench or candidate store at a folder or an ``s3://`` prefix."""
    if not is_remote(root):
        d = task_dir(root, task)
        return None if d is None else str(d)
    storage = storage or LOCAL
    return next((join(root, name) for name in (task, task.lower()) if storage.is_dir(join(root, name))), None)


def _field(raw: dict, name: str) -> Any:
    for key in _ALIASES[name]:
        if raw.get(key) not in (None, "", []):
            return raw[key]
    return None


def resolve_media(base: Path, rel: Any, *, input_id: str, field: str) -> str:
    """A condition path resolved against the manifest's folder; never outside it."""
    if not isinstance(rel, str) or not rel.strip():
        raise ValueError(f"input {input_id!r} field {field!r}: expected a relative path, got {rel!r}")
    root = base.resolve()
    path = (root / rel).resolve()
    if path != root and root not in path.parents:
        raise ValueError(f"input {input_id!r} field {field!r}: path {rel!r} points outside the bench folder {root}")
    if not path.exists():
        raise ValueError(f"input {input_id!r} field {field!r}: file {rel!r} not found under {root}")
    try:
        regular_file(rel, str(path))
    except MediaError as exc:
        raise ValueError(f"input {input_id!r} field {field!r}: {exc}") from None
    return str(path)


def parse_manifest_row(raw: Any, base: Path, line_no: int) -> InputInstance:
    if not isinstance(raw, dict):
        raise ValueError(f"line {line_no}: expected a JSON object")
    problem = json_text_problem(raw)
    if problem:  # a "\ud800" escape without its pair: no table, hash or page could hold the line
        raise ValueError(f"line {line_no}: {problem}; remove it, or write the character itself")
    input_id = _field(raw, "id")
    if input_id is None:
        raise ValueError(f"line {line_no}: missing field 'id'")
    if isinstance(input_id, int) and not isinstance(input_id, bool):
        input_id = str(input_id)  # released benches number their inputs
    problem = input_id_problem(input_id)
    if problem:
        raise ValueError(f"line {line_no} field 'id': {problem}; use a non-empty string of at most 200 "
                         f"characters without control characters")
    prompt = _field(raw, "prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"input {input_id!r} field 'prompt': missing or empty")
    if len(prompt) > MAX_PROMPT:
        raise ValueError(f"input {input_id!r} field 'prompt': {len(prompt):,} characters (at most {MAX_PROMPT:,}: "
                         "the rubric generator's parser and the judge read a prompt whole); shorten it")
    ff = _field(raw, "first_frame")
    subj = _field(raw, "subject_images")
    src = _field(raw, "source_video")
    if subj is not None and not isinstance(subj, (str, list)):
        raise ValueError(f"input {input_id!r} field 'subject_images': expected a relative path or a list of "
                         f"them, got {type(subj).__name__}")
    subj_list = [subj] if isinstance(subj, str) else list(subj or [])
    first_frame = resolve_media(base, ff, input_id=input_id, field="first_frame") if ff else None
    subjects = tuple(resolve_media(base, s, input_id=input_id, field="subject_images") for s in subj_list)
    for fld, img in ([("first_frame", first_frame)] if first_frame else []) + [("subject_images", s) for s in subjects]:
        try:
            check_image(img)
        except MediaError as exc:
            raise ValueError(f"input {input_id!r} field {fld!r}: {exc}; give a PNG, JPEG or WebP image") from None
    source = resolve_media(base, src, input_id=input_id, field="source_video") if src else None
    hashes = {"first_frame": file_digest(first_frame) if first_frame else None,
              "subject_images": [file_digest(s) for s in subjects],
              "source_video": file_digest(source) if source else None}
    return InputInstance(input_id, prompt, first_frame, subjects, source, instance_hash(prompt, hashes))


MAX_MANIFEST_LINE = 1 << 20  # bytes: a longer line is its own row's error, and is not held in memory
# Characters: a longer prompt is its own row's error (spaCy's parser, which the offline rubric
# generator runs, takes at most 1,000,000; a generation prompt is a few hundred).
MAX_PROMPT = 100_000


def _manifest_lines(manifest: Path) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, bytes)`` of each line, without its line break (a byte-order mark at the start is
    not part of the first line); ``None`` for a line longer than :data:`MAX_MANIFEST_LINE`."""
    with open(manifest, "rb") as fh:
        n = 0
        while True:
            raw = fh.readline(MAX_MANIFEST_LINE + 1)
            if not raw:
                return
            n += 1
            if len(raw) > MAX_MANIFEST_LINE:
                while raw and not raw.endswith(b"\n"):  # the rest of the line, a piece at a time
                    raw = fh.readline(1 << 20)
                yield n, None
                continue
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            yield n, raw.rstrip(b"\r\n")


def _line_id(raw: Any) -> str | None:
    """A parsed manifest line's input id (a released bench's number as text), None when it has no
    valid one."""
    rid = _field(raw, "id") if isinstance(raw, dict) else None
    ok_type = isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
    return str(rid) if ok_type and input_id_problem(str(rid)) is None else None


def read_task(bench_dir: str | Path, task: str) -> list[dict[str, Any]]:
    """One row per manifest line of ``task``: the instance's fields, or an ``error``. The manifest is
    read line by line as bytes: a line that does not decode or parse is an error of that line alone,
    keyed :func:`~argus_dagster.infra.names.line_key` (a key no valid id takes)."""
    d = task_dir(bench_dir, task)
    if d is None or not (d / "manifest.jsonl").is_file():
        return []
    rows: list[dict[str, Any]] = []
    manifest = d / "manifest.jsonl"
    first_line: dict[str, int] = {}
    for n, data in _manifest_lines(manifest):
        empty: dict[str, Any] = {"input_id": line_key(n), "prompt": "", "first_frame": None, "subject_images": [],
                 "source_video": None, "content_hash": ""}
        if data is None:
            rows.append({**empty, "task": task, "error": (
                f"line {n}: longer than {MAX_MANIFEST_LINE} bytes; one input per line, with its media as paths")})
            continue
        try:
            line = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            rows.append({**empty, "task": task, "error": (
                f"line {n}: not UTF-8 text (byte {exc.start + 1} of the line); save the manifest as UTF-8")})
            continue
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            rows.append({**empty, "task": task, "error": f"line {n}: not valid JSON ({msg})"})
            continue
        rid = _line_id(raw)
        if rid is not None and rid in first_line:
            rows.append({**empty, "task": task, "error": (
                f"line {n}: input {rid!r} is listed again (first on line {first_line[rid]}); "
                "ids must be unique: rename or remove this line")})
            continue
        if rid is not None:
            first_line[rid] = n
        try:
            inst = parse_manifest_row(raw, d, n)
            inferred = inst.task.value
            if inferred != task:
                raise ValueError(f"input {inst.id!r}: listed under {task} but its conditions make it {inferred}")
            rows.append({**inst.to_row(), "task": task, "error": None})
        except (ValueError, TypeError, MediaError, OSError) as exc:
            rows.append({**empty, "input_id": rid or empty["input_id"], "task": task, "error": str(exc)})
    return rows


def manifest_ids(bench_dir: str | Path, task: str) -> set[str]:
    """The input ids ``task``'s manifest lists: the ids :func:`read_task` keys its rows by (a line
    with a valid id, the first line of each id), read without opening the media the lines name, for
    telling which candidate files belong to an input."""
    d = task_dir(bench_dir, task)
    if d is None or not (d / "manifest.jsonl").is_file():
        return set()
    ids: set[str] = set()
    for _, data in _manifest_lines(d / "manifest.jsonl"):
        try:
            raw = json.loads(data.decode("utf-8")) if data is not None and data.strip() else None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            continue
        rid = _line_id(raw)
        if rid is not None:
            ids.add(rid)
    return ids


def read_task_at(bench_dir: str | Path, task: str, storage=None) -> list[dict[str, Any]]:
    """:func:`read_task` of a bench at a folder or an ``s3://`` prefix. A bench on S3 is read from its
    local copy (:meth:`~argus_dagster.infra.storage.Storage.local_copy`), and its rows name their conditions
    by their ``s3://`` URIs, so any machine reads them through the storage."""
    if not is_remote(bench_dir):
        return read_task(bench_dir, task)
    storage = storage or LOCAL
    copy = storage.local_copy(bench_dir).resolve()

    def uri(path):
        if not path:
            return path
        return join(str(bench_dir), Path(path).resolve().relative_to(copy).as_posix())

    rows = read_task(copy, task)
    for r in rows:
        r["first_frame"], r["source_video"] = uri(r.get("first_frame")), uri(r.get("source_video"))
        r["subject_images"] = [uri(p) for p in r.get("subject_images") or []]
        if r.get("error"):
            r["error"] = r["error"].replace(str(copy), str(bench_dir).rstrip("/"))
    return rows


def bench_rubric_paths(bench_dir: str | Path, task: str, input_id: str) -> list[Path]:
    """Where the bench may hold the rubric of ``input_id``: ``<TASK>/rubrics/<id>.json`` (inside the
    rubrics folder, whatever the id holds), and the first is where a new one is frozen."""
    d = task_dir(bench_dir, task)
    if d is None:
        return []
    return [d / "rubrics" / f"{name}.json" for name in reversed(lookup_names(input_id))]


def bench_rubric_path(bench_dir: str | Path, task: str, input_id: str) -> Path | None:
    """The bench's rubric file of ``input_id``: an existing one, else where a new one is frozen."""
    paths = bench_rubric_paths(bench_dir, task, input_id)
    return next((p for p in paths if p.is_file()), paths[0] if paths else None)


@overload
def sample_of(entry: str, sample_file: None = None, known: dict[str, str] | None = None) -> tuple[str, str]: ...
@overload
def sample_of(entry: str, sample_file: str | None, known: dict[str, str] | None = None) -> tuple[str, str] | None: ...
def sample_of(entry: str, sample_file: str | None = None, known: dict[str, str] | None = None) -> tuple[str, str] | None:
    """``(input_id, sample)`` of a video in a model's folder: ``entry`` is the name (without suffix) of
    a file there, or of a folder there when ``sample_file`` is the stem of a file inside it.

    - ``<id>.<ext>``: the single video of ``<id>``, sample ``""``;
    - ``<id>__<k>.<ext>``: sample ``k`` (digits) of ``<id>``, unless ``<id>__<k>`` is itself an input id;
    - ``<id>/<k>.<ext>``: sample ``k`` of ``<id>``.

    ``known`` maps the names an input may be stored under (:func:`~.names.lookup_names`) to its id;
    without it a name is the id. None: a folder entry that is not ``<digits>``."""
    ident: Callable[[str], str] = (lambda stem: known.get(stem, stem)) if known is not None else (lambda stem: stem)
    if sample_file is not None:
        return (ident(entry), str(int(sample_file))) if SAMPLE_NAME.fullmatch(sample_file) else None
    m = SAMPLE_STEM.fullmatch(entry)
    if m and not (known is not None and entry in known):
        return ident(m.group(1)), str(int(m.group(2)))
    return ident(entry), ""


def model_samples(model_dir: str | Path, known_ids: Iterable[str] | None = None
                  ) -> tuple[list[tuple[str, str, Path]], list[str]]:
    """``(input_id, sample, path)`` of every video in one model's folder (layouts: :func:`sample_of`),
    one per (input, sample), and the entries left out with the reason: a file that is not a video, a
    sample folder entry that is not ``<digits>.<ext>``, a second file of the same sample (the first
    by name is used)."""
    folder = Path(model_dir)
    known = {n: i for i in known_ids for n in lookup_names(i)} if known_ids is not None else None
    found: list[tuple[str, str, Path]] = []
    problems: list[str] = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        if entry.name.startswith("."):
            continue
        if entry.is_dir():  # <model>/<id>/<k>.mp4
            for f in sorted(entry.iterdir()):
                key = sample_of(entry.name, f.stem, known) if f.suffix.lower() in VIDEO_SUFFIXES else None
                if key is not None and f.is_file():
                    found.append((*key, f))
                elif not f.name.startswith("."):
                    problems.append(f"{f}: not a sample (expected <k>.mp4 with k a number)")
            continue
        if entry.suffix.lower() not in VIDEO_SUFFIXES:
            problems.append(f"{entry}: not a video ({', '.join(VIDEO_SUFFIXES)})")
            continue
        found.append((*sample_of(entry.stem, None, known), entry))
    return _one_per_sample(found, problems, folder.name)


def listed_samples(model_dir: str, known_ids: Iterable[str] | None = None, storage=None
                   ) -> tuple[list[tuple[str, str, str]], list[str]]:
    """:func:`model_samples` of a model's prefix on S3 (``s3://bucket/.../<TASK>/<model>``), from one
    listing: the same layouts, the same choice among duplicates, the same reasons for what is left out;
    locations are ``s3://`` URIs."""

    storage = storage or LOCAL
    known = {n: i for i in known_ids for n in lookup_names(i)} if known_ids is not None else None
    found: list[tuple[str, str, str]] = []
    problems: list[str] = []
    folders: dict[str, set[str]] = {}
    for obj in storage.list(model_dir):
        parts = obj.rel.split("/")
        if parts[0].startswith("."):
            continue
        if len(parts) > 1:  # <model>/<id>/<k>.mp4; deeper objects are a folder inside a sample folder
            folders.setdefault(parts[0], set()).add(parts[1] if len(parts) == 2 else parts[1] + "/")
            continue
        stem, suffix = Path(parts[0]).stem, Path(parts[0]).suffix
        if suffix.lower() not in VIDEO_SUFFIXES:
            problems.append(f"{obj.uri}: not a video ({', '.join(VIDEO_SUFFIXES)})")
            continue
        found.append((*sample_of(stem, None, known), obj.uri))
    for entry in sorted(folders):
        for name in sorted(folders[entry]):
            uri = join(model_dir, entry, name.rstrip("/"))
            key = (sample_of(entry, Path(name).stem, known)
                   if not name.endswith("/") and Path(name).suffix.lower() in VIDEO_SUFFIXES else None)
            if key is not None:
                found.append((*key, uri))
            elif not name.startswith("."):
                problems.append(f"{uri}: not a sample (expected <k>.mp4 with k a number)")
    return _one_per_sample(found, problems, model_dir.rstrip("/").rsplit("/", 1)[-1])


def _one_per_sample(found: list, problems: list[str], folder_name: str) -> tuple[list, list[str]]:
    out: dict[tuple[str, str], Any] = {}
    extra: dict[tuple[str, str], int] = {}
    for iid, sample, path in found:
        if (iid, sample) in out:
            extra[(iid, sample)] = extra.get((iid, sample), 1) + 1
        else:
            out[(iid, sample)] = path
    for (iid, sample), n in extra.items():
        problems.append(f"{folder_name}/{iid} sample {sample or '(single)'}: {n} files "
                        "(keep one per sample; the first by name is used)")
    return [(iid, sample, path) for (iid, sample), path in out.items()], problems


def find_candidates(candidates_dir: str | Path, task: str, model: str,
                    input_ids: Iterable[str], storage=None) -> dict[str, list[tuple[str, Path | str]]]:
    """``{input_id: [(sample, path), ...]}`` of the listed inputs under ``<TASK>/<model>/`` (layouts:
    :func:`sample_of`; samples in numeric order, the single video first); an input without a video is
    not a key. Nothing for a model name that is not a folder name of the store, and never a file
    outside the model's folder. A store at an ``s3://`` prefix gives ``s3://`` URIs (:func:`listed_samples`)."""

    if model_name_problem(model):
        return {}
    ids = [i for i in input_ids if isinstance(i, str)]
    wanted = set(ids)
    listed: Sequence[tuple[str, str, Path | str]]
    if is_remote(candidates_dir):
        where = task_location(candidates_dir, task, storage)
        if where is None:
            return {}
        listed = listed_samples(join(where, model), ids, storage)[0]
    else:
        d = task_dir(candidates_dir, task)
        if d is None:
            return {}
        listed = model_samples(d / model, ids)[0]
    out: dict[str, list[tuple[str, Path | str]]] = {}
    for iid, sample, path in listed:
        if iid in wanted:
            out.setdefault(iid, []).append((sample, path))
    for samples in out.values():
        samples.sort(key=lambda s: (s[0] != "", int(s[0]) if s[0] else 0))
    return out


def find_candidate(candidates_dir: str | Path, task: str, model: str, input_id: str) -> Path | str | None:
    """The single video ``<TASK>/<model>/<id>.<ext>`` (or under the id's file name); None for a model
    name that is not a folder name of the store, and never a file outside the model's folder."""
    return dict(find_candidates(candidates_dir, task, model, [input_id]).get(input_id, [])).get("")


__all__ = ["read_task", "read_task_at", "task_location", "listed_samples", "find_candidate", "find_candidates", "model_samples", "sample_of",
           "bench_rubric_path", "infer_task"]
