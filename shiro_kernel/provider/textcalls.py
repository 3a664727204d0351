"""Tool calls a server left in the text: recognised and made calls.

A local model asks for a tool the way its chat template taught it — Qwen's and Hermes's write
``<tool_call>{"name": "python", "arguments": {"code": "…"}}</tool_call>`` — and the server's parser is meant to
turn that into the API's ``tool_calls``. When the parser misses it (vLLM with a reasoning parser, Ollama and
llama.cpp without their tool templates), the call stays in the text or the reasoning, ``tool_calls`` comes back
empty, and an agent that reads only ``tool_calls`` silently stops. :func:`extract` finds such blocks in an
answer that has no calls and makes them calls — only for a tool the request offered, only from a well-formed
JSON object — so they go through the same approval as any call.

Pure functions over the transcript's types: no network, no ``openai``.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterable

from ..transcript import Message, Part, ReasoningPart, TextPart, ToolCallPart

#: a ``<tool_call>`` block (Qwen, Hermes); the last one may be left open when the model stopped at its end token
_BLOCK = re.compile(r"<tool_call>\s*(\{.*?\})\s*(?:</tool_call>|$)", re.S)


def extract(message: Message, names: Iterable[str]) -> Message | None:
    """``message`` with the tool calls written in its text or reasoning as calls (and taken out of the text),
    or None when it has calls already or none written as text. ``names``: the tools the request offered."""
    if message.tool_calls():
        return None
    offered = set(names)
    calls: list[ToolCallPart] = []
    parts: list[Part] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            text, found = _calls_in(part.text, offered)
            calls += found
            if text.strip() or not found:
                parts.append(TextPart(text.strip() if found else text, part.item_id, dict(part.meta)))
        elif isinstance(part, ReasoningPart):
            found = [c for s in part.summary for c in _calls_in(s, offered)[1]]
            calls += found
            parts.append(part)
        else:
            parts.append(part)
    if not calls:
        return None
    return Message("assistant", [*parts, *calls])


def _calls_in(text: str, offered: set[str]) -> tuple[str, list[ToolCallPart]]:
    """The text without its well-formed call blocks, and those calls."""
    if "<tool_call>" not in text:
        return text, []
    calls: list[ToolCallPart] = []

    def take(match: re.Match[str]) -> str:
        call = _call(match.group(1), offered)
        if call is None:
            return match.group(0)  # not a call of ours: the text stays as the model wrote it
        calls.append(call)
        return ""

    return _BLOCK.sub(take, text), calls


def _call(raw: str, offered: set[str]) -> ToolCallPart | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("name") not in offered:
        return None
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            json.loads(arguments or "{}")
        except ValueError:
            return None
        text = arguments
    elif isinstance(arguments, dict):
        text = json.dumps(arguments, ensure_ascii=False)
    else:
        return None
    return ToolCallPart(f"call_{secrets.token_hex(12)}", str(data["name"]), text, meta={"fromText": True})


def notice(model: str, host: str) -> str:
    """Said once per server, the first time."""
    return (
        f"{model} at {host} wrote its tool call as text (<tool_call>…</tool_call>) instead of the API's tool_calls "
        "(the server's tool parser or chat template missed it): shiro runs such calls as calls, asking as for any "
        "call."
    )


__all__ = ["extract", "notice"]
