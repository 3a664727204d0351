"""A turn as it is shown: events folded into a log, rendered as Markdown, plain text, HTML and the
``application/vnd.shiro.turn+json`` bundle.

The log is the single picture of a turn that every view draws from (the blocking text view, the live
widgets, the static bundle saved in the notebook). A tool row carries the call's full arguments (shown
with their line breaks when the row is expanded) and what the call displayed (:mod:`.outputs`), drawn
under the row.

The model's text is never trusted, whatever the notebook's trust (a notebook the user ran or saved is
trusted, and JupyterLab does not sanitize a trusted output): the answer, a tool row's text, notices and
errors are made inert in every rendering here (see "the model's text is never trusted" below). Only what
the user's approved code displayed (:mod:`.outputs`) keeps the trust of a cell output.
"""

from __future__ import annotations

import html
import json
import time
from dataclasses import dataclass, field
from typing import Any

from .. import egress
from ..events import (
    BudgetReached,
    BudgetUnchecked,
    Event,
    Notice,
    NumbersChecked,
    ReasoningDelta,
    Recorded,
    Sent,
    TextDelta,
    ToolEnd,
    ToolProgress,
    ToolStart,
    TurnEnd,
    Usage,
)
from ..numbers.answer import ends_block
from ..text import first_line, one_line
from . import marks, outputs
from .money import budget_message, tokens, unpriced_budget
from .sanitize import inert_line, inert_markdown, md_code, md_to_html, plain_text


@dataclass
class ToolRow:
    call_id: str
    name: str
    args: str  # short form, one line
    status: str = "running"  # running | ok | error
    seconds: float | None = None
    output: str = ""
    code: str = ""  # the arguments in full (the code, the command), line breaks kept
    started: float | None = None  # time.monotonic() when the call started (the live row's elapsed time)
    outputs: list[dict[str, Any]] = field(default_factory=list)  # what the call displayed
    progress: str = ""  # the running call's last progress line
    refused: bool = False  # not run: not approved (its whole first line says how to allow it)
    stopped: bool = False  # stopped (by the user, the time limit, a restart) before or while it ran
    #: a cell change the call asked for (``notebook_edit`` …): kind, cell, added, removed, diff, status
    change: dict[str, Any] = field(default_factory=dict)


@dataclass
class TurnLog:
    entries: list[Any] = field(default_factory=list)  # str (text), ToolRow, Notice
    end: TurnEnd | None = None
    #: what the saved bundle needs to replay the turn (a :class:`~shiro_kernel.events.Recorded` event's)
    replay: dict[str, Any] = field(default_factory=dict)
    #: the answer's numbers looked up in the turn's outputs (a NumbersChecked event's, offsets checked against
    #: :attr:`answer`); None when the turn was not checked
    numbers: list[dict[str, Any]] | None = None
    #: what the turn's requests took off the machine (:class:`~shiro_kernel.events.Sent`), for the footer
    sent: list[egress.Request] = field(default_factory=list)

    def feed(self, event: Event) -> bool:
        """Fold one event in; returns True when the visible picture changed."""
        if isinstance(event, Sent):
            self.sent.append(event.request)
            return False
        if isinstance(event, TextDelta):
            if self.entries and isinstance(self.entries[-1], str):
                self.entries[-1] += event.text
            else:
                self.entries.append(event.text)
            return True
        if isinstance(event, ReasoningDelta):
            return False  # reasoning is not shown
        if ends_block(event):  # the only entries that are not text; the answer's block ends here, as the check's
            self.entries.append(_entry(event))
            return True
        if isinstance(event, ToolProgress):
            for row in reversed(self.entries):
                if isinstance(row, ToolRow) and row.call_id == event.call_id and row.status == "running":
                    row.progress = one_line(event.text, 120)
                    return True
            return False
        if isinstance(event, ToolEnd):
            for row in reversed(self.entries):
                if isinstance(row, ToolRow) and row.call_id == event.call.call_id:
                    row.status = "error" if event.result.is_error else "ok"
                    row.seconds = event.seconds
                    row.output = event.result.output
                    row.outputs = list(event.result.displays)
                    row.refused = event.result.refused
                    row.stopped = event.result.stopped
                    change = event.result.meta.get("change")
                    row.change = dict(change) if isinstance(change, dict) else {}
                    break
            return True
        if isinstance(event, Recorded):
            self.replay = dict(event.fields)
            return False
        if isinstance(event, NumbersChecked):
            self.numbers = marks.aligned(self.answer, event.numbers)
            return True
        if isinstance(event, TurnEnd):
            self.end = event
            return True
        return False

    @property
    def answer(self) -> str:
        """The turn's answer: its last text entry (:mod:`shiro_kernel.numbers.answer`'s rule), '' when none."""
        texts = [e for e in self.entries if isinstance(e, str)]
        return texts[-1] if texts else ""

    @property
    def answer_index(self) -> int:
        """The index of :attr:`answer` in :attr:`entries` (the last text), -1 when there is none."""
        return next((i for i in range(len(self.entries) - 1, -1, -1) if isinstance(self.entries[i], str)), -1)

    def marked(self, index: int) -> bool:
        """Is entry ``index`` the answer, with numbers to mark?"""
        return bool(self.numbers) and index == self.answer_index

    def call_names(self) -> dict[str, str]:
        """How a number's hover names its call: call id -> ``call 2 (python)``, counted in the turn."""
        rows = [e for e in self.entries if isinstance(e, ToolRow)]
        return {row.call_id: f"call {i} ({row.name})" for i, row in enumerate(rows, 1)}


#: a call read from the model's text (:mod:`~shiro_kernel.provider.textcalls`), as its row and question say it
FROM_TEXT = "(read from the model's text)"


def _entry(event: ToolStart | Notice | BudgetReached | BudgetUnchecked) -> ToolRow | Notice:
    """The log's entry for an event that ends a block of text (:func:`~shiro_kernel.numbers.answer.ends_block`):
    a tool row, the notice, or the budget's line as a notice."""
    if isinstance(event, ToolStart):
        call = event.call
        return ToolRow(
            call.call_id,
            call.name,
            (FROM_TEXT + " " if call.meta.get("fromText") else "") + short_args(call.arguments),
            code=full_args(call.arguments),
            started=time.monotonic(),
        )
    if isinstance(event, BudgetReached):  # the turn deals in numbers; the line is the view's
        return Notice(budget_message(event.spent_usd, event.budget_usd), kind="warning")
    if isinstance(event, BudgetUnchecked):
        return Notice(unpriced_budget(event.budget_usd, event.model), kind="warning")
    return event


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
    return one_line(text, limit)


def full_args(arguments: str) -> str:
    """The arguments as a person reads them: the code or command itself, else indented JSON."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return arguments
    if isinstance(value, dict):
        for key in ("code", "command"):
            if isinstance(value.get(key), str):
                return str(value[key])
        return json.dumps({k: v for k, v in value.items() if v is not None}, indent=2, ensure_ascii=False)
    return str(value)


def refusal_line(row: ToolRow) -> str:
    """The first line of an error result: whole for a refusal (it says how to allow the call), else cut."""
    if row.refused:
        return first_line(row.output, 10_000)
    return first_line(row.output, 160)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


CHANGED = {"edit": "edited", "insert": "inserted", "delete": "deleted"}
NOT_CHANGED = {"edit": "edit of", "delete": "delete of"}
#: a change in the document (accepted, or applied under approval = "auto") is ✓, one under way …, else ✗
CHANGE_MARKS = {"accepted": "✓", "applied": "✓", "pending": "…", "running": "…"}


def _count(n: object) -> int:
    return max(0, int(n)) if isinstance(n, int | float) and not isinstance(n, bool) and n == n else 0


def change_line(change: dict[str, Any]) -> str:
    """A cell change as its compact row, the same words as the labextension's (``format.ts``):
    ``✓ edited cell 3: +2 −1`` when it is in the document, else ``✗ edit of cell 3: +2 −1 · rejected``; an
    insert not made says where it was to go (``✗ insert after cell 1: +1 −0 · rejected``; the kernel keeps
    the cell it was to follow, -1 for the top, -2 for below the asking cell)."""
    kind = str(change.get("kind") or "edit")
    cell = change.get("cell")
    cell = cell if isinstance(cell, int) and not isinstance(cell, bool) else 0
    status = str(change.get("status") or "")
    counts = f"+{_count(change.get('added'))} −{_count(change.get('removed'))}"
    mark = CHANGE_MARKS.get(status, "✗")
    if status in ("accepted", "applied"):
        return f"{mark} {CHANGED.get(kind, kind)} cell {cell}: {counts}"
    if kind == "insert":
        what = (
            "insert at the top"
            if cell == -1
            else "insert below this cell"
            if cell < -1
            else f"insert after cell {cell}"
        )
    else:
        what = f"{NOT_CHANGED.get(kind, kind)} cell {cell}"
    return f"{mark} {what}: {counts} · {status}"


def _row_line(row: ToolRow, markdown: bool) -> str:
    if row.change and row.status != "running":
        line = change_line(row.change)
        return md_code(line) if markdown else line
    mark = {"running": "…", "ok": "✓", "error": "✗"}[row.status]
    bits = [row.status if row.status != "ok" else "ok"]
    if row.seconds is not None:
        bits.append(_duration(row.seconds))
    elif row.status == "running" and row.started is not None:
        bits.append(f"{time.monotonic() - row.started:.0f} s")
    if row.status == "running" and row.progress:
        bits.append(inert_line(row.progress) if markdown else row.progress)
    if markdown:  # the name, the arguments and the progress come from the model or a server: inert
        name = md_code(f"{mark} {row.name}")
        return f"{name} {md_code(row.args)} · {' · '.join(bits)}" if row.args else f"{name} · {' · '.join(bits)}"
    return f"{mark} {row.name}({row.args}) · {' · '.join(bits)}"


def _footer_line(log: TurnLog, extra: str) -> str:
    """The footer of a finished turn, after the numbers line when some were not found."""
    assert log.end is not None
    line = marks.numbers_line(log.numbers)
    sent = egress.brief(log.sent)
    extra = f"{sent} · {extra}" if sent and extra else sent or extra
    return f"{line} · {footer(log.end.usage, extra)}" if line else footer(log.end.usage, extra)


def footer(usage: Usage, extra: str = "") -> str:
    cost = f" · ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
    text = f"{tokens(usage)}{cost}"
    return f"{text} · {extra}" if extra else text


# -- the model's text is never trusted -------------------------------------------------------------------
# JupyterLab and Notebook 7 render a trusted output's text/markdown without sanitizing it, and run its
# <script>s. So model text goes into Markdown with nothing a renderer would turn into markup: every `<` that
# could open a tag (`<` + a letter, `/`, `!` or `?`) becomes `&lt;` (text in Markdown, and in raw HTML too),
# a code span holding one becomes `<code>` with its characters as entities (shown the same), and a link
# target whose scheme is not http, https or mailto (entities and escapes decoded first) gets a leading `#`
# (a fragment: inert). Only fenced code blocks keep their `<`: those the scan is sure every renderer reads
# as code (see `_FenceScan`); once unsure, it escapes the rest of the text, code blocks included.


def to_markdown(log: TurnLog, extra: str = "") -> str:
    """The turn as Markdown. Model text in it is inert (:func:`inert_markdown`, :func:`inert_line`), so a
    trusted notebook's Markdown renderer runs nothing of it; what approved code displayed is kept as is
    (:func:`.outputs.to_markdown`): that code could display script itself, like any cell."""
    out: list[str] = []
    for index, entry in enumerate(log.entries):
        if isinstance(entry, str):
            numbers = log.numbers if log.marked(index) else None
            out.append(marks.markdown(entry, numbers) if numbers else inert_markdown(entry.strip()))
        elif isinstance(entry, ToolRow):
            line = _row_line(entry, True)
            if entry.status == "error" and entry.output:
                line += f"  \n  ↳ {inert_line(refusal_line(entry))}"
            out.append(line)
            out.extend(outputs.to_markdown(o) for o in entry.outputs)
        else:
            out.append(f"> *{inert_line(entry.text)}*")
    if log.end is not None:
        if log.end.error:
            out.append(f"**shiro:** {inert_line(log.end.error)}")
        elif log.end.reason == "aborted":
            out.append("*stopped by the user*")
        out.append(f"<sub>{inert_line(_footer_line(log, extra))}</sub>")
    return "\n\n".join(s for s in out if s)


def to_text(log: TurnLog, extra: str = "") -> str:
    """The turn as plain text, with no control character a terminal would obey (:func:`plain_text`)."""
    out: list[str] = []
    for index, entry in enumerate(log.entries):
        if isinstance(entry, str):
            out.append(marks.text(entry, log.numbers) if log.numbers and log.marked(index) else entry.strip())
        elif isinstance(entry, ToolRow):
            line = _row_line(entry, False)
            if entry.status == "error" and entry.output:
                line += f"\n  ↳ {refusal_line(entry)}"
            out.append("\n".join([line, *(f"  {outputs.describe(o)}" for o in entry.outputs)]))
        else:
            out.append(f"[{entry.text}]")
    if log.end is not None:
        if log.end.error:
            out.append(f"shiro: {log.end.error}")
        elif log.end.reason == "aborted":
            out.append("stopped by the user")
        out.append(_footer_line(log, extra))
    return plain_text("\n\n".join(s for s in out if s))


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


# -- static rendering: what stays in the notebook without a kernel ---------------------------------------
TURN_FORMAT_VERSION = 1
_OUTPUT_KEEP = 4000  # characters of each tool output kept in the saved bundle
#: the keys of each of the bundle's ``numbers`` (docs/turn-format.md)
NUMBER_KEYS = ("text", "found", "call_id", "start", "end", "line")


def to_bundle_json(
    log: TurnLog,
    *,
    session_id: str | None = None,
    tasks: list[dict[str, Any]] | None = None,
    context_percent: int | None = None,
    resume: str | None = None,
) -> dict[str, Any]:
    """The turn as ``application/vnd.shiro.turn+json`` (documented in docs/turn-format.md)."""
    entries: list[dict[str, Any]] = []
    budget = outputs.TURN_OUTPUT_BYTES
    for entry in log.entries:
        if isinstance(entry, str):
            entries.append({"type": "text", "text": entry})
        elif isinstance(entry, ToolRow):
            kept, budget = outputs.within_budget(entry.outputs, budget)
            output = (
                entry.output
                if len(entry.output) <= _OUTPUT_KEEP
                else (entry.output[:_OUTPUT_KEEP] + f"\n[... {len(entry.output) - _OUTPUT_KEEP} more characters]")
            )
            entries.append(
                {
                    "type": "tool",
                    "callId": entry.call_id,
                    "name": entry.name,
                    "args": entry.args,
                    "status": entry.status,
                    "seconds": entry.seconds,
                    "output": output,
                    "code": entry.code[:_OUTPUT_KEEP],
                    "outputs": kept,
                    **({"refused": True} if entry.refused else {}),
                    **({"stopped": True} if entry.stopped else {}),
                    **({"change": _kept_change(entry.change)} if entry.change else {}),
                }
            )
        else:
            entries.append({"type": "notice", "kind": entry.kind, "text": entry.text})
    data: dict[str, Any] = {"version": TURN_FORMAT_VERSION, "entries": entries, **log.replay}
    if session_id:
        data["sessionId"] = session_id
    if tasks is not None:
        data["tasks"] = tasks
    if log.end is not None:
        u = log.end.usage
        data["usage"] = {"inputTokens": u.input_tokens, "outputTokens": u.output_tokens, "costUsd": u.cost_usd}
        if u.cached_input_tokens:
            data["usage"]["cachedInputTokens"] = u.cached_input_tokens
        if u.estimated:
            data["usage"]["estimated"] = True  # the server sent no usage: the counts are the estimate
        data["end"] = {"reason": log.end.reason, "error": log.end.error}
    if log.numbers is not None:
        data["numbers"] = [{key: n.get(key) for key in NUMBER_KEYS} for n in log.numbers]
    if context_percent is not None:
        data["contextPercent"] = context_percent
    if resume:
        data["resume"] = resume
    return data


def to_html(log: TurnLog, extra: str = "") -> str:
    """A self-contained HTML picture of the turn (GitHub, nbviewer): tool rows expand on click. Model text
    is escaped (:func:`entry_html`); what approved code displayed is kept as a cell output would be."""
    out = ['<div class="shiro-turn">']
    budget = outputs.TURN_OUTPUT_BYTES
    for index, entry in enumerate(log.entries):
        out.append(log_entry_html(log, index))
        if isinstance(entry, ToolRow) and entry.outputs:
            kept, budget = outputs.within_budget(entry.outputs, budget)
            out.extend(outputs.to_html(o) for o in kept)
    if log.end is not None:
        if log.end.error:
            out.append(f"<p><strong>shiro:</strong> {html.escape(log.end.error)}</p>")
        elif log.end.reason == "aborted":
            out.append("<p><em>stopped by the user</em></p>")
        out.append(f"<p><sub>{html.escape(_footer_line(log, extra))}</sub></p>")
    out.append("</div>")
    return "\n".join(out)


def _kept_change(change: dict[str, Any]) -> dict[str, Any]:
    diff = str(change.get("diff") or "")
    return {**change, "diff": diff if len(diff) <= _OUTPUT_KEEP else diff[:_OUTPUT_KEEP] + "\n[… the diff is cut]"}


def _diff_html(diff: str, anchor: str) -> str:
    """A change's diff as escaped lines, removed red and added green (the diff is the model's text)."""
    lines = []
    for line in diff[:_OUTPUT_KEEP].splitlines():
        colour = "#b31d28" if line.startswith("-") else "#22863a" if line.startswith("+") else "inherit"
        lines.append(f'<span style="color:{colour}">{html.escape(line)}</span>')
    return (
        f'<pre class="shiro-cell-diff" id="{anchor}" style="white-space:pre;overflow:auto;max-height:24em">'
        + "\n".join(lines)
        + "</pre>"
    )


def log_entry_html(log: TurnLog, index: int) -> str:
    """Entry ``index`` of the log as HTML (:func:`entry_html`), the answer with its numbers marked
    (:func:`.marks.html_answer`: a found one links to its tool row, one found nowhere is marked ⚠)."""
    entry = log.entries[index]
    if log.numbers and log.marked(index):
        return marks.html_answer(entry, log.numbers, log.call_names())
    return entry_html(entry)


def entry_html(entry: Any) -> str:
    """One log entry as HTML: text as Markdown, a tool row as ``<details>`` (output on expand), a notice.
    Every string from the model or a tool is escaped; the live widgets draw these too."""
    if isinstance(entry, str):
        return md_to_html(entry.strip())
    if isinstance(entry, ToolRow) and entry.change and entry.status != "running":
        summary = html.escape(change_line(entry.change))
        return (
            f'<details class="shiro-tool shiro-cell-change"><summary><code>{summary}</code></summary>'
            f"{_diff_html(str(entry.change.get('diff') or ''), marks.call_anchor(entry.call_id))}</details>"
        )
    if isinstance(entry, ToolRow):
        summary = html.escape(_row_line(entry, False))
        code = (
            (
                f'<pre class="shiro-tool-code" style="white-space:pre;overflow:auto;max-height:24em">'
                f"{html.escape(entry.code[:_OUTPUT_KEEP])}</pre>"
            )
            if entry.code
            else ""
        )
        body = html.escape(entry.output[:_OUTPUT_KEEP])
        refusal = (
            f'<div class="shiro-tool-error">↳ {html.escape(refusal_line(entry))}</div>'
            if entry.status == "error" and entry.output
            else ""
        )
        return (
            f'<details class="shiro-tool"><summary><code>{summary}</code></summary>{code}'
            f'<pre id="{marks.call_anchor(entry.call_id)}" style="white-space:pre-wrap;max-height:24em;overflow:auto">'
            f"{body}</pre></details>{refusal}"
        )
    return f"<blockquote><em>{html.escape(entry.text)}</em></blockquote>"
