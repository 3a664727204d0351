"""The tools the model can call. Adding a tool is a module in this package exposing ``TOOLS`` (a list of
:class:`Tool`, each declaring its :class:`Effect` and, when it changes the namespace or files, what a call touches)
and its name's place in :data:`ORDER`.

The order the model sees them in is declared, in :data:`ORDER` (the prompt's tool list is byte-stable across
turns and kernels: renaming a module moves nothing). A module without ``TOOLS`` (``base``, ``displays``) is a
helper. Two tools with one name, a tool with no place in the order, or a place with no tool are mistakes, said at
once.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from types import ModuleType
from typing import Any

from ..errors import ShiroError
from ..store.assets import assets
from ..text import cut
from ..transcript import ToolCallPart, ToolResultPart
from .base import MAX_RESULT_CHARS, Effect, Image, Preview, Tool, ToolContext, ToolError, ToolOutput, Touches

__all__ = [
    "ORDER",
    "Effect",
    "Image",
    "Preview",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "Touches",
    "all_tools",
    "run_tool",
    "tools_of",
]


#: the order the model sees the tools in: a new tool's name goes where it reads best
ORDER = (
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
)


def tools_of(package: ModuleType, order: tuple[str, ...]) -> dict[str, Tool]:
    """The tools of ``package``'s modules (each module's ``TOOLS``) by name, in ``order``. Raises ValueError when
    two tools share a name, a tool has no place in ``order``, or a name in ``order`` is no module's tool."""
    tools: dict[str, Tool] = {}
    where: dict[str, str] = {}
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.ispkg)
    for name in names:
        module = importlib.import_module(f"{package.__name__}.{name}")
        for tool in getattr(module, "TOOLS", ()):
            if tool.name in tools:
                raise ValueError(f"two tools are named {tool.name!r} (the second in {module.__name__})")
            tools[tool.name] = tool
            where[tool.name] = module.__name__
    unplaced = [n for n in tools if n not in order]
    if unplaced:
        raise ValueError(
            f"tool {unplaced[0]!r} (in {where[unplaced[0]]}) has no place in the order the model sees the tools in: "
            f"add its name to {package.__name__}.ORDER"
        )
    missing = [n for n in order if n not in tools]
    if missing:
        raise ValueError(f"{package.__name__}.ORDER names {missing[0]!r}, but no module of the package defines it")
    return {n: tools[n] for n in order}


def all_tools() -> dict[str, Tool]:
    """Every tool of this package by name, in the declared order (:data:`ORDER`)."""
    return tools_of(importlib.import_module(__name__), ORDER)


def _check_arguments(tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    """Light validation against the tool's schema: unknown keys, missing required keys, types, enums."""
    props: dict[str, Any] = tool.parameters.get("properties", {})
    own = tool.own_checks  # the model reads the tool's own words about these (servers that skip the schema)
    unknown = sorted(set(args) - set(props))
    if unknown and tool.parameters.get("additionalProperties", True) is False:
        raise ToolError(f"unknown argument(s) {', '.join(unknown)}; {tool.name} takes {', '.join(props) or 'none'}")
    checks: dict[str, tuple[type, ...]] = {
        "string": (str,),
        "integer": (int,),
        "number": (int, float),
        "boolean": (bool,),
        "array": (list,),
        "object": (dict,),
    }
    for name, prop in props.items():
        value = args.get(name)
        kinds = prop.get("type", [])
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if value is None:
            if name in tool.parameters.get("required", []) and "null" not in kinds and name not in own:
                raise ToolError(f"missing required argument {name!r}")
            continue
        allowed = tuple(t for k in kinds if k in checks for t in checks[k])
        if allowed and (not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed)):
            want = " or ".join(k for k in kinds if k != "null")
            raise ToolError(f"argument {name!r} must be {want}, not {type(value).__name__}")
        if "enum" in prop and value not in prop["enum"] and name not in own:
            raise ToolError(f"argument {name!r} must be one of {', '.join(map(str, prop['enum']))}, not {value!r}")
    return args


def _redact_display(bundle: dict[str, Any]) -> dict[str, Any]:
    """A display bundle (``{"data", "metadata"}``) with every text value through the secret filter: a
    DataFrame holding a token, or ``display(token)``, reaches the view and the saved notebook redacted too.
    Binary images (base64) are left as they are."""
    from ..redact import redact

    data = bundle.get("data")
    if not isinstance(data, dict):
        return bundle
    clean: dict[str, Any] = {}
    for mime, value in data.items():
        if isinstance(value, str) and (mime == "image/svg+xml" or not mime.startswith("image/")):
            clean[mime] = redact(value)
        elif isinstance(value, (dict, list)):  # JSON (Plotly, Vega): secrets inside its strings are redacted
            try:
                clean[mime] = json.loads(redact(json.dumps(value)))
            except ValueError:  # a user pattern cut through the JSON's syntax: leave the MIME type out
                continue
        else:
            clean[mime] = value
    return {**bundle, "data": clean}


#: what the model reads in place of figures drawn from private data (the user sees them in the cell)
PRIVATE_FIGURE = (
    "[{n} figure(s) not sent to the model: drawn from private data ({data}); "
    "%config Shiro.private_figures = True sends them]"
)


def run_tool(tools: dict[str, Tool], call: ToolCallPart, ctx: ToolContext) -> ToolResultPart:
    """Run one call and return its result part. Never raises: every failure is an ``Error:`` text."""

    def result(output: str, is_error: bool = False, refused: bool = False) -> ToolResultPart:
        from ..redact import redact  # secrets never leave the kernel: redacted before anything else sees it

        return ToolResultPart(
            call.call_id,
            call.name,
            cut(redact(output), MAX_RESULT_CHARS, tail=MAX_RESULT_CHARS // 4),
            is_error=is_error,
            refused=refused,
        )

    tool = tools.get(call.name)
    if tool is None:
        return result(f"Error: unknown tool {call.name!r}; available: {', '.join(tools)}", True)
    try:
        args = _check_arguments(tool, call.parsed_arguments())
    except (ToolError, ValueError) as exc:  # the model's arguments are malformed
        return result(f"Error: {exc}", True)
    try:
        output = tool.run(args, ctx)
    except ShiroError as exc:  # the tool boundary: an exception becomes the text the model reads
        return result(f"Error: {exc}", True)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a tool's bug must not end the turn
        return result(f"Error: {type(exc).__name__}: {exc}", True)
    if not isinstance(output, ToolOutput):
        return result(output)
    part = result(output.text, output.is_error, output.refused)
    part.raised = output.raised
    part.meta.update(output.meta)
    part.displays = [_redact_display(d) for d in output.displays]
    notes: list[str] = []
    private = ctx.private_in(call.arguments) if output.images and ctx.private_in is not None else []
    if private:  # a figure drawn from private data shows the values it plots: the user sees it, the model does not
        notes.append(PRIVATE_FIGURE.format(n=len(output.images), data=", ".join(private)))
    for image in [] if private else output.images:  # the model's copy: downscaled, stored by hash, referred to
        try:
            part.images.append(assets().put(image.data, image.mime, max_px=ctx.image_max_px, alt=image.alt))
        except ValueError as exc:
            notes.append(f"[an image could not be read and was not sent: {exc}]")
    if notes:
        part.output = "\n".join([part.output, *notes])
    return part
