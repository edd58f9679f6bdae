"""The property walk of a data version (assets/versions.py) over one table: every cell that is not
volatile, changed in turn, gives a new version; the volatile columns changed, or the rows in another
order, give the same."""

import polars as pl

from argus_dagster.assets.versions import content_version


def other(value, dtype):
    """A value of ``dtype`` unlike ``value``."""
    if isinstance(dtype, pl.List):
        inner = dtype.inner
        return [other(None, inner)] if not value else value[:-1] + [other(value[-1], inner)]
    if isinstance(dtype, pl.Struct):
        first = dtype.fields[0]
        value = dict(value or {f.name: None for f in dtype.fields})
        value[first.name] = other(value.get(first.name), first.dtype)
        return value
    if dtype == pl.String:
        return "x" if value is None else value + "·"
    if dtype == pl.Boolean:
        return True if value is None else not value
    if dtype.is_integer():
        return 0 if value is None else value + 1
    if dtype.is_float():
        return 0.0 if value is None or value != value else value + 0.5
    raise AssertionError(f"no other value for dtype {dtype}")


def walk(table: pl.DataFrame, volatile, label) -> int:
    """Check the properties on ``table`` with its asset's ``volatile`` columns; the number of columns
    whose every cell was changed (none for a table without rows)."""
    volatile = list(volatile)
    base = content_version(table, volatile)
    assert content_version(table.reverse(), volatile) == base, (label, "rows reversed")
    assert content_version(table.sample(fraction=1.0, shuffle=True, seed=7), volatile) == base, (label, "rows shuffled")
    for column in table.columns:
        dtype, cells = table.schema[column], table[column].to_list()
        if column in volatile:
            changed = table.with_columns(pl.Series(column, [other(v, dtype) for v in cells], dtype=dtype))
            assert content_version(changed, volatile) == base, (label, column, "volatile")
            continue
        for row in range(table.height):
            values = list(cells)
            values[row] = other(values[row], dtype)
            changed = table.with_columns(pl.Series(column, values, dtype=dtype))
            assert content_version(changed, volatile) != base, (label, column, row)
    return (table.width - len(set(volatile) & set(table.columns))) if table.height else 0
