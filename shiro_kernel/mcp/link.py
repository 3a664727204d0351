"""One agent's MCP, both ways: the user's servers for its turns, and ``/mcp serve`` for other agents.

:class:`McpLink` is what :class:`~shiro_kernel.agent.Agent` holds; it is handed :class:`McpSeams` (the settings,
the agent's tools, a tool-context factory, where notes go), never the agent itself. It creates the client manager on the
first turn (or ``/mcp``) that finds servers configured (``.mcp.json`` at the project root or
``Shiro.mcp_servers``), and the kernel server on ``/mcp serve``.

Invariants:

* Nothing of the ``mcp`` SDK is imported, and no thread started, while no server is configured or served.
* A turn waits for servers that are still starting (off the kernel's thread, up to the manager's start
  timeout, ending early on Stop); every server failure becomes one warning notice in the cell.
* Calls made by other agents run on the kernel's thread between cells, and each is recorded in the session
  as a user-role note naming the client, so the notebook's agent sees what another agent did. A note
  never lands between a call waiting for approval and its answer: it waits until the turn ends.
* A server from the repository's ``.mcp.json`` starts only once the user allowed that exact definition
  (:mod:`.consent`): a live turn asks (``ask``), a headless one shows one notice saying how to allow it;
  "Deny" holds for the rest of the kernel. The user's own ``Shiro.mcp_servers`` start without asking.
* ``/mcp serve``'s bearer token is written to a 0600 file under ``SHIRO_HOME/mcp`` and registered with the
  redaction filter; the cell shows the file's path, never the token. Both end with the server.
* ``ask`` approval for another agent's mutating call: buttons under the ``/mcp serve`` cell when a widget
  frontend is there (waiting at most :data:`APPROVAL_WAIT_S`), refused otherwise. "Always" is per client
  and tool, and never shared with the notebook's own agent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import redact
from ..approval import ALWAYS, APPROVE, ASK, decide
from ..context import rules
from ..errors import StoreError
from ..events import Event, Notice
from ..text import cut
from ..tools import Tool, ToolContext
from ..transcript import Message, ToolCallPart
from .config import McpConfigError, load_config
from .consent import ConsentAsker
from .gate import ConsentGate
from .token_file import delete_token_file, write_token_file

if TYPE_CHECKING:
    from ..config import Shiro
    from ..current import Current
    from .client import McpManager
    from .server import McpKernelServer

#: how long another agent's call waits for an answer when the settings do not say (``Shiro.approval_timeout_s``)
APPROVAL_WAIT_S = 600.0
#: how long ``/mcp allow`` waits for the servers it allowed to be ready before showing the list
ALLOW_WAIT_S = 15.0
#: the name the ``/mcp serve`` token is redacted under (``[redacted:SHIRO_MCP_TOKEN]``) and exported as
TOKEN_NAME = "SHIRO_MCP_TOKEN"
NOT_INSTALLED = (
    "MCP needs the mcp package, which is not installed in this kernel: run %pip install 'mcp>=2.3,<3' "
    "(or install shiro-kernel[mcp]) and restart the kernel"
)


def installed() -> bool:
    """Is the MCP SDK importable here (without importing it)?"""
    import importlib.util

    return importlib.util.find_spec("mcp") is not None


#: how much of another agent's call a note keeps (arguments, result)
NOTE_ARGS_CHARS, NOTE_RESULT_CHARS = 1_000, 2_000
EXTERNAL_NOTE = "[{client} used this kernel through MCP: {tool}({args})]\n{result}"


@dataclass(frozen=True)
class McpSeams:
    """What MCP needs from the agent it serves, and nothing more."""

    #: ``mcp_servers``, ``approval`` and ``frontend`` are read when used (``%config`` may change them)
    settings: Shiro
    #: the agent's own tools: ``/mcp serve`` offers some of them to other agents
    tools: Mapping[str, Tool]
    shell: Any
    #: a tool context for another agent's call (the project, the namespace, the task list, memory)
    context: Callable[[], ToolContext]
    #: the kernel's current session, which other agents' calls are recorded in; while a turn runs in it
    #: (:attr:`Current.turning`) their notes wait until it ends
    current: Current
    #: set by Stop: a turn waiting for an answer about a repository's server gives up
    abort: threading.Event


class McpLink:
    def __init__(self, seams: McpSeams) -> None:
        self.seams = seams
        self.manager: McpManager | None = None
        self.server: McpKernelServer | None = None
        self._notes: list[Message] = []  # other agents' calls not yet in the session
        self._lock = threading.Lock()
        self._loop: Any = None  # the kernel's asyncio loop (calls from other agents run there)
        #: a widget under the ``/mcp serve`` cell (with a widget frontend) that approval requests are added
        #: to: widget updates reach the cell after it finished, whatever the frontend does with late outputs
        self._panel: Any = None
        self._always: set[tuple[str, str]] = set()  # (client, tool) allowed for this session
        self._told_missing = False  # the "mcp is not installed" notice is shown once per kernel
        #: which of the repository's servers may start: the user's allowances and this kernel's answers
        self.gate = ConsentGate()
        self.token_file: Path | None = None  # ``/mcp serve``'s token, readable by this user only

    # -- the client side ---------------------------------------------------------------------------
    def configured(self, root: Path) -> bool:
        return bool(self.seams.settings.mcp_servers) or (root / ".mcp.json").is_file()

    def _manager(
        self, root: Path, emit: Callable[[Event], None] | None = None, ask: ConsentAsker | None = None
    ) -> McpManager:
        """The manager, configured from the current files: a repository's servers pass the consent gate
        (asked with ``ask``; told through ``emit`` when nobody can be asked)."""
        if self.manager is None:
            from .client import McpManager

            self.manager = McpManager(root)
        configs = self.manager.load(root, dict(self.seams.settings.mcp_servers))
        self.manager.configure(configs, self.gate.hold(root, configs, ask, emit, self.seams.abort))
        return self.manager

    def tools_for_turn(
        self,
        root: Path,
        emit: Callable[[Event], None],
        abort: threading.Event | None = None,
        ask: ConsentAsker | None = None,
    ) -> dict[str, Tool]:
        """The ready servers' tools for a turn (waiting for servers still starting); {} with none. A
        repository's servers start only once allowed: ``ask`` asks the user (a live turn); without it the
        turn says which were not started and how to allow them."""
        if self.manager is None and not self.configured(root):
            return {}
        if self.manager is None and not installed():
            if not self._told_missing:
                self._told_missing = True
                emit(Notice(f"{NOT_INSTALLED}; the configured MCP servers are not started", kind="warning"))
            return {}
        manager = self._manager(root, emit, ask)
        if not manager.wait_ready(0.2):
            starting = [s.name for s in manager.statuses() if s.state == "starting"]
            emit(Notice(f"starting MCP server{'s' * (len(starting) != 1)}: {', '.join(starting)}"))
            deadline = time.monotonic() + manager.start_timeout_s
            while not manager.wait_ready(0.1):
                if (abort is not None and abort.is_set()) or time.monotonic() > deadline:
                    break
        self.emit_notices(emit)
        return {t.name: t for t in manager.tools()}

    def emit_notices(self, emit: Callable[[Event], None]) -> None:
        """Show each server failure once (a server that died during the turn, too)."""
        for notice in self.notices():
            emit(notice)

    def notices(self) -> list[Notice]:
        """Each server failure not said yet, once (a server that died during the turn, too)."""
        if self.manager is None:
            return []
        return [Notice(text, kind="warning") for text in self.manager.drain_notices()]

    def status_text(self, root: Path, wait_s: float = 2.0) -> str:
        """``/mcp``: each server with its state and tools, and the kernel server when it runs (waiting up to
        ``wait_s`` for servers still starting)."""
        if self.manager is None and not self.configured(root):
            text = (
                f"No MCP servers configured. Add them to {root / '.mcp.json'} "
                "or with %config Shiro.mcp_servers = {...}."
            )
        elif self.manager is None and not installed():
            text = f"{NOT_INSTALLED}."
        else:
            manager = self._manager(root)
            manager.wait_ready(wait_s)  # a server that starts quickly shows as ready
            text = manager.status_text()
            # each server's failure is in the list already; what is not (a broken .mcp.json) is added
            notices = [n for n in manager.drain_notices() if not n.startswith("MCP server '")]
            if notices:
                text += "\n" + "\n".join(notices)
        info = self.server.info if self.server is not None else None
        if info is not None:
            text += (
                f"\nServing this kernel to other agents at {info.url} (bearer token in {self.token_file}; "
                "%shiro /mcp stop ends it)."
            )
        return text

    def restart(self, root: Path, name: str | None) -> str:
        if not installed():
            return f"{NOT_INSTALLED}."
        manager = self._manager(root)
        statuses = {s.name: s for s in manager.statuses()}
        if name and name not in statuses:
            return f"no MCP server named {name!r}; see %shiro /mcp"
        if name and statuses[name].state == "held":
            return f"MCP server '{name}' is {statuses[name].reason}"
        manager.restart(name)
        return self.status_text(root)

    def allow(self, root: Path, names: list[str]) -> str:
        """``/mcp allow NAME…``: let these servers of the repository's ``.mcp.json`` start, now and later (as
        long as their definition stays the same)."""
        try:
            configs = load_config(root, dict(self.seams.settings.mcp_servers))
        except McpConfigError as exc:
            return str(exc)
        if not names:
            return f"usage: /mcp allow NAME [NAME…]\n{self.gate.waiting(root, configs)}"
        lines = self.gate.allow(root, configs, names)
        if installed() and any(line.startswith("allowed") for line in lines):
            lines.append(self.status_text(root, wait_s=ALLOW_WAIT_S))
        return "\n".join(lines)

    def deny(self, root: Path, names: list[str]) -> str:
        """``/mcp deny NAME…``: forget the allowance, stop the server, and ask no more in this kernel."""
        if not names:
            return "usage: /mcp deny NAME [NAME…]"
        try:
            configs = load_config(root, dict(self.seams.settings.mcp_servers))
        except McpConfigError:
            configs = {}
        lines = self.gate.deny(root, configs, names)
        if self.manager is not None:
            self._manager(root)  # stops what is no longer allowed
        return "\n".join(lines)

    # -- the server side ---------------------------------------------------------------------------
    def serve(self) -> str:
        """``/mcp serve``: start (or show) the kernel's MCP server; the text to show. The token goes to a
        private file (and the redaction filter), never into the cell."""
        from ..ui.kernel import running_loop, widget_frontend

        if not installed():
            return f"{NOT_INSTALLED}."
        shell = self.seams.shell
        self._loop = running_loop(shell)
        if self.server is None:
            from .server import McpKernelServer

            self.server = McpKernelServer(
                dict(self.seams.tools), self.seams.context, self._run_on_main, self._approve, self._record
            )
        try:
            info = self.server.start()
        except Exception as exc:  # uvicorn/the SDK may fail in many ways: the cell says which
            return f"could not start the MCP server: {type(exc).__name__}: {exc}"
        redact.add_secret(TOKEN_NAME, info.token)
        try:
            self.token_file = write_token_file(self.server)
        except StoreError as exc:
            self._stop_server()
            return f"could not write the MCP server's token file, so it was not started: {exc}"
        if self._loop is not None and widget_frontend(shell, self.seams.settings.frontend):
            import ipywidgets as W
            from IPython.display import display

            self._panel = W.VBox([])
            display(self._panel)  # in this cell: approval requests from other agents appear here
        return self.server.config_text(self.token_file)

    def stop_serving(self) -> str:
        if self.server is None or not self.server.running:
            return "The MCP server is not running."
        self._stop_server()
        self._always.clear()
        if self._panel is not None:
            self._panel.close()
            self._panel = None
        return "Stopped the MCP server: its URL and token no longer work, and the token file is deleted."

    def _stop_server(self) -> None:
        """Stop serving, delete the token file, stop redacting the dead token."""
        if self.server is None:
            return
        info = self.server.info
        self.server.stop()
        if info is not None:
            redact.remove_secret(TOKEN_NAME, info.token)
        if self.token_file is not None:
            delete_token_file(self.token_file)
            self.token_file = None

    def _run_on_main(self, job: Callable[[], Any]) -> Any:
        """Run ``job`` on the kernel's thread (between cells) and wait; in place outside a kernel (one call
        at a time, as on the kernel's thread)."""
        from ..ui.kernel import call_on_main

        loop = self._loop
        if loop is None or loop.is_closed():
            with self._lock:
                return job()
        return call_on_main(job, loop.call_soon_threadsafe)

    def _approve(self, client: str, call: ToolCallPart) -> bool:
        """May ``client`` run this call? The notebook's own rule (:func:`~shiro_kernel.approval.decide`),
        with "Always" kept per client and tool. Runs on a worker thread; may wait for a click."""
        verdict = decide(
            self.seams.settings.approval, self.seams.tools.get(call.name), allowed=(client, call.name) in self._always
        )
        if verdict != ASK:
            return verdict == APPROVE
        loop = self._loop
        if loop is None or self._panel is None:
            return False  # nobody can be asked: refused, as a headless turn refuses
        from ..ui.asking import ask_user

        boxes: list[Any] = []

        def unanswered() -> None:  # nobody answered (the tab closed): refused, and the box says so
            for box in boxes:
                if box.asking:
                    box.resolve("unanswered")

        asked = ask_user(
            loop.call_soon_threadsafe,
            lambda answer: boxes.append(self._ask(client, call, answer)),
            unanswered,
            wait_s=float(getattr(self.seams.settings, "approval_timeout_s", APPROVAL_WAIT_S)),
        )
        if asked.answer == ALWAYS:
            self._always.add((client, call.name))
        return asked.answer in (APPROVE, ALWAYS)

    def _ask(self, client: str, call: ToolCallPart, answer: Callable[[str], None]) -> Any:
        """On the kernel's thread: the approval box under the ``/mcp serve`` cell, one per request."""
        from ..ui.call_preview import preview
        from ..ui.widgets import ApprovalBox

        title, body = preview(call, self.seams.context().root)
        box = ApprovalBox(keep_outcome=True)
        box.ask(call.name, title, body, answer, who=f"{client} (MCP)")
        self._panel.children = (*self._panel.children[-19:], box)  # the newest 20 requests stay
        return box

    def _record(self, client: str, tool: str, args: dict[str, Any], result: str) -> None:
        """Keep what another agent did: in the session now, or when the running turn ends."""
        text = EXTERNAL_NOTE.format(
            client=client,
            tool=tool,
            args=cut(json.dumps(args, ensure_ascii=False), NOTE_ARGS_CHARS),
            result=cut(result, NOTE_RESULT_CHARS, tail=NOTE_RESULT_CHARS // 4),
        )
        with self._lock:
            self._notes.append(Message.user(text))
        if not self.seams.current.turning:
            self.flush_notes()

    def flush_notes(self) -> int:
        """Move the waiting notes into the session (not while a call waits for approval)."""
        session = self.seams.current.session
        with self._lock:
            if not self._notes or rules.pending_calls(session.messages):
                return 0
            notes, self._notes = self._notes, []
        for message in notes:
            session.append(message)
        return len(notes)

    # -- the end -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the kernel server (its token file deleted) and every client server (``%unload_ext``, kernel
        shutdown)."""
        self._stop_server()
        if self.manager is not None:
            self.manager.close()
