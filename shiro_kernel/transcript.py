"""The transcript: messages made of parts, in the project's own types.

This is what the turn loop speaks and what a session record stores. No SDK object ever lands
here. Every part may carry the provider's item id (``item_id``) and provider metadata
(``meta``, e.g. ``{"phase": "commentary"}``); both survive a JSON round trip unchanged.

JSON shape of one message::

    {"role": "assistant", "parts": [
        {"type": "reasoning", "summary": ["..."], "encrypted": "...", "itemId": "rs_1"},
        {"type": "text", "text": "...", "itemId": "msg_1", "meta": {"phase": "final_answer"}},
        {"type": "tool_call", "callId": "call_1", "name": "python", "arguments": "{...}"}]}
    {"role": "tool", "parts": [
        {"type": "tool_result", "callId": "call_1", "name": "python", "output": "2.0"}]}

A failed tool call's result has ``"isError": true``; a call that was not approved (refused by the policy or
the user, or a question nobody answered) also has ``"refused": true``, and one the turn's stop cut short or
never reached (Stop, a kernel interrupt, a restart, the time limit, a kernel that died) ``"stopped": true``.
Each flag is written only when true, except where an older version's text rule (below) would read it wrong
from the output: then ``false`` is written.

A record written before a flag existed is read once, at load, by the text rule of its time: a result
without ``isError`` whose output starts with ``Error:`` failed (:data:`LEGACY_ERROR`); a failed one without
``refused`` whose output starts with :data:`LEGACY_REFUSED` was refused; one without ``stopped`` whose output
matches :data:`LEGACY_STOPPED` was stopped. From then on whether a result failed, was refused or was stopped
is known by :attr:`ToolResultPart.is_error`, ``.refused`` and ``.stopped`` alone, never by its text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
#: older versions let a tool return its failure as text without ``isError``; a result loaded without the
#: flag whose output starts with this is taken as failed, so every later use reads ``is_error`` alone
LEGACY_ERROR = "Error:"
#: how every refusal's text began before ``refused`` was saved (``approval``'s texts: headless, denied, read-only,
#: unanswered)
LEGACY_REFUSED = "Error: not approved"
#: the texts of a stopped call before ``stopped`` was saved: interrupted while it ran (by the user, a restart or
#: shutdown, the time limit), not run because of the stop, or the write-ahead's stand-ins of a kernel that died
LEGACY_STOPPED = re.compile(
    r"Error: (?:interrupted after [\d.]+ s — .+ while this call ran"
    r"|not run — .+ before this call ran\."
    r"|the kernel stopped while this call ran)"
)


@dataclass
class TextPart:
    text: str
    item_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    type: Literal["text"] = field(default="text", init=False)


@dataclass
class ReasoningPart:
    """A reasoning item: its readable summary and, when the provider gave it, the opaque
    encrypted content that lets it be replayed with ``store`` off."""

    summary: list[str] = field(default_factory=list)
    encrypted: str | None = None
    item_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    type: Literal["reasoning"] = field(default="reasoning", init=False)

    @property
    def text(self) -> str:
        return "\n\n".join(self.summary)


@dataclass
class ToolCallPart:
    call_id: str
    name: str
    arguments: str  # the raw JSON text the model produced, kept verbatim
    item_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    type: Literal["tool_call"] = field(default="tool_call", init=False)

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ValueError with a readable reason otherwise."""
        try:
            value = json.loads(self.arguments) if self.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from None
        if not isinstance(value, dict):
            raise ValueError(f"arguments must be a JSON object, not {type(value).__name__}")
        return value


@dataclass(frozen=True)
class ImageRef:
    """An image a tool result carries to the model, by content hash: the bytes (already downscaled) live
    in the asset store (:mod:`shiro_kernel.store.assets`), never in the transcript. ``alt`` is a text
    stand-in for a model that takes no images (for a matplotlib figure: its title, axes and series)."""

    sha256: str
    mime: str
    width: int
    height: int
    alt: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sha256": self.sha256, "mime": self.mime, "width": self.width, "height": self.height}
        if self.alt:
            out["alt"] = self.alt
        return out

    @classmethod
    def from_json(cls, data: Any) -> ImageRef:
        if not isinstance(data, dict) or not isinstance(data.get("sha256"), str):
            raise ValueError(f"not an image reference: {str(data)[:80]}")
        return cls(
            data["sha256"],
            str(data.get("mime") or "image/png"),
            int(data.get("width") or 0),
            int(data.get("height") or 0),
            str(data.get("alt") or ""),
        )


@dataclass
class ToolResultPart:
    call_id: str
    name: str
    output: str
    is_error: bool = False
    item_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    type: Literal["tool_result"] = field(default="tool_result", init=False)
    #: images for the model (figures, image files), by reference
    images: list[ImageRef] = field(default_factory=list)
    #: the call was not run because it was not approved (by the policy, the user, or nobody answering in time)
    refused: bool = False
    #: the call was cut short or never reached because the turn stopped (Stop, interrupt, restart, time limit,
    #: a kernel that died while it ran)
    stopped: bool = False
    #: what the call displayed (MIME bundles: figures, DataFrame HTML, ...) for the user's view of the turn;
    #: never saved with the session (the notebook's output keeps it) and never sent to the model
    displays: list[dict[str, Any]] = field(default_factory=list, compare=False, repr=False)
    #: the code the call ran raised (its output ends with the traceback): a result, not a failed call — what it
    #: printed before stands — but nothing it was to compute was; for the turn's next step only, never saved
    raised: bool = field(default=False, compare=False, repr=False)


Part = TextPart | ReasoningPart | ToolCallPart | ToolResultPart


@dataclass
class Message:
    role: Role
    parts: list[Part] = field(default_factory=list)

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", [TextPart(text)])

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", [TextPart(text)])

    @property
    def text(self) -> str:
        """The message's visible text (text parts joined)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    def tool_results(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "parts": [part_to_json(p) for p in self.parts]}

    @classmethod
    def from_json(cls, data: Any) -> Message:
        if not isinstance(data, dict) or data.get("role") not in ROLES:
            raise ValueError(f"not a message: {str(data)[:80]}")
        parts = data.get("parts", [])
        if not isinstance(parts, list):
            raise ValueError("message parts must be a list")
        return cls(data["role"], [part_from_json(p) for p in parts])


def _common(part: Part, out: dict[str, Any]) -> dict[str, Any]:
    if part.item_id is not None:
        out["itemId"] = part.item_id
    if part.meta:
        out["meta"] = dict(part.meta)
    return out


def part_to_json(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return _common(part, {"type": "text", "text": part.text})
    if isinstance(part, ReasoningPart):
        out: dict[str, Any] = {"type": "reasoning", "summary": list(part.summary)}
        if part.encrypted is not None:
            out["encrypted"] = part.encrypted
        return _common(part, out)
    if isinstance(part, ToolCallPart):
        return _common(
            part, {"type": "tool_call", "callId": part.call_id, "name": part.name, "arguments": part.arguments}
        )
    out = {"type": "tool_result", "callId": part.call_id, "name": part.name, "output": part.output}
    legacy = _legacy_flags(part.output, part.is_error)
    for key, value, read_as in (
        ("isError", part.is_error, legacy[0]),
        ("refused", part.refused, legacy[1]),
        ("stopped", part.stopped, legacy[2]),
    ):
        if value or read_as:  # true, or false where the legacy text rule would read it true
            out[key] = value
    if part.images:
        out["images"] = [image.to_json() for image in part.images]
    return _common(part, out)


def part_from_json(data: Any) -> Part:
    if not isinstance(data, dict):
        raise ValueError(f"not a part: {str(data)[:80]}")
    kind = data.get("type")
    common: dict[str, Any] = {"item_id": data.get("itemId"), "meta": dict(data.get("meta") or {})}
    if kind == "text":
        return TextPart(str(data.get("text", "")), **common)
    if kind == "reasoning":
        return ReasoningPart([str(s) for s in data.get("summary", [])], data.get("encrypted"), **common)
    if kind == "tool_call":
        return ToolCallPart(str(data["callId"]), str(data["name"]), str(data.get("arguments", "")), **common)
    if kind == "tool_result":
        output = str(data.get("output", ""))
        is_error = bool(data["isError"]) if "isError" in data else output.startswith(LEGACY_ERROR)
        legacy = _legacy_flags(output, is_error)
        return ToolResultPart(
            str(data["callId"]),
            str(data.get("name", "")),
            output,
            is_error,
            images=[ImageRef.from_json(i) for i in data.get("images") or []],
            refused=bool(data["refused"]) if "refused" in data else legacy[1],
            stopped=bool(data["stopped"]) if "stopped" in data else legacy[2],
            **common,
        )
    raise ValueError(f"unknown part type {kind!r}")


def _legacy_flags(output: str, is_error: bool) -> tuple[bool, bool, bool]:
    """(failed, refused, stopped) as a record written before these flags says them by its text alone."""
    failed = output.startswith(LEGACY_ERROR)
    return (
        failed,
        is_error and output.startswith(LEGACY_REFUSED),
        is_error and LEGACY_STOPPED.match(output) is not None,
    )


def messages_to_json(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.to_json() for m in messages]


def messages_from_json(data: Any) -> list[Message]:
    if not isinstance(data, list):
        raise ValueError("messages must be a list")
    return [Message.from_json(m) for m in data]
