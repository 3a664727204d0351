"""One turn record, built without a shell (issue 41 §2): :meth:`Agent.begin` makes the
:class:`~shiro_kernel.turn.Turn` itself from what its side effects made ready — no planner copying fields into
another value — with :class:`~shiro_kernel.turn.TurnOptions` holding only what the turn decides by, and the view's
:class:`~shiro_kernel.turn.Frontend` held as it is; :meth:`Agent.ask` gives it its observers and runs it."""

from __future__ import annotations

from fakeopenai import Call, Reply

from shiro_kernel.agent import Agent
from shiro_kernel.config import Shiro
from shiro_kernel.events import Sent, ToolEnd, TurnEnd
from shiro_kernel.line import Line
from shiro_kernel.turn import HEADLESS, Frontend, Turn


def _agent(monkeypatch, fake_openai, tmp_path, **settings) -> Agent:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-plan")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.chdir(tmp_path)
    return Agent(None, Shiro(**settings))


def test_begin_builds_the_turn_without_a_shell_and_it_runs(monkeypatch, fake_openai, tmp_path) -> None:
    agent = _agent(monkeypatch, fake_openai, tmp_path, approval="auto", agents={"terse": {"max_steps": 3}})
    front = Frontend(headless=False, approver=lambda call, tool: "approve")
    turn = agent.begin(Line(prompt="add", agent="terse"), front)
    assert isinstance(turn, Turn) and turn.front is front  # the view's seams held, not copied
    assert turn.options.max_steps == 3 and turn.options.approval == "auto"  # the variant's limit, the setting's mode
    assert turn.session is agent.current.session and turn.abort is agent.abort and turn.observers == ()
    assert turn.turn_id and turn.options.checkpoint is not None  # undo's checkpoints keyed by the turn's id
    assert "python" in turn.tools and turn.ctx.root == tmp_path and turn.ctx.shell is None
    assert turn.system == agent.begin(Line(prompt="again", agent="terse"), front).system  # the same bytes each turn
    assert agent.begin(Line(prompt="x")).turn_id != turn.turn_id  # each turn its own id


def test_ask_runs_the_turn_begin_built_through_its_observers(monkeypatch, fake_openai, tmp_path) -> None:
    agent = _agent(monkeypatch, fake_openai, tmp_path, approval="auto")
    fake_openai.enqueue(Reply(tool_calls=[Call("write_file", {"path": "sum.txt", "content": "5"})]), Reply(text="5"))
    events: list = []
    end = agent.ask("write 2 + 3 to sum.txt", Frontend(on_event=events.append))
    assert end.reason == "answered" and isinstance(events[-1], TurnEnd)
    assert [e.result.is_error for e in events if isinstance(e, ToolEnd)] == [False]
    assert (tmp_path / "sum.txt").read_text() == "5"
    assert [e.request.bytes for e in events if isinstance(e, Sent)] == [len(r.raw) for r in fake_openai.requests]
    session = agent.current.session
    assert session.messages[-1].parts[0].text == "5"
    # the ledger, an observer ask gave the turn, kept its two requests under the turn's id
    assert len(session.egress.turns) == 1 and len(session.egress.requests(session.egress.turns[0]["turn"])) == 2
    said = agent.undo_back()
    assert not (tmp_path / "sum.txt").exists(), said  # its checkpoint, by turn id
    assert HEADLESS.headless and not agent.current.turning
