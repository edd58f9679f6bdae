"""SQLite instance storage that keeps its connections.

Dagster's SQLite storages open a new SQLAlchemy engine and a new SQLite connection for every
statement batch: every event a run writes builds an engine, has SQLite parse the database schema
again, compiles its INSERT from scratch (the compiled-statement cache lives on the engine), asks
whether the tables exist, and waits for the disk on commit; each new run's database is set up by
reading the migration scripts twice. In a partition run that bookkeeping costs more CPU than the
run's own work. These subclasses keep one engine per database file with a small pool of open
connections, remember which tables exist, read the migration scripts once per process, and commit
with ``synchronous=NORMAL`` (in WAL mode that is safe against corruption; a power cut can lose the
last commits). Transactions and the event log's write lock are Dagster's, and the files, schema
and revisions are the stock ones, so the UI and any other process read them with the default
storage.

``runner.local_instance`` uses them unless a ``dagster.yaml`` configures storage; a ``dagster.yaml``
can also name them as ``event_log_storage`` / ``run_storage`` (module ``argus_dagster.storage``).
"""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.sql import create_engine, get_alembic_config
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy import event
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlalchemy.engine import Connection, Engine

# Event logs are sharded per run: the engines of the most recent runs (and the index) stay open.
MAX_ENGINES = 64


@functools.cache
def _event_log_scripts() -> ScriptDirectory:
    """The event log's migration scripts (Dagster's alembic directory), loaded once."""
    from dagster._core.storage.event_log.sqlite import sqlite_event_log

    return ScriptDirectory.from_config(get_alembic_config(sqlite_event_log.__file__))


def _engine(conn_string: str, **kwargs) -> Engine:
    """An engine that keeps up to two idle connections, which commit without waiting for the disk."""
    engine = create_engine(conn_string, pool_size=2, max_overflow=-1, **kwargs)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record) -> None:
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")

    return engine


class EngineCachingSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` with one engine per shard (LRU), a memo of existing tables and
    a quicker setup of each run's database."""

    def __init__(self, base_dir: str, inst_data=None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._tables: set[str] = set()
        super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> "EngineCachingSqliteEventLogStorage":
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        """The shard's engine, created (and its database initialized) on first use; under ``_db_lock``."""
        engine = self._engines.pop(shard, None)
        if engine is None:
            engine = _engine(self.conn_string_for_shard(shard), connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
        if shard not in self._initialized_dbs:
            self._init_shard(engine) if shard != INDEX_SHARD_NAME else self._initdb(engine)
            self._initialized_dbs.add(shard)
        self._engines[shard] = engine
        while len(self._engines) > MAX_ENGINES:
            self._engines.popitem(last=False)[1].dispose()
        return engine

    def _init_shard(self, engine: Engine) -> None:
        """A run's database: Dagster's tables stamped at the head revision, like ``_initdb`` does,
        with the migration scripts read once per process instead of twice per run."""
        try:
            with engine.connect() as conn:
                if MigrationContext.configure(conn).get_current_revision() is not None:
                    return
                conn.rollback()
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")  # first, so the tables go in one WAL commit
                conn.commit()
                SqlEventLogStorageMetadata.create_all(conn)
                MigrationContext.configure(conn).stamp(_event_log_scripts(), "head")
                conn.commit()
        except (OperationalError, DatabaseError):  # another process is creating it: Dagster's way, with retries
            self._initdb(engine)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            engine = self._engine(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def has_table(self, table_name: str) -> bool:
        # Tables are created by migrations and never dropped while the instance is open.
        if table_name in self._tables:
            return True
        found = super().has_table(table_name)
        if found:
            self._tables.add(table_name)
        return found

    def _close_engines(self) -> None:
        with self._db_lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()

    def wipe(self) -> None:
        self._close_engines()  # the run databases are deleted: no connection may stay open on them
        super().wipe()

    def upgrade(self) -> None:
        super().upgrade()
        self._tables.clear()

    def dispose(self) -> None:
        self._close_engines()
        super().dispose()


class EngineCachingSqliteRunStorage(SqliteRunStorage):
    """``SqliteRunStorage`` with one engine for its database."""

    def __init__(self, conn_string: str, inst_data=None):
        super().__init__(conn_string, inst_data=inst_data)
        self._engine = _engine(conn_string)

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> "EngineCachingSqliteRunStorage":
        return cls.from_local(inst_data=inst_data, **config_value)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        self._engine.dispose()
        super().dispose()


def sqlite_storage_overrides(dagster_home: str) -> dict:
    """Instance overrides naming these storages on the default SQLite layout under ``dagster_home``."""
    return {
        "run_storage": {"module": __name__, "class": EngineCachingSqliteRunStorage.__name__,
                        "config": {"base_dir": os.path.join(dagster_home, "history", "")}},
        "event_log_storage": {"module": __name__, "class": EngineCachingSqliteEventLogStorage.__name__,
                              "config": {"base_dir": os.path.join(dagster_home, "history", "runs", "")}},
        "schedule_storage": {"module": "dagster._core.storage.schedules", "class": "SqliteScheduleStorage",
                             "config": {"base_dir": os.path.join(dagster_home, "schedules")}},
    }
