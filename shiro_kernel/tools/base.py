"""What a tool is, and the context it runs in.

A tool is a name, a description, a JSON Schema for its arguments, a plain function
``run(args, ctx) -> str | ToolOutput`` and its declared :class:`Effect`: what its calls change. Every policy
derives from the effect (:class:`Tool`'s properties), and what a call of a NAMESPACE or FILES tool touches from
its :attr:`Tool.touches` (:class:`Touches`: no default, so undo never keeps nothing for a call that changes
something). No module keeps a list of tool names standing in for what a tool declares:

============================  ==========================================================================
rule                          derived from the effect
============================  ==========================================================================
approval (``approval.py``)    ``needs_approval`` (NAMESPACE, FILES or OUTSIDE): asked under "ask";
                              any change (``changes``, REVIEW too) refused under "read-only"
write-ahead (``store/``)      ``changes``: the record is written before such a call runs
replay (``rerun/replay_plan.py``)   READS only: omitted; a ``replayed`` tool's call (``python``): run again;
                              any other change: the replay stops before it
review (``turn.py``)          ``reviewed`` (REVIEW): the step's changes go to the notebook as one review
undo                          ``undoable``: no OUTSIDE effect (what it changed can be taken back);
                              its checkpoint: ``touches`` (the code, the files it writes, why outside)
============================  ==========================================================================

A tool signals a problem by raising :class:`ToolError` (or any
:class:`~shiro_kernel.errors.ShiroError`); the registry (:func:`shiro_kernel.tools.run_tool`) turns that,
and any other exception, into a result text starting ``Error:``, so a tool's failure never ends a turn.
"""

from __future__ import annotations

import enum
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

__all__ = [
    "MAX_RESULT_CHARS",
    "Effect",
    "Image",
    "Preview",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "Touches",
    "TouchesOf",
    "outside",
    "schema",
]

#: How much of one tool result the model sees; the rest is cut with a note saying so.
MAX_RESULT_CHARS = 20_000


class Effect(enum.Flag):
    """What a tool's calls change, declared once by the tool (``Tool.effects``); combine with ``|``."""

    #: changes nothing: reads the kernel, the files, the notebook or the memories (or only the session's own
    #: task list, which the per-step state shows)
    READS = enum.auto()
    #: changes the user's namespace: its code runs in the user's kernel (undo checkpoints names)
    NAMESPACE = enum.auto()
    #: writes files in the project (undo keeps their previous bytes)
    FILES = enum.auto()
    #: changes something outside the kernel and the project's files that cannot be taken back: a shell
    #: command, the durable memories, another server
    OUTSIDE = enum.auto()
    #: changes the notebook through a review the user accepts or rejects in the notebook itself
    REVIEW = enum.auto()


#: the effects that change something (any but READS)
CHANGES = Effect.NAMESPACE | Effect.FILES | Effect.OUTSIDE | Effect.REVIEW
#: the effects a call is asked about before it runs (REVIEW asks in the notebook instead)
ASKED = Effect.NAMESPACE | Effect.FILES | Effect.OUTSIDE
#: the effects whose tool must say what each call touches (:attr:`Tool.touches`): undo keeps exactly that
DECLARED = Effect.NAMESPACE | Effect.FILES


@dataclass(frozen=True)
class Touches:
    """What one call touches, as its tool says (:attr:`Tool.touches`): undo keeps it before the call runs
    (:mod:`~shiro_kernel.undo.checkpoints`), a replay runs the code again (:mod:`~shiro_kernel.rerun.replay_plan`),
    a pruned span names the files (:mod:`~shiro_kernel.context.digest`)."""

    #: the Python it runs in the user's namespace (NAMESPACE); None: not known here, ``why`` says why
    code: str | None = None
    #: the files it writes (FILES), as the call names them (relative to the project root, or absolute)
    writes: tuple[str, ...] = ()
    #: the files it reads (or the glob it lists), as the call names them
    reads: tuple[str, ...] = ()
    #: OUTSIDE: why what it changed cannot be taken back; NAMESPACE without ``code``: why its names are not known
    why: str = ""


#: what a call touches, from its arguments and the context it runs in; the context is None where no call runs
#: (a record read back, a digest): a tool that needs it to know says what it cannot know
TouchesOf = Callable[[dict[str, Any], "ToolContext | None"], Touches]


def outside(why: str) -> TouchesOf:
    """The :attr:`Tool.touches` of an OUTSIDE tool: every call changes what ``why`` names, beyond undo."""
    return lambda args, ctx: Touches(why=why)


@dataclass(frozen=True)
class Preview:
    """What the user reads before approving a call (:attr:`Tool.preview`; :mod:`~shiro_kernel.ui.call_preview`
    highlights it): ``text`` in ``lang`` (empty: by ``path``'s name), or, with ``old``, the diff of ``path`` from
    ``old`` to ``text``; ``text`` None shows the title alone."""

    title: str
    text: str | None
    lang: str = ""
    path: str = ""
    old: str | None = None


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
    #: the code it ran raised, its traceback the end of ``text`` (:attr:`~shiro_kernel.transcript.ToolResultPart.raised`)
    raised: bool = False
    #: the change was not approved (a review nobody answered in time): the result is ``refused``, as when the
    #: turn's approval question goes unanswered
    refused: bool = False
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
    #: reruns a saved notebook in a fresh kernel, at most the given seconds, and says which cells fail or differ
    #: (``notebook_check``; the rerun wing's check, given by the agent); None where no check can run
    check: Callable[[Path, float], str] | None = None
    #: the private data a call's arguments use (``Shiro.private``: ``df.email``), whose figures are not sent to the
    #: model (:meth:`~shiro_kernel.private.kernel.PrivateValues.drawn_from`); None: nothing is private
    private_in: Callable[[str], list[str]] | None = None

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
    """A tool the model can call. ``effects`` is its one declaration of what its calls change (see the
    module); ``changes``, ``needs_approval``, ``reviewed`` and ``undoable`` are derived from it."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema (object); strict-compatible: every property required
    run: Callable[[dict[str, Any], ToolContext], str | ToolOutput]
    #: what its calls change: every tool says it, a reading one too (no default: a tool that forgot would be
    #: taken for one that changes nothing and run without asking)
    effects: Effect
    #: False for tools that never touch the kernel's namespace or shell (an MCP server's): a background turn
    #: runs them on its own thread, so the kernel stays responsive and Stop reaches them at once
    kernel_thread: bool = True
    #: offered in a lean request (a local model's, :mod:`~shiro_kernel.context.offer`): one of the few tools a data
    #: question needs; the others are loaded on demand
    lean: bool = False
    #: what a call touches (its code, the files it writes or reads, why it is outside undo): required of a
    #: NAMESPACE or FILES tool, whose checkpoint is exactly that — a tool without it is refused here
    touches: TouchesOf | None = None
    #: what the user reads before approving a call (None: its arguments as JSON)
    preview: Callable[[dict[str, Any], ToolContext], Preview | None] | None = None
    #: a replay runs its calls that succeeded again (the code :attr:`touches` names, in the user's namespace)
    replayed: bool = False
    #: offered to other agents by the kernel's MCP server (:mod:`~shiro_kernel.mcp.server`), at this place in the
    #: list they see (from 1: ``python`` first, the tool they come for); None: not offered
    served: int | None = None
    #: arguments whose presence and allowed values its ``run`` checks itself (the registry lets them through,
    #: so the model reads the tool's own words): for servers that do not enforce the schema
    own_checks: frozenset[str] = frozenset()
    #: its results can carry the data's values (False: they are the agent's own bookkeeping — the task list, the
    #: tool list, the memories): under the policy's ``values: schema-only`` only False ones reach the model
    values: bool = True

    def __post_init__(self) -> None:
        if not self.effects:
            raise ValueError(f"tool {self.name!r} declares no effect: it is Effect.READS at least")
        if self.effects & DECLARED and self.touches is None:
            raise ValueError(
                f"tool {self.name!r} changes {'the namespace' if Effect.NAMESPACE in self.effects else 'files'} "
                "but does not say what a call touches (touches=): undo would keep nothing"
            )

    @property
    def changes(self) -> bool:
        """Its calls change something (any effect but READS): written ahead, refused under "read-only", and a
        replay does not omit them."""
        return bool(self.effects & CHANGES)

    @property
    def needs_approval(self) -> bool:
        """Its calls are asked about before they run (under "ask"): they change the namespace, files or the
        outside world. A REVIEW tool asks in the notebook instead."""
        return bool(self.effects & ASKED)

    @property
    def reviewed(self) -> bool:
        """Its changes go to the notebook as a review (a diff with Accept / Reject on the cell)."""
        return Effect.REVIEW in self.effects

    @property
    def undoable(self) -> bool:
        """What its calls change can be taken back (nothing OUTSIDE the kernel, the files and the notebook)."""
        return Effect.OUTSIDE not in self.effects

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
