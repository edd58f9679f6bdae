"""The IO manager keeps every materialization's table readable: a copy per version, the latest
``keep_versions`` of each asset partition, the oldest removed first."""

import io

import dagster as dg
import polars as pl

from argus_dagster.resources.storage import StorageIOManager, StorageResource

TASKS = dg.StaticPartitionsDefinition(["T2V", "TI2V"])
MODELS = dg.StaticPartitionsDefinition(["m", "n"])
GRID = dg.MultiPartitionsDefinition({"model": MODELS, "task": TASKS})


@dg.asset(partitions_def=TASKS, config_schema={"value": float})
def scores(context) -> pl.DataFrame:
    return pl.DataFrame({"partition": [context.partition_key], "value": [context.op_execution_context.op_config["value"]]})


@dg.asset(partitions_def=GRID, config_schema={"value": float})
def grid_scores(context) -> pl.DataFrame:
    return pl.DataFrame({"value": [context.op_execution_context.op_config["value"]]})


def _run(asset, key, value: float, instance, io_manager) -> None:
    assert dg.materialize([asset], partition_key=key, instance=instance, resources={"io_manager": io_manager},
                          run_config={"ops": {asset.key.path[-1]: {"config": {"value": value}}}}).success


def _records(instance, asset: str, partition: str) -> list:
    flt = dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition])
    return list(reversed(instance.fetch_materializations(flt, limit=100).records))  # oldest first


def _read(storage, path: str) -> pl.DataFrame:
    return pl.read_parquet(io.BytesIO(storage.read_bytes(path)))


def _kept_values(storage, folder: str) -> list[float]:
    return [_read(storage, o.uri)["value"][0] for o in sorted(storage.list(folder), key=lambda o: o.rel)]


def test_retention_keeps_the_latest_n_of_a_partition_and_prunes_the_oldest(tmp_path):
    keep = 2
    storage = StorageResource(evaluation_dir=str(tmp_path))
    io_manager = StorageIOManager(storage=storage, base_dir=str(tmp_path / "storage"), keep_versions=keep)
    with dg.instance_for_test() as instance:
        for v in range(1, 5):
            _run(scores, "T2V", float(v), instance, io_manager)
        _run(scores, "TI2V", 100.0, instance, io_manager)  # another partition keeps its own
        folder = io_manager.versions_folder(dg.AssetKey("scores"), "T2V")
        assert _kept_values(storage.storage(), folder) == [float(v) for v in range(5 - keep, 5)]
        assert _kept_values(storage.storage(), io_manager.versions_folder(dg.AssetKey("scores"), "TI2V")) == [100.0]
        records = _records(instance, "scores", "T2V")
        assert len(records) == 4
        for v, record in enumerate(records, start=1):  # each materialization's own table, or gone when pruned
            recorded = record.asset_materialization.metadata["stored_version"].value
            assert recorded.startswith("storage/_versions/scores/T2V/")  # relative to the evaluation's folder
            path = storage.storage().resolve(recorded)
            assert path.startswith(str(tmp_path / "storage" / "_versions"))
            if v > 4 - keep:
                assert _read(storage.storage(), path)["value"].to_list() == [float(v)]
            else:
                assert not storage.exists(path)
        # the table the latest materialization points at is the latest one
        latest = records[-1].asset_materialization.metadata["path"].value
        assert latest == "storage/scores/T2V.parquet"
        latest = storage.storage().resolve(latest)
        assert _read(storage.storage(), latest)["value"].to_list() == [4.0]


def test_zero_keeps_every_version_and_a_task_x_model_partition_keeps_its_own(tmp_path):
    storage = StorageResource()
    io_manager = StorageIOManager(storage=storage, base_dir=str(tmp_path / "storage"), keep_versions=0)
    key = dg.MultiPartitionKey({"model": "m", "task": "T2V"})
    with dg.instance_for_test() as instance:
        for v in range(1, 4):
            _run(grid_scores, key, float(v), instance, io_manager)
        folder = io_manager.versions_folder(dg.AssetKey("grid_scores"), str(key), multi=True)
        assert folder.endswith("_versions/grid_scores/m/T2V")
        assert _kept_values(storage.storage(), folder) == [float(v) for v in range(1, 4)]


def test_the_default_keeps_ten():
    assert StorageIOManager(storage=StorageResource(), base_dir="x").keep_versions == 10
