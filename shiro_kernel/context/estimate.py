"""The one estimate of a history: its size in tokens, and how full the context is.

The estimate is the seed's, ``round(len(json.dumps(messages_to_json(messages))) / 4)``: an estimate, not a
token count. :func:`part_chars` gives the serialised length of one part field by field, exactly what the
default ``json.dumps`` makes of it, without building the JSON; everything else adds those up (a message is
``{"role": …, "parts": [a, b]}``, a list of messages ``[m1, m2]``). Images count
:data:`IMAGE_TOKENS` each on top of their reference's JSON (OpenAI bills a 1,024-px image at about 765
tokens at high detail).

:func:`percent` is the context meter's figure: the estimate as a share of the pruning threshold.

Imports nothing of the project but the transcript: the session keeps a meter built on this
(:mod:`~shiro_kernel.context.meter`).
"""

from __future__ import annotations

import json
from typing import Any

from ..transcript import Message, Part, TextPart, ToolCallPart, ToolResultPart

#: the estimate at which the wire copy is pruned (``Shiro.compact_threshold``'s default)
DEFAULT_THRESHOLD = 120_000
#: the estimate of one image, in tokens (see the module doc)
IMAGE_TOKENS = 800

# The serialised length of each field's frame, for the default ``json.dumps`` settings (``ensure_ascii``,
# ", " and ": " separators).
_encode_str = json.encoder.encode_basestring_ascii  # what json.dumps does for a str, C-accelerated

#: what an item id adds to a part besides its value: ``, "itemId": ``
ITEM_ID_CHARS = len(', "itemId": ')
#: a message's frame: ``{"role": , "parts": []}``
MESSAGE_CHARS = len('{"role": , "parts": []}')
_META = len(', "meta": ')
_TEXT = len('{"type": "text", "text": }')
_REASONING = len('{"type": "reasoning", "summary": }')
_ENCRYPTED = len(', "encrypted": ')
_CALL = len('{"type": "tool_call", "callId": , "name": , "arguments": }')
_RESULT = len('{"type": "tool_result", "callId": , "name": , "output": }')
_IS_ERROR = len(', "isError": true')
_IMAGES = len(', "images": ')


def json_len(value: Any) -> int:
    """``len(json.dumps(value))``, fast for a string."""
    return len(_encode_str(value)) if type(value) is str else len(json.dumps(value))


def _strings_len(items: list[Any]) -> int:
    """``len(json.dumps(items))``, fast for a list of strings (a reasoning summary)."""
    try:
        n = sum(map(len, map(_encode_str, items)))
    except TypeError:  # not all strings
        return len(json.dumps(items))
    k = len(items)
    return 2 + n + (2 * (k - 1) if k else 0)


def _meta_len(meta: dict[str, Any]) -> int:
    """``len(json.dumps(meta))``, fast for string keys and values (``{"phase": "commentary"}``)."""
    try:
        n = sum(map(len, map(_encode_str, meta))) + sum(map(len, map(_encode_str, meta.values())))
    except TypeError:  # a value (or a key) that is not a string
        return len(json.dumps(meta))
    k = len(meta)
    return 2 + n + 4 * k - 2 if k else 2


def part_chars(part: Part, *, with_id: bool = True) -> int:
    """``len(json.dumps(part_to_json(part)))`` (plus ``IMAGE_TOKENS * 4`` per image); with
    ``with_id=False`` as if its item id were detached."""
    if isinstance(part, TextPart):
        n = _TEXT + json_len(part.text)
    elif isinstance(part, ToolResultPart):
        n = _RESULT + json_len(part.call_id) + json_len(part.name) + json_len(part.output)
        if part.is_error:
            n += _IS_ERROR
        if part.images:
            n += _IMAGES + len(json.dumps([i.to_json() for i in part.images])) + IMAGE_TOKENS * 4 * len(part.images)
    elif isinstance(part, ToolCallPart):
        n = _CALL + json_len(part.call_id) + json_len(part.name) + json_len(part.arguments)
    else:
        n = _REASONING + _strings_len(part.summary)
        if part.encrypted is not None:
            n += _ENCRYPTED + json_len(part.encrypted)
    if with_id and part.item_id is not None:
        n += ITEM_ID_CHARS + json_len(part.item_id)
    if part.meta:
        n += _META + _meta_len(part.meta)
    return n


#: each role's message frame with the role in it
ROLE_CHARS = {role: MESSAGE_CHARS + len(json.dumps(role)) for role in ("user", "assistant", "tool", "system")}


def message_chars_from(role: str, part_sizes: list[int]) -> int:
    """A message's serialised length from its parts' (``{"role": …, "parts": [a, b]}``)."""
    k = len(part_sizes)
    return MESSAGE_CHARS + json_len(role) + sum(part_sizes) + (2 * (k - 1) if k > 0 else 0)


def message_chars(message: Message) -> int:
    """``len(json.dumps(message.to_json()))``."""
    return message_chars_from(message.role, [part_chars(p) for p in message.parts])


def user_message_chars(text: str) -> int:
    """``message_chars(Message.user(text))``."""
    return MESSAGE_CHARS + json_len("user") + _TEXT + json_len(text)


def tokens_of(chars: int, count: int) -> int:
    """The estimate of a list of ``count`` messages whose own lengths add up to ``chars``:
    ``json.dumps`` of a list is ``"[" + ", ".join(items) + "]"``."""
    return round((2 + chars + (2 * (count - 1) if count > 0 else 0)) / 4)


def estimate_tokens(messages: list[Message]) -> int:
    """``round(len(json.dumps(messages_to_json(messages))) / 4)``."""
    return tokens_of(sum([message_chars(m) for m in messages]), len(messages))


def percent(estimate: int, threshold: int = DEFAULT_THRESHOLD) -> int:
    """Context used as a percentage of the pruning threshold: ``min(100, est/threshold·100 rounded half up)``."""
    if threshold <= 0:
        return 100
    return min(100, int(estimate / threshold * 100 + 0.5))  # half up (0.5 % shows 1 %), as the seed's Math.round


__all__ = [
    "DEFAULT_THRESHOLD",
    "IMAGE_TOKENS",
    "ITEM_ID_CHARS",
    "MESSAGE_CHARS",
    "ROLE_CHARS",
    "estimate_tokens",
    "json_len",
    "message_chars",
    "message_chars_from",
    "part_chars",
    "percent",
    "tokens_of",
    "user_message_chars",
]
