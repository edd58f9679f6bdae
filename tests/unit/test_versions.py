"""Data versions from content (assets/versions.py), and the sources' versions of a file edited
again and again (assets/sources.py): what a downstream asset reads can never change without a new
version."""

import json
import os

import polars as pl
import pytest

from argus_dagster.assets.sources import bench_files_version, candidate_files_version
from argus_dagster.assets.versions import content_version
from argus_dagster.infra.media import file_digest
from argus_dagster.infra.storage import Storage
from argus_dagster.method.candidate_store import LocalCandidateStore, partition_hashes, scan

SCORES = pl.DataFrame(
    {"input_id": ["p0", "p1", "p1"], "sample": ["", "1", "2"], "final_score": [7.5, None, 3.0],
     "n_criteria": [6, 9, 9], "needs_vlm": [["a"], [], ["b", "c"]], "seconds": [0.1, 0.2, 0.3],
     "plan": [{"tool": "ocr", "k": 1}, {"tool": "flow", "k": None}, {"tool": "ocr", "k": 2}]})


def test_every_column_is_in_the_version_but_the_volatile_ones():
    base = content_version(SCORES, volatile=["seconds"])
    moved = {
        "input_id": SCORES.with_columns(pl.Series("input_id", ["p0", "p1", "p2"])),
        "sample": SCORES.with_columns(pl.Series("sample", ["", "1", "3"])),
        "final_score": SCORES.with_columns(pl.Series("final_score", [7.5, 0.0, 3.0])),  # null is not 0
        "n_criteria": SCORES.with_columns(pl.Series("n_criteria", [6, 9, 10])),
        "needs_vlm": SCORES.with_columns(pl.Series("needs_vlm", [["a"], [], ["c", "b"]])),  # a list keeps its order
        "plan": SCORES.with_columns(pl.Series("plan", [{"tool": "ocr", "k": 1}, {"tool": "flow", "k": 0},
                                                         {"tool": "ocr", "k": 2}])),
        "a dtype": SCORES.with_columns(pl.col("n_criteria").cast(pl.Float64)),
        "a column's name": SCORES.rename({"n_criteria": "n_criterion"}),
        "a duplicated row": pl.concat([SCORES, SCORES.head(1)]),
    }
    for what, df in moved.items():
        assert content_version(df, volatile=["seconds"]) != base, what
    assert content_version(SCORES.with_columns(pl.col("seconds") * 10), volatile=["seconds"]) == base
    assert content_version(SCORES) != base  # seconds counts where not declared volatile


def test_rows_and_columns_in_another_order_have_the_same_version():
    base = content_version(SCORES)
    assert content_version(SCORES.reverse()) == base
    assert content_version(SCORES.sample(fraction=1.0, shuffle=True, seed=3)) == base
    assert content_version(SCORES.select(list(reversed(SCORES.columns)))) == base


def test_values_that_print_alike_have_different_versions():
    """The canonical form says each value exactly: a null is not an empty string, a string "1" is not
    the number 1, two cells are not their concatenation."""
    assert content_version(pl.DataFrame({"a": [None]}, schema={"a": pl.String})) != \
        content_version(pl.DataFrame({"a": [""]}))
    assert content_version(pl.DataFrame({"a": ["ab"], "b": [""]})) != content_version(pl.DataFrame({"a": ["a"], "b": ["b"]}))
    assert content_version({"x": 1}) != content_version({"x": "1"})


def test_a_mapping_of_tables_goes_through_the_same_function():
    """A run of many partitions (``{partition: table}``) or an asset that writes two tables."""
    both = {"m|T2V": SCORES, "n|T2V": SCORES.head(1)}
    base = content_version(both, volatile=["seconds"])
    assert content_version({"n|T2V": SCORES.head(1), "m|T2V": SCORES.reverse()}, volatile=["seconds"]) == base
    assert content_version({**both, "n|T2V": SCORES.tail(1)}, volatile=["seconds"]) != base
    assert content_version({"m|T2V": SCORES.head(1), "n|T2V": SCORES}, volatile=["seconds"]) != base  # keys matter


def _edit(path, text: str, when: int) -> None:
    """Write ``text`` and set the modification time back to ``when`` (as ``cp -p``, ``rsync -t`` or a
    tool that keeps times do), so size and mtime stay what they were."""
    path.write_text(text)
    os.utime(path, ns=(when, when))


def test_a_bench_file_edited_twice_in_the_same_second_has_three_versions(tmp_path):
    storage = Storage(lambda: None, cache_dir=tmp_path / "cache")
    manifest = tmp_path / "bench" / "T2V" / "manifest.jsonl"
    manifest.parent.mkdir(parents=True)
    when = 1_700_000_000_000_000_000
    rows = [json.dumps({"id": "p0", "prompt": f"A dog runs, take {k}."}) + "\n" for k in range(3)]
    assert len({len(r) for r in rows}) == 1  # the same size every time
    versions = []
    for row in rows:
        _edit(manifest, row, when)
        versions.append(bench_files_version(tmp_path / "bench", "T2V", storage))
    assert len(set(versions)) == 3, versions
    assert file_digest(str(manifest)) == file_digest(str(manifest))  # and reads the same content alike


def test_a_candidate_video_edited_twice_in_the_same_second_has_three_versions(tmp_path):
    video = tmp_path / "T2V" / "m" / "p0.mp4"
    video.parent.mkdir(parents=True)
    when = 1_700_000_000_000_000_000
    store, known, versions = LocalCandidateStore(tmp_path), None, []
    for body in ("AAAA", "BBBB", "CCCC"):
        _edit(video, body, when)
        known = scan(store, known).known
        versions.append(candidate_files_version(partition_hashes(known, "T2V", "m")))
    assert len(set(versions)) == 3, versions


def _schemas() -> dict[str, dict]:
    """Every asset's stored table schema (the backbone robustness asset's version covers its rank
    and criterion tables: both, as one table each)."""
    from argus_dagster.assets.alignment import ALIGNMENT_TABLE
    from argus_dagster.assets.firm import BEST_OF_N, FIRM_CHECKLISTS, FIRM_SCORES, FIRM_VERDICTS
    from argus_dagster.assets.overview import SITE_PAGES
    from argus_dagster.assets.reports import REPORTS
    from argus_dagster.assets.vefx import VEFX_SCORES
    from argus_dagster.infra.tables import (
        CANDIDATE_VIDEOS,
        CRITERION_EVIDENCE,
        CRITERION_SCORES,
        INPUT_INSTANCES,
        LEADERBOARD,
        RUBRICS,
        VIDEO_SCORES,
    )
    from argus_dagster.method.controls import CONTROL_SCORES, CONTROLS
    from argus_dagster.method.judge_noise import JUDGE_NOISE
    from argus_dagster.method.ledger import LEDGER
    from argus_dagster.protocols import robustness, vefx

    return {"input_instances": INPUT_INSTANCES, "rubrics": RUBRICS, "candidate_videos": CANDIDATE_VIDEOS,
            "criterion_evidence": CRITERION_EVIDENCE, "criterion_scores": CRITERION_SCORES,
            "video_scores": VIDEO_SCORES, "diagnostic_reports": REPORTS, "leaderboard": LEADERBOARD,
            "judge_noise": JUDGE_NOISE, "control_scores": CONTROL_SCORES, "controls": CONTROLS,
            "human_alignment": ALIGNMENT_TABLE, "backbone_robustness": robustness.RANK_SCHEMA,
            "backbone_robustness criteria": robustness.CRITERION_SCHEMA, "firm_checklists": FIRM_CHECKLISTS,
            "firm_verdicts": FIRM_VERDICTS, "firm_scores": FIRM_SCORES, "best_of_n": BEST_OF_N,
            "vefx_scores": VEFX_SCORES, "vefx_leaderboard": vefx.LEADERBOARD_SCHEMA, "site": SITE_PAGES,
            "costs": LEDGER}


def _cell(dtype, column: str, i: int):
    """Row ``i``'s value of a column: distinct per row, a null in the last row."""
    if i == 2:
        return None
    if isinstance(dtype, pl.List):
        return [_cell(dtype.inner, column, i)] * (i + 1)
    if dtype == pl.String:
        return f"{column} {i}"
    if dtype == pl.Boolean:
        return i == 0
    return i + (0.25 if dtype.is_float() else 0)


def test_every_asset_declares_its_volatile_columns_among_its_own_and_the_rest_counts():
    """Every asset's schema, as a table of three rows, walked as the integration walk walks a real
    output (tests/integration/test_data_versions.py): the assets a small evaluation does not reach
    (VEFX, best-of-N, human alignment, backbone robustness) too. A volatile column a schema does not
    have (a typo) would leave the real one counted."""
    from argus_dagster.assets import ALL_ASSETS
    from argus_dagster.assets.versions import VOLATILE_KEY
    from tests.versions_walk import walk

    declared = {s.key.to_user_string(): s.metadata.get(VOLATILE_KEY) for a in ALL_ASSETS for s in a.specs}
    assert all(v is not None for v in declared.values()), declared
    schemas = _schemas()
    assert {k.split()[0] for k in schemas} == set(declared)
    covered = {}
    for name, schema in schemas.items():
        volatile = list(declared[name.split()[0]].data)
        assert set(volatile) <= set(schema), (name, sorted(set(volatile) - set(schema)))
        table = pl.DataFrame([{c: _cell(t, c, i) for c, t in schema.items()} for i in range(3)], schema=schema,
                             orient="row")
        covered[name] = walk(table, volatile, name)
        assert covered[name] == len(schema) - len(volatile)
    print(f"schema walk: {len(declared)} assets, {len(covered)} tables, {sum(covered.values())} non-volatile columns")


@pytest.mark.parametrize("asset, not_counted", [
    ("judge_noise", set()),  # every repeat's score, the judge that gave it, the video's final score
    ("control_scores", {"uri"}),  # where a control file lies moves with the evaluation; its content counts
    ("controls", set()),
    ("leaderboard", set()),  # the judge's noise and whether each rank holds under it count
])
def test_what_the_asked_for_assets_and_the_leaderboard_versions_leave_out(asset, not_counted):
    """Stated here, not read from what the assets declare: every column of these tables but the named
    ones moves the data version when one of its cells changes; the named ones do not."""
    from argus_dagster.assets import ALL_ASSETS
    from argus_dagster.assets.versions import VOLATILE_KEY
    from tests.versions_walk import other

    [spec] = [s for a in ALL_ASSETS for s in a.specs if s.key.to_user_string() == asset]
    volatile = list(spec.metadata[VOLATILE_KEY].data)
    schema = _schemas()[asset]
    table = pl.DataFrame([{c: _cell(t, c, i) for c, t in schema.items()} for i in range(3)], schema=schema, orient="row")
    base = content_version(table, volatile)
    for column, dtype in schema.items():
        cells = table[column].to_list()
        changed = table.with_columns(pl.Series(column, [other(cells[0], dtype), *cells[1:]], dtype=dtype))
        moved = content_version(changed, volatile) != base
        assert moved == (column not in not_counted), (asset, column)
