"""The evaluation's settings are the resources' configuration, fixed when the definitions are built:
nothing a run does reads ``ARGUS_*`` or the recorded evaluations again, and the process caches beside
the resources (the frame pool, the tool slots) take their size from that configuration."""

import ast
import os
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from argus_dagster.infra import frame_pool as pool_lib
from argus_dagster.infra import media as media_lib
from argus_dagster.infra.settings import load_settings
from argus_dagster.method.evidence import executor
from argus_dagster.resources import resources_for
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.storage import StorageResource
from argus_dagster.resources.tools import ToolsResource

ROOT = Path(__file__).resolve().parents[2]

# The functions that read settings when the definitions are built (each turns them into configuration).
BUILD_TIME = {
    ("resources/__init__.py", "storage_for"), ("resources/__init__.py", "resources_for"),
    ("resources/__init__.py", "executor_for"),
    # The celery broker's URL is read where a run starts, so that it is never stored in the run config.
    ("resources/__init__.py", "with_defaults"),
    ("resources/tools.py", "tools_from_env"), ("resources/vlm.py", "vlm_from_env"),
}
READERS = {"load_settings", "environment", "argus_home", "find_home", "served_settings"}


def _calls(path: Path):
    """(enclosing function, called name) of every call of a settings reader in ``path``."""
    tree = ast.parse(path.read_text())
    out = []

    def visit(node, func):
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Call):
                f = child.func
                called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if called in READERS:
                    out.append((func, called, child.lineno))
            visit(child, name)

    visit(tree, None)
    return out


def test_no_resource_or_library_module_reads_settings_at_run_time():
    offenders = []
    folders = ("resources", "assets", "argus_dagster/method", "argus_dagster/infra")
    for path in sorted(p for d in folders for p in (ROOT / d).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("argus_dagster/infra/settings.py", "argus_dagster/infra/environment.py"):
            continue  # where settings are read, for whoever builds definitions
        for func, called, line in _calls(path):
            if (rel, func) not in BUILD_TIME:
                offenders.append(f"{rel}:{line}: {called}() in {func or 'the module'}")
    assert not offenders, offenders


def _home(tmp_path, monkeypatch, name: str) -> Path:
    home = tmp_path / name
    monkeypatch.setenv("ARGUS_HOME", str(home))
    return home


def test_the_resources_keep_the_evaluation_they_were_built_for(tmp_path, monkeypatch):
    for var in ("ARGUS_BENCH", "ARGUS_BENCH_DIR", "ARGUS_PROFILE", "ARGUS_ENV", "ARGUS_CACHE"):
        monkeypatch.delenv(var, raising=False)
    first = _home(tmp_path, monkeypatch, "first")
    monkeypatch.setenv("ARGUS_FRAME_POOL_MB", "64")
    monkeypatch.setenv("ARGUS_TOOL_THREADS", "3")
    resources = resources_for(settings=load_settings())
    # Another evaluation in this process's environment later: the built resources do not follow it.
    _home(tmp_path, monkeypatch, "second")
    monkeypatch.setenv("ARGUS_FRAME_POOL_MB", "1")
    monkeypatch.setenv("ARGUS_TOOL_THREADS", "1")
    bench, tools, storage = resources["bench"], resources["tools"], resources["storage"]
    assert first in bench.storage_path().parents and first in bench.reports_path().parents
    assert bench.home_dir == str(first)
    assert tools.cache("evidence").store.location == str(first / "cache")
    assert (storage.frame_pool_mb, tools.tool_threads) == (64, 3)


def test_a_field_nobody_configured_is_named_not_read_from_the_environment(tmp_path, monkeypatch):
    _home(tmp_path, monkeypatch, "home")
    bench = BenchResource(reports_dir=str(tmp_path / "reports"))
    assert bench.reports_path() == tmp_path / "reports"
    with pytest.raises(ValueError, match=r"BenchResource\.storage_dir is not configured"):
        bench.storage_path()
    with pytest.raises(ValueError, match=r"BenchResource\.bench is not configured"):
        bench.bench_name()
    with pytest.raises(ValueError, match=r"ToolsResource\.cache_dir is not configured"):
        ToolsResource().cache("evidence")
    assert not ToolsResource(cache_dir="off").cache("evidence").enabled


def test_the_frame_pool_takes_the_storage_resources_budget(monkeypatch):
    pool = pool_lib.FramePool()
    monkeypatch.setattr(pool_lib, "FRAME_POOL", pool)
    monkeypatch.setattr("argus_dagster.resources.storage.FRAME_POOL", pool)
    monkeypatch.setenv("ARGUS_FRAME_POOL_MB", "7")  # read when definitions are built, never by a run
    assert pool.budget_bytes == pool_lib.DEFAULT_FRAME_POOL_BYTES
    with dg.build_resources({"storage": StorageResource(frame_pool_mb=3)}):
        assert pool.budget_bytes == 3 * 2**20


def test_a_budget_made_smaller_lets_the_oldest_frames_go_at_once():
    pool = pool_lib.FramePool(budget_bytes=10_000)

    def frames(n):
        return media_lib.Frames(np.zeros((n, 10, 10, 3), np.uint8), tuple(range(n)), tuple(float(i) for i in range(n)))

    for key in ("a", "b", "c"):
        pool.get((key, "p"), lambda: frames(10))  # 3,000 bytes each
    pool.set_budget(6_500)  # room for two: "a", the least recently used, goes
    pool.get(("c", "p"), lambda: pytest.fail("c is still held"))
    pool.get(("b", "p"), lambda: pytest.fail("b is still held"))
    assert pool.decodes == 3
    pool.get(("a", "p"), lambda: frames(10))
    assert pool.decodes == 4


def test_the_tool_slots_take_the_tools_resources_size(monkeypatch):
    monkeypatch.setattr(executor, "_SLOTS", [])
    monkeypatch.setenv("ARGUS_TOOL_THREADS", "1")  # read when definitions are built, never by a run
    n = (os.cpu_count() or 1) + 1  # neither the variable's nor the default
    with dg.build_resources({"tools": ToolsResource(tool_threads=n, cache_dir="off")}):
        slots = executor.tool_slots()
        assert all(slots.acquire(blocking=False) for _ in range(n))
        assert not slots.acquire(blocking=False)
        for _ in range(n):
            slots.release()


def test_links_to_report_pages_use_the_reports_url_the_storage_was_built_with(tmp_path, monkeypatch):
    for var in ("ARGUS_BENCH", "ARGUS_BENCH_DIR", "ARGUS_PROFILE", "ARGUS_ENV", "ARGUS_CACHE"):
        monkeypatch.delenv(var, raising=False)
    _home(tmp_path, monkeypatch, "home")
    monkeypatch.setenv("ARGUS_REPORTS_URL", "http://reports.example:8111/argus")
    resources = resources_for(settings=load_settings())
    monkeypatch.setenv("ARGUS_REPORTS_URL", "http://elsewhere.example/")  # changed after the build
    reports = resources["bench"].reports_path()
    page = reports / "T2V" / "a b.html"
    link = resources["storage"].link(str(page), str(reports))
    assert link.startswith("http://reports.example:8111/argus/") and link.endswith("/T2V/a%20b.html"), link
