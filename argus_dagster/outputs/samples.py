"""The sample browser (``reports/samples.html``): every scored video of an evaluation in one table, with
what its score covers and why a video has none, filtered by any column and sorted by any column; the
inputs on which two models disagree most, and the videos whose final score moved most between the two
latest passes (:mod:`argus_dagster.outputs.changes`), and those on which the evaluator and people
disagree most, where the bench has human ratings.

One self-contained file (its rows as JSON inside it, written by
:func:`argus_dagster.outputs.report.json_script` so that no value changes how the page parses; its
script inline): it works opened from disk and from ``argus open`` alike, and fetches nothing. Each row links to its video's report where that page
exists, each disagreement to its input's comparison page.

Filters, one per column: text columns keep the rows that contain the text (any case); number columns
take ``>=5``, ``<3``, ``=7``, ``2..6`` (both ends included), or ``-`` for the rows without a value.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from argus_dagster.infra.names import file_name, sample_file_name
from argus_dagster.infra.storage import LOCAL, Storage, join
from argus_dagster.infra.tables import stored_table
from argus_dagster.outputs.changes import MOVED_HEAD, evaluators, moved_rows, short_pass, video_link
from argus_dagster.outputs.changes import STYLE as CHANGES_STYLE
from argus_dagster.outputs.deltas import Diff
from argus_dagster.outputs.firm_pages import page_name
from argus_dagster.outputs.history_words import evaluator_label
from argus_dagster.outputs.report import STYLE, esc, href, json_script

# The table's columns: (key in a row, header a person reads, kind).
COLUMNS = (("task", "task", "text"), ("model", "model", "text"), ("input_id", "input", "text"),
           ("sample", "sample", "text"), ("final_score", "final score", "number"),
           ("base_score", "base score", "number"), ("criteria_low", "lowest criterion", "number"),
           ("criteria_high", "highest criterion", "number"), ("n_scored", "criteria scored", "number"),
           ("n_criteria", "criteria", "number"), ("weight_scored", "share of weight scored", "number"),
           ("judge", "judge", "text"), ("error", "error", "text"))
# FIRM-Video's ratings (1-5) of each video, where the protocol ran: before the judge column.
FIRM_COLUMNS = (("firm_if", "FIRM IF", "number"), ("firm_wc", "FIRM WC", "number"), ("firm_pq", "FIRM PQ", "number"))
DISAGREEMENTS = 50  # the pairs shown, largest difference first

PAGE_STYLE = """
.filters input{width:100%;box-sizing:border-box;font:inherit;padding:2px 4px;border:1px solid #d0d7de}
.filters input.invalid{border-color:#cf222e;background:#fff0f0}
table.samples td,table.samples th{padding:3px 6px;white-space:nowrap} table.samples td.error{white-space:normal;max-width:28em}
table.samples th.sort{cursor:pointer} table.samples th[aria-sort=ascending]::after{content:" ▲"}
table.samples th[aria-sort=descending]::after{content:" ▼"} .count{margin:6px 0}
"""

SCRIPT = """
(function () {
  var columns = JSON.parse(document.getElementById('columns').textContent);
  var rows = JSON.parse(document.getElementById('rows').textContent);
  var body = document.querySelector('table.samples tbody');
  var filters = Array.prototype.slice.call(document.querySelectorAll('table.samples .filters input'));
  var order = {key: null, asc: true};

  function numberTest(text) {  // '>=5', '<3', '=7', '2..6', '-'; null when the text is no such filter
    var t = text.replace(/\\s+/g, '');
    if (t === '-') { return function (v) { return v === null; }; }
    var m = t.match(/^(-?[0-9.]+)\\.\\.(-?[0-9.]+)$/);
    if (m && isFinite(m[1]) && isFinite(m[2])) {
      var lo = parseFloat(m[1]), hi = parseFloat(m[2]);
      return function (v) { return v !== null && v >= lo && v <= hi; };
    }
    m = t.match(/^(>=|<=|>|<|=)?(-?[0-9.]+)$/);
    if (!m || !isFinite(m[2])) { return null; }
    var x = parseFloat(m[2]), op = m[1] || '=';
    return function (v) {
      if (v === null) { return false; }
      return op === '>=' ? v >= x : op === '<=' ? v <= x : op === '>' ? v > x : op === '<' ? v < x
        : Math.abs(v - x) < 1e-9;
    };
  }

  function tests() {
    var out = [];
    filters.forEach(function (input) {
      var text = input.value.trim(), key = input.dataset.key, kind = input.dataset.kind;
      input.classList.remove('invalid');
      if (!text) { return; }
      if (kind === 'number') {
        var test = numberTest(text);
        if (!test) { input.classList.add('invalid'); return; }
        out.push(function (r) { return test(r[key]); });
      } else {
        var low = text.toLowerCase();
        out.push(function (r) { return r[key] !== null && String(r[key]).toLowerCase().indexOf(low) >= 0; });
      }
    });
    return out;
  }

  function cell(r, c) {
    var v = r[c.key];
    if (v === null || v === '') { return c.kind === 'number' ? '–' : ''; }
    if (c.key === 'weight_scored') { return Math.round(v * 100) + '%'; }
    if (c.kind === 'number' && c.key !== 'n_scored' && c.key !== 'n_criteria' && c.key.indexOf('firm_') !== 0) {
      return v.toFixed(2);
    }
    return String(v);
  }

  function draw() {
    var keep = tests();
    var shown = rows.filter(function (r) { return keep.every(function (t) { return t(r); }); });
    if (order.key !== null) {
      var k = order.key, sign = order.asc ? 1 : -1;
      shown.sort(function (a, b) {
        var x = a[k], y = b[k];
        if (x === null || x === '') { return (y === null || y === '') ? 0 : 1; }  // a missing value stays last
        if (y === null || y === '') { return -1; }
        if (typeof x === 'string') { x = x.toLowerCase(); y = String(y).toLowerCase(); }
        return (x < y ? -1 : x > y ? 1 : 0) * sign;
      });
    }
    var html = [];
    shown.forEach(function (r) {
      var tds = columns.map(function (c) {
        var text = cell(r, c).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
        if (c.key === 'input_id' && r.href) {
          text = '<a class="report" href="' + r.href + '">' + text + '</a>';
        }
        if (c.key === 'firm_if' && r.firm_href) {
          text = '<a class="firm" href="' + r.firm_href + '">' + (text || 'page') + '</a>';
        }
        return '<td class="' + c.key + '" data-key="' + c.key + '">' + text + '</td>';
      });
      html.push('<tr data-row="' + r.row + '">' + tds.join('') + '</tr>');
    });
    body.innerHTML = html.join('');
    document.getElementById('count').textContent = shown.length + ' of ' + rows.length + ' videos shown';
  }

  filters.forEach(function (input) { input.addEventListener('input', draw); });
  document.querySelectorAll('table.samples th.sort').forEach(function (th) {
    th.title = 'click to sort';
    th.addEventListener('click', function () {
      var key = th.dataset.key;
      order = {key: key, asc: order.key === key ? !order.asc : true};
      document.querySelectorAll('table.samples th.sort').forEach(function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', order.asc ? 'ascending' : 'descending');
      draw();
    });
  });
  draw();
})();
"""


def columns_for(firm_scores: pl.DataFrame | None) -> tuple[tuple[str, str, str], ...]:
    """The table's columns: FIRM-Video's ratings before the judge's where ``firm_scores`` has rows."""
    if firm_scores is None or not firm_scores.height:
        return COLUMNS
    at = [c for c, _, _ in COLUMNS].index("judge")
    return COLUMNS[:at] + FIRM_COLUMNS + COLUMNS[at:]


def sample_rows(video_scores: pl.DataFrame, criterion_scores: pl.DataFrame | None,
                firm_scores: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per stored video: its scores, the lowest and highest of its criteria's scores, what its
    score covers, FIRM-Video's ratings where it ran (``firm_scores``), its judge by name and its error;
    in task, model, input and sample order."""
    keys = ["task", "model", "input_id", "sample"]
    v = video_scores.with_columns(pl.col("sample").fill_null(""))
    if criterion_scores is not None and criterion_scores.height:
        spread = (criterion_scores.with_columns(pl.col("sample").fill_null(""))
                  .group_by(keys).agg(pl.col("score").min().alias("criteria_low"),
                                      pl.col("score").max().alias("criteria_high")))
        v = v.join(spread, on=keys, how="left")
    else:
        v = v.with_columns(pl.lit(None, pl.Float64).alias("criteria_low"), pl.lit(None, pl.Float64).alias("criteria_high"))
    v = v.with_columns(pl.col("judge").map_elements(lambda j: evaluator_label(j) if j else "", return_dtype=pl.String),
                       pl.col("error").fill_null(""))
    if firm_scores is not None and firm_scores.height:
        firm = firm_scores.select(*[pl.col(k).cast(pl.String).fill_null("") if k == "sample" else pl.col(k) for k in keys],
                                  *[pl.col(f"{d}_rating").cast(pl.Int64).alias(f"firm_{d}") for d in ("if", "wc", "pq")])
        v = v.join(firm, on=keys, how="left")
    return v.select([c for c, _, _ in columns_for(firm_scores)]).sort(keys)


def model_disagreements(video_scores: pl.DataFrame, limit: int = DISAGREEMENTS) -> pl.DataFrame:
    """Per task, input and pair of models that both have a final score on it (a model's mean over its
    samples): the two scores and their difference, the largest first (ties in task, input, then model
    names' order), ``limit`` of them.

    The same rows as joining every pair of models on every input, without that join (models squared
    per input): an input's largest difference is between its highest and lowest scoring models, so
    only the ``limit`` inputs with the largest such range can hold a shown pair, and in each of those
    only pairs of one of its ``limit + 1`` lowest and one of its ``limit + 1`` highest models (a model
    past those has at least ``limit`` pairs as large before it, ties ordered by name included). Its
    time and size grow with the videos, not with the models squared."""
    keys = ["task", "input_id"]
    per = (video_scores.filter(pl.col("final_score").is_finite(), *[pl.col(k).is_not_null() for k in (*keys, "model")])
           .group_by("task", "input_id", "model").agg(pl.col("final_score").mean().alias("score")))
    ranges = (per.group_by(keys).agg((pl.col("score").max() - pl.col("score").min()).alias("range"), pl.len().alias("n"))
              .filter(pl.col("n") >= 2).sort(["range", *keys], descending=[True, False, False]).head(limit))
    per = per.join(ranges.select(keys), on=keys)
    ends = limit + 1
    low = per.filter(pl.struct("score", "model").rank("ordinal").over(keys) <= ends)
    high = per.filter(pl.struct(-pl.col("score"), "model").rank("ordinal").over(keys) <= ends)
    pairs = low.join(high, on=keys, suffix="_b").filter(pl.col("model") != pl.col("model_b"))
    first = pl.col("model") < pl.col("model_b")
    pairs = (pairs.select(*keys, pl.when(first).then("model").otherwise("model_b").alias("model_a"),
                          pl.when(first).then("score").otherwise("score_b").alias("score_a"),
                          pl.when(first).then("model_b").otherwise("model").alias("model_b"),
                          pl.when(first).then("score_b").otherwise("score").alias("score_b"),
                          (pl.col("score") - pl.col("score_b")).abs().alias("difference"))
             .unique(["task", "input_id", "model_a", "model_b"]))
    return pairs.sort(["difference", "task", "input_id", "model_a", "model_b"],
                      descending=[True, False, False, False, False]).head(limit)


def people_disagreements(video_scores: pl.DataFrame, people: pl.DataFrame | None,
                         limit: int = DISAGREEMENTS) -> pl.DataFrame:
    """Per task, the videos that people rated and the evaluator scored (``people``: ``task, input_id,
    model, sample, score``, raters averaged): each side's score and its place among the task's such
    videos (0 the lowest, 100 the highest, ties sharing their mean place), the largest difference of
    places first. Places, not scores, because the two scales differ."""
    schema = {"task": pl.String, "model": pl.String, "input_id": pl.String, "sample": pl.String, "final_score": pl.Float64,
              "evaluator_place": pl.Float64, "people": pl.Float64, "people_place": pl.Float64, "difference": pl.Float64}
    if people is None or not people.height:
        return pl.DataFrame(schema=schema)
    keys = ["task", "model", "input_id", "sample"]
    scored = (video_scores.with_columns(pl.col("sample").cast(pl.String).fill_null(""))
              .filter(pl.col("final_score").is_not_null()).select(*keys, "final_score"))
    both = scored.join(people.with_columns(pl.col("sample").cast(pl.String).fill_null(""))
                       .select(*keys, pl.col("score").cast(pl.Float64).alias("people")), on=keys)

    def place(col: str) -> pl.Expr:
        n = pl.len().over("task")
        return pl.when(n > 1).then((pl.col(col).rank("average").over("task") - 1) / (n - 1) * 100)

    both = both.with_columns(place("final_score").alias("evaluator_place"), place("people").alias("people_place"))
    both = both.with_columns((pl.col("evaluator_place") - pl.col("people_place")).abs().alias("difference"))
    return (both.filter(pl.col("difference").is_not_null()).select(list(schema))
            .sort(["difference", *keys], descending=[True, False, False, False, False]).head(limit))


def _people(video_scores: pl.DataFrame, people: pl.DataFrame | None, present: set[str]) -> str:
    """Where the evaluator and people disagree most, or why that cannot be said."""
    head = '<h2 id="people">Where the evaluator and people disagree most (place among the rated videos)</h2>'
    if people is None or not people.height:
        return head + ('<p class="muted">no human ratings: add <code>$ARGUS_HOME/benches/&lt;bench&gt;/human/'
                       "&lt;TASK&gt;.csv</code> (input_id, model, score)</p>")
    table = people_disagreements(video_scores, people)
    if not table.height:
        return head + '<p class="muted">no video has both a final score and two or more rated videos beside it</p>'
    rows = "".join(
        f'<tr data-task="{esc(r["task"])}" data-model="{esc(r["model"])}" data-input="{esc(r["input_id"])}" '
        f'data-sample="{esc(r["sample"])}"><td>{esc(r["task"])}</td><td>{esc(r["model"])}</td>'
        f'<td>{video_link(present, r["task"], r["model"], r["input_id"], r["sample"])}</td><td class="score" data-key="final_score">{r["final_score"]:.2f}</td>'
        f'<td class="score" data-key="evaluator_place">{r["evaluator_place"]:.0f}</td>'
        f'<td class="score" data-key="people">{r["people"]:.2f}</td>'
        f'<td class="score" data-key="people_place">{r["people_place"]:.0f}</td>'
        f'<td class="score" data-key="difference">{r["difference"]:.0f}</td></tr>' for r in table.iter_rows(named=True))
    return (head + '<p class="muted">A video\'s place among its task\'s videos that people rated and the evaluator '
            "scored: 0 the lowest, 100 the highest (ties share their mean place); the scales differ, the places "
            "compare.</p>"
            '<table class="people"><thead><tr><th>task</th><th>model</th><th>video</th><th>final score</th>'
            "<th>its place</th><th>people's mean</th><th>their place</th><th>difference</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _passes(changes: Diff | None, present: set[str]) -> str:
    """Where the two latest passes disagree most: the videos whose final score moved most."""
    head = '<h2 id="passes">Where the two latest passes disagree most (final score of the same video)</h2>'
    if changes is None:
        return head + '<p class="muted">one pass so far: nothing to compare</p>'
    said = (f'<p class="muted">pass <code>{esc(short_pass(changes.before))}</code> ({esc(changes.before_time)} UTC), evaluator '
            f'{esc(evaluators(changes.judges[0]))} → pass <code>{esc(short_pass(changes.after))}</code> ({esc(changes.after_time)} UTC), '
            f"evaluator {esc(evaluators(changes.judges[1]))}</p>")
    if not changes.videos.height:
        return head + said + '<p class="muted">no video\'s final score moved</p>'
    return (head + said + f'<table class="passes">{MOVED_HEAD}<tbody>{moved_rows(changes.videos, present)}</tbody></table>')


def render_samples(reports_dir: Path | str, video_scores: pl.DataFrame | None,
                   criterion_scores: pl.DataFrame | None = None, *, bench: str | None = None,
                   store: Storage | None = None, changes: Diff | None = None,
                   people: pl.DataFrame | None = None, firm_scores: pl.DataFrame | None = None) -> str:
    """The sample browser's HTML; a row links to its video's report, a disagreement to its input's
    comparison page, only where that page exists under ``reports_dir`` (listed once through ``store``).
    ``changes``: the latest two passes compared, whose videos that moved most it lists; ``people``:
    human ratings (``task, input_id, model, sample, score``) to set beside the evaluator's;
    ``firm_scores``: FIRM-Video's, whose ratings are columns and whose pages the IF cell links."""
    store = store or LOCAL
    present = {o.rel for o in store.list(reports_dir)}
    title = f"{bench}: every video" if bench else "every video"
    if video_scores is None or not video_scores.height:
        body = '<p class="muted">no video scores stored yet: run <code>argus demo</code> or <code>argus evaluate</code></p>'
        return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
                f"<style>{STYLE}</style></head><body><h1>{esc(title)}</h1>{body}</body></html>\n")
    table = sample_rows(video_scores, criterion_scores, firm_scores)
    shown = columns_for(firm_scores)
    rows = []
    for i, r in enumerate(table.iter_rows(named=True)):
        name = sample_file_name(r["input_id"], r["sample"]) + ".html"
        page = f"{r['task']}/{file_name(r['model'])}/{name}"
        firm = f"{r['task']}/{file_name(r['model'])}/{page_name(r['input_id'], r['sample'])}"
        values = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in r.items()}
        rows.append({**values, "row": i, "href": href(r["task"], file_name(r["model"]), name) if page in present else None,
                     "firm_href": href(r["task"], file_name(r["model"]), *page_name(r["input_id"], r["sample"]).split("/"))
                     if firm in present else None})
    heads = "".join(f'<th class="sort" data-key="{key}">{esc(name)}</th>' for key, name, _ in shown)
    inputs = "".join(f'<th><input data-key="{key}" data-kind="{kind}" aria-label="filter {esc(name)}" '
                     f'placeholder="{"e.g. >=5" if kind == "number" else "contains"}"></th>'
                     for key, name, kind in shown)
    pairs = model_disagreements(video_scores)
    pair_rows = []
    for r in pairs.iter_rows(named=True):
        compare = f"{r['task']}/compare/{file_name(r['input_id'])}.html"
        link = href(r["task"], "compare", file_name(r["input_id"]) + ".html")
        name = (f'<a class="compare" href="{link}">{esc(r["input_id"])}</a>' if compare in present
                else esc(r["input_id"]))
        pair_rows.append(f'<tr><td>{esc(r["task"])}</td><td>{name}</td><td>{esc(r["model_a"])}</td>'
                         f'<td class="score">{r["score_a"]:.2f}</td><td>{esc(r["model_b"])}</td>'
                         f'<td class="score">{r["score_b"]:.2f}</td><td class="score difference">{r["difference"]:.2f}</td></tr>')
    disagreements = (
        '<table class="disagreements"><thead><tr><th>task</th><th>input</th><th>model</th><th>its score</th>'
        f'<th>other model</th><th>its score</th><th>difference</th></tr></thead><tbody>{"".join(pair_rows)}</tbody></table>'
        if pair_rows else '<p class="muted">no input has final scores from two models</p>')
    columns = [{"key": k, "name": n, "kind": kind} for k, n, kind in shown]
    help_text = ("Type in a column's box to filter: text columns keep the rows that contain it (any case); "
                 "number columns take &gt;=5, &lt;3, =7, 2..6 or - (no value). Click a header to sort by it "
                 "(again to reverse); rows without a value stay last. Lowest and highest criterion: the range "
                 "of the video's criterion scores (0-10); share of weight scored: the importance weight its "
                 "scored criteria hold." + (" FIRM IF, WC, PQ: FIRM-Video's ratings (1-5); the IF cell opens the "
                                            "video's checklist." if shown != COLUMNS else ""))
    body = (f'<h1>{esc(title)}</h1><nav><a href="index.html">overview</a> <a href="#disagreements">models disagree</a> <a href="#passes">passes disagree</a> <a href="#people">evaluator and people disagree</a></nav>'
            f'<p class="muted">{help_text}</p><div class="count" id="count"></div>'
            f'<table class="samples"><thead><tr>{heads}</tr><tr class="filters">{inputs}</tr></thead><tbody></tbody></table>'
            f"<h2 id=\"disagreements\">Where two models disagree most (final score on the same input)</h2>{disagreements}"
            + _passes(changes, present) + _people(video_scores, people, present))
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{STYLE}{PAGE_STYLE}{CHANGES_STYLE}</style></head><body>{body}{json_script('columns', columns)}"
            f"{json_script('rows', rows)}<script>{SCRIPT}</script></body></html>\n")


def write_samples(reports_dir: Path | str, storage_dir: Path | str, *, bench: str | None = None,
                  store: Storage | None = None, video_scores: pl.DataFrame | None = None,
                  changes: Diff | None = None, people: pl.DataFrame | None = None,
                  firm_scores: pl.DataFrame | None = None, criterion_scores: pl.DataFrame | None = None) -> Path | str:
    """Write ``reports_dir/samples.html`` whole from the stored tables under ``storage_dir``
    (``video_scores`` and ``firm_scores``, when given, stand for the stored ones). Raises
    :class:`argus_dagster.infra.files.WriteError` when the page cannot be written."""
    store = store or LOCAL
    videos = video_scores if video_scores is not None else stored_table(storage_dir, "video_scores", store)
    criteria = criterion_scores if criterion_scores is not None else stored_table(storage_dir, "criterion_scores", store)
    page = render_samples(reports_dir, videos, criteria, bench=bench,
                          store=store, changes=changes, people=people,
                          firm_scores=firm_scores if firm_scores is not None else stored_table(storage_dir, "firm_scores", store))
    return store.write_bytes(join(reports_dir, "samples.html"), page)
