"""What a recorded turn's calls become in a replay, and the fields a turn's bundle carries for it.

The rules, one per kind of call (a call's *number* is its place among the turn's tool calls, from 1), derived
from the saved result's fields (``is_error``, ``refused``) and what the tool declares (``Tool.effects``,
``Tool.replayed``, ``Tool.touches``), never from a list of names or the result's text:

* a call of a ``replayed`` tool (``python``) that succeeded → **run** again (the one call whose change a replay
  redoes: the code its tool says it ran);
* a tool that only reads (``Effect.READS``: ``inspect``, ``read_file``, ``notebook_read``, ``todo_write`` …)
  → **omit**, silently: it changed nothing a later call depends on;
* a call that failed, was refused or was left waiting for approval (any tool) → **skip**, counted and said;
  a replayed call whose code raised counts as failed (the tool returns a traceback, not an error);
* a call that succeeded and changed anything else (the namespace through another tool, files, the outside
  world or the notebook: ``write_file``, ``shell``, ``remember``, ``notebook_edit``, ``notebook_run`` …, and
  any tool not known here, such as an MCP server's no longer connected) → **stop**: the replay ends before it,
  since what follows may depend on what it did.

The bundle's replay fields (docs/turn-format.md, "Replay")::

    "prompt": "which region grew the most?", "cellId": "3f2a…" | null, "ordinal": 0, "turnId": "0193…",
    "replay": [{"callId": "call_1", "name": "python", "status": "ok", "code": "<the code, uncut>",
                "changes": false},
               {"callId": "call_2", "name": "write_file", "status": "refused", "code": null, "changes": true,
                "error": "not approved — …"}]

``status`` is ``ok``, ``error``, ``refused`` or ``pending``; ``error`` (one line) says why for the others;
``changes`` is whether the call, had it succeeded, changes something a replay does not redo; ``code`` is
the full code of a ``python`` call that succeeded (``entries[].code`` is cut to 4,000 characters), else null.
The answer is the turn's last text entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..text import first_line, one_line
from ..tools import Effect, Tool, all_tools
from ..transcript import Message, ToolCallPart, ToolResultPart

STATUSES = ("ok", "error", "refused", "pending")
WHY_CHARS = 200
RUN, OMIT, SKIP, STOP = "run", "omit", "skip", "stop"


@dataclass(frozen=True)
class Step:
    """One recorded call and what the replay does with it."""

    number: int  # its place among the turn's tool calls, from 1
    call_id: str
    name: str
    action: str  # run | omit | skip | stop
    status: str = "ok"  # ok | error | refused | pending
    code: str = ""  # a run step's python code
    why: str = ""  # a skip or stop step: one line
    target: str = ""  # the call's arguments in short (a path, a command), to name it


@dataclass
class Plan:
    """A recorded turn as a replay sees it: every call in order, and the answer."""

    steps: list[Step] = field(default_factory=list)
    answer: str = ""
    prompt: str | None = None

    @property
    def runs(self) -> list[Step]:
        """The python calls a replay runs (those before the first stop)."""
        out = []
        for step in self.steps:
            if step.action == STOP:
                break
            if step.action == RUN:
                out.append(step)
        return out


# -- what a call did -------------------------------------------------------------------------------
_HEADER = "Traceback (most recent call last):"
_SYNTAX_HEADER = re.compile(r'^  File "<shiro-python-\d+>", line \d+$')
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?::.*)?$")


def raised(output: str) -> str | None:
    """``NameError: name 'sales' is not defined`` when a ``python`` result says its code raised, else None.

    The tool returns a failure in the user's code as text: the output so far, then the short traceback
    (``Traceback (most recent call last):`` … or, for a syntax error, ``File "<shiro-python-N>", line N`` …)
    and the exception's line, then at most the tool's own notes (``(traceback shortened …)``, ``[…]``). So
    the code raised when the output *ends* with a traceback; one printed by code that went on is followed
    by what it printed or returned."""
    lines = output.rstrip("\n").splitlines()
    while lines and (lines[-1].startswith("(traceback shortened") or _note(lines[-1])):
        lines.pop()
    for start in range(len(lines) - 1, -1, -1):
        if lines[start] == _HEADER or _SYNTAX_HEADER.match(lines[start]):
            break
    else:
        return None
    rest = [line for line in lines[start + 1 :] if not line.startswith(" ")]
    if len(rest) != 1 or not _EXCEPTION.match(rest[0]) or rest[0] != lines[-1]:
        return None
    return first_line(rest[0], WHY_CHARS)


def _note(line: str) -> bool:
    return line.startswith("[") and line.endswith("]")


def call_status(
    call: ToolCallPart, result: ToolResultPart | None, tools: Mapping[str, Tool] | None = None
) -> tuple[str, str]:
    """(status, why): ``ok`` with no why, or ``error`` / ``refused`` / ``pending`` with one line saying why
    (``tools``: the turn's beyond the built-in ones; a replayed tool's code that raised is an ``error``)."""
    if result is None:
        return "pending", "it was waiting for approval when the turn ended"
    if result.is_error:  # why: its text's first line, without the ``Error:`` every failure's text starts with
        text = first_line(result.output.removeprefix("Error:").strip(), WHY_CHARS) or "it failed"
        return ("refused" if result.refused else "error"), text
    if replayed(call.name, known_tools(tools)):
        meta = result.meta.get("raised") if isinstance(result.meta, dict) else None
        exc = meta if isinstance(meta, str) and meta else raised(result.output)
        if exc:
            return "error", f"it raised {exc}"
    return "ok", ""


def known_tools(tools: Mapping[str, Tool] | None = None) -> dict[str, Tool]:
    """The tools whose declared effects a plan reads: the built-in ones, and ``tools`` (a turn's, with its MCP
    servers') over them."""
    return {**all_tools(), **(tools or {})}


def replayed(name: str, tools: Mapping[str, Tool]) -> bool:
    """Whether a replay runs a call of tool ``name`` again (its tool says so: ``Tool.replayed``)."""
    tool = tools.get(name)
    return tool is not None and tool.replayed


def stop_why(name: str, tools: Mapping[str, Tool]) -> str:
    """Why a replay stops before a call of tool ``name`` that succeeded (empty: it does not; ``tools``: from
    :func:`known_tools`). Only a replayed tool's call (``python``) is run again; a tool that only reads is omitted;
    any other change, or a tool not known here, stops the replay."""
    if replayed(name, tools):
        return ""
    tool = tools.get(name)
    if tool is None:
        what = "it may have changed something outside the kernel"
    elif not tool.changes:
        return ""
    elif Effect.OUTSIDE in tool.effects:
        what = "it changed something outside the kernel"
    elif Effect.FILES in tool.effects:
        what = "it changed files"
    elif Effect.REVIEW in tool.effects:
        what = "it changed the notebook"
    else:
        what = "it ran code in the kernel"
    return f"{what} when recorded, and a replay does not redo that"


def _code_of(call: ToolCallPart, tools: Mapping[str, Tool]) -> str | None:
    """The code a replayed tool's call ran, as its tool says (None for any other call, or none)."""
    tool = tools.get(call.name)
    if tool is None or not tool.replayed or tool.touches is None:
        return None
    try:
        code = tool.touches(call.parsed_arguments(), None).code
    except ValueError:
        return None
    return code if isinstance(code, str) and code.strip() else None


def _step(number: int, call_id: str, name: str, status: str, why: str, code: str | None, stop: str, runs: bool) -> Step:
    """One call's step: ``stop`` says why a replay stops before it had it succeeded (empty: it does not);
    ``runs``: its tool is replayed."""
    if status != "ok":
        return Step(number, call_id, name, SKIP, status, why=why or "it failed")
    if runs:
        if code is None:
            return Step(number, call_id, name, SKIP, "error", why="its code could not be read")
        return Step(number, call_id, name, RUN, code=code)
    if stop:
        return Step(number, call_id, name, STOP, why=stop)
    return Step(number, call_id, name, OMIT)


# -- from the transcript ------------------------------------------------------------------------------
def _answer(messages: Iterable[Message]) -> str:
    texts = [m.text for m in messages if m.role == "assistant" and m.text.strip()]
    return texts[-1] if texts else ""


def _calls(messages: list[Message]) -> list[tuple[ToolCallPart, ToolResultPart | None]]:
    results = {r.call_id: r for m in messages for r in m.tool_results()}
    return [(call, results.get(call.call_id)) for m in messages if m.role == "assistant" for call in m.tool_calls()]


def target_of(arguments: str) -> str:
    """A call's arguments as its name in a sentence: the path of a file tool, the command of ``shell``, the
    cell of a notebook tool, else the arguments in short."""
    from ..ui.render import short_args

    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        args = None
    if isinstance(args, dict):
        path = args.get("path")
        if isinstance(path, str) and path.strip():  # a long path is cut at its start: the name is what tells
            flat = " ".join(path.split())
            return flat if len(flat) <= 60 else "…" + flat[-59:]
        for key in ("command", "name", "text"):
            if isinstance(args.get(key), str) and args[key].strip():
                return one_line(args[key], 60)
        for key in ("cell", "after", "cells"):
            if args.get(key) is not None:
                return f"cell {args[key]}" if key != "cells" else f"cells {args[key]}"
    return short_args(arguments, 60)


def _short(call: ToolCallPart) -> str:
    return target_of(call.arguments)


def plan_from_messages(messages: Iterable[Message], tools: Mapping[str, Tool] | None = None) -> Plan:
    """The plan of one recorded turn: ``messages`` from its user prompt through its last message. ``tools``
    (name → Tool): the turn's tools beyond the built-in ones (an MCP server's), by their declared effects."""
    messages = list(messages)
    known = known_tools(tools)
    steps = []
    for number, (call, result) in enumerate(_calls(messages), 1):
        status, why = call_status(call, result, known)
        runs = replayed(call.name, known)
        step = _step(
            number, call.call_id, call.name, status, why, _code_of(call, known), stop_why(call.name, known), runs
        )
        steps.append(replace(step, target=_short(call)))
    prompt = next((m.text for m in messages if m.role == "user"), None)
    return Plan(steps, _answer(messages), prompt)


def replay_fields(
    messages: Iterable[Message],
    *,
    prompt: str,
    cell_id: str | None,
    ordinal: int,
    turn_id: str,
    tools: Mapping[str, Tool] | None = None,
) -> dict[str, Any]:
    """The fields a turn's bundle gains so it can be replayed from the notebook (see the module's doc):
    built from the turn's ``messages`` (its user prompt through its last message)."""
    known = known_tools(tools)
    calls = []
    for call, result in _calls(list(messages)):
        status, why = call_status(call, result, known)
        code = _code_of(call, known) if status == "ok" else None
        entry: dict[str, Any] = {
            "callId": call.call_id,
            "name": call.name,
            "status": status,
            "code": code,
            "changes": bool(stop_why(call.name, known)),
        }
        if why:
            entry["error"] = why
        calls.append(entry)
    return {"prompt": prompt, "cellId": cell_id, "ordinal": ordinal, "turnId": turn_id, "replay": calls}


# -- from a saved bundle ------------------------------------------------------------------------------
def has_replay(bundle: Any) -> bool:
    """Whether ``bundle`` (a turn's ``application/vnd.shiro.turn+json``) carries what a replay needs."""
    return isinstance(bundle, dict) and isinstance(bundle.get("replay"), list)


def _shown(entry: dict[str, Any]) -> str:
    """The target of a saved tool row: from its arguments in full when they are JSON, else its short form."""
    code = entry.get("code")
    if isinstance(code, str) and code.lstrip().startswith("{"):
        try:
            if isinstance(json.loads(code), dict):
                return target_of(code)
        except json.JSONDecodeError:
            pass
    return one_line(str(entry.get("args") or ""), 60)


def plan_from_bundle(bundle: dict[str, Any]) -> Plan:
    """The plan of the turn saved in ``bundle``. Raises ValueError when the bundle has no ``replay`` field (a
    turn saved by an older version) or it is malformed (a notebook is anyone's file)."""
    if not has_replay(bundle):
        raise ValueError("the turn saved in this cell has no replay information (saved by an older version)")
    entries = [e for e in bundle.get("entries") or [] if isinstance(e, dict)]
    shown = {str(e.get("callId")): _shown(e) for e in entries if e.get("type") == "tool"}
    texts = [str(e.get("text") or "") for e in entries if e.get("type") == "text" and str(e.get("text") or "").strip()]
    known = known_tools()
    steps = []
    for number, item in enumerate(bundle["replay"], 1):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("callId"), str)
            or not isinstance(item.get("name"), str)
        ):
            raise ValueError(f"call {number} of the saved turn is malformed")
        status = item.get("status")
        if status not in STATUSES:
            raise ValueError(f"call {number} of the saved turn has an unknown status {status!r}")
        code = item.get("code")
        changes = item.get("changes")  # the saved turn's word: it knew its tools (an MCP server's, maybe gone now)
        stop = stop_why(item["name"], known)
        if isinstance(changes, bool):
            stop = (stop or stop_why(item["name"], {})) if changes else ""
        step = _step(
            number,
            item["callId"],
            item["name"],
            str(status),
            first_line(str(item.get("error") or ""), WHY_CHARS),
            code if isinstance(code, str) and code.strip() else None,
            stop,
            replayed(item["name"], known),
        )
        steps.append(replace(step, target=shown.get(item["callId"], "")))
    prompt = bundle.get("prompt")
    return Plan(steps, texts[-1] if texts else "", prompt if isinstance(prompt, str) else None)


#: what :func:`fields_of` copies from a bundle into the bundle of its replay (so it can be replayed again)
FIELD_NAMES = ("prompt", "cellId", "ordinal", "turnId", "replay")


def fields_of(bundle: dict[str, Any]) -> dict[str, Any]:
    """The replay fields of ``bundle``, to carry into the bundle its replay leaves."""
    return {name: bundle[name] for name in FIELD_NAMES if name in bundle}


__all__ = [
    "FIELD_NAMES",
    "OMIT",
    "RUN",
    "SKIP",
    "STOP",
    "Plan",
    "Step",
    "call_status",
    "fields_of",
    "has_replay",
    "known_tools",
    "plan_from_bundle",
    "plan_from_messages",
    "raised",
    "replay_fields",
    "replayed",
    "stop_why",
]
