"""Kernel-restart awareness: which variables the agent's earlier ``python`` calls created, which of
them a fresh kernel no longer has, and the recorded code that would make them again (``/rebuild``).

Only what a call's code assigned at the top level counts (assignments, ``for``/``with`` targets,
imports, ``def``/``class``); a call whose result failed (``is_error``: refused, failed) is skipped.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..session import Session
from ..text import first_line
from ..tools import Tool, ToolContext, run_tool
from ..transcript import Message, ToolCallPart

PROMPT_BLOCK = (
    "Kernel restarted since this session's earlier turns: these variables they created no longer "
    "exist: {names} (use /rebuild or recreate them before relying on them)."
)
NOTICE = (
    "kernel restarted: {count} from earlier turns {verb} gone ({names}) — "
    "%shiro /rebuild re-runs the code that made them"
)
NAMES_SHOWN = 12


@dataclass(frozen=True)
class Creation:
    """One recorded ``python`` call: its code and the top-level names it assigned."""

    code: str
    names: tuple[str, ...]


def _targets(node: ast.AST) -> Iterable[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from _targets(elt)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)


def _ipython_clean(code: str) -> str:
    """Code with IPython-only lines (``%magic``, ``!shell``) blanked, so ``ast`` can read the rest."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines())


def assigned_names(code: str) -> list[str]:
    """The names ``code`` binds at its top level, in order, without repeats; [] when it cannot be parsed."""
    try:
        tree = ast.parse(_ipython_clean(code))
    except (SyntaxError, ValueError):
        return []
    out: list[str] = []

    def add(names: Iterable[str]) -> None:
        for name in names:
            if name not in out and name != "_":
                out.append(name)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    add(_targets(target))
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                add(_targets(node.target))
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                add(_targets(node.target))
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        add(_targets(item.optional_vars))
                visit(node.body)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                add((a.asname or a.name.split(".")[0]) for a in node.names if a.name != "*")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add([node.name])
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.NamedExpr):
                add(_targets(node.value.target))

    visit(tree.body)
    return out


def creations(messages: Iterable[Message]) -> list[Creation]:
    """Every successful recorded ``python`` call that assigned something, oldest first."""
    messages = list(messages)
    failed = {r.call_id for m in messages for r in m.tool_results() if r.is_error}
    answered = {r.call_id for m in messages for r in m.tool_results()}
    out: list[Creation] = []
    for message in messages:
        for call in message.tool_calls():
            if call.name != "python" or call.call_id in failed or call.call_id not in answered:
                continue
            try:
                code = call.parsed_arguments().get("code")
            except ValueError:
                continue
            if not isinstance(code, str) or not code.strip():
                continue
            names = assigned_names(code)
            if names:
                out.append(Creation(code, tuple(names)))
    return out


def missing(messages: Iterable[Message], namespace: Mapping[str, Any] | None) -> dict[str, str]:
    """Name → the newest recorded code that assigned it, for names absent from ``namespace``
    (in the order they were first created). {} without a namespace."""
    if namespace is None:
        return {}
    found: dict[str, str] = {}
    for creation in creations(messages):
        for name in creation.names:
            if name not in namespace:
                found[name] = creation.code
    return found


def rebuild_code(messages: Iterable[Message], names: Iterable[str]) -> list[str]:
    """The recorded code blocks that assigned any of ``names``, in recorded order, each once."""
    wanted = set(names)
    out: list[str] = []
    for creation in creations(messages):
        if wanted & set(creation.names) and creation.code not in out:
            out.append(creation.code)
    return out


def _shown(names: list[str]) -> str:
    head = ", ".join(names[:NAMES_SHOWN])
    return head + (f", … ({len(names) - NAMES_SHOWN} more)" if len(names) > NAMES_SHOWN else "")


def prompt_block(names: list[str]) -> str:
    return PROMPT_BLOCK.format(names=_shown(names)) if names else ""


def notice(names: list[str]) -> str:
    if not names:
        return ""
    count = f"{len(names)} variable" + ("" if len(names) == 1 else "s")
    return NOTICE.format(count=count, verb="is" if len(names) == 1 else "are", names=_shown(names))


def rebuild(
    session: Session,
    namespace: dict[str, Any] | None,
    tools: dict[str, Tool],
    approval: str,
    ctx: ToolContext,
    checkpoint: Callable[[ToolCallPart, Tool | None, ToolContext], Callable[[], None]] | None = None,
) -> tuple[str, dict[str, str]]:
    """``/rebuild``: re-run the recorded code that made the lost variables, in order and each block once,
    through the ``python`` tool under the approval rules of a turn (``checkpoint``: undo's, before each block; what it
    gives back is called after the block ran).
    Returns the text to show and the variables still missing afterwards (name -> code)."""
    from ..approval import ASK, DENY, decide, refusal  # the turn's own rule and refusal texts

    if namespace is None:
        return "nothing to rebuild: there is no kernel namespace here", {}
    lost = missing(session.messages, namespace)
    if not lost:
        return "nothing to rebuild: every variable the earlier turns created still exists", {}
    verdict = decide(approval, tools.get("python"), allowed="python" in session.always_allowed)
    if verdict == DENY:
        return refusal(approval, True, "/rebuild"), lost
    if verdict == ASK:  # a slash command shows no buttons: refused as a headless call is
        return refusal(approval, True, "/rebuild").replace(" and ask again.", " and run /rebuild again."), lost
    blocks = rebuild_code(session.messages, lost)
    failures: list[str] = []
    for number, code in enumerate(blocks, 1):
        call = ToolCallPart(f"rebuild_{number}", "python", json.dumps({"code": code}))
        done = checkpoint(call, tools.get("python"), ctx) if checkpoint is not None else None
        try:
            result = run_tool(tools, call, ctx)
        finally:
            if done is not None:
                done()
        if result.is_error:
            failures.append(f"block {number}: {first_line(result.output, 160)}")
    still = {n: lost[n] for n in lost if n not in namespace}
    made = [n for n in lost if n in namespace]
    runs = f"{len(blocks)} code block" + ("" if len(blocks) == 1 else "s")
    lines = [f"rebuilt {', '.join(made) if made else 'nothing'} ({runs} re-run)"]
    if still:
        lines.append(f"still missing: {', '.join(still)}")
    return "\n".join(lines + failures), still
