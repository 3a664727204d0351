"""The provider layer: the only module that imports ``openai`` (lazily, on first use).

``Provider.stream(...)`` sends the transcript to the model over the Responses API or Chat
Completions and yields the project's own events (:mod:`shiro_kernel.events`): text and reasoning
deltas, usage, then ``Done`` with the assistant message — or one ``Error`` whose message is a
single clear sentence (never a traceback, never the key, never credentials from the base URL).

How a call goes out: :mod:`~shiro_kernel.provider.wire` builds the request body as exact API JSON, and
the SDK posts it (``client.post``: auth, base URL, headers, its error classes). A streamed answer is
read as raw SSE, decoded by the SDK's own SSE decoder, and fed as plain dicts to the ``wire`` parsers,
each text delta handed on as it arrives. The SDK's typed models are not used: building their pydantic
schemas cost ~1.3 s on a kernel's first call, and validating every event ~25 ms per streamed step,
only for the turn loop to turn the objects back into dicts.

Time limits (``timeout_s``, ``max_retries``):

* ``timeout_s`` bounds connecting, the wait for the answer to start, and every gap between two events
  of a stream — keep-alive comments do not count as events, so a stream that only sends keep-alives, or
  stalls mid-answer, ends after ``timeout_s`` too.
* Retries: after a 408, 409, 429 or 5xx, a timeout, a dropped connection, or a stream that broke before
  anything was shown, at most ``max_retries`` times, waiting as the server's ``retry-after`` says or
  with exponential backoff (0.5 s, 1 s, 2 s … at most 8 s, with jitter). All attempts and waits share
  one budget of ``2 × timeout_s`` (:attr:`Provider.retry_budget_s`) counted from the start of the call:
  a retry starts only when at least a quarter of ``timeout_s`` is left after its wait, and it gets at
  most what is left. (With ``timeout_s = 5`` a server that never answers costs 10 s, not 24.7 s.)
  A stream that is delivering is never cut by the budget, only by a gap of ``timeout_s``.
* Not retried: a 5xx whose message says the model takes no images (llama.cpp answers 500 for it), an
  answer that is not the API's (an HTML proxy or login page: it says what came and which base URL to
  check), and any other 4xx.
* Chat Completions refused for a model ("only supported in v1/responses") falls back to the
  Responses API for the rest of the provider's life, mid-turn, with a notice.

Nothing here imports :mod:`shiro_kernel.events` or :mod:`~shiro_kernel.provider.wire` at import time:
``%load_ext`` imports this package, and those modules are imported by the warm-up thread or the first
call instead.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import environment
from .failures import (
    _RESPONSES_ONLY,
    RETRY_STATUSES,
    _html_title,
    _looks_like_html,
    _retry_after,
    _server_allows_retry,
    _server_message,
    _split_query,
    _timed_out,
    _url_secrets,
    error_kind,
    redact,
    safe_url,
)

if TYPE_CHECKING:
    from ..events import Notice, ProviderEvent, ReasoningDelta, TextDelta
    from ..transcript import Message
    from .wire import ChatStream, ImageSource, InputCache, ResponsesStream

_NO_KEY_HELP = (
    "No API key: set OPENAI_API_KEY (in a notebook: %env OPENAI_API_KEY=sk-...), or point shiro at a "
    "local OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio) with "
    '%config Shiro.base_url = "http://localhost:11434/v1" (or OPENAI_BASE_URL), where no key is needed.'
)
_DEFAULT_BASE_URL = "https://api.openai.com/v1"
# A local server needs no key, but the client insists on one; this placeholder goes only to the server.
_PLACEHOLDER_KEY = "no-key-needed"


@dataclass
class ProviderSettings:
    """How to call the model (a docstring also spares ``dataclass`` an ``inspect.signature`` at import)."""

    model: str
    api: str = "responses"  # responses | chat
    base_url: str | None = None
    store: bool = True
    stream: bool = True
    timeout_s: float = 120.0
    max_retries: int = 3
    reasoning_effort: str | None = None  # only sent when a variant asks for it (reasoning models only)


# -- failures inside one attempt ---------------------------------------------------------------------
class _StreamBroken(Exception):
    """The stream stopped or produced something unreadable before the response was complete."""


class _Idle(_StreamBroken):
    """No event for the attempt's timeout: the server sent only keep-alive comments, or nothing."""

    def __init__(self, seconds: float, keepalives: bool) -> None:
        super().__init__(f"no event for {seconds:g} s" + (", only keep-alives" if keepalives else ""))
        self.seconds = seconds
        self.keepalives = keepalives


class _StreamError(_StreamBroken):
    """The server put an ``{"error": ...}`` object into the stream."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _NotAPI(Exception):
    """The answer is not the API's (an HTML page, an empty or unknown body): ``str()`` is the sentence."""


class _Attempt:
    """One attempt of a call: its timeout, its stream parser, and whether anything was shown yet."""

    __slots__ = ("parser", "shown", "timeout")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.parser: ResponsesStream | ChatStream | None = None
        self.shown = False


class _Watch:
    """Passes a response's byte chunks on, and ends the stream when no event came for ``timeout`` seconds
    although bytes did (keep-alive comments). A server that sends nothing at all is ended by the read
    timeout. Keeps the first bytes, to say what a body that held no event was."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.last_event = time.monotonic()
        self.events = 0
        self.head = b""

    def chunks(self, source: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in source:
            if len(self.head) < 2048:
                self.head += chunk[: 2048 - len(self.head)]
            yield chunk  # the decoder hands this chunk's events on before it asks for the next one
            if time.monotonic() - self.last_event > self.timeout:
                raise _Idle(self.timeout, keepalives=True)

    def event(self) -> None:
        self.events += 1
        self.last_event = time.monotonic()


_clients: OrderedDict[tuple[str, str | None], Any] = OrderedDict()
_clients_lock = threading.Lock()
_MAX_CLIENTS = 4


def shared_client(api_key: str, base_url: str | None) -> Any:
    """The SDK client for this key and base URL, shared by every provider that uses them (and built ahead by
    :mod:`~shiro_kernel.provider.warmup`): a client owns a connection pool and an SSL context, ~0.1 s to
    build. Its own retries are off and every request carries its timeout (see the module docstring), so
    nothing else about a provider's settings is in it. The few most recent are kept."""
    with _clients_lock:  # held while building: a turn that needs the client the warm-up is building waits for it
        client = _clients.get((api_key, base_url))
        if client is None:
            import openai  # deferred: ~0.5 s, and %load_ext must stay cheap

            url, query = _split_query(base_url)
            client = openai.OpenAI(api_key=api_key, base_url=url, default_query=query or None, max_retries=0)
            _clients[(api_key, base_url)] = client
            while len(_clients) > _MAX_CLIENTS:
                _clients.popitem(last=False)
        _clients.move_to_end((api_key, base_url))
        return client


class Provider:
    """Talks to one OpenAI-compatible server. ``client`` may be injected (e.g. for benchmarks)."""

    def __init__(self, settings: ProviderSettings, client: Any = None) -> None:
        self.settings = settings
        self.api = settings.api
        self._client = client
        self._key: str | None = None
        #: where a tool result's images come from (the asset store's ``data_url``); None: send no images,
        #: their text stand-ins instead (set per turn by the agent from ``Shiro.vision``)
        self.images: ImageSource | None = None
        self._inputs: InputCache | None = None  # each message's Responses items, built once

    # -- the client --------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self.settings.base_url or environment().base_url or _DEFAULT_BASE_URL

    @property
    def host(self) -> str:
        """The base URL as messages show it: no credentials, no query string."""
        return safe_url(self.base_url)

    @property
    def retry_budget_s(self) -> float:
        """All attempts of one call, and the waits between them, end within this many seconds."""
        return 2 * self.settings.timeout_s

    def client(self) -> Any:
        if self._client is None:
            from ..errors import MissingKey

            env = environment()
            base_url = self.settings.base_url or env.base_url
            key = env.api_key or (_PLACEHOLDER_KEY if base_url else None)
            if key is None:
                raise MissingKey(_NO_KEY_HELP)
            self._key = env.api_key
            self._client = shared_client(key, base_url)
        return self._client

    def _redact(self, text: str) -> str:
        return redact(text, self._key, _url_secrets(self.base_url))

    # -- one model call --------------------------------------------------------------------------
    def stream(
        self, system: str, messages: list[Message], tools: list[dict[str, Any]], abort: threading.Event | None = None
    ) -> Iterator[ProviderEvent | Notice]:
        """Run one model call. Yields deltas (and a ``Notice`` when the API had to change), then exactly one
        ``Done`` or ``Error``."""
        from ..errors import MissingKey
        from ..events import Error, Notice

        try:
            client = self.client()
        except MissingKey as exc:
            yield Error(str(exc))
            return
        except Exception as exc:  # a base URL the SDK cannot use
            yield Error(
                self._redact(
                    f"Cannot use the base URL {self.host} ({exc}): check Shiro.base_url / OPENAI_BASE_URL "
                    "(e.g. http://localhost:11434/v1)."
                )
            )
            return
        import openai

        s = self.settings
        started = time.monotonic()
        deadline = started + self.retry_budget_s
        attempts = 0
        while True:
            attempts += 1
            left = deadline - time.monotonic()
            attempt = _Attempt(timeout=s.timeout_s if attempts == 1 else max(min(s.timeout_s, left), 0.01))
            try:
                if self.api == "chat":
                    yield from self._chat(client, system, messages, tools, abort, attempt, attempts)
                else:
                    yield from self._responses(client, system, messages, tools, abort, attempt, attempts)
                return
            except openai.APIStatusError as exc:
                msg = _server_message(exc)
                kind = error_kind(msg) or error_kind(str(getattr(exc, "message", "")))
                if self.api == "chat" and exc.status_code in (400, 404) and re.search(_RESPONSES_ONLY, msg):
                    self.api = "responses"
                    yield Notice(
                        f"{s.model} is not served on /v1/chat/completions here; "
                        "switched to the Responses API for the rest of this session.",
                        kind="warning",
                    )
                    continue
                retryable = exc.status_code in RETRY_STATUSES or exc.status_code >= 500
                headers = getattr(getattr(exc, "response", None), "headers", None)
                if retryable and kind is None and _server_allows_retry(headers):
                    delay = self._retry_delay(attempts, deadline, headers)
                    if delay is not None:
                        if self._wait(delay, abort):
                            yield from self._stopped()
                            return
                        continue
                yield Error(
                    self._status_sentence(exc.status_code, msg, attempts - 1),
                    status=exc.status_code,
                    retryable=retryable and kind is None,
                    kind=kind,
                )
                return
            except _NotAPI as exc:
                yield Error(self._redact(str(exc)))
                return
            except (openai.APIConnectionError, _StreamBroken) as exc:  # APITimeoutError is a connection error
                kind = error_kind(exc.message) if isinstance(exc, _StreamError) else None
                if not attempt.shown and kind is None:
                    delay = self._retry_delay(attempts, deadline, None)
                    if delay is not None:
                        if self._wait(delay, abort):
                            yield from self._stopped()
                            return
                        continue
                if attempt.parser is not None and attempt.shown:
                    yield from self._keep_partial(attempt.parser)
                yield Error(
                    self._failure_sentence(exc, attempt, attempts, time.monotonic() - started),
                    retryable=kind is None,
                    kind=kind,
                )
                return
            except openai.OpenAIError as exc:
                yield Error(self._redact(f"The model call failed: {exc}."))
                return

    def _retry_delay(self, attempts: int, deadline: float, headers: Any) -> float | None:
        """How long to wait before the next attempt, or None when there is to be none (no retries left, or
        the budget would not leave the next attempt a quarter of ``timeout_s``)."""
        if attempts > self.settings.max_retries:
            return None
        delay = _retry_after(headers)
        if delay is None:
            delay = min(0.5 * 2 ** (attempts - 1), 8.0) * (1 - 0.25 * random.random())
        if deadline - time.monotonic() - delay < self.settings.timeout_s / 4:
            return None
        return delay

    @staticmethod
    def _wait(seconds: float, abort: threading.Event | None) -> bool:
        """Sleep before a retry; True when the turn was stopped meanwhile."""
        if abort is None:
            time.sleep(seconds)
            return False
        return abort.wait(seconds)

    def _stopped(self) -> Iterator[ProviderEvent]:
        from ..events import Done, Usage
        from ..transcript import Message

        yield Done(Message("assistant", []), Usage(), api=self.api)

    def _keep_partial(self, parser: ResponsesStream | ChatStream) -> Iterator[ProviderEvent]:
        from ..events import Done, Usage

        yield Done(parser.partial(), Usage(), api=self.api)  # keep what arrived

    def _status_sentence(self, status: int, msg: str, retries: int) -> str:
        msg = self._redact(msg.strip().rstrip("."))
        after = f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""
        if status == 401:
            return f"The server at {self.host} refused the API key (401): {msg}. Check OPENAI_API_KEY."
        if status == 429:
            return f"Rate limited by {self.host} (429){after}: {msg}. Wait a moment and run the prompt again."
        if status >= 500:
            return f"The model server at {self.host} failed ({status}){after}: {msg}."
        if status == 404 and "model" in msg.lower() and "item" not in msg.lower():
            return (
                f"The server at {self.host} does not know the model {self.settings.model!r} (404): {msg}. "
                'Set %config Shiro.model = "..." (or SHIRO_MODEL).'
            )
        return f"The model server rejected the request ({status}): {msg}."

    def _failure_sentence(self, exc: Exception, attempt: _Attempt, attempts: int, elapsed: float) -> str:
        import openai

        tried = f"tried {attempts} {'time' if attempts == 1 else 'times'} in {elapsed:.1f} s"
        if isinstance(exc, _StreamError):
            return self._redact(f"The model failed mid-answer: {exc.message.strip().rstrip('.')}.")
        if isinstance(exc, _Idle) and attempt.shown:
            return (
                f"The model server at {self.host} stopped sending in the middle of the answer (nothing for "
                f"{exc.seconds:g} s); what arrived is kept, run the prompt again to continue."
            )
        if isinstance(exc, (openai.APITimeoutError, _Idle)) or _timed_out(exc):
            how = "sent only keep-alives" if isinstance(exc, _Idle) and exc.keepalives else "sent nothing"
            return (
                f"The model server at {self.host} did not answer within {attempt.timeout:g} s "
                f"({how}; {tried}); check the server, or raise %config Shiro.timeout_s."
            )
        if attempt.shown:
            return self._redact(
                f"The connection to {self.host} broke in the middle of the answer ({_cause(exc)}); "
                "what arrived is kept, run the prompt again to continue."
            )
        if isinstance(exc, _StreamBroken):
            return self._redact(
                f"The model server at {self.host} ended the answer before anything arrived ({_cause(exc)}; {tried})."
            )
        return self._redact(
            f"Could not reach the model server at {self.host} ({_cause(exc)}; {tried}): check that it is "
            "running and that Shiro.base_url / OPENAI_BASE_URL point at it."
        )

    def _not_api_sentence(self, status: int, content_type: str, head: bytes) -> str:
        text = head.decode("utf-8", "replace")
        ctype = content_type.split(";")[0].strip()
        if "html" in ctype or _looks_like_html(text):
            title = _html_title(text)
            what = f"an HTML page ({title})" if title else "an HTML page"
        elif text.strip():
            kind = f"a body of type {ctype}" if ctype else "a body"
            what = f"{kind} that is not the API's ({' '.join(text.split())[:80]})"
        else:
            what = f"an empty {ctype + ' ' if ctype else ''}body"
        return (
            f"The server at {self.host} answered HTTP {status} with {what} instead of the model's answer: check "
            f"that Shiro.base_url / OPENAI_BASE_URL ({self.host}) is the API's base URL (it usually ends in /v1) "
            "and that no proxy or login page is in the way."
        )

    # -- the request and its answer -------------------------------------------------------------------
    def _options(self, attempt: _Attempt, attempts: int) -> dict[str, Any]:
        return {
            "timeout": attempt.timeout,
            "max_retries": 0,
            "headers": {"x-stainless-retry-count": str(attempts - 1)},
        }

    def _post_json(self, client: Any, path: str, body: dict[str, Any], attempt: _Attempt, attempts: int) -> Any:
        """A non-streamed call: the answer's JSON, as a dict."""
        response = client.post(path, body=body, cast_to=_response_class(), options=self._options(attempt, attempts))
        content = response.content
        ctype = response.headers.get("content-type", "")
        try:
            data = json.loads(content) if "html" not in ctype else None
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise _NotAPI(self._not_api_sentence(response.status_code, ctype, content[:2048]))
        return data

    def _post_events(
        self,
        client: Any,
        path: str,
        body: dict[str, Any],
        abort: threading.Event | None,
        attempt: _Attempt,
        attempts: int,
    ) -> Iterator[dict[str, Any]]:
        """A streamed call: its SSE events as dicts, each as it arrives, decoded by the SDK's decoder.

        Ends (raising) on a gap of ``attempt.timeout`` between events, on an ``{"error": ...}`` object in the
        stream, or on an answer that is not an event stream; stops quietly at ``[DONE]`` or an abort."""
        response = client.post(
            path, body=body, cast_to=_response_class(), stream=True, options=self._options(attempt, attempts)
        )
        try:
            ctype = response.headers.get("content-type", "")
            if "html" in ctype:
                raise _NotAPI(self._not_api_sentence(response.status_code, ctype, _read_head(response)))
            watch = _Watch(attempt.timeout)
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
                        raise _StreamError(str(message or "the server reported an error in the stream"))
                    watch.event()
                    if abort is not None and abort.is_set():
                        return
                    yield event
                    watch.event()  # the time the consumer took is not the server's silence
            except (_StreamBroken, _NotAPI):
                raise
            except Exception as exc:
                if _timed_out(exc):
                    raise _Idle(attempt.timeout, keepalives=bool(watch.head) and not watch.events) from exc
                raise _StreamBroken(str(exc) or type(exc).__name__) from exc
            if (
                not watch.events
                and watch.head.strip()
                and not watch.head.lstrip().startswith((b"data", b":", b"event"))
            ):
                raise _NotAPI(self._not_api_sentence(response.status_code, ctype, watch.head))
        finally:
            _close(response)

    # -- Responses API ---------------------------------------------------------------------------
    def _input_cache(self) -> InputCache:
        from . import wire

        if self._inputs is None:
            self._inputs = wire.InputCache()
        return self._inputs

    def _responses(
        self,
        client: Any,
        system: str,
        messages: list[Message],
        tools: list[dict[str, Any]],
        abort: threading.Event | None,
        attempt: _Attempt,
        attempts: int,
    ) -> Iterator[ProviderEvent]:
        from ..events import Done, Error, Usage
        from . import wire

        s = self.settings
        body: dict[str, Any] = {
            "model": s.model,
            "input": self._input_cache().input(messages, store=bool(s.store), images=self.images),
        }
        body["store"] = s.store
        if system:
            body["instructions"] = system
        if tools:
            body["tools"] = wire.responses_tools(tools)
        if not s.store:
            body["include"] = ["reasoning.encrypted_content"]
        if s.reasoning_effort:
            body["reasoning"] = {"effort": s.reasoning_effort}
        if not s.stream:
            message, usage = wire.parse_response(
                self._post_json(client, "/responses", body, attempt, attempts), s.model
            )
            yield usage
            yield Done(message, usage, api="responses")
            return
        body["stream"] = True
        parser = attempt.parser = wire.ResponsesStream(s.model)
        for event in self._post_events(client, "/responses", body, abort, attempt, attempts):
            yield from _feed(parser, event)
            attempt.shown = parser.shown
            if parser.error:
                yield Error(
                    f"The model failed mid-answer: {self._redact(parser.error)}.", kind=error_kind(parser.error)
                )
                return
        if abort is not None and abort.is_set():
            yield Done(parser.partial(), Usage(), api="responses")
            return
        if not parser.complete:
            raise _StreamBroken("the stream ended before the response was complete")
        message, usage = parser.result()
        yield usage
        yield Done(message, usage, api="responses")

    # -- Chat Completions ------------------------------------------------------------------------
    def _chat(
        self,
        client: Any,
        system: str,
        messages: list[Message],
        tools: list[dict[str, Any]],
        abort: threading.Event | None,
        attempt: _Attempt,
        attempts: int,
    ) -> Iterator[ProviderEvent]:
        from ..events import Done, Usage
        from . import wire

        s = self.settings
        body: dict[str, Any] = {"model": s.model, "messages": self._input_cache().chat(system, messages, self.images)}
        if tools:
            body["tools"] = wire.chat_tools(tools)
        if s.reasoning_effort:
            body["reasoning_effort"] = s.reasoning_effort
        if not s.stream:
            data = self._post_json(client, "/chat/completions", body, attempt, attempts)
            message, usage = wire.parse_chat_completion(data, s.model)
            yield usage
            yield Done(message, usage, api="chat")
            return
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        parser = attempt.parser = wire.ChatStream(s.model)
        for chunk in self._post_events(client, "/chat/completions", body, abort, attempt, attempts):
            yield from _feed(parser, chunk)
            attempt.shown = parser.shown
        if abort is not None and abort.is_set():
            yield Done(parser.partial(), Usage(), api="chat")
            return
        if not parser.complete:
            raise _StreamBroken("the stream ended before the answer was complete")
        message, usage = parser.result()
        yield usage
        yield Done(message, usage, api="chat")


def _feed(parser: ResponsesStream | ChatStream, event: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
    """The deltas of one event; an event the parser cannot read counts as a broken stream."""
    try:
        return parser.feed(event)
    except Exception as exc:
        raise _StreamBroken(f"an unreadable event ({type(exc).__name__}: {exc})") from exc


def _response_class() -> type:
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


def _cause(exc: Exception) -> str:
    cause = exc.__cause__ or exc.__context__
    text = str(exc) if isinstance(exc, _StreamBroken) else (str(cause) if cause else str(exc))
    return (text or type(exc).__name__).strip().rstrip(".")[:200]


def _close(response: Any) -> None:
    try:
        response.close()
    except Exception:  # closing a broken stream may itself fail; nothing to do about it
        pass
