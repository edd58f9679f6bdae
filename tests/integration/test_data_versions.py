"""Data versions from content, on a real evaluation (`argus evaluate --protocol both` of a two-prompt
T2V bench, two models):

* the walk: every asset that recorded a data version of its own recorded the one
  :func:`~assets.versions.content_version` gives its stored output with the volatile columns it
  declares (``data_version_ignores``); a change of any other cell, one at a time, gives a new version, a
  change of a volatile one or the rows in another order the same;
* the user's scenario: a prompt edited so its rubric gains criteria, `argus evaluate` again, and the
  stored leaderboard says the new coverage after that same second evaluate.
"""

import json

import dagster as dg
import polars as pl
import pytest

from argus_dagster.assets.versions import VOLATILE_KEY, content_version
from argus_dagster.client.cli import main
from argus_dagster.infra.media import write_video
from tests.versions_walk import walk

from .helpers import pattern_clip, t2v_bench

pytestmark = pytest.mark.integration

USER_PROVIDED = "dagster/data_version_is_user_provided"
VERSION = "dagster/data_version"
EDITED_PROMPT = "A textured pattern slides to the left, take 0. Two red cats appear on the right and wave."


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory):
    """A two-prompt T2V bench with two models (``m``, and ``n``: the clips mirrored), evaluated by
    `argus evaluate` in its own home."""
    root = tmp_path_factory.mktemp("versions")
    bench, cands = t2v_bench(root, n_inputs=2, n_frames=16)
    for i in range(2):
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(i, 16)[:, :, ::-1], 12)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARGUS_HOME", str(root / "home"))
        yield {"bench": bench, "cands": cands, "evaluate": lambda *more: main(
            ["evaluate", "--bench", str(bench), "--candidates", str(cands), "--task", "T2V", *more])}


def _stored(asset: str, partition: str | None):
    """The latest materialization record of an asset partition and the table it stored."""
    from argus_dagster.client.instance import local_instance
    from argus_dagster.client.results import evaluation_storage
    from argus_dagster.infra.settings import load_settings
    from argus_dagster.infra.tables import recorded_table
    from argus_dagster.records.lineage import latest_record

    settings = load_settings()
    record = latest_record(local_instance(settings), asset, partition)
    return record, (recorded_table(record, evaluation_storage(settings)) if record else None)


def _declared() -> dict[str, list[str] | None]:
    """Every asset's declared volatile columns (None where it declares none)."""
    from argus_dagster.assets import ALL_ASSETS

    out = {}
    for a in ALL_ASSETS:
        for spec in a.specs:
            meta = spec.metadata.get(VOLATILE_KEY)
            out[spec.key.to_user_string()] = None if meta is None else list(meta.data)
    return out


def test_every_assets_version_is_its_whole_output_but_the_volatile_columns(evaluation):
    assert evaluation["evaluate"]("--protocol", "both") == 0  # FIRM-Video's assets after VideoArgus's
    from argus_dagster.client.instance import local_instance

    declared = _declared()
    assert all(v is not None for v in declared.values()), {k for k, v in declared.items() if v is None}
    instance = local_instance()
    walked: dict[str, int] = {}
    rows: dict[str, int] = {}  # the fewest rows a walked asset's partition has
    for asset, volatile in declared.items():
        keys = instance.get_materialized_partitions(dg.AssetKey(asset)) or {None}
        runs: dict[str, dict] = {}  # the partitions each run materialized: {run: {partition: (recorded, version)}}
        for partition in sorted(keys, key=str):
            record, table = _stored(asset, partition)
            if record is None or record.asset_materialization.tags.get(USER_PROVIDED) != "true":
                continue
            assert table is not None, (asset, partition)
            rows[asset] = min(rows.get(asset, table.height), table.height)
            base = content_version(table, volatile)
            runs.setdefault(record.run_id, {})[str(partition)] = (record.asset_materialization.tags[VERSION], base)
            covered = walk(table, volatile, (asset, partition))
            if covered:  # a table without rows (FIRM's verdicts with no VLM) has no cell to change
                walked[asset] = covered
        # Each partition recorded the version of what it stored, with the columns its asset declares
        # volatile; a run of many partitions records for each the version of them all together.
        for run, parts in runs.items():
            versions = {p: version for p, (_, version) in parts.items()}
            expected = next(iter(versions.values())) if len(parts) == 1 else content_version(versions)
            assert {recorded for recorded, _ in parts.values()} == {expected.value}, (asset, run, parts)
    expected = {"input_instances", "rubrics", "candidate_videos", "criterion_evidence", "criterion_scores",
                "video_scores", "diagnostic_reports", "leaderboard", "firm_checklists", "firm_scores"}
    assert expected <= set(walked) and all(rows[a] >= 2 for a in expected), (walked, rows)
    print(f"data version walk: versions of {len(rows)} assets checked, the cells of {len(walked)} changed "
          f"({sum(walked.values())} non-volatile columns): {walked}; fewest rows {rows}")


def test_a_prompt_that_gains_criteria_updates_the_leaderboards_coverage_in_the_same_evaluate(evaluation):
    bench = evaluation["bench"]
    _, before = _stored("leaderboard", None)
    if before is None:  # the walk did not run first
        assert evaluation["evaluate"]() == 0
        _, before = _stored("leaderboard", None)
    _, rubrics = _stored("rubrics", "T2V")
    n_before = dict(zip(rubrics["input_id"], rubrics["n_criteria"]))
    key = str(dg.MultiPartitionKey({"task": "T2V", "model": "m"}))
    scored_before, _ = _stored("video_scores", key)

    manifest = bench / "T2V" / "manifest.jsonl"
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[0]["prompt"] = EDITED_PROMPT
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert evaluation["evaluate"]() == 0

    _, rubrics = _stored("rubrics", "T2V")
    n_after = dict(zip(rubrics["input_id"], rubrics["n_criteria"]))
    assert n_after["p0"] > n_before["p0"] and n_after["p1"] == n_before["p1"], (n_before, n_after)
    scored_after, videos = _stored("video_scores", key)
    assert dict(zip(videos["input_id"], videos["n_criteria"])) == n_after
    # the new criteria need a VLM (unscored, the finals as they were): the version moves with n_criteria itself,
    # so whatever reads video_scores alone (the reports) is stale too
    version = "dagster/data_version"
    assert scored_after.asset_materialization.tags[version] != scored_before.asset_materialization.tags[version]
    _, after = _stored("leaderboard", None)
    row = after.filter((pl.col("task") == "T2V") & (pl.col("model") == "m")).row(0, named=True)
    assert row["n_criteria"] == pytest.approx(sum(n_after.values()) / 2)  # both videos scored, none in error
    assert row["n_scored"] == pytest.approx(videos["n_scored"].mean())
    assert sorted(row["needs_vlm"]) == sorted({c for cs in videos["needs_vlm"] for c in cs})
    was = before.filter((pl.col("task") == "T2V") & (pl.col("model") == "m")).row(0, named=True)
    assert row["n_criteria"] > was["n_criteria"]
