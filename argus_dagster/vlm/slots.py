"""Machine-wide request slots: one endpoint's bound on requests in flight, held by every process of
this machine together, and an endpoint exclusion they all see.

A :class:`MachineSlots` keeps no process state of its own beyond its folder: each endpoint of an
:class:`~argus_dagster.vlm.openai_compatible.OpenAICompatibleClient` owns one, and the state lives
in the slot files, where the kernel releases a dead process's locks.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import random
import time
from pathlib import Path


class MachineSlots:
    """At most ``n`` requests in flight to one endpoint from every process on this machine: one lock
    file per slot under ``folder`` (``fcntl.flock``, released by the kernel when a process dies, so a
    killed run never keeps a slot). A process first takes one of its own slots (the client's bound),
    then one of these; while every file is held it polls every ``poll_s`` seconds."""

    def __init__(self, folder: str | Path, n: int, poll_s: float = 0.01):
        self.folder, self.n, self.poll_s = Path(folder), n, poll_s
        self.folder.mkdir(parents=True, exist_ok=True)

    def acquire(self) -> int:
        """An open file descriptor holding one slot (give it to :meth:`release`)."""
        start = random.randrange(self.n)
        while True:
            for i in range(self.n):
                fd = os.open(self.folder / f"slot-{(start + i) % self.n}", os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return fd
                except BlockingIOError:
                    os.close(fd)
            time.sleep(self.poll_s)

    @staticmethod
    def release(fd: int) -> None:
        os.close(fd)  # closing the descriptor drops its lock

    # An endpoint one process found unreachable is left out by every process of the machine until
    # the time that process set: the modification time of the folder's ``excluded`` file (one stat
    # per request to read it, and nothing to parse).
    def excluded(self, now: float | None = None) -> bool:
        try:
            return os.stat(self.folder / "excluded").st_mtime > (time.time() if now is None else now)
        except OSError:
            return False

    def exclude(self, for_s: float) -> None:
        self._mark(time.time() + for_s)

    def include(self) -> None:
        if self.excluded():
            self._mark(0.0)

    def _mark(self, until: float) -> None:
        path = self.folder / "excluded"
        try:
            path.touch()
            os.utime(path, (until, until))
        except OSError:  # a read-only folder: the exclusion stays this process's own
            pass


def slots_folder(root: str | Path, url: str, model: str) -> Path:
    """The slot files of one endpoint and model under ``root`` (the folder name is a hash: no URL,
    credentials included, is written to disk)."""
    return Path(root) / hashlib.sha256(f"{url}\n{model}".encode()).hexdigest()[:20]

