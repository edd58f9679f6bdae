"""``argus compare A B`` as pages: one per pair of models that meet in a task's pairwise win matrix on
the overview, each cell of which links to it.

A pair's page is ``reports/pairs/<file_name(A)>/<file_name(B)>.html``, A and B its two model names in
sorted order; it shows B against A (B minus A) as :func:`argus_dagster.method.compare.compare` computes
it, with the same facts the command prints: what each side's scores cover, per task a row per
dimension (n, both means, B - A with its paired bootstrap 95% interval, the permutation test's p,
wins/ties/losses), the inputs that moved most and the criteria whose verdict flipped, each linked to
both videos' reports where those pages exist. Pages are written for the pairs the matrices show (at
most :data:`~argus_dagster.outputs.overview.WIN_MATRIX_MODELS` models a task), never for every pair
of models.

Like every page of the site it is one self-contained file: every text goes through
:func:`~argus_dagster.outputs.report.esc` and links are relative and percent-encoded.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any, Callable, Iterable

import polars as pl

from argus_dagster.infra.names import file_name, sample_file_name
from argus_dagster.infra.storage import LOCAL, Storage, join
from argus_dagster.method.compare import GATE_LEVEL, OVERALL, Comparison, compare, dimension_label, smallest_p
from argus_dagster.outputs.overview import WIN_MATRIX_MODELS
from argus_dagster.outputs.report import STYLE, bounded, esc, href

PAIRS_FOLDER = "pairs"
# From a pair's page (two folders below the reports folder) up to the reports folder.
UP = "../../"
# Flipped criteria shown per task (the count of all is said); a rationale's characters shown.
FLIPS_SHOWN = 100
RATIONALE_SHOWN = 2_000

PAGE_STYLE = """
table.compare,table.movers,table.flips{width:auto;min-width:480px} td.num{text-align:right;font-variant-numeric:tabular-nums}
td.rationale-a,td.rationale-b{max-width:360px;white-space:pre-wrap} tr.overall td{font-weight:600}
td[data-verdict=fail]{background:#ffebe9} td[data-verdict=pass]{background:#dafbe1}
.judged-differently{color:#b42318} section{border-top:1px solid #d0d7de;margin-top:24px}
"""


def pair_key(a: str, b: str) -> tuple[str, str]:
    """The two model names in sorted order: (A, B), the page showing B against A."""
    return (a, b) if a <= b else (b, a)


def pair_path(a: str, b: str) -> str:
    """The pair's page relative to the reports folder: ``pairs/<file_name(A)>/<file_name(B)>.html``."""
    first, second = pair_key(a, b)
    return f"{PAIRS_FOLDER}/{file_name(first)}/{file_name(second)}.html"


def matrix_pairs(leaderboard: pl.DataFrame | None, videos: pl.DataFrame | None) -> list[tuple[str, str]]:
    """The pairs (sorted names) that meet in some task's win matrix: both among the task's
    :data:`WIN_MATRIX_MODELS` first models in the leaderboard's order (the matrix's own models) with
    at least one input both have a final score for. At most that many models squared over two a task."""
    if leaderboard is None or not leaderboard.height or videos is None or not videos.height:
        return []
    scored = (videos.filter(pl.col("final_score").is_not_null() & pl.col("final_score").is_not_nan())
              .select(pl.col("task").cast(pl.String), pl.col("model").cast(pl.String), "input_id").unique())
    pairs: set[tuple[str, str]] = set()
    for task in leaderboard["task"].unique(maintain_order=True).to_list():
        models = list(dict.fromkeys(str(m) for m in leaderboard.filter(pl.col("task") == task)["model"].to_list()))
        shown = scored.filter((pl.col("task") == task) & pl.col("model").is_in(models[:WIN_MATRIX_MODELS]))
        met = (shown.join(shown, on=["task", "input_id"], suffix="_b").filter(pl.col("model") != pl.col("model_b"))
               .select("model", "model_b").unique())
        pairs |= {pair_key(str(x), str(y)) for x, y in met.iter_rows()}
    return sorted(pairs)


def _num(x: Any, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def p_text(p: float | None) -> str:
    """A p-value as ``argus compare`` prints it: three decimals, ``<0.001`` below, ``-`` without one."""
    return "-" if p is None else (f"{p:.3f}" if p >= 0.001 else "<0.001")


def report_path(task: str, model: str, input_id: str, sample: str | None) -> str:
    """A video's report relative to the reports folder."""
    return f"{task}/{file_name(model)}/{sample_file_name(input_id, sample or '')}.html"


def _report_link(cls: str, text: str, task: str, model: str, input_id: str, sample: str | None,
                 present: set[str] | None) -> str:
    """A link from the pair's page to a video's report, or the words where that page is not written."""
    if present is not None and report_path(task, model, input_id, sample) not in present:
        return f'<span class="{cls} muted">{esc(text)}: no report</span>'
    link = UP + href(task, file_name(model), sample_file_name(input_id, sample or "") + ".html")
    return f'<a class="{cls}" href="{link}">{esc(text)}</a>'


def _rows(task: str, rows: pl.DataFrame) -> str:
    head = ("<thead><tr><th>dimension</th><th>n</th><th>A</th><th>B</th><th>B - A</th><th>95% interval</th>"
            "<th>p</th><th>W/T/L</th></tr></thead>")
    body = []
    for r in rows.iter_rows(named=True):
        d = str(r["dimension"])
        body.append(
            f'<tr class="{"overall" if d == OVERALL else "dimension"}" data-task="{esc(task)}" data-dimension="{esc(d)}">'
            f'<td class="dimension">{esc(dimension_label(d))}</td><td class="n num">{r["n_inputs"]}</td>'
            f'<td class="mean-a num">{_num(r["mean_a"])}</td><td class="mean-b num">{_num(r["mean_b"])}</td>'
            f'<td class="diff num">{_num(r["diff"], True)}</td>'
            f'<td class="interval num">{_num(r["ci_low"], True)} {_num(r["ci_high"], True)}</td>'
            f'<td class="p num">{p_text(r["p_value"])}</td>'
            f'<td class="wtl num">{r["wins"]}/{r["ties"]}/{r["losses"]}</td></tr>')
    return f'<table class="compare">{head}<tbody>{"".join(body)}</tbody></table>'


def _movers(task: str, movers: list[dict], a: str, b: str, samples: Callable[[str, str, str], str],
            present: set[str] | None) -> str:
    if not movers:
        return ""
    head = "<tr><th>input</th><th>A → B (final score)</th><th>B - A</th><th>reports</th></tr>"
    body = "".join(
        f'<tr data-task="{esc(task)}" data-input="{esc(m["input_id"])}"><td class="input">{esc(m["input_id"])}</td>'
        f'<td class="scores num"><span class="score-a">{_num(m["score_a"])}</span> → '
        f'<span class="score-b">{_num(m["score_b"])}</span></td><td class="diff num">{_num(m["diff"], True)}</td>'
        f'<td class="reports">{_report_link("report-a", "A", task, a, m["input_id"], samples(a, task, m["input_id"]), present)} '
        f'{_report_link("report-b", "B", task, b, m["input_id"], samples(b, task, m["input_id"]), present)}</td></tr>'
        for m in movers)
    return f'<h3>Inputs that moved most (final score, A → B)</h3><table class="movers">{head}{body}</table>'


def _flips(task: str, flips: list[dict], a: str, b: str, present: set[str] | None) -> str:
    if not flips:
        return ""
    shown = flips[:FLIPS_SHOWN]
    said = f"{len(flips)}" + (f", the first {FLIPS_SHOWN} shown" if len(flips) > FLIPS_SHOWN else "")
    head = ("<tr><th>input</th><th>criterion</th><th>dimension</th><th>type</th><th>hard cap</th><th>A</th><th>B</th>"
            "<th>fail threshold</th><th>A's rationale</th><th>B's rationale</th><th>reports</th></tr>")
    body = []
    for f in shown:
        cap = "-" if f["hard_cap"] is None else str(f["hard_cap"])
        body.append(
            f'<tr data-task="{esc(task)}" data-input="{esc(f["input_id"])}" data-criterion="{esc(f["criterion_id"])}">'
            f'<td class="input">{esc(f["input_id"])}</td><td class="criterion">{esc(f["criterion_id"])}</td>'
            f'<td class="dimension">{esc(f["dimension"])}</td><td class="type">{esc(f["type"])}</td>'
            f'<td class="hard-cap num">{esc(cap)}</td>'
            f'<td class="verdict-a" data-verdict="{esc(f["verdict_a"])}">{esc(f["verdict_a"])} {_num(f["score_a"])}</td>'
            f'<td class="verdict-b" data-verdict="{esc(f["verdict_b"])}">{esc(f["verdict_b"])} {_num(f["score_b"])}</td>'
            f'<td class="threshold num">{_num(f["fail_threshold"])}</td>'
            f'<td class="rationale-a">{esc(bounded(f["rationale_a"] or "-", RATIONALE_SHOWN))}</td>'
            f'<td class="rationale-b">{esc(bounded(f["rationale_b"] or "-", RATIONALE_SHOWN))}</td>'
            f'<td class="reports">{_report_link("report-a", "A", task, a, f["input_id"], f["sample_a"], present)} '
            f'{_report_link("report-b", "B", task, b, f["input_id"], f["sample_b"], present)}</td></tr>')
    return (f'<h3>Criteria whose verdict flipped ({esc(said)}; score against the fail threshold)</h3>'
            f'<table class="flips">{head}{"".join(body)}</table>')


def render_compare_page(c: Comparison, a: str, b: str, *, present: set[str] | None = None,
                        samples: Callable[[str, str, str], str] | None = None) -> str:
    """The page of ``c`` (B against A; ``a`` and ``b``: the two models, whose reports it links).
    ``present``: the pages written under the reports folder (relative paths); a report not among them
    is named, not linked (None: every report is linked). ``samples(model, task, input_id)``: the
    sample whose report a mover links (default the single video's)."""
    first = samples or (lambda model, task, input_id: "")
    cover = (f'<p class="cover">A ({esc(a)}) judged by <span class="judges-a">{esc(", ".join(c.judges.get("a", [])) or "-")}'
             f'</span> (<span class="criteria-a">{c.criteria.get("a", 0)}</span> scored criteria); '
             f'B ({esc(b)}) by <span class="judges-b">{esc(", ".join(c.judges.get("b", [])) or "-")}</span> '
             f'(<span class="criteria-b">{c.criteria.get("b", 0)}</span> scored criteria)</p>')
    if c.judges.get("a") != c.judges.get("b"):
        cover += '<p class="judged-differently">the two sides were judged differently: a difference may be the judges\'</p>'
    sections = []
    for (task,), g in c.rows.group_by("task", maintain_order=True):
        task = str(task)
        n = max(g.filter(pl.col("dimension") == OVERALL)["n_inputs"].to_list(), default=0)
        note = (f'<p class="small-n muted">on {n} input{"s" if n != 1 else ""} p cannot go below '
                f"{smallest_p(n):.3g}; the interval alone is too narrow to trust</p>"
                if n and smallest_p(n) >= GATE_LEVEL else "")
        sections.append(
            f'<section id="{esc(task)}" data-task="{esc(task)}"><h2>{esc(task)}</h2>{_rows(task, g)}{note}'
            + _movers(task, [m for m in c.movers if m["task"] == task], a, b, first, present)
            + _flips(task, [f for f in c.flips if f["task"] == task], a, b, present) + "</section>")
    if not sections:
        sections.append('<p class="muted">the two models share no scored input</p>')
    title = f"{b} against {a}"
    body = (f'<h1>{esc(title)}</h1><p class="muted">B - A on the inputs both were scored on (paired bootstrap 95% '
            "interval over inputs; p: paired sign-flip permutation test; W/T/L: inputs where B scored above, "
            f"equal to, below A), as <code>argus compare {esc(shlex.quote(a))} {esc(shlex.quote(b))}</code> prints it</p>"
            f"{cover}"
            + "".join(sections))
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<style>{STYLE}{PAGE_STYLE}</style></head><body><div class="muted"><a class="overview" '
            f'href="{UP}index.html">all results</a></div>{body}</body></html>\n')


def _by_model(table: pl.DataFrame | None) -> dict[str, pl.DataFrame]:
    if table is None or not table.height or "model" not in table.columns:
        return {}
    return {str(k[0]): g for k, g in table.partition_by("model", as_dict=True).items()}


def pair_writer(reports_dir: Path | str, videos: pl.DataFrame | None, criteria: pl.DataFrame | None,
                store: Storage | None = None) -> Callable[[str, str], Path | str]:
    """A function that writes one pair's page (``write(a, b)``, either order) and returns where: the
    tables split by model once and the reports folder listed once, for every page it writes."""
    store = store or LOCAL
    scores, crits = _by_model(videos), _by_model(criteria)
    present = {o.rel for o in store.list(reports_dir)}
    firsts: dict[str, dict[tuple[str, str], str]] = {}

    def sample(model: str, task: str, input_id: str) -> str:
        if model not in firsts:
            v = scores.get(model)
            firsts[model] = {} if v is None or "sample" not in v.columns else {
                (str(t), str(i)): str(s) for t, i, s in v.select(
                    "task", "input_id", pl.col("sample").fill_null("")).group_by("task", "input_id").agg(
                    pl.col("sample").min()).iter_rows()}
        return firsts[model].get((task, input_id), "")

    def write(a: str, b: str) -> Path | str:
        first, second = pair_key(a, b)
        empty = pl.DataFrame(schema={"task": pl.String, "input_id": pl.String, "final_score": pl.Float64})
        c = compare(scores.get(first, empty), scores.get(second, empty), crits.get(first), crits.get(second),
                    a=first, b=second)
        page = render_compare_page(c, first, second, present=present, samples=sample)
        return store.write_bytes(join(reports_dir, pair_path(first, second)), page)

    return write


def remove_stale_pair_pages(reports_dir: Path | str, keep: Iterable[str], store: Storage | None = None) -> list[str]:
    """Remove the pair pages under ``reports_dir`` (``pairs/*/*.html``) that are not in ``keep`` (paths
    relative to ``reports_dir``, as :func:`pair_path` gives them): the pages of pairs the win matrices no
    longer show, or whose page this pass could not write. Returns the paths removed."""
    store = store or LOCAL
    kept = set(keep)
    gone = [o for o in store.list(join(reports_dir, PAIRS_FOLDER))
            if o.rel.endswith(".html") and o.rel.count("/") == 1 and f"{PAIRS_FOLDER}/{o.rel}" not in kept]
    for o in gone:
        store.remove(o.uri)
    return [f"{PAIRS_FOLDER}/{o.rel}" for o in gone]


def write_compare_pages(reports_dir: Path | str, pairs: Iterable[tuple[str, str]], videos: pl.DataFrame | None,
                        criteria: pl.DataFrame | None, store: Storage | None = None) -> list[Path | str]:
    """Write each pair's page (:func:`pair_path`) from the stored ``video_scores`` and
    ``criterion_scores`` rows; returns where, in the order given. Raises
    :class:`argus_dagster.infra.files.WriteError` when a page cannot be written."""
    write = pair_writer(reports_dir, videos, criteria, store)
    return [write(a, b) for a, b in pairs]
