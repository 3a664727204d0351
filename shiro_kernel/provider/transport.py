"""One attempt of a model call over HTTP: the post, and the answer read as plain dicts.

The SDK posts the body (``client.post``: auth, base URL, headers, its error classes) and hands back its
raw HTTP response (:func:`response_class` as ``cast_to``), whose bytes are ours to read: a JSON answer
(:func:`post_json`) or an SSE stream decoded by the SDK's own decoder, each event handed on as it arrives
(:func:`post_events`). An attempt ends on a gap of its timeout between two events (keep-alive comments do
not count, :class:`Watch`), on an ``{"error": ...}`` object in the stream, or on an answer that is not the
API's — raised as the failures of :mod:`~shiro_kernel.provider.failures`, which the client folds into the
call's one ``Error``.

Nothing here imports ``openai``; the client object is handed in.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from .failures import Idle, NotAPI, StreamBroken, StreamError, timed_out

if TYPE_CHECKING:
    from ..events import ReasoningDelta, TextDelta
    from .wire import ChatStream, ResponsesStream


def split_query(url: str | None) -> tuple[str | None, dict[str, str]]:
    """A base URL without its query string, and the query as parameters for every request (the SDK would
    otherwise glue the path after the query: ``/v1?api-version=x/responses``)."""
    if not url or "?" not in url:
        return url, {}
    try:
        parts = urlsplit(url)
    except ValueError:  # the SDK says what is wrong with it
        return url, {}
    return urlunsplit(parts._replace(query="", fragment="")), dict(parse_qsl(parts.query))


class Attempt:
    """One attempt of a call: its number (1 for the first), its timeout, its stream parser, whether anything
    was shown yet, and what a failure of it needs to be understood: the API and body it sent, whether the
    body carried images, and how many events its stream delivered."""

    __slots__ = (
        "api",
        "body",
        "events",
        "images",
        "number",
        "parser",
        "plain_after_empty",
        "shown",
        "stored",
        "streamed",
        "timeout",
    )

    def __init__(self, number: int, timeout: float) -> None:
        self.number = number
        self.timeout = timeout
        self.parser: ResponsesStream | ChatStream | None = None
        self.shown = False
        self.api = ""
        self.body: dict[str, Any] = {}
        self.images = False
        self.streamed = False
        self.events = 0
        #: asked without streaming because a stream ended empty
        self.plain_after_empty = False
        #: the answer said ``"store": true`` (a Responses server that keeps its items)
        self.stored = False

    def options(self) -> dict[str, Any]:
        """The SDK's request options: this attempt's timeout, no retries of its own."""
        return {
            "timeout": self.timeout,
            "max_retries": 0,
            "headers": {"x-stainless-retry-count": str(self.number - 1)},
        }


class Watch:
    """Passes a response's byte chunks on, and ends the stream when no event came for ``timeout`` seconds
    although bytes did (keep-alive comments). A server that sends nothing at all is ended by the read
    timeout. Keeps the first bytes, to say what a body that held no event was."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.last_event = time.monotonic()
        self.events = 0
        self.head = b""
        self.since = b""  # what came since the last event (its first 4 kB): keep-alives, or an event crawling in
        self.trickle = 0  # its length

    def chunks(self, source: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in source:
            if len(self.head) < 2048:
                self.head += chunk[: 2048 - len(self.head)]
            if len(self.since) < 4096:
                self.since += chunk[: 4096 - len(self.since)]
            self.trickle += len(chunk)
            yield chunk  # the decoder hands this chunk's events on before it asks for the next one
            if time.monotonic() - self.last_event > self.timeout:
                raise Idle(self.timeout, keepalives=True, trickled=self.crawled())

    def crawled(self) -> int:
        """The bytes of an event that came since the last whole one (0 when they were only keep-alive comments
        ``: …`` and blank lines)."""
        if all(not line.strip() or line.startswith(b":") for line in self.since.splitlines()):
            return 0
        return self.trickle

    def event(self) -> None:
        self.events += 1
        self.last_event = time.monotonic()
        self.since, self.trickle = b"", 0


def post_json(client: Any, path: str, body: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
    """A non-streamed call: the answer's JSON, as a dict."""
    response = client.post(path, body=body, cast_to=response_class(), options=attempt.options())
    content = response.content
    ctype = response.headers.get("content-type", "")
    try:
        data = json.loads(content) if "html" not in ctype else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise NotAPI(response.status_code, ctype, content[:2048])
    return data


def post_events(
    client: Any, path: str, body: dict[str, Any], abort: threading.Event | None, attempt: Attempt
) -> Iterator[dict[str, Any]]:
    """A streamed call: its SSE events as dicts, each as it arrives, decoded by the SDK's decoder.

    Ends (raising) on a gap of ``attempt.timeout`` between events, on an ``{"error": ...}`` object in the
    stream, or on an answer that is not an event stream; stops quietly at ``[DONE]`` or an abort."""
    response = client.post(path, body=body, cast_to=response_class(), stream=True, options=attempt.options())
    try:
        ctype = response.headers.get("content-type", "")
        if "html" in ctype:
            raise NotAPI(response.status_code, ctype, _read_head(response))
        watch = Watch(attempt.timeout)
        try:
            for sse in client._make_sse_decoder().iter_bytes(watch.chunks(response.iter_bytes())):
                data = sse.data
                if data.startswith("[DONE]"):
                    break
                if not data:
                    continue
                event = json.loads(data)
                if isinstance(event, dict) and event.get("error") and event.get("type") is None:
                    err = event["error"]
                    message = err.get("message") if isinstance(err, dict) else err
                    raise StreamError(str(message or "the server reported an error in the stream"))
                watch.event()
                attempt.events += 1
                if abort is not None and abort.is_set():
                    return
                yield event
                watch.event()  # the time the consumer took is not the server's silence
        except (StreamBroken, NotAPI):
            raise
        except Exception as exc:  # the SDK's stream may raise anything: sorted just below
            if timed_out(exc):
                quiet = bool(watch.head) and not watch.events
                raise Idle(attempt.timeout, keepalives=quiet, trickled=watch.crawled() if quiet else 0) from exc
            raise StreamBroken(str(exc) or type(exc).__name__) from exc
        if not watch.events and watch.head.strip() and not watch.head.lstrip().startswith((b"data", b":", b"event")):
            raise NotAPI(response.status_code, ctype, watch.head)
    finally:
        _close(response)


def feed(parser: ResponsesStream | ChatStream, event: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
    """The deltas of one event; an event the parser cannot read counts as a broken stream."""
    try:
        return parser.feed(event)
    except Exception as exc:  # a parser bug on an odd event is a broken stream, retried, not a crash
        raise StreamBroken(f"an unreadable event ({type(exc).__name__}: {exc})") from exc


def response_class() -> type:
    """The SDK's HTTP response class: as ``cast_to`` it makes ``client.post`` hand back the raw response
    (status checked, retries and errors the SDK's), whose bytes are ours to read."""
    import httpx2

    return httpx2.Response


def _read_head(response: Any, limit: int = 2048) -> bytes:
    head = b""
    try:
        for chunk in response.iter_bytes():
            head += chunk
            if len(head) >= limit:
                break
    except Exception:  # what arrived is enough to say what it was
        pass
    return head[:limit]


def _close(response: Any) -> None:
    try:
        response.close()
    except Exception:  # closing a broken stream may itself fail; nothing to do about it
        pass


__all__ = ["Attempt", "Watch", "feed", "post_events", "post_json", "response_class"]
