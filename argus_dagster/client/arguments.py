"""What each ``argus`` command accepts: its options, their defaults and their help (argparse).

Every numeric option is checked where it is parsed (its ``type=``: a whole number or a finite
number within the range it means something in), so a value out of range never reaches a command as a
silent default: a bad value, like any other option argparse refuses, is one line on stderr and exit
status 2."""

from __future__ import annotations

import argparse
import math
from typing import Any, Callable, cast

from argus_dagster.method.inputs import ALL_TASKS


class _Parser(argparse.ArgumentParser):
    """An argument parser whose epilog may be a function, called when its help is printed (``argus
    align``'s legend lives beside the alignment metrics, which every other command does without), and
    whose errors are one line (the usage is in ``--help``)."""

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def whole_number(low: int, high: int, meaning: str = "") -> Callable[[str], int]:
    """An argparse ``type=`` that reads a whole number from ``low`` to ``high`` (``meaning``: what an
    end of the range means, said with the refusal)."""

    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # not a number, a fraction, or more digits than int() reads
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text[:40]!r}: give a whole number from {low} to {high}{meaning}")
        return value

    return read


# The largest magnitude a numeric option takes where no other bound applies: far above any scale or
# weight in use, and far below where a difference or a sum of two of them overflows.
MAX_MAGNITUDE = 1e9


def finite_number(text: str) -> float:
    """An argparse ``type=``: a finite number of magnitude at most :data:`MAX_MAGNITUDE` (``nan`` and
    ``inf`` parse as floats, and would reach the arithmetic)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give a finite number of magnitude at most {MAX_MAGNITUDE:,.0f}")
    return value


def score_margin(text: str) -> float:
    """An argparse ``type=`` for ``argus compare --margin``: points of the 0-10 final score, 0 to 10."""
    value = finite_number(text)
    if not 0 <= value <= 10:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give points of the 0-10 final score, from 0 to 10")
    return value


def mix_weight(text: str) -> tuple[str, float]:
    """An argparse ``type=`` for one ``COLUMN=WEIGHT`` of ``argus best-of-n --mix``: the weight a
    positive finite number (a zero weight leaves its column out, and says nothing)."""
    column, sep, weight = text.partition("=")
    try:
        value = finite_number(weight) if sep and column.strip() else None
    except argparse.ArgumentTypeError:
        value = None
    if value is None or value <= 0:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give COLUMN=WEIGHT with a positive weight of at most "
                                         f"{MAX_MAGNITUDE:,.0f}, e.g. final=1")
    return column.strip(), value


class ScaleRange(argparse.Action):
    """``--human-scale LO HI``: two finite numbers (:func:`finite_number`), LO below HI."""

    def __call__(self, parser, namespace, values, option_string=None):
        lo, hi = values
        if not lo < hi:
            parser.error(f"argument {option_string}: {lo:g} {hi:g}: LO must be below HI")
        setattr(namespace, self.dest, [lo, hi])


PORT_OR_FREE = whole_number(0, 65535, " (0 picks a free one)")


def alignment_legend() -> str:
    """What each column of ``argus align``'s table means (its help's epilog)."""
    from argus_dagster.protocols.alignment.metrics import ALIGNMENT_LEGEND  # deferred: start-up time (polars, numpy)

    return ALIGNMENT_LEGEND


PROFILE_HELP = ("the evaluator profile, stored apart from every other: default, vlm-only, judge=<model>, "
                "rubric=<model>, or parts joined by ','")


def _evaluation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bench", help="a recorded bench's name (default: the one evaluated last; see argus evaluations)")
    parser.add_argument("--profile", help="its evaluator profile (default: the one evaluated last)")


FORCE_HELP = ("re-materialize partitions that are up to date too (tool steps and judgments still come "
              "from the content cache)")


def parser() -> argparse.ArgumentParser:
    """``argus`` and its commands, each with its options (the command's name in ``command``)."""
    p = _Parser(prog="argus", description="VideoArgus evaluation on Dagster. State lives in $ARGUS_HOME; "
                                "unset, the nearest .argus folder here or in a parent folder, else ./.argus")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="build the demo bench from shipped media and evaluate it")
    d.add_argument("--rebuild", action="store_true", help="rebuild the demo bench media")
    d.add_argument("--force", action="store_true", help=FORCE_HELP)
    d.add_argument("--profile", help=PROFILE_HELP)
    d.add_argument("--controls", type=whole_number(1, 10_000, "videos"), metavar="N",
                   help="also score controls made from N videos of each task x model (as argus evaluate --controls)")
    e = sub.add_parser("evaluate", help="evaluate a bench folder and its candidate videos")
    e.add_argument("--bench", required=True, help="folder with <TASK>/manifest.jsonl (or the released layout)")
    e.add_argument("--candidates", required=True, help="folder with <TASK>/<model>/<input_id>.mp4")
    e.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS,
                   help="only this task (repeatable; any case)")
    e.add_argument("--model", action="append", help="only this model (repeatable)")
    e.add_argument("--name", help="the bench's name (default: name in its bench.json, else its folder's name)")
    e.add_argument("--profile", help=PROFILE_HELP)
    e.add_argument("--vlm-only", action="store_true", help="ablation: every plan becomes one vlm_qa (adds vlm-only "
                   "to the profile)")
    e.add_argument("--force", action="store_true", help=FORCE_HELP)
    e.add_argument("--repeat", type=whole_number(2, 50, "judgments per criterion"), metavar="K",
                   help="after the pass, judge a sample of each partition's videos K times more, bypassing the "
                        "cache: the judge's own noise (judge_sd; whether each rank holds under it)")
    e.add_argument("--repeat-videos", type=whole_number(1, 10_000, "videos"), default=8, metavar="N",
                   help="with --repeat: the videos sampled per task x model (default 8)")
    e.add_argument("--controls", type=whole_number(1, 10_000, "videos"), metavar="N",
                   help="after the pass, score controls made from N videos of each task x model (played backwards, "
                        "frozen, shuffled, another input's video, an edit's unedited source): what this evaluator "
                        "can tell apart")
    e.add_argument("--rubrics-in", choices=("bench", "home"), default="bench",
                   help="where new rubrics are frozen: bench (its <TASK>/rubrics/, the default, where it is "
                        "writable) or home ($ARGUS_HOME/benches/<bench>/rubrics/: the bench folder is left as it is)")
    e.add_argument("--plan", action="store_true", help="observe the sources and say what Dagster would run now, "
                   "asset by asset, as the automation sensor would request it; nothing runs")
    e.add_argument("--protocol", choices=("videoargus", "firm", "both", "vefx"), default="videoargus",
                   help="videoargus (rubrics, evidence, judge; the default), firm (FIRM-Video's checklists: "
                        "instruction following, world coherence, perceptual quality), both, or vefx "
                        "(VEFX-Bench's 1-4 rubrics for edits, TV2V and TSV2V: instruction following, rendering "
                        "quality, edit exclusivity and their mean)")
    ex = sub.add_parser("export", help="write stored results: a score table as CSV, JSON or parquet, or "
                        "FIRM-Video reward-model training data")
    ex.add_argument("what", choices=("leaderboard", "videos", "criteria", "costs", "controls", "noise", "firm"),
                    help="leaderboard (per task and model), videos (per video), criteria (per video and "
                         "criterion), costs (the VLM cost ledger per task and model: requests, tokens, cached "
                         "tokens, images, bytes, retries), controls (per task and control kind: how often this "
                         "evaluator scored it below its original; argus evaluate --controls), noise (per task, model and criterion: the judge's standard deviation over its repeats; argus evaluate --repeat), or firm (one training instance per video and "
                         "dimension, for SFT)")
    ex.add_argument("--format", choices=("csv", "json", "parquet"),
                    help="csv (default; lists joined by '; '), json (one object per row) or parquet (as stored)")
    ex.add_argument("--out", help="the file to write (default <bench>-<profile>-<what>.<format> here; '-': "
                    "standard output); for firm, the folder to write (required): train.jsonl, images/ (the "
                    "frames each instance shows) and README.md (a dataset card)")
    ex.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS, help="only this task (repeatable)")
    ex.add_argument("--force", action="store_true", help="firm: write into a folder that holds other files "
                    "(they are kept; only the export's own files are replaced)")
    _evaluation_options(ex)
    bn = sub.add_parser("best-of-n", help="the best candidate per input by an evaluator, from the stored scores")
    bn.add_argument("--by", choices=("final", "if", "wc", "pq", "if_score", "wc_score"), default="final",
                    help="final (VideoArgus), a FIRM-Video rating (ties broken by its score), or a FIRM-Video score")
    bn.add_argument("--mix", nargs="+", metavar="COL=W", type=mix_weight,
                    help="a weighted mix instead of --by (each column put on [0, 1] by its scale), e.g. final=1 pq=1")
    bn.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS, help="only this task (repeatable)")
    _evaluation_options(bn)
    lb = sub.add_parser("leaderboard", help="print one evaluation's leaderboard (default: the one scored last)")
    lb.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS, help="only this task (repeatable; any case)")
    _evaluation_options(lb)
    hi = sub.add_parser("history", help="every materialization of an asset: time, run, data version, why it ran")
    hi.add_argument("asset", nargs="?", default="video_scores", help="the asset (default video_scores)")
    hi.add_argument("--partition", help="only this partition (a task, or model|TASK)")
    hi.add_argument("--limit", type=whole_number(1, 1_000_000), help="only the latest N (default: all)")
    hi.add_argument("--format", choices=("text", "json"), default="text",
                    help="text (default) or json: each materialization with its pass's fingerprint (judge, server's "
                         "model id, prompts, tools, packages, device)")
    _evaluation_options(hi)
    df = sub.add_parser("diff", help="two passes of an asset compared: per model before and after, what moved "
                        "and what changed (default: the latest two of video_scores)")
    df.add_argument("asset", nargs="?", default="video_scores", help="video_scores (default) or criterion_scores")
    df.add_argument("passes", nargs="*", default=[], metavar="A B",
                    help="the passes to compare, each a pass, run id or data version (or their start) as "
                         "argus history lists them; B defaults to the latest")
    _evaluation_options(df)
    cp = sub.add_parser("compare", help="B against A on the inputs both have: per task and dimension the mean "
                        "difference, a paired bootstrap interval and permutation test, wins/ties/losses, the inputs "
                        "that moved most and the criteria whose verdict flipped; --gate for a pipeline")
    cp.add_argument("a", metavar="A", help="the baseline: MODEL, MODEL@PROFILE or MODEL@BENCH/PROFILE")
    cp.add_argument("b", metavar="B", help="the candidate, named as A")
    cp.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS, help="only this task (repeatable)")
    cp.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")
    cp.add_argument("--gate", action="store_true",
                    help="exit 1 when B is worse than A beyond --margin on a task's final score, with the "
                         "paired 95%% interval of the difference below zero and the permutation test's p below "
                         "0.05, and say why (a task of fewer than 6 shared inputs cannot fail: it is named)")
    cp.add_argument("--margin", type=score_margin, default=0.0, metavar="M",
                    help="how much worse (0-10 points of the final score) B may be before the gate fails (default 0)")
    cp.add_argument("--top", type=whole_number(0, 1000), default=5, help="the inputs that moved most, per task (default 5)")
    cp.add_argument("--flips", type=whole_number(0, 100000), default=20,
                    help="at most this many flipped criteria printed (default 20; JSON has all)")
    _evaluation_options(cp)
    op = sub.add_parser("open", help="serve the reports (overview, comparison and video pages) on 127.0.0.1 "
                        "and print the URL")
    op.add_argument("--port", type=PORT_OR_FREE,
                    help="the port (default ARGUS_REPORTS_PORT, else 3030; 0 picks a free one)")
    op.add_argument("--before-results", action="store_true",
                    help="serve even before the first results (argus ui: pages appear as runs write them)")
    _evaluation_options(op)
    ui = sub.add_parser("ui", help="the Dagster UI (webserver and daemon) on one evaluation's instance, and the "
                        "reports server beside it (Ctrl-C stops both)")
    ui.add_argument("--bench", help="a recorded bench's name (default ARGUS_BENCH, else the demo; see argus evaluations)")
    ui.add_argument("--profile", help="its evaluator profile (default ARGUS_PROFILE, else default)")
    ui.add_argument("--host", default="127.0.0.1", help="the Dagster UI's address (default 127.0.0.1); it answers "
                    "requests whose Host is this name or loopback only")
    ui.add_argument("--port", type=PORT_OR_FREE, default=3000,
                    help="the Dagster UI's port (default 3000; 0 picks a free one, printed)")
    # Never 0: the pages and the run metadata link the reports at this port.
    ui.add_argument("--reports-port", type=whole_number(1, 65535),
                    help="the reports server's port (default ARGUS_REPORTS_PORT, else 3030)")
    al = sub.add_parser("align", help="agreement of evaluator scores with human ratings (SRCC, KRCC, PLCC, ...)",
                        epilog=cast(Any, alignment_legend),  # a function: _Parser.format_help calls it
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    al.add_argument("--human", action="append", required=True,
                    help="human ratings: CSV/JSONL/parquet with input_id, model, score[, dimension][, rater], "
                         "or T2VScore's / AIGVE's annotation JSON (repeatable)")
    al.add_argument("--scores", action="append", required=True,
                    help="evaluator scores: video_scores/criterion_scores parquet (or their storage folder), "
                         "or a table input_id, model, evaluator, score (repeatable)")
    al.add_argument("--dimension", action="append", help="only this human dimension (repeatable)")
    al.add_argument("--task", type=str.upper, choices=ALL_TASKS, help="the task, where the scores hold several (any case)")
    al.add_argument("--human-scale", nargs=2, type=finite_number, action=ScaleRange, metavar=("LO", "HI"),
                    help="the human rating scale of every dimension (default: the scale the ratings declare in "
                         "scale_min/scale_max columns, else the dimension's nominal scale: 1-4 for VEFX's, 1-5 for "
                         "FIRM-Video's and T2VScore's; never the observed range)")
    al.add_argument("--n-boot", type=whole_number(0, 100_000, " (0: no intervals)"), default=1000,
                    help="bootstrap resamples for the 95%% intervals (0: none)")
    al.add_argument("--out", help="write the table as CSV here")
    rb = sub.add_parser("robustness", help="a bench's evaluator profiles compared: rank agreement, criterion "
                        "agreement, models that move (from their stored scores)")
    rb.add_argument("--bench", help="a recorded bench's name (default: the one evaluated last)")
    rb.add_argument("--profiles", nargs="+", metavar="PROFILE",
                    help="the profiles to compare (default: every profile of the bench with stored scores)")
    rb.add_argument("--key", choices=("criterion", "dimension"), default="criterion",
                    help="criterion (profiles that share rubrics) or dimension (rubrics that differ)")
    ev = sub.add_parser("evaluations", help="the evaluations recorded here (bench x profile), the last evaluated first")
    ev.add_argument("--env", action="store_true", help="print the shell exports that pin one evaluation "
                    "(DAGSTER_HOME, ARGUS_BENCH, ARGUS_PROFILE, its folders), as argus ui sets them: --bench/"
                    "--profile, else ARGUS_BENCH(_DIR)/ARGUS_PROFILE, else the demo (what the code location serves)")
    _evaluation_options(ev)
    sub.add_parser("env", help="the ARGUS_* settings, what each sets, and what this shell sets")
    return p
