"""Plumbing shared by the MCP client and server: a background asyncio loop thread, a read-stream
wrapper that notices a server going away, and one-line failure reasons.

Invariants:

* :class:`LoopThread` owns one event loop on one daemon thread; everything async (sessions, HTTP
  servers) lives there, so the kernel's main thread and its own loop are never blocked or touched.
  ``submit`` is the only way in from other threads.
* :func:`why` always returns a single line (≤ 300 chars) and never raises.
* Nothing here imports ``mcp`` at module level (``anyio`` is imported lazily too).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import Self

T = TypeVar("T")


class LoopThread:
    """A daemon thread running an asyncio loop until :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                for task in pending:
                    task.cancel()
                if pending:  # let cancelled tasks unwind (closing pipes, killing children) before closing
                    self.loop.run_until_complete(asyncio.wait(pending, timeout=3))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable[[], None]) -> None:
        self.loop.call_soon_threadsafe(fn)

    def stop(self, timeout: float = 5.0) -> None:
        if self.loop.is_closed():
            return
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # closed in between
            return
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)


class WatchedReadStream:
    """Wraps a transport's read stream and calls ``on_eof`` once when the peer closes it.

    That is how a stdio server dying between calls is noticed at once, not at the next call.
    """

    def __init__(self, inner: Any, on_eof: Callable[[], None]) -> None:
        self._inner = inner
        self._on_eof = on_eof
        self._fired = False

    def _eof(self) -> None:
        if not self._fired:
            self._fired = True
            self._on_eof()

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._eof()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # e.g. ``last_context``, read by the dispatcher
        return getattr(self._inner, name)


def leaf(exc: BaseException) -> BaseException:
    """The first meaningful exception inside (nested) exception groups."""
    # duck-typed: BaseExceptionGroup is not a builtin on Python 3.10 (anyio uses a backport there)
    while isinstance(group := getattr(exc, "exceptions", None), (list, tuple)) and group:
        inner = [e for e in group if not isinstance(e, (asyncio.CancelledError, GeneratorExit))]
        exc = (inner or list(group))[0]
    return exc


def is_connection_error(exc: BaseException) -> bool:
    """Does ``exc`` mean the server is gone (not just that this one request failed)?"""
    exc = leaf(exc)
    code = getattr(exc, "code", None)
    if type(exc).__name__ == "MCPError" and code == -32000:  # CONNECTION_CLOSED
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(
        names
        & {
            "ClosedResourceError",
            "BrokenResourceError",
            "EndOfStream",
            "ConnectionError",
            "BrokenPipeError",
            "ConnectError",
            "RemoteProtocolError",
            "ReadError",
            "WriteError",
        }
    )


def why(exc: BaseException, redact: Callable[[str], str] = lambda s: s) -> str:
    """A one-line reason, e.g. ``command not found: foo`` or ``HTTP 401 Unauthorized``."""
    try:
        exc = leaf(exc)
        name = type(exc).__name__
        if isinstance(exc, FileNotFoundError) and exc.filename:
            text = f"command not found: {exc.filename}"
        elif isinstance(exc, PermissionError) and exc.filename:
            text = f"permission denied running {exc.filename}"
        elif name == "MCPError" and getattr(exc, "code", None) == -32000:
            text = "the server closed the connection"
        elif name == "HTTPStatusError":
            response = getattr(exc, "response", None)
            status = getattr(response, "status_code", "?")
            reason = getattr(response, "reason_phrase", "") or ""
            text = f"HTTP {status} {reason}".strip()
        elif name == "ConnectError":
            text = f"cannot connect ({str(exc) or 'connection refused'})"
        else:
            message = str(exc).strip() or repr(exc)
            text = message if name in ("MCPError", "ToolError") else f"{name}: {message}"
        return one_line(redact(text))
    except Exception:  # describing an exception must never raise itself
        return "unknown error"


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
