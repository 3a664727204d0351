"""The plan of a replay: what each kind of recorded call becomes, and the bundle's replay fields."""

from __future__ import annotations

import pytest
from replayutil import bundle, call, result, turn

from shiro_kernel.rerun.replay_plan import (
    OMIT,
    RUN,
    SKIP,
    STOP,
    call_status,
    fields_of,
    plan_from_bundle,
    plan_from_messages,
    raised,
    replay_fields,
)
from shiro_kernel.tools import Effect, Tool
from shiro_kernel.tools.base import schema
from shiro_kernel.tools.python_tool import run_python

NAME_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "<shiro-python-3>", line 1, in <module>\n'
    "    sales.sum()\n"
    "    ^^^^^\n"
    "NameError: name 'sales' is not defined"
)


def actions(plan):
    return [(s.number, s.name, s.action, s.status) for s in plan.steps]


def test_each_kind_of_call():
    messages = turn(
        "make monthly",
        [
            (call("c1", "python", code="df = 1"), result("c1", "python", "(no output)")),
            (call("c2", "inspect", names=["df"]), result("c2", "inspect", "df: int")),
            (call("c3", "read_file", path="a.csv"), result("c3", "read_file", "x,y")),
            (call("c4", "todo_write", todos=[]), result("c4", "todo_write", "ok")),
            (call("c5", "python", code="sales.sum()"), result("c5", "python", NAME_ERROR)),
            (call("c6", "python", code="x = 2"), result("c6", "python", "Error: not approved — denied", refused=True)),
            (
                call("c7", "write_file", path="r.md", content="hi"),
                result("c7", "write_file", "Error: not approved", refused=True),
            ),
            (call("c8", "shell", command="ls"), result("c8", "shell", "Error: timed out after 5 s", True)),
            (call("c9", "python", code="monthly = df + 1"), result("c9", "python", "(no output)")),
            (call("c10", "write_file", path="report.md", content="x"), result("c10", "write_file", "wrote report.md")),
            (call("c11", "python", code="after = 3"), result("c11", "python", "(no output)")),
        ],
        "Done.",
    )
    plan = plan_from_messages(messages)
    assert actions(plan) == [
        (1, "python", RUN, "ok"),
        (2, "inspect", OMIT, "ok"),
        (3, "read_file", OMIT, "ok"),
        (4, "todo_write", OMIT, "ok"),
        (5, "python", SKIP, "error"),
        (6, "python", SKIP, "refused"),
        (7, "write_file", SKIP, "refused"),
        (8, "shell", SKIP, "error"),
        (9, "python", RUN, "ok"),
        (10, "write_file", STOP, "ok"),
        (11, "python", RUN, "ok"),
    ]
    assert plan.steps[4].why == "it raised NameError: name 'sales' is not defined"
    assert plan.steps[9].target == "report.md" and "changed files" in plan.steps[9].why
    assert [s.code for s in plan.runs] == ["df = 1", "monthly = df + 1"]  # nothing after the stop
    assert plan.answer == "Done." and plan.prompt == "make monthly"


def test_the_other_changing_tools_stop_and_an_unknown_tool_counts_as_changing():
    for name in ("edit_file", "shell", "remember", "forget", "memory_write", "notebook_edit", "notebook_run"):
        plan = plan_from_messages(turn("p", [(call("c", name, path="x"), result("c", name, "done"))], "a"))
        assert plan.steps[0].action == STOP, name
    mcp = turn("p", [(call("c", "mcp__db__query", sql="select 1"), result("c", "mcp__db__query", "1"))], "a")
    assert plan_from_messages(mcp).steps[0].action == STOP

    read_only = Tool("mcp__db__query", "Query.", schema({}), lambda a, c: "1", effects=Effect.READS)
    assert plan_from_messages(mcp, {"mcp__db__query": read_only}).steps[0].action == OMIT


def test_a_call_left_waiting_for_approval_is_skipped():
    plan = plan_from_messages(turn("p", [(call("c", "python", code="x = 1"), None)], ""))
    assert actions(plan) == [(1, "python", SKIP, "pending")]


def test_raised_reads_the_tool_s_own_tracebacks(tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        cases = {
            "sales.sum()": "NameError: name 'sales' is not defined",
            "x = (": "SyntaxError: incomplete input",
            "def f(n):\n    return f(n + 1) if n < 30 else 1 / 0\nf(0)": "ZeroDivisionError: division by zero",
            "print('so far')\nraise KeyError('k')": "KeyError: 'k'",
            "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nraise ValueError('v')": "ValueError: v",
            "1 + 1": None,
            "import traceback\ntry:\n    1 / 0\nexcept Exception:\n    traceback.print_exc()\n'went on'": None,
            "print('Traceback (most recent call last):')": None,
        }
        for code, expected in cases.items():
            assert raised(run_python(shell, code).text) == expected, code
    finally:
        InteractiveShell.clear_instance()


def test_call_status_reads_the_result_s_fields_never_its_text():
    c = call("c", "python", code="x")
    assert call_status(c, result("c", "python", "2")) == ("ok", "")
    assert call_status(c, result("c", "python", "Error: not approved — denied", refused=True)) == (
        "refused",
        "not approved — denied",
    )
    # a failure (a server's own words) or an output that merely reads like a refusal is not one
    assert call_status(c, result("c", "python", "Error: not approved — by the server", True))[0] == "error"
    assert call_status(c, result("c", "python", "Error: not approved — printed")) == ("ok", "")
    assert call_status(c, result("c", "python", "Error: interrupted after 1.0 s", True)) == (
        "error",
        "interrupted after 1.0 s",
    )
    assert call_status(c, None)[0] == "pending"


def test_bundle_fields_round_trip_to_the_same_plan():
    messages = turn(
        "which region grew the most?",
        [
            (call("c1", "python", code="import pandas as pd\n" + "x = 1\n" * 3000), result("c1", "python", "ok")),
            (call("c2", "grep", pattern="x"), result("c2", "grep", "a.py:1")),
            (call("c3", "python", code="y"), result("c3", "python", NAME_ERROR)),
            (call("c4", "shell", command="rm -rf out"), result("c4", "shell", "")),
        ],
        "West grew the most.",
    )
    fields = replay_fields(messages, prompt="which region grew the most?", cell_id="abc", ordinal=2, turn_id="t9")
    assert {k: fields[k] for k in ("prompt", "cellId", "ordinal", "turnId")} == {
        "prompt": "which region grew the most?",
        "cellId": "abc",
        "ordinal": 2,
        "turnId": "t9",
    }
    assert fields["replay"][0] == {
        "callId": "c1",
        "name": "python",
        "status": "ok",
        "code": "import pandas as pd\n" + "x = 1\n" * 3000,  # uncut: entries[].code stops at 4,000
        "changes": False,
    }
    assert fields["replay"][2]["status"] == "error" and fields["replay"][2]["code"] is None
    assert fields["replay"][2]["error"] == "it raised NameError: name 'sales' is not defined"
    assert fields["replay"][3]["changes"] is True
    saved = bundle(messages, prompt="which region grew the most?")
    from_bundle = plan_from_bundle(saved)
    from_messages = plan_from_messages(messages)
    assert actions(from_bundle) == actions(from_messages)
    assert [s.code for s in from_bundle.runs] == [s.code for s in from_messages.runs]
    assert from_bundle.answer == "West grew the most." and from_bundle.prompt == "which region grew the most?"
    assert from_bundle.steps[3].target == "rm -rf out"
    assert set(fields_of(saved)) == {"prompt", "cellId", "ordinal", "turnId", "replay"}


def test_a_bundle_without_replay_or_malformed_is_refused():
    with pytest.raises(ValueError, match="older version"):
        plan_from_bundle({"version": 1, "entries": []})
    with pytest.raises(ValueError, match="malformed"):
        plan_from_bundle({"replay": [{"name": "python"}]})
    with pytest.raises(ValueError, match="unknown status"):
        plan_from_bundle({"replay": [{"callId": "c", "name": "python", "status": "maybe"}]})
    # a python call marked ok with no code cannot run: skipped, never run as ''
    plan = plan_from_bundle({"replay": [{"callId": "c", "name": "python", "status": "ok", "code": None}]})
    assert actions(plan) == [(1, "python", SKIP, "error")]
