"""What may be shown, logged or stored of an endpoint URL or a server's text: userinfo, query and
header secrets, credential-like tokens and ``key=value`` secrets become ``***``."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_SECRET_PARAM = re.compile(r"(key|token|secret|password|passwd|pwd|signature|sig|auth|credential)", re.I)


def redact_url(url: str) -> str:
    """``url`` as it may be shown, logged or stored: userinfo (``user:secret@``) and the values of
    query parameters that look like secrets (``key``, ``api_key``, ``token``, ``sig``...) become
    ``***``. Anything that does not parse as a URL is shown as ``<unparseable URL>``."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unparseable URL>"
    netloc = ("***@" if "@" in parts.netloc else "") + (f"[{host}]" if ":" in host else host) + port
    query = urlencode([(k, "***" if _SECRET_PARAM.search(k) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def redact_urls(urls: str) -> str:
    """A comma-separated endpoint pool, each one redacted."""
    return ",".join(redact_url(u) for u in urls.split(",") if u.strip())


# Secrets a server may echo in an error body or an answer: URL userinfo, Authorization values (any
# scheme), Bearer/Basic tokens that look like credentials, and key=value pairs with a secret's name.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@\"'<>]+@")
_AUTH_VALUE = re.compile(r"(?i)\b((?:proxy-)?authorization\\?[\"']?\s*[:=]\s*\\?[\"']?\s*)"
                         r"(?:(basic|bearer|digest|token)\s+)?[^\s\"',;}\\]+")
_TOKEN = re.compile(r"\b(bearer|basic)\s+(?=[A-Za-z0-9._~+/=-]*(?:[0-9+/=_]|[a-z][A-Z]))[A-Za-z0-9._~+/-]{12,}=*",
                    re.IGNORECASE)
_SECRET_PAIR = re.compile(r"(?i)\b((?:api[_-]?key|access[_-]?token|secret|password|passwd)\\?[\"']?\s*[:=]\s*\\?[\"']?)"
                          r"[^\s\"'&,;}\\]+")


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` from a server as it may be stored or shown: each of ``secrets`` (the key, raw endpoint
    URLs), URL credentials, ``Authorization`` values (Basic, Bearer and the rest), credential-like
    Bearer/Basic tokens and ``api_key=``/``password:`` values become ``***``. Run it on the whole text
    before any cut: a cut first could leave the head of a secret that no pattern then recognizes."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _USERINFO.sub(r"\1***@", text)
    text = _AUTH_VALUE.sub(lambda m: m.group(1) + (m.group(2) + " " if m.group(2) else "") + "***", text)
    text = _TOKEN.sub(r"\1 ***", text)
    return _SECRET_PAIR.sub(r"\1***", text)
