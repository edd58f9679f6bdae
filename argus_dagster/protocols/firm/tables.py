"""Rows of FIRM-Video's tables (``firm_checklists``, ``firm_verdicts``, ``firm_scores``), the
checklist and the IF score recomputed from the stored rows, and ``firm_scores`` as evaluator scores
for the human alignment.
"""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any, Sequence

import polars as pl

from argus_dagster.protocols.firm.scoring import if_score_from_weights, if_weights
from argus_dagster.protocols.firm.types import (
    DIMENSIONS,
    IF,
    PQ,
    SHORT,
    WC,
    Checklist,
    ChecklistError,
    ChecklistItem,
    DimensionResult,
    DroppedItem,
)
from argus_dagster.protocols.unscored import unscored_reasons as reasons_unscored


def checklist_rows(input_id: str, checklist: Checklist) -> list[dict]:
    """``firm_checklists`` rows: input_id, dimension, item_id, target, aspect, question, importance,
    weight (IF: the exact ``m_i / Σ m`` the score is computed from, :func:`if_weights`), checklist_hash,
    maker (JSON: who planned it), dropped (null). Then one row per planned item left out, ``x1``,
    ``x2``..., with its question, importance and ``dropped`` (the reason) and no weight."""
    weights = if_weights([i.importance for i in checklist.items]) if checklist.dimension == IF else \
        [None] * len(checklist.items)
    base = {"input_id": input_id, "dimension": checklist.dimension, "checklist_hash": checklist.content_hash,
            "maker": json.dumps(checklist.maker, sort_keys=True)}
    kept = [{**base, "item_id": i.id, "target": i.target, "aspect": i.aspect, "question": i.question,
             "importance": i.importance, "weight": w, "dropped": None} for i, w in zip(checklist.items, weights)]
    left_out = [{**base, "item_id": f"x{k}", "target": "", "aspect": "", "question": d.question,
                 "importance": d.importance, "weight": None, "dropped": d.reason}
                for k, d in enumerate(checklist.dropped, start=1)]
    return kept + left_out


def checklist_from_rows(rows: Sequence[dict]) -> Checklist:
    """The checklist that :func:`checklist_rows` stored (rows of one input and dimension, any order):
    the ``firm_checklists`` table is the frozen store the verifiers of every model read. Raises
    :class:`ChecklistError` when the rows disagree on the hash or do not reproduce it."""
    left_out = [r for r in rows if r.get("dropped")]
    rows = [r for r in rows if not r.get("dropped")]
    if not rows:
        raise ChecklistError("no checklist rows for this input (fix: materialize firm_checklists first)")
    hashes = {r["checklist_hash"] for r in rows}
    dims = {r["dimension"] for r in rows}
    if len(hashes) != 1 or len(dims) != 1:
        raise ChecklistError(f"input {rows[0].get('input_id')!r}: rows of {len(hashes)} checklists and "
                             f"{len(dims)} dimensions mixed (fix: pass one input's rows of one dimension)")
    order = sorted(rows, key=lambda r: int(re.sub(r"\D", "", r["item_id"]) or 0))
    maker = json.loads(order[0].get("maker") or "{}")
    items = tuple(ChecklistItem(r["item_id"], r["question"], int(r["importance"]), r.get("target") or "",
                                r.get("aspect") or "") for r in order)
    dropped = tuple(DroppedItem(r["question"], r.get("importance"), r["dropped"])
                    for r in sorted(left_out, key=lambda r: int(re.sub(r"\D", "", r["item_id"]) or 0)))
    c = Checklist(dims.pop(), items, maker, dropped)
    if c.content_hash != hashes.pop():
        raise ChecklistError(f"input {rows[0].get('input_id')!r}: the stored rows do not reproduce their "
                             "checklist_hash (fix: re-materialize firm_checklists)")
    return c


def if_score_from_rows(item_rows: Sequence[dict], verdicts: Sequence[dict]) -> float:
    """``if_score`` recomputed from what is stored: the ``weight`` of each ``firm_checklists`` item
    (one input's IF rows; rows left out, ``dropped``, are no items) and the video's ``firm_verdicts``
    rows (``verdict`` yes and ``verifiable``: met). Raises :class:`ChecklistError` when a weight is not
    the item's ``m_i / Σ m`` or an item has no verdict."""
    items = [r for r in item_rows if not r.get("dropped") and not r.get("error")]
    if not items:
        raise ChecklistError("no stored IF items for this input (fix: materialize firm_checklists first)")
    exact = if_weights([r["importance"] for r in items])
    off = [f"{r['item_id']} ({r['weight']!r}, not {w!r})" for r, w in zip(items, exact) if r.get("weight") != w]
    if off:
        raise ChecklistError(f"stored weights are not m_i / Σ m: {', '.join(off)} (fix: re-materialize "
                             "firm_checklists)")
    by_id = {v["item_id"]: v for v in verdicts}
    missing = [r["item_id"] for r in items if r["item_id"] not in by_id]
    if missing:
        raise ChecklistError(f"IF verdicts: no stored verdict for {', '.join(missing)}")
    met = [by_id[r["item_id"]]["verdict"] == "yes" and bool(by_id[r["item_id"]]["verifiable"]) for r in items]
    return if_score_from_weights([r["weight"] for r in items], met)


def verdict_rows(input_id: str, results: dict[str, DimensionResult]) -> list[dict]:
    """``firm_verdicts`` rows: input_id, dimension, item_id, verdict (yes/no), verifiable, evidence, checklist_hash."""
    return [{"input_id": input_id, "dimension": d, "item_id": v.item_id, "verdict": "yes" if v.yes else "no",
             "verifiable": v.verifiable, "evidence": v.evidence, "checklist_hash": r.checklist_hash}
            for d, r in results.items() for v in r.verdicts]


def score_row(input_id: str, results: dict[str, DimensionResult]) -> dict:
    """One ``firm_scores`` row; a missing dimension or an unscored one has nulls and its reason;
    ``if_unverifiable`` / ``wc_unverifiable`` count the answers that could not be verified."""
    row: dict[str, Any] = {"input_id": input_id}
    for d in DIMENSIONS:
        s = SHORT[d]
        r = results.get(d)
        if d != PQ:
            row[f"{s}_score"] = r.score if r else None
        row[f"{s}_rating"] = r.rating if r else None
        row[f"{s}_rationale"] = r.rationale if r else ""
        row[f"{s}_reason"] = (r.reason if r else "not evaluated") if not (r and r.scored) else ""
        if d != PQ:  # answers the verifier could not give from the frames; null where none was asked
            row[f"{s}_unverifiable"] = sum(1 for v in r.verdicts if not v.verifiable) if r and r.verdicts else None
    wc = results.get(WC)
    row["wc_scene"] = (wc.detail.get("scene_summary") or "") if wc else ""  # the grounding's summary (export prose)
    return row


FIRM_EVALUATORS = {"if": "firm_if", "wc": "firm_wc", "pq": "firm_pq"}
FIRM_RANGES = {name: (1.0, 5.0) for name in FIRM_EVALUATORS.values()}


def firm_evaluator_scores(firm_scores: pl.DataFrame, dimensions: dict[str, str | None] | None = None) -> pl.DataFrame:
    """``firm_scores`` as evaluator scores for :func:`~argus_dagster.protocols.alignment.metrics.alignment_table`:
    ``input_id, model, evaluator (firm_if/firm_wc/firm_pq), dimension, score`` (the 1-5 rating; pass
    :data:`FIRM_RANGES` as its ``evaluator_ranges``). ``dimensions`` names the human dimension each one
    is compared with (default: the FIRM names; ``None`` as a value compares it with every dimension)."""
    dims = {"if": IF, "wc": WC, "pq": PQ} if dimensions is None else dimensions
    parts = []
    for short, name in FIRM_EVALUATORS.items():
        col = f"{short}_rating"
        if col not in firm_scores.columns:
            raise ValueError(f"firm_scores has no {col!r} column (it has {firm_scores.columns})")
        parts.append(firm_scores.select(pl.col("input_id").cast(pl.String), pl.col("model").cast(pl.String),
                                        pl.lit(name).alias("evaluator"),
                                        pl.lit(dims.get(short), dtype=pl.String).alias("dimension"),
                                        pl.col(col).cast(pl.Float64).alias("score")))
    return pl.concat(parts).filter(pl.col("score").is_not_null())


# -- FIRM-Video's results as the terminal shows them ------------------------------------------------

TERMINAL_WIDTH = 120
_SUMMARY_COLUMNS = (("task", "task"), ("model", "model"), ("videos", "n_videos"),
                    ("IF mean", "mean_if"), ("WC mean", "mean_wc"), ("PQ mean", "mean_pq"),
                    ("IF unscored", "if_unscored"), ("WC unscored", "wc_unscored"), ("PQ unscored", "pq_unscored"))


def firm_summary_table(scores: pl.DataFrame) -> pl.DataFrame:
    """Per task and model of stored ``firm_scores`` rows: videos, mean IF/WC/PQ ratings (1-5, null where
    none is scored) and how many videos each dimension left unscored."""
    if not scores.height:
        return pl.DataFrame()
    return (scores.group_by("task", "model").agg(
        pl.len().alias("n_videos"),
        *[pl.col(f"{SHORT[d]}_rating").cast(pl.Float64).mean().round(2).alias(f"mean_{SHORT[d]}") for d in DIMENSIONS],
        *[pl.col(f"{SHORT[d]}_rating").is_null().sum().alias(f"{SHORT[d]}_unscored") for d in DIMENSIONS])
        .sort("task", "model"))


def unscored_reasons(scores: pl.DataFrame) -> pl.DataFrame:
    """Why videos are unscored, from stored ``firm_scores`` rows: per dimension (``IF``, ``WC``, ``PQ``)
    and reason, the videos it left unscored and the models they are of; the most frequent first."""
    return reasons_unscored(scores, {SHORT[d].upper(): (f"{SHORT[d]}_rating", f"{SHORT[d]}_reason") for d in DIMENSIONS})


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def format_firm_summary(summary: pl.DataFrame, reasons: pl.DataFrame, width: int = TERMINAL_WIDTH) -> str:
    """:func:`firm_summary_table` and :func:`unscored_reasons` as a person reads them in a terminal of
    ``width`` columns: whole column names, ``-`` for a mean with no rating, then every reason a video is
    unscored, wrapped (never cut) under the table."""
    if not summary.height:
        return "no firm_scores stored"
    rows = [[_cell(r[col]) for _, col in _SUMMARY_COLUMNS] for r in summary.iter_rows(named=True)]
    widths = [max(len(name), *(len(r[i]) for r in rows)) for i, (name, _) in enumerate(_SUMMARY_COLUMNS)]
    spare = width - (sum(widths) + 2 * (len(widths) - 1))
    if spare < 0:  # a long model name: its column narrows, each name cut with an ellipsis
        widths[1] = max(len("model"), widths[1] + spare)
        rows = [[c if i != 1 or len(c) <= widths[1] else c[:widths[1] - 1] + "…" for i, c in enumerate(r)] for r in rows]
    numeric = {i for i, (_, col) in enumerate(_SUMMARY_COLUMNS) if col not in ("task", "model")}

    def line(cells):
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line([name for name, _ in _SUMMARY_COLUMNS]), line(["-" * w for w in widths]), *map(line, rows)]
    if not reasons.height:
        out.append("\nevery video is scored on every dimension")
        return "\n".join(out)
    out.append("\nunscored, and why (dimension: videos, models: the reason on their firm_scores rows):")
    for r in reasons.iter_rows(named=True):
        head = f"{r['dimension']}: {r['n_videos']} video{'s' if r['n_videos'] != 1 else ''}, {', '.join(r['models'])}: "
        out.append(textwrap.fill(head + (r["reason"] or "no reason recorded"), width=width, initial_indent="  ",
                                 subsequent_indent="      ", break_long_words=True))
    return "\n".join(out)
