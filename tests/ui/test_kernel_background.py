"""A real kernel (jupyter_client, this venv's python3) with Shiro.frontend = "widgets": a background turn
streams while other cells run, a second prompt is queued, both turns end in order, each in its own cell."""

from __future__ import annotations

import os
import queue
import threading
import time

import pytest
from fakeopenai import Call, Reply

jupyter_client = pytest.importorskip("jupyter_client")

TURN_MIME = "application/vnd.shiro.turn+json"
KEY = "sk-test-KERNEL-BG-never-in-messages-7"


@pytest.fixture
def kernel(fake_openai, tmp_path):
    env = {
        **os.environ,
        "OPENAI_API_KEY": KEY,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "JPY_SESSION_NAME": str(tmp_path / "bg.ipynb"),
    }
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel(env=env, cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


class Iopub:
    """Every iopub message, kept, so a test can wait for one and look at all of them afterwards."""

    def __init__(self, kc) -> None:
        self.kc = kc
        self.messages: list[dict] = []

    def pump(self, timeout: float = 0.05) -> None:
        while True:
            try:
                self.messages.append(self.kc.get_iopub_msg(timeout=timeout))
            except queue.Empty:
                return
            timeout = 0.001

    def wait_for(self, cond, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            self.pump()
            for msg in self.messages[seen:]:
                if cond(msg):
                    return msg
            seen = len(self.messages)
        raise AssertionError("timed out waiting for an iopub message")

    def of(self, msg_id: str, msg_type: str | None = None) -> list[dict]:
        return [
            m
            for m in self.messages
            if m["parent_header"].get("msg_id") == msg_id and (msg_type is None or m["msg_type"] == msg_type)
        ]


def execute(kc, io: Iopub, code: str, timeout: float = 30.0) -> tuple[str, dict]:
    msg_id = kc.execute(code)
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    io.wait_for(
        lambda m: (
            m["parent_header"].get("msg_id") == msg_id
            and m["msg_type"] == "status"
            and m["content"]["execution_state"] == "idle"
        ),
        timeout,
    )
    return msg_id, reply


def result_text(io: Iopub, msg_id: str) -> str:
    out = []
    for m in io.of(msg_id):
        if m["msg_type"] == "execute_result":
            out.append(m["content"]["data"]["text/plain"])
        elif m["msg_type"] == "stream":
            out.append(m["content"]["text"])
    return "".join(out)


def turn_bundle(io: Iopub, msg_id: str) -> dict | None:
    """The final static bundle: an update of the live view's display (same display id) in that cell."""
    shown = {m["content"].get("transient", {}).get("display_id") for m in io.of(msg_id, "display_data")}
    for m in io.of(msg_id, "update_display_data"):
        if TURN_MIME in m["content"]["data"] and m["content"]["transient"]["display_id"] in shown:
            assert "application/vnd.jupyter.widget-view+json" in m["content"]["data"]  # the live view stays
            return m["content"]["data"]
    return None


def test_background_turn_queue_and_other_cells(kernel, fake_openai):
    io = Iopub(kernel)
    answer = threading.Event()  # the model answers the first prompt only once the test says so

    def first_answer(_request: object) -> Reply:
        assert answer.wait(60), "the test never let the model answer"
        return Reply(text="first answer")

    fake_openai.enqueue(first_answer, Reply(text="second answer"))
    execute(kernel, io, "%load_ext shiro_kernel")
    execute(kernel, io, '%config Shiro.frontend = "widgets"')
    first, reply = execute(kernel, io, "%shiro first prompt")
    assert reply["content"]["status"] == "ok"  # the magic returned while the model has not answered
    # another cell runs and completes while the turn is still running
    other, reply = execute(kernel, io, "21 * 2")
    assert result_text(io, other) == "42"
    state, _ = execute(
        kernel,
        io,
        "_c = get_ipython().magics_manager.registry['ShiroMagics'].controller\n(_c.running is not None, len(_c.queue))",
    )
    assert result_text(io, state) == "(True, 0)"
    assert turn_bundle(io, first) is None  # not finished yet
    second, _ = execute(kernel, io, "%shiro second prompt")
    assert "queued (position 1)" in result_text(io, second)
    answer.set()

    io.wait_for(
        lambda m: (
            m["msg_type"] in ("display_data", "update_display_data")
            and TURN_MIME in m["content"]["data"]
            and m["parent_header"].get("msg_id") == second
        ),
        timeout=30,
    )
    b1, b2 = turn_bundle(io, first), turn_bundle(io, second)
    assert b1 is not None and "first answer" in b1["text/markdown"]
    assert b2 is not None and "second answer" in b2["text/markdown"]
    order = [
        m["parent_header"]["msg_id"]
        for m in io.messages
        if m["msg_type"] in ("display_data", "update_display_data") and TURN_MIME in m["content"]["data"]
    ]
    assert order == [first, second]
    assert [r.body["input"][-1]["content"] for r in fake_openai.requests] == ["first prompt", "second prompt"]
    # the live view was driven through comm messages (widget updates) while streaming
    updates = [m for m in io.messages if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "update"]
    assert updates
    assert not any(KEY in str(m["content"]) for m in io.messages)


def test_tool_approved_by_button_runs_in_the_kernel_namespace(kernel, fake_openai):
    io = Iopub(kernel)
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "import threading\nwho = threading.current_thread().name"})]),
        Reply(text="done"),
    )
    execute(kernel, io, "%load_ext shiro_kernel")
    execute(kernel, io, '%config Shiro.frontend = "widgets"')
    first, _ = execute(kernel, io, "%shiro run something")
    deadline = time.monotonic() + 20
    while True:  # the approval buttons appear; click Approve from a cell (as a browser click would)
        probe, _ = execute(
            kernel,
            io,
            "_v = get_ipython().magics_manager.registry['ShiroMagics'].controller"
            ".running\n_v is not None and _v.view.asking",
        )
        if result_text(io, probe) == "True":
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    execute(kernel, io, "_v.view.approve_button.click()")
    io.wait_for(
        lambda m: (
            m["msg_type"] in ("display_data", "update_display_data")
            and TURN_MIME in m["content"]["data"]
            and m["parent_header"].get("msg_id") == first
        ),
        timeout=30,
    )
    check, _ = execute(kernel, io, "who")
    assert result_text(io, check) == "'MainThread'"


def test_kernel_interrupt_stops_the_turn_and_clears_the_queue(kernel, fake_openai, tmp_path):
    io = Iopub(kernel)
    started = tmp_path / "tool-started"
    code = f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(30)"
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": code})]),
        Reply(text="after the interrupt"),
        Reply(text="never"),
    )
    execute(kernel, io, "%load_ext shiro_kernel")
    execute(kernel, io, '%config Shiro.frontend = "widgets"\n%config Shiro.approval = "auto"')
    first, _ = execute(kernel, io, "%shiro sleep")
    execute(kernel, io, "%shiro queued")
    # The signal must find the tool sleeping on the kernel's main thread, not the turn still on its way there
    # (a fixed second was not enough on a loaded machine): wait for the file the tool touches first.
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.05)
    time.sleep(0.2)
    assert isinstance(kernel.parent, jupyter_client.KernelManager)
    kernel.parent.interrupt_kernel()  # SIGINT, as the Interrupt button sends it
    io.wait_for(
        lambda m: (
            m["msg_type"] in ("display_data", "update_display_data")
            and TURN_MIME in m["content"]["data"]
            and m["parent_header"].get("msg_id") == first
        ),
        timeout=20,
    )
    bundle = turn_bundle(io, first)
    assert bundle[TURN_MIME]["end"]["reason"] == "aborted"
    state, _ = execute(
        kernel,
        io,
        "_c = get_ipython().magics_manager.registry['ShiroMagics'].controller\n(_c.running is None, len(_c.queue))",
    )
    assert result_text(io, state) == "(True, 0)"
    assert len(fake_openai.requests) == 1
