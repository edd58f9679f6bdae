"""Where inputs, candidates and frozen rubrics live."""


from pathlib import Path

import dagster as dg

from argus_dagster.settings import load_settings


class BenchResource(dg.ConfigurableResource):
    """The bench and candidate store. Empty fields resolve at run time from :mod:`argus_dagster.settings`."""

    bench_dir: str = ""
    candidates_dir: str = ""
    frozen_rubrics_dir: str = ""

    def bench_path(self) -> Path:
        return Path(self.bench_dir) if self.bench_dir else load_settings().bench_dir

    def candidates_path(self) -> Path:
        return Path(self.candidates_dir) if self.candidates_dir else load_settings().candidates_dir

    def frozen_rubrics_path(self) -> Path:
        return Path(self.frozen_rubrics_dir) if self.frozen_rubrics_dir else load_settings().frozen_rubrics_dir
