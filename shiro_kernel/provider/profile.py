"""What shiro learns about one server and model: one :class:`ServerProfile` per (base URL, model).

OpenAI's API, a gateway and a dozen local servers all answer "the OpenAI API", each a little differently.
shiro does not keep a table of them: it learns each one from how it answers, in one place — the provider's one
retry loop asks it what to change after a failed attempt (:meth:`ServerProfile.adapt`) and tells it each answer
that came (:meth:`ServerProfile.observe`), and **a success unlearns what a failure taught** (a Responses answer from
a server once marked as having no Responses API, images taken by a model once marked as refusing them):

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
  history inline, never a reference to an item it may not have kept (Ollama's Responses API keeps nothing). A
  server that refuses a reference (``unknown input item type: "item_reference"``, or an item it no longer has while
  it was not known by its host to keep them) is unlearned for good: the turn resends inline once.

What holds across kernels (the API, the state's place, images, tool calls as text, kept state) is kept in
``SHIRO_HOME/servers.json`` under the base URL as it may be shown (no credentials, no query), each field by its own
declaration (:data:`SAVED`); a kernel saves only the fields it changed, under the file's lock, so two kernels
learning at once keep both lessons. A file of another shape (a level that is not an object, a field of another
type) or one that is not a regular file (a FIFO) is set aside (``servers.json.corrupt-<time>``) and a fresh one
begun. What may change when the server restarts (its context window, usage) lives only as long as the provider. A
store that cannot be written loses nothing but the memory across kernels.
"""

from __future__ import annotations

import ipaddress
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import CorruptFile, StoreError
from ..store import files
from . import state as placing
from .failures import ITEM_REFERENCE_REFUSED, RESPONSES_ONLY, error_kind, safe_url

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
class Saved:
    """How a profile field is kept in servers.json: at the server's level or the model's, under ``key``;
    ``parse`` turns what the file holds into the field's value, raising ``ValueError`` for another shape."""

    level: str  # "server" | "model"
    key: str
    parse: Callable[[Any], Any]
    dump: Callable[[Any], Any] = lambda v: v


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"not true or false: {value!r}")
    return value


def _one_of(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"not one of {', '.join(choices)}: {value!r}")
        return str(value)

    return parse


def _images(value: Any) -> bool | None:
    return False if _flag(value) is False else None


def saved(level: str, key: str, parse: Callable[[Any], Any], dump: Callable[[Any], Any] = lambda v: v) -> Any:
    """A dataclass field's metadata that keeps it in servers.json (see :class:`Saved`)."""
    return {"saved": Saved(level, key, parse, dump)}


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
    #: the server answered /v1/responses with "no such route" (server-wide); a Responses answer unlearns it
    responses_missing: bool = field(default=False, metadata=saved("server", "responsesMissing", _flag))
    #: the model is refused on Chat Completions ("only supported in v1/responses")
    responses_only: bool = field(default=False, metadata=saved("model", "responsesOnly", _flag))
    state_place: str = field(default=placing.PLACES[0], metadata=saved("model", "statePlace", _one_of(*placing.PLACES)))
    #: False once the model refused images; None: not known (an answer to images unlearns it)
    images: bool | None = field(default=None, metadata=saved("model", "images", _images, lambda v: v is not False))
    #: the server wrote tool calls as text at least once (said once per server)
    text_tool_calls: bool = field(default=False, metadata=saved("server", "textToolCalls", _flag))
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
    max_tokens_field: str = field(
        default="max_tokens", metadata=saved("model", "maxTokensField", _one_of("max_tokens", "max_completion_tokens"))
    )
    #: the history's estimated tokens that fit the window beside the rest of a request (set by the turn that
    #: pruned to fit it): the pruning threshold from then on
    history_room: int | None = None
    #: the server keeps Responses items (its host, or its answers' ``"store": true``): the history may refer to them
    keeps_state: bool = field(default=False, metadata=saved("server", "keepsState", _flag))
    #: the server refused a reference to an item: it keeps nothing, whatever its answers say
    keeps_nothing: bool = field(default=False, metadata=saved("server", "keepsNothing", _flag))
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
                self._save("state_place")
                return Adapted(placing.notice(self.model, place))
        if failure.api == "chat" and failure.status in (400, 404) and re.search(RESPONSES_ONLY, text):
            self.responses_only = True
            self._save("responses_only")
            return Adapted(
                f"{self.model} is not served on /v1/chat/completions here; "
                "switched to the Responses API for the rest of this session."
            )
        if failure.api == "responses" and self.route_missing(failure) and not explicit_api:
            self.responses_missing = True
            self._save("responses_missing")
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
            self._save("max_tokens_field")
            return Adapted()  # nothing to say: the same limit under the name this model takes
        if failure.images and vision == "auto" and error_kind(text) == "images_unsupported":
            self.images = False
            self._save("images")
            return Adapted(NO_VISION_NOTICE)
        if failure.empty_stream and failure.streamed:
            return Adapted(stream=False)  # the server's own error, if any, comes with a plain answer
        if failure.api == "responses" and self.keeps_state and self._refuses_references(failure):
            self.keeps_state, self.keeps_nothing = False, True
            self._save("keeps_state", "keeps_nothing")
            return None  # the turn resends its history inline (once), which this server takes
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

    def _refuses_references(self, failure: Failure) -> bool:
        """The server took no reference to an item: it says it knows no such input, or (a server not known by
        its host to keep items) it no longer has one."""
        if failure.status not in (400, 404, 422):
            return False
        if re.search(ITEM_REFERENCE_REFUSED, f"{failure.message} {failure.body}"):
            return True
        return error_kind(failure.message) == "item_not_found" and not keeps_state(self.base_url)

    # -- what an answer teaches --------------------------------------------------------------------------
    def observe(self, answer: Answer) -> list[str]:
        """Learn from an answer that came (see the module): a success unlearns what a failure taught; what to
        say, once (tool calls read from text, a stream that ended empty)."""
        said: list[str] = []
        changed: list[str] = []
        if answer.api == "responses" and self.responses_missing:
            self.responses_missing = False  # a proxy's blip taught it: this server has the Responses API
            changed.append("responses_missing")
        if answer.images and self.images is False:
            self.images = None
            changed.append("images")
        if answer.store and not self.keeps_state and not self.keeps_nothing:
            self.keeps_state = True
            changed.append("keeps_state")
        if answer.text_calls and not self.text_tool_calls:
            self.text_tool_calls = True
            changed.append("text_tool_calls")
            said.append("text_calls")
        if answer.plain_after_empty and not self.streams_empty:
            self.streams_empty = True
            said.append("streams_empty")
        if answer.usage is not None:
            self.usage = answer.usage
        if changed:
            self._save(*changed)
        return said

    def _save(self, *names: str) -> None:
        if self.store is not None:
            self.store.save(self, names)


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


@dataclass(frozen=True)
class Answer:
    """What one answer that came shows of the server (:meth:`ServerProfile.observe`)."""

    api: str
    #: the request carried images, and they were taken
    images: bool = False
    #: the answer said ``"store": true`` (a Responses server that keeps its items)
    store: bool = False
    #: its tool calls were read from its text
    text_calls: bool = False
    #: it was asked without streaming after its stream ended empty, and came
    plain_after_empty: bool = False
    #: it carried usage (None: not known here)
    usage: bool | None = None


def keeps_state(base_url: str) -> bool:
    """Whether the server keeps Responses items between calls (``store``), so the history may refer to them."""
    try:
        host = urlsplit(base_url).hostname or ""
    except ValueError:
        return False
    return any(re.search(p, host) for p in _STATEFUL_HOSTS)


#: the profile's fields kept in servers.json, by their declarations: field name → how
SAVED: dict[str, Saved] = {f.name: f.metadata["saved"] for f in fields(ServerProfile) if "saved" in f.metadata}


class Profiles:
    """The profiles kept across kernels, in one JSON file (``SHIRO_HOME/servers.json``), read-modify-written
    under its lock: ``{"servers": {base_url: {<server fields>, "models": {model: {<model fields>}}}}}``, the fields
    as :data:`SAVED` declares them."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self, base_url: str, model: str) -> ServerProfile:
        """The profile of ``model`` at ``base_url`` (anything with credentials or a query is never a key)."""
        shown = safe_url(base_url)
        profile = ServerProfile(shown, model, keeps_state=keeps_state(base_url), store=self)
        server = self._read().get(shown)
        if server is None:
            return profile
        model_entry = server.get("models", {}).get(model, {})
        for name, how in SAVED.items():
            level = server if how.level == "server" else model_entry
            if how.key in level:
                setattr(profile, name, how.parse(level[how.key]))  # checked by _read: it parses
        profile.keeps_state = (profile.keeps_state or keeps_state(base_url)) and not profile.keeps_nothing
        return profile

    def save(self, profile: ServerProfile, names: tuple[str, ...] | list[str] = ()) -> None:
        """Keep the fields ``names`` of ``profile`` (none given: all it saves), leaving every other field in the
        file as another kernel may have just written it; a home that cannot be written keeps it for this kernel
        only."""
        chosen = [n for n in (names or SAVED) if n in SAVED]
        try:
            with files.locked(self.path):
                servers = self._read()
                server = servers.setdefault(profile.base_url, {})
                model_entry = server.setdefault("models", {}).setdefault(profile.model, {})
                for name in chosen:
                    how = SAVED[name]
                    (server if how.level == "server" else model_entry)[how.key] = how.dump(getattr(profile, name))
                files.write_json(self.path, {"servers": servers})
        except StoreError:
            pass

    def _read(self) -> dict[str, dict[str, Any]]:
        """The servers the file holds, each level checked (see the module); a file that is not a regular file,
        cannot be parsed or has another shape is set aside, and nothing is read from it."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return {}
        except OSError:
            return {}
        try:
            if not stat.S_ISREG(st.st_mode):
                raise CorruptFile(self.path, "not a regular file")
            data = files.read_json(self.path)
            return _checked(data)
        except (CorruptFile, ValueError):
            try:
                files.quarantine(self.path)
            except OSError:
                pass
            return {}


def _checked(data: Any) -> dict[str, dict[str, Any]]:
    """servers.json's servers, every level and known field checked; ``ValueError`` for another shape (fields this
    version does not know are kept as they are)."""
    if data is None:
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("servers", {}), dict):
        raise ValueError("servers.json is not {'servers': {…}}")
    servers: dict[str, dict[str, Any]] = data.get("servers", {})
    for url, server in servers.items():
        if not isinstance(server, dict):
            raise ValueError(f"{url}: not an object")
        models = server.get("models", {})
        if not isinstance(models, dict) or not all(isinstance(m, dict) for m in models.values()):
            raise ValueError(f"{url}: models is not an object of objects")
        for how in SAVED.values():
            for level in [server] if how.level == "server" else list(models.values()):
                if how.key in level:
                    how.parse(level[how.key])
    return servers


__all__ = [
    "NO_VISION_NOTICE",
    "ROUTE_MISSING",
    "SAVED",
    "Adapted",
    "Answer",
    "Failure",
    "Profiles",
    "ServerProfile",
    "keeps_state",
    "requested_tokens",
    "window_of",
]
