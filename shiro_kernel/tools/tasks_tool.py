"""``todo_write``: the agent's task list (the seed's exact schema, description and result text).

The list lives in ``ctx.tasks`` (a :class:`shiro_kernel.tasks.TaskList`); the tool replaces
it whole. Not mutating: it touches no file and no namespace, so it is auto-approved.
"""

from __future__ import annotations

from typing import Any

from ..tasks import STATUSES, TaskList, render_line
from .base import Effect, Tool, ToolContext, ToolError, schema

DESCRIPTION = (
    "Record or update your task list for a multi-step job. Send the whole list every time; it replaces "
    "the previous one. Exactly one task should be in_progress. Mark a task done the moment it is finished, "
    "not in a batch at the end. Use blocked with a note when something outside your control stops you. The "
    "list is shown to the user and survives context compaction, so it is where your plan lives. Skip it "
    "entirely for single-step work."
)

_ITEM = schema(
    {
        "content": {
            "type": "string",
            "description": 'One concrete action with a verifiable outcome, e.g. "add limit/offset to listUsers()"',
        },
        "status": {"type": "string", "enum": list(STATUSES)},
        "note": {
            "type": "string",
            "description": "Required for blocked: what is blocking it. Otherwise a short finding worth keeping.",
        },
    },
    optional=("note",),
)

PARAMETERS = schema(
    {"todos": {"type": "array", "description": "The complete list, in the order you will do them", "items": _ITEM}}
)


def _items(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise ToolError("todos must be a list of {content, status, note} items")
    items: list[dict[str, Any]] = []
    for n, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            raise ToolError(f"todos item {n} must be an object with content and status, not {type(item).__name__}")
        unknown = sorted(set(item) - {"content", "status", "note"})
        if unknown:
            raise ToolError(f"todos item {n} has unknown field(s) {', '.join(unknown)}; use content, status, note")
        content, status, note = item.get("content"), item.get("status"), item.get("note")
        if not isinstance(content, str):  # the seed asks only for a string: "" is a task too
            raise ToolError(f"todos item {n}: content must be a string")
        if status not in STATUSES:
            raise ToolError(f"todos item {n}: status must be one of {', '.join(STATUSES)}, not {status!r}")
        if note is not None and not isinstance(note, str):
            raise ToolError(f"todos item {n}: note must be a string")
        clean: dict[str, Any] = {"content": content, "status": status}
        if note is not None:
            clean["note"] = note
        items.append(clean)
    return items


def result_text(tasks: TaskList) -> str:
    """``Task list updated: <done>/<total> done.``, one line per task, then ``Warning: ...`` if any."""
    items = tasks.state()
    done = sum(1 for i in items if i["status"] == "done")
    lines = [f"Task list updated: {done}/{len(items)} done.", *(render_line(i) for i in items)]
    warnings = tasks.warnings()
    if warnings:
        lines.append("Warning: " + " ".join(warnings))
    return "\n".join(lines)


def _run(args: dict[str, Any], ctx: ToolContext) -> str:
    tasks = ctx.tasks
    if tasks is None:
        raise ToolError("the task list is not available here")
    tasks.replace(_items(args.get("todos")))
    return result_text(tasks)


#: READS: it changes only the session's own task list, which the per-step state shows (nothing to ask, undo or
#: replay)
todo_write = Tool(
    name="todo_write",
    description=DESCRIPTION,
    parameters=PARAMETERS,
    run=_run,
    effects=Effect.READS,
    served=11,
    values=False,
)

TOOLS = [todo_write]
