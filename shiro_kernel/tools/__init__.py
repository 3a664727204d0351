"""The tools the model can call. Adding a tool is one file: a module in this package exposing ``TOOLS`` (a list
of :class:`Tool`, each declaring its :class:`Effect`), found by :func:`all_tools` with no list to edit.

The order the model sees them in is stable (the prompt's tool list is byte-stable across turns and kernels):
each module's ``TOOLS`` in their order, the modules in the order of their names — one rule, so a new file
needs no place picked for it. A module without ``TOOLS`` (``base``, ``displays``) is a helper. Two tools with
one name are a mistake, said at once.
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
from .base import MAX_RESULT_CHARS, Effect, Image, Tool, ToolContext, ToolError, ToolOutput

__all__ = ["Effect", "Image", "Tool", "ToolContext", "ToolError", "ToolOutput", "all_tools", "run_tool", "tools_of"]


def tools_of(package: ModuleType) -> dict[str, Tool]:
    """The tools of ``package``'s modules by name: each module's ``TOOLS``, modules in name order (see the
    module's doc). Raises ValueError when two tools share a name."""
    tools: dict[str, Tool] = {}
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.ispkg)
    for name in names:
        module = importlib.import_module(f"{package.__name__}.{name}")
        for tool in getattr(module, "TOOLS", ()):
            if tool.name in tools:
                raise ValueError(f"two tools are named {tool.name!r} (the second in {module.__name__})")
            tools[tool.name] = tool
    return tools


def all_tools() -> dict[str, Tool]:
    """Every tool of this package by name, in a stable order (see the module's doc)."""
    return tools_of(importlib.import_module(__name__))


#: arguments whose presence and allowed values a tool checks itself, so the model reads the seed's text
#: (``Error: scope is required``, ``Error: invalid scope 'global', expected one of: project, system``) rather
#: than the schema's: servers that do not enforce the schema (Ollama, vLLM) send such calls
_OWN_CHECKS: dict[str, frozenset[str]] = {"memory_write": frozenset({"name", "scope"})}


def _check_arguments(tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    """Light validation against the tool's schema: unknown keys, missing required keys, types, enums."""
    props: dict[str, Any] = tool.parameters.get("properties", {})
    own = _OWN_CHECKS.get(tool.name, frozenset())
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
    part.meta.update(output.meta)
    part.displays = [_redact_display(d) for d in output.displays]
    notes: list[str] = []
    for image in output.images:  # the model's copy: downscaled, stored by hash, referred to from the part
        try:
            part.images.append(assets().put(image.data, image.mime, max_px=ctx.image_max_px, alt=image.alt))
        except ValueError as exc:
            notes.append(f"[an image could not be read and was not sent: {exc}]")
    if notes:
        part.output = "\n".join([part.output, *notes])
    return part
