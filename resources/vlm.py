"""The vision-language backbone: an OpenAI-compatible endpoint pool, a local model, or none.

Two instances run in the graph: ``vlm`` (the criterion judge and ``vlm_qa``) and ``rubric_vlm`` (the
rubric generator), so the two backbones are chosen independently. Clients are built once per process
and configuration and shared by every asset and thread that uses them.
"""


import os
from typing import Any

import dagster as dg

from argus_dagster.infra.environment import environment
from argus_dagster.infra.memo import once_per_key
from argus_dagster.infra.redact import redact_urls
from argus_dagster.vlm.protocol import VlmClient
from argus_dagster.vlm.reply import DEFAULT_MAX_ANSWER_CHARS

BACKENDS = ("none", "openai", "transformers")


# The one process cache of clients, at most 8 configurations (the judge's and the rubric generator's, a
# few profiles): every run and thread of the process that asks for a configuration gets the same client,
# because the client holds the endpoints' bound on requests in flight and the queue that orders waiting
# requests by stage, priority and video (argus_dagster.vlm.priorities), and both must span every
# concurrent run to hold. A local model is loaded once per process for the same reason.
@once_per_key(maxsize=8)
def _client(backend: str, base_urls: str, model: str, api_key: str, concurrency: int, timeout_s: float,
            max_retries: int, model_path: str, device: str, max_new_tokens: int, slots_dir: str,
            max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS) -> VlmClient:
    if backend == "openai":
        from argus_dagster.vlm.openai_compatible import OpenAICompatibleClient  # deferred: start-up time (requests)
        return OpenAICompatibleClient(base_urls, model, api_key, concurrency=concurrency, timeout_s=timeout_s,
                                      max_retries=max_retries, slots_dir=slots_dir or None,
                                      max_answer_chars=max_answer_chars)
    from argus_dagster.vlm.transformers_client import TransformersClient  # deferred: start-up time (torch)
    return TransformersClient(model_path, device=device, max_new_tokens=max_new_tokens, name=model)


class VlmResource(dg.ConfigurableResource):
    """Which VLM answers, and how hard a call is tried. The key comes from an environment variable."""

    backend: str = "none"
    base_urls: str = ""
    model: str = ""
    api_key: str = ""
    concurrency: int = 8
    # The whole request (connecting, sending, the answer's last byte), not each read.
    timeout_s: float = 120.0
    max_retries: int = 5
    # A server that ignores max_tokens may answer megabytes: a longer answer is cut here, and says so.
    max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS
    parse_retries: int = 2
    model_path: str = ""
    device: str = "cpu"
    # A local model's ceiling on answer length: a rich rubric with plans runs to several thousand tokens
    # (judge and vlm_qa calls ask for a few hundred, whatever this says).
    max_new_tokens: int = 8192
    # Where the endpoints' slot files live: ``concurrency`` then bounds the requests in flight to an
    # endpoint from every process on this machine (concurrent runs of the UI, the sensor, argus
    # evaluate), not per process. Empty: per process.
    slots_dir: str = ""

    @property
    def configured(self) -> bool:
        return self.backend != "none"

    def client(self) -> VlmClient:
        if self.backend not in BACKENDS:
            raise ValueError(f"VLM backend {self.backend!r}: expected one of {BACKENDS}")
        if self.backend == "none":
            raise ValueError("no VLM is configured (set ARGUS_VLM_BASE_URL and ARGUS_VLM_MODEL, or ARGUS_VLM_PATH)")
        return _client(self.backend, self.base_urls, self.model_name(), self.api_key, self.concurrency, self.timeout_s,
                       self.max_retries, self.model_path, self.device, self.max_new_tokens, self.slots_dir,
                       self.max_answer_chars)

    def model_name(self) -> str:
        if self.backend == "transformers":
            return self.model or os.path.basename(self.model_path.rstrip("/")) or "local"
        return self.model

    def shown_urls(self) -> str:
        """The endpoint pool as it may be printed or stored: no credentials (``redact_url``)."""
        urls = self.base_urls.get_value() if isinstance(self.base_urls, dg.EnvVar) else self.base_urls
        return redact_urls(urls or "")

    def workers(self) -> int:
        """How many calls a stage should keep in flight to fill this backbone."""
        if self.backend == "openai":
            return self.concurrency * max(1, len([u for u in self.base_urls.split(",") if u.strip()]))
        return 1


def vlm_from_env(prefix: str = "ARGUS_VLM", fallback: str | None = None) -> VlmResource:
    """The VLM named by ``<prefix>_BASE_URL`` (comma-separated pool) or ``<prefix>_PATH`` (a local model
    folder), with ``_MODEL``, ``_API_KEY``, ``_CONCURRENCY``, ``_TIMEOUT_S``, ``_MAX_RETRIES``, ``_MAX_ANSWER_CHARS``,
    ``_DEVICE``.

    When neither is set, the whole configuration is ``fallback``'s: a key is never sent to an endpoint
    other than the one it was given for.
    """
    env = environment()
    if fallback and not (env.get(f"{prefix}_BASE_URL") or env.get(f"{prefix}_PATH")):
        prefix = fallback

    def get(name: str) -> str:
        return env.get(f"{prefix}_{name}")

    common: dict[str, Any]  # a VlmResource's fields, of several types
    common = dict(concurrency=int(env.number(f"{prefix}_CONCURRENCY", 8, minimum=1)),
                  timeout_s=env.number(f"{prefix}_TIMEOUT_S", 120.0, integer=False, minimum=0),
                  max_retries=int(env.number(f"{prefix}_MAX_RETRIES", 5, minimum=0)),
                  max_answer_chars=int(env.number(f"{prefix}_MAX_ANSWER_CHARS", DEFAULT_MAX_ANSWER_CHARS, minimum=1)))
    if get("BASE_URL"):
        # dg.EnvVar keeps the key's value out of the run config the UI shows.
        key = dg.EnvVar(f"{prefix}_API_KEY") if get("API_KEY") else ""
        # A URL with credentials in it (user:secret@, ?key=) stays out of the run config the same way.
        url = get("BASE_URL")
        plain = ",".join(u.strip() for u in url.split(",") if u.strip())
        urls = dg.EnvVar(f"{prefix}_BASE_URL") if redact_urls(url) != plain else url
        return VlmResource(backend="openai", base_urls=urls, model=get("MODEL"), api_key=key, **common)
    if get("PATH"):
        return VlmResource(backend="transformers", model_path=get("PATH"), model=get("MODEL"),
                           device=get("DEVICE") or "cpu", **common)
    return VlmResource()
