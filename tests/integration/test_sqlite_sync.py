"""An evaluation's instance stores its events without a disk sync each (``argus_dagster.infra.sqlite``)
and loses nothing when its process is killed; other SQLite files are left as they are."""

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import sqlalchemy

from argus_dagster.infra.sqlite import kept_files, sync_lightly

ROOT = Path(__file__).resolve().parents[2]

RUN = textwrap.dedent("""
    import os, signal, sys
    import dagster as dg
    from argus_dagster.infra.sqlite import sync_lightly

    home = sys.argv[1]
    os.environ["DAGSTER_HOME"] = home
    if sys.argv[2] == "light":
        sync_lightly(home)

    @dg.asset
    def numbers():
        return [1, 2, 3]

    result = dg.materialize([numbers], instance=dg.DagsterInstance.get())
    print(result.run_id, flush=True)
    if sys.argv[3] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)  # no connection closed, no log checkpointed
""")


def _run(home: Path, mode: str, end: str) -> subprocess.CompletedProcess:
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_", "DAGSTER_"))},
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", RUN, str(home), mode, end], env=env, capture_output=True,
                          text=True, timeout=120)


def _synchronous(path: Path) -> int:
    engine = sqlalchemy.create_engine(f"sqlite:///{path}", poolclass=sqlalchemy.pool.NullPool)
    with engine.connect() as conn:
        value = conn.execute(sqlalchemy.text("PRAGMA synchronous")).scalar()
    engine.dispose()
    return value


def test_files_under_the_instance_sync_lightly_and_keep_their_log(tmp_path, monkeypatch):
    home, elsewhere = tmp_path / "dagster_home", tmp_path / "other"
    home.mkdir()
    elsewhere.mkdir()
    sync_lightly(home)
    assert _synchronous(home / "a.db") == 1  # NORMAL: a commit in WAL mode is not synced, a checkpoint is
    assert _synchronous(elsewhere / "b.db") == 2  # FULL, SQLite's default: not ours to change
    assert str(home / "a.db") in kept_files() and str(elsewhere / "b.db") not in kept_files()

    with monkeypatch.context() as mp:  # the session's DAGSTER_HOME comes back after
        mp.setenv("DAGSTER_HOME", str(home))
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")

        @dg.asset
        def numbers():
            return [1, 2, 3]

        run_id = dg.materialize([numbers], instance=dg.DagsterInstance.get()).run_id
    shard = home / "history" / "runs" / f"{run_id}.db"
    # Dagster closed every connection it opened to the run's events; the idle one kept the log, so
    # closing them did not checkpoint (sync) and delete it.
    assert shard.with_name(shard.name + "-wal").exists()
    assert str(shard) in kept_files()


def test_a_killed_process_loses_nothing_it_stored(tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    done = _run(home, "light", "kill")
    assert done.returncode == -9, done.stderr
    run_id = done.stdout.strip()
    logs = [p for p in (home / "history").rglob("*.db-wal")]
    assert logs  # the killed process left its logs unmerged: the next reader recovers them

    with monkeypatch.context() as mp:  # the session's DAGSTER_HOME comes back after
        mp.setenv("DAGSTER_HOME", str(home))
        instance = dg.DagsterInstance.get()
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.SUCCESS
        record = instance.fetch_materializations(dg.AssetKey("numbers"), limit=1).records[0]
        assert record.run_id == run_id
    for db in (home / "history").rglob("*.db"):
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",), db


def test_without_it_dagster_merges_and_deletes_the_log_at_every_close(tmp_path):
    """What the idle connection saves: Dagster's own behaviour, in a process that did not ask for it."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    done = _run(home, "default", "kill")
    assert done.returncode == -9, done.stderr
    shard = home / "history" / "runs" / f"{done.stdout.strip()}.db"
    assert shard.exists() and not shard.with_name(shard.name + "-wal").exists()


def test_a_forked_child_does_not_use_its_parents_connections(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    sync_lightly(home)
    db = home / "f.db"

    def write(value: int) -> None:
        engine = sqlalchemy.create_engine(f"sqlite:///{db}", poolclass=sqlalchemy.pool.NullPool)
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("CREATE TABLE IF NOT EXISTS t (v INTEGER)"))
            conn.execute(sqlalchemy.text("INSERT INTO t VALUES (:v)"), {"v": value})
        engine.dispose()

    write(1)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    write(2)
    parent_kept = kept_files()
    assert str(db) in parent_kept
    pid = os.fork()
    if pid == 0:  # the child: starts with no idle connection, opens its own, writes
        try:
            fresh = kept_files() == []
            write(3)
            os._exit(0 if fresh and kept_files() == [str(db)] else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    write(4)
    assert kept_files() == parent_kept
    with sqlite3.connect(db) as conn:
        assert sorted(v for (v,) in conn.execute("SELECT v FROM t")) == [1, 2, 3, 4]
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
