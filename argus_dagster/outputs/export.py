"""``argus export leaderboard|videos|criteria|costs``: the stored score tables as CSV, JSON or parquet.

The tables are the ones the runs stored (nothing is recomputed): ``leaderboard`` (per task and
model), ``video_scores`` (per video) and ``criterion_scores`` (per video and criterion); ``costs`` is
the cost ledger per task and model, the sums of the stored video scores' VLM costs
(:func:`argus_dagster.method.ledger.cost_table`). Parquet and
JSON keep every column as stored, lists included; CSV holds no lists or structs, so
:func:`flatten_for_csv` writes a list as its items joined by :data:`LIST_SEPARATOR` and a struct as
one column per field (``<column>.<field>``). ``docs/exports.md`` describes every column.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from argus_dagster.infra.files import write_atomic
from argus_dagster.infra.names import file_name
from argus_dagster.infra.storage import join

# What a person asks for, and the asset whose stored table it is.
TABLES = {"leaderboard": "leaderboard", "videos": "video_scores", "criteria": "criterion_scores",
          "costs": "video_scores", "controls": "controls", "noise": "judge_noise"}
FORMATS = ("csv", "json", "parquet")
LIST_SEPARATOR = "; "


def flatten_for_csv(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with no nested column: a list becomes its items as text joined by ``"; "``, a struct one
    column per field named ``<col>.<field>``. In the CSV file an empty list and a missing value are
    both an empty field (as every null is)."""
    out = df
    for _ in range(8):  # structs of lists of structs: flatten until nothing nested is left
        nested = False
        cols = []
        for name, dtype in out.schema.items():
            if isinstance(dtype, pl.Struct):
                nested = True
                cols += [pl.col(name).struct.field(f.name).alias(f"{name}.{f.name}") for f in dtype.fields]
            elif isinstance(dtype, (pl.List, pl.Array)):
                nested = True
                inner = dtype.inner
                item = pl.element()
                if isinstance(inner, (pl.Struct, pl.List, pl.Array)):
                    cols.append(pl.col(name).map_elements(
                        lambda v: LIST_SEPARATOR.join(str(x) for x in v) if v is not None else None,
                        return_dtype=pl.String).alias(name))
                    continue
                cols.append(pl.col(name).list.eval(item.cast(pl.String)).list.join(LIST_SEPARATOR).alias(name))
            else:
                cols.append(pl.col(name))
        if not nested:
            return out
        out = out.select(cols)
    return out


# A text cell a spreadsheet would run as a formula starts with one of these (OWASP's list: tab and
# carriage return too); in CSV such a cell is written after a ``'``, which spreadsheets show as text.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
TEXT_MARK = "'"
_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"


def spreadsheet_safe(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with every text cell that starts with ``= + - @`` (or a tab or carriage return) prefixed
    with ``'``, so a spreadsheet opening the CSV shows it as text and never evaluates it; a cell that is
    a plain number (``-3``, ``+1.5e2``) is a number to a spreadsheet, not a formula, and stays as it is."""
    cols = []
    for name, dtype in df.schema.items():
        if dtype == pl.String:
            c = pl.col(name)
            risky = c.str.starts_with(FORMULA_START[0])
            for mark in FORMULA_START[1:]:
                risky = risky | c.str.starts_with(mark)
            cols.append(pl.when(risky & ~c.str.contains(_NUMBER)).then(pl.lit(TEXT_MARK) + c).otherwise(c).alias(name))
        else:
            cols.append(pl.col(name))
    return df.select(cols)


def encode(df: pl.DataFrame, fmt: str) -> bytes:
    """``df`` as the bytes of a ``fmt`` file: CSV flattened and spreadsheet-safe
    (:func:`spreadsheet_safe`), JSON an array of one object per row, parquet as stored."""
    if fmt == "csv":
        return spreadsheet_safe(flatten_for_csv(df)).write_csv().encode("utf-8")
    if fmt == "json":
        return df.write_json().encode("utf-8") + b"\n"
    if fmt == "parquet":
        buf = io.BytesIO()
        df.write_parquet(buf)
        return buf.getvalue()
    raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")


def combine(parts: Sequence[pl.DataFrame | None], tasks: list[str] | None = None) -> pl.DataFrame | None:
    """Stored partitions as one table (rows of ``tasks`` only, when given), None when there are none."""
    frames = [p for p in parts if p is not None]
    if not frames:
        return None
    df = pl.concat(frames, how="diagonal_relaxed")
    if tasks and "task" in df.columns:
        df = df.filter(pl.col("task").is_in(tasks))
    sort = [c for c in ("task", "model", "input_id", "sample", "criterion_id") if c in df.columns]
    return df.sort(sort, maintain_order=True) if sort and "mean_final" not in df.columns else df


def with_evaluation(df: pl.DataFrame, bench: str, profile: str) -> pl.DataFrame:
    """``df`` with the evaluation its rows belong to as its first columns, ``bench`` and ``profile``
    (a table that carries them already, the leaderboard, keeps its own): an exported file says which
    evaluation it is wherever it is copied to."""
    named = [pl.lit(value, pl.String).alias(name) for name, value in (("bench", bench), ("profile", profile))
             if name not in df.columns]
    return df.select([*named, pl.all()]) if named else df


def default_out(what: str, fmt: str, evaluation: str, home: str | Path) -> Path:
    """``$ARGUS_HOME/exports/<bench>-<profile>-<what>.<fmt>`` (``home``: the ARGUS_HOME in effect): never
    the working directory, so an export run in a repository leaves it clean."""
    return Path(home) / "exports" / f"{file_name(evaluation.replace('/', '-'))}-{what}.{fmt}"


def write_table(df: pl.DataFrame, fmt: str, out: str | Path) -> Path:
    """Write ``df`` whole to ``out`` as ``fmt``; raises :class:`argus_dagster.infra.files.WriteError`."""
    return write_atomic(out, encode(df, fmt))


def write_exports(tables: dict[str, pl.DataFrame], reports_dir: str | Path, store, bench: str,
                  profile: str) -> dict[str, str]:
    """Each of ``tables`` (by :data:`TABLES` name) as ``<reports_dir>/exports/<name>.csv`` and ``.json``,
    each row naming its evaluation (:func:`with_evaluation`), written through ``store`` (a folder or an
    ``s3://`` prefix), beside the pages that link them; returns ``{"<name>_<fmt>": path}``. Raises
    :class:`argus_dagster.infra.files.WriteError`."""
    out = {}
    for name, df in tables.items():
        named = with_evaluation(df, bench, profile)
        for fmt in ("csv", "json"):
            path = join(reports_dir, "exports", f"{name}.{fmt}")
            store.write_bytes(path, encode(named, fmt))
            out[f"{name}_{fmt}"] = str(path)
    return out
