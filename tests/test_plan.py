"""A turn planned from a :class:`~shiro_kernel.plan.Ready` without a shell or an agent (issue 41 §2): ``plan`` is a
pure function of what is ready, the line, the view and the settings; the turn it makes runs against the fake."""

from __future__ import annotations

import threading

from fakeopenai import Call, Reply
from turnutil import TOOLS

from shiro_kernel.config import Shiro
from shiro_kernel.context.wire_copy import WireState
from shiro_kernel.events import Sent, ToolEnd, TurnEnd
from shiro_kernel.line import Line
from shiro_kernel.plan import Ready, plan
from shiro_kernel.provider.client import Provider, ProviderSettings
from shiro_kernel.session import Session
from shiro_kernel.tools import ToolContext
from shiro_kernel.turn import HEADLESS, Frontend


def test_a_turn_planned_from_what_is_ready_runs_without_a_shell(fake_openai, tmp_path) -> None:
    session = Session()
    settings = ProviderSettings("gpt-4o-mini", base_url=fake_openai.base_url, max_retries=0)
    ready = Ready(
        session=session,
        wire=WireState(),
        variant={"max_steps": 3},
        provider=Provider(settings),
        tools=TOOLS,
        context=ToolContext(root=tmp_path),
        system="You are a test.",
        state=lambda: "",
        budget_usd=None,
    )
    config = Shiro(approval="auto")
    events: list = []
    turn = plan(ready, Line(prompt="add"), HEADLESS, config, [events.append], threading.Event())
    assert turn.options.max_steps == 3 and turn.options.approval == "auto" and turn.front is HEADLESS
    assert turn.session is session and turn.system == "You are a test." and turn.tools == dict(TOOLS)
    fake_openai.enqueue(Reply(tool_calls=[Call("add", {"a": 2, "b": 3})]), Reply(text="5"))
    end = turn.run("add 2 and 3")
    assert end.reason == "answered" and isinstance(events[-1], TurnEnd)
    assert [e.result.output for e in events if isinstance(e, ToolEnd)] == ["5"]
    assert [e.request.bytes for e in events if isinstance(e, Sent)] == [len(r.raw) for r in fake_openai.requests]
    assert session.messages[-1].parts[0].text == "5"
    # the view decides what is asked: a front with buttons is not headless, and plan changes nothing of what is ready
    front = Frontend(headless=False, approver=lambda c, t: "approve")
    assert plan(ready, Line(prompt="x"), front, config, [], threading.Event()).front is front  # held, not copied
    assert ready.session is session and len(session.messages) == 4
