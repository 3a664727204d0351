"""The provider layer: the only module that imports ``openai`` (lazily, on first use).

``Provider.stream(...)`` sends the transcript to the model over the Responses API or Chat
Completions and yields the project's own events (:mod:`shiro_kernel.events`): text and reasoning
deltas, usage, then ``Done`` with the assistant message — or one ``Error`` whose message is a
single clear sentence (never a traceback, never the key, never credentials from the base URL).

How a call goes out: :mod:`~shiro_kernel.provider.wire` builds the request body as exact API JSON, and
:mod:`~shiro_kernel.provider.transport` has the SDK post it (``client.post``: auth, base URL, headers, its
error classes). A streamed answer is read as raw SSE, decoded by the SDK's own SSE decoder, and fed as
plain dicts to the ``wire`` parsers, each text delta handed on as it arrives. The SDK's typed models are
not used: building their pydantic schemas cost ~1.3 s on a kernel's first call, and validating every
event ~25 ms per streamed step, only for the turn loop to turn the objects back into dicts.

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
* What a failure teaches about the server — which API it has, where its chat template takes the per-step
  state, whether the model takes images, a stream that ends empty (asked once more without streaming, so the
  server's own error is read), its context window — is learned by its :class:`~.profile.ServerProfile`,
  through one :meth:`~.profile.ServerProfile.adapt` the retry loop calls before anything else; the next
  attempt goes as the profile now says, and the cell is told once.
* A failure the history can repair is repaired in the same loop, through what the caller's history offers
  (:class:`Resend`, the turn's): a server that no longer has an item the history refers to gets the history
  inline (once a turn); a request over the model's window (now in the profile) gets the history pruned to
  what the window leaves it (once a call). Nothing of the step was shown, or nothing is repaired.
* A response without usage (most local servers' streams) is counted by the estimate (characters / 4) and
  marked as one (:attr:`~shiro_kernel.events.Usage.estimated`); tool calls a server left in the text are made
  calls (:mod:`~.textcalls`).

Every way an attempt can fail (the SDK's errors and those of :mod:`~shiro_kernel.provider.failures`) is
folded one way: :meth:`Provider._retry_delay` says whether to try again, :meth:`Provider._failed` turns it
into the call's one ``Error`` (keeping what arrived); :func:`answer` raises that ``Error`` as
:class:`~shiro_kernel.errors.ProviderError` for a call outside a turn.

Everything a request carries passes :mod:`shiro_kernel.redact` here, the one boundary where anything leaves the
kernel: the instructions (a repository's ``AGENTS.md``, the memory injected at the session's start), the state
and every message (each once, as its items are built), so a secret that reached any of them is not sent.

Nothing here imports :mod:`shiro_kernel.events` or :mod:`~shiro_kernel.provider.wire` at import time:
``%load_ext`` imports this package, and those modules are imported by the warm-up thread or the first
call instead.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..config import environment
from ..egress import Seen, encoded
from ..private import schema_only
from ..private.mask import unmasked
from ..store.paths import home
from . import state as state_place
from . import textcalls
from .failures import (
    RETRY_STATUSES,
    Idle,
    NotAPI,
    ResponseFailed,
    StreamBroken,
    StreamError,
    broken_sentence,
    error_kind,
    no_responses_sentence,
    not_api_sentence,
    overflow_sentence,
    redact,
    retry_after,
    safe_url,
    server_allows_retry,
    server_message,
    status_sentence,
    url_secrets,
)
from .profile import Answer, Failure, Profiles, ServerProfile
from .transport import Attempt, feed, post_events, post_json, split_query

if TYPE_CHECKING:
    from ..config import Shiro
    from ..events import Error, Notice, ProviderEvent, Sent, Usage
    from ..private.mask import Mask
    from ..transcript import Message
    from .wire import ImageSource, InputCache

_NO_KEY_HELP = (
    "No API key: set OPENAI_API_KEY (in a notebook: %env OPENAI_API_KEY=sk-...), or point shiro at a "
    "local OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio) with "
    '%config Shiro.base_url = "http://localhost:11434/v1" (or OPENAI_BASE_URL), where no key is needed.'
)
_DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: said once when a server's stream ended empty and the same request without streaming was answered
STREAMS_EMPTY = (
    "the server at {host} ended its stream for {model} with nothing in it, and answered the same request without "
    "streaming: shiro asks it without streaming from now on (answers then show when they are complete)"
)
#: a local server needs no key, but the client insists on one; this placeholder goes only to the server
PLACEHOLDER_KEY = "no-key-needed"


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
    #: routes the session's requests to the provider's cache for its prefix (``prompt_cache_key``); sent
    #: only to OpenAI's own API, which documents it (another server may refuse an unknown field)
    cache_key: str | None = None
    #: the user chose ``api`` (``%config Shiro.api``, ``SHIRO_API``): kept even where the server lacks it
    api_explicit: bool = False
    #: ``Shiro.vision``: "auto" (send images until the model refuses them), True, False
    vision: str | bool = "auto"
    #: ``Shiro.max_output_tokens``: the most tokens one answer may have (None: the server's own limit)
    max_output_tokens: int | None = None
    #: ``Shiro.text_calls``: read a call the model wrote as its whole answer's text (:mod:`.textcalls`): True, False,
    #: or "auto" — for a server on this machine or the user's network (a local engine), never a hosted API
    text_calls: str | bool = "auto"
    #: what of the data may leave (the administrator's ``values``): "masked" (private values as stand-ins), or
    #: "schema-only" (no tool result that can carry the data's values: :mod:`~shiro_kernel.private.schema_only`)
    values: str = "masked"

    @classmethod
    def of(
        cls, config: Shiro, model: str | None, reasoning_effort: str | None, cache_key: str | None
    ) -> ProviderSettings:
        """The settings a turn (or a plain call) is made with: ``config``'s, the model ``%shiro --model`` chose
        (None: the setting's), the agent variant's reasoning effort and the session's cache key."""
        c = config
        return cls(
            model=model or c.model,
            api=c.api,
            base_url=c.base_url,
            store=c.store,
            stream=c.stream,
            timeout_s=c.timeout_s,
            max_retries=c.max_retries,
            reasoning_effort=reasoning_effort,
            cache_key=cache_key,
            api_explicit=c.api_chosen,
            vision=c.vision,
            max_output_tokens=c.max_output_tokens,
            text_calls=c.text_calls,
        )


_clients: OrderedDict[tuple[str, str | None], Any] = OrderedDict()
_clients_lock = threading.Lock()
_MAX_CLIENTS = 4


def shared_client(api_key: str, base_url: str | None) -> Any:
    """The SDK client for this key and base URL, shared by every provider that uses them (and built ahead by
    :mod:`~shiro_kernel.warmup`): a client owns a connection pool and an SSL context, ~0.1 s to
    build. Its own retries are off and every request carries its timeout (see the module docstring), so
    nothing else about a provider's settings is in it. The few most recent are kept."""
    with _clients_lock:  # held while building: a turn that needs the client the warm-up is building waits for it
        client = _clients.get((api_key, base_url))
        if client is None:
            import openai  # deferred: ~0.5 s, and %load_ext must stay cheap

            url, query = split_query(base_url)
            client = openai.OpenAI(api_key=api_key, base_url=url, default_query=query or None, max_retries=0)
            _clients[(api_key, base_url)] = client
            while len(_clients) > _MAX_CLIENTS:
                _clients.popitem(last=False)
        _clients.move_to_end((api_key, base_url))
        return client


class Resend(Protocol):
    """What a call's retry loop may ask of the caller's history to repair a failure (the turn's: its session's
    history as the wire copy sends it)."""

    def wire_messages(self) -> list[Message]:
        """The history as it goes out now (after a repair, repaired)."""
        ...

    def estimate(self, messages: list[Message]) -> int:
        """The estimated tokens of ``messages``, as the history's meter counts them."""
        ...

    def inline_history(self) -> bool:
        """Put what refers to the server's stored items inline, for a resend; False when it cannot (done once
        this turn already, or something of the step was shown)."""
        ...

    def fits_window(self, room: int, window: int | None) -> bool:
        """Whether the history pruned to ``room`` estimated tokens (what the server's ``window`` leaves it) fits
        there (then it goes out so pruned)."""
        ...


class Provider:
    """Talks to one OpenAI-compatible server. ``client`` may be injected (e.g. for benchmarks)."""

    def __init__(self, settings: ProviderSettings, client: Any = None, profiles: Profiles | None = None) -> None:
        self.settings = settings
        self._client = client
        self._key: str | None = None
        #: where a tool result's images come from (the asset store's ``data_url``); None: send no images,
        #: their text stand-ins instead. Sent only while the profile says the model takes them.
        self.images: ImageSource | None = None
        #: under ``values: schema-only``, the tools whose results are sent (``Tool.values`` False); the others' are not
        self.passing: frozenset[str] = frozenset()
        #: the private values' mask as it is now, asked once per call (:meth:`~shiro_kernel.private.kernel.
        #: PrivateValues.mask_for`); None, or a None answer: nothing is private
        self.private: Callable[[], Mask | None] | None = None
        self._mask: Mask | None = None  # this call's
        #: for the egress ledger: the tool results and images already sent, and what the request being built masked
        self._sent = Seen()
        self._masked = self._redacted = 0
        self._inputs: InputCache | None = None  # each message's Responses items, built once
        self._system: tuple[str, str] | None = None  # the session's instructions, and as they may leave
        #: what is known about this server and model (kept across kernels in SHIRO_HOME/servers.json)
        self.profile: ServerProfile = (profiles or Profiles(home() / "servers.json")).load(
            self.base_url, settings.model
        )

    @property
    def api(self) -> str:
        """The API the next call uses: the chosen one, as the server's profile allows."""
        return self.profile.api(self.settings.api, self.settings.api_explicit)

    @property
    def state_place(self) -> str:
        return self.profile.state_place

    def _images(self) -> ImageSource | None:
        return self.images if self.profile.sends_images(self.settings.vision) else None

    # -- the client --------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self.settings.base_url or environment().base_url or _DEFAULT_BASE_URL

    @property
    def host(self) -> str:
        """The base URL as messages show it: no credentials, no query string."""
        return safe_url(self.base_url)

    @property
    def reads_text_calls(self) -> bool:
        """Whether a call the model writes in its text (fenced JSON, a lone ```` ```python ```` block) is made a call
        (``Shiro.text_calls``; 'auto': a server on this machine or network, :mod:`~.textcalls`)."""
        return self.profile.local if self.settings.text_calls == "auto" else bool(self.settings.text_calls)

    @property
    def store(self) -> bool:
        """Whether the server is asked to keep the answers (``Shiro.store``): then the history may refer to them."""
        return bool(self.settings.store)

    def threshold(self, threshold: int) -> int:
        """The history's pruning threshold: ``threshold``, or lower where the server's window (learned from an
        overflow) is smaller (:meth:`~.profile.ServerProfile.threshold`)."""
        return int(self.profile.threshold(threshold))

    @property
    def retry_budget_s(self) -> float:
        """All attempts of one call, and the waits between them, end within this many seconds."""
        return 2 * self.settings.timeout_s

    def client(self) -> Any:
        if self._client is None:
            from ..errors import MissingKey

            env = environment()
            base_url = self.settings.base_url or env.base_url
            key = env.api_key or (PLACEHOLDER_KEY if base_url else None)
            if key is None:
                raise MissingKey(_NO_KEY_HELP)
            self._key = env.api_key
            self._client = shared_client(key, base_url)
        return self._client

    def _redact(self, text: str) -> str:
        return redact(text, self._key, url_secrets(self.base_url))

    # -- one model call --------------------------------------------------------------------------
    def stream(
        self,
        system: str,
        messages: list[Message],
        tools: list[dict[str, Any]],
        abort: threading.Event | None = None,
        state: str = "",
        resend: Resend | None = None,
    ) -> Iterator[ProviderEvent | Notice]:
        """Run one model call. Yields deltas (and a ``Notice`` when the API had to change), then exactly one
        ``Done`` or ``Error``. ``system`` is the instructions, the same for every call of a session (a
        provider's prefix cache serves it and the history after it); ``state`` is what changes from step to
        step (the task list …), sent as one system message after the conversation, or where the server's
        chat template takes it (:mod:`~shiro_kernel.provider.state`). ``resend``: the caller's history, which a
        failure it can repair is repaired through (None: such a failure is the call's error)."""
        from ..events import Notice

        try:
            client = self.client()
        except Exception as exc:  # no key, or a base URL the SDK cannot use
            yield self._unusable(exc)
            return

        from ..redact import notices

        for said in notices():  # a secret-named variable holding a plain word is sent as it is: said once
            yield Notice(said)
        self._mask = self.private() if self.private is not None else None
        if self._mask is not None and len(self._mask):
            yield from unmasked(self._attempts(client, system, messages, tools, abort, state, resend), self._mask)
        else:
            yield from self._attempts(client, system, messages, tools, abort, state, resend)

    def _attempts(
        self,
        client: Any,
        system: str,
        messages: list[Message],
        tools: list[dict[str, Any]],
        abort: threading.Event | None,
        state: str,
        resend: Resend | None,
    ) -> Iterator[ProviderEvent | Notice]:
        """:meth:`stream`'s attempts: the one retry loop."""
        import openai

        from ..events import Notice

        s = self.settings
        started = time.monotonic()
        deadline = started + self.retry_budget_s
        number = 0
        plain = False  # the next attempt asks without streaming: a stream ended empty (once per call)
        refitted = False  # the history was pruned to the server's window (once per call)
        while True:
            number += 1
            left = deadline - time.monotonic()
            attempt = Attempt(number, timeout=s.timeout_s if number == 1 else max(min(s.timeout_s, left), 0.01))
            attempt.streamed = s.stream and not plain and not self.profile.streams_empty
            attempt.plain_after_empty = plain
            try:
                if self.api == "chat":
                    yield from self._chat(client, system, messages, tools, abort, attempt, state)
                else:
                    yield from self._responses(client, system, messages, tools, abort, attempt, state)
                return
            except (openai.OpenAIError, NotAPI, StreamBroken, ResponseFailed) as exc:
                failure: Exception = exc
            adapted = None
            if not attempt.shown:
                adapted = self.profile.adapt(
                    self._failure(failure, attempt, bool(state)), explicit_api=s.api_explicit, vision=s.vision
                )
            if adapted is not None and (adapted.stream or not plain):
                if adapted.notice:
                    yield Notice(adapted.notice, kind=adapted.kind)
                plain = plain or not adapted.stream
                continue
            stopped = abort is not None and abort.is_set()
            repaired = None
            if resend is not None and not attempt.shown and not stopped:
                repaired = self._repaired(failure, resend, messages, refit=not refitted)
            refitted = refitted or self._kind(failure) == "context_overflow"
            if repaired is not None:
                messages = repaired
                plain = False  # a stream that ended empty for the failure repaired here is asked again as one
                continue
            delay = self._retry_delay(failure, attempt, deadline)
            if delay is not None:
                if self._wait(delay, abort):
                    yield from self._stopped()
                    return
                continue
            yield from self._failed(failure, attempt, time.monotonic() - started)
            return

    def _failure(self, exc: Exception, attempt: Attempt, state: bool) -> Failure:
        """What a failed attempt tells the server's profile."""
        import openai

        sent = {"api": attempt.api, "streamed": attempt.streamed, "state": state, "images": attempt.images}
        if isinstance(exc, openai.APIStatusError):
            body = getattr(exc, "body", None)
            detail = json.dumps(body, default=str)[:4000] if isinstance(body, dict) else ""
            message = server_message(exc)
            return Failure(exc.status_code, message, body=detail, **sent)  # type: ignore[arg-type]
        if isinstance(exc, NotAPI):
            return Failure(None, exc.head.decode("utf-8", "replace"), not_api=True, **sent)  # type: ignore[arg-type]
        empty = isinstance(exc, StreamBroken) and not isinstance(exc, (StreamError, Idle)) and attempt.events == 0
        message = exc.message if isinstance(exc, (StreamError, ResponseFailed)) else str(exc)
        return Failure(None, message, empty_stream=empty, **sent)  # type: ignore[arg-type]

    def _repaired(self, exc: Exception, resend: Resend, sent: list[Message], refit: bool) -> list[Message] | None:
        """The history to send again after ``exc``, repaired through ``resend``; None when ``exc`` is no failure
        the history can repair, or it cannot be (inline once a turn already; pruned once this call already, or
        not even the rest of the request fits the window)."""
        kind = self._kind(exc)
        if kind == "item_not_found":
            # The server lost an item the history refers to: sent as is, it fails the same way every time.
            return resend.wire_messages() if resend.inline_history() else None
        if kind == "context_overflow" and refit:
            # The request is larger than the model's window (now in the profile): pruned to fit it, where it can.
            room = self.profile.room(resend.estimate(sent))
            if resend.fits_window(room, self.profile.context_window):
                self.profile.history_room = room  # this and later requests are pruned so
                return resend.wire_messages()
        return None

    # -- what a failure means ----------------------------------------------------------------------------
    @staticmethod
    def _kind(exc: Exception) -> str | None:
        """The repairable failure (:func:`~shiro_kernel.provider.failures.error_kind`) ``exc`` names."""
        import openai

        if isinstance(exc, openai.APIStatusError):
            return error_kind(server_message(exc)) or error_kind(str(getattr(exc, "message", "")))
        if isinstance(exc, (StreamError, ResponseFailed)):
            return error_kind(exc.message)
        return None

    def _retry_delay(self, exc: Exception, attempt: Attempt, deadline: float) -> float | None:
        """How long to wait before trying again after ``exc``, or None for no retry. Tried again: a 408, 409,
        429 or 5xx the server does not forbid retrying (``x-should-retry``), a failed connection, a timeout
        or a broken stream before anything was shown; never a failure the turn can repair (:meth:`_kind`),
        an answer that is not the API's, or a response the stream reported failed."""
        import openai

        headers = None
        if isinstance(exc, openai.APIStatusError):
            headers = getattr(getattr(exc, "response", None), "headers", None)
            if not (_retryable(exc.status_code) and self._kind(exc) is None and server_allows_retry(headers)):
                return None
        elif not isinstance(exc, (openai.APIConnectionError, StreamBroken)) or attempt.shown or self._kind(exc):
            return None  # APITimeoutError is a connection error
        return self._backoff(attempt.number, deadline, headers)

    def _backoff(self, attempts: int, deadline: float, headers: Any) -> float | None:
        """How long to wait before the next attempt, or None when there is to be none (no retries left, or
        the budget would not leave the next attempt a quarter of ``timeout_s``)."""
        if attempts > self.settings.max_retries:
            return None
        delay = retry_after(headers)
        if delay is None:
            delay = min(0.5 * 2 ** (attempts - 1), 8.0) * (1 - 0.25 * random.random())
        if deadline - time.monotonic() - delay < self.settings.timeout_s / 4:
            return None
        return delay

    def _failed(self, exc: Exception, attempt: Attempt, elapsed: float) -> Iterator[ProviderEvent]:
        """The one way a failed call ends: what arrived kept (a stream that broke after showing something),
        then the call's ``Error``, one sentence."""
        import openai

        from ..events import Done, Error, Usage

        kind = self._kind(exc)
        failure = self._failure(exc, attempt, False)
        if attempt.api == "responses" and self.profile.route_missing(failure):  # the user chose this API
            yield Error(self._redact(no_responses_sentence(self.host, failure.status, failure.message)), failure.status)
        elif isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            message = server_message(exc)
            if kind == "context_overflow":
                sentence = overflow_sentence(self.host, self.profile.context_window, message, redact=self._redact)
            else:
                sentence = status_sentence(
                    status, message, attempt.number - 1, host=self.host, model=self.settings.model, redact=self._redact
                )
            yield Error(sentence, status=status, retryable=_retryable(status) and kind is None, kind=kind)
        elif isinstance(exc, NotAPI):
            yield Error(self._redact(not_api_sentence(exc, host=self.host)))
        elif isinstance(exc, ResponseFailed):
            if attempt.parser is not None and attempt.shown:  # what arrived before the failure is kept
                yield Done(attempt.parser.partial(), Usage(), api=self.api)
            yield Error(f"The model failed mid-answer: {self._redact(exc.message)}.", kind=kind)
        elif isinstance(exc, (openai.APIConnectionError, StreamBroken)):
            if attempt.parser is not None and attempt.shown:
                yield Done(attempt.parser.partial(), Usage(), api=self.api)  # keep what arrived
            n = attempt.number
            tried = f"tried {n} {'time' if n == 1 else 'times'} in {elapsed:.1f} s"
            sentence = broken_sentence(
                exc, host=self.host, timeout=attempt.timeout, shown=attempt.shown, tried=tried, redact=self._redact
            )
            yield Error(sentence, retryable=kind is None, kind=kind)
        else:
            yield Error(self._redact(f"The model call failed: {exc}."))

    def _unusable(self, exc: Exception) -> Error:
        """The ``Error`` of a call that cannot start: no key, or a base URL the SDK cannot use."""
        from ..errors import MissingKey
        from ..events import Error

        if isinstance(exc, MissingKey):
            return Error(str(exc))
        return Error(
            self._redact(
                f"Cannot use the base URL {self.host} ({exc}): check Shiro.base_url / OPENAI_BASE_URL "
                "(e.g. http://localhost:11434/v1)."
            )
        )

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

    def _cache_key(self, body: dict[str, Any]) -> None:
        """``prompt_cache_key``, where the API documents it: OpenAI's own (both APIs)."""
        key = self.settings.cache_key
        if key and self.base_url.rstrip("/") == _DEFAULT_BASE_URL.rstrip("/"):
            body["prompt_cache_key"] = key

    # -- Responses API ---------------------------------------------------------------------------
    def _input_cache(self) -> InputCache:
        from . import wire

        if self._inputs is None:
            withhold = None
            if self.settings.values == schema_only.SCHEMA_ONLY:
                withhold = lambda m: schema_only.withheld(m, self.passing)  # noqa: E731 - self.passing read as it changes
            self._inputs = wire.InputCache(clean=self._clean, withhold=withhold)
        return self._inputs

    def _clean(self, text: str) -> str:
        """``text`` as it may leave the kernel: private values as their stand-ins, secrets redacted."""
        from ..redact import redact

        if self._mask is not None:
            text, masked = self._mask.mask(text)
            self._masked += masked
        text = redact(text)
        self._redacted += text.count("[redacted")  # here, or before (a tool's result is redacted as it is made)
        return text

    def _ledger(self, body: dict[str, Any], messages: list[Message], api: str) -> Sent:
        """The egress ledger's entry for the request ``body`` (:func:`shiro_kernel.egress.request_of`; its size as
        the SDK will encode it), with what building it masked and redacted (counted from here for the next one)."""
        from ..egress import request_of
        from ..events import Sent

        masked, redacted, self._masked, self._redacted = self._masked, self._redacted, 0, 0
        sent_as = None
        if self.settings.values == schema_only.SCHEMA_ONLY:
            sent_as = lambda part: schema_only.withheld_part(part, self.passing)  # noqa: E731
        request = request_of(
            len(encoded(body)), messages, self.base_url, api, self._sent, self._images(), masked=masked, sent_as=sent_as
        )
        request.redacted = redacted
        return Sent(request)

    def _cleaned(self, system: str, state: str) -> tuple[str, str]:
        """The instructions and the state as they may leave the kernel (:meth:`_clean`; the instructions, the
        same for a whole session, once)."""
        if self._system is None or self._system[0] is not system:
            self._system = (system, self._clean(system))
        return self._system[1], self._clean(state) if state else state

    def _responses(
        self,
        client: Any,
        system: str,
        messages: list[Message],
        tools: list[dict[str, Any]],
        abort: threading.Event | None,
        attempt: Attempt,
        state: str = "",
    ) -> Iterator[ProviderEvent | Notice]:
        from ..events import Done, Usage
        from . import wire

        s = self.settings
        images = self._images()
        system, state = self._cleaned(system, state)
        # items by reference only to a server that has shown it keeps them (its answers say "store": true)
        refs = bool(s.store) and self.profile.keeps_state
        items = self._input_cache().input(messages, store=refs, images=images)
        items, system = state_place.responses_parts(items, system, state, self.state_place)
        body: dict[str, Any] = {"model": s.model, "input": items}
        body["store"] = s.store
        self._cache_key(body)
        if system:
            body["instructions"] = system
        if tools:
            body["tools"] = wire.responses_tools(tools)
        if not s.store:
            body["include"] = ["reasoning.encrypted_content"]
        if s.reasoning_effort:
            body["reasoning"] = {"effort": s.reasoning_effort}
        if s.max_output_tokens is not None:
            body["max_output_tokens"] = s.max_output_tokens
        attempt.api, attempt.body, attempt.images = "responses", body, images is not None
        if not attempt.streamed:
            yield self._ledger(body, messages, "responses")
            data = post_json(client, "/responses", body, attempt)
            attempt.stored = _stored(data)
            message, usage = wire.parse_response(data, s.model)
            yield from self._answered(message, usage, attempt, tools)
            return
        body["stream"] = True
        yield self._ledger(body, messages, "responses")
        parser = attempt.parser = wire.ResponsesStream(s.model)
        for event in post_events(client, "/responses", body, abort, attempt):
            yield from feed(parser, event)
            attempt.shown = parser.shown
            if parser.error:
                raise ResponseFailed(parser.error)
        if abort is not None and abort.is_set():
            yield Done(parser.partial(), Usage(), api="responses")
            return
        if not parser.complete:
            raise StreamBroken("the stream ended before the response was complete")
        attempt.stored = _stored(parser.final)
        message, usage = parser.result()
        yield from self._answered(message, usage, attempt, tools)

    # -- Chat Completions ------------------------------------------------------------------------
    def _chat(
        self,
        client: Any,
        system: str,
        messages: list[Message],
        tools: list[dict[str, Any]],
        abort: threading.Event | None,
        attempt: Attempt,
        state: str = "",
    ) -> Iterator[ProviderEvent | Notice]:
        from ..events import Done, Usage
        from . import wire

        s = self.settings
        images = self._images()
        system, state = self._cleaned(system, state)
        entries = self._input_cache().chat(system, messages, images)
        body: dict[str, Any] = {
            "model": s.model,
            "messages": state_place.chat_messages(entries, state, self.state_place),
        }
        self._cache_key(body)
        if tools:
            body["tools"] = wire.chat_tools(tools)
        if s.reasoning_effort:
            body["reasoning_effort"] = s.reasoning_effort
        if s.max_output_tokens is not None:
            body[self.profile.max_tokens_field] = s.max_output_tokens
        attempt.api, attempt.body, attempt.images = "chat", body, images is not None
        if not attempt.streamed:
            yield self._ledger(body, messages, "chat")
            data = post_json(client, "/chat/completions", body, attempt)
            message, usage = wire.parse_chat_completion(data, s.model)
            yield from self._answered(message, usage, attempt, tools)
            return
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        yield self._ledger(body, messages, "chat")
        parser = attempt.parser = wire.ChatStream(s.model)
        for chunk in post_events(client, "/chat/completions", body, abort, attempt):
            yield from feed(parser, chunk)
            attempt.shown = parser.shown
        if abort is not None and abort.is_set():
            yield Done(parser.partial(), Usage(), api="chat")
            return
        if not parser.complete:
            raise StreamBroken("the stream ended before the answer was complete")
        message, usage = parser.result()
        yield from self._answered(message, usage, attempt, tools)

    # -- an answer, as the turn gets it --------------------------------------------------------------
    def _answered(
        self, message: Message, usage: Usage, attempt: Attempt, tools: list[dict[str, Any]]
    ) -> Iterator[ProviderEvent | Notice]:
        """The ``Usage`` and ``Done`` of a complete answer: tool calls the server left in the text made calls
        (said once per server), and a usage the server did not send estimated. An answer that was not streamed
        is shown whole first (its reasoning and text as one delta each), as a stream would have shown it."""
        from ..events import Done, Notice, ReasoningDelta, TextDelta
        from ..transcript import ReasoningPart, TextPart

        if not attempt.streamed:
            for part in message.parts:
                if isinstance(part, ReasoningPart) and part.text:
                    yield ReasoningDelta(part.text)
                elif isinstance(part, TextPart) and part.text:
                    yield TextDelta(part.text)
        reads = tools and self.reads_text_calls
        called = textcalls.extract(message, (t["name"] for t in tools), code_blocks=True) if reads else None
        if called is not None:
            message = called
        sent_usage = bool(usage.input_tokens or usage.output_tokens)
        said = self.profile.observe(
            Answer(
                attempt.api,
                images=attempt.images,
                store=attempt.stored,
                text_calls=called is not None,
                plain_after_empty=attempt.plain_after_empty,
                usage=sent_usage,
            )
        )
        if "streams_empty" in said:  # its stream ended empty, its plain answer came
            yield Notice(STREAMS_EMPTY.format(host=self.host, model=self.settings.model), kind="warning")
        if "text_calls" in said:
            yield Notice(textcalls.notice(self.settings.model, self.host), kind="warning")
        usage = self._counted(usage, attempt.body, message)
        yield usage
        yield Done(message, usage, api=attempt.api)

    def _counted(self, usage: Usage, body: dict[str, Any], message: Message) -> Usage:
        """The server's usage; where it sent none (most local servers' streams), the estimate (characters /
        4, as the context meter counts), marked as one."""
        from ..events import Usage
        from ..transcript import part_to_json
        from .pricing import cost_usd

        if usage.input_tokens or usage.output_tokens:
            return usage
        i, o = _estimate(body), _estimate([part_to_json(p) for p in message.parts])
        return Usage(i, o, cost_usd(self.settings.model, i, o, 0), 0, estimated=True)


def _stored(response: dict[str, Any] | None) -> bool:
    """A Responses answer that says ``"store": true``: the server keeps its items (later requests may refer to
    them by id, :meth:`~.profile.ServerProfile.observe`)."""
    return isinstance(response, dict) and response.get("store") is True


def _estimate(value: Any) -> int:
    """The estimated tokens of what went (or came) over the wire: its JSON's characters / 4."""
    return round(len(json.dumps(value, default=str)) / 4) if value else 0


def _retryable(status: int) -> bool:
    """A status worth another attempt (as the SDK retries them)."""
    return status in RETRY_STATUSES or status >= 500


def answer(events: Iterable[ProviderEvent | Notice], observe: Callable[[Any], object] | None = None) -> Message:
    """The answer of one model call outside a turn (``/compact``): its ``Done`` message (an empty one when
    it gave none), or its ``Error`` raised as :class:`~shiro_kernel.errors.ProviderError`. ``observe`` sees every
    event as it comes (the egress ledger keeps the call's requests, :class:`~shiro_kernel.events.Sent`)."""
    from ..errors import ProviderError
    from ..events import Done, Error
    from ..transcript import Message

    message = Message("assistant", [])
    error: Error | None = None
    for event in events:
        if observe is not None:
            observe(event)
        if isinstance(event, Done):
            message = event.message
        elif isinstance(event, Error):
            error = event
    if error is not None:
        raise ProviderError(error.message, error.status, error.kind)
    return message


__all__ = ["PLACEHOLDER_KEY", "Provider", "ProviderSettings", "answer", "shared_client"]
