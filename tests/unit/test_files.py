"""Files written whole: on a full disk the old version stays, no temporary file is left, and the
error is one line naming the path."""

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from argus_dagster.infra.cache import ContentCache
from argus_dagster.infra.files import WriteError, part_path, write_atomic
from tests.skips import machine_lacks

ROOT = Path(__file__).resolve().parents[2]


def _full_below(folder: Path, monkeypatch):
    """Every write(2) to a file under ``folder`` fails as on a full disk (ENOSPC)."""
    real = os.write

    def write(fd, data):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target.startswith(str(folder)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


def test_a_full_disk_leaves_the_old_file_and_says_which_path(tmp_path, monkeypatch):
    page = tmp_path / "reports" / "index.html"
    write_atomic(page, "<p>old</p>")
    _full_below(tmp_path / "reports", monkeypatch)
    with pytest.raises(WriteError) as err:
        write_atomic(page, "<p>new</p>" * 10_000)
    msg = str(err.value)
    assert msg == f"cannot write {page}: No space left on device (free space on that disk)"
    assert err.value.errno == errno.ENOSPC and isinstance(err.value, OSError)
    monkeypatch.undo()
    assert page.read_text() == "<p>old</p>" and sorted(p.name for p in page.parent.iterdir()) == ["index.html"]


def test_a_cache_entry_that_cannot_be_stored_costs_only_its_reuse(tmp_path, monkeypatch):
    cache = ContentCache(tmp_path / "cache", "evidence")
    _full_below(tmp_path / "cache", monkeypatch)
    value, hit = cache.get_or_compute("k" * 64, lambda: {"score": 7})
    assert (value, hit) == ({"score": 7}, False)
    assert cache.writes == 0 and len(cache.write_errors) == 1 and "No space left" in cache.write_errors[0]
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_on_a_device_that_is_always_full(tmp_path):
    """A real ENOSPC from the kernel, needing no mount: the temporary file a write goes through is a
    link to /dev/full, where every write(2) fails with "No space left on device"."""
    page = tmp_path / "reports" / "index.html"
    write_atomic(page, "<p>old</p>")
    part_path(page).symlink_to("/dev/full")
    with pytest.raises(WriteError) as err:
        write_atomic(page, "<p>new</p>")
    assert str(err.value) == f"cannot write {page}: No space left on device (free space on that disk)"
    assert err.value.errno == errno.ENOSPC
    assert page.read_text() == "<p>old</p>" and sorted(p.name for p in page.parent.iterdir()) == ["index.html"]


_ON_TMPFS = """
import sys
from pathlib import Path
from argus_dagster.infra.files import WriteError, part_path, write_atomic
d = Path(sys.argv[1])
write_atomic(d / "page.html", "old")
try:
    write_atomic(d / "page.html", "x" * 200_000)
except WriteError as exc:
    print("ERROR", exc)
print("CONTENT", (d / "page.html").read_text(), sorted(p.name for p in d.iterdir()))
"""


def test_on_a_real_full_disk(tmp_path):
    """The same on a 64 KiB tmpfs, where the machine lets an unprivileged user mount one."""
    if shutil.which("unshare") is None:
        machine_lacks("no unshare(1) on this machine")
    disk = tmp_path / "disk"
    disk.mkdir()
    probe = subprocess.run(["unshare", "-r", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        machine_lacks(f"user namespaces are not available here: {probe.stderr.decode().strip()}")
    script = f'mount -t tmpfs -o size=64k tmpfs "{disk}" && exec "{sys.executable}" -c "$0" "{disk}"'
    out = subprocess.run(["unshare", "-r", "-m", "sh", "-c", script, _ON_TMPFS], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == f"ERROR cannot write {disk}/page.html: No space left on device (free space on that disk)"
    assert lines[1] == "CONTENT old ['page.html']"
