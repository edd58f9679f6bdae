"""Where argus-dagster keeps its state, and which evaluation a command or run belongs to.

Everything lives under ``ARGUS_HOME``. Unset, the home is the nearest ``.argus`` folder in the working
directory or one of its parents (as git finds its repository), else ``.argus`` in the working
directory, which commands that write create and read-only commands never do.

An **evaluation** is a bench (a name, its folder, its candidate store) scored by an evaluator
**profile** (``default``; ``vlm-only``; ``judge=<model>``; ``rubric=<model>``; parts joined by
``,``). Each evaluation has a folder of its own, so evaluating one never touches what another
stored::

    $ARGUS_HOME/cache/                                   content cache, shared (keyed by content)
    $ARGUS_HOME/benches/<bench>/rubrics/<generator>/     frozen rubrics, shared by the bench's profiles
    $ARGUS_HOME/benches/<bench>/<profile>/evaluation.json    what the evaluation is (shown by argus evaluations)
    $ARGUS_HOME/benches/<bench>/<profile>/dagster_home/  its Dagster instance (runs, partitions, lineage)
    $ARGUS_HOME/benches/<bench>/<profile>/storage/       its tables
    $ARGUS_HOME/benches/<bench>/<profile>/reports/       its reports and overview

Which evaluation a command works on: ``ARGUS_BENCH_DIR`` (+ ``ARGUS_CANDIDATES_DIR``) names a bench
by its folders; else ``ARGUS_BENCH`` names a recorded one; else the one evaluated last; else the demo
bench (``$ARGUS_HOME/bench``, named ``demo``). ``ARGUS_PROFILE`` picks the profile (default:
``default``, or the bench's last evaluated one). ``argus evaluate --bench/--profile`` record an
evaluation; nothing else is written that would steer later runs.

The code location (what the UI, the daemon and every run it launches load) serves the evaluation
its configuration names, never the one evaluated last (:func:`served_settings`): ``ARGUS_BENCH_DIR``
or ``ARGUS_BENCH``, and ``ARGUS_PROFILE``; with none set, the demo evaluation (``demo/default``).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from argus_dagster.infra.environment import SettingError, environment
from argus_dagster.infra.files import write_atomic
from argus_dagster.infra.names import folder_name, profile_or_bench_problem, reserved_bench_problem

DEMO_BENCH = "demo"
DEFAULT_PROFILE = "default"


@dataclass(frozen=True)
class Settings:
    home: Path
    bench_dir: Path | str  # an s3://bucket/prefix stays a string (see location())
    candidates_dir: Path | str
    bench: str = DEMO_BENCH
    profile: str = DEFAULT_PROFILE
    # Where new rubrics are frozen: "bench" (its <TASK>/rubrics/, where it is writable) or "home"
    # (frozen_rubrics_dir only: the bench folder is never written).
    rubrics_in: str = "bench"

    @property
    def evaluation(self) -> str:
        """``<bench>/<profile>``: how commands and tables name this evaluation."""
        return f"{self.bench}/{self.profile}"

    @property
    def bench_home(self) -> Path:
        return self.home / "benches" / folder_name(self.bench)

    @property
    def evaluation_dir(self) -> Path:
        return self.bench_home / folder_name(self.profile)

    @property
    def dagster_home(self) -> Path:
        return self.evaluation_dir / "dagster_home"

    @property
    def storage_dir(self) -> Path:
        return self.evaluation_dir / "storage"

    @property
    def frozen_rubrics_dir(self) -> Path:
        return self.bench_home / "rubrics"

    @property
    def reports_dir(self) -> Path:
        return self.evaluation_dir / "reports"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"

    @property
    def human_dir(self) -> Path:
        """People's ratings of this bench's videos (``<TASK>.csv``), shared by its profiles: input ids
        are the bench's own, so another bench's ratings never meet them."""
        return self.bench_home / "human"

    @property
    def record_path(self) -> Path:
        return self.evaluation_dir / "evaluation.json"


def find_home(start: Path | None = None) -> Path | None:
    """``ARGUS_HOME``, else the nearest ``.argus`` folder in ``start`` (the working directory) or a
    parent of it; None when there is none."""
    env = environment()
    if env.get("ARGUS_HOME"):
        return Path(env.get("ARGUS_HOME")).expanduser().resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".argus").is_dir():
            return folder / ".argus"
    return None


def argus_home() -> Path:
    """The home found by :func:`find_home`, else ``.argus`` in the working directory."""
    return find_home() or (Path.cwd() / ".argus").resolve()


# ------------------------------------------------------------------------------------ evaluations

PROFILE_PARTS = ("default", "vlm-only", "judge=<model>", "rubric=<model>")


@dataclass(frozen=True)
class Profile:
    """What an evaluator profile sets: the VLM-only ablation, the judge's and the rubric
    generator's model (on the endpoints the environment configures)."""

    name: str
    vlm_only: bool = False
    judge_model: str = ""
    rubric_model: str = ""


def parse_profile(name: str) -> Profile:
    """``default``, ``vlm-only``, ``judge=<model>``, ``rubric=<model>``, or parts of them joined by ``,``."""
    name = (name or DEFAULT_PROFILE).strip()
    fields: dict = {}
    for part in (p.strip() for p in name.split(",")):
        key, eq, value = part.partition("=")
        if part == "default" and name == "default":
            continue
        if part == "vlm-only":
            fields["vlm_only"] = True
        elif eq and key in ("judge", "rubric") and value.strip():
            fields[f"{key}_model"] = value.strip()
        else:
            raise SettingError(f"profile {name!r}: {part!r} is not a profile part; expected "
                               f"{', '.join(PROFILE_PARTS)} (joined by ',')")
    return Profile(name, **fields)


def location(raw: str | Path, resolve: bool = True) -> Path | str:
    """A folder given by a person (resolved) or recorded (as it is); an ``s3://bucket/prefix`` kept as
    a string (a :class:`~pathlib.Path` would fold its ``//``)."""
    raw = str(raw)
    if raw.startswith("s3://"):
        return raw.rstrip("/")
    return Path(raw).expanduser().resolve() if resolve else Path(raw)


def bench_name(bench_dir: str | Path) -> str:
    """A bench's default name: ``name`` in its ``bench.json``, else its folder's (or prefix's) name.

    A name in ``bench.json`` is data from a file: it must follow the bench-name rule of
    :mod:`~argus_dagster.infra.names` (letters, digits and ``_ . = + -``), else this is a
    :class:`SettingError` that names the file and the fix."""
    if str(bench_dir).startswith("s3://"):
        return str(bench_dir).rstrip("/").rsplit("/", 1)[-1] or "bench"
    folder = Path(bench_dir).expanduser().resolve()
    meta = folder / "bench.json"
    if meta.is_file():
        try:
            name = json.loads(meta.read_text(encoding="utf-8")).get("name")
        except (OSError, ValueError, AttributeError):
            name = None
        if isinstance(name, str) and name.strip():
            problem = profile_or_bench_problem(name.strip(), "bench name")
            if problem:
                raise SettingError(f"{meta} field 'name': {problem}; correct it, or name the bench with --name")
            return name.strip()
    return folder.name or "bench"


def bench_hash(bench_dir: str | Path) -> str:
    """The content hash of a bench's text: its manifests and rubrics (``.json``, ``.jsonl``, ``.csv``,
    ``.txt``, ``.yaml``) by path and bytes, and every other file (condition media) by path and size;
    the media's own content hashes are in ``input_instances``."""
    root = Path(bench_dir)
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")) if root.is_dir() else []:
        if not p.is_file() or p.name.endswith(".part"):
            continue
        h.update(str(p.relative_to(root)).encode() + b"\0")
        if p.suffix.lower() in (".json", ".jsonl", ".csv", ".txt", ".yaml", ".yml"):
            h.update(p.read_bytes())
        else:
            h.update(str(p.stat().st_size).encode())
    return h.hexdigest()[:16]


def recorded_evaluations(home: Path | None = None) -> list[dict]:
    """Every evaluation recorded under ``$ARGUS_HOME/benches``, the most recently evaluated first."""
    home = home or argus_home()
    out = []
    for path in (home / "benches").glob("*/*/evaluation.json"):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and {"bench", "profile", "bench_dir", "candidates_dir"} <= set(rec):
            out.append(rec)
    return sorted(out, key=lambda r: -float(r.get("last_evaluated") or 0))


RUBRICS_IN = ("bench", "home")


def _from_record(home: Path, rec: dict) -> Settings:
    rubrics_in = rec["rubrics_in"] if rec.get("rubrics_in") in RUBRICS_IN else "bench"
    return Settings(home, location(rec["bench_dir"], False), location(rec["candidates_dir"], False), rec["bench"],
                    rec["profile"], rubrics_in)


def load_settings(bench: str | None = None, profile: str | None = None) -> Settings:
    """The evaluation this process works on (see the module docstring); ``bench`` (a recorded bench's
    name) and ``profile`` stand before ``ARGUS_BENCH`` and ``ARGUS_PROFILE`` (the CLI's ``--bench``,
    ``--profile``)."""
    home = argus_home()
    env = environment()
    profile = (profile or env.get("ARGUS_PROFILE")).strip()
    if profile:
        parse_profile(profile)  # a misspelt profile is said here, not as a missing folder later
    records = recorded_evaluations(home)
    if env.get("ARGUS_BENCH_DIR") and not bench:
        bench_dir = location(env.get("ARGUS_BENCH_DIR"))
        same = [r for r in records if location(r["bench_dir"], resolve=False) == bench_dir]
        name = env.get("ARGUS_BENCH").strip() or (same[0]["bench"] if same else bench_name(bench_dir))
        cands = env.get("ARGUS_CANDIDATES_DIR") or (same[0]["candidates_dir"] if same else "")
        if not cands:
            raise SettingError("ARGUS_BENCH_DIR is set: set ARGUS_CANDIDATES_DIR to its candidate store too")
        return Settings(home, bench_dir, location(cands), name, profile or DEFAULT_PROFILE)
    name = (bench or env.get("ARGUS_BENCH")).strip()
    if name:
        mine = [r for r in records if r["bench"] == name]
        if not mine and name != DEMO_BENCH:
            known = sorted({r["bench"] for r in records}) or ["none yet"]
            raise SettingError(f"bench {name!r}: no such bench recorded under {home} "
                               f"(recorded: {', '.join(known)}); argus evaluate --bench DIR records one")
        if profile and mine:
            exact = [r for r in mine if r["profile"] == profile]
            mine = exact or mine
        records = mine
    if records:
        last = records[0]
        if profile and profile != last["profile"]:
            return _from_record(home, {**last, "profile": profile})
        return _from_record(home, last)
    return Settings(home, home / "bench", home / "candidates", DEMO_BENCH, profile or DEFAULT_PROFILE)


def served_settings(bench: str | None = None, profile: str | None = None) -> Settings:
    """The evaluation the code location serves, from its configuration only (``bench``/``profile``,
    else ``ARGUS_BENCH_DIR`` + ``ARGUS_CANDIDATES_DIR``, else ``ARGUS_BENCH``; ``ARGUS_PROFILE``): one
    default, the demo evaluation ``demo/default``, whatever was evaluated last. A process launched for
    a run loads the same code location with the same environment, so it serves the same evaluation."""
    env = environment()
    profile = profile or env.get("ARGUS_PROFILE").strip() or DEFAULT_PROFILE
    if env.get("ARGUS_BENCH_DIR") and not bench:
        return load_settings(profile=profile)
    return load_settings(bench=bench or env.get("ARGUS_BENCH").strip() or DEMO_BENCH, profile=profile)


def evaluation_settings(bench_dir: str | Path, candidates_dir: str | Path, name: str | None = None,
                        profile: str | None = None, home: Path | None = None, rubrics_in: str = "bench") -> Settings:
    """The evaluation of a bench folder by a profile. The bench's name is ``name``, else the name it was
    recorded under, else :func:`bench_name`; a name already taken by another folder is an error.
    ``rubrics_in``: where new rubrics are frozen, ``bench`` or ``home`` (:attr:`Settings.rubrics_in`)."""
    if rubrics_in not in RUBRICS_IN:
        raise SettingError(f"rubrics in {rubrics_in!r}: expected one of {', '.join(RUBRICS_IN)}")
    home = home or argus_home()
    bench_dir = location(bench_dir)
    candidates_dir = location(candidates_dir)
    profile = parse_profile(profile or DEFAULT_PROFILE).name
    records = recorded_evaluations(home)
    if name:
        problem = profile_or_bench_problem(name, "--name")
        if problem:
            raise SettingError(problem)
    else:
        same = [r for r in records if location(r["bench_dir"], resolve=False) == bench_dir]
        name = same[0]["bench"] if same else bench_name(bench_dir)
        if same:
            _check_bench_json_name(bench_dir, name)
    reserved = reserved_bench_problem(name)
    if reserved:
        raise SettingError(f"{reserved}: name the bench with --name")
    for r in records:
        if r["bench"] == name and location(r["bench_dir"], resolve=False) != bench_dir:
            raise SettingError(f"the bench name {name!r} is taken by {r['bench_dir']}: give this bench "
                               f"({bench_dir}) another with --name")
    return Settings(home, bench_dir, candidates_dir, name, profile, rubrics_in)


def _check_bench_json_name(bench_dir: Path | str, recorded: str) -> None:
    """A ``bench.json`` whose ``name`` is not the name this folder's evaluation was recorded under is a
    :class:`SettingError` that says both and how to choose (the recorded name is never changed quietly)."""
    if str(bench_dir).startswith("s3://"):
        return
    meta = Path(bench_dir) / "bench.json"
    try:
        named = json.loads(meta.read_text(encoding="utf-8")).get("name") if meta.is_file() else None
    except (OSError, ValueError, AttributeError, RecursionError):
        named = None
    if not isinstance(named, str) or not named.strip():
        return
    named = bench_name(bench_dir)  # the name as bench_name reads it; raises for one that breaks the rule
    if named != recorded:
        raise SettingError(f"{meta} names the bench {named!r}, but this folder is recorded as {recorded!r}: "
                           f"give --name {named} (a new evaluation under that name) or --name {recorded} "
                           "(the recorded one)")


def record_evaluation(settings: Settings, evaluated: bool = True, evaluator: str | None = None) -> Path:
    """Write (or refresh) the evaluation's ``evaluation.json``: its bench, profile, folders, the bench's
    content hash, when it was last evaluated (the default for commands that name none) and the
    evaluator (judge) that scored it last (``evaluator``; kept as it was when not given).
    ``evaluated=False`` records it without making it the latest (before its runs: an evaluation
    that scores nothing leaves the default as it was)."""
    before, scored_by = 0.0, None
    if settings.record_path.is_file():
        try:
            old = json.loads(settings.record_path.read_text())
            before, scored_by = float(old.get("last_evaluated") or 0), old.get("evaluator")
        except (OSError, ValueError, AttributeError, TypeError):
            pass
    rec = {"bench": settings.bench, "profile": settings.profile, "bench_dir": str(settings.bench_dir),
           "candidates_dir": str(settings.candidates_dir), "bench_hash": bench_hash(settings.bench_dir),
           "last_evaluated": time.time() if evaluated else before, "rubrics_in": settings.rubrics_in,
           "evaluator": evaluator or scored_by}
    write_atomic(settings.record_path, json.dumps(rec, indent=2))
    return settings.record_path


def scored_by(settings: Settings) -> str | None:
    """The evaluator (``openai:Qwen3-VL-8B``, ``evidence-only``) that last scored the evaluation, as its
    record says; None for one never scored (or recorded before records named it)."""
    try:
        return json.loads(settings.record_path.read_text()).get("evaluator") or None
    except (OSError, ValueError, AttributeError, TypeError):
        return None


def record_bench(bench_dir: str | Path, candidates_dir: str | Path, name: str | None = None,
                 profile: str | None = None) -> Settings:
    """Record the evaluation of a bench by a profile (as ``argus evaluate`` does before its runs), which
    makes it the default of later commands that name none; returns it."""
    settings = evaluation_settings(bench_dir, candidates_dir, name=name, profile=profile)
    record_evaluation(settings)
    return settings


def report_url(path: str | Path, reports_dir: Path, base_url: str) -> str:
    """The URL of a file under the reports folder ``reports_dir`` (its path segments percent-encoded,
    so the ``~%E7...`` names of :func:`argus_dagster.infra.names.file_name` resolve) on the reports
    server at ``base_url``; ``file://`` for one outside.

    The reports server serves every evaluation of a home from ``$ARGUS_HOME/benches``: a reports
    folder there (``<bench>/<profile>/reports``) is under that prefix of the base URL; any other
    folder is served as the root. Both come from the evaluation's resources (the storage resource's
    ``reports_url``, the bench's reports folder), never from the environment at run time."""
    root = Path(reports_dir).resolve()
    p = Path(path).resolve()
    try:
        rel = p.relative_to(root)
    except ValueError:
        return p.as_uri()
    return (base_url if base_url.endswith("/") else base_url + "/") + served_prefix(root) + quote(rel.as_posix())


def evaluations_root(reports_dir: Path | str) -> Path | None:
    """The ``$ARGUS_HOME/benches`` folder that holds an evaluation's reports folder
    (``benches/<bench>/<profile>/reports``), where the reports server's root is; None for a
    reports folder elsewhere."""
    if "://" in str(reports_dir):  # an object-store prefix: no folder of the home to serve
        return None
    r = Path(reports_dir)
    return r.parents[2] if r.name == "reports" and len(r.parents) > 2 and r.parents[2].name == "benches" else None


def served_prefix(reports_dir: Path) -> str:
    """``<bench>/<profile>/reports/`` (percent-encoded) for an evaluation's reports folder under
    ``$ARGUS_HOME/benches``; empty for a folder elsewhere (served as the root)."""
    r = Path(reports_dir)
    if evaluations_root(r) is None:
        return ""
    return f"{quote(r.parent.parent.name, safe='')}/{quote(r.parent.name, safe='')}/reports/"