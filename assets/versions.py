"""Data versions from content: one function gives every asset's ``DataVersion``.

An asset's data version is the canonical hash of its whole output: every column (its name, its
dtype and its values, nested lists and structs included), its rows in a stable order that does not
depend on the order they were produced in, less the columns the asset declares volatile (timings,
costs, cache use, run ids: what differs between two runs that wrote the same content). What a
downstream asset reads can never change without the version changing, so Dagster's staleness (and
``argus evaluate``) always runs what reads it again.

A value that is not one table goes through the same function: a mapping of names to tables (a run
of many partitions, an asset that writes two tables), a list, or a plain value.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

import dagster as dg
import polars as pl

VERSION_LENGTH = 16

# Where an asset declares its volatile columns in its definition's metadata (the UI shows them).
VOLATILE_KEY = "data_version_ignores"


def volatile_metadata(volatile: Iterable[str]) -> dict:
    """Definition metadata that declares an asset's volatile columns (:data:`VOLATILE_KEY`)."""
    return {VOLATILE_KEY: dg.MetadataValue.json(sorted(set(volatile)))}


def _plain(value: Any) -> Any:
    """A cell as a JSON value that says its content exactly: bytes as hex, dates ISO, structs with
    sorted keys (``json.dumps(sort_keys=True)``), lists in their order."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return {type(value).__name__: value.isoformat()}
    if isinstance(value, _dt.timedelta):
        return {"timedelta": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value != value:
        return {"float": "nan"}
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return {"float": str(value)}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return {type(value).__name__: str(value)}


def _dump(value: Any) -> str:
    return json.dumps(_plain(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _table_text(df: pl.DataFrame, volatile: frozenset[str]) -> str:
    """A table as canonical text: its columns sorted by name with their dtypes, then one line per
    row (the row's values in that column order), the lines sorted."""
    cols = sorted(c for c in df.columns if c not in volatile)
    header = _dump([[c, str(df.schema[c])] for c in cols])
    rows = sorted(_dump(list(r)) for r in df.select(cols).iter_rows()) if cols else [_dump([])] * df.height
    return f"table {len(rows)}\n{header}\n" + "\n".join(rows)


def _text(value: Any, volatile: frozenset[str]) -> str:
    if isinstance(value, pl.DataFrame):
        return _table_text(value, volatile)
    if isinstance(value, pl.Series):
        return _table_text(value.to_frame(), volatile)
    if isinstance(value, dg.DataVersion):
        return f"version {_dump(value.value)}"
    if isinstance(value, Mapping):
        parts = [f"{_dump(str(k))}={_text(v, volatile)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))]
        return f"mapping {len(parts)}\n" + "\n\0".join(parts)
    if isinstance(value, (list, tuple)) and any(isinstance(v, (pl.DataFrame, Mapping)) for v in value):
        return f"list {len(value)}\n" + "\n\0".join(_text(v, volatile) for v in value)
    return f"value {_dump(value)}"


def content_digest(value: Any, volatile: Iterable[str] = ()) -> str:
    """The hex digest :func:`content_version` wraps."""
    text = _text(value, frozenset(volatile))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:VERSION_LENGTH]


def content_version(value: Any, volatile: Iterable[str] = ()) -> dg.DataVersion:
    """The data version of an asset's output ``value`` (a table, a mapping of names to tables or
    values, or a plain value): the hash of every column but the ``volatile`` ones, rows in a stable
    order. Two outputs that differ in any other cell, column name or dtype have different versions;
    the same rows in another order, or differing only in a volatile column, have the same."""
    return dg.DataVersion(content_digest(value, volatile))
