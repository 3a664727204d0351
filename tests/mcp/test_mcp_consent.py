"""A repository's ``.mcp.json`` servers start only once the user allows them (issue 23, points 2 and 4).

The servers are real: ``bash -c 'touch MARKER; exec python sdk_server.py'`` — the shape of the attack in the
issue — so a marker file says whether the command ran at all. Turns run against the fake OpenAI server
through the real client; the consent file is the real one under the test's ``SHIRO_HOME``.
"""

from __future__ import annotations

import json
import shlex
import stat
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Reply
from faultlog import record
from mcp_testutil import PY, SDK_SERVER, children, wait_for

from shiro_kernel.agent import Agent
from shiro_kernel.commands import run as command
from shiro_kernel.config import Shiro
from shiro_kernel.events import Event, Notice, ToolEnd
from shiro_kernel.mcp.config import load_config, parse_server
from shiro_kernel.mcp.consent import ALLOW, ALLOWED, CHANGED, DENY, NEW, ConsentRequest, ConsentStore
from shiro_kernel.turn import Frontend


def marking_server(marker: Path, *extra: str) -> dict[str, Any]:
    """A stdio server whose command leaves ``marker`` behind when it runs (then serves the SDK test server)."""
    script = f"touch {shlex.quote(str(marker))}; exec " + shlex.join([PY, SDK_SERVER, *extra])
    return {"command": "bash", "args": ["-c", script]}


def write_project(root: Path, servers: dict[str, Any]) -> None:
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t.get("name") or t["function"]["name"] for t in body.get("tools", [])]


def notices(events: list[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice)]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: Any) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-consent")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    root = tmp_path / "clone"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def agents() -> Any:
    made: list[Agent] = []

    def make(**settings: Any) -> Agent:
        agent = Agent(None, Shiro(model="gpt-4o-mini", approval="ask", **settings))
        made.append(agent)
        return agent

    yield make
    for agent in made:
        agent.close()


def test_headless_turn_starts_no_project_server_and_says_how_to_allow(
    project: Path, agents: Any, fake_openai: Any
) -> None:
    evil, other = project / "evil-ran", project / "other-ran"
    write_project(project, {"evil": marking_server(evil), "other": marking_server(other)})
    before = set(children())
    agent = agents()
    fake_openai.enqueue(Reply(text="hi"), Reply(text="again"))
    events: list[Event] = []
    assert agent.ask("hello", Frontend(on_event=events.append)).reason == "answered"
    # 2 project servers tried headless, 0 started: no command ran, no process, no tool offered
    assert not evil.exists() and not other.exists()
    assert set(children()) == before
    assert not [n for n in tool_names(fake_openai.requests[0].body) if n.startswith("mcp__")]
    said = [n for n in notices(events) if ".mcp.json" in n]
    assert said == [
        f"MCP servers from {project / '.mcp.json'} were not started: a repository's MCP servers run only after you "
        f"allow them. 'evil' would run: bash -c 'touch {evil}; exec {PY} {SDK_SERVER}'; 'other' would run: "
        f"bash -c 'touch {other}; exec {PY} {SDK_SERVER}'. To allow them: %shiro /mcp allow evil other, or "
        f"shiro mcp allow evil other --project {project} in a terminal, or declare them in your own "
        "%config Shiro.mcp_servers."
    ]
    # once per kernel: the next turn says nothing more, and still starts nothing
    events.clear()
    assert agent.ask("again", Frontend(on_event=events.append)).reason == "answered"
    assert not notices(events) and not evil.exists()
    record(
        "security: a cloned repository's .mcp.json servers (`bash -c 'touch …; exec …'`), two headless turns",
        2,
        int(evil.exists()) + int(other.exists()),
        "0 of 2 commands ran, 0 processes, 0 tools offered; one notice naming both commands and the three ways "
        "to allow them",
    )
    status = command(agent, "/mcp")
    assert "  evil (stdio: bash -c 'touch " in status
    assert "— not allowed yet (from .mcp.json): %shiro /mcp allow evil starts it" in status
    assert command(agent, "/mcp restart evil") == (
        "MCP server 'evil' is not allowed yet (from .mcp.json): %shiro /mcp allow evil starts it"
    )
    assert not evil.exists()


def test_allow_starts_it_remembers_it_and_a_changed_definition_asks_again(
    project: Path, agents: Any, fake_openai: Any
) -> None:
    marker = project / "ran"
    write_project(project, {"sdk": marking_server(marker)})
    agent = agents()
    assert command(agent, "/mcp allow nope") == f"no MCP server named 'nope' in {project / '.mcp.json'}"
    said = command(agent, "/mcp allow sdk")
    assert said.startswith(f"allowed 'sdk' in {project}: bash -c 'touch {marker}; exec ")
    assert "(asked again if .mcp.json changes its definition)" in said and "ready, 12 tools" in said
    assert marker.exists()
    store = ConsentStore()
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600 and stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    fake_openai.enqueue(Reply(text="ok"))
    agent.ask("hi")
    assert "mcp__sdk__echo" in tool_names(fake_openai.requests[-1].body)

    # a new kernel: remembered, starts without a word
    marker.unlink()
    fresh = agents()
    events: list[Event] = []
    fake_openai.enqueue(Reply(text="ok"))
    fresh.ask("hi", Frontend(on_event=events.append))
    assert marker.exists() and "mcp__sdk__echo" in tool_names(fake_openai.requests[-1].body)
    assert not [n for n in notices(events) if ".mcp.json" in n]

    # the repository changes the server's args (a pull): not started, asked again
    marker.unlink()
    write_project(project, {"sdk": marking_server(marker, "--extra")})
    changed = agents()
    events.clear()
    fake_openai.enqueue(Reply(text="ok"))
    changed.ask("hi", Frontend(on_event=events.append))
    assert not marker.exists() and "mcp__sdk__echo" not in tool_names(fake_openai.requests[-1].body)
    said_now = [n for n in notices(events) if ".mcp.json" in n]
    assert len(said_now) == 1 and "MCP server 'sdk' (changed since you allowed it) from " in said_now[0]
    assert "%shiro /mcp allow sdk" in said_now[0]
    assert "changed since you allowed it (from .mcp.json), not started" in command(changed, "/mcp")
    # the kernel that was running it stops it at its next look at the file
    assert "changed since you allowed it" in command(fresh, "/mcp")
    assert "mcp__sdk__echo" not in command(fresh, "/mcp")


def test_deny_and_revoke(project: Path, agents: Any, fake_openai: Any) -> None:
    marker = project / "ran"
    write_project(project, {"sdk": marking_server(marker)})
    agent = agents()
    command(agent, "/mcp allow sdk")
    assert marker.exists()
    said = command(agent, "/mcp deny sdk")
    assert said == f"'sdk' is no longer allowed in {project}; it does not start in this kernel (%shiro /mcp allow sdk)"
    assert "denied in this kernel (from .mcp.json)" in command(agent, "/mcp")
    assert ConsentStore().state(project, load_config(project)["sdk"]) == NEW
    assert wait_for(lambda: not any("sdk_server.py" in c for c in children().values()), 10)


def test_the_users_own_servers_start_without_asking(project: Path, agents: Any, fake_openai: Any) -> None:
    mine, theirs = project / "mine-ran", project / "theirs-ran"
    write_project(project, {"sdk": marking_server(theirs), "extra": marking_server(theirs)})
    # the same name in Shiro.mcp_servers wins over the repository's entry, and is the user's own
    agent = agents(mcp_servers={"sdk": marking_server(mine)})
    events: list[Event] = []
    fake_openai.enqueue(Reply(text="ok"))
    agent.ask("hi", Frontend(on_event=events.append))
    assert mine.exists() and not theirs.exists()
    assert "mcp__sdk__echo" in tool_names(fake_openai.requests[-1].body)
    said = [n for n in notices(events) if ".mcp.json" in n]
    assert len(said) == 1 and "'extra'" in said[0] and "'sdk'" not in said[0]
    assert command(agent, "/mcp allow sdk") == "'sdk' comes from your own Shiro.mcp_servers: it starts without asking"


def test_a_live_turn_asks_and_remembers_allow_and_deny(project: Path, agents: Any, fake_openai: Any) -> None:
    marker = project / "ran"
    write_project(
        project,
        {"sdk": {**marking_server(marker), "env": {"API_KEY": "sk-literal-in-the-file", "HOME_DIR": "${HOME}"}}},
    )
    asked: list[ConsentRequest] = []

    def deny(request: ConsentRequest) -> str:
        asked.append(request)
        assert not marker.exists()  # asked before anything runs
        return DENY

    agent = agents()
    fake_openai.enqueue(Reply(text="ok"), Reply(text="ok"))
    agent.ask("hi", Frontend(headless=False, consent=deny))
    assert len(asked) == 1 and not marker.exists()
    request = asked[0]
    assert request.server == "sdk" and request.file == project / ".mcp.json" and not request.changed
    assert request.lines[0] == f"bash -c 'touch {marker}; exec {PY} {SDK_SERVER}'"
    assert request.lines[1] == "env: API_KEY=*** HOME_DIR=${HOME}"  # a literal secret masked, references as written
    agent.ask("again", Frontend(headless=False, consent=deny))
    assert len(asked) == 1  # Deny holds for this kernel: not asked on every turn
    assert "mcp__sdk__echo" not in tool_names(fake_openai.requests[-1].body)

    def allow(request: ConsentRequest) -> str:
        asked.append(request)
        return ALLOW

    other = agents()  # another kernel: asked again, and this time allowed
    fake_openai.enqueue(Reply(text="ok"))
    other.ask("hi", Frontend(headless=False, consent=allow))
    assert len(asked) == 2 and marker.exists()
    assert "mcp__sdk__echo" in tool_names(fake_openai.requests[-1].body)
    assert ConsentStore().state(project, load_config(project)["sdk"]) == ALLOWED
    third = agents()
    fake_openai.enqueue(Reply(text="ok"))
    third.ask("hi", Frontend(headless=False, consent=allow))
    assert len(asked) == 2  # remembered for the project


def test_a_project_servers_read_only_hint_does_not_skip_approval(project: Path, agents: Any, fake_openai: Any) -> None:
    write_project(project, {"repo": {"command": PY, "args": [SDK_SERVER]}})
    agent = agents(mcp_servers={"mine": {"command": PY, "args": [SDK_SERVER]}})
    command(agent, "/mcp allow repo")  # allowed to start: its hints still do not count
    fake_openai.enqueue(
        Reply(tool_calls=[Call("mcp__repo__echo", {"text": "says read-only"}), Call("mcp__mine__echo", {"text": "x"})]),
        Reply(text="ok"),
    )
    events: list[Event] = []
    agent.ask("echo", Frontend(on_event=events.append))  # headless, approval "ask"
    results = {e.call.name: e.result for e in events if isinstance(e, ToolEnd)}
    # echo says readOnlyHint in both; only the user's own server is believed
    assert results["mcp__repo__echo"].is_error and results["mcp__repo__echo"].output.startswith("Error: not approved")
    assert not results["mcp__mine__echo"].is_error and results["mcp__mine__echo"].output == "x"
    record(
        'security: a project server\'s tool marked readOnlyHint, headless under "ask"',
        1,
        int(not results["mcp__repo__echo"].is_error),
        "refused with `Error: not approved` (the hint counts only for the user's own Shiro.mcp_servers, whose "
        "same tool ran)",
    )
    status = command(agent, "/mcp")
    assert "    mcp__mine__echo [read-only] — " in status and "    mcp__repo__echo — " in status


def test_the_definition_fingerprint() -> None:
    base = {"command": "uvx", "args": ["srv"], "env": {"TOKEN": "${T}"}, "cwd": "sub"}
    env = {"T": "value-one"}

    def fp(entry: dict[str, Any], environ: dict[str, str] = env) -> str:
        return parse_server("s", entry, ".mcp.json", environ).fingerprint()

    first = fp(base)
    assert fp(base, {"T": "another-value"}) == first  # ${VAR} counts as written, not as expanded
    for changed in (
        {**base, "command": "npx"},
        {**base, "args": ["srv", "--x"]},
        {**base, "env": {"TOKEN": "${U}"}},
        {**base, "env": {"TOKEN": "${T}", "LD_PRELOAD": "/tmp/x.so"}},
        {**base, "cwd": "elsewhere"},
    ):
        assert fp(changed, {"T": "v", "U": "v"}) != first, changed
    assert parse_server("t", base, ".mcp.json", env).fingerprint() != first  # another name
    web = {"url": "https://h.example/mcp", "headers": {"Authorization": "Bearer abc123456"}}
    assert fp(web) == fp({**web, "headers": {"Authorization": "Bearer rotated-999"}})  # header names only
    assert fp(web) != fp({**web, "url": "https://evil.example/mcp"})
    assert fp(web) != fp({**web, "headers": {"X-Other": "1"}})


def test_a_corrupt_consent_file_allows_nothing_and_is_set_aside(project: Path, agents: Any) -> None:
    marker = project / "ran"
    write_project(project, {"sdk": marking_server(marker)})
    store = ConsentStore()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text("{not json")
    events: list[Event] = []
    agent = agents()
    agent.mcp.tools_for_turn(project, events.append)
    assert not marker.exists()
    assert any("allowed.json" in n and "treated as not allowed" in n for n in notices(events)), notices(events)
    assert command(agent, "/mcp allow sdk").startswith("allowed 'sdk'")
    assert marker.exists() and ConsentStore().state(project, load_config(project)["sdk"]) == ALLOWED
    assert [p.name for p in store.path.parent.glob("allowed.json.corrupt-*")]  # kept beside, not overwritten


def test_store_states_and_revoke(tmp_path: Path) -> None:
    store = ConsentStore(tmp_path / "allowed.json")
    cfg = parse_server("s", {"command": "a"}, ".mcp.json")
    assert store.state(tmp_path, cfg) == NEW
    store.allow(tmp_path, cfg)
    assert store.state(tmp_path, cfg) == ALLOWED
    assert store.state(tmp_path / "other", cfg) == NEW  # per project
    assert store.state(tmp_path, parse_server("s", {"command": "b"}, ".mcp.json")) == CHANGED
    assert store.project(tmp_path)["s"].target == "a"
    assert store.revoke(tmp_path, "s") and not store.revoke(tmp_path, "s")
    assert store.state(tmp_path, cfg) == NEW


# -- the live view: the approval buttons ask, relabelled Allow / Deny ----------------------------------------
@pytest.fixture
def live_shell(project: Path) -> Any:
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.clear_instance()
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext shiro_kernel")
    shell.run_cell('%config Shiro.frontend = "widgets"')
    yield shell
    shell.run_cell("%unload_ext shiro_kernel")
    InteractiveShell.clear_instance()


def pump_until(controller: Any, cond: Any, timeout: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        controller.inbox.drain()
        controller.inbox.wait(0.01)


@pytest.mark.parametrize("click", ["approve_button", "deny_button"])
def test_the_live_view_asks_in_the_cell(live_shell: Any, project: Path, fake_openai: Any, click: str) -> None:
    marker = project / "ran"
    write_project(project, {"sdk": marking_server(marker)})
    fake_openai.enqueue(Reply(text="done"))
    live_shell.run_cell("%shiro hello")
    controller = live_shell.magics_manager.registry["ShiroMagics"].controller
    view = controller.running.view
    pump_until(controller, lambda: view.asking)
    label = view.approval_label.value
    assert "start an MCP server from this repository&#x27;s .mcp.json" in label and "<code>sdk</code>" in label
    assert f"bash -c &#x27;touch {marker}; exec " in label  # the command line it would run, in full
    assert [view.approve_button.description, view.deny_button.description] == ["Allow", "Deny"]
    assert view.always_button.layout.display == "none"
    assert not marker.exists() and not fake_openai.requests  # nothing ran, the model not asked yet
    getattr(view, click).click()
    assert controller.wait_idle(30)
    allowed = click == "approve_button"
    assert marker.exists() is allowed
    assert ("mcp__sdk__echo" in tool_names(fake_openai.requests[0].body)) is allowed
    # the buttons are the approval buttons again for the tools that follow
    assert view.approve_button.description == "Approve" and view.always_button.layout.display != "none"
    state = ConsentStore().state(project, load_config(project)["sdk"])
    assert state == (ALLOWED if allowed else NEW)


def test_an_allow_that_cannot_be_written_counts_for_this_kernel(tmp_path: Path) -> None:
    from shiro_kernel.mcp.gate import ConsentGate

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")  # SHIRO_HOME/mcp cannot be made under a file: every write fails
    gate = ConsentGate(ConsentStore(blocker / "allowed.json"))
    cfg = parse_server("s", {"command": "a"}, ".mcp.json")
    events: list[Event] = []
    assert gate.hold(tmp_path, {"s": cfg}, ask=lambda request: ALLOW, emit=events.append) == {}
    said = notices(events)  # the file cannot be read either: that is said first, once
    assert len(said) == 2 and "treated as not allowed" in said[0]
    assert said[1].startswith(
        f"MCP server 's' is allowed in this kernel only: could not write {blocker / 'allowed.json'}"
    )
    assert gate.hold(tmp_path, {"s": cfg}) == {}  # still allowed here, not asked again
    assert ConsentGate(ConsentStore(blocker / "allowed.json")).hold(tmp_path, {"s": cfg}) == {
        "s": "not allowed yet (from .mcp.json): %shiro /mcp allow s starts it"
    }
