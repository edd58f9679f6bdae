"""The other protocols' results on the overview page: FIRM-Video's ratings per task and model (IF, WC,
PQ on 1-5, how many videos each dimension left unscored and why, in words) and VEFX-Bench's scores per
edit task and model (IF, RQ, EE and overall on 1-4, with their intervals and why a video is unscored),
and best-of-N: per task the candidate VideoArgus picks on each input and, where people rated the
candidates, how often the pick is theirs.

Each section's cells are the stored tables' values (``firm_scores`` through
:func:`argus_dagster.protocols.firm.tables.firm_summary_table`, ``vefx_leaderboard`` as stored), the
same the terminal prints; a protocol that has not run has no section.
"""

from __future__ import annotations

import polars as pl

from argus_dagster.outputs.firm_pages import index_path
from argus_dagster.outputs.report import esc, href
from argus_dagster.protocols import best_of_n as bon
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


def _model_cell(task: str, model: str, present: set[str]) -> str:
    """A model's name, a link to its FIRM-Video pages of ``task`` where they exist."""
    index = index_path(task, model)
    if index not in present:
        return esc(model)
    link = href(*index.split("/"))
    return f'<a class="firm-index" href="{link}">{esc(model)}</a>'


def firm_section(firm_scores: pl.DataFrame | None, present: set[str] | None = None) -> str:
    """FIRM-Video's section (``<section id="firm">``), empty when no ``firm_scores`` are stored; each
    model's name links its FIRM-Video pages (each video's checklist) where ``present`` lists them."""
    if firm_scores is None or not firm_scores.height:
        return ""
    present = present or set()
    summary = firm_summary_table(firm_scores)
    head = "<tr><th>task</th><th>model</th>" + "".join(f"<th>{esc(name)}</th>" for _, name in FIRM_COLUMNS) + "</tr>"
    rows = "".join(
        f'<tr data-task="{esc(r["task"])}" data-model="{esc(r["model"])}"><td>{esc(r["task"])}</td>'
        f'<td>{_model_cell(r["task"], r["model"], present)}</td>'
        + "".join(f'<td class="score" data-key="{key}">{_number(r[key])}</td>' for key, _ in FIRM_COLUMNS) + "</tr>"
        for r in summary.iter_rows(named=True))
    return ('<section id="firm" data-protocol="firm"><h2>FIRM-Video: check, then score</h2>'
            '<p class="muted">Instruction following (IF) and world coherence (WC) from checklists a VLM writes '
            "from the prompt and answers on the video, perceptual quality (PQ) from the video; ratings 1-5, "
            "– where no video of the row has one. A model's name opens its videos' pages: each checklist item "
            "with its verdict and the evidence. Every row: the firm_scores table.</p>"
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


BON_PEOPLE_BOOT = 2000  # bootstrap resamples of the inputs for the intervals against people


def best_of_n_rows(video_scores: pl.DataFrame | None, people: pl.DataFrame | None = None) -> list[dict]:
    """Per task, VideoArgus's best-of-N pick on each input with two or more scored candidates (the
    highest final score, :func:`~argus_dagster.protocols.best_of_n.select_best`): how many inputs,
    candidates and ties, the mean margin to the runner-up; and where people rated the task (``people``:
    ``task, input_id, model, sample, score``), the same pick among the candidates they rated, against
    their ratings (:func:`~argus_dagster.protocols.best_of_n.against_humans`): how often it is a
    human-best candidate, against a random pick, and the mean human score of picks and of a random pick,
    each with a bootstrap 95% interval over inputs."""
    if video_scores is None or not video_scores.height:
        return []
    out = []
    for (task,), vs in video_scores.group_by("task", maintain_order=True):
        table = bon.selection_table(vs)
        picks = bon.select_best(table, "final")
        picks = picks.filter(pl.col("n_scored") >= 2)
        if not picks.height:
            continue
        row = {"task": task, "n_inputs": picks.height, "n_candidates": picks["n_scored"].to_list(),
               "n_tied": int((picks["n_tied"] > 0).sum()), "mean_margin": picks["margin"].mean(), "people": None}
        rated = people.filter(pl.col("task") == task) if people is not None and people.height else None
        if rated is not None and rated.height:
            keys = rated.select(pl.col("input_id").cast(pl.String), pl.col("model").cast(pl.String),
                                pl.col("sample").cast(pl.String).fill_null("")).unique()
            among = bon.select_best(table.join(keys, on=["input_id", "model", "sample"]), "final")
            among = among.filter(pl.col("n_scored") >= 2)
            if among.height:
                row["people"] = bon.against_humans(among, rated.drop("task"), n_boot=BON_PEOPLE_BOOT)
        out.append(row)
    return sorted(out, key=lambda r: r["task"])


def _with_interval(value: float, interval: tuple[float, float], digits: int = 2) -> str:
    if value is None or value != value:
        return "–"
    lo, hi = interval
    said = f"{value:.{digits}f}"
    return said + (f' <span class="muted">[{lo:.{digits}f}, {hi:.{digits}f}]</span>' if lo == lo and hi == hi else "")


def best_of_n_section(video_scores: pl.DataFrame | None, people: pl.DataFrame | None = None) -> str:
    """Best-of-N (``<section id="best-of-n">``): per task, VideoArgus's picks and, where people rated
    the candidates, how the picks fare with them; empty when no input has two scored candidates."""
    rows = best_of_n_rows(video_scores, people)
    if not rows:
        return ""
    head = ("<tr><th>task</th><th>inputs</th><th>candidates per input</th><th>ties</th><th>mean margin</th>"
            "<th>inputs people rated</th><th>pick is people's best</th><th>random pick is</th>"
            "<th>people's mean of picks</th><th>of a random pick</th><th>gain</th></tr>")
    body = []
    for r in rows:
        n = r["n_candidates"]
        spread = str(n[0]) if min(n) == max(n) else f"{min(n)}-{max(n)}"
        h = r["people"]
        if h is None or not h["n_inputs"]:
            why = "no ratings" if h is None else "none with two rated candidates"
            versus = f'<td data-key="n_rated">0</td><td colspan="5" class="muted">{why}</td>'
        else:
            versus = (f'<td data-key="n_rated">{h["n_inputs"]}</td>'
                      f'<td class="score" data-key="hit_rate">{_with_interval(h["hit_rate"], h["hit_rate_ci"])}</td>'
                      f'<td class="score" data-key="random_hit_rate">{_number(h["random_hit_rate"])}</td>'
                      f'<td class="score" data-key="mean_human_pick">{_with_interval(h["mean_human_pick"], h["mean_human_pick_ci"])}</td>'
                      f'<td class="score" data-key="mean_human_random">{_with_interval(h["mean_human_random"], h["mean_human_random_ci"])}</td>'
                      f'<td class="score" data-key="gain">{_with_interval(h["gain"], h["gain_ci"])}</td>')
        body.append(f'<tr data-task="{esc(r["task"])}"><td>{esc(r["task"])}</td><td data-key="n_inputs">{r["n_inputs"]}</td>'
                    f'<td>{spread}</td><td data-key="n_tied">{r["n_tied"]}</td>'
                    f'<td class="score" data-key="mean_margin">{_number(r["mean_margin"])}</td>{versus}</tr>')
    return ('<section id="best-of-n" data-protocol="best-of-n"><h2>Best of N: the candidate VideoArgus picks</h2>'
            '<p class="muted">On each input with two or more scored candidates, the one with the highest final '
            "score (a tie broken by a seeded draw); the margin is its lead over the runner-up. Against people: "
            "the same pick among the candidates they rated, how often it is one they rated highest (a random "
            "pick's rate beside it), and their mean rating of the picks against a random pick, each with a "
            "bootstrap 95% interval over inputs. Per input, and by FIRM-Video's ratings: <code>argus best-of-n</code>.</p>"
            f'<table class="best-of-n"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table></section>')
