"""The two wire formats (Responses and Chat Completions), as pure functions over dicts.

Building a request from the transcript and parsing a response (streamed or not) back into it
happen here, with no network and no ``openai`` import, so they are tested against recorded real
API payloads. :mod:`shiro_kernel.provider` does the network part.

Replay rules (Responses API):

* ``store`` on: a part carrying a provider item id goes out as ``{"type": "item_reference", "id": …}``
  — the provider still holds the item, reasoning included.
* ``store`` off: nothing is stored, so everything goes inline. Messages and function calls carry
  no id. A reasoning item is replayed as ``{type, id, summary, encrypted_content}``: the OpenAPI
  schema requires ``id`` on a reasoning input item, and the real API accepts it with its encrypted
  content when ``store`` is false (recorded in the ``round_trips_encrypted_reasoning`` cassette).
  Reasoning with no encrypted content (or no id) cannot be replayed and is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..events import ReasoningDelta, TextDelta, Usage
from ..transcript import ImageRef, Message, Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from .pricing import cost_usd


# -- requests -----------------------------------------------------------------------------------
def responses_tools(specs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": s["name"],
            "description": s["description"],
            "parameters": s["parameters"],
            "strict": _strict_ok(s["parameters"]),
        }
        for s in specs
    ]


def chat_tools(specs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": s["name"],
                "description": s["description"],
                "parameters": s["parameters"],
                "strict": _strict_ok(s["parameters"]),
            },
        }
        for s in specs
    ]


def _strict_ok(schema: dict[str, Any]) -> bool:
    """Strict mode needs every property required and no additional properties."""
    props = schema.get("properties", {})
    return schema.get("additionalProperties") is False and set(schema.get("required", [])) == set(props)


#: the bytes of an image by reference (the asset store's ``data_url``), or None when they are gone
ImageSource = Callable[[ImageRef], "str | None"]


def _image_notes(res: ToolResultPart, images: ImageSource | None) -> tuple[str, list[str]]:
    """The result's text and the data URLs of its images. Without a source (no vision) or for an image
    whose bytes are gone, the image's text stand-in is appended to the text instead."""
    text, urls, missing = res.output, [], []
    for image in res.images:
        url = images(image) if images is not None else None
        if url is None:
            missing.append(image.alt or f"an image ({image.width}×{image.height})")
        else:
            urls.append(url)
    if missing:
        why = "this model takes no images" if images is None else "the image is no longer stored"
        text += "".join(f"\n[image not shown ({why}): {alt}]" for alt in missing)
    return text, urls


def responses_input(messages: list[Message], *, store: bool, images: ImageSource | None = None) -> list[dict[str, Any]]:
    """The transcript as Responses API ``input`` items (system messages go to ``instructions``). A tool
    result with images is a ``function_call_output`` whose ``output`` is a list of one ``input_text`` and
    one ``input_image`` per image (``FunctionCallOutputItemParam`` in the OpenAPI spec)."""
    return [item for msg in messages for item in _message_items(msg, store, images)]


def _message_items(msg: Message, store: bool, images: ImageSource | None) -> list[dict[str, Any]]:
    """One message's ``input`` items (none for a system message)."""
    items: list[dict[str, Any]] = []
    if msg.role == "system":
        return items
    if msg.role == "user":
        items.append({"role": "user", "content": msg.text})
    elif msg.role == "tool":
        for res in msg.tool_results():
            output: str | list[dict[str, Any]] = res.output
            if res.images:
                text, urls = _image_notes(res, images)
                output = [
                    {"type": "input_text", "text": text or "(see the image)"},
                    *({"type": "input_image", "image_url": url, "detail": "auto"} for url in urls),
                ]
                if not urls:
                    output = text
            items.append({"type": "function_call_output", "call_id": res.call_id, "output": output})
    else:
        for part in msg.parts:
            item = _assistant_item(part, store)
            if item is not None:
                items.append(item)
    return items


_Kept = tuple[Message, list[Part], object, list[dict[str, Any]]]  # (message, its parts, the setting, its items)


class InputCache:
    """A long history's request, sent again and again, built from each message's items kept while the
    message is unchanged (the same parts) and the setting they depend on is the same (``store`` for
    Responses): a step of a long session builds only its new messages' items instead of thousands of
    small dicts (which would also wake the garbage collector). A tool message with images is built every
    time (its items depend on the image store). Only the messages of the last call of each API are kept.
    The items are shared between requests and never changed once built.

    ``clean`` is applied to every text an item carries (contents, texts, outputs, arguments; never an image's
    data) when the item is built: the provider's redaction of secrets at the boundary where anything leaves,
    paid once per message, not per request. ``withhold`` is applied to each message before its items are built:
    what the administrator's ``values: schema-only`` lets leave of it (:func:`~shiro_kernel.private.schema_only.
    withheld`)."""

    def __init__(
        self, clean: Callable[[str], str] | None = None, withhold: Callable[[Message], Message] | None = None
    ) -> None:
        self._kept: dict[str, dict[int, _Kept]] = {"responses": {}, "chat": {}}
        self.clean = clean
        self.withhold = withhold

    def _items(
        self,
        fresh: dict[int, _Kept],
        api: str,
        m: Message,
        setting: object,
        build: Callable[..., list[dict[str, Any]]],
        *args: Any,
    ) -> list[dict[str, Any]]:
        """``m``'s items as kept (recorded in ``fresh``), or built now by ``build(m, *args)``."""
        hit = self._kept[api].get(id(m))
        if hit is None or hit[0] is not m or hit[2] is not setting or hit[1] != m.parts:
            items = build(m if self.withhold is None else self.withhold(m), *args)
            if self.clean is not None:
                items = [_cleaned(item, self.clean) for item in items]
            if m.role == "tool" and any(type(p) is ToolResultPart and p.images for p in m.parts):
                return items
            hit = (m, list(m.parts), setting, items)
        fresh[id(m)] = hit
        return hit[3]

    def input(self, messages: list[Message], *, store: bool, images: ImageSource | None) -> list[dict[str, Any]]:
        """:func:`responses_input`."""
        fresh: dict[int, _Kept] = {}
        out: list[dict[str, Any]] = []
        for m in messages:
            out += self._items(fresh, "responses", m, store, _message_items, store, images)
        self._kept["responses"] = fresh
        return out

    def chat(self, system: str, messages: list[Message], images: ImageSource | None) -> list[dict[str, Any]]:
        """:func:`chat_messages`."""
        fresh: dict[int, _Kept] = {}
        steps = _ChatSteps(system)
        for m in messages:
            steps.add(m, self._items(fresh, "chat", m, None, _chat_entries, images))
        self._kept["chat"] = fresh
        return steps.done()


#: the fields whose strings are text a request carries (an image's data URL is never scanned)
_TEXT_FIELDS = frozenset({"content", "text", "output", "arguments", "summary"})


def _cleaned(value: Any, clean: Callable[[str], str], field: str = "") -> Any:
    """``value`` with ``clean`` applied to the strings of its text fields (new containers; ``value`` unchanged)."""
    if isinstance(value, str):
        return clean(value) if field in _TEXT_FIELDS else value
    if isinstance(value, list):
        return [_cleaned(v, clean, field) for v in value]
    if isinstance(value, dict):
        return {k: v if k in ("image_url", "url") else _cleaned(v, clean, k) for k, v in value.items()}
    return value


def _assistant_item(part: Part, store: bool) -> dict[str, Any] | None:
    if store and part.item_id:
        return {"type": "item_reference", "id": part.item_id}
    if isinstance(part, ReasoningPart):
        if not (part.encrypted and part.item_id):
            return None  # nothing replayable: the provider would only know it by a stored id
        return {
            "type": "reasoning",
            "id": part.item_id,
            "summary": [{"type": "summary_text", "text": s} for s in part.summary],
            "encrypted_content": part.encrypted,
        }
    if isinstance(part, TextPart):
        if not part.text:
            return None
        # The output-message shape (as Codex CLI replays with store off), not the easy `content: str` form:
        # after a reasoning item the API needs the model's own output item, not a new assistant input.
        item: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": part.text}],
        }
        if part.meta.get("phase"):
            item["phase"] = part.meta["phase"]
        return item
    if isinstance(part, ToolCallPart):
        return {"type": "function_call", "call_id": part.call_id, "name": part.name, "arguments": part.arguments}
    return None


def chat_messages(system: str, messages: list[Message], images: ImageSource | None = None) -> list[dict[str, Any]]:
    """The transcript as Chat Completions ``messages``. Reasoning is not replayable there. Tool messages
    carry text only, so the images of a step's tool results follow in ONE ``user`` message with
    ``image_url`` parts, right after the last tool message of that step (the API wants every tool message
    directly after its assistant message; a user message may come next)."""
    steps = _ChatSteps(system)
    for msg in messages:
        steps.add(msg, _chat_entries(msg, images))
    return steps.done()


#: the images a tool message's results carry on Chat Completions: (call id, tool name, data URLs)
_IMAGES_KEY = "_shiro_images"


def _chat_entries(msg: Message, images: ImageSource | None) -> list[dict[str, Any]]:
    """One message's own Chat Completions entries. A tool message whose results carry images ends with a
    marker entry listing them, which :class:`_ChatSteps` turns into the step's one ``user`` message."""
    if msg.role in ("system", "user"):
        return [{"role": msg.role, "content": msg.text}]
    if msg.role == "tool":
        out: list[dict[str, Any]] = []
        shown: list[tuple[str, str, list[str]]] = []
        for res in msg.tool_results():
            text, urls = _image_notes(res, images) if res.images else (res.output, [])
            out.append({"role": "tool", "tool_call_id": res.call_id, "content": text})
            if urls:
                shown.append((res.call_id, res.name, urls))
        if shown:
            out.append({_IMAGES_KEY: shown})
        return out
    calls = msg.tool_calls()
    if not msg.text and not calls:
        return []  # a reasoning-only message has nothing to say on this API
    # always a string: llama-cpp-python refuses null (a 500 validation error) and a missing one (its template
    # reads it); OpenAI takes "" beside tool calls (simonw/llm's recorded requests send it)
    entry: dict[str, Any] = {"role": "assistant", "content": msg.text}
    if calls:
        entry["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ]
    return [entry]


class _ChatSteps:
    """Chat Completions ``messages`` put together from each message's entries: the images of a step's tool
    results go in one ``user`` message after the step's last tool message."""

    def __init__(self, system: str) -> None:
        self.out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        self.pending: list[tuple[str, str, list[str]]] = []

    def add(self, msg: Message, entries: list[dict[str, Any]]) -> None:
        if msg.role != "tool":
            self._flush()
        for entry in entries:
            if _IMAGES_KEY in entry:
                self.pending += entry[_IMAGES_KEY]
            else:
                self.out.append(entry)

    def _flush(self) -> None:
        if not self.pending:
            return
        names = ", ".join(f"{name} ({call_id})" for call_id, name, _ in self.pending)
        content: list[dict[str, Any]] = [{"type": "text", "text": f"Images from the tool results above: {names}"}]
        content += [
            {"type": "image_url", "image_url": {"url": url, "detail": "auto"}}
            for _, _, urls in self.pending
            for url in urls
        ]
        self.out.append({"role": "user", "content": content})
        self.pending = []

    def done(self) -> list[dict[str, Any]]:
        self._flush()
        return self.out


# -- responses: parsing -------------------------------------------------------------------------
def _reasoning_part(item: dict[str, Any]) -> ReasoningPart:
    summary = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
    if not summary and item.get("content"):  # open-weight servers put reasoning text in `content`
        summary = [c.get("text", "") for c in item["content"] if isinstance(c, dict)]
    return ReasoningPart(summary, item.get("encrypted_content"), item_id=item.get("id"))


def parts_from_output_item(item: dict[str, Any]) -> list[Part]:
    """One Responses ``output`` item as transcript parts (a message may hold several texts)."""
    kind = item.get("type")
    if kind == "reasoning":
        return [_reasoning_part(item)]
    if kind == "message":
        texts = [
            c.get("text", "")
            for c in item.get("content") or []
            if isinstance(c, dict) and c.get("type") in ("output_text", "text")
        ]
        refusal = [
            c.get("refusal", "")
            for c in item.get("content") or []
            if isinstance(c, dict) and c.get("type") == "refusal"
        ]
        meta = {"phase": item["phase"]} if item.get("phase") else {}
        return [TextPart("".join(texts + refusal), item_id=item.get("id"), meta=meta)]
    if kind == "function_call":
        return [
            ToolCallPart(
                str(item.get("call_id") or item.get("id")),
                str(item.get("name", "")),
                item.get("arguments") or "",
                item_id=item.get("id"),
            )
        ]
    return []  # built-in tools and other item types are not ours


def responses_usage(model: str, usage: dict[str, Any] | None) -> Usage:
    if not usage:
        return Usage()
    i, o = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    cached = _cached(usage.get("input_tokens_details"))
    return Usage(i, o, cost_usd(model, i, o, cached), cached)


def parse_response(resp: dict[str, Any], model: str | None = None) -> tuple[Message, Usage]:
    """A complete (non-streamed) Responses API ``Response`` body."""
    parts = [p for item in resp.get("output") or [] for p in parts_from_output_item(item)]
    return Message("assistant", parts), responses_usage(model or resp.get("model", ""), resp.get("usage"))


class ResponsesStream:
    """Folds Responses SSE events (as dicts) into deltas and, at the end, the assistant message.

    ``feed`` returns the deltas to show now. Items are taken from ``response.output_item.done``
    (complete, with the final encrypted content); ``response.completed`` supplies usage and, when
    present, the authoritative ``output`` list.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.items: dict[int, dict[str, Any]] = {}
        self.final: dict[str, Any] | None = None
        self.error: str | None = None
        self.shown = False  # has anything visible been delivered yet?
        self.text: list[str] = []  # every text delta, for what an aborted stream keeps

    def feed(self, event: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        kind = event.get("type", "")
        if kind == "response.output_text.delta" and event.get("delta"):
            self.shown = True
            self.text.append(event["delta"])
            return [TextDelta(event["delta"])]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta") and event.get("delta"):
            self.shown = True
            return [ReasoningDelta(event["delta"])]
        if kind == "response.output_item.added" and (event.get("item") or {}).get("type") == "function_call":
            self.shown = True
        elif kind == "response.output_item.done":
            self.items[int(event.get("output_index", len(self.items)))] = event.get("item") or {}
        elif kind in ("response.completed", "response.incomplete"):
            self.final = event.get("response") or {}
        elif kind == "response.failed":
            err = (event.get("response") or {}).get("error") or {}
            self.error = err.get("message") or "the response failed"
        elif kind == "error":
            self.error = event.get("message") or (event.get("error") or {}).get("message") or "stream error"
        return []

    @property
    def complete(self) -> bool:
        return self.final is not None

    def partial(self) -> Message:
        """What arrived before the stream was stopped: its text only, with no provider id (the
        provider never finished the item, so it cannot be referred to)."""
        text = "".join(self.text)
        return Message("assistant", [TextPart(text, meta={"incomplete": "aborted"})] if text else [])

    def result(self) -> tuple[Message, Usage]:
        final = self.final or {}
        streamed = [self.items[i] for i in sorted(self.items)]
        # The completed ``output`` decides which items exist and their order, but an item also seen in
        # ``response.output_item.done`` is taken from there: the API re-encrypts ``encrypted_content``
        # each time it serialises a reasoning item, and the done-event blob is the one real clients
        # replay successfully (pydantic-ai phase_streamed_on_part_start cassette, 2nd request).
        done = {item["id"]: item for item in streamed if item.get("id")}
        output = [done.get(item.get("id"), item) for item in final.get("output") or []] or streamed
        parts = [p for item in output for p in parts_from_output_item(item)]
        if final.get("status") == "incomplete":
            reason = (final.get("incomplete_details") or {}).get("reason")
            for p in parts:
                if isinstance(p, TextPart):
                    p.meta["incomplete"] = reason or True
        return Message("assistant", parts), responses_usage(final.get("model") or self.model, final.get("usage"))


# -- chat completions: parsing ------------------------------------------------------------------
def chat_usage(model: str, usage: dict[str, Any] | None) -> Usage:
    if not usage:
        return Usage()
    i, o = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    cached = _cached(usage.get("prompt_tokens_details"))
    return Usage(i, o, cost_usd(model, i, o, cached), cached)


def _cached(details: Any) -> int:
    """The cached input tokens of a usage's details (``cached_tokens``; 0 when a server sends none)."""
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def parse_chat_completion(resp: dict[str, Any], model: str | None = None) -> tuple[Message, Usage]:
    choices = resp.get("choices") or [{}]
    msg = choices[0].get("message") or {}
    parts: list[Part] = []
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ReasoningPart([reasoning]))
    if msg.get("content") or msg.get("refusal"):
        parts.append(TextPart(msg.get("content") or msg.get("refusal") or ""))
    for call in msg.get("tool_calls") or []:
        fn = call.get("function") or {}
        parts.append(ToolCallPart(str(call.get("id")), str(fn.get("name", "")), fn.get("arguments") or ""))
    return Message("assistant", parts), chat_usage(model or resp.get("model", ""), resp.get("usage"))


class ChatStream:
    """Folds Chat Completions chunks (as dicts) into deltas and, at the end, the assistant message."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self.shown = False

    def feed(self, chunk: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        out: list[TextDelta | ReasoningDelta] = []
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if chunk.get("model"):
            self.model = chunk["model"] if not self.model else self.model
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
                out.append(ReasoningDelta(reasoning))
            if delta.get("content"):
                self.text.append(delta["content"])
                out.append(TextDelta(delta["content"]))
            for tc in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(int(tc.get("index", len(self.calls))), {"id": "", "name": "", "args": []})
                fn = tc.get("function") or {}
                if tc.get("id"):
                    slot["id"] = tc["id"]
                if fn.get("name"):
                    slot["name"] += fn["name"]
                if fn.get("arguments"):
                    slot["args"].append(fn["arguments"])
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        if out or self.calls:
            self.shown = True
        return out

    @property
    def complete(self) -> bool:
        return self.finish is not None

    def partial(self) -> Message:
        text = "".join(self.text)
        return Message("assistant", [TextPart(text, meta={"incomplete": "aborted"})] if text else [])

    def result(self) -> tuple[Message, Usage]:
        parts: list[Part] = []
        if self.reasoning:
            parts.append(ReasoningPart(["".join(self.reasoning)]))
        if self.text:
            parts.append(TextPart("".join(self.text)))
        for i in sorted(self.calls):
            c = self.calls[i]
            parts.append(ToolCallPart(c["id"] or f"call_{i}", c["name"], "".join(c["args"])))
        return Message("assistant", parts), chat_usage(self.model, self.usage)


__all__ = [
    "ChatStream",
    "InputCache",
    "ResponsesStream",
    "chat_messages",
    "chat_tools",
    "parse_chat_completion",
    "parse_response",
    "parts_from_output_item",
    "responses_input",
    "responses_tools",
]
