"""What ``argus`` commands print, beside the tables they read: a line over the progress line, the
evaluators an evaluation uses, and a storage failure said in one line that names the path and the fix."""

from __future__ import annotations

import errno
import sys
from typing import Any, Mapping

from argus_dagster.infra.environment import SettingError
from argus_dagster.infra.files import WriteError
from argus_dagster.infra.settings import argus_home, load_settings


def say(msg: str) -> None:
    """Print ``msg`` as a line of its own (over the progress line on a terminal, not after it)."""
    if sys.stderr.isatty():  # over the progress line, not after it
        sys.stderr.write("\r\033[2K")
    print(msg, flush=True)


def only_tasks(lb, tasks: list[str] | None):
    """The leaderboard ``lb`` of the tasks asked for (all without ``--task``)."""
    return lb.filter(lb["task"].is_in(tasks)) if tasks else lb


def backbones(res: Mapping[str, Any]) -> str:
    """Which judge and rubric generator the evaluation's resources ``res`` use (never the key, nor
    credentials in a URL). A profile that needs a VLM where none is configured is a
    :class:`SettingError`, before any run."""
    vlm, rubric_vlm = res["vlm"], res["rubric_vlm"]
    if res["tools"].vlm_only and not vlm.configured:  # every criterion asks the VLM: nothing could be scored
        raise SettingError("the VLM-only ablation asks a VLM every criterion, and none is configured; set "
                           "ARGUS_VLM_BASE_URL and ARGUS_VLM_MODEL (or ARGUS_VLM_PATH), see docs/vlm.md")

    def name(v) -> str:
        where = f" at {v.shown_urls()}" if v.backend == "openai" else (f" from {v.model_path}" if v.model_path else "")
        return f"{v.backend}:{v.model_name()}{where}"

    judge = f"VLM judge {name(vlm)}" if vlm.configured else "evidence-only judge (no VLM configured)"
    gen = f"VLM rubric generator {name(rubric_vlm)}" if rubric_vlm.configured else "offline rubric generator"
    mode = "; VLM-only ablation" if res["tools"].vlm_only else ""
    return f"{judge}; {gen}{mode}"


def _instance_home() -> str:
    try:
        return str(load_settings().dagster_home)
    except ValueError:  # a setting that cannot be used: the home is still worth naming
        return f"under {argus_home()}"


def storage_failure(exc: BaseException | None) -> str | None:
    """One line for a storage failure, wherever it surfaced (a file write, or the Dagster instance's
    SQLite database under ``$ARGUS_HOME``): a full disk, a read-only file system or database, a
    folder without permission, a disk I/O error. It names the path and what to do; None for any
    other error."""
    writable = "make it writable, or set ARGUS_HOME to a folder that is, and run again"
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = str(exc)
        if isinstance(exc, WriteError):
            return text
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return f"no space left on the disk holding {exc.filename or 'ARGUS_HOME'}: free space there and run again"
        if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return f"cannot write {exc.filename or 'under ARGUS_HOME'}: {exc.strerror or exc}: {writable}"
        if "database or disk is full" in text:
            return (f"no space left on the disk holding the Dagster instance ({_instance_home()}): "
                    "free space there and run again (what was computed is kept in the content cache)")
        if "disk I/O error" in text:
            return (f"the Dagster instance's database ({_instance_home()}) could not be read or written (SQLite: "
                    "disk I/O error, most often a full disk): free space there, or move ARGUS_HOME to a local "
                    "disk, and run again (what was computed is kept in the content cache)")
        if "readonly database" in text or "unable to open database file" in text:
            return f"the Dagster instance's database ({_instance_home()}) cannot be written: {writable}"
        exc = exc.__cause__ or exc.__context__
    return None
