"""Undo keeps what a tool says a call touches (issue 39 #4): two made-up tools whose arguments are neither ``code``
nor ``path`` — a NAMESPACE ``set_var(name, value)`` and a FILES ``copy_file(src, dest)`` — dropped into the tools
package as a newcomer would add them; a turn in a real InteractiveShell calls them, and ``%shiro /undo`` takes
their steps back (before the tools said what they touch, their checkpoints were empty: undo restored nothing)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Reply
from IPython.utils.capture import capture_output

import shiro_kernel.tools as package
from shiro_kernel.tools.base import Effect, Tool, ToolContext, Touches, schema
from shiro_kernel.transcript import ToolCallPart
from shiro_kernel.undo.checkpoints import take
from shiro_kernel.undo.journal import Journal

MADE_UP = '''"""Two tools whose arguments are neither ``code`` nor ``path``."""

import json
import shutil
from typing import Any

from shiro_kernel.tools.base import Effect, Tool, ToolContext, ToolError, Touches, schema


def _set_var(args: dict[str, Any], ctx: ToolContext) -> str:
    if ctx.shell is None:
        raise ToolError("no namespace here")
    ctx.shell.user_ns[args["name"]] = args["value"]
    return "set"


def _set_var_touches(args: dict[str, Any], ctx: ToolContext | None) -> Touches:
    return Touches(code=f"{args.get('name')} = {json.dumps(args.get('value'))}")


def _copy_file(args: dict[str, Any], ctx: ToolContext) -> str:
    shutil.copyfile(ctx.resolve(args["src"]), ctx.resolve(args["dest"]))
    return "copied"


STR = {"type": "string"}
TOOLS = [
    Tool(
        "set_var",
        "Set a variable.",
        schema({"name": STR, "value": STR}),
        _set_var,
        effects=Effect.NAMESPACE,
        touches=_set_var_touches,
    ),
    Tool(
        "copy_file",
        "Copy a file.",
        schema({"src": STR, "dest": STR}),
        _copy_file,
        effects=Effect.FILES,
        touches=lambda args, ctx: Touches(writes=(args["dest"],) if isinstance(args.get("dest"), str) else ()),
    ),
]
'''
NEW = ("set_var", "copy_file")


@pytest.fixture
def made_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """``zz_made_up.py`` on the tools package's path and its tools at the end of ``ORDER`` (the real package folder
    is shared by every test run on this machine: it stays untouched)."""
    folder = tmp_path / "more_tools"
    folder.mkdir()
    (folder / "zz_made_up.py").write_text(MADE_UP, encoding="utf-8")
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    monkeypatch.setattr(package, "ORDER", (*package.ORDER, *NEW))
    yield
    sys.modules.pop(f"{package.__name__}.zz_made_up", None)


@pytest.fixture
def shell(made_up: None, shiro_shell: Any) -> Any:
    """The shell with the extension loaded after the made-up tools joined the package (the agent's tools are read
    when it starts)."""
    shiro_shell.run_cell('%config Shiro.approval = "auto"')
    return shiro_shell


def run(shell: Any, line: str) -> str:
    """What ``line`` printed and displayed, as text."""
    with capture_output() as out:
        shell.run_cell(line)
    return "\n".join([out.stdout, *(o.data.get("text/plain", "") for o in out.outputs)])


def test_made_up_tools_steps_are_taken_back(shell: Any, fake_openai: Any, tmp_path: Path) -> None:
    ns = shell.user_ns
    ns["x"] = "mine"
    (tmp_path / "src.txt").write_text("the agent's copy\n")
    (tmp_path / "dest.txt").write_text("the user's file\n")
    fake_openai.enqueue(
        Reply(tool_calls=[Call("set_var", {"name": "x", "value": "the agent's"})]),
        Reply(tool_calls=[Call("set_var", {"name": "made", "value": "by the turn"})]),
        Reply(tool_calls=[Call("copy_file", {"src": "src.txt", "dest": "dest.txt"})]),
        Reply(tool_calls=[Call("copy_file", {"src": "src.txt", "dest": "made.txt"})]),
        Reply(text="set and copied"),
    )
    run(shell, "%shiro set the variables and copy the files")
    assert ns["x"] == "the agent's" and ns["made"] == "by the turn"
    assert (tmp_path / "dest.txt").read_text() == "the agent's copy\n" and (tmp_path / "made.txt").exists()

    report = run(shell, "%shiro /undo")
    assert "undid 4 steps" in report, report
    assert "restored: x" in report and "removed (the steps made them): made" in report
    assert "dest.txt restored" in report and "made.txt removed (the steps made it)" in report
    assert ns["x"] == "mine" and "made" not in ns
    assert (tmp_path / "dest.txt").read_text() == "the user's file\n" and not (tmp_path / "made.txt").exists()


def test_a_checkpoint_holds_what_the_tool_says_it_touches(made_up: None, tmp_path: Path) -> None:
    """``take`` itself, as the code review checked it: a name the code binds and a file the call writes."""
    from shiro_kernel.tools import all_tools

    tools = all_tools()
    ns: dict[str, Any] = {"x": 1}
    (tmp_path / "dest.txt").write_text("before")

    class Shell:
        user_ns = ns

    ctx = ToolContext(root=tmp_path, shell=Shell())
    journal = Journal(lambda: 1024)
    calls = [
        ToolCallPart("c1", "set_var", '{"name": "x", "value": "2"}'),
        ToolCallPart("c2", "copy_file", '{"src": "a", "dest": "dest.txt"}'),
        ToolCallPart("c3", "copy_file", '{"src": "a", "dest": "../outside.txt"}'),  # refused by the tool: no file
    ]
    steps = [take(journal, "t1", c, tools[c.name], ctx) for c in calls]
    assert all(s is not None for s in steps)
    assert journal.undoable() == ["c1", "c2", "c3"]
    ns["x"] = "2"
    (tmp_path / "dest.txt").write_text("after")
    report = journal.take_back(journal.last_turn(), ns)
    assert ns["x"] == 1 and (tmp_path / "dest.txt").read_text() == "before"
    assert report.restored == ["x"] and report.files == ["dest.txt restored"]


def test_a_tool_that_changes_names_or_files_must_say_what_a_call_touches() -> None:
    for effect in (Effect.NAMESPACE, Effect.FILES, Effect.FILES | Effect.OUTSIDE):
        with pytest.raises(ValueError, match="does not say what a call touches"):
            Tool("zz", "Changes.", schema({}), lambda a, c: "", effects=effect)
    for effect in (Effect.READS, Effect.OUTSIDE, Effect.REVIEW):  # nothing undo keeps: no declaration needed
        Tool("zz", "Changes.", schema({}), lambda a, c: "", effects=effect)
    Tool("zz", "Changes.", schema({}), lambda a, c: "", effects=Effect.NAMESPACE, touches=lambda a, c: Touches(""))
