"""The agent's MCP, end to end: real MCP servers (the SDK test server over stdio and streamable HTTP, the
published ``mcp-server-time``) behind real turns against the fake OpenAI server, through the real client."""

from __future__ import annotations

import concurrent.futures
import json
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Reply
from faultlog import record
from mcp_testutil import PY, SDK_SERVER, children, http_sdk_server, wait_for

from shiro_kernel.agent import Agent
from shiro_kernel.commands import run as command
from shiro_kernel.config import Shiro
from shiro_kernel.events import Event, Notice, ToolEnd, ToolProgress
from shiro_kernel.turn import Frontend
from shiro_kernel.ui.render import ToolRow, TurnLog, entry_html

SECRET = "tok-AGENT-SECRET-5521"


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [t.get("name") or t["function"]["name"] for t in body.get("tools", [])]


def _outputs(body: dict[str, Any]) -> list[str]:
    """The tool results a request carries (Responses input items)."""
    out = []
    for item in body.get("input", []):
        if item.get("type") == "function_call_output":
            value = item["output"]
            out.append(value if isinstance(value, str) else json.dumps(value))
    return out


def servers(markers: Path) -> dict[str, Any]:
    return {
        "sdk": {
            "command": PY,
            "args": [SDK_SERVER],
            "env": {"SERVICE_TOKEN": "${MCP_AGENT_TOKEN}", "MCP_TEST_MARKERS": str(markers)},
        },
        "time": {"command": PY, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
    }


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: Any) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-agent")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("MCP_AGENT_TOKEN", SECRET)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def agent(project: Path) -> Any:
    """The user's own servers (``Shiro.mcp_servers``): they start without asking and their hints count."""
    made = Agent(None, Shiro(model="gpt-4o-mini", approval="ask", mcp_servers=servers(project)))
    yield made
    made.close()


def test_tools_offered_called_and_results_reach_the_next_request(agent: Agent, fake_openai: Any) -> None:
    fake_openai.enqueue(
        Reply(tool_calls=[Call("mcp__sdk__echo", {"text": "from the notebook"})]),
        Reply(tool_calls=[Call("mcp__time__get_current_time", {"timezone": "UTC"})]),
        Reply(text="done"),
    )
    events: list[Event] = []
    end = agent.ask("use the tools", Frontend(on_event=events.append))
    assert end.reason == "answered", end
    names = _tool_names(fake_openai.requests[0].body)
    assert "mcp__sdk__echo" in names and "mcp__time__get_current_time" in names and "python" in names
    assert _outputs(fake_openai.requests[1].body) == ["from the notebook"]
    echoed, now = _outputs(fake_openai.requests[2].body)
    assert echoed == "from the notebook"
    assert json.loads(now)["timezone"] == "UTC"
    # read-only tools (readOnlyHint) ran without asking, headless and with approval "ask"
    assert [e.result.is_error for e in events if isinstance(e, ToolEnd)] == [False, False]
    # the second turn reuses the running servers: no new child processes
    before = set(children())
    fake_openai.enqueue(Reply(text="again"))
    assert agent.ask("again").reason == "answered"
    assert set(children()) == before


def test_mutating_tools_ask_like_python(agent: Agent, fake_openai: Any) -> None:
    fake_openai.enqueue(Reply(tool_calls=[Call("mcp__sdk__greet", {"name": "Ada"})]), Reply(text="ok"))
    events: list[Event] = []
    agent.ask("greet", Frontend(on_event=events.append))
    result = next(e.result for e in events if isinstance(e, ToolEnd))
    assert result.is_error and result.output.startswith("Error: not approved")
    # with approval from the user ("Always this session" works per tool)
    fake_openai.enqueue(
        Reply(tool_calls=[Call("mcp__sdk__greet", {"name": "Ada"})]),
        Reply(tool_calls=[Call("mcp__sdk__greet", {"name": "Bob"})]),
        Reply(text="ok"),
    )
    asked: list[str] = []

    def approver(call: Any, tool: Any) -> str:
        asked.append(call.name)
        return "always"

    events.clear()
    agent.ask("greet twice", Frontend(on_event=events.append, headless=False, approver=approver))
    outputs = [e.result.output for e in events if isinstance(e, ToolEnd)]
    assert asked == ["mcp__sdk__greet"] and outputs[0].startswith("Hello, Ada!") and "Bob" in outputs[1]


def test_progress_reaches_the_row_and_stop_cancels_a_slow_call(agent: Agent, fake_openai: Any) -> None:
    fake_openai.enqueue(Reply(tool_calls=[Call("mcp__sdk__slow", {"seconds": 30})]), Reply(text="unused"))
    events: list[Event] = []

    def on_event(event: Event) -> None:
        events.append(event)
        if isinstance(event, ToolProgress):
            agent.abort.set()  # Stop, once the call is visibly running

    started = time.monotonic()
    end = agent.ask("sleep", Frontend(on_event=on_event, headless=False, approver=lambda c, t: "approve"))
    assert time.monotonic() - started < 15
    assert any(isinstance(e, ToolProgress) and e.text == "sleeping (1/300)" for e in events)
    # the live view's row shows the progress while the call runs
    log = TurnLog()
    for event in events[: next(i for i, e in enumerate(events) if isinstance(e, ToolProgress)) + 1]:
        log.feed(event)
    row = next(e for e in log.entries if isinstance(e, ToolRow))
    assert row.progress == "sleeping (1/300)" and "sleeping (1/300)" in entry_html(row)
    result = next(e.result for e in events if isinstance(e, ToolEnd))
    assert result.is_error and "cancelled" in result.output
    assert end.reason in ("aborted", "stopped", "interrupted"), end


def test_a_crashing_server_is_one_notice_and_the_turn_finishes(agent: Agent, fake_openai: Any) -> None:
    fake_openai.enqueue(
        Reply(tool_calls=[Call("mcp__sdk__crash", {})]),
        Reply(tool_calls=[Call("mcp__sdk__echo", {"text": "x"})]),
        Reply(text="carried on"),
    )
    events: list[Event] = []
    end = agent.ask("crash it", Frontend(on_event=events.append, headless=False, approver=lambda c, t: "approve"))
    assert end.reason == "answered"
    notices = [e.text for e in events if isinstance(e, Notice) and "MCP server 'sdk'" in e.text]
    assert len(notices) == 1 and "simulated crash" in notices[0] and notices[0].startswith("MCP server"), notices
    results = [e.result for e in events if isinstance(e, ToolEnd)]
    assert all(r.is_error for r in results)  # the echo after the crash: "not running", or the dead connection
    # the next turn no longer offers its tools, and says nothing more about it
    fake_openai.enqueue(Reply(text="fine"))
    events.clear()
    agent.ask("next", Frontend(on_event=events.append))
    assert not any(n.startswith("mcp__sdk__") for n in _tool_names(fake_openai.requests[-1].body))
    assert not [e for e in events if isinstance(e, Notice)]
    assert "mcp__time__get_current_time" in _tool_names(fake_openai.requests[-1].body)


def test_mcp_command_lists_servers_tools_and_http(project: Path, fake_openai: Any) -> None:
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers(project)}))
    with http_sdk_server() as url:
        config = Shiro(
            model="gpt-4o-mini", mcp_servers={"web": {"url": url}, "bad": {"command": PY, "args": ["-c", "exit(2)"]}}
        )
        agent = Agent(None, config)
        try:
            assert "allowed 'sdk'" in command(agent, "/mcp allow sdk time")  # the repository's, once allowed
            agent.mcp._manager(project).wait_ready(40)
            text = command(agent, "/mcp")
            lines = text.splitlines()
            assert lines[1] == f"  sdk (stdio: {shlex.quote(PY)} {SDK_SERVER}) — ready, 12 tools"
            # the user's own server's hint counts; the repository's same tool asks anyway
            assert "    mcp__web__echo [read-only] — Echo the text back." in lines
            assert "    mcp__sdk__echo — Echo the text back." in lines
            assert (
                lines[-1] == f"  bad (stdio: {shlex.quote(PY)} -c 'exit(2)') — failed: the server closed the connection"
            )
            assert SECRET not in text  # ${VAR} values never shown
            assert command(agent, "/mcp bogus").startswith("usage: /mcp")
            assert "no MCP server named" in command(agent, "/mcp restart nope")
            # a call over streamable HTTP: its result reaches the next request
            fake_openai.enqueue(Reply(tool_calls=[Call("mcp__web__echo", {"text": "over http"})]), Reply(text="ok"))
            assert agent.ask("echo over http").reason == "answered"
            assert any("over http" in o for o in _outputs(fake_openai.requests[-1].body))
        finally:
            agent.close()
    # after close no server process is left
    assert wait_for(lambda: not any(SDK_SERVER in c for c in children().values()), 10)


def test_nothing_configured_costs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-agent")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.chdir(tmp_path)
    agent = Agent(None, Shiro(model="gpt-4o-mini"))
    fake_openai.enqueue(Reply(text="hi"))
    threads = threading.active_count()
    agent.ask("hello")
    assert agent.mcp.manager is None and "mcp" not in sys.modules.get("shiro_kernel.mcp.client", object).__dict__
    assert threading.active_count() <= threads + 1  # at most the autosaver
    assert command(agent, "/mcp").startswith("No MCP servers configured.")
    assert agent.mcp.manager is None


def test_other_agents_calls_are_recorded_in_the_session(agent: Agent) -> None:
    agent.mcp._record("claude-code 2.0", "python", {"code": "x = 1"}, "ok")
    note = agent.current.session.messages[-1]
    assert note.role == "user" and note.text.startswith("[claude-code 2.0 used this kernel through MCP: python(")
    # while a turn runs the note waits for its end
    agent.current.turning = True
    agent.mcp._record("codex", "inspect", {}, "x: int = 1")
    assert "codex" not in agent.current.session.messages[-1].text
    agent.current.turning = False
    assert agent.mcp.flush_notes() == 1 and "codex" in agent.current.session.messages[-1].text


def test_serve_approval_follows_shiro_approval(agent: Agent) -> None:
    from shiro_kernel.transcript import ToolCallPart

    call = ToolCallPart("c1", "python", '{"code": "1"}')
    assert agent.mcp._approve("x", call) is False  # "ask" with nobody to ask: refused
    agent.config.approval = "auto"
    assert agent.mcp._approve("x", call) is True
    agent.config.approval = "read-only"
    assert agent.mcp._approve("x", call) is False


def test_serve_approval_buttons_under_the_serve_cell(agent: Agent) -> None:
    import asyncio

    import ipywidgets as W

    from shiro_kernel.transcript import ToolCallPart

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    agent.mcp._panel = W.VBox([])  # what /mcp serve displays under its cell with a widget frontend
    agent.mcp._loop = loop
    call = ToolCallPart("c1", "python", '{"code": "x = 1"}')
    try:
        panel = agent.mcp._panel
        for n, (button, expected) in enumerate((("deny_button", False), ("always_button", True)), 1):
            verdict: list[bool] = []
            asker = threading.Thread(target=lambda out=verdict: out.append(agent.mcp._approve("codex 1.0", call)))
            asker.start()
            assert wait_for(lambda n=n: len(panel.children) == n, 5)
            box = panel.children[-1]
            assert "codex 1.0 (MCP) wants to run this Python in your kernel" in box.label.value
            getattr(box, button).click()
            asker.join(5)
            assert verdict == [expected]
            assert box.buttons.layout.display == "none"  # the request stays, with who answered what
            said = "denied" if not expected else "approved for this session"
            assert box.label.value == f"codex 1.0 (MCP): python {said}"
        assert agent.mcp._approve("codex 1.0", call) is True and len(panel.children) == 2  # always: not asked
        # "Always" was for that client only: another one is asked again
        other: list[bool] = []
        asker = threading.Thread(target=lambda: other.append(agent.mcp._approve("other-agent", call)))
        asker.start()
        assert wait_for(lambda: len(panel.children) == 3, 5)
        panel.children[-1].deny_button.click()
        asker.join(5)
        assert other == [False]
    finally:
        loop.call_soon_threadsafe(loop.stop)


def test_a_servers_secret_env_never_reaches_the_model_or_the_record(agent: Agent, fake_openai: Any) -> None:
    fake_openai.enqueue(Reply(tool_calls=[Call("mcp__sdk__getenv", {"name": "SERVICE_TOKEN"})]), Reply(text="ok"))
    events: list[Event] = []
    agent.ask("what is the token?", Frontend(on_event=events.append, headless=False, approver=lambda c, t: "approve"))
    result = next(e.result for e in events if isinstance(e, ToolEnd))
    assert not result.is_error and SECRET not in result.output and result.output.strip()
    assert all(SECRET not in r.raw.decode() for r in fake_openai.requests)
    agent.current.save_now()
    record = agent.current.store.path_for(agent.current.session.id).read_text()
    assert "mcp__sdk__getenv" in record and SECRET not in record


def test_a_background_turn_runs_mcp_calls_off_the_kernel_thread(agent: Agent, fake_openai: Any) -> None:
    fake_openai.enqueue(
        Reply(tool_calls=[Call("mcp__sdk__echo", {"text": "off the kernel"}), Call("inspect", {"names": None})]),
        Reply(text="ok"),
    )
    on_kernel: list[str] = []

    def runner(job: Any) -> Any:  # the live view's: post the job to the kernel's thread and wait
        result = job()
        on_kernel.append(result.name)
        return result

    end = agent.ask("both", Frontend(headless=False, approver=lambda c, t: "approve", runner=runner))
    assert end.reason == "answered"
    assert on_kernel == ["inspect"]  # the MCP call ran on the turn's own thread


@contextmanager
def kernel_sigint() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, as in a kernel running a cell: ipykernel sets ``default_int_handler``
    around each request, whatever the kernel process inherited. pytest may have inherited SIGINT ignored
    (started with ``&`` from a script, where the shell ignores it for background commands), and then
    ``_thread.interrupt_main()`` does nothing at all."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_kernel_interrupt_during_an_mcp_call_cancels_the_request(agent: Agent, project: Path) -> None:
    import _thread

    from shiro_kernel.tools import ToolContext

    tools = agent.mcp.tools_for_turn(project, lambda e: None)
    running = threading.Event()

    def on_progress(text: str) -> None:  # the server reports progress: the call is running there; interrupt now
        if not running.is_set():
            running.set()
            _thread.interrupt_main()

    with kernel_sigint(), pytest.raises(KeyboardInterrupt):
        tools["mcp__sdk__slow"].run({"seconds": 30}, ToolContext(root=project, progress=on_progress))
    told = wait_for(lambda: (project / "cancelled-slow").exists(), 10)
    record(
        "kernel interrupt during an MCP call the server is running (`slow`, 30 s)",
        1,
        int(not told),
        "KeyboardInterrupt on the calling thread at the server's first progress report; the server was told "
        "(notifications/cancelled)",
    )
    assert running.is_set() and told


@pytest.mark.parametrize("server_runs_it", [True, False], ids=["running-on-the-server", "not-yet-sent"])
def test_an_interrupt_as_the_request_is_handed_over_still_cancels_it(
    agent: Agent, project: Path, monkeypatch: pytest.MonkeyPatch, server_runs_it: bool
) -> None:
    """A kernel interrupt lands at whatever bytecode runs: here, just after the request went to the loop
    thread and before the caller holds its future. The request is cancelled all the same: the server is
    told, or it never gets the request."""
    from shiro_kernel.mcp._runtime import LoopThread
    from shiro_kernel.tools import ToolContext

    tools = agent.mcp.tools_for_turn(project, lambda e: None)
    running = threading.Event()
    handed_over: list[Any] = []
    hand_over = LoopThread.submit

    def interrupted_submit(self: LoopThread, coroutine: Any) -> Any:
        handed_over.append(hand_over(self, coroutine))
        if server_runs_it:
            assert running.wait(30), "the slow call never started on the server"
        raise KeyboardInterrupt  # what the kernel's SIGINT handler raises at the next bytecode

    with monkeypatch.context() as patch:
        patch.setattr(LoopThread, "submit", interrupted_submit)
        with pytest.raises(KeyboardInterrupt):
            tools["mcp__sdk__slow"].run({"seconds": 30}, ToolContext(root=project, progress=lambda t: running.set()))
    (future,) = handed_over
    concurrent.futures.wait([future], timeout=10)
    told = wait_for(lambda: (project / "cancelled-slow").exists(), 10) if server_runs_it else True
    record(
        "kernel interrupt as an MCP request is handed to the loop thread, "
        + ("the server already running it" if server_runs_it else "not yet sent"),
        1,
        int(not future.cancelled() or not told),
        "cancelled: the server was told"
        if server_runs_it
        else "cancelled (before or as it was sent); the server's next call answered",
    )
    assert future.cancelled()  # not left running for 30 s
    assert told  # the server was told
    assert tools["mcp__sdk__echo"].run({"text": "still here"}, ToolContext(root=project)) == "still here"


def test_without_the_mcp_package_one_clear_notice(
    agent: Agent, fake_openai: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shiro_kernel.mcp import link

    monkeypatch.setattr(link, "installed", lambda: False)
    fake_openai.enqueue(Reply(text="one"), Reply(text="two"))
    events: list[Event] = []
    assert agent.ask("hi", Frontend(on_event=events.append)).reason == "answered"
    assert agent.ask("again", Frontend(on_event=events.append)).reason == "answered"
    notices = [e.text for e in events if isinstance(e, Notice) and "mcp package" in e.text]
    assert len(notices) == 1 and "%pip install 'mcp>=2.3,<3'" in notices[0]
    assert not any(n.startswith("mcp__") for n in _tool_names(fake_openai.requests[0].body))
    assert command(agent, "/mcp").startswith("MCP needs the mcp package")
    assert command(agent, "/mcp serve").startswith("MCP needs the mcp package")
    assert command(agent, "/mcp restart").startswith("MCP needs the mcp package")


def test_serve_puts_the_token_in_a_private_file_only(agent: Agent, tmp_path: Path) -> None:
    import os
    import re
    import stat
    import subprocess

    from shiro_kernel import redact
    from shiro_kernel.mcp.consent import folder

    stale = folder() / "serve-999999999-1234.env"  # a kernel killed before it could delete its file
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("export SHIRO_MCP_TOKEN=dead\n")
    shown = command(agent, "/mcp serve")
    info = agent.mcp.server.info if agent.mcp.server else None
    assert info is not None and info.token not in shown
    path = agent.mcp.token_file
    assert path is not None and path.parent == folder() and f"Bearer token: in {path} (" in shown
    assert path.name == f"serve-{os.getpid()}-{info.url.rsplit(':', 1)[1].split('/')[0]}.env"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not stale.exists()
    # the file is ready to source: the printed commands work as shown
    sourced = subprocess.run(
        ["bash", "-c", f"source {path} && echo $SHIRO_MCP_URL $SHIRO_MCP_TOKEN"], capture_output=True, text=True
    )
    assert sourced.stdout.split() == [info.url, info.token]
    assert re.search(rf"source {re.escape(str(path))} && claude mcp add", shown)
    assert redact.redact(f"token {info.token}") == "token [redacted:SHIRO_MCP_TOKEN]"
    assert info.token not in command(agent, "/mcp") and str(path) in command(agent, "/mcp")
    assert command(agent, "/mcp serve") == shown  # shown again the same way, the same file
    assert command(agent, "/mcp stop").endswith("and the token file is deleted.")
    assert not path.exists() and redact.redact(info.token) == info.token
    # kernel shutdown deletes it too
    command(agent, "/mcp serve")
    again = agent.mcp.token_file
    assert again is not None and again.exists()
    agent.close()
    assert not again.exists()
