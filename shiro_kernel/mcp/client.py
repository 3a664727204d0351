"""The MCP client side: the user's MCP servers, their tools offered to the model as shiro tools.

:class:`McpManager` keeps one background loop thread (:class:`LoopThread`) that owns every session.
Servers start there, never on the kernel's main thread; they are reused across turns and stopped by
:meth:`McpManager.close` (called on kernel shutdown / ``%unload_ext``, and at interpreter exit).

Invariants:

* ``mcp`` is imported only inside the loop thread, when a server is actually started: a manager with no
  servers configured costs nothing (no thread, no import).
* Each server is in exactly one state: ``starting`` → ``ready`` (N tools) | ``failed: <why>``; a ready
  server that dies becomes ``failed`` too. Every transition to ``failed`` queues exactly ONE notice naming
  the server (:meth:`McpManager.drain_notices`); :meth:`tools` only ever lists ``ready`` servers. A server
  the caller holds back (``configure(..., held=)``: a repository's server the user has not allowed) is
  ``held``, with the caller's reason, and never started.
* A server's tool changes the outside world (``Effect.OUTSIDE``: it asks under ``approval = "ask"``, is written
  ahead, stops a replay and is never undoable) unless it says ``readOnlyHint`` (``Effect.READS``), which is
  believed only for servers from the user's own configuration: a ``.mcp.json`` server's, whatever it says, is
  ``OUTSIDE``.
* A tool's ``run`` blocks the calling thread on a future from the loop thread, polls ``ctx.abort`` (Stop
  cancels the request, and the SDK sends ``notifications/cancelled``), forwards progress notifications to
  ``ctx.progress``, and never lets an exception other than :class:`ToolError` out, except a
  ``KeyboardInterrupt`` (a kernel interrupt): that cancels the request whatever instant it lands at, even
  while the request is being handed to the loop thread (:class:`~._sessions.InFlight`), and goes on.
* Secrets: every text this module produces (status, notices, errors) goes through the server's
  ``ServerConfig.redact``; stdio servers' stderr goes to a private temp file, never to the notebook.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import itertools
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..tools import Effect, Tool, ToolContext, ToolError, ToolOutput
from ._runtime import LoopThread, one_line
from ._sessions import InFlight, Server, SessionHost
from .config import McpConfigError, ServerConfig, load_config
from .results import convert_result
from .schema import (
    clean_arguments,
    cut_description,
    normalize_schema,
    openai_schema,
    tool_names,
)

_ALL: weakref.WeakSet[McpManager] = weakref.WeakSet()
_gen = itertools.count(1)


@atexit.register
def _close_all() -> None:  # children must not outlive the kernel
    for manager in list(_ALL):
        manager.close(timeout=3.0)


@dataclass(frozen=True)
class ServerStatus:
    """One server as ``%shiro /mcp`` shows it (safe to display: nothing secret)."""

    name: str
    state: str  # "starting" | "ready" | "failed" | "held" | "stopped"
    reason: str  # for failed and held: one line
    tools: tuple[str, ...]  # model-facing names (ready only)
    transport: str
    target: str  # command line or URL, redacted


class McpManager(SessionHost):
    """All of one kernel's MCP client sessions. Thread-safe; every method returns promptly."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        start_timeout_s: float = 30.0,
        call_timeout_s: float | None = 600.0,
        protocol: str = "auto",
    ) -> None:
        self.root = Path(root) if root is not None else Path.cwd()
        self.start_timeout_s = start_timeout_s
        #: a hung server must not hang a headless run (nbclient has no Stop button); None = wait forever
        self.call_timeout_s = call_timeout_s
        self.protocol = protocol  # "auto" probes the 2026 protocol and falls back to initialize
        self._servers: dict[str, Server] = {}
        self._notices: list[str] = []
        self._file_error: str | None = None
        self._held: dict[str, str] = {}  # name → why it is not started (given by the caller)
        self._loop: LoopThread | None = None
        self._cond = threading.Condition()
        #: (server generation, model-facing name) → (the MCP tool it was built from, the shiro Tool)
        self._built: dict[tuple[int, str], tuple[Any, Tool]] = {}
        _ALL.add(self)

    # -- configuration ------------------------------------------------------------------------
    def load(self, root: Path, trait: Mapping[str, Any] | None = None) -> dict[str, ServerConfig]:
        """``<root>/.mcp.json`` and the trait, read (nothing started). A broken file gives one notice."""
        self.root = Path(root)
        try:
            configs = load_config(self.root, trait)
            self._file_error = None
        except McpConfigError as exc:
            if str(exc) != self._file_error:
                self._file_error = str(exc)
                with self._cond:
                    self._notices.append(f"{exc} MCP servers from that file are not started.")
            configs = load_config(self.root, trait, include_file=False)
        return configs

    def configure(self, configs: Mapping[str, ServerConfig], held: Mapping[str, str] | None = None) -> None:
        """Start new servers, restart changed ones, stop removed ones; returns at once. ``held``: names not
        to start (stopped if running), each with the reason ``/mcp`` shows."""
        held = dict(held or {})
        to_stop: list[Server] = []
        to_start: list[Server] = []
        with self._cond:
            self._held = held
            for name in list(self._servers):
                cfg = configs.get(name)
                entry = self._servers[name]
                if cfg is None or cfg.key() != entry.config.key() or (entry.state == "held") != (name in held):
                    to_stop.append(self._servers.pop(name))
                elif name in held:
                    entry.reason = held[name]
            for name, cfg in configs.items():
                if name in self._servers:
                    continue
                entry = Server(cfg, next(_gen))
                self._servers[name] = entry
                if name in held:
                    entry.state, entry.reason = "held", held[name]
                elif cfg.error:
                    self._fail(entry, cfg.error, starting=True, raw=True)
                else:
                    to_start.append(entry)
            self._cond.notify_all()
        for entry in to_stop:
            self._request_stop(entry)
        if to_start:
            loop = self._ensure_loop()
            for entry in to_start:
                loop.submit(self._supervise(entry))

    def restart(self, name: str | None = None) -> None:
        """Start ``name`` (or every failed server) again, e.g. after fixing its command."""
        with self._cond:
            configs = {n: s.config for n, s in self._servers.items()}
            names = [name] if name else [n for n, s in self._servers.items() if s.state == "failed"]
            victims = [self._servers.pop(n) for n in names if n in self._servers and n not in self._held]
            held = dict(self._held)
        for entry in victims:
            self._request_stop(entry)
        self.configure(configs, held)

    def wait_ready(self, timeout_s: float) -> bool:
        """Block until no server is ``starting`` (True) or ``timeout_s`` passes (False)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while any(s.state == "starting" for s in self._servers.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    # -- what the agent uses ------------------------------------------------------------------
    def tools(self) -> list[Tool]:
        """The ready servers' tools as shiro tools (``mcp__<server>__<tool>``), in a stable order."""
        return [self._tool(entry, spec, name) for entry, spec, name in self._named()]

    def _named(self) -> list[tuple[Server, Any, str]]:
        """(server, MCP tool, model-facing name) for every ready server, in configuration order."""
        out: list[tuple[Server, Any, str]] = []
        taken: set[str] = set()
        with self._cond:
            ready = [(s, list(s.tools)) for s in self._servers.values() if s.state == "ready"]
        for entry, specs in ready:
            names = tool_names(entry.config.name, [t.name for t in specs], taken)
            taken.update(names.values())
            out.extend((entry, spec, names[spec.name]) for spec in specs)
        return out

    def drain_notices(self) -> list[str]:
        """Notices not yet shown (one per server failure, naming it); each is returned once."""
        with self._cond:
            notices, self._notices = self._notices, []
        return notices

    def statuses(self) -> list[ServerStatus]:
        """Each configured server's state, reason and tool names (ready servers only have tools)."""
        with self._cond:
            entries = list(self._servers.values())
        names: dict[int, list[str]] = {}
        for entry, _spec, name in self._named():
            names.setdefault(entry.gen, []).append(name)
        return [
            ServerStatus(
                e.config.name,
                e.state,
                e.reason,
                tuple(names.get(e.gen, ())),
                e.config.transport,
                "" if e.config.error else e.config.describe(),
            )
            for e in entries
        ]

    def status_text(self) -> str:
        """What ``%shiro /mcp`` prints: each server with its state and its tools."""
        statuses = self.statuses()
        if not statuses:
            return (
                f"No MCP servers configured. Add them to {self.root / '.mcp.json'} "
                "or with %config Shiro.mcp_servers = {...}."
            )
        lines = ["MCP servers:"]
        by_name = {t.name: t for t in self.tools()}
        for st in statuses:
            state = {
                "ready": f"ready, {len(st.tools)} tool{'s' * (len(st.tools) != 1)}",
                "failed": f"failed: {st.reason}",
                "held": st.reason,
            }.get(st.state, st.state)
            target = f" ({st.transport}: {st.target})" if st.target else ""
            lines.append(f"  {st.name}{target} — {state}")
            for name in st.tools:
                tool = by_name.get(name)
                if tool is None:  # the server changed state between the two looks
                    continue
                tag = "" if tool.changes else " [read-only]"
                lines.append(f"    {name}{tag} — {one_line(tool.description, 100)}")
        return "\n".join(lines)

    def close(self, timeout: float = 10.0) -> None:
        """Stop every server (children are terminated) and the loop thread. The manager stays usable."""
        with self._cond:
            entries = list(self._servers.values())
            self._servers.clear()
            self._built.clear()
            loop, self._loop = self._loop, None
            self._cond.notify_all()
        if loop is None or not loop.alive:
            return
        try:
            loop.submit(self._stop_all(entries, timeout)).result(timeout + 1)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        loop.stop(timeout)

    # -- internals (caller side) --------------------------------------------------------------
    def _ensure_loop(self) -> LoopThread:
        with self._cond:
            if self._loop is None or not self._loop.alive:
                self._loop = LoopThread("shiro-mcp-client")
            return self._loop

    def _fail(self, entry: Server, reason: str, *, starting: bool, raw: bool = False) -> None:
        """Record a failure and queue its one notice. Caller holds ``self._cond``."""
        if entry.state in ("failed", "stopped"):
            return
        reason = reason if raw else one_line(entry.config.redact(reason))
        entry.state, entry.reason = "failed", reason
        name = entry.config.name
        if raw:  # a configuration error is already a full sentence naming the server
            self._notices.append(f"{reason} Its tools are not available.")
        elif starting:
            self._notices.append(f"MCP server '{name}' failed to start: {reason}. Its tools are not available.")
        else:
            self._notices.append(f"MCP server '{name}' stopped: {reason}. Its tools are no longer available.")
        self._cond.notify_all()

    def _request_stop(self, entry: Server) -> None:
        loop = self._loop
        if loop is None or not loop.alive:
            return

        def stop() -> None:
            entry.stop_requested = True
            if entry.wake is not None:
                entry.wake.set()

        with contextlib.suppress(RuntimeError):  # the loop closed in between: nothing left to stop
            loop.call(stop)

    def _tool(self, entry: Server, spec: Any, name: str) -> Tool:
        cached = self._built.get((entry.gen, name))
        if cached is not None and cached[0] is spec:  # same listing: no need to convert the schema again
            return cached[1]
        params, strict = openai_schema(spec.input_schema)
        loose = normalize_schema(spec.input_schema) if strict else params
        annotations = getattr(spec, "annotations", None)
        # a hint is the server's word: a repository's server could say read-only and write anyway
        read_only = not entry.config.from_project and bool(getattr(annotations, "read_only_hint", False))
        text = (
            spec.description or getattr(spec, "title", None) or f"Tool {spec.name} of MCP server {entry.config.name}."
        )
        server, tool_name, gen = entry.config.name, spec.name, entry.gen

        def run(args: dict[str, Any], ctx: ToolContext) -> str | ToolOutput:
            return self._call(server, gen, tool_name, clean_arguments(args, loose) if strict else args, ctx)

        effects = Effect.READS if read_only else Effect.OUTSIDE
        tool = Tool(name, cut_description(text), params, run, effects=effects, kernel_thread=False)
        self._built[(entry.gen, name)] = (spec, tool)
        return tool

    def _call(self, server: str, gen: int, tool: str, args: dict[str, Any], ctx: ToolContext) -> str | ToolOutput:
        with self._cond:
            entry = self._servers.get(server)
            loop = self._loop
        if entry is None or entry.gen != gen or entry.state != "ready" or loop is None:
            state = "removed" if entry is None or entry.gen != gen else entry.state
            raise ToolError(f"MCP server '{server}' is not running ({state}); its tools are unavailable now")
        abort = ctx.abort
        if abort is not None and abort.is_set():
            raise ToolError("stopped by the user before the MCP request was sent")
        deadline = time.monotonic() + self.call_timeout_s if self.call_timeout_s else None
        flight = InFlight()
        try:
            future = loop.submit(self._acall(entry, tool, args, ctx.progress, flight))
            result = self._wait(future, server, abort, deadline)
        except KeyboardInterrupt:  # a kernel interrupt (or the turn's time limit): cancel the request, then stop
            # through ``flight``, not the future: the interrupt may land before ``submit`` has returned it
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing is left to cancel
                loop.call(flight.cancel)
            raise
        return convert_result(result, entry.config.redact_output)

    def _wait(
        self,
        future: concurrent.futures.Future[Any],
        server: str,
        abort: threading.Event | None,
        deadline: float | None,
    ) -> Any:
        """The call's result; Stop and the call timeout cancel the request (the SDK tells the server)."""
        while True:
            try:
                return future.result(timeout=0.05)
            except concurrent.futures.TimeoutError:
                pass
            except concurrent.futures.CancelledError:
                raise ToolError("the call was cancelled") from None
            if abort is not None and abort.is_set():
                future.cancel()  # cancels the task → the SDK sends notifications/cancelled
                raise ToolError("stopped by the user; the MCP request was cancelled")
            if deadline is not None and time.monotonic() > deadline:
                future.cancel()
                raise ToolError(f"no answer from MCP server '{server}' within {self.call_timeout_s:g} s; cancelled")

    # -- internals (loop thread) --------------------------------------------------------------
