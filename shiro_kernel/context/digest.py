"""The digest of a pruned span: what the tool content the wire copy left out held, in one short paragraph
the model reads instead of nothing (no model call).

Its first line is ``[context pruned: <n> earlier messages not shown]``; then the tools used and how often,
the files touched (the files each call's tool says it reads or writes: ``Tool.touches``), how many results failed (``is_error``) and the
last three outcomes, and the last three things the assistant said (its decisions). At most
:data:`DIGEST_LIMIT` characters. :class:`Digest` adds a span up message by message, so the session's meter
(:meth:`~shiro_kernel.context.meter.TokenMeter.digest`) reads only what a grown span added.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from typing import TYPE_CHECKING

from ..text import cut, one_line
from ..transcript import Message, TextPart, ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    from ..tools.base import Tool

DIGEST_LIMIT = 1_500


@cache
def _tools() -> dict[str, Tool]:
    """The built-in tools, whose declarations name the files a call touches (imported when first needed: the
    tools' modules import the context's)."""
    from ..tools import all_tools

    return all_tools()


def files_of(call: ToolCallPart) -> tuple[str, ...]:
    """The files (or the glob) ``call`` names, as its tool says (``Tool.touches``: what it reads, then what it
    writes); none for a tool that says nothing or is not known here (an MCP server's)."""
    tool = _tools().get(call.name)
    if tool is None or tool.touches is None:
        return ()
    try:
        said = tool.touches(call.parsed_arguments(), None)
    except ValueError:
        return ()
    return (*said.reads, *said.writes)


class Digest:
    """What a pruned span held (tools, files, outcomes, decisions), added up message by message: the
    span of the next step only grew, so only its new messages are read."""

    __slots__ = ("decisions", "errors", "files", "outcomes", "seen", "tools")

    def __init__(self) -> None:
        self.tools: Counter[str] = Counter()
        self.files: list[str] = []
        self.seen: set[str] = set()
        self.errors = 0
        self.outcomes: list[ToolResultPart] = []  # the last three
        self.decisions: list[str] = []  # the last three

    def add(self, m: Message) -> None:
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                self.tools[p.name] += 1
                for value in files_of(p):
                    if value and value not in self.seen:
                        self.seen.add(value)
                        self.files.append(value)
            elif isinstance(p, ToolResultPart):
                if p.is_error:
                    self.errors += 1
                self.outcomes = [*self.outcomes[-2:], p]
            elif isinstance(p, TextPart) and m.role == "assistant" and p.text.strip():
                self.decisions = [*self.decisions[-2:], p.text]

    def text(self, hidden: int) -> str:
        lines = [heading(hidden)]
        if self.tools:
            lines.append("tools used: " + ", ".join(f"{name} ×{count}" for name, count in self.tools.most_common(12)))
        if self.files:
            shown = self.files[-15:]
            more = f" (+{len(self.files) - len(shown)} more)" if len(self.files) > len(shown) else ""
            lines.append("files touched: " + ", ".join(shown) + more)
        if self.outcomes:
            errors = self.errors
            lines.append(
                f"outcomes: {errors} error{'s' if errors != 1 else ''}; last: "
                + " | ".join(_outcome(p) for p in self.outcomes)
            )
        if self.decisions:
            lines.append("decisions: " + " | ".join(_clip_line(text, 120) for text in self.decisions))
        return cut("\n".join(lines), DIGEST_LIMIT, ellipsis="…")


def heading(hidden: int) -> str:
    """The digest's first line (all of it, at least)."""
    return f"[context pruned: {hidden} earlier messages not shown]"


def _outcome(p: ToolResultPart) -> str:
    lines = [ln for ln in p.output.strip().splitlines() if ln.strip()]
    return f"{p.name}: {_clip_line(lines[-1], 80) if lines else '(empty)'}"


def pruned_digest(messages: list[Message], span: tuple[int, int], hidden: int) -> str:
    """One short paragraph on what the pruned span held; no model call, at most ``DIGEST_LIMIT`` chars."""
    start, end = span
    digest = Digest()
    for m in messages[start:end]:
        digest.add(m)
    return digest.text(hidden)


def _clip_line(text: str, limit: int) -> str:
    return one_line(text, limit, "…")


__all__ = ["DIGEST_LIMIT", "Digest", "heading", "pruned_digest"]
