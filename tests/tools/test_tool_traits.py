"""One rule for what a call does (issue 34 #5): a tool declares its effect once (``Tool.effects``), and approval,
the write-ahead, replay and the notebook's review derive from it; a result keeps ``refused`` and ``stopped`` as
fields through a save and a load. A new tool is one file and its name's place in the declared order
(``tools.ORDER``): a module dropped into the package's path is found, and treated as its effect says, with no other
list edited anywhere."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Reply
from faultlog import record
from frontend import Cell, FrontEnd
from IPython.utils.capture import capture_output
from turnutil import TOOLS, make_turn

import shiro_kernel.tools as package
from shiro_kernel import notebook
from shiro_kernel.approval import APPROVE, ASK, DENY, decide
from shiro_kernel.events import ToolEnd, ToolStart
from shiro_kernel.notebook.channel import Channel
from shiro_kernel.rerun.replay_plan import OMIT, SKIP, STOP, plan_from_messages, replay_fields
from shiro_kernel.session import Session
from shiro_kernel.store.autosave import Autosaver
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.store.writeahead import STOPPED_WHILE_RUNNING, WriteAhead, changes_something
from shiro_kernel.tools import Effect, Tool, all_tools
from shiro_kernel.tools.base import schema
from shiro_kernel.transcript import Message, TextPart, ToolCallPart, ToolResultPart
from shiro_kernel.turn import Frontend, TurnOptions

#: the file a newcomer writes: one tool of each effect, and nothing else anywhere
NEW_TOOL_FILE = '''"""Tools a test drops into the package: one of each effect."""

from typing import Any

from shiro_kernel.tools.base import Effect, Tool, ToolContext, ToolError, ToolOutput, Touches, schema


def _done(args: dict[str, Any], ctx: ToolContext) -> str:
    return "done"


def _insert(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    """A new cell after ``after``, reviewed in the notebook as the cell tools' changes are."""
    if ctx.notebook is None:
        raise ToolError("no notebook here")
    outcome = ctx.notebook.change(
        ctx.call_id, "zz_review", args, review=ctx.approval == "ask", timeout=ctx.approval_timeout_s, abort=ctx.abort
    )
    return ToolOutput(outcome.text, is_error=outcome.is_error, refused=outcome.refused)


INSERT = schema({"after": {"type": "integer", "description": "a cell"}, "source": {"type": "string", "description": "code"}})

TOOLS = [
    Tool("zz_reads", "Reads.", schema({}), _done, effects=Effect.READS),
    Tool("zz_namespace", "Changes names.", schema({}), _done, effects=Effect.NAMESPACE, touches=lambda a, c: Touches("")),
    Tool("zz_files", "Writes files.", schema({}), _done, effects=Effect.FILES, touches=lambda a, c: Touches()),
    Tool("zz_outside", "Changes the world.", schema({}), _done, effects=Effect.OUTSIDE),
    Tool("zz_review", "Inserts a cell.", INSERT, _insert, effects=Effect.REVIEW, kernel_thread=False),
]
'''
NEW = ["zz_reads", "zz_namespace", "zz_files", "zz_outside", "zz_review"]
CHANGING = {"zz_namespace", "zz_files", "zz_outside", "zz_review"}
ASKED = {"zz_namespace", "zz_files", "zz_outside"}


def call(call_id: str, name: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(call_id, name, json.dumps(args))


def result(call_id: str, name: str, output: str, error: bool = False, refused: bool = False) -> ToolResultPart:
    return ToolResultPart(call_id, name, output, is_error=error or refused, refused=refused)


def turn(prompt: str, steps: list[tuple[ToolCallPart, ToolResultPart | None]], answer: str) -> list[Message]:
    """A recorded turn: the prompt, one assistant message and one tool message per call, then the answer."""
    messages = [Message.user(prompt)]
    for c, r in steps:
        messages += [Message("assistant", [c]), *([Message("tool", [r])] if r is not None else [])]
    return [*messages, Message("assistant", [TextPart(answer)])]


@pytest.fixture
def new_tool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """``zz_traits.py`` in a folder on ``shiro_kernel.tools``' path and its tools at the end of ``ORDER``, as if a
    newcomer had added them to the package (the real package folder is shared by every test run on this machine:
    it stays untouched)."""
    folder = tmp_path / "more_tools"
    folder.mkdir()
    (folder / "zz_traits.py").write_text(NEW_TOOL_FILE, encoding="utf-8")
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    monkeypatch.setattr(package, "ORDER", (*package.ORDER, *NEW))
    yield
    sys.modules.pop(f"{package.__name__}.zz_traits", None)


def test_a_new_tool_is_one_file_and_its_place_in_the_order(new_tool):
    tools = all_tools()
    assert list(tools)[-5:] == NEW  # where ORDER puts them
    assert {name: tools[name].effects for name in NEW} == {
        "zz_reads": Effect.READS,
        "zz_namespace": Effect.NAMESPACE,
        "zz_files": Effect.FILES,
        "zz_outside": Effect.OUTSIDE,
        "zz_review": Effect.REVIEW,
    }
    assert list(all_tools()) == list(tools)  # the order is stable: the prompt's tool list stays byte-stable
    assert "python" in tools and "notebook_edit" in tools


def test_two_tools_of_one_name_are_said_at_once(new_tool, tmp_path):
    (tmp_path / "more_tools" / "zz_twice.py").write_text(
        "from shiro_kernel.tools.base import Effect, Tool, schema\n"
        "TOOLS = [Tool('zz_reads', 'Again.', schema({}), lambda a, c: '', effects=Effect.READS)]\n",
        encoding="utf-8",
    )
    try:
        with pytest.raises(
            ValueError, match="two tools are named 'zz_reads' \\(the second in shiro_kernel.tools.zz_twice\\)"
        ):
            all_tools()
    finally:
        sys.modules.pop(f"{package.__name__}.zz_twice", None)


def test_a_tool_declares_at_least_one_effect():
    with pytest.raises(ValueError, match="declares no effect"):
        Tool("nothing", "Does nothing.", schema({}), lambda a, c: "", effects=Effect(0))


def test_approval_write_ahead_and_replay_follow_the_declared_effect(new_tool):
    tools = all_tools()
    assert {n: decide("ask", tools[n]) for n in NEW} == {n: ASK if n in ASKED else APPROVE for n in NEW}
    assert {n: decide("read-only", tools[n]) for n in NEW} == {n: DENY if n in CHANGING else APPROVE for n in NEW}
    assert {n: decide("auto", tools[n]) for n in NEW} == dict.fromkeys(NEW, APPROVE)
    assert decide("ask", tools["zz_files"], allowed=True) == APPROVE  # "Always this session"
    needs = changes_something(tools)
    assert {n: needs(n) for n in NEW} == {n: n in CHANGING for n in NEW}
    assert needs("mcp__gone__query")  # a tool not known here: nothing says it changes nothing
    # replay: the built-in table (the new module's tools among them) when no tools are handed in
    for name in NEW:
        steps = [(call("c1", name), result("c1", name, "done")), (call("c2", "python", code="x = 1"), None)]
        plan = plan_from_messages(turn("p", steps, "a"))
        assert plan.steps[0].action == (STOP if name in CHANGING else OMIT), name
        fields = replay_fields(turn("p", steps, "a"), prompt="p", cell_id=None, ordinal=0, turn_id="t")
        assert fields["replay"][0]["changes"] is (name in CHANGING), name
    undoable = {n: tools[n].undoable for n in NEW}
    assert undoable == {n: n != "zz_outside" for n in NEW}
    assert [n for n in NEW if tools[n].reviewed] == ["zz_review"]


def test_the_record_holds_a_changing_call_before_it_runs_as_stopped(new_tool, tmp_path):
    store = SessionStore(tmp_path / "sessions")
    session = Session()
    saver = Autosaver(store, session, lambda: "m", delay=3600, at_exit=False)  # no debounced write in between
    calls = [ToolCallPart(f"c{k}", name, "{}") for k, name in enumerate([*NEW, "mcp__gone__query"])]
    session.append(Message.user("go"))
    session.append(Message("assistant", list(calls)))
    ahead = WriteAhead(saver, changes_something(all_tools()))
    written = {}
    for c in calls:
        before = ahead.writes
        ahead(ToolStart(c))
        written[c.name] = ahead.writes > before
        if written[c.name]:  # the record on disk holds the call now, as one the kernel stopped while it ran
            held = {r.call_id: r for r in store.load(session.id).messages[-1].tool_results()}
            assert held[c.call_id].output == STOPPED_WHILE_RUNNING and held[c.call_id].stopped
        ahead(ToolEnd(c, ToolResultPart(c.call_id, c.name, "done"), 0.0))
    saver.close()
    assert written == {**{n: n in CHANGING for n in NEW}, "mcp__gone__query": True}


@pytest.mark.parametrize("policy", ["ask", "read-only"])
def test_a_turn_asks_and_refuses_as_the_effects_say_and_refused_is_saved(new_tool, fake_openai, tmp_path, policy):
    asked: list[str] = []

    def approver(c: ToolCallPart, tool: Tool) -> str:
        asked.append(c.name)
        return DENY

    fake_openai.enqueue(
        Reply(tool_calls=[Call(n, {"after": 0, "source": "x"} if n == "zz_review" else {}) for n in NEW])
    )
    fake_openai.enqueue(Reply(text="done"))
    t = make_turn(fake_openai, tmp_path, options=TurnOptions(approval=policy), front=Frontend(approver=approver))
    t.tools = all_tools()
    t.run("do it all")
    assert asked == ([n for n in NEW if n in ASKED] if policy == "ask" else [])
    refused = ASKED if policy == "ask" else CHANGING
    results = {r.name: r for m in t.session.messages for r in m.tool_results()}
    ran = {n for n in refused if not results[n].refused}  # a call its effect says is refused, run anyway
    record(
        f'security: a tool added as one new file, under "{policy}"' + (" (the user denies)" if policy == "ask" else ""),
        len(refused),
        len(ran),
        "its NAMESPACE, FILES and OUTSIDE tools asked and refused, the REVIEW one left to its notebook review"
        if policy == "ask"
        else "every tool that changes something refused (NAMESPACE, FILES, OUTSIDE, REVIEW); the READS one ran",
    )
    assert {n for n, r in results.items() if r.refused} == refused
    assert results["zz_reads"].output == "done" and not results["zz_reads"].is_error
    if policy == "ask":  # a review tool is not asked before it runs: it asks in the notebook (none here)
        assert results["zz_review"].output == "Error: no notebook here" and not results["zz_review"].refused
    store = SessionStore(tmp_path / "sessions")
    store.save(t.session)
    loaded = {r.name: r for m in store.load(t.session.id).messages for r in m.tool_results()}
    assert loaded == results
    plan = plan_from_messages(store.load(t.session.id).messages)
    assert {s.name: (s.action, s.status) for s in plan.steps if s.name in refused} == dict.fromkeys(
        refused, (SKIP, "refused")
    )


def test_a_stopped_call_and_the_calls_it_left_are_stopped_through_a_save_and_load(fake_openai, tmp_path):
    def interrupt(args: dict[str, Any], ctx: Any) -> str:
        raise KeyboardInterrupt

    fake_openai.enqueue(
        Reply(tool_calls=[Call("add", {"a": 1, "b": 1}), Call("stop", {}), Call("add", {"a": 2, "b": 2})])
    )
    t = make_turn(fake_openai, tmp_path)
    t.tools = dict(TOOLS, stop=Tool("stop", "Interrupts.", schema({}), interrupt, effects=Effect.READS))
    assert t.run("go").reason == "aborted"
    store = SessionStore(tmp_path / "sessions")
    store.save(t.session)
    saved = json.loads(store.path_for(t.session.id).read_text())["messages"][-1]["parts"]
    assert [p.get("stopped", False) for p in saved] == [False, True, True]
    loaded = store.load(t.session.id).messages[-1].tool_results()
    assert [(r.output, r.stopped, r.refused) for r in loaded] == [
        ("2", False, False),
        (loaded[1].output, True, False),
        (loaded[2].output, True, False),
    ]


def test_a_record_written_before_the_fields_replays_as_it_did(tmp_path):
    """An older version saved no ``refused``/``stopped``: its refusals are read by their text once, at load, and
    a replay still skips them as refused; a failure that only reads like a refusal, saved now, stays a failure."""
    messages = turn(
        "p",
        [
            (call("c1", "python", code="a = 1"), result("c1", "python", "(no output)")),
            (call("c2", "python", code="b = 2"), result("c2", "python", "Error: not approved — denied", refused=True)),
            (
                call("c3", "python", code="c = 3"),
                result(
                    "c3",
                    "python",
                    "Error: interrupted after 1.0 s — the user stopped the turn while this call ran",
                    True,
                ),
            ),
            (call("c4", "python", code="d = 4"), result("c4", "python", "(no output)")),
        ],
        "Done.",
    )
    messages[6].parts[0].stopped = True  # c3's result
    session = Session(messages=messages)
    store = SessionStore(tmp_path / "sessions")
    store.save(session)
    path = store.path_for(session.id)
    record = json.loads(path.read_text())
    for message in record["messages"]:  # as an older version wrote it: the text alone
        for part in (p for p in message["parts"] if p["type"] == "tool_result"):
            assert part.pop("refused", False) == (part.get("callId") == "c2")
            assert part.pop("stopped", False) == (part.get("callId") == "c3")
    path.write_text(json.dumps(record))
    loaded = store.load(session.id).messages
    assert [(r.refused, r.stopped) for m in loaded for r in m.tool_results()] == [
        (False, False),
        (True, False),
        (False, True),
        (False, False),
    ]
    plan = plan_from_messages(loaded)
    assert [(s.action, s.status) for s in plan.steps] == [
        ("run", "ok"),
        (SKIP, "refused"),
        (SKIP, "error"),
        ("run", "ok"),
    ]
    # saved by this version: a tool's failure whose text starts like a refusal is not one, after a load too
    own = Session(
        messages=turn(
            "p",
            [(call("c", "python", code="x"), result("c", "python", "Error: not approved — the server's words", True))],
            "a",
        )
    )
    store.save(own)
    assert plan_from_messages(store.load(own.id).messages).steps[0].status == "error"


@pytest.fixture
def front(shiro_shell: Any) -> Iterator[FrontEnd]:
    fe = FrontEnd(cells=[Cell("import pandas as pd", id="c1"), Cell("df = pd.read_csv('a.csv')", id="c2")])
    notebook.attach(shiro_shell, Channel(fe))
    yield fe
    notebook.detach(shiro_shell)


def test_a_new_review_tool_joins_the_step_s_one_review(new_tool, shiro_shell, fake_openai, front):
    """Its changes go to the notebook with the cell tools' in the step's one review (Accept all): the turn picks
    the step's review calls by their effect, and the document takes what it is given."""
    front.answers = ["accepted", "accepted"]
    fake_openai.enqueue(
        Reply(tool_calls=[Call("notebook_read", {"cells": None, "images": None})]),
        Reply(
            tool_calls=[
                Call("notebook_edit", {"cell": 1, "source": "df = pd.read_csv('b.csv')"}),
                Call("zz_review", {"after": 1, "source": "df.info()"}),
            ]
        ),
        Reply(text="done"),
    )
    with capture_output():
        shiro_shell.run_cell("%shiro tidy up")
    reviews = [r for r in front.requests if r.get("op") == "review"]
    assert len(reviews) == 1 and [c["kind"] for c in reviews[0]["changes"]] == ["edit", "insert"]
    assert [c.source for c in front.cells] == ["import pandas as pd", "df = pd.read_csv('b.csv')", "df.info()"]
