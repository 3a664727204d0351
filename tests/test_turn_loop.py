"""The turn loop alone, against the in-memory :class:`fakemodel.FakeModel` (no HTTP, no SDK): steps,
tool results, approval verdicts, aborts and limits, each checked exactly. The same behaviours through the
real ``openai`` client and the HTTP fake are in test_turn.py."""

from __future__ import annotations

import threading

import pytest
from fakemodel import FakeModel, HistoryRuleBroken
from fakeopenai import Call, Reply
from turnutil import TOOLS

from shiro_kernel.approval import ALWAYS, APPROVE, DENY, LATER
from shiro_kernel.events import Error, Notice, Sent, StepStart, TextDelta, ToolStart, TurnEnd
from shiro_kernel.session import Session
from shiro_kernel.tools import ToolContext
from shiro_kernel.transcript import Message, TextPart, ToolCallPart, ToolResultPart
from shiro_kernel.turn import Frontend, Turn, TurnOptions


def turn(model: FakeModel, tmp_path, events: list, **options) -> Turn:
    seams = {k: options.pop(k) for k in ("headless", "approver", "runner") if k in options}  # the view's
    return Turn(
        Session(),
        model,
        TOOLS,
        ToolContext(root=tmp_path),
        "You are a test.",
        TurnOptions(**{"approval": "auto", **options}),
        observers=[events.append],
        front=Frontend(**seams),
    )


def test_a_text_answer_is_one_step_streamed_in_deltas(tmp_path):
    model = FakeModel().enqueue(Reply(text="The answer is 42."))
    events: list = []
    end = turn(model, tmp_path, events).run("what is it?")
    assert (end.reason, end.usage.input_tokens, end.usage.output_tokens) == ("answered", 100, 10)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The answer is 42."
    assert [type(e) for e in events if not isinstance(e, (TextDelta, Sent))] == [StepStart, TurnEnd]
    assert [m.text for m in model.history[0].messages] == ["what is it?"]
    assert model.history[0].tools == list(TOOLS)


def test_results_of_parallel_calls_reach_the_next_step_in_order(tmp_path):
    model = FakeModel().enqueue(
        Reply(tool_calls=[Call("add", {"a": 2, "b": 3}), Call("fail"), Call("crash"), Call("nope")]),
        Reply(text="done"),
    )
    events: list = []
    t = turn(model, tmp_path, events)
    assert t.run("go").reason == "answered"
    results = model.history[1].last_results()
    assert [(r.name, r.output, r.is_error) for r in results] == [
        ("add", "5", False),
        ("fail", "Error: the disk is on fire", True),
        ("crash", "Error: RuntimeError: bug in the tool", True),
        ("nope", "Error: unknown tool 'nope'; available: add, fail, crash, write", True),
    ]
    assert [e.call.name for e in events if isinstance(e, ToolStart)] == ["add", "fail", "crash", "nope"]
    assert [m.role for m in t.session.messages] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize(
    ("approval", "verdict", "headless", "expected"),
    [
        ("ask", APPROVE, False, "written"),
        (
            "ask",
            DENY,
            False,
            "Error: not approved — the user denied this write call. Ask before trying something else.",
        ),
        ("ask", DENY, True, "Error: not approved — this run cannot show approval buttons"),
        ("read-only", APPROVE, False, 'Error: not approved — Shiro.approval is "read-only", so write is refused.'),
        ("auto", DENY, False, "written"),
    ],
)
def test_approval_verdicts(tmp_path, approval, verdict, headless, expected):
    asked: list[str] = []

    def approver(call: ToolCallPart, tool) -> str:
        asked.append(call.name)
        return verdict

    model = FakeModel().enqueue(Reply(tool_calls=[Call("write", {"x": "1"}), Call("add", {"a": 1, "b": 1})]), Reply())
    events: list = []
    turn(model, tmp_path, events, approval=approval, approver=approver, headless=headless).run("write it")
    write, add = model.history[1].last_results()
    assert write.output.startswith(expected)
    assert add.output == "2"  # a reading tool never asks
    assert asked == (["write"] if approval == "ask" else [])
    told = [e.text for e in events if isinstance(e, Notice)]
    assert len(told) == (1 if headless and approval == "ask" else 0)


def test_always_allows_the_tool_for_the_rest_of_the_session(tmp_path):
    asked: list[str] = []

    def approver(call: ToolCallPart, tool) -> str:
        asked.append(call.name)
        return ALWAYS

    model = FakeModel().enqueue(
        Reply(tool_calls=[Call("write", {"x": "1"})]), Reply(tool_calls=[Call("write", {"x": "2"})]), Reply()
    )
    t = turn(model, tmp_path, [], approval="ask", approver=approver, headless=False)
    t.run("twice")
    assert asked == ["write"] and t.session.always_allowed == {"write"}
    assert [r.output for r in model.history[2].last_results()] == ["written"]


def test_a_call_left_for_later_waits_and_is_asked_first_next_turn(tmp_path):
    verdicts = [LATER, APPROVE]
    model = FakeModel().enqueue(Reply(tool_calls=[Call("write", {"x": "1"})]))
    events: list = []
    t = turn(model, tmp_path, events, approval="ask", approver=lambda c, tool: verdicts.pop(0), headless=False)
    assert t.run("write").reason == "waiting"
    assert [m.role for m in t.session.messages] == ["user", "assistant"]  # the call has no result yet
    model.enqueue(Reply(text="written it"))
    assert t.run(None).reason == "answered"
    assert [r.output for r in model.history[1].last_results()] == ["written"]
    assert len(model.history) == 2  # no model call while the call waited


def test_stop_between_steps_leaves_every_call_answered(tmp_path):
    abort = threading.Event()

    def stop_after(args, ctx):
        abort.set()
        return "stopped the world"

    model = FakeModel().enqueue(Reply(tool_calls=[Call("add", {"a": 1, "b": 2}), Call("add", {"a": 3, "b": 4})]))
    t = turn(model, tmp_path, [])
    t.abort = abort
    t.tools = {
        **TOOLS,
        "add": TOOLS["add"].__class__("add", "", TOOLS["add"].parameters, stop_after, TOOLS["add"].effects),
    }
    assert t.run("go").reason == "aborted"
    results = [p for p in t.session.messages[-1].parts if isinstance(p, ToolResultPart)]
    assert [r.output for r in results] == [
        "stopped the world",
        "Error: not run — the user stopped the turn before this call ran.",
    ]
    assert len(model.history) == 1


def test_max_steps_ends_with_one_notice(tmp_path):
    model = FakeModel().enqueue(*[Reply(tool_calls=[Call("add", {"a": i, "b": 0})]) for i in range(3)])
    events: list = []
    end = turn(model, tmp_path, events, max_steps=3).run("loop")
    assert end.reason == "max_steps" and len(model.history) == 3
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "stopped after 3 steps (Shiro.max_steps); send another prompt to let it continue"
    ]


def test_a_provider_error_ends_the_turn_with_its_sentence(tmp_path):
    model = FakeModel().enqueue(Error("The model server said no (HTTP 400).", status=400))
    end = turn(model, tmp_path, []).run("hi")
    assert (end.reason, end.error) == ("error", "The model server said no (HTTP 400).")


def test_the_fake_refuses_what_the_api_refuses():
    """The fake's own check, so the tests above cannot pass on a history the real API would refuse."""
    model = FakeModel().enqueue(Reply(text="x"), Reply(text="y"))
    call = Message("assistant", [ToolCallPart("c1", "add", "{}")])
    with pytest.raises(HistoryRuleBroken, match="have no result"):
        list(model.stream("", [Message.user("a"), call, Message.user("b")], []))
    orphan = Message("tool", [ToolResultPart("c9", "add", "1")])
    with pytest.raises(HistoryRuleBroken, match="which no call made"):
        list(model.stream("", [Message.user("a"), Message("assistant", [TextPart("x")]), orphan], []))
