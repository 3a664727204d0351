"""Running a replay: a :class:`~.replay_plan.Plan`'s python calls through the real ``python`` tool, in order, in the
user's namespace, with the events a live turn emits — ``ToolStart``/``ToolEnd`` for each call (its result
carries what the call displayed, so the views draw the row and its figures), the recorded answer as a
``TextDelta``, a ``Notice`` with the one line starting ``replayed``, and (``end=True``) a ``TurnEnd`` whose
reason is ``replayed``. No model is called.

A call that now raises (or fails, or is interrupted) stops the replay there; a call that changed something
outside the kernel when recorded stops it before (see :mod:`.replay_plan`). The line says how many calls re-ran,
what was skipped and where the replay stopped, where the turn came from, and how to ask the model instead::

    replayed 2 python calls of this turn without the model (recorded in session 0193ab2c-1f2a-7c3d); %shiro --again which region grew the most? asks the model instead
    replayed 1 python call of this turn without the model (from the turn saved in this notebook); stopped at call 3: it raised NameError: name 'sales' is not defined; %shiro --again … asks the model instead
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..events import Event, Notice, TextDelta, ToolEnd, ToolStart, TurnEnd, Usage
from ..store.short_ids import short_id
from ..transcript import ToolCallPart, ToolResultPart
from .replay_plan import OMIT, RUN, SKIP, STOP, Plan, Step, call_status
from .trust import again_hint

if TYPE_CHECKING:
    from ..undo.checkpoints import Checkpointer

RECORD, NOTEBOOK = "record", "notebook"
INTERRUPTED = "Error: interrupted after {seconds:.1f} s — the user stopped the replay while this call ran"


@dataclass
class ReplayResult:
    """What a replay did: the calls it re-ran, those it skipped (failed, refused or pending when recorded),
    where it stopped and why ('' when it ran to the end), and the one line saying so."""

    ran: list[Step] = field(default_factory=list)
    skipped: list[Step] = field(default_factory=list)
    stopped_at: Step | None = None
    stop_reason: str = ""
    line: str = ""
    interrupted: bool = False

    @property
    def complete(self) -> bool:
        return self.stopped_at is None


def origin(source: str, session_id: str | None) -> str:
    """Where the replayed turn came from, as the line says it."""
    if source == RECORD and session_id:
        return f"recorded in session {short_id(session_id)}"
    if source == RECORD:
        return "recorded on this machine"
    return "from the turn saved in this notebook"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _skipped_phrase(skipped: list[Step]) -> str:
    kinds = {s.status for s in skipped}
    n = len(skipped)
    if kinds == {"refused"}:
        return f"skipped {_plural(n, 'call')} refused when recorded"
    if kinds == {"pending"}:
        return f"skipped {_plural(n, 'call')} left waiting for approval"
    if kinds == {"error"}:
        return f"skipped {_plural(n, 'call')} that failed when recorded"
    return f"skipped {_plural(n, 'call')} that failed or were refused when recorded"


def _named(step: Step) -> str:
    return f"{step.name} {step.target}".strip() if step.target and step.name != "python" else step.name


def stop_phrase(step: Step, why: str, before: bool) -> str:
    """``stopped at call 3: it raised …`` / ``stopped before call 4 (write_file report.md): it changed …``."""
    if before:
        return f"stopped before call {step.number} ({_named(step)}): {why}"
    return f"stopped at call {step.number}: {why}"


def replayed_line(result: ReplayResult, plan: Plan, *, source: str, session_id: str | None) -> str:
    """The one line starting ``replayed`` (see the module's doc)."""
    has_python = any(s.name == "python" for s in plan.steps)
    if result.ran or result.stopped_at is not None or has_python:
        head = f"replayed {_plural(len(result.ran), 'python call')} of this turn without the model"
    else:
        head = "replayed this turn's answer without the model (it ran no python)"
    parts = [f"{head} ({origin(source, session_id)})"]
    if result.skipped:
        parts.append(_skipped_phrase(result.skipped))
    if result.stop_reason:
        parts.append(result.stop_reason)
    parts.append(f"{again_hint(plan.prompt)} asks the model instead")
    return "; ".join(parts)


def _python_tools() -> dict[str, Any]:
    from ..tools import python_tool

    return {tool.name: tool for tool in python_tool.TOOLS}


def run_plan(
    plan: Plan,
    shell: Any,
    *,
    on_event: Callable[[Event], None],
    source: str = RECORD,
    session_id: str | None = None,
    root: Path | None = None,
    end: bool = True,
    checkpoint: Checkpointer | None = None,
) -> ReplayResult:
    """Replay ``plan`` in ``shell``'s namespace (see the module's doc). Never raises for what the code does;
    a kernel interrupt stops the replay at the running call, like a failure."""
    from ..tools import ToolContext, run_tool

    tools = _python_tools()
    ctx = ToolContext(root=root or Path.cwd(), shell=shell)
    result = ReplayResult()
    for step in plan.steps:
        if step.action == OMIT:
            continue
        if step.action == SKIP:
            result.skipped.append(step)
            continue
        if step.action == STOP:
            result.stopped_at = step
            result.stop_reason = stop_phrase(step, step.why, before=True)
            break
        assert step.action == RUN
        call = ToolCallPart(step.call_id, "python", json.dumps({"code": step.code}))
        on_event(ToolStart(call))
        started = time.perf_counter()
        try:
            done = checkpoint(call, tools.get("python"), ctx) if checkpoint is not None else None  # undo's
            try:
                part = run_tool(tools, call, ctx)
            finally:
                if done is not None:
                    done()
        except KeyboardInterrupt:
            seconds = time.perf_counter() - started
            part = ToolResultPart(call.call_id, "python", INTERRUPTED.format(seconds=seconds), is_error=True)
            result.interrupted = True
        on_event(ToolEnd(call, part, time.perf_counter() - started))
        status, why = call_status(call, part)
        if status != "ok":
            result.stopped_at = step
            result.stop_reason = stop_phrase(step, why if why.startswith("it ") else f"it failed: {why}", before=False)
            break
        result.ran.append(step)
    if plan.answer.strip():
        on_event(TextDelta(plan.answer))
    result.line = replayed_line(result, plan, source=source, session_id=session_id)
    warn = bool(result.skipped or result.stopped_at)
    on_event(Notice(result.line, kind="warning" if warn else "info"))
    if end:
        on_event(TurnEnd("replayed", Usage(0, 0, None)))
    return result


__all__ = ["NOTEBOOK", "RECORD", "ReplayResult", "origin", "replayed_line", "run_plan", "stop_phrase"]
