"""The live view of a turn (ipywidgets): streamed Markdown, tool rows, task panel, context meter,
prompt queue, Stop and approval buttons, and, once the turn has ended, an Undo button on each row whose step
the kernel can still take back (:meth:`TurnView.offer_undo`).

Everything here runs on the kernel's main thread (the background turn hands events over through
:class:`shiro_kernel.ui.live.Inbox`). Redrawing is throttled (``render.Throttle(1/30)``): a burst of
deltas becomes at most ~30 widget updates a second, and the last state is always flushed. Only
widgets whose value changed send anything (traitlets compares), so while text streams, one
``HTML`` widget (the current text block) is the only one that updates.

No widget state holds a setting or the environment: the API key cannot reach the notebook.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as W

from ..events import Event, Notice, StepStart, ToolEnd, ToolStart, TurnEnd
from ..tasks import MARKERS, progress_bar
from ..text import one_line
from .context_label import meter_label
from .marks import numbers_line
from .money import tokens
from .outputs import TURN_OUTPUT_BYTES, within_budget
from .render import Throttle, ToolRow, TurnLog, log_entry_html

UPDATES_PER_SECOND = 30
#: the busy line shows the elapsed time from this many seconds on
BUSY_SECONDS_FROM = 10
QUEUE_CUT = 70

_COLOURS = {"normal": "#666", "amber": "#b8860b", "red": "#c0392b"}


def queue_lines(items: list[str]) -> list[str]:
    """The seed's queue panel: ``queued: <n>`` then ``  <i>. <text>`` (cut at 70 + ``...``); [] when empty."""
    if not items:
        return []
    out = [f"queued: {len(items)}"]
    for i, text in enumerate(items, 1):
        out.append(f"  {i}. {one_line(text, QUEUE_CUT, room=False)}")
    return out


def tasks_html(items: list[dict[str, Any]]) -> str:
    """Bar + markers; done items struck through, notes as ``  (note)``."""
    if not items:
        return ""
    lines = [html.escape(progress_bar(items))]
    for item in items:
        text = html.escape(item["content"])
        if item["status"] == "done":
            text = f"<s>{text}</s>"
        note = item.get("note")
        line = f"{html.escape(MARKERS[item['status']])} {text}"
        if isinstance(note, str) and note.strip():
            line += f"  ({html.escape(note.strip())})"
        lines.append(line)
    return '<pre class="shiro-tasks" style="margin:0">' + "\n".join(lines) + "</pre>"


def meter_html(pct: int | None) -> str:
    if pct is None:
        return ""
    label, level = meter_label(pct)
    return f'<span class="shiro-meter shiro-{level}" style="color:{_COLOURS[level]}">{html.escape(label)}</span>'


VERDICTS = {
    "approve": "approved",
    "deny": "denied",
    "always": "approved for this session",
    "unanswered": "not answered in time (Shiro.approval_timeout_s): refused",
}


class ApprovalBox(W.VBox):  # type: ignore[misc]  # ipywidgets has no annotations
    """The one approval UI: what a call would do, and Approve / Deny / Always this session. The notebook's
    own turns show it in their live view; another agent's calls (``/mcp serve``) get one per request under
    the serve cell; a repository's MCP server asks with it relabelled Allow / Deny. ``answer`` gets
    approve | deny | always once, on the kernel's thread (a click)."""

    def __init__(self, *, keep_outcome: bool = False) -> None:
        self.label = W.HTML("")
        self.approve_button = W.Button(description="Approve", button_style="success")
        self.deny_button = W.Button(description="Deny", button_style="danger")
        self.always_button = W.Button(description="Always this session")
        self.buttons = W.HBox([self.approve_button, self.deny_button, self.always_button])
        #: after an answer, show who answered what (another agent's requests) instead of hiding the box
        self.keep_outcome = keep_outcome
        self._answer: Callable[[str], None] | None = None
        self._subject = ""
        for button, verdict in (
            (self.approve_button, "approve"),
            (self.deny_button, "deny"),
            (self.always_button, "always"),
        ):
            button.on_click(lambda _b, v=verdict: self.resolve(v))
        super().__init__([self.label, self.buttons], layout=W.Layout(display="none"))

    def ask(
        self,
        name: str,
        title: str,
        body_html: str,
        answer: Callable[[str], None],
        *,
        who: str = "shiro",
        approve: str = "Approve",
        always: bool = True,
    ) -> None:
        """Show the question for one call (``body_html``: highlighted code, a diff, the text to store)."""
        self._answer = answer
        self._subject = f"{who}: {name}"
        self.approve_button.description = approve
        self.always_button.layout.display = None if always else "none"
        self.buttons.layout.display = None
        self.label.value = (
            f"<b>{html.escape(who)} wants to {html.escape(title)}</b> <code>{html.escape(name)}</code>{body_html}"
        )
        self.layout.display = "flex"

    @property
    def asking(self) -> bool:
        """A question is showing and not answered yet."""
        return self._answer is not None

    def resolve(self, verdict: str) -> None:
        answer, self._answer = self._answer, None
        if self.keep_outcome:
            self.buttons.layout.display = "none"
            self.label.value = html.escape(f"{self._subject} {VERDICTS[verdict]}")
        else:
            self.clear()
        if answer is not None:
            answer(verdict)

    def clear(self) -> None:
        self._answer = None
        self.layout.display = "none"
        self.label.value = ""
        self.approve_button.description = "Approve"  # the next question is a call's, unless it says otherwise
        self.always_button.layout.display = None


class UndoBar(W.VBox):  # type: ignore[misc]  # ipywidgets has no annotations
    """Under a tool row of an ended turn: Undo (that step and every one after it) while the kernel can take it
    back, ``undone`` once it was, and what the last Undo here restored and could not."""

    def __init__(self, call_id: str, on_undo: Callable[[str], None]) -> None:
        self.call_id = call_id
        self.button = W.Button(
            description="Undo",
            icon="undo",
            tooltip="take back this step and every one after it (variables, files, cell changes)",
            layout=W.Layout(width="auto"),
        )
        self.mark = W.HTML("")
        self.report = W.HTML("")
        self.button.on_click(lambda _b: self._clicked(on_undo))
        super().__init__([W.HBox([self.button, self.mark]), self.report], layout=W.Layout(margin="0 0 0 1.5em"))
        self.add_class("shiro-undo")

    def _clicked(self, on_undo: Callable[[str], None]) -> None:
        self.button.disabled = True  # one click; the view's buttons follow once the undo has ended
        self.report.value = "<em>taking back this step and those after it…</em>"
        on_undo(self.call_id)

    def show(self, *, can_undo: bool, undone: bool) -> None:
        self.button.layout.display = None if can_undo else "none"
        self.button.disabled = False
        self.mark.value = '<em class="shiro-undone">↶ undone</em>' if undone else ""


class TurnView(W.VBox):  # type: ignore[misc]  # ipywidgets has no annotations
    """One turn's live view. Feed it events with :meth:`feed` (on the kernel thread)."""

    def __init__(
        self,
        *,
        on_stop: Callable[[], None] | None = None,
        interval: float = 1 / UPDATES_PER_SECOND,
        call_later: Callable[[float, Callable[[], None]], Any] | None = None,
        meter: Callable[[], int | None] | None = None,
        tasks: Callable[[], list[dict[str, Any]]] | None = None,
        **kwargs: Any,
    ) -> None:
        self.turn_log = TurnLog()
        self.throttle = Throttle(interval)
        self.interval = interval
        self._call_later = call_later  # schedules the trailing flush (the kernel loop's call_later)
        self._flush_pending = False
        self._dirty = False
        self._last_flush = 0.0
        self._flush_cost = 0.0
        self._meter = meter or (lambda: None)
        self._tasks = tasks or (lambda: [])
        self.flushes = 0  # how many redraws (for tests and the benchmark)
        self._rows: list[Any] = []  # one HTML widget per log entry
        self._outputs: dict[int, Any] = {}  # entry index -> the Output widget with that call's displays
        self._undo_bars: dict[str, UndoBar] = {}  # call id -> its row's Undo button and report
        self._output_budget = TURN_OUTPUT_BYTES
        self._ticking = False
        self.started_at = time.monotonic()
        self.status = W.HTML("<em>queued</em>")
        self.entries = W.VBox([])
        self.task_panel = W.HTML("")
        self.meter = W.HTML("")
        self.queue_panel = W.HTML("")
        self.approval = ApprovalBox()
        self.approval_label = self.approval.label
        self.approve_button = self.approval.approve_button
        self.deny_button = self.approval.deny_button
        self.always_button = self.approval.always_button
        self.stop_button = W.Button(description="Stop", icon="stop", button_style="warning")
        self.stop_button.on_click(lambda _b: on_stop and on_stop())
        footer = W.HBox([self.stop_button, self.meter, self.status])
        super().__init__([self.entries, self.approval, self.task_panel, self.queue_panel, footer], **kwargs)
        self.add_class("shiro-turn-view")

    # -- events -----------------------------------------------------------------------------------
    def feed(self, event: Event) -> None:
        changed = self.turn_log.feed(event)
        if isinstance(event, (StepStart, ToolEnd, TurnEnd, Notice)):
            self._refresh_side()
        if isinstance(event, TurnEnd):
            self.finish()
            return
        if changed:
            self._dirty = True
            if isinstance(event, ToolStart):
                # the call may run on the kernel's thread next, which then draws nothing until it ends:
                # the row (and the text before it) is shown now, not at the end of the interval
                self.flush()
            else:
                self.request_flush()

    def request_flush(self) -> None:
        """Redraw now if the last redraw is old enough, else once at the end of the interval (the
        trailing redraw carries every change made meanwhile). The interval is 1/30 s, stretched to
        4x the cost of the last redraw, so a very long answer never keeps the kernel's thread
        more than ~20% busy."""
        if self._flush_pending:
            return
        wait = self._last_flush + self._interval() - time.monotonic()
        if wait <= 0 or self._call_later is None:
            if wait <= 0 or self.throttle.ready():
                self.flush()
            return
        self._flush_pending = True
        self._call_later(wait, self._trailing_flush)

    def _interval(self) -> float:
        return max(self.interval, 4 * self._flush_cost)

    def _trailing_flush(self) -> None:
        self._flush_pending = False
        if self._dirty:
            self.flush()

    def flush(self) -> None:
        """Redraw the entries: only the widgets whose HTML changed send an update."""
        started = time.monotonic()
        self._dirty = False
        self.flushes += 1
        rows = self._rows
        grew = False
        for index, entry in enumerate(self.turn_log.entries):
            value = log_entry_html(self.turn_log, index)  # the answer with its numbers marked, once checked
            if index < len(rows):
                if rows[index].value != value:
                    rows[index].value = value
            else:
                rows.append(W.HTML(value, layout=W.Layout(margin="0")))
                grew = True
            if isinstance(entry, ToolRow) and entry.outputs and index not in self._outputs:
                # what the call displayed, under its row, drawn by the frontend's own renderers
                view = W.Output(layout=W.Layout(margin="0 0 0 1.5em"))
                kept, self._output_budget = within_budget(entry.outputs, self._output_budget)
                view.outputs = tuple(
                    {"output_type": "display_data", "data": o["data"], "metadata": o.get("metadata") or {}}
                    for o in kept
                )
                self._outputs[index] = view
                grew = True
        if grew:
            self._arrange()
        self._last_flush = time.monotonic()
        self.throttle._last = self._last_flush
        self._flush_cost = self._last_flush - started

    def _arrange(self) -> None:
        """The entries' widgets in order: each row, what its call displayed, its Undo bar."""
        children: list[Any] = []
        entries = self.turn_log.entries
        for index, row in enumerate(self._rows):
            children.append(row)
            if index in self._outputs:
                children.append(self._outputs[index])
            entry = entries[index] if index < len(entries) else None
            if isinstance(entry, ToolRow) and entry.call_id in self._undo_bars:
                children.append(self._undo_bars[entry.call_id])
        self.entries.children = tuple(children)

    def _refresh_side(self) -> None:
        try:
            self.meter.value = meter_html(self._meter())
            self.task_panel.value = tasks_html(self._tasks())
        except Exception:  # a view must never break the turn
            pass

    def running(self) -> None:
        self.started_at = time.monotonic()
        self._ticking = True
        self.tick()

    def tick(self) -> None:
        """Once a second while the turn runs: the busy line's elapsed time (from 10 s, as the seed's
        ``working 12s…``) and the running tool row's own elapsed time."""
        if not self._ticking:
            return
        elapsed = time.monotonic() - self.started_at
        busy = f"working {elapsed:.0f}s…" if elapsed >= BUSY_SECONDS_FROM else "working…"
        self.status.value = f"<em>{busy} Stop or interrupt the kernel to abort</em>"
        if any(r.status == "running" for r in self.tool_rows):
            self.flush()
        if self._call_later is not None:
            self._call_later(1.0, self.tick)

    def queued(self, position: int) -> None:
        self.status.value = f"<em>queued (position {position})</em>"
        self.stop_button.layout.display = "none"

    def dropped(self, why: str = "dropped: the queue was cleared") -> None:
        self.status.value = f"<em>{html.escape(why)}</em>"
        self.stop_button.layout.display = "none"

    def show_queue(self, items: list[str]) -> None:
        lines = queue_lines(items)
        self.queue_panel.value = (
            ('<pre class="shiro-queue" style="margin:0">' + html.escape("\n".join(lines)) + "</pre>") if lines else ""
        )

    def show_text(self, text: str) -> None:
        """A slash command's output (a queued ``/todos``)."""
        self.entries.children = (W.HTML(f'<pre style="white-space:pre-wrap">{html.escape(text)}</pre>'),)
        self.status.value = ""
        self.stop_button.layout.display = "none"

    def finish(self) -> None:
        self._ticking = False
        self.flush()
        self.clear_approval()
        end = self.turn_log.end
        seconds = time.monotonic() - self.started_at
        if end is None:
            return
        what = {
            "answered": "done",
            "aborted": "stopped",
            "error": "error",
            "waiting": "waiting for approval",
            "max_steps": "stopped at max_steps",
        }.get(end.reason, end.reason)
        u = end.usage
        missing = numbers_line(self.turn_log.numbers)
        self.status.value = html.escape(
            f"{what} · {seconds:.1f} s · {tokens(u)}" + (f" · {missing}" if missing else "")
        )
        self.stop_button.layout.display = "none"
        self.show_queue([])

    # -- undo ---------------------------------------------------------------------------------------
    def offer_undo(self, calls: set[str], undone: set[str], on_undo: Callable[[str], None]) -> None:
        """Once the turn has ended: an Undo button on each row whose call is in ``calls`` (its step can be taken
        back now; ``on_undo`` gets the call id on a click), none on the others; ``undone`` rows are marked so."""
        if self.turn_log.end is None:
            return
        added = False
        for row in self.tool_rows:
            bar = self._undo_bars.get(row.call_id)
            if bar is None and (row.call_id in calls or row.call_id in undone):
                bar = self._undo_bars[row.call_id] = UndoBar(row.call_id, on_undo)
                added = True
            if bar is not None:
                bar.show(can_undo=row.call_id in calls, undone=row.call_id in undone)
        if added:
            self._arrange()

    def undo_report(self, call_id: str, text: str) -> None:
        """What an Undo on ``call_id``'s row restored and could not, under that row (as text)."""
        bar = self._undo_bars.get(call_id)
        if bar is not None:
            bar.report.value = (
                f'<pre class="shiro-undo-report" style="white-space:pre-wrap;margin:0">{html.escape(text)}</pre>'
            )

    # -- approval -----------------------------------------------------------------------------------
    def ask(self, name: str, title: str, body_html: str, answer: Callable[[str], None], **choices: Any) -> None:
        """Show the buttons for one pending call — what it would do as ``body_html`` (highlighted code, a
        diff: :func:`shiro_kernel.ui.call_preview.preview`); ``answer`` gets approve | deny | always once.
        ``choices``: :meth:`ApprovalBox.ask`'s (``approve="Allow"``, ``always=False``)."""
        if self._dirty:  # the turn pauses here: show everything that led to the question first
            self.flush()
        self.approval.ask(name, title, body_html, answer, **choices)

    def clear_approval(self) -> None:
        self.approval.clear()

    @property
    def asking(self) -> bool:
        """The turn waits for an answer to its approval question."""
        return bool(self.approval.asking)

    @property
    def tool_rows(self) -> list[ToolRow]:
        return [e for e in self.turn_log.entries if isinstance(e, ToolRow)]
