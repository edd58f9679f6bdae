"""``argus align`` and ``argus robustness``: how an evaluator's scores agree with human ratings, and how
a bench's evaluator profiles agree with each other, from tables already written."""

from __future__ import annotations

import argparse

from argus_dagster.client.printing import say
from argus_dagster.client.selection import read_only_evaluation
from argus_dagster.definitions import robustness_tables, storage_for
from argus_dagster.infra.files import WriteError, write_atomic
from argus_dagster.protocols.alignment.metrics import ALIGNMENT_LEGEND, format_alignment
from argus_dagster.protocols.alignment.ratings import alignment_report, merge_human, merge_scores, read_human, read_scores


def cmd_align(args: argparse.Namespace) -> int:
    """Human alignment of evaluator scores: the same computation as the ``human_alignment`` asset."""

    def read(reader, option: str, path: str, **kw):
        """One input file; whatever goes wrong reading it is said with its option and path."""
        try:
            return reader(path, **kw)
        except Exception as exc:  # a corrupt parquet, bad JSON, wrong encoding: name the file
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if path not in text:
                text = f"{path}: {type(exc).__name__}: {text}"
            raise ValueError(f"{option} {text}") from None

    try:
        human = merge_human([read(read_human, "--human", h) for h in args.human])
        scores = merge_scores([read(read_scores, "--scores", s, task=args.task) for s in args.scores])
        table = alignment_report(human, scores, dimensions=args.dimension, n_boot=args.n_boot,
                                 human_scale=tuple(args.human_scale) if args.human_scale else None)
    except (OSError, ValueError) as exc:
        say(f"argus align: {exc}")
        return 2
    problems = human.problems + scores.problems
    for problem in problems[:20]:  # each says what became of its rows: skipped, refused or combined
        say(f"note: {problem}")
    if len(problems) > 20:
        say(f"note: {len(problems) - 20} more lines like these")
    say(format_alignment(table))
    if table.height:
        say("\n" + ALIGNMENT_LEGEND)
    if args.out:
        try:
            write_atomic(args.out, table.write_csv())
        except WriteError as exc:
            say(f"argus align: --out {exc}")
            return 2
        say(f"\nwrote {table.height} rows to {args.out}")
    return 0 if table.height else 1


def cmd_robustness(args: argparse.Namespace) -> int:
    """Backbone robustness: a bench's evaluator profiles compared, from their stored scores."""
    settings = read_only_evaluation(args, needs_instance=False)
    if settings is None:
        return 1
    bench, storage, _ = storage_for(settings=settings)
    try:
        compared = robustness_tables(bench, args.profiles or [], args.key, storage.storage())
    except ValueError as exc:
        say(f"argus robustness: {exc}")
        return 1
    if compared.missing:
        say(f"left out (no scores stored): {', '.join(compared.missing)}")
    say(f"Backbone robustness of bench {settings.bench!r} ({args.key} agreement)\n")
    say(compared.text)
    return 0
