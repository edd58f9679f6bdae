"""Diagnostic reports: self-contained HTML pages a person can read without the UI.

A video's page holds the input (prompt, condition frames), sampled output frames, the score summary
(final, base, alpha, caps fired) and one section per criterion: requirement, hard/soft, importance,
the executed tool steps with repairs and fallbacks, the evidence records, the score and rationale.
An index page lists a partition's videos; a comparison page puts every model's output of one input
side by side. Frames are embedded as base64 JPEG, so a page is one file. Every piece of text that
comes from a prompt, rubric, tool or judge goes through :func:`esc`.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from typing import Any, Iterable
from urllib.parse import quote

import cv2
import numpy as np

from argus_dagster.infra.media import encode_jpeg
from argus_dagster.method.evidence.tools.vlm_qa import NO_VLM
from argus_dagster.method.leaderboard import coverage_text
from argus_dagster.method.rubric.taxonomy import DIMENSIONS

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1b1f24;max-width:1280px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px} .muted{color:#5b6570}
.prompt{background:#f4f6f8;border-left:4px solid #4a7bd0;padding:8px 12px;white-space:pre-wrap}
.frames{display:flex;gap:4px;flex-wrap:wrap;margin:4px 0} .frames figure{margin:0;font-size:11px;color:#5b6570}
.frames img{height:120px;display:block;border:1px solid #d0d7de}
.summary{display:flex;gap:24px;font-size:15px;margin:8px 0} .summary b{font-size:22px}
table{border-collapse:collapse;width:100%;font-size:13px} th,td{border:1px solid #d0d7de;padding:4px 6px;vertical-align:top;text-align:left}
th{background:#f4f6f8} .score{font-weight:600;text-align:center;width:48px}
.fired{background:#ffe3e3} .unscored{color:#8a6d00} .err{color:#b42318}
pre{white-space:pre-wrap;word-break:break-word;margin:0;font-size:11px;max-height:220px;overflow:auto;background:#fafbfc}
details summary{cursor:pointer;color:#4a7bd0}
.player{margin:4px 0;font-size:11px;color:#5b6570} .player video{width:480px;max-width:100%;height:auto;display:block;background:#000}
"""


# Characters of one field a page shows: a longer prompt, requirement, rationale or error is cut with
# a marker saying how much is left out, so one huge field never makes a huge page.
MAX_FIELD = 20_000


def bounded(text: str, most: int = MAX_FIELD) -> str:
    """``text``, or its first ``most`` characters and a marker of how many more there are."""
    if len(text) <= most:
        return text
    return f"{text[:most]} … [{len(text) - most:,} more characters not shown]"


def href(*parts: str) -> str:
    """A relative link to ``parts`` joined, each segment percent-encoded."""
    return "/".join(quote(p, safe="") for p in parts)


def esc(value: Any) -> str:
    """Text for HTML: markup in prompts, rubrics and rationales is shown, never interpreted; at most
    :data:`MAX_FIELD` characters of it (:func:`bounded`)."""
    return html.escape(bounded("" if value is None else str(value)), quote=True)


# The characters embedded JSON may not carry as themselves: "<" lets a value open a comment (``<!--``)
# or a script (``<script``) that changes where the HTML parser ends the element, or end it
# (``</script>``); ">" and "&" are markup to a reader of the page as XML; U+2028 and U+2029 end a
# line in older JavaScript. JSON has them only inside strings, where the \u escape reads back as the same text.
_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                                "\u2029": "\\u2029"})


def script_json(value: Any) -> str:
    """``value`` as JSON text that no value in it can break out of a ``<script>`` element: every page
    that embeds data goes through here (:func:`json_script`). Non-finite numbers are refused
    (``ValueError``): JSON has none, so the caller says what a missing value is."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False).translate(_SCRIPT_UNSAFE)


def json_script(element_id: str, value: Any) -> str:
    """A ``<script type="application/json">`` element holding ``value`` (:func:`script_json`), read
    back by a page's script with ``JSON.parse(element.textContent)``."""
    return f'<script type="application/json" id="{esc(element_id)}">{script_json(value)}</script>'


def jpeg(frame: np.ndarray, max_side: int = 320, quality: int = 80) -> bytes:
    """An RGB frame as JPEG bytes for a page, longest side at most ``max_side``."""
    return encode_jpeg(frame, max_side, quality)


def _img(data: bytes, caption: str = "") -> str:
    src = "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")
    return f'<figure><img src="{src}" alt="{esc(caption)}"><figcaption>{esc(caption)}</figcaption></figure>'


@dataclass
class FrameRow:
    """A labelled row of frames: a condition (first frame, subject, source) or the output."""

    label: str
    frames: list[bytes] = field(default_factory=list)
    captions: list[str] = field(default_factory=list)
    error: str | None = None


def _frame_row(row: FrameRow) -> str:
    body = "".join(_img(f, row.captions[i] if i < len(row.captions) else "") for i, f in enumerate(row.frames))
    err = f'<div class="err">{esc(row.error)}</div>' if row.error else ""
    return f'<div><div class="muted">{esc(row.label)}</div><div class="frames">{body}</div>{err}</div>'


def _player(src: str | None, caption: str) -> str:
    """A ``<video>`` a person can play (``src``: relative to the page, or a presigned URL); nothing
    without one."""
    if not src:
        return ""
    return (f'<figure class="player"><video controls muted preload="metadata" src="{esc(src)}"></video>'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


# What each rule of evidence-plan normalization did, as the lead of a sentence (argus_dagster.method.evidence.plan).
REPAIR_LEADS = {
    "vlm_only": "VLM-only ablation", "malformed_step": "A malformed step was repaired",
    "unknown_tool": "A step naming no known tool was dropped",
    "tool_unavailable": "A tool this environment cannot run was left out",
    "reference_source": "A reference that cannot be resolved was set to none",
    "absent_source": "The input has no source video", "absent_condition": "The input lacks a condition the plan used",
    "input_reference": "A web search for what the input already gives was removed",
    "no_web_search": "No web search is configured", "fill_missing": "A missing argument was filled in",
    "crop_ids": "Crop names were normalized", "retrieval_order": "A web search was moved before its first use",
    "dangling_operand": "A step's operand was repaired", "unconsumed_crop": "A crop nothing read gets a question",
    "fallback": "Fallback to the VLM", "empty_plan": "No step could run",
}


def repair_sentence(repair: Any) -> str:
    """A repair or fallback of a plan (``{"rule", "detail"}``) as one sentence a person reads."""
    if isinstance(repair, dict) and ("rule" in repair or "detail" in repair):
        rule = str(repair.get("rule") or "")
        lead = REPAIR_LEADS.get(rule, rule.replace("_", " ").capitalize() or "Repaired")
        detail = str(repair.get("detail") or "").strip().rstrip(".")
        return f"{lead}: {detail}." if detail else f"{lead}."
    if isinstance(repair, dict):
        return "; ".join(f"{k}: {v}" for k, v in repair.items())
    return str(repair)


def _num(x: Any, digits: int = 2) -> str:
    return "–" if x is None else f"{float(x):.{digits}f}"


def _json_list(text: Any) -> list:
    if not text:
        return []
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError:
        return [text]
    return value if isinstance(value, list) else [value]


# Every page here lives at reports/<TASK>/<model or compare>/, two folders below the overview site.
OVERVIEW_HREF = "../../index.html"


# What the evidence-only judge writes on every criterion whose plan asked the VLM, when none is
# configured: a page says it once, above its criteria, and each rationale names it in two words.
NO_VLM_SAID = f"vlm_qa: {NO_VLM}"
NO_VLM_SHORT = "vlm_qa (no VLM configured, see above)"
NO_VLM_NOTICE = ('<p class="no-vlm muted">No VLM is configured: every <code>vlm_qa</code> step was left out, so '
                 "the criteria only a VLM can answer are unscored and the others rest on measured evidence "
                 "(set ARGUS_VLM_BASE_URL and ARGUS_VLM_MODEL; docs/vlm.md).</p>")


def says_no_vlm(texts: Iterable[Any]) -> bool:
    """Whether any of ``texts`` (rationales) says that no VLM is configured."""
    return any(NO_VLM_SAID in str(t or "") for t in texts)


def _said_once(text: Any) -> Any:
    return str(text).replace(NO_VLM_SAID, NO_VLM_SHORT) if text else text


def _page(title: str, body: str, style: str = "") -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<style>{STYLE}{style}</style></head><body><div class="muted"><a class="overview" href="{OVERVIEW_HREF}">'
            f"all results</a></div>{body}</body></html>\n")


def _steps(plan: list, evidence: list) -> str:
    """The executed steps with each one's record: ok, unavailable (fallback) or failed."""
    if not plan and not evidence:
        return '<span class="muted">no steps</span>'
    by_step = {r.get("step", i): r for i, r in enumerate(evidence) if isinstance(r, dict)}
    items = []
    for i, step in enumerate(plan or [{}] * len(evidence)):
        rec = by_step.get(i, {})
        tool = step.get("tool") or rec.get("tool") or "?"
        state = "ok" if rec.get("ok") else ("unavailable" if rec.get("unavailable") else ("failed" if rec else "not run"))
        args = step.get("args") or {}
        args_text = ", ".join(f"{k}={v}" for k, v in args.items()) if isinstance(args, dict) else str(args)
        items.append(f"<li><code>{esc(tool)}</code>({esc(args_text)}) — {esc(state)}</li>")
    return f"<ol>{''.join(items)}</ol>"


def _criterion_row(c: dict) -> str:
    score = c.get("score")
    fired = bool(c.get("fired"))
    cls = "fired" if fired else ""
    dim: Any = c.get("dimension")  # whatever the row holds: not a known dimension number falls back to the text
    label = DIMENSIONS.get(dim, f"dimension {dim}")
    kind = f"{c.get('type', '?')} · {c.get('importance', '?')}"
    if c.get("type") == "hard":
        kind += f" · cap {c.get('hard_cap')} below {_num(c.get('fail_threshold'), 1)}"
    plan, evidence, repairs = _json_list(c.get("plan")), _json_list(c.get("evidence")), _json_list(c.get("repairs"))
    repairs_html = ("<div><b>repairs:</b><ul>" + "".join(f"<li>{esc(repair_sentence(r))}</li>" for r in repairs)
                    + "</ul></div>" if repairs else "")
    status = f'<div class="muted">plan: {esc(c.get("plan_status") or "-")}</div>'
    err = f'<div class="err">{esc(c["error"])}</div>' if c.get("error") else ""
    ev = esc(json.dumps(evidence, indent=1, default=str)) if evidence else ""
    score_html = (f'<td class="score">{float(score):g}/10{"<br>fired" if fired else ""}</td>' if score is not None
                  else '<td class="score unscored">–</td>')
    return (f'<tr class="{cls}"><td><code>{esc(c.get("criterion_id"))}</code><br><span class="muted">{esc(label)}</span>'
            f'<br><span class="muted">{esc(kind)}</span></td>'
            f'<td>{esc(c.get("requirement"))}<details><summary>scoring rule</summary>'
            f'{esc(c.get("scoring_rule"))}</details></td>'
            f'<td>{status}{_steps(plan, evidence)}{repairs_html}{err}'
            + (f"<details><summary>evidence</summary><pre>{ev}</pre></details>" if ev else "")
            + f'</td>{score_html}<td>{esc(_said_once(c.get("rationale")))}<div class="muted">{esc(c.get("judge"))}</div></td></tr>')


def _rubric_origin(generator: dict | None) -> str:
    """Who wrote the rubric and, for a generated one, what the generator was told (its instruction and
    the request, images as ``[image]``), so a reader can judge the criteria against their brief."""
    if not generator:
        return ""
    who = ":".join(str(generator.get(k, "?")) for k in ("backend", "model", "prompt_version"))
    parts = [f'<h2>Rubric</h2><div class="muted">written by {esc(who)}</div>']
    if generator.get("instruction"):
        parts.append("<details><summary>what the rubric generator was told</summary>"
                     f"<pre>{esc(generator['instruction'])}</pre>"
                     f"<pre>{esc(generator.get('request', ''))}</pre></details>")
    elif generator.get("backend") == "offline":
        parts.append('<div class="muted">the offline rules wrote it (no generation prompt)</div>')
    elif generator.get("backend") not in (None, "?"):
        parts.append('<div class="muted">the generation prompt was not recorded with this rubric</div>')
    if generator.get("rule_problems"):
        parts.append("<div><b>rules the generator's answer still broke:</b><ul>"
                     + "".join(f"<li>{esc(p)}</li>" for p in generator["rule_problems"]) + "</ul></div>")
    return "".join(parts)


def render_video_report(*, task: str, model: str, input_id: str, prompt: str, conditions: list[FrameRow],
                        output: FrameRow, video: dict, criteria: list[dict], index_href: str | None = "index.html",
                        compare_href: str | None = None, rubric_generator: dict | None = None,
                        video_src: str | None = None, source_src: str | None = None,
                        firm_href: str | None = None) -> str:
    """One video's page: first its score, caps and scored criteria, then the video (played, and its
    stills with their times), the input, the criteria left unscored and who wrote the rubric.
    ``video``: a ``video_scores`` row; ``criteria``: per criterion the rubric's requirement and
    scoring rule, the evidence row (plan, repairs, evidence) and the score row;
    ``rubric_generator``: the rubric's ``generator`` block (who wrote it, and what it was told);
    ``video_src``, ``source_src``: the candidate's and the source video's playable URLs
    (:func:`argus_dagster.outputs.page_media.page_video`); ``firm_href``: its FIRM-Video page (the
    checklist, verdicts and evidence), where one was written."""
    caps = video.get("caps_fired") or []
    links = " · ".join(x for x in (
        f'<a href="{esc(index_href)}">all videos of {esc(task)} × {esc(model)}</a>' if index_href else "",
        f'<a href="{esc(compare_href)}">compare models on this input</a>' if compare_href else "",
        f'<a class="firm" href="{esc(firm_href)}">its FIRM-Video checklist</a>' if firm_href else "") if x)
    summary = (f'<div class="summary"><span>final <b>{_num(video.get("final_score"))}</b></span>'
               f'<span>base <b>{_num(video.get("base_score"))}</b></span><span>α {_num(video.get("cap_alpha"))}</span>'
               f'<span>caps fired: {esc(", ".join(caps) or "none")}</span>'
               f'<span>covers <b>{esc(_coverage(video))}</b></span>'
               + (f'<span>needs a VLM: {esc(", ".join(video.get("needs_vlm") or []))}</span>' if video.get("needs_vlm") else "")
               + '</div>')
    err = f'<div class="err">{esc(video["error"])}</div>' if video.get("error") else ""
    head = ("<tr><th>criterion</th><th>requirement</th><th>tool trace and evidence</th><th>score</th>"
            "<th>rationale</th></tr>")

    def table(rows: list[dict], cls: str) -> str:
        return (f'<table class="{cls}">{head}'
                + "".join(_criterion_row({**c, "fired": c.get("criterion_id") in caps}) for c in rows) + "</table>")

    scored = [c for c in criteria if c.get("score") is not None]
    unscored = [c for c in criteria if c.get("score") is None]
    scored_html = (table(scored, "criteria scored") if scored else
                   f'<p class="muted">{"no criterion could be scored" if criteria else "no criteria were judged"}</p>')
    unscored_html = (f'<h2 class="unscored-head">Not scored ({len(unscored)} of {len(criteria)})</h2>'
                     f"<details><summary>each with why</summary>{table(unscored, 'criteria unscored')}</details>"
                     if unscored else "")
    source_player = _player(source_src, "source video") if source_src else ""
    notice = NO_VLM_NOTICE if says_no_vlm(c.get("rationale") for c in criteria) else ""
    body = (f"<h1>{esc(task)} · {esc(model)} · {esc(input_id)}</h1><div class=\"muted\">{links}</div>"
            f"{summary}{err}{notice}<h2>Scored criteria</h2>{scored_html}"
            f"<h2>Output</h2>{_player(video_src, 'the candidate video')}{_frame_row(output)}"
            f'<h2>Input</h2><div class="prompt">{esc(prompt)}</div>'
            + "".join(_frame_row(r) for r in conditions) + source_player
            + unscored_html + _rubric_origin(rubric_generator))
    return _page(f"{task} {model} {input_id}", body)


def _coverage(v: dict) -> str:
    """``3 of 6 criteria · evidence-only · 55% of the weight``: what a score covers."""
    text = coverage_text(v.get("n_scored"), v.get("n_criteria"), v.get("judge"))
    if v.get("weight_scored") is not None:
        text += f" · {v['weight_scored']:.0%} of the weight"
    return text


def render_index(*, task: str, model: str, rows: Iterable[dict]) -> str:
    """A partition's index: one line per video with its scores and a link to its page."""
    lines = []
    for r in rows:
        name = f'<a href="{esc(r["href"])}">{esc(r["input_id"])}</a>' if r.get("href") else esc(r["input_id"])
        lines.append(f"<tr><td>{name}</td><td>{esc((r.get('prompt') or '')[:160])}</td>"
                     f'<td class="score">{_num(r.get("final_score"))}</td><td class="score">{_num(r.get("base_score"))}</td>'
                     f"<td>{esc(_coverage(r))}</td><td>{esc(', '.join(r.get('needs_vlm') or []) or '-')}</td>"
                     f"<td>{esc(', '.join(r.get('caps_fired') or []) or '-')}</td>"
                     f'<td class="err">{esc(r.get("error") or "")}</td></tr>')
    body = (f"<h1>{esc(task)} × {esc(model)}</h1><table><tr><th>input</th><th>prompt</th><th>final</th><th>base</th>"
            f"<th>covers</th><th>needs a VLM</th><th>caps fired</th><th>error</th></tr>{''.join(lines)}</table>")
    return _page(f"{task} {model}", body)


COMPARE_STYLE = """
.grid{display:grid;grid-template-columns:repeat(var(--models),minmax(220px,1fr));gap:12px;align-items:start;margin:8px 0}
.grid .model h2{font-size:14px;margin:4px 0} .grid .player video{width:100%} .grid .frames img{height:72px}
.sync{display:flex;gap:8px;align-items:center;margin:8px 0} .sync button{font:inherit;padding:2px 10px}
.sync input[type=range]{flex:1}
.media-notice{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;margin:8px 0}
table.criteria td.score{width:auto;min-width:64px} table.criteria td.score details summary{color:#1b1f24}
table.criteria .cid{font-size:11px;color:#5b6570}
"""

# The comparison page's videos play, pause and seek together: any one's play, pause or seek is every
# one's (a seek to a time past a shorter video's end puts that one at its end); the bar below seeks all.
# The notice says the browser copies are being made until each video can play or has failed.
COMPARE_SCRIPT = """
(function () {
  var videos = Array.prototype.slice.call(document.querySelectorAll('.grid video'));
  var notice = document.querySelector('.media-notice');
  function settled() {
    if (notice && videos.every(function (v) { return v.readyState >= 2 || v.error; })) { notice.hidden = true; }
  }
  videos.forEach(function (v) {
    v.addEventListener('loadeddata', settled); v.addEventListener('error', settled, true);
  });
  settled();
  if (videos.length < 2) { var bar = document.querySelector('.sync'); if (bar) { bar.hidden = videos.length === 0; } }
  // A seek this script makes is followed, not passed on: only a person's seek moves the others.
  var following = new Set();
  function seekTo(o, t) {
    var at = Math.min(t, isFinite(o.duration) ? o.duration : t);
    if (Math.abs(o.currentTime - at) > 0.05) { following.add(o); o.currentTime = at; }
  }
  videos.forEach(function (v) {
    v.addEventListener('play', function () { videos.forEach(function (o) { if (o !== v && o.paused) { o.play().catch(function () {}); } }); });
    v.addEventListener('pause', function () { videos.forEach(function (o) { if (o !== v && !o.paused) { o.pause(); } }); });
    v.addEventListener('seeked', function () {
      if (following.delete(v)) { return; }
      videos.forEach(function (o) { if (o !== v) { seekTo(o, v.currentTime); } });
    });
  });
  var play = document.getElementById('play-all'), pause = document.getElementById('pause-all');
  var seek = document.getElementById('seek-all');
  if (play) { play.addEventListener('click', function () { videos.forEach(function (o) { o.play().catch(function () {}); }); }); }
  if (pause) { pause.addEventListener('click', function () { videos.forEach(function (o) { o.pause(); }); }); }
  if (seek) {
    seek.addEventListener('input', function () {
      var longest = Math.max.apply(null, videos.map(function (o) { return isFinite(o.duration) ? o.duration : 0; }));
      var t = parseFloat(seek.value) * longest;
      videos.forEach(function (o) { seekTo(o, t); });
    });
  }
})();
"""


def score_colour(score: float) -> str:
    """Red (0) through yellow to green (10), light enough for dark text."""
    hue = max(0.0, min(10.0, score)) * 12.0
    return f"hsl({hue:.0f},70%,78%)"


def render_comparison(*, task: str, input_id: str, prompt: str, models: list[dict],
                      conditions: list[FrameRow] | None = None, source_src: str | None = None) -> str:
    """The input (prompt and its conditions: first frame, subject images, source video) on top, the
    models side by side below it (best first), their videos in one row that play, pause and seek
    together, then one table with the criteria as rows, in their words, and the models as columns,
    each cell coloured by its score with the judge's rationale a click away.

    ``models``: per model ``model``, ``final_score``, ``base_score``, ``caps_fired``, ``error``,
    ``frames`` (JPEG bytes) and ``frame_times`` (their captions), ``video`` (its playable URL),
    ``href``, ``scores`` ({criterion_id: score or None}) and, where its card has them,
    ``requirements`` ({criterion_id: the criterion's words}) and ``rationales`` ({criterion_id: why});
    ``source_src``: the source video's playable URL (an edit's).
    """
    models = sorted(models, key=lambda m: (m.get("final_score") is None, -(m.get("final_score") or 0.0), m["model"]))
    blocks = []
    for m in models:
        link = f'<a href="{esc(m["href"])}">{esc(m["model"])}</a>' if m.get("href") else esc(m["model"])
        caps = ", ".join(m.get("caps_fired") or []) or "none"
        covers = f'<div class="muted">{esc(_coverage(m))}</div>' if m.get("n_criteria") is not None else ""
        blocks.append(f'<div class="model" data-model="{esc(m["model"])}"><h2>{link}: final {_num(m.get("final_score"))}</h2>'
                      f'<div class="muted">base {_num(m.get("base_score"))}, caps {esc(caps)}</div>{covers}'
                      + _player(m.get("video"), f"{m['model']}'s video")
                      + _frame_row(FrameRow("output", m.get("frames") or [], list(m.get("frame_times") or []),
                                            error=m.get("error"))) + "</div>")
    n_videos = sum(1 for m in models if m.get("video"))
    sync = ('<div class="sync no-print"><button id="play-all" type="button">play all</button>'
            '<button id="pause-all" type="button">pause all</button>'
            '<input id="seek-all" type="range" min="0" max="1" step="0.001" value="0" aria-label="seek every video"></div>'
            if n_videos else "")
    notice = ('<p class="media-notice">Preparing the browser copies of the videos: the first visit to this page '
              "makes them (a few seconds a video); they play once ready.</p>" if n_videos or source_src else "")
    words: dict[str, str] = {}
    for m in models:
        for c, text in (m.get("requirements") or {}).items():
            words.setdefault(c, text)

    def order(c: str) -> tuple[str, str]:  # by the requirement's words, then by id
        return words.get(c, c).lower(), c

    criteria = sorted({c for m in models for c in (m.get("scores") or {})}, key=order)
    head = "".join(f"<th>{esc(m['model'])}</th>" for m in models)

    def cell(m: dict, c: str) -> str:
        score = (m.get("scores") or {}).get(c)
        why = _said_once((m.get("rationales") or {}).get(c))
        if score is None:
            text = "–"
            style = ""
        else:
            text, style = f"{float(score):g}", f' style="background:{score_colour(float(score))}"'
        inner = f"<details><summary>{text}</summary>{esc(why)}</details>" if why else text
        return f'<td class="score" data-model="{esc(m["model"])}"{style}>{inner}</td>'

    rows = "".join(f'<tr data-criterion="{esc(c)}"><td>{esc(words.get(c) or c)}'
                   + (f' <span class="cid">{esc(c)}</span>' if c in words else "") + "</td>"
                   + "".join(cell(m, c) for m in models) + "</tr>" for c in criteria)
    body = (f"<h1>{esc(task)} · {esc(input_id)}: models compared</h1>"
            f'<h2>Input</h2><div class="prompt">{esc(prompt)}</div>'
            + "".join(_frame_row(r) for r in conditions or []) + _player(source_src, "source video")
            + f'<h2 class="outputs">Outputs</h2>{notice}{sync}'
            + f'<div class="grid" style="--models:{max(len(models), 1)}">{"".join(blocks)}</div>'
            + "<h2>Criterion scores (0-10; click a score for the judge's reason)</h2>"
            + (NO_VLM_NOTICE if says_no_vlm(w for m in models for w in (m.get("rationales") or {}).values()) else "")
            + f'<table class="criteria"><tr><th>criterion</th>{head}</tr>{rows}</table>'
            + f"<script>{COMPARE_SCRIPT}</script>")
    return _page(f"{task} {input_id} compared", body, style=COMPARE_STYLE)


def leaderboard_png(task: str, rows: list[dict], width: int = 640) -> bytes:
    """A per-task leaderboard plot: one bar per model (mean final, 0-10) with its 95% interval."""
    row_h, top, left, right = 26, 54, 170, 60
    height = top + row_h * max(len(rows), 1) + 16
    img = np.full((height, width, 3), 255, np.uint8)
    scale = (width - left - right) / 10.0
    font = cv2.FONT_HERSHEY_SIMPLEX
    partial = any(r.get("ci_scope") == "scored criteria only" for r in rows)
    title = f"{task}: mean final score, 95% CI" + (" (scored criteria only)" if partial else "")
    cv2.putText(img, title, (8, 20), font, 0.5, (20, 20, 20), 1, cv2.LINE_AA)
    for t in range(0, 11, 2):
        x = int(left + t * scale)
        cv2.line(img, (x, top - 8), (x, height - 12), (225, 225, 225), 1)
        cv2.putText(img, str(t), (x - 4, top - 14), font, 0.4, (90, 90, 90), 1, cv2.LINE_AA)
    for i, r in enumerate(rows):
        y = top + i * row_h
        name = str(r["model"])
        cv2.putText(img, name if len(name) <= 20 else name[:19] + "~", (8, y + 17), font, 0.45, (20, 20, 20), 1, cv2.LINE_AA)
        mean = r.get("mean_final")
        if mean is None:
            cv2.putText(img, "no score", (left + 4, y + 17), font, 0.42, (0, 90, 180), 1, cv2.LINE_AA)
            continue
        cv2.rectangle(img, (left, y + 5), (int(left + mean * scale), y + row_h - 5), (208, 123, 74), -1)
        lo, hi = r.get("ci_low"), r.get("ci_high")
        if lo is not None and hi is not None:
            yc = y + row_h // 2
            xl, xh = int(left + lo * scale), int(left + hi * scale)
            cv2.line(img, (xl, yc), (xh, yc), (30, 30, 30), 1, cv2.LINE_AA)
            for x in (xl, xh):
                cv2.line(img, (x, yc - 5), (x, yc + 5), (30, 30, 30), 1, cv2.LINE_AA)
        cv2.putText(img, f"{mean:.2f}", (int(left + 10 * scale) + 6, y + 17), font, 0.42, (20, 20, 20), 1, cv2.LINE_AA)
    ok, buf = cv2.imencode(".png", cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    if not ok:
        raise ValueError("PNG encoding failed")
    return buf.tobytes()
