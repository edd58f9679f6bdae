"""The evidence tool suite, built once per process per configuration.

Models load when the suite is first built and are shared by every criterion, candidate and thread of
the process; forward passes on one device are serialized by the suite's model store. How many tools
compute at once in the process is the resource's ``tool_threads``
(:func:`argus_dagster.method.evidence.executor.set_tool_threads`). Across
processes, GPU-bound assets (``criterion_evidence``) take the Dagster concurrency pool ``gpu``:
``dagster instance concurrency set gpu 1`` gives one device one run's model work at a time (without a
limit the pool constrains nothing, so CPU runs are unaffected).
"""



import dagster as dg

from argus_dagster.infra.cache import ContentCache
from argus_dagster.infra.environment import environment
from argus_dagster.infra.memo import once_per_key
from argus_dagster.method.evidence.executor import set_tool_threads
from argus_dagster.method.evidence.tools.registry import OCR_BACKENDS, ToolSuite, model_suite


# A process cache, not the resource's own: Dagster builds a run's resources anew for every run, and the
# models a suite loads (seconds, and their memory) serve every run and thread of the process. Bound: the
# four configurations used last (a process serves one evaluation, whose one configuration it is).
@once_per_key(maxsize=4)
def _suite(device: str, models_dir: str, web_search_url: str, web_search_key: str, ocr_backend: str) -> ToolSuite:
    # Weight-free tools always; each model-backed tool whose folder is under models_dir, on device.
    return model_suite(models_dir or None, device, web_search_url=web_search_url, web_search_key=web_search_key,
                       ocr_backend=ocr_backend)


class ToolsResource(dg.ConfigurableResource):
    """Which tools run, on which device, with weights from which folder (never downloaded)."""

    device: str = "cpu"
    # Hugging Face checkpoint folders dino/ detector/ depth/ aesthetic/, and easyocr/ (see docs/tools.md).
    models_dir: str = ""
    # Image search for web_search: off unless both are set.
    web_search_url: str = ""
    web_search_key: str = ""
    ocr_backend: str = "rapidocr"
    vlm_only: bool = False
    # The content cache of tool evidence and judgments: a folder or s3://bucket/prefix (resources_for
    # gives the evaluation's, $ARGUS_HOME/cache by default); "off" caches nothing (every rerun pays again).
    cache_dir: str = ""
    # How many tools compute at once in this process (ARGUS_TOOL_THREADS); 0: one per CPU.
    tool_threads: int = 0

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        set_tool_threads(self.tool_threads or None)
        # Load the models once per process up front and say (in one line) which tools fall back or are missing.
        states = [f"{name}: {state}" for name, state in self.suite().describe().items() if state != "available"]
        if states:
            assert context.log is not None  # Dagster gives a resource's setup a log
            context.log.info("tools not available as configured: " + "; ".join(states))

    def cache(self, namespace: str, storage=None) -> ContentCache:
        """The ``evidence`` or ``judgments`` namespace of the content cache (fresh counters); an
        ``s3://`` cache is read and written through ``storage`` (the storage resource's)."""
        if self.cache_dir == "off":
            return ContentCache(None, namespace)
        if not self.cache_dir:
            raise ValueError("ToolsResource.cache_dir is not configured: a folder, an s3:// prefix or 'off' "
                             "(resources.resources_for(settings=...) gives the evaluation's)")
        return ContentCache(self.cache_dir, namespace, storage=storage)

    def suite(self) -> ToolSuite:
        if self.ocr_backend not in OCR_BACKENDS:
            raise ValueError(f"ToolsResource.ocr_backend={self.ocr_backend!r}: expected one of {OCR_BACKENDS}")
        return _suite(self.device, self.models_dir, self.web_search_url, self.web_search_key, self.ocr_backend)

    @property
    def web_search(self) -> bool:
        return bool(self.web_search_url and self.web_search_key)


def tools_from_env(device: str, vlm_only: bool = False, cache_dir: str = "") -> ToolsResource:
    """The tools resource from ``ARGUS_MODELS_DIR``, ``ARGUS_DEVICE`` (overrides ``device``),
    ``ARGUS_OCR_BACKEND``, ``ARGUS_WEB_SEARCH_URL``, ``ARGUS_WEB_SEARCH_KEY``, ``ARGUS_CACHE`` and
    ``ARGUS_TOOL_THREADS``, read when the definitions are built."""
    variables = environment()
    env = variables.get
    # dg.EnvVar keeps the key's value out of the run config the UI shows and the instance stores.
    key = dg.EnvVar("ARGUS_WEB_SEARCH_KEY") if env("ARGUS_WEB_SEARCH_KEY") else ""
    return ToolsResource(device=env("ARGUS_DEVICE") or device, models_dir=env("ARGUS_MODELS_DIR"),
                         web_search_url=env("ARGUS_WEB_SEARCH_URL"), web_search_key=key,
                         ocr_backend=env("ARGUS_OCR_BACKEND") or "rapidocr", vlm_only=vlm_only,
                         cache_dir=env("ARGUS_CACHE") or cache_dir,
                         tool_threads=int(variables.number("ARGUS_TOOL_THREADS", 0, minimum=1)))
