"""What a failure is, and how it may be shown: the words of the provider layer's errors.

* :func:`redact` and :func:`safe_url`: what a message may show of the key and the base URL (never the
  key, a URL's ``user:password@`` or its query values).
* :func:`error_kind`: the repairable failures a server's message names (an item the provider lost, a
  model that takes no images), from the real texts of OpenAI and the common local servers.
* :func:`_server_message`: the server's own words out of the SDK's error; an HTML page by its title.
* When to try again: :data:`RETRY_STATUSES`, :func:`_retry_after`, :func:`_server_allows_retry`,
  :func:`_timed_out`.

Pure functions over strings and headers: nothing here imports ``openai``.
"""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

# Regular expressions are kept as source and compiled on first use (``re`` caches them): ``%load_ext``
# imports this module, and most of them never run in a session.
_RESPONSES_ONLY = (
    r"(?i)only supported in v1/responses|not supported in (the )?v1/chat/completions|use the responses api"
)
#: the provider no longer holds an item the history refers to by id (a 404 with ``store`` on)
ITEM_NOT_FOUND = r"(?i)item with id '[^']*' not found"
#: the model (or the server) takes no images. Real messages, their servers and statuses: OpenAI 400,
#: Ollama 400/500, vLLM 400/500, llama.cpp 500, LM Studio 400 (a bare string), OpenRouter 404, and LiteLLM
#: wrapping any of them; see tests/provider/test_client.py for the verbatim texts. A list of allowed
#: part types that itself names an image type is our own shape bug, not this.
IMAGES_UNSUPPORTED = (
    r"(?i)image_url is only supported by certain models"  # OpenAI chat (gpt-3.5, gpt-4, ...)
    r"|does not support (?:images?|image input|vision|multi-?modal)"  # Ollama cloud, LM Studio
    r"|missing data required for image input"  # Ollama (local engine)
    r"|\bis not a multi-?modal model"  # vLLM, text-only model
    r"|\bat most 0 image\(s\) may be provided"  # vLLM, image limit 0
    r"|multi-modal processor not available for text-only"  # vLLM, later versions
    r"|image input is not supported"  # llama.cpp server without --mmproj
    r"|no endpoints found that support image input"  # OpenRouter (404)
    r"|not compiled for multimodal"  # old llama.cpp server, llamafile
    r"|invalid value: '(?:input_image|image_url)'\. supported values are: (?![^.\n]*image)"
)
#: statuses worth another attempt (as the SDK retries them)
RETRY_STATUSES = frozenset({408, 409, 429})
_MAX_RETRY_AFTER_S = 120.0


# -- words: what a message may show ------------------------------------------------------------------
_URL_USERINFO = r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#@]+@"
_URL_QUERY = r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s?#'\"<>]*)[?#][^\s'\"<>]*"


def redact(text: str, key: str | None = None, secrets: tuple[str, ...] = ()) -> str:
    """Remove the API key (and anything shaped like one), the given secrets (a base URL's password and
    query values), and the userinfo and query string of any URL from a message."""
    for secret in (key, *secrets):
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    text = re.sub(_URL_QUERY, r"\1", re.sub(_URL_USERINFO, r"\1", text))
    return re.sub(r"\b(sk|rk)-[A-Za-z0-9_*\-]{6,}", r"\1-…", text)


def safe_url(url: str) -> str:
    """A URL as it may be shown: scheme, host, port and path only (no ``user:password@``, no query, no
    fragment), without a trailing slash."""
    try:
        parts = urlsplit(url.strip())
        if parts.scheme and parts.hostname:
            host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
            return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}".rstrip("/")
    except ValueError:  # not a URL (a bad port, a broken IPv6 address): cut the parts that may hold secrets
        pass
    bare = re.sub(_URL_USERINFO, r"\1", re.split(r"[?#]", url.strip(), maxsplit=1)[0])
    return (bare if "://" in bare else bare.rsplit("@", 1)[-1]).rstrip("/")


def _url_secrets(url: str | None) -> tuple[str, ...]:
    """What in a base URL must never be shown: its password and its query values."""
    if not url:
        return ()
    try:
        parts = urlsplit(url)
        found = [parts.password or ""] + [v for _, v in parse_qsl(parts.query)]
    except ValueError:
        found = re.findall(r"://[^/\s@]*:([^/\s@]+)@", url) + re.findall(r"=([^&#\s]+)", url)
    return tuple(sorted({s for s in found if len(s) >= 4}, key=len, reverse=True))


def _split_query(url: str | None) -> tuple[str | None, dict[str, str]]:
    """A base URL without its query string, and the query as parameters for every request (the SDK would
    otherwise glue the path after the query: ``/v1?api-version=x/responses``)."""
    if not url or "?" not in url:
        return url, {}
    try:
        parts = urlsplit(url)
    except ValueError:  # the SDK says what is wrong with it
        return url, {}
    return urlunsplit(parts._replace(query="", fragment="")), dict(parse_qsl(parts.query))


def _html_title(text: str) -> str:
    """The ``<title>`` of an HTML page, or its first words, shortened for a one-line message."""
    match = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
    words = match.group(1) if match else re.sub(r"<[^>]*>", " ", text)
    return " ".join(words.split())[:80]


def _looks_like_html(text: str) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith(("<!doctype html", "<html", "<head", "<body")) or "<html" in head


def _server_message(exc: Any) -> str:
    """The server's own words: ``{"error": {"message"}}``, ``{"message"}``, or ``{"error": "<text>"}`` and a
    plain-text body (LM Studio, Ollama), where the SDK's own message is only ``Error code: 400``. An HTML
    error page (a proxy's 502) is summarised by its title."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str) and err.strip():
            return err
    if isinstance(body, str) and body.strip():
        return f"an HTML page ({_html_title(body)})" if _looks_like_html(body) else body
    return str(getattr(exc, "message", "") or exc)


def error_kind(message: str) -> str | None:
    """The repairable failure a server's message names (see :class:`~shiro_kernel.events.Error`)."""
    if re.search(ITEM_NOT_FOUND, message):
        return "item_not_found"
    if re.search(IMAGES_UNSUPPORTED, message):
        return "images_unsupported"
    return None


def _timed_out(exc: BaseException) -> bool:
    """A timeout, as the HTTP library or the SDK raises it (possibly as the cause of another error)."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        if "Timeout" in type(seen).__name__:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _server_allows_retry(headers: Any) -> bool:
    """The server's own ``x-should-retry: false`` wins (as in the SDK)."""
    return headers is None or str(headers.get("x-should-retry", "")).lower() != "false"


def _retry_after(headers: Any) -> float | None:
    """The wait the server asks for (``retry-after-ms``, ``retry-after`` in seconds or as a date), if sane."""
    if headers is None:
        return None
    seconds: float | None = None
    try:
        if headers.get("retry-after-ms"):
            seconds = float(headers["retry-after-ms"]) / 1000
        elif headers.get("retry-after"):
            value = headers["retry-after"]
            try:
                seconds = float(value)
            except ValueError:
                from email.utils import parsedate_to_datetime

                seconds = parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if seconds is None or not 0 < seconds <= _MAX_RETRY_AFTER_S:
        return None
    return seconds
