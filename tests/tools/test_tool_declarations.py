"""What each tool declares about itself, and nothing standing in for it (issue 39 #4): the order the model sees
the tools in is declared (``tools.ORDER``, not the modules' file names) and is byte for byte what it was; every
NAMESPACE or FILES tool says what a call touches; what other agents are served, what a replay runs again, what an
approval shows, which files a pruned span names and which arguments a tool checks itself are read from the tools'
declarations, with the same results the name lists gave."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import shiro_kernel.tools as package
from shiro_kernel.context.digest import Digest, files_of
from shiro_kernel.mcp.server import served
from shiro_kernel.tools import Effect, Touches, all_tools, run_tool
from shiro_kernel.tools.base import DECLARED
from shiro_kernel.transcript import Message, ToolCallPart

#: the order on main before the order was declared (e83e8bf), and the sha256 of the specs' JSON then: the prompt's
#: tool list is byte-stable, so a change here is a change every model's cached prompt sees
ORDER_BEFORE = [
    "notebook_edit",
    "notebook_insert",
    "notebook_delete",
    "notebook_run",
    "notebook_check",
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "grep",
    "inspect",
    "remember",
    "recall",
    "forget",
    "memory_read",
    "memory_write",
    "notebook_read",
    "propose_cell",
    "python",
    "shell",
    "todo_write",
]
SPECS_SHA256 = "c42584dd94055d2dbdb628ed950e4c046ed4609115f13a0be256bfac2c32caa6"


def test_the_order_and_the_bytes_the_model_sees_are_unchanged():
    specs = [t.spec() for t in all_tools().values()]
    assert [s["name"] for s in specs] == ORDER_BEFORE
    digest = hashlib.sha256(json.dumps(specs, ensure_ascii=False).encode()).hexdigest()
    assert digest == SPECS_SHA256, "the tool list the model sees changed: if on purpose, update SPECS_SHA256"


@pytest.fixture
def extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A folder on the tools package's path for a module a test writes (the real package folder is shared)."""
    folder = tmp_path / "more_tools"
    folder.mkdir()
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    yield folder
    for name in ("aa_first", "zz_unplaced"):
        sys.modules.pop(f"{package.__name__}.{name}", None)


def test_the_order_is_declared_not_taken_from_file_names(extra, monkeypatch):
    """A module named to sort first puts its tool where ORDER says (last here), not first."""
    (extra / "aa_first.py").write_text(
        "from shiro_kernel.tools.base import Effect, Tool, schema\n"
        "TOOLS = [Tool('aa_tool', 'Reads.', schema({}), lambda a, c: '', effects=Effect.READS)]\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(package, "ORDER", (*package.ORDER, "aa_tool"))
    assert list(all_tools()) == [*ORDER_BEFORE, "aa_tool"]
    monkeypatch.setattr(package, "ORDER", ("aa_tool", *ORDER_BEFORE))
    assert list(all_tools()) == ["aa_tool", *ORDER_BEFORE]


def test_a_tool_without_a_place_and_a_place_without_a_tool_are_said_at_once(extra, monkeypatch):
    (extra / "zz_unplaced.py").write_text(
        "from shiro_kernel.tools.base import Effect, Tool, schema\n"
        "TOOLS = [Tool('zz_unplaced', 'Reads.', schema({}), lambda a, c: '', effects=Effect.READS)]\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="'zz_unplaced' \\(in shiro_kernel.tools.zz_unplaced\\) has no place"):
        all_tools()
    monkeypatch.setattr(package, "ORDER", (*package.ORDER, "zz_unplaced", "zz_gone"))
    with pytest.raises(ValueError, match="ORDER names 'zz_gone', but no module of the package defines it"):
        all_tools()


def test_every_tool_that_changes_names_or_files_says_what_a_call_touches():
    tools = all_tools()
    declared = {n for n, t in tools.items() if t.effects & DECLARED}
    assert declared == {"notebook_run", "notebook_check", "write_file", "edit_file", "python", "shell"}
    for name, tool in tools.items():
        if tool.touches is None:
            assert name not in declared
            continue
        said = tool.touches({}, None)  # no arguments, no context (a record read back): it still answers
        assert isinstance(said, Touches), name
        if Effect.OUTSIDE in tool.effects:
            assert said.why, name  # why undo cannot take it back, in the tool's words
    assert tools["python"].touches({"code": "df = 1"}, None) == Touches(code="df = 1")
    assert tools["write_file"].touches({"path": "a.csv", "content": "x"}, None) == Touches(writes=("a.csv",))
    assert tools["edit_file"].touches({"path": "b.py", "old": "a", "new": "b"}, None) == Touches(writes=("b.py",))
    run = tools["notebook_run"].touches({"cells": [0]}, None)
    assert run.code is None and "not read" in run.why


def test_what_is_served_and_replayed_is_each_tool_s_word():
    tools = all_tools()
    assert list(served(tools)) == [  # what the former SERVED list held, in its order
        "python",
        "inspect",
        "notebook_read",
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "grep",
        "recall",
        "memory_read",
        "todo_write",
    ]
    assert [n for n, t in tools.items() if t.replayed] == ["python"]


def test_the_files_a_pruned_span_names_come_from_the_tools():
    calls = [
        ("read_file", {"path": "data/sales.csv", "offset": None, "limit": None}),
        ("write_file", {"path": "out.md", "content": "x"}),
        ("edit_file", {"path": "out.md", "old": "x", "new": "y"}),  # named once
        ("grep", {"pattern": "total", "path": "src"}),
        ("grep", {"pattern": "total", "path": None}),
        ("list_files", {"pattern": "**/*.ipynb"}),
        ("python", {"code": "open('secret.txt')"}),  # code, not a file the tool names
        ("shell", {"command": "cat x.txt", "timeout_s": None}),
        ("mcp__fs__read", {"path": "elsewhere.txt"}),  # a tool not known here says nothing
    ]
    parts = [ToolCallPart(f"c{k}", n, json.dumps(a)) for k, (n, a) in enumerate(calls)]
    assert [files_of(p) for p in parts[:3]] == [("data/sales.csv",), ("out.md",), ("out.md",)]
    digest = Digest()
    digest.add(Message("assistant", list(parts)))
    assert digest.files == ["data/sales.csv", "out.md", "src", "**/*.ipynb"]


def test_arguments_a_tool_checks_itself_reach_it(tmp_path):
    """``memory_write`` says it checks ``scope`` and ``name`` itself: a call without a scope gets its words, not
    the schema's (``missing required argument``)."""
    from shiro_kernel.tools import ToolContext

    tools = all_tools()
    assert {n: set(t.own_checks) for n, t in tools.items() if t.own_checks} == {"memory_write": {"name", "scope"}}
    call = ToolCallPart("c", "memory_write", json.dumps({"name": "style", "scope": None, "content": "x"}))
    out = run_tool(tools, call, ToolContext(root=tmp_path)).output
    assert out.startswith("Error:") and "missing required argument" not in out
