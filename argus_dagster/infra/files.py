"""Writing files whole: a temporary name in the same folder, then a rename.

A reader never sees a half-written page, rubric, card or cache entry, and an interrupted or failed
write leaves the previous version in place. A failed write (a full disk, a read-only folder) is one
:class:`WriteError` line naming the path and the fix, which callers record on the row it belongs to.
A write replaces only a regular file (or creates one): a device (``/dev/null``, ``/dev/full``), a FIFO,
a socket or a folder at the path is refused with one line, never renamed over.
"""

from __future__ import annotations

import errno
import os
import stat
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


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def not_a_file(path: str | Path) -> str | None:
    """What is at ``path`` when it is there and is not a regular file (links followed: ``/dev/stdout``
    is the device or pipe it names), else None. A write never replaces such a thing."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # nothing there (or a dangling link): a new file is created
        return None
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def write_atomic(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole, or raise :class:`WriteError`. Only a regular
    file is replaced (or a new one created): a device, FIFO, socket or folder at ``path`` is refused."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    tmp = part_path(path)
    kind = not_a_file(path)
    if kind is not None:
        raise WriteError(errno.EEXIST, f"cannot write {path}: {kind} is there, not a regular file; "
                         "give the path of a file (it is created or replaced)")
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
