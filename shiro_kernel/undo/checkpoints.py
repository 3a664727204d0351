"""The checkpoint a call needs, from its tool's declared effects (:class:`~shiro_kernel.tools.base.Effect`) and
nothing else: :func:`take`, called right before the call runs, where it runs; the function it gives back is called
right after the call ran, to record what the step left (:meth:`~.journal.Journal.leave`: undo later puts back only
what is still as the step left it).

* ``NAMESPACE``: the names the code its tool says it runs may change (:attr:`~shiro_kernel.tools.base.Tool.touches`:
  ``python``'s ``code``, ``notebook_run``'s cells as the agent last read them; IPython's syntax turned into Python
  first), and the files its code is seen changing while it runs (:mod:`.writes`);
* ``FILES``: the files its tool says it writes (inside the project: a path the tool will refuse needs nothing);
* ``OUTSIDE``: named as not undoable, with the tool's words for why (what it changed is outside the kernel and
  the project's files);
* ``REVIEW``: its accepted change is taken back through the front end;
* ``READS`` only: no checkpoint.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ShiroError
from ..tools.base import CHANGES, Effect, Tool, ToolContext, Touches
from ..transcript import ToolCallPart
from .journal import Journal, Step
from .names import Touched, touched
from .writes import watch

#: called right after the call ran (whatever its end): records what it left; never raises
Done = Callable[[], None]
#: keeps what a call is about to change, for undo: the call, its tool (None: unknown), its context; never raises
Checkpointer = Callable[[ToolCallPart, "Tool | None", ToolContext], Done]

#: why a step of a tool that does not say (an MCP server's, one not known here) cannot be taken back
OUTSIDE = "{name} changes something outside the kernel that cannot be taken back"


def checkpointer(journal: Journal, turn_id: str) -> Checkpointer:
    """The checkpointer of one turn: :func:`take` for each call, into ``journal``, and what it gives back records
    what the step left; a checkpoint that fails costs the call nothing (its step is then not undoable, and the
    failure goes to the kernel's log)."""

    def checkpoint(call: ToolCallPart, tool: Tool | None, ctx: ToolContext) -> Done:
        try:
            step = take(journal, turn_id, call, tool, ctx)
            stop = _watch_files(journal, step, tool, ctx)
        except Exception:
            traceback.print_exc(file=sys.__stderr__)
            return _nothing
        if step is None or (stop is _nothing and not (step.names or step.files)):
            return _nothing

        def done() -> None:
            stop()
            try:
                ns = getattr(ctx.shell, "user_ns", None)
                journal.leave(step, ns if isinstance(ns, dict) else {})
            except Exception:
                traceback.print_exc(file=sys.__stderr__)

        return done

    return checkpoint


def _nothing() -> None:
    return None


def _watch_files(journal: Journal, step: Step | None, tool: Tool | None, ctx: ToolContext) -> Done:
    """For a step whose code runs in the kernel (``NAMESPACE``): the files it is seen changing, kept just before
    (:mod:`.writes`); what stops the watch."""
    if step is None or tool is None or Effect.NAMESPACE not in tool.effects or step.outside:
        return _nothing
    return watch(Path(ctx.root), lambda path: journal.keep_file(step, path))


def take(journal: Journal, turn_id: str, call: ToolCallPart, tool: Tool | None, ctx: ToolContext) -> Step | None:
    """The checkpoint of ``call`` (of an unknown tool: an MCP server's, outside), or None for one that only reads."""
    effects: Effect = tool.effects if tool is not None else Effect.OUTSIDE
    if not effects & CHANGES:
        return None
    try:
        args = call.parsed_arguments()
    except ValueError:  # malformed arguments: the call fails without running
        return None
    said = tool.touches(args, ctx) if tool is not None and tool.touches is not None else Touches()
    if Effect.OUTSIDE in effects:
        why = said.why or OUTSIDE.format(name=call.name)
        return journal.outside(turn_id, call.call_id, call.name, why)
    if Effect.REVIEW in effects:
        return journal.cells(turn_id, call.call_id, call.name)
    if Effect.FILES in effects:
        return journal.files(turn_id, call.call_id, call.name, _paths(said, ctx))
    ns = getattr(ctx.shell, "user_ns", None)
    if Effect.NAMESPACE in effects and isinstance(ns, dict):
        return journal.names(turn_id, call.call_id, call.name, code_touches(said, ctx), ns)
    return None


def code_touches(said: Touches, ctx: ToolContext) -> Touched:
    """What the code a call runs may change, from what its tool says it runs (no code known: nothing is named,
    and the tool's words say why)."""
    if said.code is None:
        return Touched(frozenset(), said.why or "the code it runs is not known, so its names are not known")
    return python_touches(said.code, ctx)


def python_touches(code: str, ctx: ToolContext) -> Touched:
    """:func:`~.names.touched` of ``code`` as the kernel runs it (``%`` and ``!`` lines turned into Python)."""
    transform = getattr(ctx.shell, "transform_cell", None)
    if callable(transform):
        try:
            code = transform(code)
        except Exception:  # IPython could not read it either: the syntax-error rule says what it can
            pass
    return touched(code)


def _paths(said: Touches, ctx: ToolContext) -> list[Any]:
    """The files a call says it writes, resolved (one outside the project is left out: the tool refuses it,
    nothing is written)."""
    paths = []
    for path in said.writes:
        try:
            paths.append(ctx.resolve(path))
        except ShiroError:
            continue
    return paths


__all__ = ["OUTSIDE", "Checkpointer", "Done", "checkpointer", "code_touches", "python_touches", "take"]
