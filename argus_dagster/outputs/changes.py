"""What changed, in one place: the overview's section on the latest change and the sample browser's
videos that moved most between the two latest passes.

Both read one :class:`~argus_dagster.outputs.deltas.Diff` (the latest two passes of ``video_scores``,
as ``argus diff`` prints them): what changed between the passes (the evaluator by name, the rubrics,
the inputs, the assets' code versions), per model the mean final score before and after, and the
videos and criteria that moved most, each video linked to its report where that page exists.
"""

from __future__ import annotations

import polars as pl

from argus_dagster.infra.names import file_name, sample_file_name
from argus_dagster.outputs.deltas import Diff
from argus_dagster.outputs.history_words import evaluator_label
from argus_dagster.outputs.report import esc, href

STYLE = """
table.changes-models,table.changes-videos,table.changes-criteria,table.passes,table.people,table.disagreements{width:auto;min-width:480px}
table.changes-models td.score{white-space:nowrap}
"""
SHOWN = 10  # videos and criteria the overview lists, the largest move first
INPUT_NAMES = {"bench_files": "bench files (prompts, conditions)", "candidate_files": "candidate videos",
               "rubric_files": "frozen rubrics", "rubrics": "rubrics", "judge_config": "judge",
               "rubric_generator_config": "rubric generator", "tool_suite_config": "tools",
               "aggregation_config": "aggregation"}


def _num(x) -> str:
    return "–" if x is None else f"{x:.2f}"


def short_pass(pass_id: str) -> str:
    """A pass as ``argus history`` prints it: the start of its id."""
    return pass_id[:8]


def evaluators(judges: list[str]) -> str:
    """The evaluators of a pass by name (``openai:Qwen2.5-VL-7B, evidence-only``), ``none`` without one."""
    return ", ".join(sorted({evaluator_label(j) for j in judges})) or "none"


def video_link(present: set[str], task: str, model: str, input_id: str, sample: str) -> str:
    """A video by name (``input#sample``), a link to its report where that page exists."""
    name = esc(input_id + (f"#{sample}" if sample else ""))
    page = f"{task}/{file_name(model)}/{sample_file_name(input_id, sample)}.html"
    link = href(task, file_name(model), sample_file_name(input_id, sample) + ".html")
    return f'<a class="report" href="{esc(link)}">{name}</a>' if page in present else name


def _facts(d: Diff) -> str:
    """Each part of the evaluation that changed between the passes, a line each (``data-part``)."""
    before, after = evaluators(d.judges[0]), evaluators(d.judges[1])
    lines = [("evaluator", f'<span class="before">{esc(before)}</span> → <span class="after">{esc(after)}</span>'
              if before != after else f'the same: <span class="after">{esc(after)}</span>')]
    n = len(d.rubrics_changed)
    lines.append(("rubrics", f"{n} input{'s' if n != 1 else ''} got another rubric"
                  + (f" ({esc(', '.join(f'{t}/{i}' for t, i in d.rubrics_changed[:8]))}"
                     + (f" and {n - 8} more" if n > 8 else "") + ")" if n else "")))
    moved = [f"{INPUT_NAMES.get(k, k)} ({v} partition{'s' if v != 1 else ''})" for k, v in sorted(d.inputs_changed.items())]
    lines.append(("inputs", esc(", ".join(moved)) if moved else "none moved"))
    code = [f"{k} {b} → {a}" for k, (b, a) in sorted(d.code_changed.items())]
    lines.append(("code", esc(", ".join(code)) if code else "the same"))
    if d.missing:
        lines.append(("not kept", esc(", ".join(d.missing)) + " (retention, ARGUS_KEEP_VERSIONS)"))
    return "".join(f'<li data-part="{part}"><b>{part}</b>: {text}</li>' for part, text in lines)


def _models(d: Diff) -> str:
    if not d.models.height:
        return ""
    rows = []
    for r in d.models.iter_rows(named=True):
        b, a = r["mean_final_before"], r["mean_final_after"]
        change = f"{a - b:+.2f}" if a is not None and b is not None else "–"
        interval = {k: (f' <span class="muted">[{_num(r[f"ci_low_{k}"])}, {_num(r[f"ci_high_{k}"])}]</span>'
                        if r[f"mean_final_{k}"] is not None else "") for k in ("before", "after")}
        rows.append(f'<tr data-task="{esc(r["task"])}" data-model="{esc(r["model"])}"><td>{esc(r["task"])}</td>'
                    f'<td>{esc(r["model"])}</td><td class="score" data-key="before">{_num(b)}{interval["before"]}</td>'
                    f'<td class="score" data-key="after">{_num(a)}{interval["after"]}</td>'
                    f'<td class="score" data-key="change">{change}</td></tr>')
    return ('<h3>Per model: mean final score [95% interval], before and after</h3><table class="changes-models">'
            "<thead><tr><th>task</th><th>model</th><th>before</th><th>after</th><th>change</th></tr></thead>"
            f'<tbody>{"".join(rows)}</tbody></table>')


def moved_rows(videos: pl.DataFrame, present: set[str], limit: int | None = None) -> str:
    """The table rows of the videos that moved (``Diff.videos``), the largest move first."""
    rows = []
    for r in (videos.head(limit) if limit else videos).iter_rows(named=True):
        change = f"{r['delta']:+.2f}" if r["delta"] is not None else esc(r["change"])
        rows.append(f'<tr data-task="{esc(r["task"])}" data-model="{esc(r["model"])}" data-input="{esc(r["input_id"])}">'
                    f'<td>{esc(r["task"])}</td><td>{esc(r["model"])}</td>'
                    f'<td>{video_link(present, r["task"], r["model"], r["input_id"], r["sample"])}</td>'
                    f'<td class="score" data-key="before">{_num(r["final_before"])}</td>'
                    f'<td class="score" data-key="after">{_num(r["final_after"])}</td>'
                    f'<td class="score" data-key="change">{change}</td></tr>')
    return "".join(rows)


MOVED_HEAD = ("<thead><tr><th>task</th><th>model</th><th>video</th><th>final before</th><th>final after</th>"
              "<th>change</th></tr></thead>")


def _criteria(d: Diff, present: set[str]) -> str:
    """The criteria of both passes whose score moved most (a criterion a new rubric added or dropped
    is the rubric's change, said above)."""
    both = d.criteria.filter(~pl.col("change").is_in(["added", "removed"])) if d.criteria.height else d.criteria
    if not both.height:
        return ('<h3>Criteria that moved most</h3><p class="muted">no criterion of both passes moved'
                + (" (the rubrics changed: their criteria are others)" if d.rubrics_changed else "") + "</p>")
    rows = []
    for r in both.head(SHOWN).iter_rows(named=True):
        change = f"{r['delta']:+.2f}" if r["delta"] is not None else esc(r["change"])
        rows.append(f'<tr><td>{esc(r["task"])}</td><td>{esc(r["model"])}</td>'
                    f'<td>{video_link(present, r["task"], r["model"], r["input_id"], r["sample"])}</td>'
                    f'<td>{esc(r["criterion_id"].replace("_", " "))}</td><td class="score">{_num(r["before"])}</td>'
                    f'<td class="score">{_num(r["after"])}</td><td class="score">{change}</td></tr>')
    return ('<h3>Criteria that moved most</h3><table class="changes-criteria"><thead><tr><th>task</th><th>model</th>'
            "<th>video</th><th>criterion</th><th>before</th><th>after</th><th>change</th></tr></thead>"
            f'<tbody>{"".join(rows)}</tbody></table>')


def changes_section(d: Diff | None, present: set[str], why_none: str = "") -> str:
    """The overview's "What changed" section (``<section id="changes">``): the latest two passes of
    ``video_scores`` compared; ``why_none`` says why there is no comparison (a first evaluation)."""
    if d is None:
        return ('<section id="changes"><h2>What changed</h2>'
                f'<p class="muted">{esc(why_none or "nothing to compare yet")}</p></section>')
    videos = (f'<h3>Videos that moved most</h3><table class="changes-videos">{MOVED_HEAD}<tbody>'
              f"{moved_rows(d.videos, present, SHOWN)}</tbody></table>" if d.videos.height
              else '<p class="muted">no video\'s final score moved</p>')
    return ('<section id="changes"><h2>What changed</h2>'
            f'<p class="passes">The latest change: pass <code>{esc(short_pass(d.before))}</code> ({esc(d.before_time)} UTC) '
            f'→ pass <code>{esc(short_pass(d.after))}</code> ({esc(d.after_time)} UTC); '
            "<code>argus diff</code> prints it whole, <code>argus history</code> lists every pass.</p>"
            f'<ul class="what-changed">{_facts(d)}</ul>{_reasons(d)}{_models(d)}{videos}{_criteria(d, present)}</section>')


def _reasons(d: Diff) -> str:
    """Why the later pass ran, as its runs recorded it: the words ``argus evaluate`` said."""
    if not d.reasons:
        return ""
    items = "".join(f'<li class="reason">{esc(r)}</li>' for r in d.reasons[:12])
    more = f'<li class="muted">and {len(d.reasons) - 12} more</li>' if len(d.reasons) > 12 else ""
    return f'<h3>Why its runs ran</h3><ul class="why-ran">{items}{more}</ul>'

