"""The loop-thread side of the MCP client: one task per server owns its SDK session.

Invariants:

* Everything here runs on the manager's :class:`~._runtime.LoopThread`; the only state shared with other
  threads is a :class:`Server`'s ``state``/``reason``/``tools``, changed under the manager's condition
  (``self._cond``), and every change to ``failed`` goes through ``self._fail`` (exactly one notice).
* A server's whole life — transport, ``Client`` context, tools listing, waiting to be stopped — happens
  inside ONE task (:meth:`SessionHost._supervise`), because the SDK's anyio task groups must be entered
  and left by the same task. Calls run in other tasks on the same loop and only send requests.
* Leaving that task's context always shuts the transport down: stdio servers get their stdin closed, then
  SIGTERM/SIGKILL to their process group (the SDK's policy), so no child outlives :meth:`close`.
* ``mcp`` is imported here lazily, inside the coroutines, never at module import.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..tools import ToolError
from ._runtime import WatchedReadStream, is_connection_error, why
from .config import ServerConfig
from .results import progress_text


@dataclass
class Server:
    """One configured server and its live session (if any)."""

    config: ServerConfig
    gen: int
    state: str = "starting"  # starting | ready | failed | stopped
    reason: str = ""
    tools: list[Any] = field(default_factory=list)  # mcp.types.Tool
    client: Any = None
    task: asyncio.Task[None] | None = None
    wake: asyncio.Event | None = None
    stop_requested: bool = False
    relist: bool = False
    timed_out: bool = False
    errlog: IO[str] | None = None
    #: the last HTTP error status seen (the SDK reports a 401 only as "Server returned an error response")
    http_error: str = ""

    def stderr_tail(self) -> str:
        """The last non-empty line the server wrote to stderr (its traceback's last line, usually)."""
        if self.errlog is None:
            return ""
        try:
            self.errlog.flush()
            self.errlog.seek(0)
            lines = [ln.strip() for ln in self.errlog.read()[-4000:].splitlines() if ln.strip()]
        except (OSError, ValueError):
            return ""
        return lines[-1] if lines else ""


class InFlight:
    """One call's cancellation, made by the caller before the request goes to the loop thread, so a kernel
    interrupt landing at any instant (even inside the hand-over, before the caller holds the call's future)
    can still cancel it. Both methods run on the loop thread (the caller schedules :meth:`cancel` there, after
    the hand-over), so they need no lock."""

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None
        self.cancelled = False

    def begin(self, task: asyncio.Task[Any] | None) -> bool:
        """The call's task starts; False when the call was cancelled already (then nothing is sent)."""
        self.task = task
        return not self.cancelled

    def cancel(self) -> None:
        """Cancel the call: a request sent is cancelled (the SDK tells the server); one not sent never is."""
        self.cancelled = True
        if self.task is not None:
            self.task.cancel()


class SessionHost:
    """The loop-thread half of :class:`~.client.McpManager` (a base class; the manager supplies these)."""

    _cond: threading.Condition
    start_timeout_s: float
    protocol: str
    root: Path

    def _fail(self, entry: Server, reason: str, *, starting: bool, raw: bool = False) -> None:
        raise NotImplementedError

    def _request_stop(self, entry: Server) -> None:
        raise NotImplementedError

    async def _acall(self, entry: Server, tool: str, args: dict[str, Any], report: Any, flight: InFlight) -> Any:
        if not flight.begin(asyncio.current_task()):
            raise asyncio.CancelledError  # interrupted while the request was being handed over: never sent

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            with contextlib.suppress(Exception):  # the live view's trouble must not fail the call
                report(entry.config.redact(progress_text(progress, total, message)))

        try:
            return await entry.client.call_tool(tool, args, progress_callback=on_progress if report else None)
        except Exception as exc:  # a server's failure is the call's result; the connection's kind is sorted below
            if is_connection_error(exc):
                tail = entry.stderr_tail()
                with self._cond:
                    self._fail(entry, why(exc) + (f" ({tail})" if tail else ""), starting=False)
                self._request_stop(entry)
                raise ToolError(
                    f"MCP server '{entry.config.name}' went away during the call: {why(exc, entry.config.redact)}"
                ) from exc
            raise ToolError(f"MCP server '{entry.config.name}': {entry.config.redact(_reason(entry, exc))}") from exc

    async def _supervise(self, entry: Server) -> None:
        entry.wake = asyncio.Event()
        if entry.stop_requested:
            return
        entry.task = asyncio.current_task()
        timer = asyncio.get_running_loop().call_later(self.start_timeout_s, self._start_timeout, entry)
        try:
            await self._serve(entry, timer)
        except asyncio.CancelledError:
            if not entry.timed_out:
                raise
        except BaseException as exc:
            tail = entry.stderr_tail()
            with self._cond:
                self._fail(
                    entry,
                    _reason(entry, exc) + (f"; stderr: {tail}" if tail else ""),
                    starting=entry.state == "starting",
                )
        finally:
            timer.cancel()
            with self._cond:
                if entry.state in ("starting", "ready"):
                    entry.state = "stopped"
                self._cond.notify_all()
            if entry.errlog is not None:
                entry.errlog.close()

    def _start_timeout(self, entry: Server) -> None:
        if entry.state == "starting" and entry.task is not None:
            entry.timed_out = True
            with self._cond:  # report now: unwinding the transport may take a few seconds more
                self._fail(entry, f"no answer within {self.start_timeout_s:g} s", starting=True)
            entry.task.cancel()

    async def _serve(self, entry: Server, timer: asyncio.TimerHandle) -> None:
        import mcp_types
        from mcp import Client

        from ..version import VERSION

        def on_eof() -> None:
            if entry.stop_requested:
                return
            tail = entry.stderr_tail()
            with self._cond:
                self._fail(
                    entry,
                    "the server closed the connection" + (f" ({tail})" if tail else ""),
                    starting=entry.state == "starting",
                )
            entry.stop_requested = True
            if entry.wake is not None:
                entry.wake.set()

        async def on_message(message: Any) -> None:
            if isinstance(message, mcp_types.ToolListChangedNotification) and entry.wake is not None:
                entry.relist = True
                entry.wake.set()

        async with AsyncExitStack() as stack:
            transport = await self._transport(entry, stack, on_eof)
            client = Client(
                transport,
                mode=self.protocol,
                cache=None,
                message_handler=on_message,
                client_info=mcp_types.Implementation(name="shiro-kernel", version=VERSION),
            )
            await stack.enter_async_context(client)
            tools = await _list_tools(client)
            timer.cancel()
            with self._cond:
                if entry.state != "starting":
                    return
                entry.client, entry.tools, entry.state = client, tools, "ready"
                self._cond.notify_all()
            assert entry.wake is not None
            watcher = asyncio.create_task(_watch_tool_changes(entry, client))
            try:
                while not entry.stop_requested:
                    await entry.wake.wait()
                    entry.wake.clear()
                    if entry.relist and not entry.stop_requested:
                        entry.relist = False
                        try:
                            fresh = await _list_tools(client)
                        except (
                            Exception
                        ) as exc:  # a server's failure to relist keeps the old list; a dead connection is sorted below
                            if is_connection_error(exc):
                                raise
                            continue  # a refused re-list keeps the tools we had
                        with self._cond:
                            entry.tools = fresh
            finally:  # the listen stream must end (in its own task) before the session does
                watcher.cancel()
                await asyncio.wait([watcher], timeout=2)

    async def _transport(self, entry: Server, stack: AsyncExitStack, on_eof: Any) -> Any:
        cfg = entry.config
        if cfg.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            # outlives this function: closed in _supervise's finally, after the server has stopped
            entry.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            cwd = Path(cfg.cwd) if cfg.cwd else self.root
            params = StdioServerParameters(
                command=cfg.command,
                args=list(cfg.args),
                env=dict(cfg.env) or None,
                cwd=str(cwd if cwd.is_absolute() else self.root / cwd),
            )
            inner = stdio_client(params, errlog=entry.errlog)
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            assert cfg.url is not None

            async def on_response(response: Any) -> None:
                if response.status_code >= 400:
                    entry.http_error = f"HTTP {response.status_code} {response.reason_phrase or ''}".strip()

            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=dict(cfg.headers),
                    timeout=httpx2.Timeout(30.0, read=300.0),
                    event_hooks={"response": [on_response]},
                )
            )
            inner = streamable_http_client(cfg.url, http_client=http)
        return _Watched(inner, on_eof)

    async def _stop_all(self, entries: list[Server], timeout: float) -> None:
        tasks = []
        for entry in entries:
            entry.stop_requested = True
            if entry.wake is not None:
                entry.wake.set()
            if entry.task is not None and not entry.task.done():
                tasks.append(entry.task)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:  # stuck in a handshake: cancelling still unwinds the transport (kills it)
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=3)


class _Watched:
    """A Transport (async context manager) that wraps the inner one's read stream in a watcher."""

    def __init__(self, inner: Any, on_eof: Any) -> None:
        self._inner = inner
        self._on_eof = on_eof

    async def __aenter__(self) -> tuple[Any, Any]:
        read, write = await self._inner.__aenter__()
        return WatchedReadStream(read, self._on_eof), write

    async def __aexit__(self, *exc: object) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result


def _reason(entry: Server, exc: BaseException) -> str:
    """``why(exc)``, with the HTTP status when the SDK hid it behind a generic message."""
    reason = why(exc)
    if entry.http_error and "error response" in reason:
        reason, entry.http_error = entry.http_error, ""
    return reason


async def _watch_tool_changes(entry: Server, client: Any) -> None:
    """On a 2026-07-28 connection, change notifications come only through ``subscriptions/listen``
    (older connections deliver ``notifications/tools/list_changed`` to the message handler)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return
    with contextlib.suppress(Exception):  # a server that does not support listening just never tells us
        async with client.listen(tools_list_changed=True) as subscription:
            async for _event in subscription:
                entry.relist = True
                if entry.wake is not None:
                    entry.wake.set()


async def _list_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends cannot hang a start
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools
