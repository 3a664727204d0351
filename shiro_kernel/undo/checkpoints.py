"""The checkpoint a call needs, from its tool's declared effects (:class:`~shiro_kernel.tools.base.Effect`) and
nothing else: :func:`take`, called right before the call runs, where it runs.

* ``NAMESPACE``: the names its code may change — ``python``'s ``code`` (IPython's syntax turned into Python first),
  ``notebook_run``'s cells as the agent last read them;
* ``FILES``: the files its ``path`` names (inside the project: a path the tool will refuse needs nothing);
* ``OUTSIDE``: named as not undoable (what it changed is outside the kernel and the project's files);
* ``REVIEW``: its accepted change is taken back through the front end;
* ``READS`` only: no checkpoint.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any

from ..errors import ShiroError
from ..tools.base import CHANGES, Effect, Tool, ToolContext
from ..transcript import ToolCallPart
from .journal import Journal, Step
from .names import Touched, touched

#: keeps what a call is about to change, for undo: the call, its tool (None: unknown), its context; never raises
Checkpointer = Callable[[ToolCallPart, "Tool | None", ToolContext], None]

#: why a step that changed the world outside cannot be taken back, by what it was
OUTSIDE = {
    "shell": "a shell command's effects outside the kernel cannot be taken back",
    "remember": "the project's notes are not part of undo",
    "forget": "the project's notes are not part of undo",
    "memory_write": "the named memories are not part of undo",
}


def checkpointer(journal: Journal, turn_id: str) -> Checkpointer:
    """The checkpointer of one turn: :func:`take` for each call, into ``journal``; a checkpoint that fails costs
    the call nothing (its step is then not undoable, and the failure goes to the kernel's log)."""

    def checkpoint(call: ToolCallPart, tool: Tool | None, ctx: ToolContext) -> None:
        try:
            take(journal, turn_id, call, tool, ctx)
        except Exception:
            traceback.print_exc(file=sys.__stderr__)

    return checkpoint


def take(journal: Journal, turn_id: str, call: ToolCallPart, tool: Tool | None, ctx: ToolContext) -> Step | None:
    """The checkpoint of ``call`` (of an unknown tool: an MCP server's, outside), or None for one that only reads."""
    effects: Effect = tool.effects if tool is not None else Effect.OUTSIDE
    if not effects & CHANGES:
        return None
    try:
        args = call.parsed_arguments()
    except ValueError:  # malformed arguments: the call fails without running
        return None
    if Effect.OUTSIDE in effects:
        why = OUTSIDE.get(call.name, f"{call.name} changes something outside the kernel that cannot be taken back")
        return journal.outside(turn_id, call.call_id, call.name, why)
    if Effect.REVIEW in effects:
        return journal.cells(turn_id, call.call_id, call.name)
    if Effect.FILES in effects:
        return journal.files(turn_id, call.call_id, call.name, _paths(args, ctx))
    ns = getattr(ctx.shell, "user_ns", None)
    if Effect.NAMESPACE in effects and isinstance(ns, dict):
        return journal.names(turn_id, call.call_id, call.name, code_touches(call.name, args, ctx), ns)
    return None


def code_touches(name: str, args: dict[str, Any], ctx: ToolContext) -> Touched:
    """What the code a call runs may change: ``python``'s code, or ``notebook_run``'s cells."""
    if name == "notebook_run":
        sources = _cell_sources(args, ctx)
        if sources is None:
            return Touched(frozenset(), "the cells it runs were not read, so their names are not known")
        return python_touches("\n".join(sources), ctx)
    code = args.get("code")
    return python_touches(code if isinstance(code, str) else "", ctx)


def python_touches(code: str, ctx: ToolContext) -> Touched:
    """:func:`~.names.touched` of ``code`` as the kernel runs it (``%`` and ``!`` lines turned into Python)."""
    transform = getattr(ctx.shell, "transform_cell", None)
    if callable(transform):
        try:
            code = transform(code)
        except Exception:  # IPython could not read it either: the syntax-error rule says what it can
            pass
    return touched(code)


def _paths(args: dict[str, Any], ctx: ToolContext) -> list[Any]:
    path = args.get("path")
    if not isinstance(path, str):
        return []
    try:
        return [ctx.resolve(path)]
    except ShiroError:  # outside the project: the tool refuses it, nothing is written
        return []


def _cell_sources(args: dict[str, Any], ctx: ToolContext) -> list[str] | None:
    """The sources of the cells ``notebook_run`` runs, as the agent last read them (None when unknown)."""
    live = ctx.notebook
    cells = args.get("cells")
    if live is None or not isinstance(cells, list):
        return None
    sources = []
    for index in cells:
        if not isinstance(index, int) or not 0 <= index < len(live.order):
            return None
        source = live.seen.get(live.order[index])
        if source is None:
            return None
        sources.append(source)
    return sources


__all__ = ["OUTSIDE", "Checkpointer", "checkpointer", "code_touches", "python_touches", "take"]
