"""TurnView on its own: throttled redraws (messages counted through a recording comm), tool rows,
task panel, meter colours, queue panel, approval buttons."""

from __future__ import annotations

import time

import pytest

from shiro_kernel.events import Notice, StepStart, TextDelta, ToolEnd, ToolStart, TurnEnd, Usage
from shiro_kernel.transcript import ToolCallPart, ToolResultPart
from shiro_kernel.ui.widgets import TurnView, meter_html, queue_lines, tasks_html


class RecordingComm:
    """Stands in for a widget's comm: counts the update messages a frontend would receive."""

    def __init__(self, log: list) -> None:
        import uuid

        self.log = log
        self.kernel = object()
        self.comm_id = uuid.uuid4().hex

    def send(self, data=None, metadata=None, buffers=None):
        self.log.append(data)

    def on_msg(self, callback):
        pass

    def close(self, *a, **k):
        pass


@pytest.fixture
def sent(monkeypatch):
    """Every message any widget sends, recorded (no kernel needed)."""
    log: list = []
    import comm

    monkeypatch.setattr(comm, "create_comm", lambda *a, **k: RecordingComm(log))
    return log


def updates(sent: list) -> list:
    return [m for m in sent if isinstance(m, dict) and m.get("method") == "update"]


def test_streaming_is_throttled_to_30_updates_a_second(sent):
    scheduled = []
    view = TurnView(call_later=lambda delay, fn: scheduled.append(fn))
    sent.clear()
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < 0.5:  # 0.5 s of deltas as fast as they come
        view.feed(TextDelta("tok "))
        n += 1
    elapsed = time.monotonic() - started
    for fn in scheduled:  # the trailing flush the kernel loop would run
        fn()
    assert n > 1000
    assert view.flushes <= 30 * elapsed + 3
    assert len(updates(sent)) <= 30 * elapsed + 6  # one text widget per redraw (+ the first child)
    html = view.entries.children[0].value
    assert html.count("tok") == n  # the last state is always drawn


def test_tool_rows_expand_and_only_changed_widgets_update(sent):
    view = TurnView()
    call = ToolCallPart("c1", "python", '{"code": "df.x.mean()"}')
    view.feed(TextDelta("Let me check."))
    view.feed(ToolStart(call))
    view.flush()
    first, row = view.entries.children
    assert "<details" in row.value and "python" in row.value and "running" in row.value
    sent.clear()
    time.sleep(0.04)
    view.feed(ToolEnd(call, ToolResultPart("c1", "python", "2.0"), 0.012))
    assert "ok" in row.value and "12 ms" in row.value and "<pre" in row.value and "2.0" in row.value
    assert all(m["state"].keys() == {"value"} for m in updates(sent))  # only the row changed
    assert first.value == view.entries.children[0].value


def test_turn_end_flushes_and_shows_status():
    view = TurnView()
    view.running()
    view.feed(TextDelta("**done**"))
    view.feed(Notice("context compacted: 192 messages pruned to 15 on the wire", kind="compacted"))
    view.feed(TurnEnd("answered", Usage(10, 5, None)))
    values = [w.value for w in view.entries.children]
    assert "<strong>done</strong>" in values[0] and "192 messages pruned to 15" in values[1]
    assert view.status.value.startswith("done") and view.stop_button.layout.display == "none"


def test_task_panel_bar_markers_and_strikethrough():
    items = [
        {"content": "load", "status": "done"},
        {"content": "clean", "status": "in_progress"},
        {"content": "plot", "status": "blocked", "note": "no display"},
        {"content": "ship", "status": "pending"},
    ]
    out = tasks_html(items)
    assert out == "\n".join(
        [
            '<pre class="shiro-tasks" style="margin:0">tasks ' + "#" * 10 + "." * 30 + " 1/4  1 blocked",
            "[x] <s>load</s>",
            "[~] clean",
            "[!] plot  (no display)",
            "[ ] ship</pre>",
        ]
    )
    assert tasks_html([]) == ""
    view = TurnView(tasks=lambda: items)
    view.feed(StepStart(1))
    assert view.task_panel.value == out


@pytest.mark.parametrize(
    "pct,label,colour",
    [(12, "12% ctx", "#666"), (66, "66% ctx", "#b8860b"), (90, "90% ctx compacting soon", "#c0392b")],
)
def test_meter_label_and_colour(pct, label, colour):
    out = meter_html(pct)
    assert f">{label}<" in out and colour in out
    view = TurnView(meter=lambda: pct)
    view.feed(StepStart(1))
    assert view.meter.value == out


def test_queue_panel_cuts_at_70():
    long = "x" * 80
    assert queue_lines(["first", long]) == ["queued: 2", "  1. first", "  2. " + "x" * 70 + "..."]
    assert queue_lines([]) == []
    view = TurnView()
    view.show_queue(["first"])
    assert "queued: 1" in view.queue_panel.value
    view.show_queue([])
    assert view.queue_panel.value == ""


@pytest.mark.parametrize(
    "button,verdict", [("approve_button", "approve"), ("deny_button", "deny"), ("always_button", "always")]
)
def test_approval_buttons_answer_once(button, verdict):
    view = TurnView()
    got = []
    view.ask("python", "run this Python in your kernel", "<pre>x = 1</pre>", got.append)
    assert view.approval.layout.display == "flex"
    getattr(view, button).click()
    getattr(view, button).click()  # a second click does nothing
    assert got == [verdict] and view.approval.layout.display == "none"


def test_stop_button_calls_back():
    stopped = []
    view = TurnView(on_stop=lambda: stopped.append(1))
    view.stop_button.click()
    assert stopped == [1]
