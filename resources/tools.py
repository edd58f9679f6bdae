"""The evidence tool suite, built once per process per configuration."""


import functools

import dagster as dg

from argus_dagster.cache import EvidenceCache
from argus_dagster.evidence.tools.registry import ToolSuite, embedded_suite
from argus_dagster.settings import load_settings


@functools.lru_cache(maxsize=4)
def _suite(device: str, models_dir: str, web_search: bool) -> ToolSuite:
    # Model-backed tools (weights under models_dir, on device) plug in here; the embedded default
    # has only weight-free tools and reports the others as unavailable.
    return embedded_suite(web_search=web_search)


class ToolsResource(dg.ConfigurableResource):
    """Which tools run, on which device, with weights from which folder (never downloaded)."""

    device: str = "cpu"
    models_dir: str = ""
    web_search_key: str = ""
    vlm_only: bool = False
    # Evidence cache folder; empty: $ARGUS_HOME/cache/evidence. "off" disables it.
    cache_dir: str = ""

    def evidence_cache(self) -> EvidenceCache:
        if self.cache_dir == "off":
            return EvidenceCache(None)
        return EvidenceCache(self.cache_dir or load_settings().home / "cache" / "evidence")

    def suite(self) -> ToolSuite:
        return _suite(self.device, self.models_dir, bool(self.web_search_key))

    @property
    def web_search(self) -> bool:
        return bool(self.web_search_key)
