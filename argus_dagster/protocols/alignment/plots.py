"""Scatter plots of evaluator scores against human ratings: one PNG per evaluator, a panel per dimension.

A correlation hides what a scatter shows at once: ceiling effects, a few outliers carrying a figure,
discrete evaluators whose scores pile up on a handful of values.
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

import polars as pl

from argus_dagster.infra.storage import LOCAL
from argus_dagster.protocols.alignment.metrics import paired_scores


def slug(name: str) -> str:
    """A file-name-safe evaluator name: ``argus:d13 visual/frame quality`` → ``argus-d13-visual-frame-quality``."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", name).strip("-") or "evaluator"


def scatter_png(path: str | Path, human: pl.DataFrame, scores: pl.DataFrame, evaluator: str,
                table: pl.DataFrame, title: str = "", storage=None) -> Path | str:
    """Write one evaluator's scatter (to a file, or an ``s3://`` object through ``storage``) (x: its
    score, y: the human score), one panel per human dimension.

    ``human`` and ``scores`` are what :func:`argus_dagster.protocols.alignment.metrics.alignment_table` took; each panel's
    title quotes that table's SRCC and within-input SRCC for the pair.
    """
    import matplotlib  # deferred: start-up time (half a second, measured; only a plot needs it)

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # deferred: start-up time, with matplotlib above

    rows = table.filter(pl.col("evaluator") == evaluator)
    dims = rows["dimension"].to_list()
    ncols = min(3, max(1, len(dims)))
    nrows = max(1, math.ceil(len(dims) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.8 * nrows), squeeze=False)
    for ax in axes.flat[len(dims):]:
        ax.set_visible(False)
    for ax, r in zip(axes.flat, rows.iter_rows(named=True)):
        pairs = paired_scores(human, scores, evaluator, r["dimension"])
        n = pairs.height
        ax.scatter(pairs["score"].to_numpy(), pairs["human"].to_numpy(), s=12 if n < 200 else 4,
                   alpha=0.8 if n < 200 else 0.3, color="tab:blue", edgecolors="none")
        srcc = "-" if r["srcc"] is None or math.isnan(r["srcc"]) else f"{r['srcc']:.2f}"
        wi_srcc = r["within_input_srcc"]
        wi = "-" if wi_srcc is None or math.isnan(wi_srcc) else f"{wi_srcc:.2f}"
        ax.set_title(f"{r['dimension']}  n={n}\nSRCC {srcc} · within-input {wi}", fontsize=8)
        ax.set_xlabel(evaluator, fontsize=7)
        ax.set_ylabel("human", fontsize=7)
        ax.tick_params(labelsize=6)
    fig.suptitle(title or evaluator, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return (storage or LOCAL).write_bytes(path, buf.getvalue())
