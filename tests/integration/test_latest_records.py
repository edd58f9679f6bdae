"""The automation conditions' reading of an instance's latest records: shared while nothing is
stored, read again once something is, and never shared with another instance."""

import gc

import dagster as dg

from argus_dagster.records.automation import latest_records

parts = dg.StaticPartitionsDefinition(["a", "b"])


@dg.asset(partitions_def=parts)
def partitioned() -> None:
    return None


@dg.asset
def whole() -> None:
    return None


def _with(partition: str | None) -> dg.DagsterInstance:
    instance = dg.DagsterInstance.ephemeral()
    if partition:
        dg.materialize([partitioned], instance=instance, partition_key=partition)
    return instance


def test_the_reading_is_shared_until_something_is_stored():
    instance = _with("a")
    first = latest_records(instance)
    assert set(first.latest(partitioned.key, partitioned=True)) == {"a"}
    assert latest_records(instance) is first  # nothing stored since: the same reading
    dg.materialize([partitioned], instance=instance, partition_key="b")
    again = latest_records(instance)
    assert again is not first and set(again.latest(partitioned.key, partitioned=True)) == {"a", "b"}
    dg.materialize([whole], instance=instance)
    assert set(latest_records(instance).latest(whole.key)) == {None}  # an unpartitioned asset: its one record
    assert latest_records(instance).latest(partitioned.key, partitioned=True).keys() == {"a", "b"}


def test_another_instance_never_gets_this_ones_reading():
    one = _with("a")
    assert set(latest_records(one).latest(partitioned.key, partitioned=True)) == {"a"}
    other = _with("b")  # the same events stored: the same latest storage id
    assert one.event_log_storage.get_maximum_record_id() == other.event_log_storage.get_maximum_record_id()
    assert set(latest_records(other).latest(partitioned.key, partitioned=True)) == {"b"}
    del one, other
    gc.collect()  # a new instance may now sit where an old one was, with the same latest storage id
    for partition in ("a", "b", "a", "b"):
        fresh = _with(partition)
        assert set(latest_records(fresh).latest(partitioned.key, partitioned=True)) == {partition}
