"""The evaluation a run belongs to: its bench, profile and folders."""


import io
import json
from pathlib import Path

import dagster as dg
import polars as pl

from argus_dagster.infra.names import folder_name
from argus_dagster.infra.settings import Settings
from argus_dagster.infra.storage import join
from argus_dagster.method.inputs import ALL_TASKS


def _location(value: str) -> Path | str:
    """A folder as a :class:`~pathlib.Path`; an ``s3://`` prefix as it is (read and written through
    the storage resource)."""
    return value if value.startswith("s3://") else Path(value)


class BenchResource(dg.ConfigurableResource):
    """The evaluation's identity (``bench``, ``profile``) and every folder a run reads or writes:
    each a local folder or an ``s3://`` prefix (the aws environment's layout, see docs/deployment.md).

    :func:`resources.resources_for` fills each field from the evaluation's settings when the
    definitions are built (:func:`bench_from_settings`), so the UI's resource view and each run's
    config show them. Nothing is read from the environment at run time: a field a run needs and
    nobody configured (a resource built by hand in a test or notebook) is a :class:`ValueError`
    that names it.
    """

    bench: str = ""
    profile: str = ""
    bench_dir: str = ""
    candidates_dir: str = ""
    frozen_rubrics_dir: str = ""
    reports_dir: str = ""
    human_dir: str = ""
    storage_dir: str = ""
    # The evaluations' home (ARGUS_HOME): where the profiles of this bench are recorded.
    home_dir: str = ""
    # Where new rubrics are frozen: "bench" (its <TASK>/rubrics/ where writable) or "home"
    # (frozen_rubrics_dir only, the bench folder never written; argus evaluate --rubrics-in home).
    rubrics_in: str = "bench"

    def _configured(self, field: str) -> str:
        """The field's value; a :class:`ValueError` naming it when nobody configured it."""
        value = getattr(self, field)
        if not value:
            raise ValueError(f"BenchResource.{field} is not configured: an evaluation's bench resource comes from "
                             "its settings (resources.resources_for(settings=...), resources.bench.bench_from_settings)")
        return value

    def bench_name(self) -> str:
        return self._configured("bench")

    def profile_name(self) -> str:
        return self._configured("profile")

    def bench_path(self) -> Path | str:
        return _location(self._configured("bench_dir"))

    def candidates_path(self) -> Path | str:
        return _location(self._configured("candidates_dir"))

    def frozen_rubrics_path(self) -> Path | str:
        return _location(self._configured("frozen_rubrics_dir"))

    def reports_path(self) -> Path | str:
        return _location(self._configured("reports_dir"))

    def storage_path(self) -> Path | str:
        """Where the evaluation's tables are (the overview page reads them)."""
        return _location(self._configured("storage_dir"))

    def profile_storage(self, profile: str) -> Path | str:
        """Where another profile of this bench stores its tables (``benches/<bench>/<profile>/storage``,
        a folder or an ``s3://`` prefix as this one's)."""
        mine = self.storage_path()
        if isinstance(mine, str):
            return f"{mine.rstrip('/').rsplit('/', 2)[0]}/{folder_name(profile)}/storage"
        return mine.parent.parent / folder_name(profile) / "storage"

    def profiles(self, store=None) -> list[str]:
        """The profiles of this bench: under ARGUS_HOME, those recorded there (``evaluation.json``
        beside their storage); with tables on S3 (``store``, the storage resource's), every profile
        folder of the bench's prefix with ``video_scores`` stored, which every machine sees alike."""
        mine = self.storage_path()
        if isinstance(mine, str) and store is not None:
            return self._stored_profiles(mine.rstrip("/").rsplit("/", 2)[0], store)
        bench_home = (Path(self._configured("home_dir")) / "benches" / folder_name(self.bench_name())
                      if isinstance(mine, str) else mine.parent.parent)
        out = []
        for rec in sorted(bench_home.glob("*/evaluation.json")):
            try:
                out.append(json.loads(rec.read_text())["profile"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out

    @staticmethod
    def _stored_profiles(bench_home: str, store) -> list[str]:
        """The profiles with scores stored under ``bench_home`` (an S3 prefix). A folder is its
        profile's name unless the name needed a digest (``~``): then its leaderboard's rows say it."""
        out = []
        for folder in store.folders(bench_home):
            storage = join(bench_home, folder, "storage")
            if not any(o.rel.endswith(".parquet") for o in store.list(join(storage, "video_scores"))):
                continue
            if "~" not in folder:
                out.append(folder)
                continue
            try:  # the leaderboard's rows carry the evaluation's profile
                names = pl.read_parquet(io.BytesIO(store.read_bytes(join(storage, "leaderboard.parquet"))),
                                        columns=["profile"])["profile"]
            except Exception:  # no leaderboard yet, or not a table of ours: no profile to name
                continue
            if names.len():
                out.append(str(names[0]))
        return out

    def human_path(self) -> Path | str:
        """People's ratings of the bench (``<TASK>.csv``): a folder, or with tables on S3 the bench's
        ``human/`` prefix beside its rubrics, where every machine finds the same files."""
        return _location(self._configured("human_dir"))

    def human_files(self, store, human_dir: Path | str | None = None) -> dict[str, Path]:
        """By task, a local file with the ratings of ``<TASK>.csv`` in ``human_dir`` (default: the
        bench's), read through ``store`` (an object on S3 is fetched into the media cache)."""
        folder = self.human_path() if human_dir in (None, "") else human_dir
        out = {}
        for task in ALL_TASKS:
            try:  # a file is itself; an object is fetched (one HEAD when its copy is current)
                local = Path(store.fetch(join(folder, f"{task}.csv")))
            except FileNotFoundError:
                continue
            if local.is_file():
                out[task] = local
        return out


def bench_from_settings(settings: Settings, **folders: str) -> BenchResource:
    """The evaluation's bench resource; ``folders`` (``frozen_rubrics_dir``, ``reports_dir``,
    ``storage_dir``) stand for the settings' own (the aws environment's ``s3://`` layout). Built in
    one go: a resource's config is what it was constructed with."""
    s = settings
    fields = dict(bench=s.bench, profile=s.profile, bench_dir=str(s.bench_dir),
                  candidates_dir=str(s.candidates_dir), frozen_rubrics_dir=str(s.frozen_rubrics_dir),
                  reports_dir=str(s.reports_dir), human_dir=str(s.human_dir), storage_dir=str(s.storage_dir),
                  home_dir=str(s.home), rubrics_in=s.rubrics_in)
    return BenchResource(**{**fields, **folders})
