"""What a failure is, and how it may be shown: the words of the provider layer's errors.

* How one attempt breaks besides the SDK's own errors: :class:`StreamBroken` (and :class:`Idle`,
  :class:`StreamError`), :class:`ResponseFailed`, :class:`NotAPI`.
* :func:`redact`, :func:`safe_url` and :func:`url_secrets`: what a message may show of the key and the base
  URL (never the key, a URL's ``user:password@`` or its query values).
* :func:`error_kind`: the repairable failures a server's message names (an item the provider lost, a
  model that takes no images, a context window too small), from the real texts of OpenAI and the common local servers.
* :func:`server_message`: the server's own words out of the SDK's error; an HTML page by its title.
* The sentences a failed call ends with: :func:`status_sentence`, :func:`broken_sentence`,
  :func:`not_api_sentence`, :func:`no_responses_sentence`, :func:`overflow_sentence` (the client folds every failure into one of them:
  :meth:`~shiro_kernel.provider.client.Provider.stream`).
* When to try again: :data:`RETRY_STATUSES`, :func:`retry_after`, :func:`server_allows_retry`,
  :func:`timed_out`.

Pure functions over strings and headers: nothing here imports ``openai``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

# Regular expressions are kept as source and compiled on first use (``re`` caches them): ``%load_ext``
# imports this module, and most of them never run in a session.
#: a Chat Completions refusal that means "use the Responses API for this model"
RESPONSES_ONLY = r"(?i)only supported in v1/responses|not supported in (the )?v1/chat/completions|use the responses api"
#: the provider no longer holds an item the history refers to by id (a 404 with ``store`` on)
ITEM_NOT_FOUND = r"(?i)item with id '[^']*' not found"
#: a Responses server that takes no item references at all (Ollama's: its items are never kept); repaired as a
#: lost item is, by sending the history inline
ITEM_REFERENCE_REFUSED = r"(?i)unknown input item type:?\s*\W?item_reference"
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
#: a context window too small for the request: (the window, the tokens asked for) where the text says them.
#: llama-cpp-python: "Requested tokens (544) exceed context window of 512"; llama.cpp server: "the request
#: exceeds the available context size" (its body has n_ctx, n_prompt_tokens); vLLM and OpenAI's chat: "This
#: model's maximum context length is 4096 tokens. However, you requested 5000 tokens"; vLLM's "Input prompt
#: (5000 tokens) is too long and exceeds limit of 4096"; LM Studio: "… the model is loaded with context length of
#: only 4096 tokens"; OpenAI's Responses API: "Your input exceeds the context window of this model"
CONTEXT_OVERFLOW = (
    r"(?i)exceeds? (the )?context window|exceeds the available context size|maximum context length is|"
    r"is too long and exceeds limit of|loaded with context length of only|context_length_exceeded|"
    r"input length exceeds the context length|prompt is too long"
)
#: statuses worth another attempt (as the SDK retries them)
RETRY_STATUSES = frozenset({408, 409, 429})
_MAX_RETRY_AFTER_S = 120.0
#: how a message is cleaned of secrets before it is shown (:func:`redact` with the provider's key)
Redact = Callable[[str], str]


# -- how one attempt breaks ---------------------------------------------------------------------------
class StreamBroken(Exception):
    """The stream stopped or produced something unreadable before the response was complete."""


class Idle(StreamBroken):
    """No event for the attempt's timeout: the server sent only keep-alive comments, bytes too slowly to make a
    whole event (``trickled``: how many), or nothing."""

    def __init__(self, seconds: float, keepalives: bool, trickled: int = 0) -> None:
        super().__init__(f"no event for {seconds_text(seconds)} s" + (", only keep-alives" if keepalives else ""))
        self.seconds = seconds
        self.keepalives = keepalives and not trickled
        self.trickled = trickled


def seconds_text(seconds: float) -> str:
    """Seconds as a person reads them: ``0.5``, ``2.6``, ``30`` (never ``2.56607``)."""
    if seconds >= 10:
        return f"{seconds:.0f}"
    return f"{seconds:.1f}".rstrip("0").rstrip(".") or "0"


class StreamError(StreamBroken):
    """The server put an ``{"error": ...}`` object into the stream."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ResponseFailed(Exception):
    """The Responses stream itself reported the response failed (``response.failed``, an ``error`` event):
    not tried again; what it showed before is kept, as for a broken stream."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotAPI(Exception):
    """The answer is not the API's (an HTML page, an empty or unknown body): its status, content type and
    first bytes (:func:`not_api_sentence`)."""

    def __init__(self, status: int, content_type: str, head: bytes) -> None:
        super().__init__(f"HTTP {status} {content_type}")
        self.status = status
        self.content_type = content_type
        self.head = head


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


def url_secrets(url: str | None) -> tuple[str, ...]:
    """What in a base URL must never be shown: its password and its query values."""
    if not url:
        return ()
    try:
        parts = urlsplit(url)
        found = [parts.password or ""] + [v for _, v in parse_qsl(parts.query)]
    except ValueError:
        found = re.findall(r"://[^/\s@]*:([^/\s@]+)@", url) + re.findall(r"=([^&#\s]+)", url)
    return tuple(sorted({s for s in found if len(s) >= 4}, key=len, reverse=True))


def _html_title(text: str) -> str:
    """The ``<title>`` of an HTML page, or its first words, shortened for a one-line message."""
    match = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
    words = match.group(1) if match else re.sub(r"<[^>]*>", " ", text)
    return " ".join(words.split())[:80]


def _looks_like_html(text: str) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith(("<!doctype html", "<html", "<head", "<body")) or "<html" in head


def server_message(exc: Any) -> str:
    """The server's own words: ``{"error": {"message"}}``, ``{"message"}``, ``{"error": "<text>"}``, FastAPI's
    ``{"detail": "<text>"}`` and a plain-text body (LM Studio, Ollama), where the SDK's own message is only ``Error code: 400``. An HTML
    error page (a proxy's 502) is summarised by its title."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str) and err.strip():
            return err
        if isinstance(body.get("detail"), str) and body["detail"].strip():  # FastAPI's (llama-cpp-python's) shape
            return str(body["detail"])
    if isinstance(body, str) and body.strip():
        return f"an HTML page ({_html_title(body)})" if _looks_like_html(body) else body
    return str(getattr(exc, "message", "") or exc)


def error_kind(message: str) -> str | None:
    """The repairable failure a server's message names (see :class:`~shiro_kernel.events.Error`)."""
    if re.search(ITEM_NOT_FOUND, message) or re.search(ITEM_REFERENCE_REFUSED, message):
        return "item_not_found"
    if re.search(IMAGES_UNSUPPORTED, message):
        return "images_unsupported"
    if re.search(CONTEXT_OVERFLOW, message):
        return "context_overflow"
    return None


def timed_out(exc: BaseException) -> bool:
    """A timeout, as the HTTP library or the SDK raises it (possibly as the cause of another error)."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        if "Timeout" in type(seen).__name__:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def server_allows_retry(headers: Any) -> bool:
    """The server's own ``x-should-retry: false`` wins (as in the SDK)."""
    return headers is None or str(headers.get("x-should-retry", "")).lower() != "false"


def retry_after(headers: Any) -> float | None:
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


# -- the sentences a failed call ends with -------------------------------------------------------------
def status_sentence(status: int, msg: str, retries: int, *, host: str, model: str, redact: Redact) -> str:
    """An HTTP error status of the server at ``host``, with its own words ``msg``."""
    msg = redact(msg.strip().rstrip("."))
    after = f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""
    if status == 401:
        return f"The server at {host} refused the API key (401): {msg}. Check OPENAI_API_KEY."
    if status == 429:
        return f"Rate limited by {host} (429){after}: {msg}. Wait a moment and run the prompt again."
    if status >= 500:
        return f"The model server at {host} failed ({status}){after}: {msg}."
    if status == 404 and "model" in msg.lower() and "item" not in msg.lower():
        return (
            f"The server at {host} does not know the model {model!r} (404): {msg}. "
            'Set %config Shiro.model = "..." (or SHIRO_MODEL).'
        )
    return f"The model server rejected the request ({status}): {msg}."


def no_responses_sentence(host: str, status: int | None, msg: str) -> str:
    """A server without ``/v1/responses``, where the user chose that API (``Shiro.api``): what to set."""
    words = " ".join(msg.split())[:80].rstrip(".")
    answered = (
        f"{status}: {words}"
        if status and words and not words.lower().startswith("error code")
        else (str(status) if status else f"with a page that is not the API's ({words})")
    )
    return (
        f"The server at {host} has no Responses API (POST /v1/responses answered {answered}), and Shiro.api is "
        'set to "responses": to use its Chat Completions, set %config Shiro.api = "chat" (or SHIRO_API=chat), '
        "or unset it and shiro switches by itself."
    )


def overflow_sentence(host: str, window: int | None, msg: str, *, redact: Redact) -> str:
    """A request larger than the model's context window, and what to do (the turn first prunes to fit)."""
    said = redact(" ".join(msg.split())[:160].rstrip("."))
    size = f"{window:,} tokens" if window else "smaller than this request"
    return (
        f"The model's context window at {host} is {size} ({said}), and this request does not fit even with the "
        "history pruned: start the server with a larger context (llama.cpp: --n_ctx 8192 or -c 8192; Ollama: "
        "num_ctx; vLLM: --max-model-len), use a model with a larger window, or start a shorter session "
        "(%shiro --new, or /compact)."
    )


def broken_sentence(exc: Exception, *, host: str, timeout: float, shown: bool, tried: str, redact: Redact) -> str:
    """A connection that failed, a stream that broke or went quiet (``shown``: after something of the
    answer arrived; ``tried``: how often, in how long)."""
    if isinstance(exc, StreamError):
        return redact(f"The model failed mid-answer: {exc.message.strip().rstrip('.')}.")
    if isinstance(exc, Idle) and shown:
        return (
            f"The model server at {host} stopped sending in the middle of the answer (nothing for "
            f"{seconds_text(exc.seconds)} s); what arrived is kept, run the prompt again to continue."
        )
    if isinstance(exc, Idle) or timed_out(exc):
        how = "sent nothing"
        if isinstance(exc, Idle) and exc.trickled:
            how = f"sent {exc.trickled:,} bytes too slowly to make a whole event"
        elif isinstance(exc, Idle) and exc.keepalives:
            how = "sent only keep-alives"
        return (
            f"The model server at {host} did not answer within {seconds_text(timeout)} s "
            f"({how}; {tried}); check the server, or raise %config Shiro.timeout_s."
        )
    if shown:
        return redact(
            f"The connection to {host} broke in the middle of the answer ({_cause(exc)}); "
            "what arrived is kept, run the prompt again to continue."
        )
    if isinstance(exc, StreamBroken):
        return redact(f"The model server at {host} ended the answer before anything arrived ({_cause(exc)}; {tried}).")
    return redact(
        f"Could not reach the model server at {host} ({_cause(exc)}; {tried}): check that it is "
        "running and that Shiro.base_url / OPENAI_BASE_URL point at it."
    )


def not_api_sentence(exc: NotAPI, *, host: str) -> str:
    """An answer that is not the API's: what came, and which base URL to check."""
    text = exc.head.decode("utf-8", "replace")
    ctype = exc.content_type.split(";")[0].strip()
    if "html" in ctype or _looks_like_html(text):
        title = _html_title(text)
        what = f"an HTML page ({title})" if title else "an HTML page"
    elif text.strip():
        kind = f"a body of type {ctype}" if ctype else "a body"
        what = f"{kind} that is not the API's ({' '.join(text.split())[:80]})"
    else:
        what = f"an empty {ctype + ' ' if ctype else ''}body"
    return (
        f"The server at {host} answered HTTP {exc.status} with {what} instead of the model's answer: check "
        f"that Shiro.base_url / OPENAI_BASE_URL ({host}) is the API's base URL (it usually ends in /v1) "
        "and that no proxy or login page is in the way."
    )


def _cause(exc: Exception) -> str:
    cause = exc.__cause__ or exc.__context__
    text = str(exc) if isinstance(exc, StreamBroken) else (str(cause) if cause else str(exc))
    return (text or type(exc).__name__).strip().rstrip(".")[:200]


__all__ = [
    "CONTEXT_OVERFLOW",
    "IMAGES_UNSUPPORTED",
    "ITEM_NOT_FOUND",
    "ITEM_REFERENCE_REFUSED",
    "RESPONSES_ONLY",
    "RETRY_STATUSES",
    "Idle",
    "NotAPI",
    "ResponseFailed",
    "StreamBroken",
    "StreamError",
    "broken_sentence",
    "error_kind",
    "no_responses_sentence",
    "not_api_sentence",
    "overflow_sentence",
    "redact",
    "retry_after",
    "safe_url",
    "seconds_text",
    "server_allows_retry",
    "server_message",
    "status_sentence",
    "timed_out",
    "url_secrets",
]
