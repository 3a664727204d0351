"""The cell tools: ``notebook_edit``, ``notebook_insert``, ``notebook_delete`` and ``notebook_run`` change and run
cells of the live notebook through the front end (:mod:`shiro_kernel.notebook`), never by writing the file.

Under ``approval = "ask"`` a change shows in the notebook as a diff (an insert as a proposed cell, a delete as
the cell marked for removal) with Accept / Reject, and the call waits for the user; under ``"auto"`` it is
applied at once; under ``"read-only"`` it is refused. These tools are ``Effect.REVIEW`` (no approval question
before them: the review is the question). ``notebook_run`` runs cells in the kernel (``Effect.NAMESPACE``),
so it asks like ``python``. All of them run off the kernel's thread (``kernel_thread=False``): the front end's
answer reaches the kernel only while its thread is free. Where no front end with the extension is attached (nbclient, papermill, terminal
IPython, VS Code) they say so in one sentence, and the model shows code instead. ``notebook_run`` never runs
a ``%shiro`` cell (a turn never starts inside a turn): the front end skips it, and the model is told.
"""

from __future__ import annotations

import base64
from typing import Any

from ..approval import UNANSWERED_DENIAL
from ..notebook.channel import NO_FRONT_END
from ..notebook.document import SKIPPED_TURN_CELL, LiveNotebook
from .base import Effect, Image, Tool, ToolContext, ToolError, ToolOutput, Touches, schema
from .notebook import OUTPUT_CHARS, _output_text

RUN_IMAGES = 6


def live(ctx: ToolContext) -> LiveNotebook:
    if ctx.notebook is None:
        raise ToolError(NO_FRONT_END)
    return ctx.notebook


def _change(args: dict[str, Any], ctx: ToolContext, name: str) -> ToolOutput:
    outcome = live(ctx).change(
        ctx.call_id or name,
        name,
        args,
        review=ctx.approval == "ask",
        timeout=ctx.approval_timeout_s,
        abort=ctx.abort,
    )
    # a review nobody answered in time is told as an approval nobody answered: the model does not retry it
    text = UNANSWERED_DENIAL.format(name=name, seconds=ctx.approval_timeout_s) if outcome.refused else outcome.text
    return ToolOutput(
        text,
        is_error=outcome.is_error,
        refused=outcome.refused,
        meta={"change": outcome.change} if outcome.change else {},
    )


def _edit(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    return _change(args, ctx, "notebook_edit")


def _insert(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    return _change(args, ctx, "notebook_insert")


def _delete(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    return _change(args, ctx, "notebook_delete")


def _run(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    indices = args.get("cells")
    if not isinstance(indices, list) or not indices:
        raise ToolError("cells must be a non-empty list of cell indices")
    cells = live(ctx).run(indices, abort=ctx.abort)
    parts: list[str] = []
    images: list[Image] = []
    for cell in cells:
        status = cell.get("status")
        if status == "skipped":  # a %shiro cell: the front end does not run it inside this turn
            parts.append(f"[{cell.get('index')}] {SKIPPED_TURN_CELL}")
            continue
        head = f"[{cell.get('index')}] {status}"
        if cell.get("execution_count") is not None:
            head += f" (execution {cell['execution_count']})"
        outputs = [o for o in cell.get("outputs") or [] if isinstance(o, dict)]
        texts = [t for t in (_output_text(o) for o in outputs) if t]
        parts.append("\n".join([head, *texts]) if texts else f"{head}\n(no output)")
        for output in outputs:
            data = output.get("data")
            if not isinstance(data, dict):
                continue
            for mime in ("image/png", "image/jpeg"):
                if mime in data and len(images) < RUN_IMAGES:
                    try:
                        images.append(
                            Image(base64.b64decode("".join(data[mime])), mime, alt=f"cell {cell.get('index')}")
                        )
                    except ValueError:
                        pass
    failed = any(c.get("status") == "error" for c in cells)
    text = "\n\n".join(parts) + ("\n\n(a cell failed: the cells after it were not run)" if failed else "")
    return ToolOutput(text[: OUTPUT_CHARS * 10], images=images)


def _run_touches(args: dict[str, Any], ctx: ToolContext | None) -> Touches:
    """The code ``notebook_run`` runs: its cells' sources as the agent last read them (unknown when it has not
    read them all, or where there is no front end)."""
    live = ctx.notebook if ctx is not None else None
    cells = args.get("cells")
    unknown = Touches(why="the cells it runs were not read, so their names are not known")
    if live is None or not isinstance(cells, list):
        return unknown
    sources = []
    for index in cells:
        if not isinstance(index, int) or not 0 <= index < len(live.order):
            return unknown
        source = live.seen.get(live.order[index])
        if source is None:
            return unknown
        sources.append(source)
    return Touches(code="\n".join(sources))


SOURCE = {"type": "string", "description": "the cell's whole new source"}
CELL = {"type": "integer", "description": "the cell's index, as notebook_read shows it"}

TOOLS = [
    Tool(
        name="notebook_edit",
        description=(
            "Replace the source of an existing cell of the live notebook (read it with notebook_read first). The "
            "user sees a diff in that cell and accepts or rejects it; a cell changed since you read it is refused."
        ),
        parameters=schema({"cell": CELL, "source": SOURCE}),
        run=_edit,
        effects=Effect.REVIEW,
        kernel_thread=False,
    ),
    Tool(
        name="notebook_insert",
        description=(
            "Insert a new cell into the live notebook after cell `after` (-1: at the top); the user accepts or "
            "rejects it. It is not run: use notebook_run for that."
        ),
        parameters=schema(
            {
                "after": {"type": "integer", "description": "index of the cell it goes after; -1 for the top"},
                "source": SOURCE,
                "cell_type": {
                    "type": "string",
                    "enum": ["code", "markdown"],
                    "description": "code (default) or markdown",
                },
            },
            optional=("cell_type",),
        ),
        run=_insert,
        effects=Effect.REVIEW,
        kernel_thread=False,
    ),
    Tool(
        name="notebook_delete",
        description="Delete a cell of the live notebook; the user sees it marked for removal and accepts or rejects.",
        parameters=schema({"cell": CELL}),
        run=_delete,
        effects=Effect.REVIEW,
        kernel_thread=False,
    ),
    Tool(
        name="notebook_run",
        description=(
            "Run code cells of the live notebook, as the user would (their outputs land in the notebook); returns "
            "each cell's outputs. Stops at a cell that fails."
        ),
        parameters=schema(
            {"cells": {"type": "array", "items": {"type": "integer"}, "description": "cell indices, run in order"}}
        ),
        run=_run,
        effects=Effect.NAMESPACE,
        kernel_thread=False,
        touches=_run_touches,
    ),
]
