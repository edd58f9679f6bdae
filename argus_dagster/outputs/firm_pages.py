"""FIRM-Video's pages: per video its checklist, each item with its verdict and the verifier's evidence,
under its IF, WC and PQ ratings with their rationales (or why a dimension is unscored); per task and
model an index of its videos. Written by ``firm_evaluation`` beside the VideoArgus reports:
``<task>/<model>/firm/<video>.html`` and ``<task>/<model>/firm/_index.html`` (no video's page name
starts with ``_``: :func:`argus_dagster.infra.names.file_name`).

A page is self-contained (no script, no fetched resource) and links the video's VideoArgus report
where that page exists.
"""

from __future__ import annotations

from typing import Iterable

from argus_dagster.infra.names import file_name, sample_file_name
from argus_dagster.outputs.report import STYLE, esc, href, score_colour
from argus_dagster.protocols.firm.types import DIMENSIONS, SHORT

FIRM_FOLDER = "firm"
INDEX = "_index.html"
NAMES = {"if": "Instruction following (IF)", "wc": "World coherence (WC)", "pq": "Perceptual quality (PQ)"}
# A verdict in words, by dimension: an IF item asks whether a requirement is met, a WC question whether
# the video violates coherence (yes = a violation); an answer the verifier could not give is neither.
VERDICT_WORDS = {"if": {"yes": "met", "no": "not met"}, "wc": {"yes": "violation", "no": "no violation"}}
CANNOT_TELL = "cannot tell"


def verdict_words(short: str, verdict: str | None, verifiable: bool | None) -> str:
    """A verdict as a person reads it: ``met``/``not met`` (IF), ``violation``/``no violation`` (WC),
    ``cannot tell`` where the verifier could not answer from the frames."""
    if verifiable is False:
        return CANNOT_TELL
    return VERDICT_WORDS.get(short, VERDICT_WORDS["if"]).get(verdict or "no", CANNOT_TELL)
PAGE_STYLE = """
table.checklist td.verdict{font-weight:600;white-space:nowrap} td.verdict.met{background:#dafbe1}
td.verdict.not-met,td.verdict.violation{background:#ffebe9} td.verdict.no-violation{background:#dafbe1}
td.verdict.cannot-tell{background:#f6f8fa;color:#57606a}
.ratings{display:flex;gap:24px;flex-wrap:wrap;margin:8px 0} .ratings div{min-width:220px} .ratings b{font-size:20px}
"""


def page_name(input_id: str, sample: str = "") -> str:
    """A video's FIRM-Video page in its task x model folder: ``firm/<video>.html``."""
    return f"{FIRM_FOLDER}/{sample_file_name(input_id, sample)}.html"


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{STYLE}{PAGE_STYLE}</style></head><body><div class=\"muted\"><a class=\"overview\" "
            f'href="../../../index.html#firm">all results</a></div>{body}</body></html>\n')


def _rating(score: dict, s: str) -> str:
    rating = score.get(f"{s}_rating")
    value = (f'<b style="background:{score_colour((rating - 1) * 2.5)}">{rating}</b>/5' if rating is not None
             else '<b>–</b>')
    continuous = score.get(f"{s}_score")
    why = (esc(score.get(f"{s}_rationale") or "") if rating is not None
           else f'<span class="err">{esc(score.get(f"{s}_reason") or "not evaluated")}</span>')
    extra = f' <span class="muted">(score {continuous:.2f})</span>' if continuous is not None else ""
    return f'<div data-dimension="{s}">{NAMES[s]}<br>{value}{extra}<br><span class="why">{why}</span></div>'


def checklist_table(short: str, verdicts: list[dict]) -> str:
    """One dimension's checklist (``short``: ``if`` or ``wc``): each item's question, what it checks,
    its importance, the verdict in words and the verifier's evidence."""
    rows = []
    for v in verdicts:
        words = verdict_words(short, v.get("verdict"), v.get("verifiable"))
        aspect = " · ".join(x for x in (v.get("target"), v.get("aspect")) if x)
        rows.append(f'<tr data-item="{esc(v["item_id"])}"><td>{esc(v.get("question") or v["item_id"])}'
                    + (f'<br><span class="muted">{esc(aspect)}</span>' if aspect else "")
                    + f'</td><td class="num">{esc(v.get("importance") if v.get("importance") is not None else "–")}</td>'
                    f'<td class="verdict {words.replace(" ", "-")}">{words}</td><td class="evidence">{esc(v.get("evidence") or "")}</td></tr>')
    return ('<table class="checklist"><thead><tr><th>item</th><th>importance</th><th>verdict</th><th>evidence</th></tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table>')


def render_firm_video(*, task: str, model: str, input_id: str, sample: str, prompt: str, score: dict,
                      verdicts: Iterable[dict], report_href: str | None = None) -> str:
    """A video's FIRM-Video page: its three ratings (1-5) with their rationales or why one is unscored,
    then per checked dimension (IF, WC) the checklist with each item's verdict and evidence.
    ``score``: its ``firm_scores`` row; ``verdicts``: its ``firm_verdicts`` rows."""
    label = input_id + (f"#{sample}" if sample else "")
    by_dim: dict[str, list[dict]] = {}
    for v in verdicts:
        by_dim.setdefault(v["dimension"], []).append(v)
    links = " · ".join(x for x in (f'<a class="index" href="{INDEX}">all FIRM-Video pages of {esc(task)} × {esc(model)}</a>',
                                   f'<a class="report" href="{esc(report_href)}">its VideoArgus report</a>'
                                   if report_href else "") if x)
    sections = []
    for d in DIMENSIONS:
        items = by_dim.get(d, [])
        if not items:
            continue
        short = SHORT[d]
        yes = sum(1 for v in items if v.get("verdict") == "yes" and v.get("verifiable") is not False)
        count = (f"{yes} of {len(items)} met" if short == "if"
                 else f"{yes} violation{'s' if yes != 1 else ''} in {len(items)} questions")
        sections.append(f'<section class="dimension" data-dimension="{short}"><h2>{NAMES[short]}: the checklist '
                        f'({count})</h2>{checklist_table(short, items)}</section>')
    if not sections:
        sections.append('<p class="muted">no checklist was answered for this video (see why under its ratings)</p>')
    body = (f"<h1>FIRM-Video · {esc(task)} · {esc(model)} · {esc(label)}</h1><div class=\"muted\">{links}</div>"
            f'<div class="prompt">{esc(prompt)}</div><div class="ratings">'
            + "".join(_rating(score, SHORT[d]) for d in DIMENSIONS) + "</div>" + "".join(sections))
    return _page(f"FIRM-Video {task} {model} {label}", body)


def render_firm_index(*, task: str, model: str, rows: Iterable[dict]) -> str:
    """A task x model's FIRM-Video index: a line per video with its three ratings and a link to its page."""
    lines = []
    for r in rows:
        label = r["input_id"] + (f"#{r['sample']}" if r.get("sample") else "")
        link = href(sample_file_name(r["input_id"], r.get("sample") or "") + ".html")
        cells = "".join(f'<td class="score" data-key="{s}">{r.get(f"{s}_rating") if r.get(f"{s}_rating") is not None else "–"}</td>'
                        for s in ("if", "wc", "pq"))
        why = "; ".join(f"{s.upper()}: {r[f'{s}_reason']}" for s in ("if", "wc", "pq") if r.get(f"{s}_reason"))
        lines.append(f'<tr data-input="{esc(r["input_id"])}"><td><a href="{link}">{esc(label)}</a></td>{cells}'
                     f'<td class="err">{esc(why)}</td></tr>')
    body = (f"<h1>FIRM-Video · {esc(task)} × {esc(model)}</h1><table class=\"firm-index\"><thead><tr><th>video</th>"
            f"<th>IF</th><th>WC</th><th>PQ</th><th>unscored, and why</th></tr></thead><tbody>{''.join(lines)}</tbody></table>")
    return _page(f"FIRM-Video {task} {model}", body)


def index_path(task: str, model: str) -> str:
    """The task x model's FIRM-Video index, relative to the reports folder."""
    return f"{task}/{file_name(model)}/{FIRM_FOLDER}/{INDEX}"
