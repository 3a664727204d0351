"""What a tool is, and the context it runs in.

A tool is a name, a description, a JSON Schema for its arguments and a plain function
``run(args, ctx) -> str | ToolOutput``. A tool signals a problem by raising :class:`ToolError` (or any
:class:`~shiro_kernel.errors.ShiroError`); the registry (:func:`shiro_kernel.tools.run_tool`) turns that,
and any other exception, into a result text starting ``Error:``, so a tool's failure never ends a turn.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ToolError

if TYPE_CHECKING:
    from ..memory.named import MemoryStore
    from ..memory.notes import NoteStore
    from ..notebook.document import LiveNotebook
    from ..tasks import TaskList

__all__ = ["MAX_RESULT_CHARS", "Image", "Tool", "ToolContext", "ToolError", "ToolOutput", "schema"]

#: How much of one tool result the model sees; the rest is cut with a note saying so.
MAX_RESULT_CHARS = 20_000


@dataclass
class Image:
    """An image a tool produced (a figure, a PNG file, an MCP image): raw bytes and their MIME type."""

    data: bytes
    mime: str  # image/png | image/jpeg | image/gif | image/webp
    #: a text stand-in for a model that takes no images (a figure's title, axes and series)
    alt: str = ""


@dataclass
class ToolOutput:
    """A tool's result when it is more than text: ``text`` for the model, ``images`` sent to the model as
    images (downscaled by the turn), ``displays`` (MIME bundles) shown to the user under the tool row."""

    text: str
    images: list[Image] = field(default_factory=list)
    displays: list[dict[str, Any]] = field(default_factory=list)
    #: a failure that still has something to show (a rejected change's row): the text starts ``Error:``
    is_error: bool = False
    #: kept with the result for the views (not sent to the model): e.g. a cell change's row
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolContext:
    """Everything a tool may touch. ``shell`` is the IPython shell (None outside a kernel)."""

    root: Path  # the project root; file tools are confined to it
    shell: Any = None
    notebook_path: Path | None = None
    #: called by ``propose_cell`` with the code to offer as a new cell below
    propose: Callable[[str], None] | None = None
    #: the session's task list (``todo_write``); None where there is no session
    tasks: TaskList | None = None
    #: the project's notes (``remember``/``recall``/``forget``); None under ``--no-memory``
    notes: NoteStore | None = None
    #: the named memories (``memory_read``/``memory_write``); None under ``--no-memory``
    memories: MemoryStore | None = None
    #: where a remembered note came from (session, notebook, cell, git commit)
    provenance: dict[str, Any] | None = None
    #: set when the user stops the turn: a long-running tool checks it and gives up early
    abort: threading.Event | None = None
    #: a one-line progress report for the running call's row in the live view (e.g. "3/10 files")
    progress: Callable[[str], None] | None = None
    #: images for the model are downscaled to this long side (``Shiro.image_max_px``)
    image_max_px: int = 1024
    #: the front end's live document (None: no front end with the extension; the cell tools say so)
    notebook: LiveNotebook | None = None
    #: ``Shiro.approval``: the cell tools review their changes in the notebook under "ask"
    approval: str = "ask"
    #: how long a question to the user waits before it counts as a refusal (``Shiro.approval_timeout_s``)
    approval_timeout_s: float = 600.0
    #: the call being run (set by the turn for each call)
    call_id: str = ""

    def resolve(self, path: str) -> Path:
        """Resolve ``path`` (relative to the root, or absolute) and refuse anything outside the root.

        Symlinks are followed, so a link pointing out of the project is refused too. The session's two
        memory scope folders (:attr:`memories`: its ``project_dir`` and ``system_dir``, where
        ``memory_write`` says it wrote) are open too, for the files right in them, with the same checks
        and no ``..``: not the folders themselves, another project's memories or the dot-files there.
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
            if ".." not in Path(path).parts and self._in_memory_folder(real):
                return real
            also = " (or right in this session's memory folders)" if any(self._memory_folders()) else ""
            raise ToolError(f"path {path!r} is outside the project root {root}; only files under it{also} can be used")
        return real

    def _memory_folders(self) -> tuple[Path | None, Path | None]:
        """The session's memory scope folders (project, system), symlinks resolved; (None, None) without
        a memory store (``--no-memory``)."""
        store = self.memories
        if store is None:
            return None, None
        return Path(os.path.realpath(store.project_dir)), Path(os.path.realpath(store.system_dir))

    def _in_memory_folder(self, real: Path) -> bool:
        """A file right in one of the session's memory scope folders. Not a folder (a walk of the system
        folder would reach every project's memories under ``projects/``) and not a dot-file (the index
        lock, the provenance sidecar, bundle records and the trash)."""
        return real.parent in self._memory_folders() and not real.name.startswith(".") and not real.is_dir()


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema (object); strict-compatible: every property required
    run: Callable[[dict[str, Any], ToolContext], str | ToolOutput]
    #: True for tools that change something (run code, write files, shell): they need approval
    mutates: bool = False
    #: True for tools that ask in the notebook itself (a diff with Accept / Reject on the cell): no approval
    #: question before them, but refused under "read-only"
    reviewed: bool = False
    #: False for tools that never touch the kernel's namespace or shell (an MCP server's): a background turn
    #: runs them on its own thread, so the kernel stays responsive and Stop reaches them at once
    kernel_thread: bool = True

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


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
