"""Writing files whole: a temporary name in the same folder, then a rename.

A reader never sees a half-written page, rubric, card or cache entry, and an interrupted or failed
write leaves the previous version in place. A failed write (a full disk, a read-only folder) is one
:class:`WriteError` line naming the path and the fix, which callers record on the row it belongs to.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

_FIXES = {errno.ENOSPC: "free space on that disk", errno.EDQUOT: "free space on that disk (quota)",
          errno.EROFS: "the file system is read-only: make it writable, or set ARGUS_HOME to a folder that is",
          errno.EACCES: "check the folder's permissions", errno.EPERM: "check the folder's permissions"}


class WriteError(OSError):
    """A file that could not be written; ``str()`` is one line naming the path."""

    def __init__(self, errno_: int | None, message: str):
        super().__init__(errno_, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def describe(path: str | Path, exc: OSError) -> str:
    reason = exc.strerror or type(exc).__name__
    fix = _FIXES.get(exc.errno or 0)
    return f"cannot write {path}: {reason}" + (f" ({fix})" if fix else "")


def part_path(path: str | Path) -> Path:
    """The hidden temporary name beside ``path`` that :func:`write_atomic` writes, in this process and
    thread, before renaming it to ``path``."""
    path = Path(path)
    return path.with_name(f".{path.name[:80]}.{os.getpid()}.{threading.get_ident():x}.part")


def write_atomic(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole, or raise :class:`WriteError`."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    tmp = part_path(path)
    try:
        if not path.parent.is_dir():  # one stat where the folder is there (most writes)
            path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise WriteError(exc.errno, describe(path, exc)) from None
    return path
