"""Diagnostic reports (task x model): one HTML page per video, an index per partition, and a
comparison page per input that every model's partition refreshes. A video is an (input, sample):
each sample of an input has its own page and card, named by
:func:`~argus_dagster.infra.names.sample_file_name`, and the input's comparison page shows every sample.

Pages go to the evaluation's ``reports/<TASK>/<model>/`` (a folder, or an S3 prefix in the aws
environment: written through the storage resource, linked in the metadata by presigned URLs). For the comparison pages each partition leaves
a small card per video (scores and a few thumbnails) under ``<TASK>/_cards/<input_id>/``; the page of
an input is rebuilt from all cards present, so it never needs another partition's tables. Every
folder and file name made from an id or a model name is its :func:`~argus_dagster.infra.names.file_name`;
every file is written whole (:func:`~argus_dagster.infra.files.write_atomic`), and a write that fails is
one line on its row.
"""


import hashlib
import json
from urllib.parse import quote

import dagster as dg
import polars as pl

from argus_dagster.assets.versions import content_version, volatile_metadata
from argus_dagster.infra.files import WriteError
from argus_dagster.infra.media import JUDGE_POLICY, MediaError, file_digest
from argus_dagster.infra.names import ERROR_ROW_MARK, file_name, sample_file_name
from argus_dagster.infra.storage import Storage, join, parent, relative
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.gather import video_label
from argus_dagster.method.rubric.schema import parse_rubric
from argus_dagster.outputs.comparison_page import write_card, write_comparison
from argus_dagster.outputs.firm_pages import FIRM_FOLDER
from argus_dagster.outputs.page_media import MediaFolder, page_video
from argus_dagster.outputs.report import FrameRow, jpeg, render_index, render_video_report
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.storage import StorageResource

from .automation import UP_TO_DATE
from .partitions import BACKFILL, each_partition, task_and_model, task_model_partitions

# ``page_sha256``: the report page's content (what it says, frames included), null where none was written.
REPORTS = {"task": pl.String, "model": pl.String, "input_id": pl.String, "sample": pl.String, "path": pl.String,
           "page_sha256": pl.String, "error": pl.String}
# What the data version leaves out (assets.versions): none of its columns.
DIAGNOSTIC_REPORTS_VOLATILE: tuple[str, ...] = ()


def safe_name(text: str) -> str:
    """The file name of an id or model name: injective (:func:`argus_dagster.infra.names.file_name`), so
    ``猫 cat`` and ``犬 cat``, or ``good model`` and ``good_model``, never share a page."""
    return file_name(text)


def _md_text(text: str) -> str:
    """An id as link text in Markdown metadata: shown as written, never as markup."""
    return "".join("\\" + c if c in "\\`*_[]()<>#|!" else c for c in " ".join(text.split()))


def video_frames(uri: str | None, digest: str | None = None, storage=None) -> FrameRow:
    """The frames the judge sees (its sampling policy), with their times; the error instead when the
    video cannot be read. With the video's hash they come from the process's frame pool, JPEGs
    included, so a video the judge stage just looked at is neither decoded nor encoded again."""
    if not uri:
        return FrameRow("output", error="no video")
    try:
        if digest is None:
            digest = file_digest(uri, storage)
        frames = MediaStore({"v": uri}, {"v": digest}, storage=storage).frames("v", JUDGE_POLICY)
        return FrameRow("", [im.jpeg() for im in frames.images()], [f"{t:.1f}s" for t in frames.timestamps])
    except MediaError as exc:
        return FrameRow("", error=str(exc))


def _still(uri: str, storage=None):
    """A condition image as the pages show it (the judge's size), decoded once per process for every
    page that shows it (every model's, every sample's) through the frame pool, by its content."""
    return MediaStore({"c": uri}, {"c": file_digest(uri, storage)}, storage=storage).frames("c", JUDGE_POLICY).array[0]


def condition_rows(inp: dict, storage=None) -> list[FrameRow]:
    rows = []
    for label, paths in (("first frame", [inp.get("first_frame")]), ("subject images", inp.get("subject_images") or [])):
        present = [p for p in paths if p]
        if not present:
            continue
        try:
            rows.append(FrameRow(label, [jpeg(_still(p, storage)) for p in present]))
        except Exception as exc:  # an unreadable condition is shown as such; the report still renders
            rows.append(FrameRow(label, error=f"{type(exc).__name__}: {exc}"))
    if inp.get("source_video"):
        row = video_frames(inp["source_video"], storage=storage)
        row.label = "source video"
        rows.append(row)
    return rows


def _criteria(rubric_row: dict | None, evidence: pl.DataFrame, scores: pl.DataFrame) -> list[dict]:
    rules = {}
    if rubric_row and not rubric_row.get("error"):
        rules = {c.id: c for c in parse_rubric(json.loads(rubric_row["rubric_json"])).criteria}
    ev = {r["criterion_id"]: r for r in evidence.iter_rows(named=True)}
    out = []
    for s in scores.iter_rows(named=True):
        c = rules.get(s["criterion_id"])
        e = ev.get(s["criterion_id"], {})
        out.append({**s, "requirement": c.criterion if c else "", "scoring_rule": c.scoring_rule if c else "",
                    "plan": e.get("plan"), "repairs": e.get("repairs"), "plan_status": e.get("plan_status"),
                    "evidence": e.get("evidence"), "error": e.get("error")})
    return out


def _source_src(uri: str | None, reports_dir, task: str, store: Storage,
                media: MediaFolder | None = None) -> str | None:
    """The playable URL of an edit's source video (None without one, or when it cannot be read)."""
    if not uri:
        return None
    try:
        return page_video(uri, file_digest(uri, store), reports_dir, task, store, media)
    except (MediaError, OSError, ValueError):
        return None


@dg.asset(backfill_policy=BACKFILL, partitions_def=task_model_partitions, code_version="6", group_name="reports", kinds={"html"},
          automation_condition=UP_TO_DATE, metadata=volatile_metadata(DIAGNOSTIC_REPORTS_VOLATILE))
@each_partition
def diagnostic_reports(context: dg.AssetExecutionContext, input_instances: pl.DataFrame, rubrics: pl.DataFrame,
                       candidate_videos: pl.DataFrame, criterion_evidence: pl.DataFrame,
                       criterion_scores: pl.DataFrame, video_scores: pl.DataFrame,
                       bench: BenchResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """One self-contained HTML report per video, an index page, and the per-input comparison pages,
    written through the storage (a folder, or S3 with presigned links in the metadata). A row of a bad
    input (an invalid manifest line) is its line in the index, with its error, and nothing else."""
    task, model = task_and_model(context)
    store = storage.storage()
    reports_dir = bench.reports_path()
    task_dir = join(reports_dir, task)
    out_dir = join(task_dir, safe_name(model))
    inputs = {r["input_id"]: r for r in input_instances.iter_rows(named=True)}
    rubric_rows = {r["input_id"]: r for r in rubrics.iter_rows(named=True)}
    cands = {(r["input_id"], r["sample"]): r for r in candidate_videos.iter_rows(named=True)}
    rows, index_rows = [], []
    media = MediaFolder(reports_dir, task, store)  # the task's playable copies, listed once for these pages
    firm = {o.rel for o in store.list(join(out_dir, FIRM_FOLDER))}  # FIRM-Video's pages of its videos, if it ran
    # Each video's evidence and scores, split once (a filter per video would read the whole table each time).
    by_video = {name: dict(table.partition_by("input_id", "sample", as_dict=True)) if table.height else {}
                for name, table in (("evidence", criterion_evidence), ("scores", criterion_scores))}
    none = {"evidence": criterion_evidence.clear(), "scores": criterion_scores.clear()}

    def of_video(name: str, iid: str, sample: str) -> pl.DataFrame:
        return by_video[name].get((iid, sample), none[name])

    for v in video_scores.iter_rows(named=True):
        iid, sample = v["input_id"], v["sample"]
        label = video_label(iid, sample)
        inp = inputs.get(iid, {})
        if iid.startswith(ERROR_ROW_MARK) or inp.get("error"):
            # A bad manifest line or input: no page, card or comparison of its own, one line in the index.
            index_rows.append({**v, "input_id": label, "prompt": None, "href": None})
            continue
        name = f"{sample_file_name(iid, sample)}.html"
        try:
            cand = cands.get((iid, sample), {})
            output = video_frames(cand.get("uri"), cand.get("sha256"), store)
            output.label = "output frames (as the judge saw them)"
            criteria = _criteria(rubric_rows.get(iid), of_video("evidence", iid, sample), of_video("scores", iid, sample))
            rubric_row = rubric_rows.get(iid) or {}
            generator = (json.loads(rubric_row["rubric_json"]).get("generator")
                         if rubric_row.get("rubric_json") and not rubric_row.get("error") else None)
            conditions = condition_rows(inp, store)
            video_src = page_video(cand.get("uri"), cand.get("sha256"), reports_dir, task, store, media)
            source_src = _source_src(inp.get("source_video"), reports_dir, task, store, media)
            page = render_video_report(task=task, model=model, input_id=label, prompt=inp.get("prompt") or "",
                                       conditions=conditions, output=output, video=v, criteria=criteria,
                                       compare_href=f"../compare/{quote(safe_name(iid))}.html",
                                       rubric_generator=generator, video_src=video_src, source_src=source_src,
                                       firm_href=f"{FIRM_FOLDER}/{quote(name)}" if name in firm else None)
            store.write_bytes(join(out_dir, name), page)
            page_sha256 = hashlib.sha256(page.encode()).hexdigest()
            card = {"model": video_label(model, sample), "final_score": v["final_score"], "base_score": v["base_score"],
                    **{k: v.get(k) for k in ("n_scored", "n_criteria", "judge", "weight_scored")},
                    "caps_fired": v["caps_fired"], "error": v["error"], "href": f"../{quote(safe_name(model))}/{quote(name)}",
                    "scores": {c["criterion_id"]: c["score"] for c in criteria},
                    "requirements": {c["criterion_id"]: c["requirement"] for c in criteria if c.get("requirement")},
                    "rationales": {c["criterion_id"]: c["rationale"] for c in criteria if c.get("rationale")},
                    "frame_times": output.captions[::2], "video": video_src}
            write_card(store, task_dir, iid, sample_file_name(model, sample), card, output.frames[::2])
            write_comparison(store, task_dir, task, iid, inp.get("prompt") or "", conditions, source_src)
            rows.append({"task": task, "model": model, "input_id": iid, "sample": sample, "path": join(out_dir, name),
                         "page_sha256": page_sha256, "error": None})
        except WriteError as exc:  # a full disk: one line naming the file, on this row
            context.log.warning(f"{task}/{model}/{label}: report not written: {exc}")
            rows.append({"task": task, "model": model, "input_id": iid, "sample": sample, "path": None,
                         "error": f"report not written: {exc}"})
        except Exception as exc:  # one report failing leaves the others
            context.log.warning(f"{task}/{model}/{label}: report failed: {exc}")
            rows.append({"task": task, "model": model, "input_id": iid, "sample": sample, "path": None,
                         "error": f"report failed: {type(exc).__name__}: {exc}"})
        index_rows.append({**v, "input_id": label, "prompt": inp.get("prompt"), "href": quote(name) if rows[-1]["path"] else None})
    index = join(out_dir, "index.html")
    index_error = None
    try:
        store.write_bytes(index, render_index(task=task, model=model, rows=index_rows))
    except WriteError as exc:
        index_error = str(exc)
        context.log.warning(f"{task}/{model}: index not written: {exc}")
    df = pl.DataFrame(rows, schema=REPORTS, orient="row")
    ok = df.filter(pl.col("error").is_null())
    written = [r["path"] for r in rows if r["path"]]  # every page is in out_dir
    links = dict(zip(written, store.links_in(out_dir, [p.rsplit("/", 1)[-1] for p in written], reports_dir)))
    return dg.Output(df, data_version=content_version(df, DIAGNOSTIC_REPORTS_VOLATILE), metadata={
        "n_reports": ok.height, "n_errors": df.height - ok.height,
        **({"index_error": index_error} if index_error else {}),
        "index": dg.MetadataValue.path(relative(index, parent(reports_dir))),  # relative to the evaluation
        "index_url": dg.MetadataValue.url(store.link(index, reports_dir)),
        "reports": dg.MetadataValue.md("\n".join(
            f"- [{_md_text(video_label(r['input_id'], r['sample']))}]({links[r['path']]})"
            if r["path"] else f"- `{video_label(r['input_id'], r['sample'])}`: {r['error']}"
            for r in df.iter_rows(named=True)) or "none"),
    })
