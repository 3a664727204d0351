"""Notebook tools: ``notebook_read`` (the live document when a front end with the extension is attached,
unsaved edits included; else the file on disk, read as JSON: no nbformat validation, no nbformat warning in
the user's cell; it says which. With ``images: true`` the cells' image outputs come back as images, so "look
at my plot in cell 5" works) and ``propose_cell`` (a new cell below the asking one, not run: an insert)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from ..approval import UNANSWERED_DENIAL
from ..notebook.file import read_notebook_shared
from ..notebook.mimes import TURN_MIME, WIDGET_MIME
from ..text import cut
from .base import Effect, Image, Tool, ToolContext, ToolError, ToolOutput, schema

SOURCE_CHARS = 10_000  # per cell source
OUTPUT_CHARS = 2_000  # per output
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _output_text(output: Any) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        return cut(_ANSI.sub("", _text(output.get("text", ""))).rstrip("\n"), OUTPUT_CHARS)
    if kind == "error":
        return cut(f"{output.get('ename', 'Error')}: {_ANSI.sub('', str(output.get('evalue', '')))}", OUTPUT_CHARS)
    if kind in ("execute_result", "display_data", "update_display_data"):
        data = output.get("data")
        data = data if isinstance(data, dict) else {}
        if TURN_MIME in data:  # a %shiro cell's turn: its answer, not a rendering of every row
            return _turn_text(data[TURN_MIME])
        if WIDGET_MIME in data and _text(data.get("text/plain", "")).startswith(
            ("shiro: a turn is running", "TurnView(")
        ):
            return "(a shiro turn, still running: its answer is not in yet)"
        pieces = []
        if "text/plain" in data:
            pieces.append(cut(_ANSI.sub("", _text(data["text/plain"])).rstrip("\n"), OUTPUT_CHARS))
        pieces.extend(f"<{mime}>" for mime in data if mime.startswith("image/"))
        if not pieces:
            pieces.extend(f"<{mime}>" for mime in data)
        return "\n".join(pieces)
    return f"<{kind} output>"


def _turn_text(bundle: Any) -> str:
    """A saved turn as the model reads it: how it ended and its answer (the last text it showed)."""
    if isinstance(bundle, str):
        try:
            bundle = json.loads(bundle)
        except ValueError:
            bundle = None
    if not isinstance(bundle, dict):
        return "(a shiro turn whose saved record cannot be read)"
    entries = bundle.get("entries")
    texts = (
        [e.get("text") for e in entries if isinstance(e, dict) and e.get("type") == "text"]
        if isinstance(entries, list)
        else []
    )
    answer = next((t for t in reversed(texts) if isinstance(t, str) and t.strip()), None)
    end = bundle.get("end")
    reason = end.get("reason") if isinstance(end, dict) else None
    head = f"shiro's turn ({cut(reason, 40, ellipsis='…')})" if isinstance(reason, str) and reason else "shiro's turn"
    if not answer:
        return f"{head}, with no answer text"
    return cut(f"{head}: {_ANSI.sub('', answer).strip()}", OUTPUT_CHARS)


def _outputs(cell: dict[str, Any]) -> list[dict[str, Any]]:
    """A code cell's outputs (what is not an output object is skipped: the file is not validated)."""
    outputs = cell.get("outputs") if cell.get("cell_type") == "code" else None
    return [o for o in outputs if isinstance(o, dict)] if isinstance(outputs, list) else []


def _format_cell(index: int, cell: Any, live: bool = False) -> str:
    kind = cell.get("cell_type", "?")
    header = f"[{index}] {kind}"
    if kind == "code":
        count = cell.get("execution_count")
        header += f" ({count if count is not None else 'not run'})"
    if live and cell.get("id"):  # the live document's ids: what the cell tools act on
        header += f" id={cell['id']}"
    if cell.get("editing"):
        header += " (the user is typing in it)"
    lines = [header, cut(_text(cell.get("source", "")), SOURCE_CHARS)]
    outputs = _outputs(cell)
    if outputs:
        lines.append("--- outputs:")
        lines.extend(text for text in (_output_text(o) for o in outputs) if text)
    return "\n".join(lines)


#: images of one notebook_read call that reach the model
MAX_IMAGES = 6


def _cell_images(index: int, cell: Any) -> list[Image]:
    """A cell's image outputs (PNG/JPEG/GIF), as images for the model."""
    found: list[Image] = []
    for output in _outputs(cell):
        data = output.get("data")
        if not isinstance(data, dict):
            continue
        for mime in ("image/png", "image/jpeg", "image/gif"):
            if mime in data:
                try:
                    raw = base64.b64decode(_text(data[mime]))
                except ValueError:
                    continue
                plain = _text(data.get("text/plain", "")).strip()
                found.append(Image(raw, mime, alt=f"cell [{index}] output: {plain or mime}"))
                break
    return found


def _live_cells(ctx: ToolContext) -> tuple[list[dict[str, Any]], str] | None:
    """The live document's cells and how to say where they came from; None without a front end that
    answers (then the file on disk is read)."""
    notebook = ctx.notebook
    if notebook is None or notebook.unavailable() is not None:  # a hello on its way is waited for a moment
        return None
    try:
        read = notebook.read(ctx.abort)
    except ToolError:  # blocked (a --wait turn), or no answer: the file on disk instead, and it says so
        return None
    return read["cells"], "; unsaved edits included" if read["dirty"] else ""


def notebook_read(args: dict[str, Any], ctx: ToolContext) -> str | ToolOutput:
    path = ctx.notebook_path
    found = _live_cells(ctx)
    if found is not None:
        cells, note = found
        return _shown(args, cells, path.name if path else "the notebook", "live in the notebook", note, live=True)
    if path is None:
        raise ToolError(
            "no notebook is known for this session (the kernel could not tell which notebook it runs "
            "in); use list_files and read_file on the .ipynb file instead"
        )
    if not path.exists():
        raise ToolError(f"the notebook {path} does not exist on disk; it may not have been saved yet")
    try:
        cells = read_notebook_shared(path)["cells"]
    except OSError as exc:
        raise ToolError(f"could not read the notebook {path.name}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ToolError(f"could not read the notebook {path.name}: {exc}") from None
    if ctx.notebook is not None:
        ctx.notebook.remember(cells)  # the cells' ids, for changes the front end makes later
    return _shown(args, cells, path.name, "as saved on disk", "; unsaved edits are not included")


def _shown(
    args: dict[str, Any], cells: list[dict[str, Any]], name: str, where: str, note: str, live: bool = False
) -> str | ToolOutput:
    wanted = args.get("cells")
    if wanted is None or wanted == []:
        indices = list(range(len(cells)))
    else:
        if not isinstance(wanted, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in wanted):
            raise ToolError("cells must be a list of cell indices (integers), or null for all cells")
        bad = [i for i in wanted if not -len(cells) <= i < len(cells)]
        if bad:
            valid = f"0-{len(cells) - 1}" if cells else "none: the notebook is empty"
            raise ToolError(
                f"no cell {', '.join(map(str, bad))} in {name}; it has {len(cells)} cells (indices {valid})"
            )
        indices = [i % len(cells) for i in wanted]
    if not cells:
        return f"{name} has no cells."
    body = "\n\n".join(_format_cell(i, cells[i], live) for i in indices)
    text = f"{name} {where} ({len(cells)} cells{note}):\n\n{body}"
    if not args.get("images"):
        return text
    images = [image for i in indices for image in _cell_images(i, cells[i])]
    if not images:
        return text + "\n\n(no image outputs in these cells)"
    note = ""
    if len(images) > MAX_IMAGES:
        note = f"\n\n({len(images)} images in these cells; the first {MAX_IMAGES} are attached: ask for fewer cells)"
        images = images[:MAX_IMAGES]
    shown = "; ".join(image.alt for image in images)
    return ToolOutput(f"{text}{note}\n\nattached as images: {shown}", images=images)


def propose_cell(args: dict[str, Any], ctx: ToolContext) -> str | ToolOutput:
    code = args.get("code")
    if not isinstance(code, str) or not code.strip():
        raise ToolError("code is empty; pass the code for the new cell")
    lines = code.count("\n") + (0 if code.endswith("\n") else 1)
    notebook = ctx.notebook
    if notebook is not None and notebook.channel.attached:
        outcome = notebook.change(
            ctx.call_id or "propose_cell",
            "propose_cell",
            args,
            review=ctx.approval == "ask",
            timeout=ctx.approval_timeout_s,
            abort=ctx.abort,
        )
        if not outcome.is_error:
            return f"{outcome.text} It has not been run; the user decides whether to run it."
        if outcome.refused:  # nobody answered the review in time: told as an approval nobody answered
            text = UNANSWERED_DENIAL.format(name="propose_cell", seconds=ctx.approval_timeout_s)
            return ToolOutput(text, is_error=True, refused=True)
        return ToolOutput(outcome.text, is_error=True)
    if ctx.propose is None:
        return (
            "The cell could not be inserted (no notebook front end is attached). Show the user this code so "
            f"they can paste it into a cell:\n```python\n{code.rstrip()}\n```"
        )
    try:
        ctx.propose(code)
    except Exception as exc:  # the front end's failure becomes the code to show instead
        return (
            f"The cell could not be inserted ({type(exc).__name__}: {exc}). Show the user this code so they "
            f"can paste it into a cell:\n```python\n{code.rstrip()}\n```"
        )
    return (
        f"Proposed a new cell ({lines} lines) below the current one. It has not been run; the user decides "
        "whether to run it."
    )


TOOLS = [
    Tool(
        name="notebook_read",
        description=(
            "Read the current notebook (live, with the user's unsaved edits, when JupyterLab is attached; else as "
            "saved on disk): each cell's index, id, type, execution count, source and outputs as text (long "
            "outputs truncated). Pass cell indices or null for all; images: true attaches the cells' image outputs "
            "(plots) as images you can look at. The cell tools name cells by these indices."
        ),
        parameters=schema(
            {
                "cells": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "cell indices to read (0-based; negative counts from the end); null for all",
                },
                "images": {
                    "type": "boolean",
                    "description": "true: attach the cells' image outputs (plots) as images; null or false: text only",
                },
            },
            optional=("cells", "images"),
        ),
        run=notebook_read,
        effects=Effect.READS,
        kernel_thread=False,  # the live read waits for the front end, whose answer needs the kernel's thread free
        served=3,
    ),
    Tool(
        name="propose_cell",
        description=(
            "Offer code to the user as a new notebook cell inserted below the current one; it is not run. Use it "
            "for code the user should keep or run themselves."
        ),
        parameters=schema({"code": {"type": "string", "description": "the code for the new cell"}}),
        run=propose_cell,
        effects=Effect.REVIEW,  # an insert below the asking cell: the user keeps or drops it
        kernel_thread=False,
    ),
]
