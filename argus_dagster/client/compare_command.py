"""``argus compare A B``: is B better or worse than A, on the inputs both were scored on, and by more
than chance (:mod:`argus_dagster.method.compare`).

A and B are each ``MODEL`` (a model of the evaluation ``--bench``/``--profile`` names, default the one
evaluated last), ``MODEL@PROFILE`` (the same bench scored by another profile) or
``MODEL@BENCH/PROFILE``. Read-only: the stored ``video_scores`` and ``criterion_scores`` of each side,
as Dagster's records name them. ``--gate`` exits 1 when B is worse than A beyond ``--margin`` with the
paired interval below zero and the permutation test's p below 0.05, and says why.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from typing import Any

import dagster as dg
import polars as pl

from argus_dagster.client.instance import local_instance
from argus_dagster.client.printing import say
from argus_dagster.client.results import stored_partitions
from argus_dagster.client.selection import chosen, read_only_evaluation
from argus_dagster.definitions import storage_for
from argus_dagster.infra.environment import SettingError
from argus_dagster.infra.names import file_name, sample_file_name
from argus_dagster.infra.settings import Settings, find_home
from argus_dagster.infra.storage import join
from argus_dagster.method.compare import GATE_LEVEL, OVERALL, Comparison, compare, dimension_label, gate, smallest_p
from argus_dagster.outputs.history_words import split_partition


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a model's stored scores in one evaluation, and where its reports are."""

    label: str
    model: str
    settings: Settings
    scores: pl.DataFrame
    criteria: pl.DataFrame | None
    reports_dir: str
    link: Any  # the evaluation storage's link maker (a file:// or reports-server URL, or a presigned one)

    def report(self, task: str, input_id: str, sample: str | None) -> str:
        page = join(self.reports_dir, task, file_name(self.model), sample_file_name(input_id, sample or "") + ".html")
        return self.link(page, self.reports_dir)


def parse_side(spec: str) -> tuple[str, str | None, str | None]:
    """``MODEL``, ``MODEL@PROFILE`` or ``MODEL@BENCH/PROFILE`` as (model, bench, profile)."""
    model, at, where = spec.rpartition("@")
    if not at:
        return spec, None, None
    bench, slash, profile = where.rpartition("/")
    return model, (bench if slash else None), profile


def _side(spec: str, args: argparse.Namespace, tasks: list[str] | None) -> Side | str:
    """The side ``spec`` names, or why there is none (one line). A model of the evaluation the options
    name is taken whole even where its name holds an ``@`` (``ckpt@1000``)."""
    model, bench, profile = parse_side(spec)
    if (bench is not None or profile is not None) and _has_model(spec, args, tasks):
        model, bench, profile = spec, None, None
    return _side_in(model, bench, profile, args, tasks)


def _has_model(model: str, args: argparse.Namespace, tasks: list[str] | None) -> bool:
    """Whether the evaluation the options name stored scores of ``model`` (asked without a word)."""
    try:
        settings = chosen(argparse.Namespace(command="compare", bench=args.bench, profile=args.profile))
    except SettingError:
        return False
    if find_home() is None or not settings.dagster_home.is_dir():
        return False
    parts = stored_partitions("video_scores", local_instance(settings), tasks, settings, models=[model])
    return any(df.filter(pl.col("model") == model).height for df in parts.values())


def _side_in(model: str, bench: str | None, profile: str | None, args: argparse.Namespace,
             tasks: list[str] | None) -> Side | str:
    if not model:
        return f"{model!r} names no model (MODEL, MODEL@PROFILE or MODEL@BENCH/PROFILE)"
    where = argparse.Namespace(command="compare", bench=bench or args.bench,
                               profile=(profile or args.profile) if bench is None else profile)
    settings = read_only_evaluation(where)
    if settings is None:
        return ""  # read_only_evaluation said why
    instance = local_instance(settings)
    parts = stored_partitions("video_scores", instance, tasks, settings, models=[model])  # its partitions only
    frames = [df.filter(pl.col("model") == model) for df in parts.values()]
    scores = pl.concat([f for f in frames if f.height], how="diagonal_relaxed") if any(f.height for f in frames) else None
    if scores is None:
        known = sorted({split_partition(k)[1] for k in instance.get_materialized_partitions(dg.AssetKey("video_scores"))
                        if not tasks or split_partition(k)[0] in tasks} - {""})
        return (f"no stored scores of {model!r} in {settings.evaluation}"
                + (f" (its models: {', '.join(known)})" if known else ": run `argus evaluate` first"))
    crit_parts = [df.filter(pl.col("model") == model)
                  for df in stored_partitions("criterion_scores", instance, tasks, settings, models=[model]).values()]
    criteria = pl.concat([c for c in crit_parts if c.height], how="diagonal_relaxed") if any(c.height for c in crit_parts) else None
    bench_res, storage, _ = storage_for(settings=settings)
    store = storage.storage()
    label = model if bench is None and profile is None else f"{model}@{settings.bench}/{settings.profile}"
    return Side(label, model, settings, scores, criteria, str(bench_res.reports_dir), store.link)


def _num(x: float | None, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def _p(p: float | None) -> str:
    return "-" if p is None else (f"{p:.3f}" if p >= 0.001 else "<0.001")


def to_json(c: Comparison, a: Side, b: Side, verdict: tuple[list[str], list[str]] | None, margin: float) -> dict:
    """The comparison as ``argus compare --format json`` prints it: per task and dimension ``n_inputs``,
    ``mean_a``, ``mean_b``, ``diff``, ``ci_low``, ``ci_high``, ``p_value``, ``wins``, ``ties``,
    ``losses``; the movers and flips with both reports' links; what the scores cover; the gate."""
    def clean(v):
        return None if isinstance(v, float) and math.isnan(v) else v

    rows = [{k: clean(v) for k, v in r.items()} | {"dimension_name": dimension_label(r["dimension"])}
            for r in c.rows.iter_rows(named=True)]
    movers = [m | {"report_a": a.report(m["task"], m["input_id"], ""), "report_b": b.report(m["task"], m["input_id"], "")}
              for m in c.movers]
    flips = [f | {"report_a": a.report(f["task"], f["input_id"], f["sample_a"]),
                  "report_b": b.report(f["task"], f["input_id"], f["sample_b"])} for f in c.flips]
    return {"a": {"name": a.label, "model": a.model, "evaluation": a.settings.evaluation, "judges": c.judges["a"],
                  "scored_criteria": c.criteria["a"]},
            "b": {"name": b.label, "model": b.model, "evaluation": b.settings.evaluation, "judges": c.judges["b"],
                  "scored_criteria": c.criteria["b"]},
            "rows": rows, "movers": movers, "flips": flips,
            "gate": None if verdict is None else {"passed": not verdict[0], "margin": margin, "reasons": verdict[0],
                                                  "too_few_inputs": verdict[1]}}


def format_text(c: Comparison, a: Side, b: Side, flips: int) -> str:
    """The comparison for a terminal: the table per task and dimension, then the movers and the flips."""
    out = [f"{b.label} against {a.label}: B - A on the inputs both were scored on "
           "(paired bootstrap 95% interval over inputs; p: paired sign-flip permutation test)",
           f"  A judged by {', '.join(c.judges['a']) or '-'} ({c.criteria['a']} scored criteria); "
           f"B by {', '.join(c.judges['b']) or '-'} ({c.criteria['b']} scored criteria)"]
    if c.judges["a"] != c.judges["b"]:
        out.append("  the two sides were judged differently: a difference may be the judges'")
    header = f"  {'task':5}  {'dimension':34}  {'n':>4}  {'A':>5}  {'B':>5}  {'B - A':>6}  {'95% interval':>15}  {'p':>6}  W/T/L"
    for (task,), g in c.rows.group_by("task", maintain_order=True):
        out += ["", header]
        for r in g.iter_rows(named=True):
            interval = f"{_num(r['ci_low'], True)} {_num(r['ci_high'], True)}"
            out.append(f"  {task:5}  {dimension_label(r['dimension'])[:34]:34}  {r['n_inputs']:>4}  {_num(r['mean_a']):>5}  "
                       f"{_num(r['mean_b']):>5}  {_num(r['diff'], True):>6}  {interval:>15}  {_p(r['p_value']):>6}  "
                       f"{r['wins']}/{r['ties']}/{r['losses']}")
        n = max(g.filter(pl.col("dimension") == OVERALL)["n_inputs"].to_list(), default=0)
        if n and smallest_p(n) >= GATE_LEVEL:
            out.append(f"  ({task}: on {n} input{'s' if n != 1 else ''} p cannot go below {smallest_p(n):.3g}; "
                       "the interval alone is too narrow to trust)")
    if c.movers:
        out += ["", "Inputs that moved most (final score, A -> B):"]
        for m in c.movers:
            out.append(f"  {m['task']} {m['input_id']}: {_num(m['score_a'])} -> {_num(m['score_b'])} "
                       f"({_num(m['diff'], True)})  A {a.report(m['task'], m['input_id'], '')}  "
                       f"B {b.report(m['task'], m['input_id'], '')}")
    if c.flips:
        out += ["", f"Criteria whose verdict flipped ({len(c.flips)}; score against the fail threshold"
                    + (f", the first {flips}" if len(c.flips) > flips else "") + "):"]
        for f in c.flips[:flips]:
            cap = f", hard cap {f['hard_cap']}" if f["hard_cap"] is not None else ""
            out.append(f"  {f['task']} {f['input_id']} {f['criterion_id']} ({f['dimension']}, {f['type']}{cap}): "
                       f"A {f['verdict_a']} {_num(f['score_a'])}, B {f['verdict_b']} {_num(f['score_b'])} "
                       f"(threshold {_num(f['fail_threshold'])})")
            out.append(f"      A: {(f['rationale_a'] or '-')[:200]}")
            out.append(f"      B: {(f['rationale_b'] or '-')[:200]}")
            out.append(f"      reports: A {a.report(f['task'], f['input_id'], f['sample_a'])}  "
                       f"B {b.report(f['task'], f['input_id'], f['sample_b'])}")
    return "\n".join(out)


def cmd_compare(args: argparse.Namespace) -> int:
    """Read-only: B against A (see the module's docstring). 0: compared (and, with ``--gate``, B
    passes); 1: B fails the gate, or nothing to compare; 2: a side that names nothing stored."""
    tasks = args.task or None
    sides = []
    for spec in (args.a, args.b):
        side = _side(spec, args, tasks)
        if isinstance(side, str):
            if side:
                say(f"argus compare: {side}")
            return 2
        sides.append(side)
    a, b = sides
    if a.model == b.model and a.settings.evaluation == b.settings.evaluation:
        say(f"argus compare: A and B are the same scores ({a.label} in {a.settings.evaluation})")
        return 2
    c = compare(a.scores, b.scores, a.criteria, b.criteria, a=a.label, b=b.label, top=args.top)
    if not c.rows.filter(pl.col("dimension") == OVERALL).height:
        say(f"argus compare: {a.label} and {b.label} share no scored input"
            + (f" of {', '.join(tasks)}" if tasks else ""))
        return 1
    verdict = gate(c, args.margin) if args.gate else None
    if args.format == "json":
        print(json.dumps(to_json(c, a, b, verdict, args.margin), indent=2, default=str))
    else:
        say(format_text(c, a, b, args.flips))
        if verdict is not None:
            failed, untold = verdict
            say("")
            say("gate: failed\n  " + "\n  ".join(failed) if failed else
                f"gate: passed (no task where {b.label} is worse than {a.label} by more than {args.margin:g} "
                "with its interval below zero and p < 0.05)")
            if untold:
                say("  too few inputs to tell, not gated:\n    " + "\n    ".join(untold))
    return 1 if verdict and verdict[0] else 0
