"""FIRM-Video (check-before-score) and best-of-N assets.

``firm_checklists`` (task) holds each input's output-blind IF checklist, planned once by the judge's
VLM and frozen: the verifiers of every model read it from this table, and a re-materialization
gets it from the content cache (namespace ``firm``) without a planner call. ``firm_verdicts`` and
``firm_scores`` (task x model) verify and score every candidate on IF, WC and PQ; without a VLM,
PQ comes from the CPU tools (``flicker_probe``, ``motion_probe``, ``aesthetic``, the same cached
steps the evidence stage runs) and IF/WC are unscored with the reason. ``best_of_n`` picks the best
candidate of every input by a chosen evaluator. These assets run only when asked
(``argus evaluate --protocol firm|both``, or the UI): the default evaluation does not touch them.
"""

import functools
from pathlib import Path
from typing import Any, cast

import dagster as dg
import polars as pl

from argus_dagster.assets.versions import content_version, volatile_metadata
from argus_dagster.infra.media import JUDGE_POLICY, MediaError, file_digest
from argus_dagster.infra.names import file_name, sample_file_name
from argus_dagster.infra.storage import join
from argus_dagster.infra.tables import COSTS, frame
from argus_dagster.method.evidence.executor import run_plan
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.plan import NormalizedPlan
from argus_dagster.method.gather import video_label
from argus_dagster.method.inputs import ALL_TASKS, InputInstance
from argus_dagster.outputs.firm_pages import index_path, page_name, render_firm_index, render_firm_video
from argus_dagster.outputs.report import href
from argus_dagster.protocols import best_of_n as bon
from argus_dagster.protocols.firm.batch import OfflineRecords, VideoJob, evaluate_videos, plan_checklists
from argus_dagster.protocols.firm.evaluator import FirmEvaluator
from argus_dagster.protocols.firm.offline import unscored_offline
from argus_dagster.protocols.firm.scoring import if_rating, score_wc
from argus_dagster.protocols.firm.tables import checklist_from_rows, if_score_from_rows, verdict_rows
from argus_dagster.protocols.firm.types import IF, PQ, WC, Checklist, ChecklistError, ChecklistItem, Verdict
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.storage import StorageResource
from argus_dagster.resources.tools import ToolsResource
from argus_dagster.resources.vlm import VlmResource
from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.priorities import STAGE_JUDGMENTS, STAGE_RUBRICS, request_priority

from .candidates import _cache_write_errors, _vlm_metadata
from .partitions import task_and_model, task_model_partitions, task_partitions

S, F, I, B = pl.String, pl.Float64, pl.Int64, pl.Boolean
# An input's planner cost (the cost ledger's FIRM checklist stage) is on its first row, zeros on the others.
FIRM_CHECKLISTS = {"task": S, "input_id": S, "dimension": S, "item_id": S, "target": S, "aspect": S, "question": S,
                   "importance": I, "weight": F, "checklist_hash": S, "maker": S, "dropped": S, "error": S, **COSTS}
FIRM_VERDICTS = {"task": S, "model": S, "input_id": S, "sample": S, "dimension": S, "item_id": S, "verdict": S, "verifiable": B,
                 "evidence": S, "checklist_hash": S, "target": S, "aspect": S, "question": S, "importance": I}
# ``if_unverifiable`` / ``wc_unverifiable``: answers the verifier could not give from the frames (IF: counted
# as not met; WC: left out of the aggregate), null where no verifier answered.
FIRM_SCORES = {"task": S, "model": S, "input_id": S, "sample": S, "if_score": F, "if_rating": I, "if_rationale": S, "if_reason": S,
               "if_unverifiable": I, "wc_score": F, "wc_rating": I, "wc_rationale": S, "wc_reason": S,
               "wc_unverifiable": I, "wc_scene": S, "pq_rating": I, "pq_rationale": S, "pq_reason": S, "pq_source": S,
               "frames": pl.List(S), **COSTS}
BEST_OF_N = {"task": S, **bon.PICK_SCHEMA}
# The measurable PQ defects without a VLM: the CPU tools' records (offline.pq_offline reads them).
PQ_TOOLS = ("flicker_probe", "motion_probe", "aesthetic")


# What each asset's data version leaves out (assets.versions): what the checklists' and the
# scores' VLM calls cost in this run (the cost ledger's FIRM stages); none of the verdicts' columns.
FIRM_CHECKLISTS_VOLATILE: tuple[str, ...] = tuple(COSTS)
FIRM_VERDICTS_VOLATILE: tuple[str, ...] = ()
FIRM_SCORES_VOLATILE: tuple[str, ...] = tuple(COSTS)
BEST_OF_N_VOLATILE: tuple[str, ...] = ()


def _references(inst: InputInstance, storage) -> tuple[dict, dict] | None:
    """The input's condition media as labelled frames and their digests (TI2V, TS2V, TV2V, TSV2V)."""
    media = inst.condition_media
    if not media:
        return None
    digests = {m: file_digest(uri, storage) for m, uri in media.items()}
    store = MediaStore(dict(media), digests, storage=storage)
    return {m: store.frames(m, JUDGE_POLICY) for m in media}, digests


@dg.asset(partitions_def=task_partitions, code_version="3", group_name="firm", kinds={"polars"},
          metadata=volatile_metadata(FIRM_CHECKLISTS_VOLATILE))
def firm_checklists(context: dg.AssetExecutionContext, input_instances: pl.DataFrame, vlm: VlmResource,
                    tools: ToolsResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """One row per IF checklist item of every input (output-blind, frozen), one per requirement the
    planner gave that was left out (``dropped``: why, e.g. audio), or one error row per input whose
    checklist could not be planned, with the reason."""
    task = context.partition_key
    base = {"task": task, "dimension": IF}
    rows: list[dict] = []
    prompts, refs = {}, {}
    for r in input_instances.iter_rows(named=True):
        if r["error"]:
            rows.append({**base, "input_id": r["input_id"], "error": f"input invalid: {r['error']}"})
            continue
        if not vlm.configured:
            rows.append({**base, "input_id": r["input_id"],
                         "error": unscored_offline()[IF].reason + " (IF and WC need a VLM; PQ is rated "
                                  "offline from the CPU tools)"})
            continue
        inst = InputInstance.from_row(r)
        try:
            got = _references(inst, storage.storage())
        except (MediaError, OSError) as exc:
            rows.append({**base, "input_id": inst.id, "error": f"condition media: {exc} (fix the input's file)"})
            continue
        prompts[inst.id] = inst.prompt
        if got is not None:
            refs[inst.id] = got
    stats, cache = CallStats(), tools.cache("firm", storage.storage())
    planned = 0
    if prompts:
        evaluator = FirmEvaluator(vlm.client(), cache=cache, stats=stats, parse_retries=vlm.parse_retries)
        spent: dict[str, dict] = {}
        with request_priority(stage=STAGE_RUBRICS):
            items, checklists = plan_checklists(evaluator, prompts, references=refs, max_workers=vlm.workers(),
                                                costs=spent)
        rows += [{"task": task, **i} for i in items]
        for iid, c in checklists.items():
            if isinstance(c, str):
                context.log.warning(f"{task} input {iid}: {c}")
                rows.append({**base, "input_id": iid, "error": c})
            else:
                planned += 1
        costed: set[str] = set()
        for r in rows:  # each input's planner cost once, on its first row
            if r.get("input_id") in spent and r["input_id"] not in costed:
                costed.add(r["input_id"])
                r.update(spent[r["input_id"]])
    df = frame(rows, FIRM_CHECKLISTS).sort("input_id", "item_id")
    errors = df.filter(pl.col("error").is_not_null())
    dropped = df.filter(pl.col("dropped").is_not_null())
    return dg.Output(df, data_version=content_version(df, FIRM_CHECKLISTS_VOLATILE), metadata={
        "n_inputs": input_instances.height, "n_checklists": planned,
        "n_items": df.height - errors.height - dropped.height, "n_errors": errors.height,
        "n_dropped": dropped.height,
        "dropped": dg.MetadataValue.md("\n".join(f"- `{r['input_id']}` {r['question']!r} (importance "
                                                  f"{r['importance']}): {r['dropped']}"
                                                  for r in dropped.head(20).iter_rows(named=True)) or "none"), "planner_calls": stats.calls if vlm.configured else 0,
        "cache_hits": cache.hits, "cache_misses": cache.misses, **_cache_write_errors(cache),
        "errors": dg.MetadataValue.md("\n".join(f"- `{r['input_id']}`: {r['error']}"
                                                for r in errors.head(20).iter_rows(named=True)) or "none"),
        **_vlm_metadata(vlm, stats)})


def stored_checklists(rows: pl.DataFrame) -> dict[str, Checklist | str]:
    """Each input's frozen IF checklist from ``firm_checklists`` rows, or the reason it has none."""
    out: dict[str, Checklist | str] = {}
    for (iid,), g in rows.group_by("input_id", maintain_order=True):
        err = g.filter(pl.col("error").is_not_null())
        if err.height:
            out[iid] = err["error"][0]
            continue
        try:
            out[iid] = checklist_from_rows(g.filter(pl.col("dimension") == IF).to_dicts())
        except ChecklistError as exc:
            out[iid] = str(exc)
    return out


def _item_columns(rows: list[dict], checklist: Checklist | None, results: dict) -> list[dict]:
    """Verdict rows with the item each answers (question, target, aspect, importance): IF from the
    frozen checklist, WC from the video's own grounded checklist."""
    items = {(IF, i.id): i for i in (checklist.items if checklist is not None else ())}
    wc = results.get(WC)
    for i in (wc.detail.get("items", []) if wc is not None else []):
        items[(WC, i["id"])] = ChecklistItem(**i)
    out = []
    for r in rows:
        it = items.get((r["dimension"], r["item_id"]))
        out.append({**r, **({"question": it.question, "target": it.target, "aspect": it.aspect,
                             "importance": it.importance} if it else {})})
    return out


@dg.multi_asset(
    partitions_def=task_model_partitions, group_name="firm", code_version="4", can_subset=False,
    outs={"firm_verdicts": dg.AssetOut(kinds={"polars"}, metadata=volatile_metadata(FIRM_VERDICTS_VOLATILE), description="One row per checklist item and video: the "
                                       "verdict (IF yes = satisfied, WC yes = violation), its evidence and the item."),
          "firm_scores": dg.AssetOut(kinds={"polars"}, metadata=volatile_metadata(FIRM_SCORES_VOLATILE), description="One row per video: IF and WC scores and "
                                     "ratings, the PQ rating, rationales, and why a dimension is unscored.")})
def firm_evaluation(context: dg.AssetExecutionContext, candidate_videos: pl.DataFrame, firm_checklists: pl.DataFrame,
                    input_instances: pl.DataFrame, vlm: VlmResource, tools: ToolsResource,
                    storage: StorageResource, bench: BenchResource):
    """FIRM-Video's three dimensions for every candidate video of the partition (each sample of an
    input against the input's checklist); a video that fails gets its reasons on its row and the rest
    proceed. The overview's FIRM-Video section is rewritten with this partition's rows."""
    task, model = task_and_model(context)
    inputs = {r["input_id"]: r for r in input_instances.iter_rows(named=True)}
    checklists = stored_checklists(firm_checklists)
    videos = {r["uri"]: r for r in candidate_videos.iter_rows(named=True) if r["uri"]}
    store_of = storage.storage()
    stats, cache, evidence_cache = CallStats(), tools.cache("firm", store_of), tools.cache("evidence", store_of)
    suite = tools.suite() if not vlm.configured else None
    jobs, samples, failed = [], [], []
    for cand in candidate_videos.iter_rows(named=True):
        inp = inputs.get(cand["input_id"])
        if cand["error"] or inp is None or inp["error"]:
            failed.append(cand)
            continue
        inst = InputInstance.from_row(inp)
        store = MediaStore({"output_video": cand["uri"]}, {"output_video": cand["sha256"]}, storage=store_of)
        refs = None
        if vlm.configured and inst.condition_media:
            try:
                refs = _references(inst, store_of)
            except (MediaError, OSError):
                refs = None  # firm_checklists recorded the input's reason; its IF is unscored with it
        samples.append(cand["sample"])
        jobs.append(VideoJob(inst.id, inst.prompt, cand["uri"], cand["sha256"],
                                functools.partial(store.frames, "output_video", JUDGE_POLICY),  # this video's store
                                refs[0] if refs else None, refs[1] if refs else None))

    def offline_records(job: VideoJob) -> OfflineRecords:
        store = MediaStore({"output_video": job.video_uri}, {"output_video": job.video_digest}, storage=store_of)
        assert suite is not None  # offline records are read only without a VLM, where the suite is made
        plan = NormalizedPlan([{"tool": t, "args": {"on": "output_video"}} for t in PQ_TOOLS
                               if t in suite.available()])
        v = videos[job.video_uri]
        return OfflineRecords(run_plan(plan, store, suite, cache=evidence_cache), v["width"], v["height"])

    evaluator = (FirmEvaluator(vlm.client(), cache=cache, stats=stats, parse_retries=vlm.parse_retries)
                 if vlm.configured else None)
    with request_priority(stage=STAGE_JUDGMENTS):
        out = evaluate_videos(evaluator, jobs, checklists, video_prefix=f"{task}/{model}/",
                              max_workers=vlm.workers() if vlm.configured else 2,
                              offline_records=offline_records if evaluator is None else None)
    verdicts, scores = [], []
    for job, sample, res, row in zip(jobs, samples, out.results, out.scores):
        cl = checklists.get(job.input_id)
        rows = _item_columns(verdict_rows(job.input_id, res), cl if isinstance(cl, Checklist) else None, res)
        verdicts += [{"task": task, "model": model, **r, "sample": sample} for r in rows]
        pq = res.get(PQ)
        scores.append({"task": task, "model": model, **row, "sample": sample,
                       "pq_source": (pq.detail.get("source") if pq is not None and pq.scored else None)})
    for cand in failed:
        why = cand["error"] or f"input invalid: {(inputs.get(cand['input_id']) or {}).get('error') or 'not in the task'}"
        scores.append({"task": task, "model": model, "input_id": cand["input_id"], "sample": cand["sample"], "frames": [],
                       **{f"{s}_reason": why for s in ("if", "wc", "pq")}})
    vdf = frame(verdicts, FIRM_VERDICTS)
    sdf = frame(scores, FIRM_SCORES).sort("input_id", "sample")
    for d in ("if", "wc", "pq"):
        for r in sdf.filter(pl.col(f"{d}_rating").is_null()).head(5).iter_rows(named=True):
            context.log.warning(f"{task}/{model}/{video_label(r['input_id'], r['sample'])} {d.upper()}: {r[f'{d}_reason']}")
    means = {f"mean_{d}_rating": (float(cast(float, sdf[f"{d}_rating"].mean()))
                                  if sdf[f"{d}_rating"].drop_nulls().len() else None)
             for d in ("if", "wc", "pq")}
    pages = _write_pages(context, bench, store_of, task, model, sdf, vdf, inputs)
    yield dg.Output(vdf, output_name="firm_verdicts",
                    data_version=content_version(vdf, FIRM_VERDICTS_VOLATILE),
                    metadata={"n_verdicts": vdf.height, "n_videos": sdf.height})
    yield dg.Output(sdf, output_name="firm_scores",
                    data_version=content_version(sdf, FIRM_SCORES_VOLATILE),
                    metadata={"n_videos": sdf.height, **means,
                              **{f"n_{d}_scored": sdf[f"{d}_rating"].drop_nulls().len() for d in ("if", "wc", "pq")},
                              **{f"n_{d}_unverifiable": int(sdf[f"{d}_unverifiable"].sum() or 0) for d in ("if", "wc")},
                              "n_left_out_of_export": len(out.left_out),
                              "cache_hits": cache.hits, "cache_misses": cache.misses, **_cache_write_errors(cache), **pages,
                              **_vlm_metadata(vlm, stats)})


def _write_pages(context: dg.AssetExecutionContext, bench: BenchResource, store, task: str, model: str,
                 scores: pl.DataFrame, verdicts: pl.DataFrame, inputs: dict[str, dict]) -> dict:
    """Each video's FIRM-Video page (its checklist, verdicts and evidence under its ratings) and the
    partition's index, beside the VideoArgus reports (:mod:`argus_dagster.outputs.firm_pages`); a page
    that cannot be written is said in the metadata and the log, and the tables stand."""
    folder = join(bench.reports_path(), task, file_name(model))
    reports = {o.rel for o in store.list(folder)}
    by_video = {k: g.to_dicts() for k, g in verdicts.partition_by("input_id", "sample", as_dict=True).items()} if verdicts.height else {}
    written, failed = 0, []
    for r in scores.iter_rows(named=True):
        iid, sample = r["input_id"], r["sample"] or ""
        report = f"{sample_file_name(iid, sample)}.html"
        try:
            store.write_bytes(join(folder, page_name(iid, sample)), render_firm_video(
                task=task, model=model, input_id=iid, sample=sample, prompt=(inputs.get(iid) or {}).get("prompt") or "",
                score=r, verdicts=by_video.get((iid, r["sample"]), []),
                report_href=f"../{href(report)}" if report in reports else None))
            written += 1
        except Exception as exc:  # one page failing leaves the others
            failed.append(f"{video_label(iid, sample)}: {type(exc).__name__}: {exc}")
    index = join(bench.reports_path(), index_path(task, model))
    try:
        store.write_bytes(index, render_firm_index(task=task, model=model, rows=scores.to_dicts()))
    except Exception as exc:
        failed.append(f"index: {type(exc).__name__}: {exc}")
    for f in failed[:5]:
        context.log.warning(f"{task}/{model} FIRM-Video page not written: {f}")
    out: dict[str, Any] = {"firm_pages": written}
    if failed:
        out["firm_pages_errors"] = "; ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
    else:
        out["firm_index_url"] = dg.MetadataValue.url(store.link(index, bench.reports_path()))
    return out


@dg.asset_check(asset="firm_scores", partitions_def=task_model_partitions,
                additional_ins={"firm_checklists": dg.AssetIn(), "firm_verdicts": dg.AssetIn()},
                description="Every IF score recomputes from the stored item weights and verdicts, every WC "
                            "score from the stored verdicts; every rating is 1-5 or null with a reason.")
def firm_scores_recompute(firm_scores: pl.DataFrame, firm_checklists: pl.DataFrame,
                          firm_verdicts: pl.DataFrame) -> dg.AssetCheckResult:
    problems = recompute_problems(firm_scores, firm_checklists, firm_verdicts)
    return dg.AssetCheckResult(passed=not problems, metadata={
        "n_videos": firm_scores.height, "n_problems": len(problems),
        "problems": dg.MetadataValue.md("\n".join(f"- {p}" for p in problems[:20]) or "none")})


def recompute_problems(scores: pl.DataFrame, checklists: pl.DataFrame, verdicts: pl.DataFrame) -> list[str]:
    """What does not recompute: IF from the ``weight`` of the ``firm_checklists`` items (each the item's
    ``m_i / Σ m``) and the video's IF verdicts, WC from
    the video's WC verdict rows (items and answers; an unscored WC must have no verified answer),
    ratings from scores by the seed's thresholds."""
    frozen = stored_checklists(checklists)
    items_of = {iid: g.filter(pl.col("dimension") == IF).to_dicts()
                for (iid,), g in checklists.group_by("input_id")}
    if "sample" not in verdicts.columns:  # stored before samples were read: single videos
        verdicts = verdicts.with_columns(pl.lit("").alias("sample"))
    by_video = {k: g for k, g in verdicts.group_by("input_id", "sample")}
    problems = []
    for r in scores.iter_rows(named=True):
        iid, sample = r["input_id"], r.get("sample") or ""
        name = video_label(iid, sample)
        for d in ("if", "wc", "pq"):
            if r[f"{d}_rating"] is None and not (r[f"{d}_reason"] or "").strip():
                problems.append(f"`{name}` {d}: unscored without a reason")
            if r[f"{d}_rating"] is not None and not 1 <= r[f"{d}_rating"] <= 5:
                problems.append(f"`{name}` {d}: rating {r[f'{d}_rating']} outside 1-5")
        v = by_video.get((iid, sample), pl.DataFrame(schema=FIRM_VERDICTS))
        for d, dim in (("if", IF), ("wc", WC)):
            rows = v.filter(pl.col("dimension") == dim).to_dicts()
            if r[f"{d}_score"] is None:
                if d == "wc" and any(x["verifiable"] for x in rows):
                    problems.append(f"`{name}` wc: unscored although {sum(bool(x['verifiable']) for x in rows)} "
                                    "answers are verified")
                continue
            score: float | None  # WC's may be None
            rating: int | None
            try:
                if d == "if":  # from the stored weights: the checklist must be whole, and the weights its own
                    if not isinstance(frozen.get(iid), Checklist):
                        raise ChecklistError(f"no stored checklist ({frozen.get(iid)})")
                    score = if_score_from_rows(items_of.get(iid, []), rows)
                    rating = if_rating(score)
                else:
                    vs = [Verdict(x["item_id"], x["verdict"] == "yes", x["evidence"] or "", bool(x["verifiable"]))
                          for x in rows]
                    got = score_wc(checklist_from_rows(rows), vs)
                    score, rating = got.score, got.rating
            except (ChecklistError, KeyError, ValueError) as exc:
                problems.append(f"`{name}` {d}: cannot recompute: {exc}")
                continue
            if (score, rating) != (r[f"{d}_score"], r[f"{d}_rating"]):
                problems.append(f"`{name}` {d}: stored {r[f'{d}_score']} / {r[f'{d}_rating']}, "
                                f"recomputed {score} / {rating}")
    return problems


# ----------------------------------------------------------------------------------------------------
# Best-of-N
# ----------------------------------------------------------------------------------------------------


class BestOfNConfig(dg.Config):
    by: str = "final"
    """The evaluator: ``final`` (VideoArgus), ``if``, ``wc`` or ``pq`` (FIRM-Video ratings), ``if_score`` or
    ``wc_score`` (FIRM-Video's continuous scores)."""
    weights: dict[str, float] = {}
    """A weighted mix instead of ``by``, e.g. ``{"final": 1, "if": 1}`` (each column on [0, 1] by its scale)."""
    tie_tolerance: float = 1e-9
    seed: int = 0
    """Seeds the draw that breaks a tie the continuous score leaves (the same picks on every run)."""
    human_dir: str = ""
    """Folder of ``<TASK>.csv`` human ratings; empty means the bench's (``$ARGUS_HOME/benches/<bench>/human``)."""
    n_boot: int = 2000


def best_of_n_tables(video_scores: dict[str, pl.DataFrame] | None, firm_scores: dict[str, pl.DataFrame] | None,
                     by: str | dict[str, float], *, tasks: list[str] | None = None, human: dict[str, Path] | None = None,
                     tie_tolerance: float = 1e-9, n_boot: int = 2000, seed: int = 0) -> tuple[pl.DataFrame, dict[str, str]]:
    """Picks of every task (``BEST_OF_N`` rows) and, per task, the printed table with the comparison
    against people where ``human`` has the task's ratings file. Input: stored partitions by key."""
    def of(parts, task):
        frames = [df.filter(pl.col("task") == task) for df in (parts or {}).values() if df is not None and df.height]
        frames = [f for f in frames if f.height]
        return pl.concat(frames, how="diagonal_relaxed") if frames else None

    tables, texts = [], {}
    for task in tasks or ALL_TASKS:
        vs, fs = of(video_scores, task), of(firm_scores, task)
        if vs is None and fs is None:
            continue
        table = bon.selection_table(vs, fs)
        try:
            picks = bon.select_best(table, by, tie_tolerance=tie_tolerance, seed=seed)
        except ValueError as exc:
            texts[task] = f"{task}: {exc}"
            continue
        humans = None
        if task in (human or {}):
            assert human is not None  # the task is in it
            h = bon.human_scores(human[task])
            humans = bon.against_humans(picks, h, n_boot=n_boot) if h is not None else None
        tables.append(picks.with_columns(pl.lit(task).alias("task")).select(list(BEST_OF_N)))
        texts[task] = f"{task}\n" + bon.format_best_of_n(picks, humans)
    return (pl.concat(tables) if tables else pl.DataFrame(schema=BEST_OF_N)), texts


@dg.asset(code_version="2", group_name="reports", kinds={"polars"}, metadata=volatile_metadata(BEST_OF_N_VOLATILE),
          ins={"video_scores": dg.AssetIn(metadata={"allow_missing_partitions": True}),
               "firm_scores": dg.AssetIn(metadata={"allow_missing_partitions": True})})
def best_of_n(context: dg.AssetExecutionContext, config: BestOfNConfig, video_scores: dict[str, pl.DataFrame],
              firm_scores: dict[str, pl.DataFrame], bench: BenchResource,
              storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """Per task and input, the best candidate by the configured evaluator, the margin to the
    runner-up and the ties; with human ratings, how often the pick is the humans' best and the picks'
    mean human score against random choice (95% interval)."""
    by = dict(config.weights) if config.weights else config.by
    human = bench.human_files(storage.storage(), config.human_dir)
    try:
        df, texts = best_of_n_tables(video_scores, firm_scores, by, human=human,
                                     tie_tolerance=config.tie_tolerance, n_boot=config.n_boot, seed=config.seed)
    except ValueError as exc:
        raise dg.Failure(f"best_of_n config by={config.by!r} weights={config.weights}: {exc}") from None
    return dg.Output(df, data_version=content_version(df, BEST_OF_N_VOLATILE), metadata={
        "n_inputs": df.height, "evaluator": df["evaluator"][0] if df.height else str(by),
        "n_ties": int((df["n_tied"] > 0).sum()) if df.height else 0,
        **{f"{t} best of N": dg.MetadataValue.md("```\n" + text + "\n```") for t, text in texts.items()}})


FIRM_TASK_ASSETS = [firm_checklists]
FIRM_CANDIDATE_ASSETS = [firm_evaluation]
FIRM_CHECKS = [firm_scores_recompute]
