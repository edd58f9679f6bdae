"""``web_search``: a reference image retrieved for a query, registered as ``reference``.

Optional and off unless a search endpoint and key are configured (``ARGUS_WEB_SEARCH_URL``,
``ARGUS_WEB_SEARCH_KEY``); when off, plan normalization removes retrieval and turns similarity
against ``reference`` into a recognition question (method §6).

The endpoint is called as ``GET <url>?q=<query>&count=<n>`` with the key in the
``X-Subscription-Token`` and ``Authorization: Bearer`` headers, and answers JSON with a ``results``
list; each result gives its image as ``image_url``, ``properties.url`` or ``thumbnail.src`` (the
image-search responses of common search APIs have one of these) and optionally its page as ``url``.
The first result whose image decodes is used.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

import cv2
import numpy as np

from argus_dagster.infra.media import resize_longest
from argus_dagster.method.evidence.media_store import MediaStore

MAX_IMAGE_BYTES = 20 << 20


def image_urls(payload: dict[str, Any]) -> list[tuple[str, str]]:
    """(image URL, page URL) of each result, in the order returned."""
    out = []
    for r in payload.get("results") or []:
        if not isinstance(r, dict):
            continue
        props, thumb = r.get("properties") or {}, r.get("thumbnail") or {}
        url = r.get("image_url") or (props.get("url") if isinstance(props, dict) else None) \
            or (thumb.get("src") if isinstance(thumb, dict) else None)
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            out.append((url, str(r.get("url") or "")))
    return out


class WebSearch:
    name = "web_search"
    version = "http-1"

    def __init__(self, url: str, key: str, timeout: float = 15.0, max_results: int = 5):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"web search URL {url!r} must start with http:// or https://")
        self.url, self.key, self.timeout, self.max_results = url, key, timeout, max_results

    def _get(self, url: str, headers: dict[str, str] | None = None) -> bytes:
        req = urllib.request.Request(url, headers={"User-Agent": "argus-dagster", **(headers or {})})
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 (http(s) only)
            return resp.read(MAX_IMAGE_BYTES + 1)

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        query = str(args.get("query") or "").strip()
        if not query:
            return {"ok": False, "error": "web_search needs a non-empty 'query'"}
        sep = "&" if "?" in self.url else "?"
        search = f"{self.url}{sep}{urllib.parse.urlencode({'q': query, 'count': self.max_results})}"
        payload = json.loads(self._get(search, {"X-Subscription-Token": self.key,
                                                "Authorization": f"Bearer {self.key}",
                                                "Accept": "application/json"}))
        candidates = image_urls(payload)
        errors = []
        for image_url, page in candidates[: self.max_results]:
            try:
                data = self._get(image_url)
            except OSError as exc:
                errors.append(f"{image_url}: {exc}")
                continue
            if len(data) > MAX_IMAGE_BYTES:
                errors.append(f"{image_url}: larger than {MAX_IMAGE_BYTES >> 20} MB")
                continue
            bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
            if bgr is None:
                errors.append(f"{image_url}: not a decodable image")
                continue
            image = resize_longest(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
            media.register("reference", image)
            return {"ok": True, "registered": "reference", "query": query, "image_url": image_url,
                    "page_url": page, "size": [int(image.shape[1]), int(image.shape[0])],
                    "n_results": len(candidates)}
        return {"ok": False, "query": query, "n_results": len(candidates),
                "error": f"web_search: no usable image among {len(candidates)} results for {query!r}"
                         + (f" ({'; '.join(errors[:3])})" if errors else "")}
