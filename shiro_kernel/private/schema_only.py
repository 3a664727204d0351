"""``values: schema-only`` (the administrator's policy, :mod:`shiro_kernel.policy`): no value of the data leaves
the kernel, masked or not — only what describes it.

What the model works from is what describes the data: the workspace block's names, kinds, shapes and row counts
(:mod:`~shiro_kernel.context.workspace`, with no example value and no variable's value), and the code it wrote
itself. What the tools return — a call's printed output, a file's lines, a notebook's outputs, a figure, an MCP
tool's answer — is shown to the user as always, and reaches the model as one line saying it was not sent
(:func:`withheld`): how long it was, and for a failed call the exception's name alone, so the model can still
fix its code. The results that pass are those of the tools whose results are the agent's own bookkeeping, never
the data's (``Tool.values`` False: the task list, the tool list, the memories the user keeps with it).

It applies at the provider's one boundary, to every request built from the history (both APIs, a resumed
session's older results too, ``/compact``'s summary request), before the private values' mask and the
redaction; a result is replaced the same way every time it is sent, so the cached prefix stays byte-stable.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..transcript import Message, ToolResultPart

#: the mode's name, as the policy file says it
SCHEMA_ONLY = "schema-only"

#: what the model reads in place of a withheld result
NOT_SENT = (
    "[not sent: the administrator's policy sends no data values (values: schema-only); the user sees this "
    "output, {size}]"
)
#: the exception's name at the end of a traceback (``KeyError: 'x'`` → ``KeyError``)
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit))\b", re.MULTILINE)


def notice(part: ToolResultPart) -> str:
    """The line a withheld result is sent as."""
    lines = part.output.count("\n") + 1 if part.output else 0
    size = f"{lines:,} line{'s' if lines != 1 else ''}" if part.output else "empty"
    if part.images:
        size += f", {len(part.images)} image{'s' if len(part.images) != 1 else ''}"
    text = NOT_SENT.format(size=size)
    found = _EXCEPTION.findall(part.output)  # a traceback's last line (the python tool's output holds it)
    if found or part.is_error:
        text = f"Error: {found[-1] if found else 'the call failed'} (its message not sent). " + text
    return text


def withheld_part(part: ToolResultPart, passing: frozenset[str]) -> ToolResultPart:
    """``part`` as schema-only lets it leave: as :func:`notice`, unless it is a ``passing`` tool's or a refused
    call's (whose text is the refusal)."""
    if part.name in passing or part.refused:
        return part
    return replace(part, output=notice(part), images=[], meta={})


def withheld(message: Message, passing: frozenset[str]) -> Message:
    """``message`` as schema-only lets it leave: a tool message's results as :func:`withheld_part`; any other
    message as it is."""
    if message.role != "tool":
        return message
    parts = [withheld_part(p, passing) if type(p) is ToolResultPart else p for p in message.parts]
    if all(a is b for a, b in zip(parts, message.parts)):
        return message
    return replace(message, parts=parts)


__all__ = ["NOT_SENT", "SCHEMA_ONLY", "notice", "withheld", "withheld_part"]
