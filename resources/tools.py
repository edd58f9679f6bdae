"""The evidence tool suite, built once per process per configuration."""


import functools

import dagster as dg

from argus_dagster.evidence.tools.registry import ToolSuite, embedded_suite


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

    def suite(self) -> ToolSuite:
        return _suite(self.device, self.models_dir, bool(self.web_search_key))

    @property
    def web_search(self) -> bool:
        return bool(self.web_search_key)
