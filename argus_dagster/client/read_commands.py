"""The read-only commands: ``argus leaderboard``, ``argus export``, ``argus best-of-n``, ``argus history``
and ``argus diff`` read what evaluations stored (:mod:`argus_dagster.client.results`) and print or write
it; nothing runs. Imported only when one of them runs (:data:`argus_dagster.client.cli.COMMANDS`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import polars as pl

from argus_dagster.client.instance import local_instance
from argus_dagster.client.printing import only_tasks, storage_failure
from argus_dagster.client.printing import say as _print  # the name the commands below print with
from argus_dagster.client.results import (
    best_of_n_report,
    current_leaderboard,
    evaluation_storage,
    export_firm,
    stored_export_table,
)
from argus_dagster.client.selection import chosen as _chosen  # the name the commands below read it with
from argus_dagster.client.selection import read_only_evaluation
from argus_dagster.infra.files import WriteError
from argus_dagster.method.leaderboard import format_leaderboard
from argus_dagster.outputs.export import default_out, encode, write_table
from argus_dagster.outputs.history_words import evaluator_label
from argus_dagster.records.fingerprints import fingerprint_id
from argus_dagster.records.history import diff, materializations, pass_fingerprint


def cmd_export(args: argparse.Namespace) -> int:
    """``argus export leaderboard|videos|criteria|costs``: a stored score table as CSV, JSON or parquet;
    ``argus export firm --out DIR``: FIRM-Video training data (JSON lines, frames as images, a card)."""
    if args.what != "firm":
        return _export_table(args)

    if not args.out:
        _print("argus export firm: give the folder to write with --out")
        return 2
    if args.format not in (None, "json"):
        _print(f"argus export firm: --format {args.format}: firm writes JSON lines only")
        return 2
    try:
        result = export_firm(args.out, args.task, settings=_chosen(args), force=args.force)
    except (OSError, ValueError, WriteError) as exc:
        _print(f"argus export firm: {exc}")
        return 1
    for why in result.left_out[:20]:
        _print(f"left out: {why}")
    if len(result.left_out) > 20:
        _print(f"... and {len(result.left_out) - 20} more left out")
    _print(f"wrote {result.n_instances} instances (one per video and dimension) of {result.n_videos} videos to "
           f"{args.out}/train.jsonl, their frames under {args.out}/images and a dataset card, {args.out}/README.md")
    return 0 if result.n_instances else 1


def _export_table(args: argparse.Namespace) -> int:
    """One stored table of one evaluation, whole (``--task``: those tasks' rows), to ``--out`` (default
    ``$ARGUS_HOME/exports/<bench>-<profile>-<what>.<format>``; ``-`` for standard output, CSV and JSON only)."""
    settings = read_only_evaluation(args)
    if settings is None:
        return 1
    fmt = args.format or "csv"
    table = stored_export_table(args.what, args.task, settings=settings)
    if table is None or not table.height:
        tasks = f" of {', '.join(args.task)}" if args.task else ""
        _print(f"argus export {args.what}: nothing stored{tasks} for {settings.evaluation}: run `argus evaluate` first")
        return 1
    if args.out == "-":
        if fmt == "parquet":
            _print("argus export: parquet is not written to standard output: give --out FILE")
            return 2
        sys.stdout.write(encode(table, fmt).decode("utf-8"))
        sys.stdout.flush()
        return 0
    out = Path(args.out) if args.out else default_out(args.what, fmt, settings.evaluation, settings.home)
    try:
        write_table(table, fmt, out)
    except WriteError as exc:
        _print(f"argus export {args.what}: {exc}")
        return 2
    _print(f"wrote {table.height} rows of {settings.evaluation}'s {args.what} to {out} ({fmt}; columns: docs/exports.md)")
    return 0


def cmd_best_of_n(args: argparse.Namespace) -> int:
    """The best candidate per input by one evaluator, from the stored tables."""
    by: str | dict[str, float] = dict(args.mix) if args.mix else args.by  # (column, weight) pairs, checked when parsed
    try:
        picks, texts = best_of_n_report(by, args.task, settings=_chosen(args))
    except ValueError as exc:
        _print(f"argus best-of-n: {exc}")
        return 1
    if not texts:
        _print("no stored scores: run `argus evaluate` (and --protocol firm or both for if, wc, pq) first")
        return 1
    _print("\n\n".join(texts.values()))
    return 0 if picks.height else 1


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Read-only: one evaluation's leaderboard (``--bench``, ``--profile``; default the last evaluated)."""
    settings = read_only_evaluation(args)
    if settings is None:
        return 1
    try:
        lb = current_leaderboard(settings=settings)
    except Exception as exc:
        # A home this process may not write (a read-only mount, another user's): Dagster cannot open
        # its instance there, but the leaderboard is a table as stored.
        stored = settings.storage_dir / "leaderboard.parquet"
        if storage_failure(exc) is None or not stored.is_file():
            raise
        lb = pl.read_parquet(stored)
    if lb is None:
        _print(f"no leaderboard yet for {settings.evaluation}: run `argus demo` or `argus evaluate` first")
        return 1
    _print(f"Leaderboard of {settings.evaluation}: bench {settings.bench!r} ({settings.bench_dir}), "
           f"profile {settings.profile!r}\n")
    _print(format_leaderboard(only_tasks(lb, args.task)))
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    """Read-only: every materialization of an asset (oldest first): time, run, partition, data version,
    why it ran, and whether its table is still kept."""
    settings = read_only_evaluation(args)
    if settings is None:
        return 1
    rows = materializations(local_instance(settings), args.asset, args.partition)
    if not rows:
        _print(f"no materialization of {args.asset!r} in {settings.evaluation}")
        return 1
    storage = evaluation_storage(settings)
    if args.format == "json":
        _print(json.dumps(history_json(local_instance(settings), args.asset, rows[-args.limit:] if args.limit else rows,
                                       storage), indent=2))
        return 0
    _print(f"History of {args.asset} in {settings.evaluation} ({len(rows)} materializations, oldest first)")
    _print(f"{'time (UTC)':19}  {'pass':12}  {'run':8}  {'partition':18}  {'data version':16}  {'judge':24}  "
           f"{'table':6}  reason")
    newest = {r.partition: r.storage_id for r in rows}
    for r in rows[-args.limit:] if args.limit else rows:
        kept = ("kept" if r.table and (r.kept or newest[r.partition] == r.storage_id) and storage.exists(storage.resolve(r.table))
                else "gone")
        judge = r.tags.get("argus/evaluator") or "-"
        _print(f"{r.time:19}  {r.command[:12]:12}  {r.run_id[:8]:8}  {(r.partition or '-'):18}  "
               f"{(r.data_version or '-')[:16]:16}  {judge[:24]:24}  {kept:6}  {r.reason or '-'}")
    return 0


def history_json(instance, asset: str, rows: list, storage) -> list[dict]:
    """``argus history --format json``: each materialization, oldest first, with the fingerprint of the pass
    that made it (its own, or what the pass's criterion_scores recorded; null for a pass made before
    fingerprints were recorded)."""
    crit = rows if asset == "criterion_scores" else materializations(instance, "criterion_scores")
    newest = {r.partition: r.storage_id for r in rows}
    out = []
    for r in rows:
        fp = r.fingerprint or pass_fingerprint(crit, r.command)
        table = storage.resolve(r.table) if r.table else None  # recorded relative to the evaluation: where it is
        out.append({"time": r.time, "pass": r.command, "run_id": r.run_id, "partition": r.partition,
                    "data_version": r.data_version or None, "judge": r.tags.get("argus/evaluator"),
                    "table": table, "kept": bool(table and (r.kept or newest[r.partition] == r.storage_id)
                                                 and storage.exists(table)),
                    "reason": r.reason or None, "fingerprint_id": fingerprint_id(fp) if fp else None,
                    "fingerprint": fp})
    return out


def cmd_diff(args: argparse.Namespace) -> int:
    """Read-only: two passes of an asset compared (default: the latest two of ``video_scores``)."""
    settings = read_only_evaluation(args)
    if settings is None:
        return 1
    asset, passes = args.asset, list(args.passes)
    if asset not in ("video_scores", "criterion_scores"):  # `argus diff A B`: the passes of video_scores
        asset, passes = "video_scores", [asset] + passes
    if len(passes) > 2:
        _print(f"argus diff: at most two passes, got {len(passes)}")
        return 2
    try:
        d = diff(local_instance(settings), evaluation_storage(settings), asset, *(passes + [None, None])[:2])
    except ValueError as exc:
        _print(f"argus diff: {exc}")
        return 1
    _print(format_diff(d))
    return 0


def _num(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _moved(r: dict) -> tuple[str, str]:
    """A moved row's sample as it follows the input id (``#2``; nothing for a single video) and its change
    (``+1.25``, or the words of a row that appeared or went)."""
    return (f"#{r['sample']}" if r["sample"] else "",
            f"{r['delta']:+.2f}" if r["delta"] is not None else r["change"])


def format_diff(d) -> str:
    """A diff as a person reads it: the passes, the evaluators, per model before and after, what moved."""
    def named(judges: list[str]) -> str:
        return ", ".join(f"{evaluator_label(j)} ({j})" for j in judges) or "none"

    lines = [f"{d.asset}: before = pass {d.before} ({d.before_time} UTC), after = pass {d.after} ({d.after_time} UTC)",
             f"judge before: {named(d.judges[0])}", f"judge after: {named(d.judges[1])}"]
    if d.models.height:
        lines.append("\nper model: mean final score [95% interval] before -> after")
        lines.append(f"  {'task':5} {'model':16} {'before':>22}    {'after':>22}  {'change':>7}")
        for r in d.models.iter_rows(named=True):
            b, a = r["mean_final_before"], r["mean_final_after"]
            change = f"{a - b:+.2f}" if a is not None and b is not None else "-"
            lines.append(f"  {r['task']:5} {r['model']:16} {_num(b):>6} [{_num(r['ci_low_before'])}, {_num(r['ci_high_before'])}]"
                         f" -> {_num(a):>6} [{_num(r['ci_low_after'])}, {_num(r['ci_high_after'])}]  {change:>7}")
    for title, rows, what, before, after in (
            ("videos that moved most (final score)", d.videos, "", "final_before", "final_after"),
            ("criteria that moved most", d.criteria, "criterion_id", "before", "after")):
        if rows.height:
            lines.append(f"\n{title}:")
        for r in rows.iter_rows(named=True):
            sample, delta = _moved(r)
            named_as = f" {r[what]}" if what else ""
            lines.append(f"  {r['task']} x {r['model']} {r['input_id']}{sample}{named_as}: {_num(r[before])} -> "
                         f"{_num(r[after])} ({delta})")
    lines.append("\nwhat changed between them:")
    lines.append(f"  evaluator: {named(d.judges[0])} -> {named(d.judges[1])}"
                 if d.judges[0] != d.judges[1] else f"  evaluator: the same, {named(d.judges[1])}")
    lines.append(f"  rubrics: {len(d.rubrics_changed)} input{'s' if len(d.rubrics_changed) != 1 else ''} got another rubric"
                 + (f" ({', '.join(f'{t}/{i}' for t, i in d.rubrics_changed[:8])})" if d.rubrics_changed else ""))
    lines.append("  inputs: " + (", ".join(f"{k} ({n} partition{'s' if n != 1 else ''})"
                                           for k, n in sorted(d.inputs_changed.items())) or "none moved"))
    lines.append("  code: " + (", ".join(f"{k} {b} -> {a}" for k, (b, a) in sorted(d.code_changed.items())) or "the same"))
    before_fp, after_fp = d.fingerprints
    if before_fp is None or after_fp is None:
        lines.append("  fingerprint: not recorded by the " + ("earlier pass" if before_fp is None else "later pass")
                     + (" (nor the later)" if before_fp is None and after_fp is None else ""))
    elif not d.fingerprint_changes:
        lines.append(f"  fingerprint: the same ({after_fp})")
    else:
        lines.append(f"  fingerprint: {before_fp} -> {after_fp}, {len(d.fingerprint_changes)} field"
                     f"{'s' if len(d.fingerprint_changes) != 1 else ''} differ:")
        lines += [f"    {k}: {b} -> {a}" for k, b, a in d.fingerprint_changes]
    if d.missing:
        lines.append(f"  not kept any more (retention, ARGUS_KEEP_VERSIONS): {', '.join(d.missing)}")
    if d.reasons:
        lines.append("why the later pass ran (as its runs recorded it):")
        lines += [f"  {r}" for r in d.reasons]
    return "\n".join(lines)
