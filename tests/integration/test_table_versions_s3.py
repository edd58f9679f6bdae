"""The IO manager keeps the same versions on S3 (moto's server on loopback) as in a folder: the latest
``keep_versions`` of each asset partition, the oldest removed."""

import io

import dagster as dg
import polars as pl
import pytest

from argus_dagster.resources.storage import StorageIOManager, StorageResource

pytestmark = pytest.mark.integration

TASKS = dg.StaticPartitionsDefinition(["T2V"])


@dg.asset(partitions_def=TASKS, config_schema={"value": float})
def scores(context) -> pl.DataFrame:
    return pl.DataFrame({"value": [context.op_execution_context.op_config["value"]]})


def test_on_s3_retention_keeps_the_latest_n_and_each_materialization_reads_its_own(moto_endpoint):
    storage = StorageResource(endpoint_url=moto_endpoint, region_name="us-east-1", evaluation_dir="s3://tables/eval")
    storage.get_client().create_bucket(Bucket="tables")
    io_manager = StorageIOManager(storage=storage, base_dir="s3://tables/eval/storage", keep_versions=2)
    with dg.instance_for_test() as instance:
        for v in (1.0, 2.0, 3.0):
            assert dg.materialize([scores], partition_key="T2V", instance=instance, resources={"io_manager": io_manager},
                                  run_config={"ops": {"scores": {"config": {"value": v}}}}).success
        flt = dg.AssetRecordsFilter(asset_key=dg.AssetKey("scores"), asset_partitions=["T2V"])
        records = list(reversed(instance.fetch_materializations(flt, limit=10).records))
    recorded = [r.asset_materialization.metadata["stored_version"].value for r in records]
    assert all(k.startswith("storage/_versions/scores/T2V/") for k in recorded)  # relative to the evaluation
    s = storage.storage()
    kept = [s.resolve(k) for k in recorded]
    assert all(k.startswith("s3://tables/eval/storage/_versions/scores/T2V/") for k in kept)
    listed = sorted(o.uri for o in s.list("s3://tables/eval/storage/_versions/scores/T2V"))
    assert listed == kept[1:]  # the oldest removed, the latest two kept
    assert [pl.read_parquet(io.BytesIO(s.read_bytes(k)))["value"][0] for k in kept[1:]] == [2.0, 3.0]
    assert not s.exists(kept[0])
