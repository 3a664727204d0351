"""A turn as it is shown: events folded into a log, rendered as Markdown and plain text.

The log is the single picture of a turn that every view draws from (the blocking text view here,
the widgets later, the static bundle saved in the notebook).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from .events import Event, Notice, ReasoningDelta, TextDelta, ToolEnd, ToolStart, TurnEnd, Usage


@dataclass
class ToolRow:
    call_id: str
    name: str
    args: str  # short form, one line
    status: str = "running"  # running | ok | error
    seconds: float | None = None
    output: str = ""


@dataclass
class TurnLog:
    entries: list[Any] = field(default_factory=list)  # str (text), ToolRow, Notice
    reasoning_chars: int = 0
    end: TurnEnd | None = None

    def feed(self, event: Event) -> bool:
        """Fold one event in; returns True when the visible picture changed."""
        if isinstance(event, TextDelta):
            if self.entries and isinstance(self.entries[-1], str):
                self.entries[-1] += event.text
            else:
                self.entries.append(event.text)
            return True
        if isinstance(event, ReasoningDelta):
            self.reasoning_chars += len(event.text)
            return False
        if isinstance(event, ToolStart):
            self.entries.append(ToolRow(event.call.call_id, event.call.name, short_args(event.call.arguments)))
            return True
        if isinstance(event, ToolEnd):
            for row in reversed(self.entries):
                if isinstance(row, ToolRow) and row.call_id == event.call.call_id:
                    row.status = "error" if event.result.is_error else "ok"
                    row.seconds = event.seconds
                    row.output = event.result.output
                    break
            return True
        if isinstance(event, Notice):
            self.entries.append(event)
            return True
        if isinstance(event, TurnEnd):
            self.end = event
            return True
        return False

    @property
    def answer(self) -> str:
        texts = [e for e in self.entries if isinstance(e, str)]
        return texts[-1] if texts else ""


def short_args(arguments: str, limit: int = 80) -> str:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        value = arguments
    if isinstance(value, dict):
        if len(value) == 1 or "code" in value or "command" in value:
            key = "code" if "code" in value else "command" if "command" in value else next(iter(value), "")
            text = str(value.get(key, ""))
        else:
            text = ", ".join(f"{k}={v!r}" for k, v in value.items() if v is not None)
    else:
        text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _row_line(row: ToolRow, markdown: bool) -> str:
    mark = {"running": "…", "ok": "✓", "error": "✗"}[row.status]
    bits = [row.status if row.status != "ok" else "ok"]
    if row.seconds is not None:
        bits.append(_duration(row.seconds))
    if markdown:
        args = row.args.replace("`", "'")
        return f"`{mark} {row.name}` `{args}` · {' · '.join(bits)}" if args else f"`{mark} {row.name}` · {' · '.join(bits)}"
    return f"{mark} {row.name}({row.args}) · {' · '.join(bits)}"


def footer(usage: Usage, extra: str = "") -> str:
    cost = f" · ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
    text = f"{usage.input_tokens:,} in · {usage.output_tokens:,} out tokens{cost}"
    return f"{text} · {extra}" if extra else text


def to_markdown(log: TurnLog, extra: str = "") -> str:
    out: list[str] = []
    for entry in log.entries:
        if isinstance(entry, str):
            out.append(entry.strip())
        elif isinstance(entry, ToolRow):
            line = _row_line(entry, True)
            if entry.status == "error" and entry.output:
                first = entry.output.strip().splitlines()[0][:160] if entry.output.strip() else ""
                line += f"  \n  ↳ {first}"
            out.append(line)
        else:
            out.append(f"> *{entry.text}*")
    if log.end is not None:
        if log.end.error:
            out.append(f"**shiro:** {log.end.error}")
        elif log.end.reason == "aborted":
            out.append("*stopped by the user*")
        out.append(f"<sub>{footer(log.end.usage, extra)}</sub>")
    return "\n\n".join(s for s in out if s)


def to_text(log: TurnLog, extra: str = "") -> str:
    out: list[str] = []
    for entry in log.entries:
        if isinstance(entry, str):
            out.append(entry.strip())
        elif isinstance(entry, ToolRow):
            out.append(_row_line(entry, False))
        else:
            out.append(f"[{entry.text}]")
    if log.end is not None:
        if log.end.error:
            out.append(f"shiro: {log.end.error}")
        elif log.end.reason == "aborted":
            out.append("stopped by the user")
        out.append(footer(log.end.usage, extra))
    return "\n\n".join(s for s in out if s)


class Throttle:
    """Lets a call through at most every ``interval`` seconds (the last one is flushed by the caller)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last = 0.0

    def ready(self) -> bool:
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            return True
        return False
