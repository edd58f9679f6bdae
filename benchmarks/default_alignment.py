"""Scores rated real clips with the embedded default (offline rubric, CPU tools, evidence-only judge)
and writes the tables ``argus align`` reads, so its agreement with the ratings can be compared across
versions of the default.

Clips: AIGVE's 10 CogVideoX clips (``aigve_toy``, nine human-rated aspects) and VideoPhy-2's 10 example
clips (``videophy/VIDEOPHY2/examples``; their ``output_pc.csv`` / ``output_sa.csv`` scores are
VideoPhy-2's own automatic rater's physical-commonsense and semantic-adherence scores, not human ones).

    .venv/bin/python -m benchmarks.default_alignment --out /tmp/align [--before /tmp/align_of_an_earlier_version]
    .venv/bin/argus align --human /tmp/align/aigve_human.csv --scores /tmp/align/aigve_video_scores.parquet \
        --scores /tmp/align/aigve_criterion_scores.parquet --n-boot 200
    .venv/bin/argus align --human /tmp/align/videophy_human.csv --scores /tmp/align/videophy_video_scores.parquet \
        --scores /tmp/align/videophy_criterion_scores.parquet --n-boot 200

It then prints, from the same computation as ``argus align`` (``--n-boot 200``), the figures that say
most about the default: the final score and the visual-quality (d13) and temporal-quality (d12)
criteria against AIGVE's technical-quality, consistency and overall ratings, and the final score
against VideoPhy-2's; with ``--before``, an earlier version's tables (written by this command from
that version's checkout) beside them.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from pathlib import Path

import polars as pl

from argus_dagster.infra.tables import CRITERION_SCORES, VIDEO_SCORES, frame
from argus_dagster.method.evidence.tools.registry import embedded_suite
from argus_dagster.method.gather import collect_evidence
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.judge import EvidenceOnlyJudge
from argus_dagster.method.rubric.offline import generate_offline
from argus_dagster.method.stages import judge_criteria, score_video
from argus_dagster.protocols.alignment.ratings import aigve_ratings, write_human_csv

DATA = Path(os.environ.get("ARGUS_SHARED_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))


def score_clips(clips: list[tuple[str, str, str, str]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``clips``: (input_id, model, prompt, path). The ``video_scores`` and ``criterion_scores`` rows."""
    suite, judge = embedded_suite(), EvidenceOnlyJudge()
    videos, criteria = [], []
    for iid, model, prompt, path in clips:
        inst = InputInstance(id=iid, prompt=prompt)
        rubric = generate_offline(inst)
        ev = collect_evidence(inst, rubric, path, suite)
        rows = judge_criteria(rubric, ev, judge)
        keys = {"task": "T2V", "model": model, "input_id": iid}
        criteria += [{**keys, **r} for r in rows]
        videos.append({**keys, **score_video(rows, 0.5), "error": None})
    return frame(videos, VIDEO_SCORES), frame(criteria, CRITERION_SCORES)


def aigve(out: Path) -> None:
    src = DATA / "aigve_toy"
    data = json.loads((src / "annotations.json").read_text())
    clips = [(str(r["id"]), str(r.get("model") or "unknown"), r["prompt_gt"], str(src / "videos_5frame" / r["video_path_pd"]))
             for r in data["data_list"]]
    vs, cs = score_clips(clips)
    vs.write_parquet(out / "aigve_video_scores.parquet")
    cs.write_parquet(out / "aigve_criterion_scores.parquet")
    write_human_csv(aigve_ratings(data).ratings, out / "aigve_human.csv")


def videophy(out: Path) -> None:
    """Two samples of one prompt (``..._0``/``..._1``) are two candidates of one input."""
    src = DATA / "videophy" / "VIDEOPHY2"
    ratings, clips = [], {}
    for dim, name in (("physical_commonsense", "output_pc.csv"), ("semantic_adherence", "output_sa.csv")):
        with open(src / "examples" / name, newline="") as fh:
            for r in csv.DictReader(fh):
                stem = Path(r["videopath"]).stem
                base, _, sample = stem.rpartition("_")
                iid, model = (base, f"sample{sample}") if sample.isdigit() else (stem, "sample0")
                caption = r.get("caption") or stem.replace("_", " ")
                clips.setdefault(stem, (iid, model, caption, str(src / r["videopath"])))
                ratings.append({"input_id": iid, "model": model, "dimension": dim, "score": float(r["score"])})
    vs, cs = score_clips(list(clips.values()))
    vs.write_parquet(out / "videophy_video_scores.parquet")
    cs.write_parquet(out / "videophy_criterion_scores.parquet")
    pl.DataFrame(ratings).write_csv(out / "videophy_human.csv")


SHOWN = {"aigve": [("argus:final", "overall"), ("argus:final", "technical_quality"), ("argus:final", "consistency"),
                   ("argus:d13 visual/frame quality", "technical_quality"), ("argus:d13 visual/frame quality", "overall"),
                   ("argus:d12 temporal quality", "consistency")],
         "videophy": [("argus:final", "physical_commonsense"), ("argus:final", "semantic_adherence"),
                      ("argus:d13 visual/frame quality", "physical_commonsense"),
                      ("argus:d12 temporal quality", "physical_commonsense")]}


def spearman_table(folder: Path, dataset: str) -> dict[tuple[str, str], str]:
    """``argus align``'s Spearman (and bootstrap interval) of the tables in ``folder``."""
    from argus_dagster.protocols.alignment.ratings import alignment_report, merge_scores, read_human, read_scores

    scores = merge_scores([read_scores(folder / f"{dataset}_video_scores.parquet"),
                           read_scores(folder / f"{dataset}_criterion_scores.parquet")])
    table = alignment_report(read_human(folder / f"{dataset}_human.csv"), scores, n_boot=200)
    out = {}
    for r in table.iter_rows(named=True):
        if r["srcc"] is not None:
            out[(r["evaluator"], r["dimension"])] = (f"{r['srcc']:+.3f} [{r['srcc_lo']:+.2f}, {r['srcc_hi']:+.2f}]"
                                                     if r["srcc_lo"] is not None else f"{r['srcc']:+.3f}")
    return out


def compare(out: Path, before: Path | None) -> None:
    for dataset, rows in SHOWN.items():
        now = spearman_table(out, dataset)
        then = spearman_table(before, dataset) if before else {}
        print(f"\n{dataset}: Spearman over the clips [95% bootstrap interval, resampling inputs]")
        print(f"  {'evaluator':<32} {'rating':<22} " + (f"{'before':<24} " if before else "") + "now")
        for ev, dim in rows:
            print(f"  {ev:<32} {dim:<22} " + (f"{then.get((ev, dim), '-'):<24} " if before else "")
                  + now.get((ev, dim), "-"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--before", help="the --out folder of an earlier version, to print beside this one")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    aigve(out)
    videophy(out)
    print(f"scored in {time.perf_counter() - t0:.1f}s; tables in {out}")
    compare(out, Path(args.before) if args.before else None)


if __name__ == "__main__":
    main()
