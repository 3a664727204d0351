"""The MCP server side: the live kernel's own tools offered to other agents (Claude Code, Codex, ...).

:class:`McpKernelServer` serves a fixed subset of shiro's tools over streamable HTTP on 127.0.0.1 (a free
port), guarded by a random bearer token. Its HTTP server runs on its own loop thread; each tool call is
handed to ``run_on_main`` (the agent passes a function that runs the job on the kernel's main thread
between cells and waits), so the kernel stays responsive and the user's namespace is only touched from
the thread that owns it.

Invariants:

* Every HTTP request without ``Authorization: Bearer <token>`` (compared in constant time) gets 401 before
  any MCP code sees it; the SDK's DNS-rebinding protection (Host/Origin must be localhost) stays on.
* Only the tools that say they are served (``Tool.served``, a place in the list) are exposed, in that order,
  whichever of them the given dict has; a tool asked about before it
  runs (``Tool.needs_approval``, from its declared effect) runs only when ``approve(client_name, call)`` says
  yes, reading tools run directly (the same rule the notebook agent follows with ``approval = "ask"``).
* Every call, approved or not, is reported to ``on_call(client_name, tool_name, args, result_text)`` so the
  session records what the other agent did. ``client_name`` comes from the MCP ``initialize`` clientInfo.
* ``mcp``, ``uvicorn`` and ``starlette`` are imported only by :meth:`McpKernelServer.start`.
* The token is in :meth:`McpKernelServer.token_file_text` only (the caller writes it to a private file);
  :meth:`McpKernelServer.config_text`, which the cell shows, points at that file and never holds it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import itertools
import json
import os
import secrets
import shlex
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from ..tools import Image, Tool, ToolContext, ToolOutput, run_tool
from ..transcript import ToolCallPart
from ._runtime import LoopThread

T = TypeVar("T")

PATH = "/mcp"
INSTRUCTIONS = (
    "These tools act on a live Jupyter kernel that a person is using right now: `python` runs code in "
    "their namespace (variables persist between calls and are visible to them), `inspect` lists "
    "variables, `notebook_read` shows the notebook. Calls run between the user's cells."
)


def served(tools: dict[str, Tool]) -> dict[str, Tool]:
    """The tools another agent may use (those that say so: ``Tool.served``), at the places they say."""
    offered = sorted((t.served, n) for n, t in tools.items() if t.served is not None)
    return {name: tools[name] for _, name in offered}


@dataclass(frozen=True)
class ServeInfo:
    url: str
    token: str


class McpKernelServer:
    """Serve ``tools`` (the agent's own) to MCP clients. ``start()`` → url and token; ``stop()`` ends it."""

    def __init__(
        self,
        tools: dict[str, Tool],
        ctx_factory: Callable[[], ToolContext],
        run_on_main: Callable[[Callable[[], Any]], Any],
        approve: Callable[[str, ToolCallPart], bool],
        on_call: Callable[[str, str, dict[str, Any], str], None],
        *,
        host: str = "127.0.0.1",
        name: str = "shiro",
    ) -> None:
        self.tools = served(tools)
        self.ctx_factory = ctx_factory
        self.run_on_main = run_on_main
        self.approve = approve
        self.on_call = on_call
        self.host = host
        self.name = name
        self.info: ServeInfo | None = None
        self._loop: LoopThread | None = None
        self._uvicorn: Any = None
        self._task: Any = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self.info is not None

    def start(self, timeout: float = 15.0) -> ServeInfo:
        """Bind a free port on 127.0.0.1 and serve; returns at once if already running."""
        with self._lock:
            if self.info is not None:
                return self.info
            import uvicorn

            token = secrets.token_urlsafe(32)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, 0))
            port = sock.getsockname()[1]
            app = _BearerAuth(self._app(), token)
            # log_config=None: uvicorn must not reconfigure the kernel's logging
            config = uvicorn.Config(
                app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=1, log_level="warning"
            )
            server = uvicorn.Server(config)
            loop = LoopThread("shiro-mcp-server")
            self._task = loop.submit(server.serve(sockets=[sock]))
            try:
                _wait_started(server, self._task, timeout)
            except BaseException:
                server.should_exit = True
                loop.stop()
                sock.close()
                raise
            self._loop, self._uvicorn = loop, server
            self.info = ServeInfo(f"http://{self.host}:{port}{PATH}", token)
            return self.info

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            server, loop, task = self._uvicorn, self._loop, self._task
            self._uvicorn = self._loop = self._task = None
            self.info = None
        if server is None or loop is None:
            return
        server.should_exit = True
        with contextlib.suppress(Exception):  # stopping must not fail
            task.result(timeout)
        loop.stop(timeout)

    def config_text(self, token_file: Path | None = None) -> str:
        """What ``/mcp serve`` shows in the cell: the URL, where the token is, and commands that read the token
        from ``token_file`` (see :meth:`token_file_text`). It never contains the token: a cell's output is
        saved in the notebook and read back to the model by ``notebook_read``."""
        if self.info is None:
            return "The MCP server is not running; start it with %shiro /mcp serve."
        url = self.info.url
        where = str(token_file) if token_file is not None else "(not written)"
        source = f"source {shlex.quote(where)} && "
        entry = json.dumps(
            {
                "mcpServers": {
                    self.name: {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${SHIRO_MCP_TOKEN}"}}
                }
            },
            indent=2,
        )
        return "\n".join(
            [
                f"MCP server for this kernel: {url}",
                f"Bearer token: in {where} (readable only by you; never shown here, so it is not saved in the notebook)",
                f"Tools: {', '.join(self.tools) or '(none)'}",
                "",
                "Claude Code (in a terminal):",
                f'  {source}claude mcp add --transport http {self.name} {url} --header "Authorization: Bearer $SHIRO_MCP_TOKEN"',
                "",
                "Codex CLI (it reads SHIRO_MCP_TOKEN whenever it runs: source the file in that shell too):",
                f"  {source}codex mcp add {self.name} --url {url} --bearer-token-env-var SHIRO_MCP_TOKEN",
                "",
                ".mcp.json entry (SHIRO_MCP_TOKEN set in the environment of the agent that reads it):",
                *("  " + line for line in entry.splitlines()),
                "",
                "The file also has these with the token written out. It is valid until %shiro /mcp stop or the kernel "
                "ends (the file is deleted then); anyone with it can run code here.",
            ]
        )

    def token_file_text(self) -> str:
        """The token file's content: shell ``export`` lines (``source`` it; dotenv reads them too), then the
        ready-to-paste commands with the token written out, as comments."""
        if self.info is None:
            return ""
        url, token = self.info.url, self.info.token
        entry = json.dumps(
            {"mcpServers": {self.name: {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}}}
        )
        return "\n".join(
            [
                f"# shiro_kernel: %shiro /mcp serve of the kernel with pid {os.getpid()}. Anyone with this token can",
                "# run code in that kernel; it stops working (and this file is deleted) at %shiro /mcp stop.",
                f"export SHIRO_MCP_URL={url}",
                f"export SHIRO_MCP_TOKEN={token}",
                "#",
                "# Claude Code:",
                f'#   claude mcp add --transport http {self.name} {url} --header "Authorization: Bearer {token}"',
                "# Codex CLI (~/.codex/config.toml reads the token from SHIRO_MCP_TOKEN):",
                f"#   export SHIRO_MCP_TOKEN={token}",
                f"#   codex mcp add {self.name} --url {url} --bearer-token-env-var SHIRO_MCP_TOKEN",
                f"#   [mcp_servers.{self.name}]",
                f'#   url = "{url}"',
                '#   bearer_token_env_var = "SHIRO_MCP_TOKEN"',
                "# .mcp.json entry:",
                f"#   {entry}",
                "",
            ]
        )

    # -- the MCP application ------------------------------------------------------------------
    def _app(self) -> Any:
        import mcp_types as types
        from mcp.server.lowlevel.server import Server

        async def list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(
                tools=[
                    types.Tool(
                        name=t.name,
                        description=t.description,
                        input_schema=t.parameters,
                        annotations=types.ToolAnnotations(
                            read_only_hint=not t.changes, destructive_hint=t.changes or None
                        ),
                    )
                    for t in self.tools.values()
                ]
            )

        async def call_tool(ctx: Any, params: Any) -> Any:
            client = _client_name(ctx)
            args = dict(params.arguments or {})
            text, is_error, images = await self._call(client, params.name, args, ctx)
            content: list[Any] = [types.TextContent(type="text", text=text)]
            content += [
                types.ImageContent(type="image", data=base64.b64encode(i.data).decode(), mime_type=i.mime)
                for i in images
            ]
            return types.CallToolResult(content=content, is_error=is_error)

        server: Any = Server(self.name, instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool)
        return server.streamable_http_app(streamable_http_path=PATH, host=self.host)

    async def _call(self, client: str, name: str, args: dict[str, Any], mcp_ctx: Any) -> tuple[str, bool, list[Image]]:
        call = ToolCallPart(f"mcp_{uuid.uuid4().hex[:12]}", name, json.dumps(args, ensure_ascii=False))
        tool = self.tools.get(name)
        loop = asyncio.get_running_loop()
        abort = threading.Event()
        images: list[Image] = []
        if tool is None:
            text, is_error = f"Error: unknown tool {name!r}; available: {', '.join(self.tools)}", True
        elif tool.needs_approval and not await asyncio.to_thread(self._approved, client, call):
            text, is_error = f"Error: not approved: the notebook's user did not allow {client} to run {name}.", True
        else:
            steps = itertools.count(1)  # the spec wants progress values to increase

            def progress(line: str) -> None:  # from the main thread: hop onto this loop to notify the client
                sent = asyncio.run_coroutine_threadsafe(mcp_ctx.session.report_progress(next(steps), None, line), loop)
                with contextlib.suppress(Exception):  # wait briefly so notifications arrive before the result
                    sent.result(timeout=2)

            ctx = replace(self.ctx_factory(), abort=abort, progress=progress)

            def capture(args: dict[str, Any], ctx: ToolContext) -> str | ToolOutput:
                assert tool is not None
                output = tool.run(args, ctx)
                if isinstance(output, ToolOutput):  # figures go to the client as images, like to our model
                    images.extend(output.images)
                return output

            def job() -> tuple[str, bool]:
                # run_tool for its argument checks and Error: texts; the wrapper only keeps the images
                part = run_tool({name: replace(tool, run=capture)}, call, ctx)
                return part.output, part.is_error

            try:
                text, is_error = await asyncio.to_thread(self.run_on_main, job)
            except asyncio.CancelledError:
                abort.set()  # the client cancelled: tell the running tool to give up early
                raise
            except Exception as exc:  # whatever the kernel raised is the call's error result for the client
                text, is_error = f"Error: the kernel could not run the call: {type(exc).__name__}: {exc}", True
        with contextlib.suppress(Exception):  # recording must not change the result the client gets
            await asyncio.to_thread(self.on_call, client, name, args, text)
        return text, is_error, images

    def _approved(self, client: str, call: ToolCallPart) -> bool:
        try:
            return bool(self.approve(client, call))
        except Exception:  # an approver that fails refuses
            return False


class _BearerAuth:
    """ASGI middleware: 401 unless ``Authorization: Bearer <token>``; lifespan passes through."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                body = b'{"error": "unauthorized", "error_description": "missing or wrong bearer token"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="shiro"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _client_name(ctx: Any) -> str:
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", None)
    version = getattr(info, "version", None)
    if not name:
        return "an MCP client"
    return f"{name} {version}".strip() if version else str(name)


def _wait_started(server: Any, task: Any, timeout: float) -> None:
    """Wait for uvicorn's ``started`` flag; surface its startup error instead of hanging."""
    import time

    deadline = time.monotonic() + timeout
    while not server.started:
        if task.done():
            task.result()  # raises the startup error
            raise RuntimeError("the MCP server stopped while starting")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the MCP server did not start within {timeout:g} s")
        time.sleep(0.01)
