"""The overview site: the evaluation's ``reports/index.html``, one page from which every result is found.

Per task: the leaderboard (mean final, 95% interval, n, errors, and whatever coverage and evaluator
columns the ``leaderboard`` table carries) with its bar plot; a models x dimensions heat map of mean
criterion scores; and a grid of inputs x models whose cells link to each video's report, with each
input linking to its comparison page. Then the human-alignment table and its scatter plots where
ratings exist. It is rebuilt whenever ``leaderboard`` or ``human_alignment`` materializes, each
passing its fresh table and reading the others from the stored parquet tables, so the page never
waits for a run of its own.

Like the per-video pages it is one self-contained file: images are embedded, every text goes
through :func:`argus_dagster.report.esc`, and links are relative and percent-encoded (file names
come from :func:`argus_dagster.names.file_name`, whose ``~%E7...`` must reach the server as written).
"""

from __future__ import annotations

import base64
import math
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

import polars as pl

from .alignment_plots import slug
from .storage import LOCAL, Storage, join
from .tables import stored_table
from .names import file_name
from .leaderboard import cost_summary, cost_table, coverage_text
from .report import STYLE, esc, leaderboard_png
from .settings import evaluations_root
from .rubric.taxonomy import DIMENSIONS

BASE_COLUMNS = ("task", "model", "mean_final", "ci_low", "ci_high", "n_videos", "n_errors")
ALIGNMENT_SHOWN = ("task", "dimension", "evaluator", "n_videos", "srcc", "krcc", "plcc", "pairwise_acc",
                   "within_input_srcc", "mae")
OVERVIEW_STYLE = """
nav a{margin-right:12px} h2{font-size:18px} h3{font-size:14px;margin:16px 0 6px}
table.leaderboard,table.heat,table.inputs,table.alignment,table.costs{width:auto;min-width:480px} .heat td.score{color:#1b1f24} .plot{max-width:640px;display:block;margin:8px 0}
.scatter{display:flex;flex-wrap:wrap;gap:8px} .scatter img{width:320px;border:1px solid #d0d7de}
section{border-top:1px solid #d0d7de;margin-top:24px}
"""


def href(*parts: str) -> str:
    """A relative link to ``parts`` joined, each segment percent-encoded."""
    return "/".join(quote(p, safe="") for p in parts)


def _num(x, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{float(x):.{digits}f}"


def _cell(value) -> str:
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, (list, tuple)):
        return esc(", ".join(str(v) for v in value))
    return esc("–" if value is None else value)


def _heat_colour(score: float) -> str:
    """Red (0) through yellow to green (10), light enough for dark text."""
    hue = max(0.0, min(10.0, score)) * 12.0
    return f"hsl({hue:.0f},70%,78%)"


def _png_img(data: bytes, alt: str, cls: str = "plot") -> str:
    return f'<img class="{cls}" alt="{esc(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode("ascii")}">'


def _leaderboard_table(present: set[str], task: str, lb: pl.DataFrame) -> str:
    extra = [c for c in lb.columns if c not in BASE_COLUMNS]
    head = ("<tr><th>rank</th><th>model</th><th>mean final</th><th>95% interval</th><th>n</th><th>errors</th>"
            + "".join(f"<th>{esc(c)}</th>" for c in extra) + "</tr>")
    rows = []
    for rank, r in enumerate(lb.iter_rows(named=True), start=1):
        model = str(r["model"])
        index = f"{task}/{file_name(model)}/index.html"
        name = (f'<a href="{href(task, file_name(model), "index.html")}">{esc(model)}</a>' if index in present
                else esc(model))
        ci = f"[{_num(r['ci_low'])}, {_num(r['ci_high'])}]" if r.get("ci_low") is not None else "–"
        rows.append(f'<tr data-model="{esc(model)}"><td>{rank}</td><td>{name}</td>'
                    f'<td class="score">{_num(r["mean_final"])}</td><td>{esc(ci)}</td>'
                    f'<td>{esc(r["n_videos"])}</td><td>{esc(r["n_errors"])}</td>'
                    + "".join(f"<td>{_cell(r[c])}</td>" for c in extra) + "</tr>")
    return f'<table class="leaderboard">{head}{"".join(rows)}</table>'


def _heat_map(task: str, models: list[str], criteria: pl.DataFrame | None) -> str:
    """Models x dimensions: the mean of the scored criteria of that dimension over the model's videos."""
    if criteria is None or criteria.height == 0:
        return '<p class="muted">no criterion scores stored for this task</p>'
    scored = criteria.filter((pl.col("task") == task) & pl.col("score").is_not_null())
    if scored.height == 0:
        return '<p class="muted">no criterion of this task was scored</p>'
    judges = sorted({str(j) for j in scored["judge"].drop_nulls().unique().to_list()}) if "judge" in scored.columns else []
    judged_by = f'<div class="muted judge">judged by: {esc(", ".join(judges))}</div>' if judges else ""
    means = scored.group_by("model", "dimension").agg(pl.col("score").cast(pl.Float64).mean().alias("mean"),
                                                      pl.len().alias("n"))
    cell = {(r["model"], r["dimension"]): r for r in means.iter_rows(named=True)}
    dims = sorted(means["dimension"].unique().to_list())
    head = "<tr><th>model</th>" + "".join(
        f'<th title="{esc(DIMENSIONS.get(d, d))}">d{esc(d)}<br><span class="muted">{esc(DIMENSIONS.get(d, ""))}'
        "</span></th>" for d in dims) + "</tr>"
    rows = []
    for model in models + sorted(set(means["model"].to_list()) - set(models)):
        tds = []
        for d in dims:
            c = cell.get((model, d))
            tds.append(f'<td class="score" style="background:{_heat_colour(c["mean"])}" title="{c["n"]} scores">'
                       f'{_num(c["mean"], 1)}</td>' if c else '<td class="score muted">–</td>')
        rows.append(f'<tr data-model="{esc(model)}"><td>{esc(model)}</td>{"".join(tds)}</tr>')
    return f'<table class="heat">{head}{"".join(rows)}</table>{judged_by}'


def _inputs_grid(present: set[str], task: str, models: list[str], videos: pl.DataFrame | None) -> str:
    """Inputs x models: each input links to its comparison page, each cell to that video's report."""
    if videos is None or videos.height == 0:
        return '<p class="muted">no video scores stored for this task</p>'
    g = videos.filter(pl.col("task") == task)
    final = {(r["input_id"], r["model"]): r for r in g.iter_rows(named=True)}
    head = "<tr><th>input</th>" + "".join(f"<th>{esc(m)}</th>" for m in models) + "</tr>"
    rows = []
    for iid in sorted(set(g["input_id"].to_list())):
        compare = f"{task}/compare/{file_name(iid)}.html"
        name = (f'<a class="compare" href="{href(task, "compare", file_name(iid) + ".html")}">{esc(iid)}</a>'
                if compare in present else esc(iid))
        tds = []
        for m in models:
            r = final.get((iid, m))
            page = f"{task}/{file_name(m)}/{file_name(iid)}.html"
            text = "–" if r is None else (_num(r.get("final_score")) if r.get("final_score") is not None
                                          else "error")
            title = f' title="{esc(r["error"])}"' if r and r.get("error") else ""
            tds.append(f'<td class="score"{title}><a class="report" href="{href(task, file_name(m), file_name(iid) + ".html")}">'
                       f"{esc(text)}</a></td>" if page in present else f'<td class="score"{title}>{esc(text)}</td>')
        rows.append(f"<tr><td>{name}</td>{''.join(tds)}</tr>")
    return f'<table class="inputs">{head}{"".join(rows)}</table>'


def _alignment(reports_dir: Path | str, present: set[str], alignment: pl.DataFrame | None, store: Storage) -> str:
    if alignment is None or alignment.height == 0:
        return ('<p class="muted">no human ratings: add <code>$ARGUS_HOME/benches/&lt;bench&gt;/human/&lt;TASK&gt;.csv</code> '
                "(input_id, model, score[, dimension][, rater]) and materialize <code>human_alignment</code></p>")
    cols = [c for c in ALIGNMENT_SHOWN if c in alignment.columns]
    head = "<tr>" + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr>"
    rows = "".join("<tr>" + "".join(f"<td>{_cell(r[c])}</td>" for c in cols) + "</tr>"
                   for r in alignment.iter_rows(named=True))
    plots = []
    for r in alignment.select("task", "evaluator").unique(maintain_order=True).iter_rows(named=True):
        png = f"alignment/{r['task']}/{slug(str(r['evaluator']))}.png"
        if png in present:
            plots.append(_png_img(store.read_bytes(join(reports_dir, png)), f"{r['task']} · {r['evaluator']} against human ratings", "scatter-img"))
    return (f'<table class="alignment">{head}{rows}</table>'
            + (f'<div class="scatter">{"".join(plots)}</div>' if plots else ""))


def _costs(task: str, costs: pl.DataFrame) -> str:
    """The task's VLM costs per model: prompt tokens per video and the share the server had cached."""
    g = costs.filter(pl.col("task") == task)
    if not g.height or not int(g["vlm_requests"].sum()):
        return '<p class="muted">no VLM calls recorded</p>'
    head = ("<tr><th>model</th><th>videos</th><th>prompt tokens per video</th><th>share cached</th>"
            "<th>completion tokens</th><th>requests</th><th>retries</th><th>parse retries</th><th>images</th>"
            "<th>image MB</th></tr>")
    rows = "".join(
        f'<tr data-model="{esc(r["model"])}"><td>{esc(r["model"])}</td><td>{r["n_videos"]}</td>'
        f"<td>{r['prompt_tokens_per_video']:.0f}</td><td>{_share(r['cached_share'])}</td>"
        f"<td>{r['completion_tokens']}</td><td>{r['vlm_requests']}</td><td>{r['vlm_retries']}</td>"
        f"<td>{r['vlm_parse_retries']}</td><td>{r['images_sent']}</td><td>{r['image_bytes_sent'] / 1e6:.1f}</td></tr>"
        for r in g.iter_rows(named=True))
    return f'<table class="costs">{head}{rows}</table>'


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def render_overview(reports_dir: Path, leaderboard: pl.DataFrame | None, *, criterion_scores: pl.DataFrame | None = None,
                    video_scores: pl.DataFrame | None = None, alignment: pl.DataFrame | None = None,
                    title: str = "argus-dagster results", bench: str | None = None,
                    store: Storage | None = None) -> str:
    """The overview page's HTML; links point only at pages that exist under ``reports_dir`` (a folder,
    or an ``s3://`` prefix of ``store``, listed once)."""
    store = store or LOCAL
    present = {o.rel for o in store.list(reports_dir)}
    lb = leaderboard if leaderboard is not None else pl.DataFrame(schema={c: pl.String for c in BASE_COLUMNS})
    tasks = sorted(lb["task"].unique().to_list()) if lb.height else []
    home = ('<a href="../../../index.html">all evaluations</a>'
            if evaluations_root(reports_dir) is not None else "")  # the home's index, one folder above the benches
    nav = home + "".join(f'<a href="#{esc(t)}">{esc(t)}</a>' for t in tasks) + '<a href="#alignment">human alignment</a>'
    sections = []
    costs = cost_table(video_scores)
    for task in tasks:
        g = lb.filter(pl.col("task") == task)
        models = [str(m) for m in g["model"].to_list()]
        plot = _png_img(leaderboard_png(task, g.to_dicts()), f"{task} leaderboard: mean final score and 95% interval")
        sections.append(
            f'<section id="{esc(task)}" data-task="{esc(task)}"><h2>{esc(task)}</h2>'
            f"{_leaderboard_table(present, task, g)}{plot}"
            f"<h3>Mean criterion score per dimension (0-10)</h3>{_heat_map(task, models, criterion_scores)}"
            f"<h3>Inputs (comparison page) × models (report)</h3>{_inputs_grid(present, task, models, video_scores)}"
            f"<h3>VLM costs</h3>{_costs(task, costs)}"
            "</section>")
    if not sections:
        sections.append('<p class="muted">no leaderboard yet: run <code>argus demo</code> or <code>argus evaluate</code></p>')
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = f"bench {esc(bench)}; " if bench else ""
    total = cost_summary(costs)
    if total["prompt_tokens"]:
        where += (f'<span class="costs-total">prompt tokens per video {total["prompt_tokens_per_video"]:.0f}, '
                  f'share cached {_share(total["cached_share"])}</span>; ')
    body = (f"<h1>{esc(title)}</h1><div class=\"muted\">{where}updated {esc(stamp)}; mean final score 0-10 with a "
            f"bootstrap 95% interval over videos; n videos scored, errors not scored</div><nav>{nav}</nav>"
            + "".join(sections)
            + f'<section id="alignment"><h2>Human alignment</h2>{_alignment(reports_dir, present, alignment, store)}</section>')
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{STYLE}{OVERVIEW_STYLE}</style></head><body>{body}</body></html>\n")


def write_overview(reports_dir: Path | str, storage_dir: Path | str, *, leaderboard: pl.DataFrame | None = None,
                   alignment: pl.DataFrame | None = None, bench: str | None = None,
                   store: Storage | None = None) -> Path:
    """Write ``reports_dir/index.html`` whole; what is not passed is read from ``storage_dir``
    (folders, or ``s3://`` prefixes of ``store``).

    Raises :class:`argus_dagster.files.WriteError` when the page cannot be written."""
    store = store or LOCAL
    if leaderboard is None:
        leaderboard = stored_table(storage_dir, "leaderboard", store)
    if alignment is None:
        alignment = stored_table(storage_dir, "human_alignment", store)
    page = render_overview(reports_dir, leaderboard, criterion_scores=stored_table(storage_dir, "criterion_scores", store),
                           video_scores=stored_table(storage_dir, "video_scores", store), alignment=alignment,
                           bench=bench, store=store)
    return store.write_bytes(join(reports_dir, "index.html"), page)


# ----------------------------------------------------------------------------------------------------
# The index of every evaluation of an ARGUS_HOME (``$ARGUS_HOME/benches/index.html``)
# ----------------------------------------------------------------------------------------------------


def render_evaluations_index(root: Path) -> str:
    """Every evaluation under ``root`` (``$ARGUS_HOME/benches``): bench and profile, linked to its
    overview; when it was last evaluated; its tasks, models and videos scored; what its scores
    cover and which judge; and each task's leading model."""
    import json

    rows = []
    for record_file in sorted(Path(root).glob("*/*/evaluation.json")):
        try:
            rec = json.loads(record_file.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(rec, dict):
            continue
        folder = record_file.parent
        lb = stored_table(folder / "storage", "leaderboard")
        overview = folder / "reports" / "index.html"
        name = f"{rec.get('bench', folder.parent.name)} / {rec.get('profile', folder.name)}"
        link = (f'<a href="{href(folder.parent.name, folder.name, "reports", "index.html")}">{esc(name)}</a>'
                if overview.is_file() else esc(name))
        when = rec.get("last_evaluated")
        when = (datetime.fromtimestamp(float(when), timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
                if when else "never scored")
        if lb is not None and lb.height:
            lb = lb.sort("mean_final", descending=True, nulls_last=True)
            leaders = "; ".join(f"{esc(t)}: {esc(g['model'][0])} {g['mean_final'][0]:.2f}"
                                for (t,), g in sorted(lb.group_by("task"), key=lambda kv: kv[0][0])
                                if g["mean_final"][0] is not None)
            covers = sorted({coverage_text(r.get("n_scored"), r.get("n_criteria"), r.get("judge"))
                             for r in lb.iter_rows(named=True) if "n_criteria" in lb.columns})
            facts = (f"{lb['task'].n_unique()} tasks, {lb['model'].n_unique()} models, "
                     f"{int(lb['n_videos'].sum() or 0)} videos scored, {int(lb['n_errors'].sum() or 0)} errors")
        else:
            leaders, covers, facts = "", [], "no leaderboard yet"
        rows.append(f'<tr data-bench="{esc(rec.get("bench", ""))}" data-profile="{esc(rec.get("profile", ""))}">'
                    f"<td>{link}</td><td>{esc(when)}</td><td>{esc(facts)}</td>"
                    f"<td>{'<br>'.join(esc(c) for c in covers[:3])}</td><td>{leaders}</td>"
                    f'<td class="muted">{esc(str(rec.get("bench_dir", "")))}</td></tr>')
    table = ('<table class="leaderboard"><tr><th>bench / profile</th><th>last evaluated</th><th>what</th>'
             "<th>scores cover</th><th>leading model per task (mean final 0-10)</th><th>bench folder</th></tr>"
             + "".join(rows) + "</table>") if rows else (
        '<p class="muted">no evaluation yet: run <code>argus demo</code> or <code>argus evaluate</code></p>')
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = "argus-dagster evaluations"
    body = (f"<h1>{esc(title)}</h1><div class=\"muted\">every bench and evaluator profile of this home; updated "
            f"{esc(stamp)}. Each evaluation has its own tables, reports and Dagster instance.</div>{table}")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{STYLE}{OVERVIEW_STYLE}</style></head><body>{body}</body></html>\n")


def write_evaluations_index(root: Path) -> Path:
    """Write ``root/index.html`` (``root``: ``$ARGUS_HOME/benches``) whole."""
    return LOCAL.write_bytes(join(root, "index.html"), render_evaluations_index(root))
