"""Many writers, one truth, in one process: the mechanisms that let commands, the UI and the daemon act
on one evaluation at once (:mod:`tests.integration.test_many_writers` runs the commands themselves).

- A new evaluation's instance is made once, whatever number of processes ask for it at the same moment
  (before, two made Dagster's schema in one SQLite file and left two ``alembic_version`` heads for good).
- A step reads the table its upstream step wrote in the same run, never one another run stored since
  (before, ``video_scores`` read the shared current file that another pass had just replaced).
- A command waits, saying for which run, while another run materializes one of its asset partitions.
- A command that finds the pages, or the leaderboard, being written by a run that read before its own
  runs waits for that run, then asks Dagster again and writes them: they show what every writer stored.

Everything waits on conditions (a barrier, an event, a run's status), never on a sleep.
"""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
import threading
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from argus_dagster.client.instance import READY, ensure_instance
from argus_dagster.resources.storage import StorageIOManager, StorageResource

pytestmark = pytest.mark.integration


def heads(home: Path) -> dict[str, int]:
    """Rows of ``alembic_version`` in each SQLite file of an instance (one each: one schema head)."""
    out = {}
    for db in sorted(home.rglob("*.db")):
        with sqlite3.connect(db) as conn:
            tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
            if "alembic_version" in tables:
                out[str(db.relative_to(home))] = conn.execute("select count(*) from alembic_version").fetchone()[0]
    return out


def _make(home: str, root: str | None, barrier, errors) -> None:
    try:
        barrier.wait(timeout=60)
        ensure_instance(Path(home), Path(root) if root else None)
        instance = dg.DagsterInstance.from_config(home)
        instance.get_runs(limit=1)
        instance.dispose()
    except BaseException as exc:  # reported to the parent, which fails the test with it
        errors.put(f"{type(exc).__name__}: {exc}")
        raise


@pytest.mark.parametrize("template", [True, False], ids=["from the template", "made in place"])
def test_an_instance_is_made_once_by_processes_started_together(tmp_path, template):
    ctx = multiprocessing.get_context("fork")  # the parent has imported Dagster: each child starts at once
    errors = ctx.Queue()
    for round_ in range(10):
        root = tmp_path / f"r{round_}"
        home = root / "benches" / "b" / "default" / "dagster_home"
        if round_ % 3 == 2:
            home.mkdir(parents=True)  # an empty folder another tool made first
        barrier = ctx.Barrier(4)
        procs = [ctx.Process(target=_make, args=(str(home), str(root) if template else None, barrier, errors))
                 for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        said = [errors.get() for _ in range(errors.qsize())] if not errors.empty() else []
        assert [p.exitcode for p in procs] == [0, 0, 0, 0], said
        assert (home / READY).is_file() and (home / "dagster.yaml").is_file()
        found = heads(home)
        assert set(found) == {"history/runs.db", "history/runs/index.db", "schedules/schedules.db"}, found
        assert set(found.values()) == {1}, found
        assert not [p.name for p in home.parent.iterdir() if p.name.endswith(".making")]


def test_an_instance_made_before_the_rule_is_opened_and_kept(tmp_path):
    """An instance folder from before (no ready mark) keeps its runs: it is opened in place, once."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    instance = dg.DagsterInstance.from_config(str(home))
    dg.materialize([dg.asset(name="kept")(lambda: 1)], instance=instance)
    instance.dispose()
    ensure_instance(home, tmp_path)
    instance = dg.DagsterInstance.from_config(str(home))
    assert len(instance.get_runs()) == 1 and (home / READY).is_file()
    assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"  # the user's own kept
    instance.dispose()


def test_a_step_reads_what_its_upstream_step_wrote(tmp_path):
    """Run A writes ``up`` = 1 and, before its ``down`` step loads ``up``, run B stores ``up`` = 2: A's
    ``down`` reads 1 (its own run's version, by Dagster's records), and a run that only reads ``up``
    reads the latest materialization, 2."""
    home = ensure_instance(tmp_path / "dagster_home", tmp_path)
    io = StorageIOManager(storage=StorageResource(), base_dir=str(tmp_path / "storage"))
    gate_reached, release = threading.Event(), threading.Event()

    value = {"now": 1}  # what the next materialization of ``up`` writes

    @dg.asset
    def up() -> pl.DataFrame:
        return pl.DataFrame({"value": [value["now"]]})

    @dg.asset(deps=[up])
    def gate() -> pl.DataFrame:
        gate_reached.set()
        assert release.wait(120), "never released"
        return pl.DataFrame({"ok": [True]})

    @dg.asset
    def down(up: pl.DataFrame, gate: pl.DataFrame) -> pl.DataFrame:
        return up

    results = {}

    def run_a():
        instance = dg.DagsterInstance.from_config(str(home))
        results["a"] = dg.materialize([up, gate, down], instance=instance, resources={"io_manager": io})

    thread = threading.Thread(target=run_a)
    thread.start()
    assert gate_reached.wait(120)
    instance = dg.DagsterInstance.from_config(str(home))
    value["now"] = 2
    b = dg.materialize([up], instance=instance, resources={"io_manager": io})
    assert b.success
    release.set()
    thread.join(120)
    assert results["a"].success
    assert results["a"].output_for_node("down")["value"].to_list() == [1]
    later = dg.materialize([up, gate, down], selection=[down], instance=instance, resources={"io_manager": io})
    assert later.output_for_node("down")["value"].to_list() == [2]


def test_a_command_waits_for_the_run_that_materializes_its_partition(tmp_path):
    """A run in flight materializes ``blocker`` T2V: a spec of the same asset partition says which run it
    waits for and returns once that run ended; one of another partition, or of another asset, does not
    wait."""
    from argus_dagster.client.runs import RunSpec, wait_for_writers, writers_of

    home = ensure_instance(tmp_path / "dagster_home", tmp_path)
    reached, release = threading.Event(), threading.Event()

    @dg.asset(partitions_def=dg.StaticPartitionsDefinition(["T2V", "TI2V"]))
    def blocker() -> None:
        reached.set()
        assert release.wait(120), "never released"

    results = {}

    def in_flight():
        instance = dg.DagsterInstance.from_config(str(home))
        results["run"] = dg.materialize([blocker], instance=instance, partition_key="T2V")

    thread = threading.Thread(target=in_flight)
    thread.start()
    assert reached.wait(120)
    instance = dg.DagsterInstance.from_config(str(home))
    assert writers_of(instance, RunSpec("task", ["blocker"], ["TI2V"])) == {}
    assert writers_of(instance, RunSpec("task", ["other"], ["T2V"])) == {}
    said = []

    def progress(line: str) -> None:  # the line is said before the wait: then the run may end
        said.append(line)
        release.set()

    try:
        waited = wait_for_writers(instance, RunSpec("task", ["blocker"], ["T2V"]), progress, poll_s=0.05)
    finally:  # the run ends whatever happened here
        release.set()
        thread.join(120)
    assert waited
    run_id = results["run"].run_id
    assert said == [f"  T2V is being materialized by run {run_id[:8]}; waiting"]
    assert instance.get_run_by_id(run_id).is_finished
    assert not wait_for_writers(instance, RunSpec("task", ["blocker"], ["T2V"]), progress)



class _HeldAfterInput(StorageIOManager):
    """The evaluation's own IO manager for the run held in flight: once its step has loaded the input
    ``_HELD["after"]`` names, it waits for the test's release before going on."""

    def load_input(self, context: dg.InputContext):
        value = super().load_input(context)
        if context.asset_key == dg.AssetKey(_HELD["after"]):
            _HELD["reached"].set()
            assert _HELD["release"].wait(600), "never released"
        return value


_HELD: dict = {}


def _beside_a_held_run(settings, asset: str, after: str, command) -> tuple[str, list[str], object]:
    """A run of ``asset`` in flight on the evaluation, held once its step has loaded ``after``; meanwhile
    ``command(progress)`` (the command line's loop) runs in a thread of its own. The held run is released
    once the command says it waits for a run, or ends. Returns the held run's id, the command's lines
    and what it returned."""
    from argus_dagster.definitions import build_definitions, materialize_selection
    from tests.waiting import wait_until

    resources = dict(build_definitions(settings).resources)
    io = resources["io_manager"]
    resources["io_manager"] = _HeldAfterInput(storage=io.storage, base_dir=io.base_dir, keep_versions=io.keep_versions)
    _HELD.update(after=after, reached=threading.Event(), release=threading.Event())
    out: dict = {}

    def held_run():
        try:
            instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
            out["held"] = materialize_selection(instance, resources, [asset], [], {}, {})
        except BaseException as exc:  # said by the test, which fails on it
            out["held_error"] = exc
            _HELD["reached"].set()

    said: list[str] = []
    waiting = threading.Event()

    def progress(line: str) -> None:
        said.append(line)
        if "being materialized by run" in line:
            waiting.set()

    def in_thread():
        try:
            out["returned"] = command(progress)
        except BaseException as exc:
            out["command_error"] = exc

    held, other = threading.Thread(target=held_run), threading.Thread(target=in_thread)
    held.start()
    try:
        assert _HELD["reached"].wait(600) and "held_error" not in out, out.get("held_error")
        other.start()
        wait_until(lambda: waiting.is_set() or not other.is_alive(), timeout_s=600, what="the command's wait")
    finally:
        _HELD["release"].set()
        held.join(600)
        if other.ident is not None:  # started
            other.join(600)
    assert "command_error" not in out, out.get("command_error")
    assert out["held"].success
    return out["held"].run_id, said, out.get("returned")


@pytest.mark.timeout(900)
def test_the_pages_follow_a_command_that_finds_them_being_written(tmp_path, monkeypatch):
    """A run of the pages is in flight, held once its step has read ``controls`` (none yet); meanwhile
    ``argus evaluate --controls 2`` scores controls and comes to the pages. It says which run writes them
    and waits for it, then asks Dagster again, which finds the pages stale (that run read no controls),
    and writes them: the overview, read in Chromium, shows the controls' table, and Dagster has nothing
    left to ask. (Before, the command found the pages in flight and ran nothing; the run in flight then
    wrote pages without the controls, for good.)"""
    from argus_dagster.client.evaluate import run_all
    from argus_dagster.client.runs import plan
    from argus_dagster.definitions import build_definitions
    from tests.integration.chromium import controls_table
    from tests.integration.helpers import evaluation_in, said_runs, said_waits, t2v_bench, without_argus_settings

    bench, cands = t2v_bench(tmp_path / "bench", n_inputs=3)
    without_argus_settings(monkeypatch)
    settings = evaluation_in(monkeypatch, tmp_path / "home", bench, cands)
    assert run_all(settings=settings, progress=lambda _: None) is not None
    held_run_id, said, _ = _beside_a_held_run(
        settings, "site", "controls", lambda progress: run_all(settings=settings, controls=2, progress=progress))
    assert f"  site is being materialized by run {held_run_id[:8]}; waiting" in said, said
    assert said_waits(said) == [(["site"], held_run_id[:8])], said
    assert "pages: overview, sample browser, index of evaluations" in said_runs(said), said

    instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
    latest = instance.fetch_materializations(dg.AssetKey("site"), limit=1).records[0]
    assert latest.run_id != held_run_id  # the command's run wrote the pages last
    sentence, rows = controls_table(settings.reports_dir / "index.html")
    assert sentence and set(rows) == {"frozen", "shuffled", "reversed", "prompt_swap"}, rows
    assert all(n == "2" for n, _, _ in rows.values()), rows
    asked = plan(instance, build_definitions(settings), ["T2V"], {("T2V", "m")}, selection=("costs", "site"))
    assert not asked.partitions("site") and not asked.partitions("costs")


@pytest.mark.timeout(900)
def test_the_leaderboard_follows_a_command_that_finds_it_being_written(tmp_path, monkeypatch):
    """A run of the leaderboard is in flight, held once its step has read ``video_scores`` (model ``m``'s
    only); meanwhile ``argus evaluate`` scores a model added to the candidates, ``n``. It says which run
    writes the leaderboard and waits for it, then asks Dagster again and runs the leaderboard once more:
    the leaderboard it returns ranks both models, as does the one stored last. (Before, the command
    found the leaderboard in flight and returned the one stored before, without ``n``.)"""
    from argus_dagster.client.evaluate import run_all
    from argus_dagster.client.results import evaluation_storage, load_stored
    from tests.integration.helpers import evaluation_in, said_runs, said_waits, t2v_bench, without_argus_settings

    bench, cands = t2v_bench(tmp_path / "bench", n_inputs=2)
    without_argus_settings(monkeypatch)
    settings = evaluation_in(monkeypatch, tmp_path / "home", bench, cands)
    assert run_all(settings=settings, progress=lambda _: None) is not None
    shutil.copytree(cands / "T2V" / "m", cands / "T2V" / "n")
    held_run_id, said, board = _beside_a_held_run(
        settings, "leaderboard", "video_scores", lambda progress: run_all(settings=settings, progress=progress))
    assert said_waits(said) == [(["leaderboard"], held_run_id[:8])], said
    assert "T2V x n: scored" in said_runs(said), said
    assert board is not None and sorted(board["model"].unique()) == ["m", "n"], board
    instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
    latest = instance.fetch_materializations(dg.AssetKey("leaderboard"), limit=1).records[0]
    assert latest.run_id != held_run_id
    stored = load_stored(instance, "leaderboard", storage=evaluation_storage(settings))
    assert sorted(stored["model"].unique()) == ["m", "n"]


@pytest.mark.timeout(900)
def test_a_command_with_nothing_to_do_leaves_the_pages_to_the_run_writing_them(tmp_path, monkeypatch):
    """A run of the pages is in flight (held at its input) while ``argus evaluate`` finds nothing to do:
    the command asks Dagster once, runs nothing and waits for nothing (it stored nothing the pages could
    miss), and ends while that run is still held; the run then writes the pages."""
    from argus_dagster.client.evaluate import run_all
    from tests.integration.helpers import evaluation_in, said_runs, said_waits, t2v_bench, without_argus_settings

    bench, cands = t2v_bench(tmp_path / "bench", n_inputs=2)
    without_argus_settings(monkeypatch)
    settings = evaluation_in(monkeypatch, tmp_path / "home", bench, cands)
    assert run_all(settings=settings, progress=lambda _: None) is not None
    instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
    runs_before = {r.run_id for r in instance.get_runs()}
    asked: list[int] = []
    real = dg.evaluate_automation_conditions

    def counted(*args, **kwargs):  # Dagster's own evaluation, counted
        asked.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(dg, "evaluate_automation_conditions", counted)
    ended_while_held: list[bool] = []

    def command(progress):
        board = run_all(settings=settings, progress=progress)
        ended_while_held.append(not _HELD["release"].is_set())
        return board

    held_run_id, said, board = _beside_a_held_run(settings, "site", "controls", command)
    assert ended_while_held == [True] and said_waits(said) == [] and said_runs(said) == {}, said
    assert len(asked) == 1 and board is not None
    assert {r.run_id for r in instance.get_runs()} - runs_before == {held_run_id}
    latest = instance.fetch_materializations(dg.AssetKey("site"), limit=1).records[0]
    assert latest.run_id == held_run_id
