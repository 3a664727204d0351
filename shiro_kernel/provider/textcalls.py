"""Tool calls a server left in the text: recognised and made calls — only in the form a model writes as its action.

A local model asks for a tool the way its chat template taught it — Qwen's and Hermes's write
``<tool_call>{"name": "python", "arguments": {"code": "…"}}</tool_call>`` — and the server's parser is meant to
turn that into the API's ``tool_calls``. When the parser misses it (llama.cpp's server with Qwen2.5-Coder, measured:
the model writes the call as a fenced JSON block; vLLM with a reasoning parser; Ollama without its tool template),
``tool_calls`` comes back empty, and an agent that reads only ``tool_calls`` silently stops.

But text is also where a model *quotes*: a data file holding ``<tool_call>…</tool_call>`` shown back in a fence,
a page's example, a reasoning summary the user never sees. A call taken from there would run code no model chose
to call. So :func:`extract` takes a call from the text only when the visible answer (its text parts; never its
reasoning) **is** the call and nothing else:

* one or more ``<tool_call>{…}</tool_call>`` blocks (the last may be left open at the end token);
* one fenced block (```` ```json ````, ```` ``` ````, ```` ```tool_call ````) holding a ``{"name", "arguments"}``
  object, or that object bare;
* with ``code_blocks``, one ```` ```python ```` block: a ``python`` call with that code (a small model asked to run
  code writes it so).

A call is made only for a tool the request offered and from well-formed JSON; it carries ``meta["fromText"]``,
so its approval question and its row say it was read from the model's text, and it goes through the same
approval as any call. Whether a server's text is read at all is the provider's decision (``Shiro.text_calls``:
a local engine's, by default; never a server whose API returns parsed calls, such as api.openai.com).

Pure functions over the transcript's types: no network, no ``openai``.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterable

from ..transcript import Message, Part, TextPart, ToolCallPart

#: ``<tool_call>`` blocks (Qwen, Hermes) and nothing else; the last may be left open when the model stopped
_BLOCKS = re.compile(r"\s*(?:<tool_call>\s*\{.*?\}\s*(?:</tool_call>|$)\s*)+", re.S)
_BLOCK = re.compile(r"<tool_call>\s*(\{.*?\})\s*(?:</tool_call>|$)", re.S)
#: one fenced block and nothing around it: its language and its body
_FENCE = re.compile(r"\s*```([A-Za-z_]*)[ \t]*\n(.*?)\n?```\s*", re.S)
_JSON_FENCES = ("", "json", "tool_call", "tool_code")
_CODE_FENCES = ("python", "py", "python3", "ipython")


def extract(message: Message, names: Iterable[str], *, code_blocks: bool = False) -> Message | None:
    """``message`` with the call its text is (see the module) made a call and the text taken out, or None when it
    has calls already or its text is not a call. ``names``: the tools the request offered; ``code_blocks``: a lone
    ```` ```python ```` block is a ``python`` call."""
    if message.tool_calls():
        return None
    offered = set(names)
    text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
    calls = _action(text, offered, code_blocks)
    if not calls:
        return None
    kept: list[Part] = [p for p in message.parts if not isinstance(p, TextPart)]
    return Message("assistant", [*kept, *calls])


def _action(text: str, offered: set[str], code_blocks: bool) -> list[ToolCallPart]:
    """The calls ``text`` is, whole; [] when it is anything else (a call quoted in prose is not a call)."""
    if not text.strip():
        return []
    if _BLOCKS.fullmatch(text):
        calls = [_call(m.group(1), offered) for m in _BLOCK.finditer(text)]
        return [c for c in calls if c is not None] if all(calls) else []
    fence = _FENCE.fullmatch(text)
    if fence is not None and "```" not in fence.group(2):
        language, body = fence.group(1).lower(), fence.group(2)
        if language in _JSON_FENCES:
            call = _call(body.strip(), offered)
            return [call] if call is not None else []
        if code_blocks and language in _CODE_FENCES and "python" in offered and body.strip():
            return [_made("python", json.dumps({"code": body}, ensure_ascii=False))]
        return []
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        call = _call(stripped, offered)
        return [call] if call is not None else []
    return []


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
    return _made(str(data["name"]), text)


def _made(name: str, arguments: str) -> ToolCallPart:
    return ToolCallPart(f"call_{secrets.token_hex(12)}", name, arguments, meta={"fromText": True})


def notice(model: str, host: str) -> str:
    """Said once per server, the first time."""
    return (
        f"{model} at {host} wrote its tool call as text instead of the API's tool_calls (the server's tool parser "
        "or chat template missed it): shiro runs an answer that is only such a call as a call, asking as for any "
        "call; a call quoted among other text never runs."
    )


__all__ = ["extract", "notice"]
