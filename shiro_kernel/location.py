"""Where the agent of a kernel is: the notebook it serves, the project that notebook is in, the user's namespace,
and the front end's live document.

Each is read from the shell when asked (a notebook can be saved under a new name, a folder can become a repository
between turns); the project's root alone is kept, per turn and folder (:attr:`Location.root`). The agent holds one
:class:`Location`; the commands and views that need the notebook or the root read them from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .notebook import LiveNotebook, live_notebook
from .store.history import PromptHistory
from .store.paths import notebook_path, project_root
from .tools.base import ToolContext


class Location:
    """The notebook, the project root, the namespace and the live document of ``shell`` (None: no kernel)."""

    def __init__(self, shell: Any = None) -> None:
        self.shell = shell
        self._root: tuple[Path, Path] | None = None  # (where it was looked up from, the root): this turn's

    @property
    def notebook(self) -> Path | None:
        return notebook_path(getattr(self.shell, "user_ns", None))

    def notebook_str(self) -> str | None:
        nb = self.notebook
        return str(nb) if nb else None

    @property
    def root(self) -> Path:
        """The project's root (the repository holding the notebook, else its folder). Looked up once per
        turn and folder: walking up to the file system's root for a ``.git`` costs a few dozen ``stat``
        calls, and a turn asks for it several times (its tools, notes, memories and prompt history)."""
        start = self.notebook or Path.cwd()
        if self._root is None or self._root[0] != start:
            self._root = (start, project_root(start))
        return self._root[1]

    def new_turn(self) -> None:
        """The root is looked up again: a folder may have become a repository since the last turn."""
        self._root = None

    def history(self) -> PromptHistory:
        """The project's prompt history (``/history``, and each turn's prompt appended)."""
        return PromptHistory.for_project(self.root)

    def namespace(self) -> dict[str, Any] | None:
        """The user's namespace (None without a shell)."""
        ns = getattr(self.shell, "user_ns", None)
        return ns if isinstance(ns, dict) else None

    def hidden(self) -> dict[str, Any] | None:
        """What IPython itself put in the namespace (left out of what the model is told)."""
        return getattr(self.shell, "user_ns_hidden", None)

    @property
    def live(self) -> LiveNotebook | None:
        """The front end's live document, where a Jupyter kernel has one (:mod:`shiro_kernel.notebook`)."""
        return live_notebook(self.shell)

    def tool_context(self, **more: Any) -> ToolContext:
        """What a tool may touch here: the project (file tools are confined to it), the kernel and the notebook's
        file; ``more``, what the caller gives besides (the turn's task list, memory stores, settings, Stop)."""
        return ToolContext(root=self.root, shell=self.shell, notebook_path=self.notebook, **more)

    def attach(self, cell_id: str | None) -> None:
        """The turn's cell (``propose_cell`` inserts below it); a channel no front end answered is opened again
        (a page reload drops the front end's end of it), its hello arriving while the model answers."""
        live = self.live
        if live is None:
            return
        live.turn_cell, live.unanswered = cell_id, False  # a new turn: someone may be there to answer
        if not live.channel.attached:
            live.channel.open(self.notebook_str())
