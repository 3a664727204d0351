"""What a tool is, and the context it runs in.

A tool is a name, a description, a JSON Schema for its arguments and a plain function
``run(args, ctx) -> str``. A tool signals a problem by raising :class:`ToolError`; the registry turns
that (and any other exception) into a result text starting ``Error:``, so a tool's failure never
ends a turn.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: How much of one tool result the model sees; the rest is cut with a note saying so.
MAX_RESULT_CHARS = 20_000


class ToolError(Exception):
    """A problem the model should read and act on (bad path, no match, ...)."""


@dataclass
class ToolContext:
    """Everything a tool may touch. ``shell`` is the IPython shell (None outside a kernel)."""

    root: Path  # the project root; file tools are confined to it
    shell: Any = None
    notebook_path: Path | None = None
    #: called by ``propose_cell`` with the code to offer as a new cell below
    propose: Callable[[str], None] | None = None
    #: extra state later tools need (task list, memory stores ...), keyed by name
    extras: dict[str, Any] = field(default_factory=dict)

    def resolve(self, path: str) -> Path:
        """Resolve ``path`` (relative to the root, or absolute) and refuse anything outside the root.

        Symlinks are followed, so a link pointing out of the project is refused too.
        """
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path is empty")
        if "\x00" in path:
            raise ToolError("path contains a NUL byte")
        root = Path(os.path.realpath(self.root))
        candidate = Path(os.path.expanduser(path))
        if not candidate.is_absolute():
            candidate = root / candidate
        real = Path(os.path.realpath(candidate))
        if real != root and root not in real.parents:
            raise ToolError(f"path {path!r} is outside the project root {root}; only files under it can be used")
        return real


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema (object); strict-compatible: every property required
    run: Callable[[dict[str, Any], ToolContext], str]
    #: True for tools that change something (run code, write files, shell): they need approval
    mutates: bool = False

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def truncate(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """Cut ``text`` to about ``limit`` characters, keeping head and tail, with a note saying so."""
    if len(text) <= limit:
        return text
    head = text[: limit * 3 // 4]
    tail = text[-(limit // 4):]
    cut = len(text) - len(head) - len(tail)
    return f"{head}\n[... {cut} characters truncated; {len(text)} in all ...]\n{tail}"


def schema(properties: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """A strict-mode object schema: every property is required; optional ones may be null."""
    props: dict[str, Any] = {}
    for name, prop in properties.items():
        if name in optional:
            prop = dict(prop)
            kind = prop.get("type")
            if isinstance(kind, str):
                prop["type"] = [kind, "null"]
            elif "enum" in prop and None not in prop["enum"]:
                prop["enum"] = [*prop["enum"], None]
        props[name] = prop
    return {"type": "object", "properties": props, "required": list(properties), "additionalProperties": False}
