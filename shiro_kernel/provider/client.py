"""The provider layer: the only module that imports ``openai`` (lazily, on first use).

``Provider.stream(...)`` sends the transcript to the model over the Responses API or Chat
Completions and yields the project's own events (:mod:`shiro_kernel.events`): text and reasoning
deltas, usage, then ``Done`` with the assistant message — or one ``Error`` whose message is a
single clear sentence (never a traceback, never the key).

* 429, 5xx, timeouts and dropped connections are retried with backoff by the client
  (``max_retries``); a stream that breaks before anything was shown is retried here too.
* Chat Completions refused for a model ("only supported in v1/responses") falls back to the
  Responses API for the rest of the provider's life, mid-turn, with a notice.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ..config import environment
from ..errors import MissingKey
from ..events import Done, Error, Notice, ProviderEvent, Usage
from ..transcript import Message
from . import wire

_NO_KEY_HELP = (
    "No API key: set OPENAI_API_KEY (in a notebook: %env OPENAI_API_KEY=sk-...), or point shiro at a "
    "local OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio) with "
    "%config Shiro.base_url = \"http://localhost:11434/v1\" (or OPENAI_BASE_URL), where no key is needed."
)
# A local server needs no key, but the client insists on one; this placeholder goes only to the server.
_PLACEHOLDER_KEY = "no-key-needed"
_RESPONSES_ONLY = re.compile(r"only supported in v1/responses|not supported in (the )?v1/chat/completions"
                             r"|use the responses api", re.I)
#: the provider no longer holds an item the history refers to by id (a 404 with ``store`` on)
ITEM_NOT_FOUND = re.compile(r"item with id '[^']*' not found", re.I)


@dataclass
class ProviderSettings:
    model: str
    api: str = "responses"  # responses | chat
    base_url: str | None = None
    store: bool = True
    stream: bool = True
    timeout_s: float = 120.0
    max_retries: int = 3
    reasoning_effort: str | None = None  # only sent when a variant asks for it (reasoning models only)


def redact(text: str, key: str | None = None) -> str:
    """Remove the API key (and anything shaped like one) from a message."""
    if key and len(key) >= 4:
        text = text.replace(key, "[redacted]")
    return re.sub(r"\b(sk|rk)-[A-Za-z0-9_*\-]{6,}", r"\1-…", text)


def _server_message(exc: Any) -> str:
    """The server's own words: ``{"error": {"message"}}``, ``{"message"}``, or ``{"error": "<text>"}`` and a
    plain-text body (LM Studio, Ollama), where the SDK's own message is only ``Error code: 400``."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str) and err.strip():
            return err
    if isinstance(body, str) and body.strip():
        return body
    return str(getattr(exc, "message", "") or exc)


def error_kind(message: str) -> str | None:
    """The repairable failure a server's message names (see :class:`~shiro_kernel.events.Error`)."""
    if ITEM_NOT_FOUND.search(message):
        return "item_not_found"
    return None


class Provider:
    """Talks to one OpenAI-compatible server. ``client`` may be injected (e.g. for benchmarks)."""

    def __init__(self, settings: ProviderSettings, client: Any = None) -> None:
        self.settings = settings
        self.api = settings.api
        self._client = client
        self._key: str | None = None

    # -- the client --------------------------------------------------------------------------
    @property
    def host(self) -> str:
        url = self.settings.base_url or environment().base_url or "https://api.openai.com/v1"
        parsed = urlparse(url)
        return f"{parsed.scheme}://{parsed.netloc}{parsed.path}".rstrip("/") if parsed.netloc else url

    def client(self) -> Any:
        if self._client is None:
            env = environment()
            base_url = self.settings.base_url or env.base_url
            key = env.api_key or (_PLACEHOLDER_KEY if base_url else None)
            if key is None:
                raise MissingKey(_NO_KEY_HELP)
            import openai  # deferred: ~0.5 s, and %load_ext must stay cheap

            self._key = env.api_key
            self._client = openai.OpenAI(api_key=key, base_url=base_url, timeout=self.settings.timeout_s,
                                         max_retries=self.settings.max_retries)
        return self._client

    # -- one model call --------------------------------------------------------------------------
    def stream(self, system: str, messages: list[Message], tools: list[dict[str, Any]],
               abort: threading.Event | None = None) -> Iterator[ProviderEvent]:
        """Run one model call. Yields deltas, then exactly one ``Done`` or ``Error``."""
        try:
            client = self.client()
        except MissingKey as exc:
            yield Error(str(exc))
            return
        import openai

        attempts = 0
        while True:
            attempts += 1
            state: dict[str, Any] = {"shown": False}
            try:
                if self.api == "chat":
                    yield from self._chat(client, system, messages, tools, abort, state)
                else:
                    yield from self._responses(client, system, messages, tools, abort, state)
                return
            except openai.APIStatusError as exc:
                msg = _server_message(exc)
                if self.api == "chat" and exc.status_code in (400, 404) and _RESPONSES_ONLY.search(msg):
                    self.api = "responses"
                    yield Notice(f"{self.settings.model} is not served on /v1/chat/completions here; "
                                 "switched to the Responses API for the rest of this session.", kind="warning")
                    continue
                yield Error(self._status_sentence(exc.status_code, msg), status=exc.status_code,
                            retryable=exc.status_code == 429 or exc.status_code >= 500, kind=error_kind(msg))
                return
            except openai.APITimeoutError:
                yield Error(f"The model server at {self.host} did not answer within {self.settings.timeout_s:g} s "
                            f"(tried {self.settings.max_retries + 1} times); check the server, or raise "
                            "%config Shiro.timeout_s.", retryable=True)
                return
            except (openai.APIConnectionError, _StreamBroken) as exc:
                if not state["shown"] and attempts <= self.settings.max_retries:
                    time.sleep(min(0.5 * 2 ** (attempts - 1), 4.0))
                    continue
                if state.get("parser") is not None and state["shown"]:
                    yield Done(state["parser"].partial(), Usage(), api=self.api)  # keep what arrived
                yield Error(self._connection_sentence(exc, state["shown"]), retryable=True)
                return
            except openai.OpenAIError as exc:
                yield Error(redact(f"The model call failed: {exc}.", self._key))
                return

    def _status_sentence(self, status: int, msg: str) -> str:
        msg = redact(msg.strip().rstrip("."), self._key)
        if status == 401:
            return f"The server at {self.host} refused the API key (401): {msg}. Check OPENAI_API_KEY."
        if status == 429:
            return (f"Rate limited by {self.host} (429) after {self.settings.max_retries} retries: {msg}. "
                    "Wait a moment and run the prompt again.")
        if status >= 500:
            return f"The model server at {self.host} failed ({status}) after {self.settings.max_retries} retries: {msg}."
        if status == 404 and "model" in msg.lower() and "item" not in msg.lower():
            return f"The server at {self.host} does not know the model {self.settings.model!r} (404): {msg}. " \
                   "Set %config Shiro.model = \"...\" (or SHIRO_MODEL)."
        return f"The model server rejected the request ({status}): {msg}."

    def _connection_sentence(self, exc: Exception, shown: bool) -> str:
        if shown:
            return (f"The connection to {self.host} broke in the middle of the answer ({_cause(exc)}); "
                    "what arrived is kept, run the prompt again to continue.")
        return (f"Could not reach the model server at {self.host} ({_cause(exc)}): check that it is running and "
                "that Shiro.base_url / OPENAI_BASE_URL point at it.")

    # -- Responses API ---------------------------------------------------------------------------
    def _responses(self, client: Any, system: str, messages: list[Message], tools: list[dict[str, Any]],
                   abort: threading.Event | None, state: dict[str, Any]) -> Iterator[ProviderEvent]:
        s = self.settings
        body: dict[str, Any] = {"input": wire.responses_input(messages, store=s.store), "store": s.store}
        if system:
            body["instructions"] = system
        if tools:
            body["tools"] = wire.responses_tools(tools)
        if not s.store:
            body["include"] = ["reasoning.encrypted_content"]
        if s.reasoning_effort:
            body["reasoning"] = {"effort": s.reasoning_effort}
        kwargs = _request(s.model, body)
        if not s.stream:
            resp = client.responses.create(**kwargs)
            message, usage = wire.parse_response(_as_dict(resp), s.model)
            yield usage
            yield Done(message, usage, api="responses")
            return
        parser = state["parser"] = wire.ResponsesStream(s.model)
        stream = client.responses.create(stream=True, **kwargs)
        try:
            for event in stream:
                if abort is not None and abort.is_set():
                    break
                for delta in parser.feed(_as_dict(event)):
                    yield delta
                state["shown"] = parser.shown
                if parser.error:
                    yield Error(f"The model failed mid-answer: {redact(parser.error, self._key)}.")
                    return
        except Exception as exc:
            _reraise_as_stream_broken(exc)
        finally:
            _close(stream)
        if abort is not None and abort.is_set():
            yield Done(parser.partial(), Usage(), api="responses")
            return
        if not parser.complete:
            raise _StreamBroken("the stream ended before the response was complete")
        message, usage = parser.result()
        yield usage
        yield Done(message, usage, api="responses")

    # -- Chat Completions ------------------------------------------------------------------------
    def _chat(self, client: Any, system: str, messages: list[Message], tools: list[dict[str, Any]],
              abort: threading.Event | None, state: dict[str, Any]) -> Iterator[ProviderEvent]:
        s = self.settings
        body: dict[str, Any] = {"messages": wire.chat_messages(system, messages)}
        if tools:
            body["tools"] = wire.chat_tools(tools)
        if s.reasoning_effort:
            body["reasoning_effort"] = s.reasoning_effort
        kwargs = _request(s.model, body, messages=[])  # `messages` is required by the SDK; the body's wins
        if not s.stream:
            resp = client.chat.completions.create(**kwargs)
            message, usage = wire.parse_chat_completion(_as_dict(resp), s.model)
            yield usage
            yield Done(message, usage, api="chat")
            return
        parser = state["parser"] = wire.ChatStream(s.model)
        kwargs["extra_body"]["stream_options"] = {"include_usage": True}
        stream = client.chat.completions.create(stream=True, **kwargs)
        try:
            for chunk in stream:
                if abort is not None and abort.is_set():
                    break
                for delta in parser.feed(_as_dict(chunk)):
                    yield delta
                state["shown"] = parser.shown
        except Exception as exc:
            _reraise_as_stream_broken(exc)
        finally:
            _close(stream)
        if abort is not None and abort.is_set():
            yield Done(parser.partial(), Usage(), api="chat")
            return
        if not parser.complete:
            raise _StreamBroken("the stream ended before the answer was complete")
        message, usage = parser.result()
        yield usage
        yield Done(message, usage, api="chat")


def _request(model: str, body: dict[str, Any], **required: Any) -> dict[str, Any]:
    """Keyword arguments for an SDK ``create`` call with the body passed as ``extra_body``.

    The SDK walks typed parameters (``input``, ``messages``, ``tools``) recursively against its
    TypedDict unions before sending: ~2 ms per history item, 4.5 s per request at 2,000 messages.
    Our wire module already builds exact API JSON, so it goes out as-is: ~0.1 s at 2,000.
    """
    return {"model": model, "extra_body": body, **required}


class _StreamBroken(Exception):
    """The stream stopped or produced something unreadable before the response was complete."""


def _reraise_as_stream_broken(exc: Exception) -> None:
    import openai

    if isinstance(exc, openai.APIStatusError):  # an `error` event in the stream: keep its status
        raise exc
    raise _StreamBroken(str(exc) or type(exc).__name__) from exc


def _cause(exc: Exception) -> str:
    cause = exc.__cause__ or exc.__context__
    text = str(exc) if isinstance(exc, _StreamBroken) else (str(cause) if cause else str(exc))
    return (text or type(exc).__name__).strip().rstrip(".")[:200]


def _as_dict(obj: Any) -> dict[str, Any]:
    """SDK objects (pydantic models) as plain dicts, so the parsers in :mod:`wire` see wire JSON."""
    if isinstance(obj, dict):
        return obj
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    return dict(obj)


def _close(stream: Any) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        try:
            close()
        except Exception:  # closing a broken stream may itself fail; nothing to do about it
            pass
