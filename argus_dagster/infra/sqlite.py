"""An evaluation's Dagster instance on SQLite without disk syncs for every event it stores.

Dagster's default storage keeps runs and events in SQLite files in WAL mode and opens a connection
for every write. When the last connection to a file closes, SQLite checkpoints the write-ahead log
into the database and deletes it, syncing both to disk; so each event a run stores costs two or
three disk syncs (what that adds to a cold ``argus evaluate``: docs/performance.md, "The instance's
files without a disk sync per event").

:func:`sync_lightly` does, for the SQLite files under one instance directory, what SQLite recommends
for WAL mode (``PRAGMA synchronous=NORMAL``: a commit is not synced, a checkpoint is) and keeps one
idle connection open to each file this process touched (at most :data:`MOST_KEPT`), so closing
Dagster's connections does not checkpoint. A killed process loses nothing (what it committed is in
the log, which the next connection reads); a power loss or an operating-system crash may lose the
last commits but cannot corrupt the files (SQLite's guarantee for WAL mode at ``NORMAL``). Files
outside the directories given, and every other database, are left as they are.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path

import sqlalchemy

MOST_KEPT = 32  # idle connections held per process (a command uses the run and index files, one per run)

_LOCK = threading.Lock()
_HOMES: list[str] = []
_KEPT: OrderedDict[str, tuple[int, sqlite3.Connection, threading.Lock]] = OrderedDict()
_INHERITED: list = []  # a forked child's copies of its parent's connections: never used, never closed


def _forget_after_fork() -> None:
    """In a forked child (a Celery or multiprocessing worker): SQLite connections must not cross a
    fork, so the parent's idle ones are set aside untouched (closing them could merge the parent's log)
    and the child opens its own."""
    global _LOCK
    _INHERITED.extend(_KEPT.values())
    _KEPT.clear()
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def sync_lightly(dagster_home: str | Path) -> None:
    """From now on in this process, SQLite files under ``dagster_home`` are opened with
    ``synchronous=NORMAL`` and kept open by an idle connection (see the module's text)."""
    with _LOCK:
        if not _HOMES:
            sqlalchemy.event.listen(sqlalchemy.engine.Engine, "connect", _on_connect)
        for home in {os.path.abspath(dagster_home), os.path.realpath(dagster_home)}:
            if home + os.sep not in _HOMES:
                _HOMES.append(home + os.sep)


def kept_files() -> list[str]:
    """The files this process holds an idle connection to (most recently used last)."""
    with _LOCK:
        return list(_KEPT)


def _on_connect(dbapi_connection, _record) -> None:
    if not isinstance(dbapi_connection, sqlite3.Connection):
        return
    row = dbapi_connection.execute("PRAGMA database_list").fetchone()
    path = row[2] if row else ""
    if not path or not any(path.startswith(h) for h in _HOMES):
        return
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")
    _keep(path)


def _keep(path: str) -> None:
    """Hold an idle connection to ``path``; touch it so that it joins the file's write-ahead log once
    the file is in WAL mode (a new file switches after its tables are made)."""
    try:
        inode = os.stat(path).st_ino
    except OSError:
        return
    with _LOCK:
        kept = _KEPT.get(path)
        if kept is None or kept[0] != inode:  # new, or the file was replaced
            if kept is not None:
                kept[1].close()
            # timeout 0: never wait for a writer; an idle connection that could not read now tries next time
            kept = (inode, sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False),
                    threading.Lock())
            _KEPT[path] = kept
            while len(_KEPT) > MOST_KEPT:
                _KEPT.popitem(last=False)[1][1].close()
        _KEPT.move_to_end(path)
    _, conn, lock = kept
    if lock.acquire(blocking=False):
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            pass  # busy or closed meanwhile: the next connection to the file tries again
        finally:
            lock.release()
