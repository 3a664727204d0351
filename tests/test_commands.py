"""Slash commands and session flags through the %shiro magic (in-process shell, fake server)."""

from __future__ import annotations

import pytest
from fakeopenai import Call, Reply
from IPython.utils.capture import capture_output


@pytest.fixture
def shell(shiro_shell):
    return shiro_shell


def run(shell, source: str) -> str:
    with capture_output() as cap:
        shell.run_cell(source)
    return cap.stdout + cap.stderr + "".join(o.data.get("text/plain", "") for o in cap.outputs)


def agent(shell):
    return shell.magics_manager.registry["ShiroMagics"].agent


def test_todos_sessions_save_resume_clear(shell, fake_openai):
    assert run(shell, "%shiro /todos").strip() == "no tasks"
    assert run(shell, "%shiro /sessions").strip() == "no saved sessions"
    assert run(shell, "%shiro /save").strip() == "nothing to save yet: the session has no messages"
    fake_openai.enqueue(
        Reply(tool_calls=[Call("todo_write", {"todos": [{"content": "fix the join", "status": "blocked"}]})]),
        Reply(text="blocked on the join"),
    )
    tool_row, answer, _footer = run(shell, "%shiro why does the join drop rows?").split("\n\n")
    assert tool_row.startswith("✓ todo_write([{'content': 'fix the join', 'status': 'blocked'}]) · ok · ")
    assert answer == "blocked on the join"
    first = agent(shell).current.session.id
    assert run(shell, "%shiro /save").strip() == f"saved {first}"
    assert run(shell, "%shiro /todos").splitlines() == [
        "tasks ........................................ 0/1  1 blocked",
        "[!] fix the join",
    ]
    rows = run(shell, "%shiro /sessions")
    # started within the minute: shown to its millisecond (13 characters), a later session cannot share that
    assert rows.startswith(f"{first[:13]}  ") and "4msg  why does the join drop rows?" in rows

    assert "cleared; the previous session stays resumable" in run(shell, "%shiro /clear")
    assert agent(shell).current.session.id != first and run(shell, "%shiro /todos").strip() == "no tasks"
    assert run(shell, "%shiro /resume").strip() == "usage: /resume <session-id>"
    assert run(shell, "%shiro /resume zzzz").strip() == 'no session matching "zzzz"'
    out = run(shell, f"%shiro /resume {first[:13]}")
    assert out.strip() == f'resumed {first[:13]} — 4 messages: "why does the join drop rows?"'  # as -r says it
    assert "[!] fix the join" in run(shell, "%shiro /todos")  # /resume restores the task list too


def test_flags_new_continue_and_resume(shell, fake_openai):
    fake_openai.enqueue(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    run(shell, "%shiro first question")
    first = agent(shell).current.session
    agent(shell).current.autosaver.flush()
    run(shell, "%shiro --new second question")
    assert agent(shell).current.session.id != first.id
    agent(shell).current.autosaver.flush()
    out = run(shell, f"%shiro -r {first.id[:23]}")  # both made within seconds: a longer prefix
    assert out.strip() == f'resumed {first.id[:13]} — 2 messages: "first question"'  # whole groups only
    out = run(shell, "%shiro -c")  # newest for this notebook (here: this folder): the second one
    assert '"second question"' in out
    with capture_output() as cap:
        shell.run_cell("%shiro -r ffffffff")
    assert 'no session matching "ffffffff"' in cap.stderr + cap.stdout


def test_history_cost_help_and_unknown(shell, fake_openai):
    fake_openai.enqueue(Reply(text="a", usage=(1000, 10)), Reply(text="b", usage=(1000, 10)))
    run(shell, "%shiro plot it")
    run(shell, "%shiro /todos")
    run(shell, "%shiro plot it again")
    history = run(shell, "%shiro /history")
    assert "plot it" in history and "plot it again" in history and "/todos" not in history
    # the second request repeats the first one's prefix: the fake serves 1,000 tokens of it from its cache,
    # priced at gpt-4o-mini's cached rate (half the input rate)
    assert "2,000 input (1,000 of them cached) + 20 output tokens, cost $0.0002" in run(shell, "%shiro /cost")
    assert "/compact" in run(shell, "%shiro /help")
    assert run(shell, "%shiro /nope").strip() == "unknown command /nope; try /help"


def test_notes_memory_no_memory_and_mute(shell, fake_openai, tmp_path):
    assert run(shell, "%shiro /notes").strip() == "nothing remembered about this project yet"
    fake_openai.enqueue(
        Reply(
            tool_calls=[
                Call("remember", {"kind": "command", "text": "tests run with pytest -q"}),
                Call(
                    "memory_write",
                    {"scope": "project", "name": "style", "content": "use polars", "description": "house style"},
                ),
            ]
        ),
        Reply(text="noted"),
    )
    run(shell, '%config Shiro.approval = "auto"')  # remembering asks first under "ask"
    run(shell, "%shiro remember how tests run")
    assert "(command) tests run with pytest -q" in run(shell, "%shiro /notes")
    assert "memory left as is: 1 entries" in run(shell, "%shiro /memory")

    fake_openai.enqueue(Reply(text="ok"), Reply(text="still off"))
    out = run(shell, "%shiro --no-memory what do you know?")
    assert "memory is off for this session" in out and "%shiro --memory" in out
    assert "tests run with pytest -q" not in fake_openai.requests[-1].body["instructions"]
    assert "**style**" not in fake_openai.requests[-1].body["instructions"]
    run(shell, "%shiro and now?")  # --no-memory holds for the session, slash commands included
    assert "Project memories" not in fake_openai.requests[-1].body["instructions"]
    assert run(shell, "%shiro /notes").strip() == (
        "memory is disabled (--no-memory)\nturn it back on with %shiro --memory"
    )
    assert "memory is on" in run(shell, "%shiro --memory")

    out = run(shell, "%shiro --mute style,ghost")
    assert "Warning: --mute 'ghost' matches no memory" in out
    fake_openai.enqueue(Reply(tool_calls=[Call("memory_read", {"name": "style"})]), Reply(text="ok"))
    run(shell, "%shiro read the style memory")
    body = fake_openai.requests[-1].body
    assert "**style**" not in body["instructions"] and "Project memories" in body["instructions"]
    assert body["input"][-1]["output"] == "Error: memory 'style' is muted for this session"


def test_agent_variants_deep_custom_and_unknown(shell, fake_openai):
    fake_openai.enqueue(Reply(text="a"), Reply(text="b"), Reply(text="c"))
    run(shell, "%shiro plain")
    plain = fake_openai.requests[-1].body
    assert "reasoning" not in plain and "`deep` variant" not in plain["instructions"]
    run(shell, "%shiro --agent deep think hard")
    deep = fake_openai.requests[-1].body
    assert deep["reasoning"] == {"effort": "high"} and "`deep` variant" in deep["instructions"]
    shell.run_cell('%config Shiro.agents = {"terse": {"prompt": "Answer in one line.", "max_steps": 2}}')
    run(shell, "%shiro --agent terse sum up")
    assert "Answer in one line." in fake_openai.requests[-1].body["instructions"]
    out = run(shell, "%shiro --agent wizard hi")
    assert "unknown agent variant 'wizard'; known: deep, default, terse" in out
    assert len(fake_openai.requests) == 3  # nothing was sent for the unknown variant


def test_the_validator_repairs_a_resumed_history_once(shell, fake_openai):
    from shiro_kernel.session import Session
    from shiro_kernel.store.sessions import SessionStore
    from shiro_kernel.transcript import Message, TextPart, ToolResultPart

    broken = Session(
        messages=[
            Message.user("old work"),
            Message("tool", [ToolResultPart("call_gone", "python", "1")]),
            Message("assistant", [TextPart("ok")]),
        ]
    )
    SessionStore().save(broken, model="gpt-4o-mini")
    out = run(shell, f"%shiro -r {broken.id}")
    assert "repaired the resumed history: dropped a tool result whose call is missing (python, call_gone)" in out
    assert [m.role for m in agent(shell).current.session.messages] == ["user", "assistant"]
    fake_openai.enqueue(Reply(text="fine"))
    run(shell, "%shiro carry on")
    assert fake_openai.requests[-1].status == 200


def test_mcp_allow_and_deny_through_the_magic(shell, tmp_path):
    import json

    # shiro_shell works in tmp_path: a clone with a .mcp.json whose command would run on a turn
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"x": {"command": "touch", "args": ["ran"]}}}))
    assert run(shell, "%shiro /mcp allow").strip() == "usage: /mcp allow NAME [NAME…]\nwaiting: x (touch ran)"
    assert "not allowed yet (from .mcp.json): %shiro /mcp allow x starts it" in run(shell, "%shiro /mcp")
    assert not (tmp_path / "ran").exists()
    said = run(shell, "%shiro /mcp deny x").strip()
    assert said == f"'x' is not allowed in {tmp_path}; it does not start in this kernel (%shiro /mcp allow x)"
    assert "denied in this kernel" in run(shell, "%shiro /mcp")
    assert run(shell, "%shiro /mcp nope").strip() == (
        "usage: /mcp [allow NAME… | deny NAME… | restart [NAME] | serve | stop]"
    )
    assert "/mcp [allow|deny|serve|…]" in run(shell, "%shiro /help")


def test_the_memory_merge_call_retries_twice_as_the_seeds_does(shell, fake_openai, tmp_path):
    """``/memory``'s one model call: 3 attempts in all (the seed's 2 retries), whatever Shiro.max_retries is."""
    import json

    from fakeopenai import Fault

    from shiro_kernel.memory.notes import NoteStore

    store = NoteStore.for_project(tmp_path)
    store.path.parent.mkdir(parents=True, exist_ok=True)
    notes = [
        {"id": f"{i:04d}", "kind": "fact", "text": f"note {i}", "createdAt": "2024-01-01T00:00:00.000Z", "hits": 0}
        for i in range(70)
    ]
    store.path.write_text(json.dumps(notes))
    busy = {"retry-after-ms": "1"}
    fake_openai.enqueue(*[Fault.error(500, "busy", type="server_error", headers=busy) for _ in range(3)])
    fake_openai.enqueue(Reply(text="[]"))
    run(shell, "%config Shiro.max_retries = 5")
    out = run(shell, "%shiro /memory")
    assert out.startswith("memory left as is: the model call failed"), out
    assert [r.status for r in fake_openai.requests if r.path.endswith("/responses")] == [500, 500, 500]
    assert len(store.entries()) == 70
