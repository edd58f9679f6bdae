"""The CLI's instance storage: the stock SQLite layout and schema, read back by Dagster's own storage."""

import logging
import os
import sqlite3
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy import event as sa_event
from sqlalchemy.pool import Pool
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from argus_dagster.runner import info_and_above, local_instance
from argus_dagster.storage import EngineCachingSqliteEventLogStorage, EngineCachingSqliteRunStorage

pytestmark = pytest.mark.integration

parts = dg.StaticPartitionsDefinition(["a", "b"])


@dg.asset(partitions_def=parts)
def numbers(context: dg.AssetExecutionContext) -> int:
    context.log.debug("a debug line")
    context.log.info("an info line")
    return len(context.partition_key)


@dg.asset_check(asset=numbers)
def numbers_positive(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


@pytest.fixture()
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return tmp_path


def stock_instance(home: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home / "dagster_home")))


def messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [e.user_message for e in instance.all_logs(run_id) if not e.is_dagster_event]


def test_runs_written_by_the_cli_storage_are_read_by_dagsters_own(home):
    inst = local_instance(capture_stdout=False)
    assert isinstance(inst.event_log_storage, EngineCachingSqliteEventLogStorage)
    assert isinstance(inst.run_storage, EngineCachingSqliteRunStorage)
    runs = [dg.materialize([numbers, numbers_positive], partition_key=k, instance=inst) for k in ("a", "b", "a")]
    assert all(r.success for r in runs)

    stock = stock_instance(home)  # what the UI and the daemon open
    assert type(stock.event_log_storage) is SqliteEventLogStorage
    assert {r.run_id for r in stock.get_runs()} == {r.run_id for r in runs}
    assert stock.get_run_by_id(runs[2].run_id).is_success
    assert stock.get_materialized_partitions(numbers.key) == {"a", "b"}
    latest = stock.get_latest_materialization_event(numbers.key)
    assert latest.run_id == runs[2].run_id
    assert "an info line" in messages(stock, runs[0].run_id)
    checks = stock.event_log_storage.get_asset_check_execution_history(numbers_positive.check_key, limit=10)
    assert len(checks) == 3
    # and the other way round: a run the stock storage writes is read by the CLI's
    again = dg.materialize([numbers], partition_key="b", instance=stock)
    inst2 = local_instance(capture_stdout=False)
    assert inst2.get_latest_materialization_event(numbers.key).run_id == again.run_id


def test_events_reuse_open_connections_that_commit_with_synchronous_normal(home):
    """The point of the storage: writing a run's events opens a handful of SQLite connections, not
    one per event, and they commit with synchronous=NORMAL (1)."""
    inst = local_instance(capture_stdout=False)
    dg.materialize([numbers], partition_key="a", instance=inst)  # databases created, engines warm
    opened: list[object] = []

    def on_connect(dbapi_conn, _record) -> None:
        opened.append(dbapi_conn)

    sa_event.listen(Pool, "connect", on_connect)
    try:
        runs = [dg.materialize([numbers, numbers_positive], partition_key=k, instance=inst) for k in ("a", "b")]
    finally:
        sa_event.remove(Pool, "connect", on_connect)
    n_events = sum(len(inst.all_logs(r.run_id)) for r in runs)
    assert n_events > 40
    assert len(opened) <= 8, f"{len(opened)} connections opened for {n_events} events"
    for storage_connection in (inst.event_log_storage.index_connection(), inst.run_storage.connect()):
        with storage_connection as conn:
            assert conn.exec_driver_sql("pragma synchronous").scalar() == 1


def test_a_runs_database_has_the_stock_schema_and_revision(tmp_path):
    ours, stock = EngineCachingSqliteEventLogStorage(str(tmp_path)), SqliteEventLogStorage(str(tmp_path))
    with ours.run_connection("run-ours"):
        pass
    with stock.run_connection("run-stock"):
        pass

    def shape(name: str):
        con = sqlite3.connect(tmp_path / f"{name}.db")
        try:
            return (sorted(con.execute("select type, name, sql from sqlite_master").fetchall()),
                    con.execute("select version_num from alembic_version").fetchall(),
                    con.execute("pragma journal_mode").fetchone())
        finally:
            con.close()

    assert shape("run-ours") == shape("run-stock")
    assert shape("run-ours")[2] == ("wal",)


def test_wipe_and_reuse(home):
    inst = local_instance(capture_stdout=False)
    first = dg.materialize([numbers], partition_key="a", instance=inst)
    inst.wipe()
    assert inst.get_latest_materialization_event(numbers.key) is None
    assert not inst.get_runs()
    second = dg.materialize([numbers], partition_key="a", instance=inst)
    assert second.run_id != first.run_id
    assert inst.get_latest_materialization_event(numbers.key).run_id == second.run_id


def test_a_dagster_yaml_that_configures_storage_is_left_alone(home):
    dh = home / "dagster_home"
    dh.mkdir(parents=True)
    (dh / "dagster.yaml").write_text(f"storage:\n  sqlite:\n    base_dir: {home / 'elsewhere'}\n")
    inst = local_instance(capture_stdout=False)
    assert type(inst.event_log_storage) is SqliteEventLogStorage
    assert (home / "elsewhere").is_dir()


def test_info_and_above_drops_debug_lines_but_keeps_every_dagster_event(home):
    inst = local_instance(capture_stdout=False)
    plain = dg.materialize([numbers], partition_key="a", instance=inst)
    with info_and_above():
        quiet = dg.materialize([numbers], partition_key="a", instance=inst)
    assert logging.root.manager.disable == logging.NOTSET  # restored
    assert "a debug line" in messages(inst, plain.run_id)
    assert "a debug line" not in messages(inst, quiet.run_id)
    assert "an info line" in messages(inst, quiet.run_id)

    def kinds(run_id):
        return sorted(e.dagster_event.event_type_value for e in inst.all_logs(run_id) if e.is_dagster_event)

    assert kinds(quiet.run_id) == kinds(plain.run_id)
    assert os.environ["DAGSTER_HOME"] == str(home / "dagster_home")
