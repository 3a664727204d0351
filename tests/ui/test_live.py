"""Background turns in an in-process shell: Shiro.frontend = "widgets", the LiveController pumped by the
test (it stands in for the kernel's loop), buttons clicked from Python."""

from __future__ import annotations

import re
import threading
import time

import pytest
from fakeopenai import Call, Fault, Reply
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from shiro_kernel.approval import USER_DENIAL
from shiro_kernel.ui import kernel, live


@pytest.fixture
def shell(monkeypatch, fake_openai, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-live-KEY-never-shown")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("SHIRO_MODEL", "gpt-4o-mini")
    monkeypatch.chdir(tmp_path)
    sh = InteractiveShell.instance()
    sh.run_cell("%load_ext shiro_kernel")
    sh.run_cell('%config Shiro.frontend = "widgets"')
    yield sh
    sh.run_cell("%unload_ext shiro_kernel")  # stops any turn and the queue
    InteractiveShell.clear_instance()


def magics_of(shell):
    return shell.magics_manager.registry["ShiroMagics"]


def controller_of(shell) -> live.LiveController:
    return magics_of(shell).controller


def run(shell, source: str) -> str:
    with capture_output() as cap:
        result = shell.run_cell(source)
    assert result.error_in_exec is None and result.error_before_exec is None, result
    return cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)


def pump_until(controller: live.LiveController, cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        controller.inbox.drain()
        controller.inbox.wait(0.01)


def tool_outputs(request) -> list[str]:
    items = request.body.get("input") or []
    return [i.get("output") for i in items if i.get("type") == "function_call_output"]


def test_a_turn_returns_at_once_and_streams_into_the_view(shell, fake_openai):
    fake_openai.enqueue(Fault.delay(2.0, Reply(text="The **answer** is 42.")))
    out = run(shell, "%shiro what is the answer?")
    controller = controller_of(shell)
    # the magic did not wait for the model: the cell is back while the model still holds its answer
    assert controller.running is not None and controller.running.end is None and not controller.finished
    assert live.RUNNING_TEXT in out and "TurnView(" not in out  # words where the widgets are not drawn
    assert controller.wait_idle(10)
    item = controller.finished[-1]
    assert item.end.reason == "answered"
    html = "".join(w.value for w in item.view.entries.children)
    assert "<strong>answer</strong>" in html
    assert "done" in item.view.status.value
    # the static bundle went to the cell (here: displayed; in a kernel: sent with the cell's parent)
    assert item.view.turn_log.answer == "The **answer** is 42."


def test_tools_run_on_the_main_thread_after_approve(shell, fake_openai):
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "import threading\nwho = threading.current_thread().name\nwho"})]),
        Reply(text="ran it"),
    )
    run(shell, "%shiro run it")
    controller = controller_of(shell)
    view = controller.running.view
    pump_until(controller, lambda: view.asking)
    assert view.approval.layout.display == "flex" and "python" in view.approval_label.value
    view.approve_button.click()
    assert controller.wait_idle(10)
    assert shell.user_ns["who"] == threading.main_thread().name
    assert view.approval.layout.display == "none"
    assert [r.status for r in view.tool_rows] == ["ok"]
    assert controller.finished[-1].end.reason == "answered"


def test_under_auto_the_running_call_is_drawn_while_it_runs_on_the_kernels_thread(shell, fake_openai):
    # the call reads the view from the kernel's thread while it runs: what the user sees at that moment
    code = "drawn = [w.value for w in the_view.entries.children]"
    fake_openai.enqueue(
        Fault.delay(0.2, Reply(text="Starting the count.", tool_calls=[Call("python", {"code": code})])),
        Reply(text="counted"),
    )
    run(shell, '%config Shiro.approval = "auto"')
    run(shell, "%shiro count them")
    controller = controller_of(shell)
    shell.user_ns["the_view"] = controller.running.view
    assert controller.wait_idle(10)
    drawn = shell.user_ns["drawn"]
    assert len(drawn) == 2 and "Starting the count." in drawn[0]  # the text so far, whole
    assert drawn[1].startswith("<") and "…" in drawn[1] and "python" in drawn[1]  # the row, still running
    assert "drawn = [w.value" in drawn[1]


def test_deny_sends_the_user_denial(shell, fake_openai):
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "x = 1"})]), Reply(text="ok, not running it"))
    run(shell, "%shiro set x")
    controller = controller_of(shell)
    view = controller.running.view
    pump_until(controller, lambda: view.asking)
    view.deny_button.click()
    assert controller.wait_idle(10)
    assert "x" not in shell.user_ns
    assert tool_outputs(fake_openai.requests[1]) == [USER_DENIAL.format(name="python")]


def test_always_approves_the_rest_of_the_session(shell, fake_openai):
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "a = 1"})]),
        Reply(tool_calls=[Call("python", {"code": "b = 2"})]),
        Reply(text="both set"),
    )
    run(shell, "%shiro set a and b")
    controller = controller_of(shell)
    view = controller.running.view
    pump_until(controller, lambda: view.asking)
    view.always_button.click()
    assert controller.wait_idle(10)  # no second question
    assert shell.user_ns["a"] == 1 and shell.user_ns["b"] == 2
    assert "python" in magics_of(shell).agent.current.session.always_allowed


def test_stop_while_waiting_for_approval_leaves_the_call_pending(shell, fake_openai):
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "y = 1"})]))
    run(shell, "%shiro set y")
    controller = controller_of(shell)
    view = controller.running.view
    pump_until(controller, lambda: view.asking)
    view.stop_button.click()
    assert controller.wait_idle(10)
    assert controller.finished[-1].end.reason == "waiting"
    from shiro_kernel.context.rules import pending_calls

    assert [c.name for c in pending_calls(magics_of(shell).agent.current.session.messages)] == ["python"]
    assert "y" not in shell.user_ns


def test_an_unanswered_approval_is_a_refusal_and_the_queue_moves_on(shell, fake_openai):
    from shiro_kernel.approval import UNANSWERED_DENIAL, UNANSWERED_NOTICE
    from shiro_kernel.events import Notice

    run(shell, "%config Shiro.approval_timeout_s = 0.3")
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "z = 1"})]),
        Reply(tool_calls=[Call("python", {"code": "z = 2"})]),  # tries again: refused at once, not asked
        Reply(text="could not set z"),
        Reply(text="second done"),
    )
    run(shell, "%shiro set z")
    controller = controller_of(shell)
    view = controller.running.view
    assert run(shell, "%shiro second").splitlines()[0] == "queued (position 1)"
    assert controller.wait_idle(15)  # nobody clicks: the turn ends, and the queued one runs
    assert "z" not in shell.user_ns and not view.asking and view.approval.layout.display == "none"
    refused = UNANSWERED_DENIAL.format(name="python", seconds=0.3)
    assert refused.startswith("Error: not approved — nobody answered the approval question for this python call")
    assert tool_outputs(fake_openai.requests[1]) == [refused] and tool_outputs(fake_openai.requests[2]) == [refused] * 2
    first, second = controller.finished[-2:]
    said = [e.text for e in first.view.turn_log.entries if isinstance(e, Notice)]
    assert said == [UNANSWERED_NOTICE.format(seconds=0.3, name="python")]  # one line in the cell
    assert said[0] == "no answer within 0.3 s (Shiro.approval_timeout_s): python was not run, and the model was told"
    assert [(r.status, r.refused) for r in first.view.tool_rows] == [("error", True)] * 2
    assert first.end.reason == "answered" and second.view.turn_log.answer == "second done"


def test_stop_aborts_a_streaming_turn_and_clears_the_queue(shell, fake_openai):
    fake_openai.enqueue(Fault.delay(1.0, Reply(text="slow answer")), Reply(text="never"))
    run(shell, "%shiro slow")
    controller = controller_of(shell)
    assert run(shell, "%shiro queued one").splitlines()[0] == "queued (position 1)"
    queued_view = controller.queue[0].view
    controller.running.view.stop_button.click()
    assert not controller.queue and "dropped" in queued_view.status.value
    assert controller.wait_idle(10)
    assert controller.finished[-1].end.reason == "aborted"
    # the queued prompt was never sent
    assert all(r.body["input"][-1].get("content") != "queued one" for r in fake_openai.requests)
    assert len(fake_openai.requests) <= 1


def test_queue_runs_in_order_one_at_a_time(shell, fake_openai):
    fake_openai.enqueue(Fault.delay(0.5, Reply(text="first done")), Reply(text="second done"), Reply(text="third done"))
    run(shell, "%shiro first")
    controller = controller_of(shell)
    assert run(shell, "%shiro second").splitlines()[0] == "queued (position 1)"
    assert run(shell, "%shiro " + "third " * 20).splitlines()[0] == "queued (position 2)"
    running = controller.running.view
    panel = running.queue_panel.value
    assert panel == (
        '<pre class="shiro-queue" style="margin:0">queued: 2\n  1. second\n  2. '
        + "third " * 11
        + "thir...</pre>"  # a long prompt cut
    )
    assert controller.wait_idle(15)
    assert [i.line.prompt.split()[0] for i in controller.finished[-3:]] == ["first", "second", "third"]
    assert [r.body["input"][-1]["content"].split()[0] for r in fake_openai.requests] == ["first", "second", "third"]
    assert [i.view.turn_log.answer for i in controller.finished[-3:]] == ["first done", "second done", "third done"]


def test_wait_waits_for_the_running_and_queued_turns(shell, fake_openai):
    fake_openai.enqueue(Fault.delay(0.3, Reply(text="bg one")), Reply(text="bg two"), Reply(text="blocking three"))
    run(shell, "%shiro one")
    run(shell, "%shiro two")
    out = run(shell, "%shiro --wait three")
    # the cell shows each turn as it ends: its answer, then its footer (the id as short as the home allows: 8 or 13)
    answers = re.split(r"\n\n[^\n]* · resume: %shiro -c or %shiro -r [0-9a-f]{8}(?:-[0-9a-f]{4})?", out)
    assert answers == ["bg one", "bg two", "blocking three", ""], out
    controller = controller_of(shell)
    assert not controller.busy
    assert [r.body["input"][-1]["content"] for r in fake_openai.requests] == ["one", "two", "three"]


def test_a_queued_slash_command_runs_in_its_turn(shell, fake_openai):
    fake_openai.enqueue(Fault.delay(0.3, Reply(text="bg")))
    run(shell, "%shiro one")
    run(shell, "%shiro /todos")
    controller = controller_of(shell)
    assert controller.wait_idle(10)
    (entry,) = controller.finished[-1].view.entries.children
    assert entry.value == '<pre style="white-space:pre-wrap">no tasks</pre>'


def test_api_key_is_not_in_widget_state(shell, fake_openai):
    fake_openai.enqueue(Reply(text="hi"))
    run(shell, "%shiro hello")
    controller = controller_of(shell)
    assert controller.wait_idle(10)
    import json

    from ipywidgets.widgets.widget import _instances

    state = json.dumps([w.get_state() for w in list(_instances.values())], default=str)
    assert "sk-test-live-KEY" not in state


def test_text_frontend_blocks(shell, fake_openai):
    shell.run_cell('%config Shiro.frontend = "text"')
    fake_openai.enqueue(Reply(text="blocking answer"))
    assert "blocking answer" in run(shell, "%shiro hi")
    assert getattr(magics_of(shell).agent, "live", None) is None


def test_auto_frontend_detection():
    class ZMQInteractiveShell:  # the name is what counts
        kernel = None

    assert not kernel.widget_frontend(object(), "auto")
    assert kernel.widget_frontend(object(), "widgets")
    assert not kernel.widget_frontend(ZMQInteractiveShell(), "text")
    kernel._seen_targets.discard(kernel.CONTROL_TARGET)
    assert not kernel.widget_frontend(ZMQInteractiveShell(), "auto")
    kernel._seen_targets.add(kernel.CONTROL_TARGET)
    try:
        assert kernel.widget_frontend(ZMQInteractiveShell(), "auto")
    finally:
        kernel._seen_targets.discard(kernel.CONTROL_TARGET)


def test_auto_recognises_a_jupyterlab_cell_request():
    """JupyterLab / Notebook 7 execute cells with deletedCells/recordTiming metadata; nbclient with none."""

    class Kernel:
        def __init__(self, metadata):
            self.metadata = metadata

        def get_parent(self, channel="shell"):
            return {"header": {"msg_id": "m1"}, "metadata": self.metadata, "content": {}}

    class ZMQInteractiveShell:
        def __init__(self, metadata):
            self.kernel = Kernel(metadata)

    kernel._seen_targets.discard(kernel.CONTROL_TARGET)
    assert kernel.widget_frontend(ZMQInteractiveShell({"deletedCells": [], "recordTiming": False}), "auto")
    assert not kernel.widget_frontend(ZMQInteractiveShell({}), "auto")  # nbclient / papermill


def test_comm_open_watch_records_targets():
    seen = []

    class Kernel:
        shell_handlers = {"comm_open": lambda stream, ident, msg: seen.append(msg)}

    class Shell:
        kernel = Kernel()

    kernel.watch_comm_opens(Shell())
    kernel.watch_comm_opens(Shell())  # idempotent
    Kernel.shell_handlers["comm_open"](None, None, {"content": {"target_name": "jupyter.widget.control"}})
    try:
        assert kernel.CONTROL_TARGET in kernel._seen_targets and len(seen) == 1
    finally:
        kernel._seen_targets.discard(kernel.CONTROL_TARGET)


def test_help_lists_commands_and_flags():
    from shiro_kernel.commands import COMMANDS
    from shiro_kernel.magics import ShiroMagics, options_parser

    parser = options_parser()
    doc = ShiroMagics.shiro.__doc__
    flags = [s for action in parser._actions for s in action.option_strings]
    assert {"--wait", "--new", "-c", "-r", "--no-memory", "--memory", "--mute", "--model", "--agent"} <= set(flags)
    for name in [*COMMANDS, *flags]:  # the help is generated from the one declaration of each
        assert name in doc, name


def test_unknown_slash_command_suggests_the_closest(shell):
    assert "did you mean /todos?" in run(shell, "%shiro /todo")
    assert "did you mean /sessions?" in run(shell, "%shiro /sesions")
