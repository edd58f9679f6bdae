"""The other protocols' results on the overview page: FIRM-Video's ratings per task and model (IF, WC,
PQ on 1-5, how many videos each dimension left unscored and why, in words) and VEFX-Bench's scores per
edit task and model (IF, RQ, EE and overall on 1-4, with their intervals and why a video is unscored).

Each section's cells are the stored tables' values (``firm_scores`` through
:func:`argus_dagster.protocols.firm.tables.firm_summary_table`, ``vefx_leaderboard`` as stored), the
same the terminal prints; a protocol that has not run has no section.
"""

from __future__ import annotations

import polars as pl

from argus_dagster.outputs.report import esc
from argus_dagster.protocols import vefx
from argus_dagster.protocols.firm.tables import firm_summary_table
from argus_dagster.protocols.firm.tables import unscored_reasons as firm_unscored
from argus_dagster.protocols.unscored import unscored_reasons

FIRM_COLUMNS = (("n_videos", "videos"), ("mean_if", "IF mean"), ("mean_wc", "WC mean"), ("mean_pq", "PQ mean"),
                ("if_unscored", "IF unscored"), ("wc_unscored", "WC unscored"), ("pq_unscored", "PQ unscored"))
VEFX_NAMES = {vefx.IF: "IF", vefx.RQ: "RQ", vefx.EE: "EE", vefx.OVERALL: "overall"}


def _number(value, digits: int = 2) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _reasons(reasons: pl.DataFrame) -> str:
    """Each reason a video is unscored, with its dimension, how many videos and which models."""
    if not reasons.height:
        return '<p class="muted">every video is scored on every dimension</p>'
    items = "".join(
        f'<li data-dimension="{esc(r["dimension"])}" data-videos="{r["n_videos"]}"><b>{esc(r["dimension"])}</b>: '
        f'{r["n_videos"]} video{"s" if r["n_videos"] != 1 else ""} (<span class="models">{esc(", ".join(r["models"]))}'
        f'</span>): <span class="reason">{esc(r["reason"] or "no reason recorded")}</span></li>'
        for r in reasons.iter_rows(named=True))
    return f'<ul class="unscored">{items}</ul>'


def firm_section(firm_scores: pl.DataFrame | None) -> str:
    """FIRM-Video's section (``<section id="firm">``), empty when no ``firm_scores`` are stored."""
    if firm_scores is None or not firm_scores.height:
        return ""
    summary = firm_summary_table(firm_scores)
    head = "<tr><th>task</th><th>model</th>" + "".join(f"<th>{esc(name)}</th>" for _, name in FIRM_COLUMNS) + "</tr>"
    rows = "".join(
        f'<tr data-task="{esc(r["task"])}" data-model="{esc(r["model"])}"><td>{esc(r["task"])}</td><td>{esc(r["model"])}</td>'
        + "".join(f'<td class="score" data-key="{key}">{_number(r[key])}</td>' for key, _ in FIRM_COLUMNS) + "</tr>"
        for r in summary.iter_rows(named=True))
    return ('<section id="firm" data-protocol="firm"><h2>FIRM-Video: check, then score</h2>'
            '<p class="muted">Instruction following (IF) and world coherence (WC) from checklists a VLM writes '
            "from the prompt and answers on the video, perceptual quality (PQ) from the video; ratings 1-5, "
            "– where no video of the row has one. Per video: <code>argus export</code>, the firm_scores table.</p>"
            f'<table class="firm sortable"><thead>{head}</thead><tbody>{rows}</tbody></table>'
            f"<h3>Unscored, and why</h3>{_reasons(firm_unscored(firm_scores))}</section>")


def vefx_unscored(vefx_scores: pl.DataFrame | None) -> pl.DataFrame:
    """Why edited videos have no VEFX-Bench score: per dimension (IF, RQ, EE, overall) and reason, the
    videos and their models; the most frequent first."""
    return unscored_reasons(vefx_scores, {VEFX_NAMES[dim]: (col, f"{col.removesuffix('_score')}_reason")
                                          for dim, col in vefx.COLUMNS.items()})


def vefx_section(board: pl.DataFrame | None, vefx_scores: pl.DataFrame | None = None) -> str:
    """VEFX-Bench's section (``<section id="vefx">``): per edit task, models x dimensions, each cell the
    stored mean (1-4), its 95% interval and how many videos it covers; empty when no board is stored."""
    if board is None or not board.height:
        return ""
    dims = list(VEFX_NAMES)
    tables = []
    for (task,), g in board.group_by("task", maintain_order=True):
        cells = {(r["model"], r["dimension"]): r for r in g.iter_rows(named=True)}
        overall = {r["model"]: r["mean"] for r in g.iter_rows(named=True) if r["dimension"] == vefx.OVERALL}
        models = sorted({r["model"] for r in g.iter_rows(named=True)},
                        key=lambda m: (overall.get(m) is None, -(overall.get(m) or 0.0), m))
        head = "<tr><th>model</th>" + "".join(f"<th>{VEFX_NAMES[d]}</th>" for d in dims) + "</tr>"
        rows = []
        for m in models:
            tds = []
            for d in dims:
                r = cells.get((m, d))
                if r is None or r["mean"] is None:
                    tds.append(f'<td class="score" data-dimension="{VEFX_NAMES[d]}">–'
                               + (f'<br><span class="muted">0/{r["n_videos"]} scored</span>' if r else "") + "</td>")
                    continue
                tds.append(f'<td class="score" data-dimension="{VEFX_NAMES[d]}" data-sort="{r["mean"]:.6f}">'
                           f'{r["mean"]:.2f}<br><span class="muted">[{r["ci_low"]:.2f}, {r["ci_high"]:.2f}] '
                           f'{r["n_scored"]}/{r["n_videos"]} scored</span></td>')
            rows.append(f'<tr data-task="{esc(task)}" data-model="{esc(m)}"><td>{esc(m)}</td>{"".join(tds)}</tr>')
        tables.append(f'<h3>{esc(task)}</h3><table class="vefx sortable"><thead>{head}</thead>'
                      f'<tbody>{"".join(rows)}</tbody></table>')
    return ('<section id="vefx" data-protocol="vefx"><h2>VEFX-Bench: the edits</h2>'
            '<p class="muted">Instruction following (IF), rendering quality (RQ) and edit exclusivity (EE) '
            "judged 1-4 against the source video; the overall is their mean where all three are scored. Each "
            "cell: the mean, its bootstrap 95% interval over the task's inputs, and the videos it covers.</p>"
            + "".join(tables) + f"<h3>Unscored, and why</h3>{_reasons(vefx_unscored(vefx_scores))}</section>")
