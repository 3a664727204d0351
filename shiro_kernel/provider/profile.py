"""What shiro learns about one server and model: one :class:`ServerProfile` per (base URL, model).

OpenAI's API, a gateway and a dozen local servers all answer "the OpenAI API", each a little differently.
shiro does not keep a table of them: it learns each one from how it answers, in one place, and the provider's
one retry loop asks this place what to change after a failed attempt (:meth:`ServerProfile.adapt`):

* **which API** — a server with no ``/v1/responses`` (404/405, or a "no such route" page; llama.cpp, most
  gateways) is switched to Chat Completions, unless the user chose the API (``Shiro.api`` / ``SHIRO_API``):
  then the error says what to set. A model refused on Chat Completions ("only supported in v1/responses") goes
  to the Responses API whatever was chosen (the seed's fallback).
* **where the per-step state goes** — after the conversation as a system message, or where the model's chat
  template takes it (:mod:`~shiro_kernel.provider.state`).
* **whether the model takes images** (``Shiro.vision = "auto"``): once refused, figures go as text.
* **whether it reports usage** — a response without usage is counted by estimate, and marked as one.
* **its context window** — read from an overflow error (llama.cpp, vLLM, LM Studio, OpenAI texts); the turn
  prunes to fit it (:mod:`~shiro_kernel.turn`).
* **streams that end empty** — llama-cpp-python's ``chatml-function-calling`` format refuses to stream with
  tools (its stream ends with no event); asked once without streaming, such a server is asked so from then on.
* **tool calls written as text** — a local server whose parser missed a ``<tool_call>`` leaves it in the text;
  shiro runs it as a call (:mod:`~shiro_kernel.provider.textcalls`), and says so once per server.
* **whether it keeps state** — OpenAI's own API (and Azure OpenAI) keep Responses items between calls, and a
  server shows it does when its answer says ``"store": true`` (as OpenAI's do); until then a server gets the
  history inline, never a reference to an item it may not have kept (Ollama's Responses API keeps nothing).

What holds across kernels (the API, the state's place, images, tool calls as text, kept state) is kept in
``SHIRO_HOME/servers.json`` under the base URL as it may be shown (no credentials, no query); what may change
when the server restarts (its context window, usage) lives only as long as the provider. A store that cannot
be written loses nothing but the memory across kernels.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import CorruptFile, StoreError
from ..store import files
from . import state as placing
from .failures import RESPONSES_ONLY, error_kind, safe_url

#: the text of a server that has no such route (FastAPI's ``{"detail": "Not Found"}``, Go's, Express's, OpenAI's
#: own "Invalid URL", LM Studio's "Unexpected endpoint", a gateway's "no Route matched")
ROUTE_MISSING = (
    r"(?i)^\s*(404:?\s*)?(page )?not found\.?\s*$|^error code: 40[45]$|method not allowed|cannot post /|"
    r"invalid url \(post|unexpected endpoint|no route matched|unknown (endpoint|route|url)|no such (route|endpoint)"
)
_WINDOW = (
    r"(?i)context window of (\d+)|maximum context length is (\d+)|exceeds limit of (\d+)|"
    r"context length of only (\d+)|'n_ctx': (\d+)|\"n_ctx\": ?(\d+)"
)
_REQUESTED = r"(?i)requested tokens \((\d+)\)|you requested (?:about )?(\d+) tokens|input prompt \((\d+) tokens\)|\"n_prompt_tokens\": ?(\d+)"
#: OpenAI's refusal of ``max_tokens`` for its reasoning models (vercel-ai's recorded 400)
_USE_COMPLETION_TOKENS = r"(?i)unsupported parameter: 'max_tokens'.*use 'max_completion_tokens'"
#: the share of a learned context window the request may take (the rest is the answer's)
ANSWER_ROOM = 0.75
#: the hosts that keep Responses items between calls (``store``): OpenAI's own, and Azure OpenAI
_STATEFUL_HOSTS = (r"(^|\.)api\.openai\.com$", r"\.openai\.azure\.com$")


@dataclass(frozen=True)
class Failure:
    """What one failed attempt tells: the server's status and words, and what the request carried."""

    status: int | None  # the HTTP status; None for a connection or a stream that broke
    message: str  # the server's own words (or what the stream or connection said)
    api: str  # the API the attempt used
    streamed: bool = True
    empty_stream: bool = False  # a stream that ended before any event arrived
    state: bool = False  # the request carried a per-step state note
    images: bool = False  # it carried images
    not_api: bool = False  # the answer was not the API's (a page, an unknown body)
    body: str = ""  # the error's whole body as text, where it holds more than the message (llama.cpp's n_ctx)


@dataclass(frozen=True)
class Adapted:
    """What to change for the next attempt: said in the cell (``notice``), streamed or not."""

    notice: str | None = None
    kind: str = "warning"
    stream: bool = True  # False: the next attempt asks without streaming (to read the server's own error)


def is_local(base_url: str) -> bool:
    """Whether ``base_url``'s host is on this machine or the user's network (see :attr:`ServerProfile.local`)."""
    try:
        host = (urlsplit(base_url if "//" in base_url else f"//{base_url}").hostname or "").rstrip(".").lower()
    except ValueError:
        return False
    if not host:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local")) or ("." not in host and ":" not in host):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


@dataclass
class ServerProfile:
    """What is known about one server (``base_url``, as shown) and one of its models."""

    base_url: str
    model: str
    #: the server answered /v1/responses with "no such route" (server-wide)
    responses_missing: bool = False
    #: the model is refused on Chat Completions ("only supported in v1/responses")
    responses_only: bool = False
    state_place: str = placing.PLACES[0]
    #: False once the model refused images; None: not known
    images: bool | None = None
    #: the server wrote tool calls as text at least once (said once per server)
    text_tool_calls: bool = False
    #: False once a response came without usage; None: not known
    usage: bool | None = None
    #: its streams ended empty where a plain answer came (llama-cpp-python's chatml-function-calling refuses to
    #: stream with tools): asked without streaming while this provider lives
    streams_empty: bool = False
    #: the model's context window in the server's tokens, and the tokens the refused request asked for, once an
    #: overflow error said them
    context_window: int | None = None
    requested: int | None = None
    #: the Chat Completions field of an answer's length: ``max_tokens`` (every server), or
    #: ``max_completion_tokens`` once a model refused the other (OpenAI's reasoning models)
    max_tokens_field: str = "max_tokens"
    #: the history's estimated tokens that fit the window beside the rest of a request (set by the turn that
    #: pruned to fit it): the pruning threshold from then on
    history_room: int | None = None
    keeps_state: bool = False
    store: Profiles | None = field(default=None, repr=False, compare=False)

    # -- where it is ----------------------------------------------------------------------------------
    @property
    def local(self) -> bool:
        """The server is on this machine or the user's network (a local engine): its host is ``localhost``, a
        loopback, private or link-local address, a ``.local`` name, or a bare host name without dots."""
        return is_local(self.base_url)

    # -- what to send ------------------------------------------------------------------------------
    def api(self, chosen: str, explicit: bool) -> str:
        """The API to call: the learned one, except that an API the user chose is kept (unless the model
        exists only on the Responses API)."""
        if self.responses_only:
            return "responses"
        if explicit:
            return chosen
        return "chat" if self.responses_missing else chosen

    def sends_images(self, vision: str | bool) -> bool:
        return vision is True or (vision == "auto" and self.images is not False)

    # -- what a failure teaches -----------------------------------------------------------------------
    def adapt(self, failure: Failure, *, explicit_api: bool, vision: str | bool = "auto") -> Adapted | None:
        """What to change after ``failure`` so the next attempt can succeed (learned, and kept where it holds
        across kernels), or None when nothing here would help (then the retry loop's backoff, or the error)."""
        text = failure.message
        if failure.status is not None:
            place = placing.next_place(text, self.state_place, state=failure.state)
            if place is not None:
                self.state_place = place
                self._save()
                return Adapted(placing.notice(self.model, place))
        if failure.api == "chat" and failure.status in (400, 404) and re.search(RESPONSES_ONLY, text):
            self.responses_only = True
            self._save()
            return Adapted(
                f"{self.model} is not served on /v1/chat/completions here; "
                "switched to the Responses API for the rest of this session."
            )
        if failure.api == "responses" and self.route_missing(failure) and not explicit_api:
            self.responses_missing = True
            self._save()
            return Adapted(
                f"The server at {self.base_url} has no Responses API (POST /v1/responses answered "
                f"{_what(failure)}): switched to Chat Completions, and remembered for this server "
                '(%config Shiro.api = "responses" sends there again).'
            )
        if (
            failure.api == "chat"
            and failure.status == 400
            and self.max_tokens_field != "max_completion_tokens"
            and re.search(_USE_COMPLETION_TOKENS, text)
        ):
            self.max_tokens_field = "max_completion_tokens"
            self._save()
            return Adapted()  # nothing to say: the same limit under the name this model takes
        if failure.images and vision == "auto" and error_kind(text) == "images_unsupported":
            self.images = False
            self._save()
            return Adapted(NO_VISION_NOTICE)
        if failure.empty_stream and failure.streamed:
            return Adapted(stream=False)  # the server's own error, if any, comes with a plain answer
        if error_kind(text) == "context_overflow":
            self.learn_window(f"{text} {failure.body}")
        return None

    def route_missing(self, failure: Failure) -> bool:
        """The server has no such route: a 404/405 that is not about a model or an item, or a page saying so."""
        text = failure.message.strip()
        if failure.not_api:
            return bool(re.search(ROUTE_MISSING, text))
        if failure.status is None:
            return False
        if failure.status == 405:
            return True
        if failure.status != 404:
            return False
        lowered = text.lower()
        return not text or bool(re.search(ROUTE_MISSING, text)) or not ("model" in lowered or "item" in lowered)

    def threshold(self, threshold: int) -> int:
        """The history's pruning threshold (estimated tokens): ``threshold``, or less where the model's window
        is known to take less."""
        return threshold if self.history_room is None else min(threshold, self.history_room)

    def room(self, sent: int) -> int:
        """The history's estimated tokens that fit the window, from the refused request whose history was
        ``sent`` (estimated): the window, less a quarter for the answer, less what the request carried besides
        the history (the tokens it asked for, less its history; a history's estimate is taken as its tokens).
        Without the window's figures, half the history is tried."""
        if self.context_window and self.requested:
            return int(self.context_window * ANSWER_ROOM) - max(0, self.requested - sent)
        return sent // 2

    def learn_window(self, text: str) -> None:
        """The context window and the tokens asked for, as an overflow error names them (None where it does
        not: then the next overflow is tried with half the history)."""
        self.context_window = _number(_WINDOW, text)
        self.requested = _number(_REQUESTED, text)

    def learn_keeps_state(self) -> None:
        """The server's answer said ``"store": true``: it keeps its items, so the history may refer to them."""
        self.keeps_state = True
        self._save()

    def learned_text_calls(self) -> bool:
        """Note that tool calls came as text; True the first time for this server (to say it once)."""
        if self.text_tool_calls:
            return False
        self.text_tool_calls = True
        self._save()
        return True

    def _save(self) -> None:
        if self.store is not None:
            self.store.save(self)


#: said when a model refused images and the step is sent again without them
NO_VISION_NOTICE = (
    "this model does not take images: the step was re-sent with text descriptions of the figures instead, and "
    "shiro will keep doing so for it (%config Shiro.vision = True sends images again)"
)


def requested_tokens(text: str) -> int | None:
    """The tokens a request asked for, as an overflow error says them."""
    return _number(_REQUESTED, text)


def window_of(text: str) -> int | None:
    return _number(_WINDOW, text)


def _number(pattern: str, text: str) -> int | None:
    match = re.search(pattern, text)
    if match is None:
        return None
    value = next((g for g in match.groups() if g), None)
    return int(value) if value else None


def _what(failure: Failure) -> str:
    if failure.status is None:
        return "with a page that is not the API's"
    message = " ".join(failure.message.split())[:80].rstrip(".")
    return (
        f"{failure.status}: {message}"
        if message and not message.lower().startswith("error code")
        else str(failure.status)
    )


def keeps_state(base_url: str) -> bool:
    """Whether the server keeps Responses items between calls (``store``), so the history may refer to them."""
    try:
        host = urlsplit(base_url).hostname or ""
    except ValueError:
        return False
    return any(re.search(p, host) for p in _STATEFUL_HOSTS)


class Profiles:
    """The profiles kept across kernels, in one JSON file (``SHIRO_HOME/servers.json``), read-modify-written
    under its lock: ``{"servers": {base_url: {"responsesMissing", "textToolCalls", "keepsState", "models": {model:
    {"responsesOnly", "statePlace", "images", "maxTokensField"}}}}}``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self, base_url: str, model: str) -> ServerProfile:
        """The profile of ``model`` at ``base_url`` (anything with credentials or a query is never a key)."""
        shown = safe_url(base_url)
        profile = ServerProfile(shown, model, keeps_state=keeps_state(base_url), store=self)
        server = self._read().get(shown)
        if not isinstance(server, dict):
            return profile
        profile.responses_missing = server.get("responsesMissing") is True
        profile.text_tool_calls = server.get("textToolCalls") is True
        profile.keeps_state = profile.keeps_state or server.get("keepsState") is True
        kept = (server.get("models") or {}).get(model)
        if isinstance(kept, dict):
            profile.responses_only = kept.get("responsesOnly") is True
            if kept.get("statePlace") in placing.PLACES:
                profile.state_place = str(kept["statePlace"])
            profile.images = False if kept.get("images") is False else None
            if kept.get("maxTokensField") == "max_completion_tokens":
                profile.max_tokens_field = "max_completion_tokens"
        return profile

    def save(self, profile: ServerProfile) -> None:
        """Keep what holds across kernels; a home that cannot be written keeps it for this kernel only."""
        try:
            with files.locked(self.path):
                servers = self._read()
                server = servers.setdefault(profile.base_url, {})
                server["responsesMissing"] = profile.responses_missing
                server["textToolCalls"] = profile.text_tool_calls
                server["keepsState"] = profile.keeps_state
                models = server.setdefault("models", {})
                models[profile.model] = {
                    "responsesOnly": profile.responses_only,
                    "statePlace": profile.state_place,
                    "images": profile.images is not False,
                    "maxTokensField": profile.max_tokens_field,
                }
                files.write_json(self.path, {"servers": servers})
        except StoreError:
            pass

    def _read(self) -> dict[str, Any]:
        try:
            data = files.read_json(self.path)
        except CorruptFile:
            try:
                files.quarantine(self.path)
            except OSError:
                pass
            return {}
        servers = data.get("servers") if isinstance(data, dict) else None
        return {k: v for k, v in servers.items() if isinstance(v, dict)} if isinstance(servers, dict) else {}


__all__ = [
    "NO_VISION_NOTICE",
    "ROUTE_MISSING",
    "Adapted",
    "Failure",
    "Profiles",
    "ServerProfile",
    "keeps_state",
    "requested_tokens",
    "window_of",
]
