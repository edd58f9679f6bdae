"""The overview site: the evaluation's ``reports/index.html``, one page from which every result is found.

Per task: the leaderboard (rank and its 95% interval, mean final, 95% interval, n, errors, the model
below that beats a row on most shared inputs, and whatever coverage and evaluator columns the
``leaderboard`` table carries; which models share the top, and whether the ranking rests on partial
evidence) with its bar plot; a models x dimensions heat map of mean
criterion scores and each model's dimension profile (inline SVG, readable in print and from a file);
a pairwise win-rate matrix, each cell linking to the pair's comparison page where the site wrote it
(:mod:`argus_dagster.outputs.compare_pages`); and a grid of inputs x models whose cells link to each
video's report, with each input linking to its comparison page. Then the human-alignment table and its scatter plots where
ratings exist. It is rebuilt whenever ``leaderboard`` or ``human_alignment`` materializes, each
passing its fresh table and reading the others from the stored parquet tables, so the page never
waits for a run of its own.

Like the per-video pages it is one self-contained file: images are embedded, every text goes
through :func:`argus_dagster.outputs.report.esc`, and links are relative and percent-encoded (file names
come from :func:`argus_dagster.infra.names.file_name`, whose ``~%E7...`` must reach the server as written).
"""

from __future__ import annotations

import base64
import json
import math
import textwrap
from datetime import datetime, timezone
from pathlib import Path
from typing import cast

import numpy as np
import polars as pl

from argus_dagster.infra.names import file_name
from argus_dagster.infra.settings import evaluations_root
from argus_dagster.infra.storage import LOCAL, Storage, join
from argus_dagster.infra.tables import stored_table
from argus_dagster.method.controls import KIND_NAMES, controls_sentence
from argus_dagster.method.leaderboard import (
    competition_ranks,
    dimension_leaders,
    dimension_ranking,
    noise_text,
    pairwise_win_rates,
    partial_evidence_text,
    rank_text,
    ranking_text,
    rests_on_partial_evidence,
    top_models,
    usual_coverage,
)
from argus_dagster.method.ledger import cost_summary, cost_table, share_text
from argus_dagster.method.rubric.taxonomy import DIMENSIONS
from argus_dagster.outputs.changes import STYLE as CHANGES_STYLE
from argus_dagster.outputs.changes import changes_section
from argus_dagster.outputs.deltas import Diff
from argus_dagster.outputs.history_words import evaluator_label
from argus_dagster.outputs.protocol_sections import best_of_n_section, firm_section, vefx_section
from argus_dagster.outputs.report import STYLE, esc, href, score_colour
from argus_dagster.protocols.alignment.plots import slug

BASE_COLUMNS = ("task", "model", "mean_final", "ci_low", "ci_high", "n_videos", "n_errors")
# Shown once per task (coverage as one cell, the judge and the criteria that need a VLM below the
# table, bench and profile in the page's header, the dimension means in the heat map and, where no
# overall leader is named, in the ranking per dimension above the table) rather than as a column each.
SHOWN_ELSEWHERE = ("bench", "profile", "n_scored", "n_criteria", "weight_scored", "judge", "needs_vlm", "ci_scope",
                   "covers", "dimensions", "dimension_means", "judge_sd", "rank_holds_under_noise")
# The rank, its 95% interval and the pairwise contradiction have columns of their own; which models share
# the top and whether the ranking rests on partial evidence are said below the table.
RANK_COLUMNS = ("rank", "rank_low", "rank_high", "shares_top", "loses_to", "partial_evidence", "not_judged")
# The alignment table's columns: (stored column, header a person reads); a figure with a bootstrap
# interval (``<col>_lo``, ``<col>_hi``) shows it under its value.
ALIGNMENT_SHOWN = (("task", "task"), ("dimension", "human dimension"), ("evaluator", "evaluator"),
                   ("n_videos", "videos"), ("srcc", "SRCC"), ("krcc", "KRCC"), ("plcc", "PLCC"), ("rmse", "RMSE"),
                   ("pairwise_acc", "pairwise accuracy"), ("within_input_srcc", "within-input SRCC"), ("mae", "MAE"))
OVERVIEW_STYLE = """
nav a{margin-right:12px} h2{font-size:18px} h3{font-size:14px;margin:16px 0 6px}
table.dimension-ranking,table.leaderboard,table.heat,table.inputs,table.alignment,table.winrate,table.costs,table.best-of-n,table.firm,table.vefx{width:auto;min-width:480px} .heat td.score{color:#1b1f24} .plot{max-width:640px;display:block;margin:8px 0}
.scatter{display:flex;flex-wrap:wrap;gap:8px} .scatter img{width:320px;border:1px solid #d0d7de}
section{border-top:1px solid #d0d7de;margin-top:24px}
table.sortable th{cursor:pointer;user-select:none} table.sortable th[aria-sort=ascending]::after{content:" ▲"}
table.sortable th[aria-sort=descending]::after{content:" ▼"} td.num{text-align:right;font-variant-numeric:tabular-nums}
svg.plot,svg.heatmap{max-width:100%;height:auto;display:block;margin:8px 0;font:12px system-ui,sans-serif}
.profiles{display:flex;flex-wrap:wrap;gap:12px} svg.profile{font:11px system-ui,sans-serif;border:1px solid #e1e4e8}
details.numbers{margin:4px 0 8px} svg{break-inside:avoid}
.facts{margin:4px 0 8px} .facts b{font-weight:600}
ul.what-changed{margin:4px 0 8px} ul.what-changed .before{color:#57606a}
@media print{nav,.no-print,details.numbers{display:none} section{break-inside:avoid} body{margin:0;max-width:none}
 svg text{fill:#000}}
"""

# Click a header of a ``table.sortable`` to order its rows by that column (numbers by value, from a
# cell's ``data-sort`` where it has one; again to reverse). Inline, so the page stays one file.
SORT_SCRIPT = """
document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.title = 'click to sort';
  th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0];
    var i = Array.prototype.indexOf.call(th.parentNode.children, th);
    var asc = th.getAttribute('aria-sort') !== 'ascending';
    table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
    function key(row) {
      var c = row.cells[i], v = !c ? '' : (c.hasAttribute('data-sort') ? c.getAttribute('data-sort') : c.textContent.trim());
      return v !== '' && isFinite(v) ? parseFloat(v) : v.toLowerCase();
    }
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      if (typeof x !== typeof y) { return typeof x === 'number' ? -1 : 1; }  // a missing value stays last
      return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""


def _num(x, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{float(x):.{digits}f}"


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _cell(value) -> str:
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, (list, tuple)):
        return esc(", ".join(str(v) for v in value))
    return esc("–" if value is None else value)


def _png_img(data: bytes, alt: str, cls: str = "plot") -> str:
    return f'<img class="{cls}" alt="{esc(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode("ascii")}">'


def _sort_value(x) -> str:
    """A cell's ``data-sort``: the number itself, empty when there is none (sorted last)."""
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else repr(float(x))


def coverage_cell(r: dict, judge_shown: bool = False) -> str:
    """``3 of 8 criteria on most videos · 29% of the weight · evidence-only``: what a model's score
    covers in whole criteria (a table stored before ``covers`` was kept: the means, ``3 of 9.7``; the
    judge left out where the page says it once for the task)."""
    if not r.get("n_criteria"):
        return "–"

    def num(x) -> str:
        return f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"

    text = r.get("covers") or f"{num(r.get('n_scored') or 0)} of {num(r['n_criteria'])} criteria"
    if r.get("weight_scored") is not None:
        text += f" · {r['weight_scored']:.0%} of the weight"
    return text + (f" · {r['judge']}" if r.get("judge") and not judge_shown else "")


def _leaderboard_table(present: set[str], task: str, lb: pl.DataFrame) -> str:
    """Rank, model, score with its 95% interval, videos, errors, coverage in one cell, and any column
    the table has beyond those, under readable headers; then the task's judge and the criteria only a
    VLM could score, once."""
    judges = sorted({str(j) for j in lb["judge"].drop_nulls().to_list()}) if "judge" in lb.columns else []
    one_judge = len(judges) == 1
    has_coverage = "n_criteria" in lb.columns
    extra = [c for c in lb.columns if c not in BASE_COLUMNS and c not in SHOWN_ELSEWHERE and c not in RANK_COLUMNS]
    has_interval = "rank_low" in lb.columns
    has_losses = "loses_to" in lb.columns and lb["loses_to"].drop_nulls().len() > 0
    has_noise = "judge_sd" in lb.columns and lb["judge_sd"].drop_nulls().len() > 0
    stored = lb["rank"].to_list() if "rank" in lb.columns else [None] * lb.height
    means = [float("nan") if m is None else float(m) for m in lb["mean_final"].to_list()] if lb.height else []
    # a table stored without ranks
    computed: np.ndarray | list[float] = competition_ranks(np.array(means, dtype=float)) if means else []
    ranks = [s if s is not None else (None if math.isnan(c) else int(c)) for s, c in zip(stored, computed)]
    head = ("<thead><tr><th>rank</th>" + ("<th>95% rank</th>" if has_interval else "")
            + "<th>model</th><th>score</th><th>95% interval</th><th>videos</th><th>errors</th>"
            + ("<th>covers</th>" if has_coverage else "") + ("<th>loses to</th>" if has_losses else "")
            + ("<th>judge's noise</th>" if has_noise else "")
            + "".join(f"<th>{esc(c.replace('_', ' '))}</th>" for c in extra) + "</tr></thead>")
    partial = rests_on_partial_evidence(lb.to_dicts())
    rows = []
    for rank, r in zip(ranks, lb.iter_rows(named=True)):
        model = str(r["model"])
        shown = "–" if rank is None else (f'<span title="the overall rank, on partial evidence: not a verdict">({rank})</span>'
                                          if partial else str(rank))
        index = f"{task}/{file_name(model)}/index.html"
        name = (f'<a href="{href(task, file_name(model), "index.html")}">{esc(model)}</a>' if index in present
                else esc(model))
        ci = f"[{_num(r['ci_low'])}, {_num(r['ci_high'])}]" if r.get("ci_low") is not None else "–"
        rows.append(f'<tr data-model="{esc(model)}"><td class="num rank" data-sort="{_sort_value(rank)}">{shown}</td>'
                    + (f'<td class="num" data-sort="{_sort_value(r.get("rank_low"))}">{esc(rank_text(r))}</td>'
                       if has_interval else "") + f'<td>{name}</td>'
                    f'<td class="score num" data-sort="{_sort_value(r["mean_final"])}">{_num(r["mean_final"])}</td>'
                    f'<td class="num" data-sort="{_sort_value(r.get("ci_low"))}">{esc(ci)}</td>'
                    f'<td class="num">{esc(r["n_videos"])}</td><td class="num">{esc(r["n_errors"])}</td>'
                    + (f'<td data-sort="{_sort_value(r.get("weight_scored"))}">{esc(coverage_cell(r, one_judge))}</td>'
                       if has_coverage else "")
                    + (f'<td class="loses-to">{esc(r.get("loses_to") or "–")}</td>' if has_losses else "")
                    + (f'<td class="judge-noise" data-sort="{_sort_value(r.get("judge_sd"))}">{esc(_noise_cell(r))}</td>'
                       if has_noise else "")
                    + "".join(f"<td>{_cell(r[c])}</td>" for c in extra) + "</tr>")
    notes = []
    top = top_models(lb.to_dicts())
    evidence = partial_evidence_text(lb.to_dicts())
    lead = ""
    if partial:  # no crowned leader: the ranking per measured dimension leads, the overall rank is marked
        ranking = dimension_ranking(lb.to_dicts())
        lead = (f'<div class="no-leader"><p><b>No overall leader</b>: <span class="partial-evidence">{esc(evidence)}</span>.'
                + (" Per measured dimension (mean criterion score, best first):</p>" if ranking else "</p>")
                + ('<table class="dimension-ranking"><thead><tr><th>dimension</th><th>leads</th><th>ranking</th></tr></thead>'
                   "<tbody>" + "".join(f'<tr data-dimension="{d}"><td>{d} {esc(name)}</td>'
                                       f'<td class="leads">{esc(", ".join(dimension_leaders(r)))}</td>'
                                       f'<td class="ranking">{esc(ranking_text(r))}</td></tr>' for d, name, r in ranking)
                   + "</tbody></table>" if ranking else "") + "</div>")
        notes.append("(rank): the overall rank, on partial evidence: not a verdict")
    elif len(top) > 1:
        notes.append(f"no single leader: <b>{esc(', '.join(top))}</b> share the top (rank 1 within their 95% rank interval)")
    if one_judge:
        notes.append(f"judged by <b>{esc(judges[0])}</b>")
    if "ci_scope" in lb.columns and "scored criteria only" in lb["ci_scope"].to_list():
        notes.append("scores and intervals cover the scored criteria only")
    needs = sorted({c for v in (lb["needs_vlm"].to_list() if "needs_vlm" in lb.columns else []) for c in (v or [])})
    facts = f'<div class="muted facts">{"; ".join(notes)}</div>' if notes else ""
    noise = noise_text(lb.to_dicts())
    if noise:
        facts += f'<p class="judge-noise muted">{esc(noise)}</p>'

    if needs:
        facts += (f'<details class="facts"><summary>{len(needs)} criteria need a VLM judge (not scored here)</summary>'
                  f'<div class="muted">{esc(", ".join(needs))}</div></details>')
    return f'{lead}<table class="leaderboard sortable">{head}<tbody>{"".join(rows)}</tbody></table>{facts}'


def _noise_cell(r: dict) -> str:
    """A model's judge noise as its row shows it: ``sd 0.41, rank holds``; ``not measured``."""
    if r.get("judge_sd") is None:
        return "not measured"
    holds = r.get("rank_holds_under_noise")
    return f"sd {r['judge_sd']:.2f}" + ("" if holds is None else ", rank holds" if holds else ", rank does not hold")


def interval_svg(task: str, rows: list[dict], width: int = 640) -> str:
    """The task's leaderboard as an inline SVG (sharp at any size, and in print): per model a bar to
    its mean final score (0-10) with its 95% interval, the score beside it."""
    row_h, top, left, right = 24, 34, 180, 52
    height = top + row_h * max(len(rows), 1) + 8
    scale = (width - left - right) / 10.0
    parts = [f'<svg class="plot" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{esc(task)}: mean final score and 95% interval</title>']
    for t in range(0, 11, 2):
        x = left + t * scale
        parts.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 4}" stroke="#e1e4e8"/>'
                     f'<text x="{x:.1f}" y="{top - 12}" text-anchor="middle" fill="#5b6570">{t}</text>')
    for i, r in enumerate(rows):
        y = top + i * row_h
        name = str(r["model"])
        short = name if len(name) <= 26 else name[:25] + "…"
        parts.append(f'<text x="{left - 8}" y="{y + 16}" text-anchor="end" fill="#1b1f24"><title>{esc(name)}</title>'
                     f"{esc(short)}</text>")
        mean = r.get("mean_final")
        if mean is None:
            parts.append(f'<text x="{left + 4}" y="{y + 16}" fill="#b42318">no score</text>')
            continue
        parts.append(f'<rect x="{left}" y="{y + 5}" width="{max(0.0, mean) * scale:.1f}" height="{row_h - 10}" '
                     f'fill="#4a7bd0" fill-opacity="0.75"/>')
        lo, hi = r.get("ci_low"), r.get("ci_high")
        if lo is not None and hi is not None:
            yc, xl, xh = y + row_h / 2, left + lo * scale, left + hi * scale
            parts.append(f'<path d="M{xl:.1f} {yc}H{xh:.1f}M{xl:.1f} {yc - 5}V{yc + 5}M{xh:.1f} {yc - 5}V{yc + 5}" '
                         'stroke="#1b1f24" fill="none"/>')
        parts.append(f'<text x="{left + 10 * scale + 6:.1f}" y="{y + 16}" fill="#1b1f24">{mean:.2f}</text>')
    return "".join(parts) + "</svg>"


def dimension_means(task: str, criteria: pl.DataFrame | None) -> pl.DataFrame | None:
    """Per model and dimension of ``task``: the mean of its scored criteria over the model's videos
    (``mean``) and how many scores that is (``n``); None where nothing of the task was scored."""
    if criteria is None or criteria.height == 0:
        return None
    scored = criteria.filter((pl.col("task") == task) & pl.col("score").is_not_null())
    if scored.height == 0:
        return None
    return scored.group_by("model", "dimension").agg(pl.col("score").cast(pl.Float64).mean().alias("mean"),
                                                     pl.len().alias("n"))


def label_lines(name: str, width: int = 11) -> list[str]:
    """``name`` over lines of about ``width`` characters, broken at spaces, hyphens and after a ``/``
    ("visual/", "frame", "quality"); a longer word is split, never cut."""
    return [line.replace("/ ", "/") for line in textwrap.wrap(name.replace("/", "/ "), width, break_long_words=True)] or [""]


def heat_svg(task: str, models: list[str], means: pl.DataFrame, cell_w: int = 62, row_h: int = 26) -> str:
    """Models (rows, best first) x dimensions (columns) as an inline SVG: each cell coloured by the
    mean criterion score (red 0, yellow 5, green 10) with the number in it, a legend below. Each
    cell is a ``g.cell`` with ``data-model``, ``data-dimension`` and ``data-mean`` (empty: unscored)."""
    cell = {(r["model"], r["dimension"]): r for r in means.iter_rows(named=True)}
    dims = sorted(means["dimension"].unique().to_list())
    rows = models + sorted(set(means["model"].to_list()) - set(models))
    # Every label whole: a dimension's name wrapped over lines under its number, the model column as
    # wide as its longest name (about 7 px a character at the page's size).
    names = {d: label_lines(DIMENSIONS.get(d, "")) for d in dims}
    lines = max(len(v) for v in names.values()) if names else 1
    left = max(180, 7 * max((len(m) for m in rows), default=0) + 16)
    top = 34 + 11 * lines
    width = left + cell_w * len(dims) + 10
    grid_h = row_h * len(rows)
    height = top + grid_h + 40
    parts = [f'<svg class="heatmap" role="img" viewBox="0 0 {width} {height}" '
             f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
             f"<title>{esc(task)}: mean criterion score per model and dimension (0-10)</title>"]
    for k, d in enumerate(dims):
        x = left + k * cell_w + cell_w / 2
        name = DIMENSIONS.get(d, "")
        spans = "".join(f'<tspan x="{x:.1f}" dy="{0 if j == 0 else 11}">{esc(part)}</tspan>'
                        for j, part in enumerate(names[d]))
        parts.append(f'<text x="{x:.1f}" y="{top - 12 - 11 * lines}" text-anchor="middle" font-weight="600" fill="#1b1f24">'
                     f"<title>d{esc(d)}: {esc(name)}</title>d{esc(d)}</text>"
                     f'<text class="dimension-name" x="{x:.1f}" y="{top - 8 - 11 * (lines - 1)}" text-anchor="middle" '
                     f'font-size="10" fill="#5b6570"><title>{esc(name)}</title>{spans}</text>')
    for i, model in enumerate(rows):
        y = top + i * row_h
        parts.append(f'<text class="model-name" x="{left - 8}" y="{y + row_h / 2 + 4:.1f}" text-anchor="end" '
                     f'fill="#1b1f24"><title>{esc(model)}</title>{esc(model)}</text>')
        for k, d in enumerate(dims):
            x = left + k * cell_w
            c = cell.get((model, d))
            label = f"{model} · d{d} {DIMENSIONS.get(d, '')}: " + (
                f"{c['mean']:.2f} over {c['n']} scores" if c else "not scored")
            fill = score_colour(c["mean"]) if c else "#f3f4f6"
            text = _num(c["mean"], 1) if c else "–"
            parts.append(f'<g class="cell" data-model="{esc(model)}" data-dimension="{esc(d)}" '
                         f'data-mean="{"" if c is None else repr(float(c["mean"]))}"><title>{esc(label)}</title>'
                         f'<rect x="{x + 1}" y="{y + 1}" width="{cell_w - 2}" height="{row_h - 2}" fill="{fill}"/>'
                         f'<text x="{x + cell_w / 2:.1f}" y="{y + row_h / 2 + 4:.1f}" text-anchor="middle" '
                         f'fill="#1b1f24">{esc(text)}</text></g>')
    ly = top + grid_h + 14
    parts.append(f'<text x="{left - 8}" y="{ly + 11}" text-anchor="end" fill="#5b6570">mean score</text>')
    for k, v in enumerate(range(0, 11, 2)):
        x = left + k * 40
        parts.append(f'<rect x="{x}" y="{ly}" width="38" height="14" fill="{score_colour(v)}"/>'
                     f'<text x="{x + 19}" y="{ly + 11}" text-anchor="middle" font-size="10" fill="#1b1f24">{v}</text>')
    return "".join(parts) + "</svg>"


def profile_svg(model: str, means: pl.DataFrame, bars: int = 142) -> str:
    """One model's dimension profile as a small inline SVG: a bar per dimension to its mean criterion
    score (0-10, ``bars`` px at 10), coloured as the heat map, the number beside it; every label whole
    (the label column as wide as its longest, about 6 px a character); ``data-model`` names the model."""
    mine = {r["dimension"]: r for r in means.filter(pl.col("model") == model).iter_rows(named=True)}
    dims = sorted(means["dimension"].unique().to_list())
    labels = {d: f"d{d} {DIMENSIONS.get(d, '')}".strip() for d in dims}
    row_h, top, right = 16, 22, 30
    left = max(128, 6 * max((len(t) for t in labels.values()), default=0) + 12)
    width = max(left + bars + right, 7 * len(model) + 12)
    height = top + row_h * len(dims) + 6
    scale = bars / 10.0
    parts = [f'<svg class="profile" role="img" data-model="{esc(model)}" viewBox="0 0 {width} {height}" '
             f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
             f"<title>{esc(model)}: mean criterion score per dimension (0-10)</title>"
             f'<text x="6" y="14" font-weight="600" fill="#1b1f24">{esc(model)}</text>']
    for t in (0, 5, 10):
        x = left + t * scale
        parts.append(f'<line x1="{x:.1f}" y1="{top - 2}" x2="{x:.1f}" y2="{height - 4}" stroke="#e1e4e8"/>')
    for i, d in enumerate(dims):
        y = top + i * row_h
        name = labels[d]
        parts.append(f'<text x="{left - 6}" y="{y + 11}" text-anchor="end" fill="#5b6570"><title>{esc(name)}</title>'
                     f"{esc(name)}</text>")
        c = mine.get(d)
        if c is None:
            parts.append(f'<text x="{left + 4}" y="{y + 11}" fill="#5b6570" class="unscored">–</text>')
            continue
        parts.append(f'<rect class="bar" data-dimension="{esc(d)}" data-mean="{float(c["mean"])!r}" x="{left}" '
                     f'y="{y + 3}" width="{max(0.0, c["mean"]) * scale:.1f}" height="{row_h - 5}" '
                     f'fill="{score_colour(c["mean"])}" stroke="#8c959f" stroke-width="0.5">'
                     f"<title>{esc(name)}: {c['mean']:.2f} over {c['n']} scores</title></rect>"
                     f'<text x="{left + 10 * scale + 4:.1f}" y="{y + 11}" fill="#1b1f24">{_num(c["mean"], 1)}</text>')
    return "".join(parts) + "</svg>"


def _heat_map(task: str, models: list[str], criteria: pl.DataFrame | None) -> str:
    """Models x dimensions: the mean of the scored criteria of that dimension over the model's videos,
    as a vector heat map, its numbers as a sortable table below it, and each model's dimension
    profile."""
    if criteria is None or criteria.height == 0:
        return '<p class="muted">no criterion scores stored for this task</p>'
    means = dimension_means(task, criteria)
    if means is None:
        return '<p class="muted">no criterion of this task was scored</p>'
    scored = criteria.filter((pl.col("task") == task) & pl.col("score").is_not_null())
    judges = sorted({str(j) for j in scored["judge"].drop_nulls().unique().to_list()}) if "judge" in scored.columns else []
    judged_by = f'<div class="muted judge">judged by: {esc(", ".join(judges))}</div>' if judges else ""
    cell = {(r["model"], r["dimension"]): r for r in means.iter_rows(named=True)}
    dims = sorted(means["dimension"].unique().to_list())
    head = "<thead><tr><th>model</th>" + "".join(
        f'<th>d{esc(d)}<br><span class="muted">{esc(DIMENSIONS.get(d, ""))}'
        "</span></th>" for d in dims) + "</tr></thead>"
    rows = []
    every = models + sorted(set(means["model"].to_list()) - set(models))
    for model in every:
        tds = []
        for d in dims:
            c = cell.get((model, d))
            tds.append(f'<td class="score" style="background:{score_colour(c["mean"])}" title="{c["n"]} scores">'
                       f'{_num(c["mean"], 1)}</td>' if c else '<td class="score muted">–</td>')
        rows.append(f'<tr data-model="{esc(model)}"><td>{esc(model)}</td>{"".join(tds)}</tr>')
    table = f'<table class="heat sortable">{head}<tbody>{"".join(rows)}</tbody></table>'
    profiles = "".join(profile_svg(m, means) for m in every)
    return (f"{heat_svg(task, models, means)}{judged_by}"
            f'<details class="numbers"><summary>the same as a table (click a header to sort)</summary>{table}</details>'
            f'<h3>Dimension profile per model (mean criterion score, 0-10)</h3><div class="profiles">{profiles}</div>')


WIN_MATRIX_MODELS = 20  # the matrix's models, best ranked first: the page stays linear in the models


def _controls(task: str, controls: pl.DataFrame | None) -> str:
    """What this evaluator tells apart on ``task``: per control kind, how many controls were scored, the
    share that scored below their original and the criteria that caught them; a sentence above."""
    rows = controls.filter(pl.col("task") == task) if controls is not None and controls.height else None
    if rows is None or not rows.height:
        return ""
    sentence = controls_sentence(rows) or ""
    body = "".join(f'<tr data-control="{esc(r["control"])}"><td>{esc(KIND_NAMES.get(r["control"], r["control"]))}</td>'
                   f'<td class="num n">{esc(r["n"])}</td><td class="num caught">{r["caught_share"]:.0%}</td>'
                   f'<td class="criteria">{esc(r["criteria"] or "–")}</td></tr>' for r in rows.iter_rows(named=True))
    judges = sorted({str(j) for j in rows["judge"].drop_nulls().to_list()})
    return (f'<div class="controls"><h3>What this evaluator tells apart</h3><p class="controls-sentence">{esc(sentence)}'
            + (f' <span class="muted">(judged by {esc(", ".join(judges))})</span>' if judges else "") + "</p>"
            '<table class="controls"><thead><tr><th>control (made from the model\'s own videos)</th><th>n</th>'
            "<th>scored half a point or more below its original</th><th>criteria that caught it</th></tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def _win_matrix(task: str, models: list[str], videos: pl.DataFrame | None,
                pair_pages: dict[tuple[str, str], str] | None = None) -> str:
    """Models x models: how often the row's video scores above the column's on the inputs both have
    (a tie counts half), with its 95% interval and the number of shared inputs. Of the
    :data:`WIN_MATRIX_MODELS` best ranked (``models`` in the leaderboard's order), said above it when
    there are more: a matrix of every pair would grow with the square of the models. ``pair_pages``:
    the pairs' comparison pages written (keyed by the two names sorted, each its path under the
    reports folder); a cell of such a pair, either way round, links to its page."""
    left_out = len(models) - WIN_MATRIX_MODELS
    models = models[:WIN_MATRIX_MODELS]
    rates = pairwise_win_rates(videos, task, models) if videos is not None else {}
    if not rates:
        return '<p class="muted">no two models share a scored input of this task</p>'
    note = (f'<p class="muted win-note">the {WIN_MATRIX_MODELS} best-ranked models of {WIN_MATRIX_MODELS + left_out}; '
            "each model's row in the leaderboard names the one below it that beats it</p>" if left_out > 0 else "")
    head = "<tr><th>beats →</th>" + "".join(f"<th>{esc(m)}</th>" for m in models) + "</tr>"
    rows = []
    for a in models:
        tds = []
        for b in models:
            r = rates.get((a, b))
            if r is None:
                tds.append('<td class="score muted">–</td>')
                continue
            title = (f"{a} scores above {b} on {r['rate']:.0%} of {r['n']} shared inputs "
                     f"(95% interval {r['low']:.0%}-{r['high']:.0%})")
            page = (pair_pages or {}).get((a, b) if a <= b else (b, a))
            rate = (f'<a class="compare-pair" href="{href(*page.split("/"))}">{r["rate"]:.0%}</a>' if page
                    else f'{r["rate"]:.0%}')
            tds.append(f'<td class="score" data-model="{esc(b)}" style="background:{score_colour(10 * r["rate"])}" '
                       f'title="{esc(title)}">{rate}<br><span class="muted">[{r["low"]:.0%}, {r["high"]:.0%}] '
                       f'n={r["n"]}</span></td>')
        rows.append(f'<tr data-model="{esc(a)}"><th>{esc(a)}</th>{"".join(tds)}</tr>')
    return f'{note}<table class="winrate">{head}{"".join(rows)}</table>'


def _inputs_grid(present: set[str], task: str, models: list[str], videos: pl.DataFrame | None) -> str:
    """Inputs x models: each input links to its comparison page, each cell to that video's report."""
    if videos is None or videos.height == 0:
        return '<p class="muted">no video scores stored for this task</p>'
    g = videos.filter(pl.col("task") == task)
    final = {(r["input_id"], r["model"]): r for r in g.iter_rows(named=True)}
    head = "<thead><tr><th>input</th>" + "".join(f"<th>{esc(m)}</th>" for m in models) + "</tr></thead>"
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
    return f'<table class="inputs sortable">{head}<tbody>{"".join(rows)}</tbody></table>'


def _alignment(reports_dir: Path | str, present: set[str], alignment: pl.DataFrame | None, store: Storage) -> str:
    if alignment is None or alignment.height == 0:
        return ('<p class="muted">no human ratings: add <code>$ARGUS_HOME/benches/&lt;bench&gt;/human/&lt;TASK&gt;.csv</code> '
                "(input_id, model, score[, dimension][, rater]) and materialize <code>human_alignment</code></p>")
    cols = [(c, name) for c, name in ALIGNMENT_SHOWN if c in alignment.columns]
    head = "<tr>" + "".join(f"<th>{esc(name)}</th>" for _, name in cols) + "</tr>"

    def cell(r: dict, c: str) -> str:
        lo, hi = r.get(f"{c}_lo"), r.get(f"{c}_hi")
        interval = (f'<br><span class="muted interval">[{_num(lo)}, {_num(hi)}]</span>'
                    if _finite(lo) and _finite(hi) and _finite(r[c]) else "")
        return f'<td data-key="{c}">{_cell(r[c])}{interval}</td>'

    rows = "".join(f'<tr data-task="{esc(r.get("task", ""))}" data-evaluator="{esc(r["evaluator"])}" '
                   f'data-dimension="{esc(r["dimension"])}">' + "".join(cell(r, c) for c, _ in cols) + "</tr>"
                   for r in alignment.iter_rows(named=True))
    plots = []
    for r in alignment.select("task", "evaluator").unique(maintain_order=True).iter_rows(named=True):
        png = f"alignment/{r['task']}/{slug(str(r['evaluator']))}.png"
        if png in present:
            plots.append(_png_img(store.read_bytes(join(reports_dir, png)), f"{r['task']} · {r['evaluator']} against human ratings", "scatter-img"))
    said = ('<p class="muted">Per task, human dimension and evaluator, over the videos people rated and the '
            "evaluator scored: rank correlations (SRCC, KRCC), PLCC and RMSE after a four-parameter logistic "
            "fit, pairwise accuracy within an input; under each figure its bootstrap 95% interval over "
            "inputs. Every figure of the three papers: the human_alignment asset's table.</p>")
    return (said + f'<table class="alignment">{head}{rows}</table>'
            + (f'<div class="scatter">{"".join(plots)}</div>' if plots else ""))


def _costs(task: str, costs: pl.DataFrame) -> str:
    """The task's rows of the cost ledger, one per stage and model (rubric generation and FIRM's
    checklists have no model): requests, request-seconds, prompt tokens (per video where the stage
    scores videos) and the share the server had cached."""
    g = costs.filter(pl.col("task") == task)
    if not g.height or not int(g["vlm_requests"].sum()):
        return '<p class="muted">no VLM calls recorded</p>'
    head = ("<tr><th>stage</th><th>model</th><th>videos</th><th>requests</th><th>request-seconds</th>"
            "<th>prompt tokens</th><th>prompt tokens per video</th><th>share cached</th><th>completion tokens</th>"
            "<th>retries</th><th>parse retries</th><th>images</th><th>image MB</th></tr>")
    rows = "".join(
        f'<tr data-stage="{esc(r["stage"])}" data-model="{esc(r["model"])}"><td>{esc(r["stage"])}</td>'
        f'<td>{esc(r["model"]) or "-"}</td><td>{r["n_videos"]}</td><td>{r["vlm_requests"]}</td>'
        f"<td>{r['request_seconds']:.1f}</td><td>{r['prompt_tokens']}</td>"
        f"<td>{'-' if r['prompt_tokens_per_video'] is None else format(r['prompt_tokens_per_video'], '.0f')}</td>"
        f"<td>{_share(r['cached_share'])}</td><td>{r['completion_tokens']}</td><td>{r['vlm_retries']}</td>"
        f"<td>{r['vlm_parse_retries']}</td><td>{r['images_sent']}</td><td>{r['image_bytes_sent'] / 1e6:.1f}</td></tr>"
        for r in g.iter_rows(named=True))
    return f'<table class="costs">{head}{rows}</table>'


def _share(x: float | None) -> str:
    return share_text(x)


def render_overview(reports_dir: Path | str, leaderboard: pl.DataFrame | None, *, criterion_scores: pl.DataFrame | None = None,
                    video_scores: pl.DataFrame | None = None, alignment: pl.DataFrame | None = None,
                    title: str = "argus-dagster results", bench: str | None = None,
                    store: Storage | None = None, costs: pl.DataFrame | None = None,
                    firm_scores: pl.DataFrame | None = None, vefx_board: pl.DataFrame | None = None,
                    vefx_scores: pl.DataFrame | None = None, changes: Diff | None = None,
                    changes_note: str = "", people: pl.DataFrame | None = None,
                    pair_pages: dict[tuple[str, str], str] | None = None,
                    controls: pl.DataFrame | None = None) -> str:
    """The overview page's HTML; links point only at pages that exist under ``reports_dir`` (a folder,
    or an ``s3://`` prefix of ``store``, listed once). ``costs`` is the evaluation's cost ledger
    (:func:`~argus_dagster.method.ledger.cost_table`; without it, that of ``video_scores``).
    ``firm_scores``, ``vefx_board`` (``vefx_leaderboard``) and ``vefx_scores``: the other protocols'
    stored tables, each a section where there is one (:mod:`argus_dagster.outputs.protocol_sections`).
    ``changes``: the latest two passes compared (:mod:`argus_dagster.outputs.changes`), or
    ``changes_note`` saying why there is no comparison; without either, no "What changed" section.
    ``people``: human ratings per video (``task, input_id, model, sample, score``), for best-of-N.
    ``pair_pages``: the pairs' comparison pages written (:mod:`argus_dagster.outputs.compare_pages`),
    which the win matrices' cells link; without it the cells link nothing. ``controls``: what this
    evaluator tells apart (:mod:`argus_dagster.method.controls`), shown beside each task's leaderboard."""
    store = store or LOCAL
    present = {o.rel for o in store.list(reports_dir)}
    lb = leaderboard if leaderboard is not None else pl.DataFrame(schema={c: pl.String for c in BASE_COLUMNS})
    tasks = sorted(lb["task"].unique().to_list()) if lb.height else []
    home = ('<a href="../../../index.html">all evaluations</a>'
            if evaluations_root(cast(Path, reports_dir)) is not None  # it reads an s3:// prefix (a str) as no home
            else "")  # the home's index, one folder above the benches
    samples = '<a class="samples" href="samples.html">every video (filter, sort, disagreements)</a>' if "samples.html" in present else ""
    protocols = [firm_section(firm_scores, present), vefx_section(vefx_board, vefx_scores), best_of_n_section(video_scores, people)]
    changed = changes_section(changes, present, changes_note) if changes is not None or changes_note else ""
    nav = (home + "".join(f'<a href="#{esc(t)}">{esc(t)}</a>' for t in tasks)
           + ('<a href="#changes">what changed</a>' if changed else "")
           + ('<a href="#firm">FIRM-Video</a>' if protocols[0] else "") + ('<a href="#vefx">VEFX-Bench</a>' if protocols[1] else "")
           + ('<a href="#best-of-n">best of N</a>' if protocols[2] else "")
           + '<a href="#alignment">human alignment</a>' + samples)
    sections = []
    costs = cost_table(video_scores) if costs is None else costs
    for task in tasks:
        g = lb.filter(pl.col("task") == task)
        models = [str(m) for m in g["model"].to_list()]
        plot = interval_svg(task, g.to_dicts())
        covers = task_coverage(video_scores, task)
        sections.append(
            f'<section id="{esc(task)}" data-task="{esc(task)}"><h2>{esc(task)}</h2>'
            + (f'<p class="coverage">Its scores cover {esc(covers)}.</p>' if covers else "")
            + f"{_leaderboard_table(present, task, g)}{_controls(task, controls)}{plot}"
            f"<h3>Mean criterion score per dimension (0-10)</h3>{_heat_map(task, models, criterion_scores)}"
            "<h3>Pairwise: how often the row's model scores above the column's, on the inputs both have</h3>"
            f"{_win_matrix(task, models, video_scores, pair_pages)}"
            f"<h3>Inputs (comparison page) × models (report)</h3>{_inputs_grid(present, task, models, video_scores)}"
            f"<h3>VLM costs</h3>{_costs(task, costs)}"
            "</section>")
    if not sections:
        sections.append('<p class="muted">no leaderboard yet: run <code>argus demo</code> or <code>argus evaluate</code></p>')
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    evaluation = _evaluation_line(lb, bench, judges_of(criterion_scores))
    total = cost_summary(costs)
    per_video = ("" if total["prompt_tokens_per_video"] is None
                 else f'prompt tokens per video {total["prompt_tokens_per_video"]:.0f}, ')
    spent = (f'<span class="costs-total">VLM requests <b data-cost="vlm_requests">{total["vlm_requests"]}</b>, '
             f'request-seconds <b data-cost="request_seconds">{total["request_seconds"]:.1f}</b>, '
             f'prompt tokens <b data-cost="prompt_tokens">{total["prompt_tokens"]}</b>, {per_video}'
             f'share cached <b data-cost="cached_share">{_share(total["cached_share"])}</b></span>; '
             ) if total["prompt_tokens"] or total["vlm_requests"] else ""
    body = (f"<h1>{esc(title)}</h1>{evaluation}<div class=\"muted\">{spent}updated {esc(stamp)}; score: mean final "
            f"score 0-10 with a bootstrap 95% interval over inputs, rank with the ranks taken in 95% of those resamples (equal scores share a rank); videos scored, errors not scored; click a "
            f"column's header to sort by it</div><nav>{nav}</nav>"
            + "".join(sections) + changed + "".join(protocols)
            + f'<section id="alignment"><h2>Human alignment</h2>{_alignment(reports_dir, present, alignment, store)}</section>')
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{STYLE}{OVERVIEW_STYLE}{CHANGES_STYLE}</style></head><body>{body}<script>{SORT_SCRIPT}</script></body></html>\n")


def judges_of(criterion_scores: pl.DataFrame | None) -> list[str]:
    """The evaluators that scored the stored criteria (each partition's latest materialization), by
    name: ``openai:Qwen2.5-VL-7B``, ``evidence-only``."""
    if criterion_scores is None or "judge" not in criterion_scores.columns:
        return []
    return sorted({evaluator_label(j) for j in criterion_scores["judge"].drop_nulls().unique().to_list() if j})


def _evaluation_line(lb: pl.DataFrame, bench: str | None = None, evaluators: list[str] | None = None) -> str:
    """Bench, profile and judge once, in the header (the leaderboard table carries them per row);
    ``bench``: how the caller names the bench (and its profile), in their place."""
    def values(col: str) -> list[str]:
        return sorted({str(v) for v in lb[col].drop_nulls().to_list()}) if col in lb.columns else []

    named = [("bench", [bench])] if bench else [("bench", values("bench")), ("profile", values("profile"))]
    # the evaluator by name (``openai:Qwen2.5-VL-7B``) where the judge's kind does not already say it
    named_evaluators = [] if sorted(evaluators or []) == values("judge") else list(evaluators or [])
    facts = named + [("judge", values("judge")), ("evaluator", named_evaluators)]
    shown = [f"{label} <b>{esc(', '.join(v))}</b>" for label, v in facts if v]
    return f'<div class="facts">{" · ".join(shown)}</div>' if shown else ""


_READ = object()  # an argument not given: read the stored table (a library caller's overview)


def write_overview(reports_dir: Path | str, storage_dir: Path | str, *, leaderboard=_READ, alignment=_READ,
                   bench: str | None = None, store: Storage | None = None, firm_scores=_READ, vefx_board=_READ,
                   video_scores=_READ, criterion_scores=_READ, vefx_scores=_READ, costs=_READ,
                   changes: Diff | None = None, changes_note: str = "", people: pl.DataFrame | None = None,
                   pair_pages: dict[tuple[str, str], str] | None = None, controls=_READ) -> Path | str:
    """Write ``reports_dir/index.html`` whole from the tables given (None: there is none, its section
    is left out); a table not given is read from ``storage_dir`` (folders, or ``s3://`` prefixes of
    ``store``), as a library caller without Dagster's records reads it. The ``site`` asset gives them all,
    and ``pair_pages``: the pairs' comparison pages it wrote, which the win matrices link.

    Raises :class:`argus_dagster.infra.files.WriteError` when the page cannot be written."""
    store = store or LOCAL

    def given(value, asset: str):
        return stored_table(storage_dir, asset, store) if value is _READ else value

    scores = given(video_scores, "video_scores")
    page = render_overview(reports_dir, given(leaderboard, "leaderboard"),
                           criterion_scores=given(criterion_scores, "criterion_scores"), video_scores=scores,
                           alignment=given(alignment, "human_alignment"), bench=bench, store=store,
                           costs=given(costs, "costs"),
                           firm_scores=given(firm_scores, "firm_scores"), vefx_board=given(vefx_board, "vefx_leaderboard"),
                           vefx_scores=given(vefx_scores, "vefx_scores"), changes=changes,
                           changes_note=changes_note, people=people, pair_pages=pair_pages,
                           controls=given(controls, "controls"))
    return store.write_bytes(join(reports_dir, "index.html"), page)


# ----------------------------------------------------------------------------------------------------
# The index of every evaluation of an ARGUS_HOME (``$ARGUS_HOME/benches/index.html``)
# ----------------------------------------------------------------------------------------------------


def task_leader(task: str, lb: pl.DataFrame) -> str:
    """``T2V: good 8.00`` where one model holds rank 1 alone (within its 95% rank interval);
    ``T2V: no single leader, a, b share the top`` otherwise. Where the ranking rests on partial evidence
    no overall leader is named: what is not judged, then who leads each measured dimension. HTML, escaped."""
    rows = lb.to_dicts()
    top = top_models(rows)
    if rests_on_partial_evidence(rows):  # no crowned leader: who leads each measured dimension
        leads = "; ".join(f"{name}: {', '.join(dimension_leaders(r))}" for _, name, r in dimension_ranking(rows))
        return (f'{esc(task)}: no overall leader <span class="partial-evidence">({esc(partial_evidence_text(rows))})</span>'
                + (f"; per dimension: {esc(leads)}" if leads else ""))
    if len(top) == 1:
        mean = next(r["mean_final"] for r in rows if str(r["model"]) == top[0])
        text = f"{esc(task)}: {esc(top[0])} {mean:.2f}"
    else:
        text = f"{esc(task)}: no single leader, {esc(', '.join(top))} share the top"
    evidence = partial_evidence_text(rows)
    return text + (f' <span class="partial-evidence">({esc(evidence)})</span>' if evidence else "")


def task_coverage(videos: pl.DataFrame | None, task: str) -> str:
    """What a task's scores cover, in whole criteria: ``3 of 8 criteria on most videos, 39% of the
    weight`` (the commonest count of the task's scored videos; ``on 4 of 9 videos`` where it is not
    most of them), the weight the mean share of importance weight scored; empty without scored videos."""
    if videos is None or not videos.height or "n_criteria" not in videos.columns:
        return ""
    v = videos.filter((pl.col("task") == task) & pl.col("final_score").is_not_null() & pl.col("n_criteria").is_not_null())
    if not v.height:
        return ""
    # a numeric column: its mean is a float (polars types it as any Python value)
    weight = cast(float | None, v["weight_scored"].drop_nulls().mean()) if "weight_scored" in v.columns else None
    return (usual_coverage(v["n_scored"].to_list(), v["n_criteria"].to_list())
            + (f", {weight:.0%} of the weight" if weight is not None else ""))


HOME_ROW = "home_row.json"  # beside an evaluation's reports folder: its row of the home's index, as its site wrote it


def home_row(leaderboard: pl.DataFrame | None, videos: pl.DataFrame | None,
             criteria: pl.DataFrame | None) -> dict:
    """An evaluation's row of the home's index, from the tables its site read: what it holds, what its
    scores cover, which judge, and each task's leader (``leaders`` is HTML, escaped; the rest text)."""
    lb = leaderboard
    if lb is not None and lb.height:
        lb = lb.sort("mean_final", descending=True, nulls_last=True)
        leaders = "; ".join(task_leader(t, g) for (t,), g in sorted(lb.group_by("task"), key=lambda kv: kv[0][0])
                            if g["mean_final"][0] is not None)
        covers = [f"{t}: {text}" for t in sorted(lb["task"].unique().to_list()) if (text := task_coverage(videos, t))]
        facts = (f"{lb['task'].n_unique()} tasks, {lb['model'].n_unique()} models, "
                 f"{int(lb['n_videos'].sum() or 0)} videos scored, {int(lb['n_errors'].sum() or 0)} errors")
    else:
        leaders, covers, facts = "", [], "no leaderboard yet"
    return {"facts": facts, "covers": covers, "evaluators": judges_of(criteria), "leaders": leaders}


def write_home_row(reports_dir: Path | str, leaderboard: pl.DataFrame | None, videos: pl.DataFrame | None,
                   criteria: pl.DataFrame | None) -> Path:
    """Write the evaluation's :data:`HOME_ROW` (beside ``reports_dir``) from the site's own inputs."""
    return cast(Path, LOCAL.write_bytes(join(Path(reports_dir).parent, HOME_ROW),  # a local file: a Path
                                         json.dumps(home_row(leaderboard, videos, criteria), sort_keys=True)))


def _stored_home_row(folder: Path) -> dict:
    """An evaluation's row as its site wrote it; for one evaluated before the site wrote rows, from its
    stored tables."""
    try:
        row = json.loads((folder / HOME_ROW).read_text())
        if isinstance(row, dict) and {"facts", "covers", "evaluators", "leaders"} <= set(row):
            return row
    except (OSError, ValueError):
        pass
    return home_row(stored_table(folder / "storage", "leaderboard"), stored_table(folder / "storage", "video_scores"),
                    stored_table(folder / "storage", "criterion_scores"))


def render_evaluations_index(root: Path) -> str:
    """Every evaluation under ``root`` (``$ARGUS_HOME/benches``): bench and profile, linked to its
    overview; when it was last evaluated; its tasks, models and videos scored; what its scores
    cover and which judge; and each task's leading model (each evaluation's row as its site wrote it)."""
    rows = []
    for record_file in sorted(Path(root).glob("*/*/evaluation.json")):
        try:
            rec = json.loads(record_file.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(rec, dict):
            continue
        folder = record_file.parent
        cells = _stored_home_row(folder)
        overview = folder / "reports" / "index.html"
        name = f"{rec.get('bench', folder.parent.name)} / {rec.get('profile', folder.name)}"
        link = (f'<a href="{href(folder.parent.name, folder.name, "reports", "index.html")}">{esc(name)}</a>'
                if overview.is_file() else esc(name))
        when = rec.get("last_evaluated")
        when = (datetime.fromtimestamp(float(when), timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
                if when else "never scored")
        rows.append(f'<tr data-bench="{esc(rec.get("bench", ""))}" data-profile="{esc(rec.get("profile", ""))}">'
                    f"<td>{link}</td><td>{esc(when)}</td><td>{esc(cells['facts'])}</td>"
                    f"<td>{'<br>'.join(esc(c) for c in cells['covers'])}</td>"
                    f"<td>{esc(', '.join(cells['evaluators'])) or '-'}</td>"
                    f"<td>{cells['leaders']}</td>"
                    f'<td class="muted">{esc(str(rec.get("bench_dir", "")))}</td></tr>')
    table = ('<table class="leaderboard"><tr><th>bench / profile</th><th>last evaluated</th><th>what</th>'
             "<th>scores cover</th><th>evaluator</th><th>leading model per task (mean final 0-10)</th>"
             "<th>bench folder</th></tr>"
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
    return cast(Path, LOCAL.write_bytes(join(root, "index.html"), render_evaluations_index(root)))  # a local file: a Path
