"""docs/architecture.md's asset table is the asset graph: every asset the code location defines is a row,
every row an asset, each with its partitions as the graph has them."""

import re
from pathlib import Path

import dagster as dg

from argus_dagster.assets import ALL_ASSETS

ROOT = Path(__file__).resolve().parents[2]


def doc_table(text: str) -> dict[str, str]:
    """``{asset: partitions}`` from the table under "## The asset graph"."""
    section = text.partition("## The asset graph")[2].partition("\n## ")[0]
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \|", section, re.M)}


def partitions_of(asset: dg.AssetsDefinition) -> str:
    p = asset.partitions_def
    if p is None:
        return "none"
    if isinstance(p, dg.MultiPartitionsDefinition):
        names = [d.name for d in p.partitions_defs]  # Dagster keeps them sorted by name: the doc reads task first
        return " × ".join(sorted(names, key=lambda n: (n != "task", n)))
    return "task"


def graph_table() -> dict[str, str]:
    return {k.to_user_string(): partitions_of(a) for a in ALL_ASSETS for k in a.keys}


def test_the_asset_table_is_the_graph():
    assert doc_table((ROOT / "docs" / "architecture.md").read_text()) == graph_table()


def test_a_missing_row_or_wrong_partitions_is_found():
    text = "## The asset graph\n\n| asset | partitions | holds |\n| --- | --- | --- |\n" \
           "| `rubrics` | task × model | rubrics |\n| `leaderboard` | none | ranks |\n\n## Next\n| `x` | none | y |\n"
    assert doc_table(text) == {"rubrics": "task × model", "leaderboard": "none"}
    graph = graph_table()
    assert graph["rubrics"] == "task" and graph["criterion_scores"] == "task × model" and graph["site"] == "none"
