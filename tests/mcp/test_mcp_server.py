"""The kernel's own MCP server, reached with the official SDK client over streamable HTTP.

``run_on_main`` is a one-thread executor standing in for the kernel's main thread; tools are small fakes
with the real tools' names (the real ``python`` tool needs a live shell: the kernel-level test is the
agent's, once ``%shiro /mcp serve`` is wired).
"""

from __future__ import annotations

import base64
import concurrent.futures
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_testutil import run_async
from mcp_types import Implementation

from shiro_kernel.mcp import McpKernelServer
from shiro_kernel.mcp.server import served as served_tools
from shiro_kernel.tools import Effect, Image, Tool, ToolContext, ToolError, ToolOutput, Touches, all_tools
from shiro_kernel.tools.base import schema
from shiro_kernel.transcript import ToolCallPart

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@dataclass
class Kernel:
    """A stand-in for the kernel: a namespace, a 'main thread', an approval policy, a call log."""

    namespace: dict[str, Any] = field(default_factory=dict)
    main: concurrent.futures.ThreadPoolExecutor = field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kernel-main")
    )
    calls: list[tuple[str, str, dict[str, Any], str]] = field(default_factory=list)
    asked: list[tuple[str, str]] = field(default_factory=list)
    allow: bool = True

    def tools(self) -> dict[str, Tool]:
        def python(args: dict[str, Any], ctx: ToolContext) -> str:
            if ctx.progress:
                ctx.progress("running")
            exec(args["code"], self.namespace)
            return f"ok on {threading.current_thread().name}"

        def inspect(args: dict[str, Any], ctx: ToolContext) -> str:
            names = args.get("names") or sorted(k for k in self.namespace if not k.startswith("__"))
            return ", ".join(f"{n}={self.namespace[n]!r}" for n in names if n in self.namespace) or "(empty)"

        def grep(args: dict[str, Any], ctx: ToolContext) -> str:
            raise ToolError("no matches for " + args["pattern"])

        def notebook_read(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
            return ToolOutput("cell 1: a figure", images=[Image(PNG, "image/png")])

        return {
            "python": Tool(
                "python",
                "Run code in the user's namespace.",
                schema({"code": {"type": "string"}}),
                python,
                effects=Effect.NAMESPACE,
                touches=lambda a, c: Touches(code=a.get("code")),
                served=1,
            ),
            "inspect": Tool(
                "inspect",
                "List variables.",
                schema({"names": {"type": "array", "items": {"type": "string"}}}, optional=("names",)),
                inspect,
                effects=Effect.READS,
                served=2,
            ),
            "grep": Tool(
                "grep",
                "Search files.",
                schema({"pattern": {"type": "string"}}),
                grep,
                effects=Effect.READS,
                served=8,
            ),
            "notebook_read": Tool(
                "notebook_read", "Read the notebook.", schema({}), notebook_read, effects=Effect.READS, served=3
            ),
            "shell": Tool(
                "shell",
                "Run a shell command.",
                schema({"command": {"type": "string"}}),
                lambda a, c: "never",
                effects=Effect.FILES | Effect.OUTSIDE,
                touches=lambda a, c: Touches(why="a shell command"),  # not served: the server never offers it
            ),
        }

    def run_on_main(self, job: Any) -> Any:
        return self.main.submit(job).result()

    def approve(self, client: str, call: ToolCallPart) -> bool:
        self.asked.append((client, call.name))
        return self.allow

    def on_call(self, client: str, tool: str, args: dict[str, Any], text: str) -> None:
        self.calls.append((client, tool, args, text))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[McpKernelServer, Kernel]]:
    kernel = Kernel()
    server = McpKernelServer(
        kernel.tools(), lambda: ToolContext(root=tmp_path), kernel.run_on_main, kernel.approve, kernel.on_call
    )
    server.start()
    try:
        yield server, kernel
    finally:
        server.stop()
        kernel.main.shutdown()


def connect(url: str, token: str, mode: str = "auto") -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    return Client(
        streamable_http_client(url, http_client=http),
        mode=mode,
        client_info=Implementation(name="test-agent", version="1.0"),
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_sdk_client_lists_and_calls(served: tuple[McpKernelServer, Kernel], mode: str) -> None:
    server, kernel = served
    assert server.info is not None
    url, token = server.info.url, server.info.token
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp") and len(token) >= 40

    async def session() -> None:
        async with connect(url, token, mode) as client:
            listed = (await client.list_tools()).tools
            assert [t.name for t in listed] == ["python", "inspect", "notebook_read", "grep"]  # served order, no shell
            hints = {t.name: t.annotations.read_only_hint for t in listed if t.annotations}
            assert hints == {"python": False, "inspect": True, "notebook_read": True, "grep": True}
            reported: list[str | None] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                reported.append(message)

            made = await client.call_tool("python", {"code": "df_rows = 3 * 14"}, progress_callback=on_progress)
            assert not made.is_error and made.content[0].text == "ok on kernel-main_0"  # type: ignore[union-attr]
            assert reported == ["running"]
            seen = await client.call_tool("inspect", {"names": ["df_rows"]})
            assert seen.content[0].text == "df_rows=42"  # type: ignore[union-attr]
            failed = await client.call_tool("grep", {"pattern": "zzz"})
            assert failed.is_error and failed.content[0].text == "Error: no matches for zzz"  # type: ignore[union-attr]
            figure = await client.call_tool("notebook_read", {})
            assert [c.type for c in figure.content] == ["text", "image"]
            assert figure.content[1].mime_type == "image/png"  # type: ignore[union-attr]
            assert base64.b64decode(figure.content[1].data) == PNG  # type: ignore[union-attr]
            unknown = await client.call_tool("shell", {"command": "ls"})
            assert unknown.is_error and "unknown tool 'shell'" in unknown.content[0].text  # type: ignore[union-attr]

    run_async(session())
    assert kernel.namespace["df_rows"] == 42
    assert kernel.asked == [("test-agent 1.0", "python")]  # only the mutating tool asked for approval
    assert [t for c, t, _a, _r in kernel.calls] == ["python", "inspect", "grep", "notebook_read", "shell"]
    assert {c for c, _t, _a, _r in kernel.calls} == {"test-agent 1.0"}
    assert kernel.calls[0][2:] == ({"code": "df_rows = 3 * 14"}, "ok on kernel-main_0")


def test_denied_call_is_an_error_and_recorded(served: tuple[McpKernelServer, Kernel]) -> None:
    server, kernel = served
    kernel.allow = False
    assert server.info is not None

    async def session() -> Any:
        async with connect(server.info.url, server.info.token) as client:  # type: ignore[union-attr]
            return await client.call_tool("python", {"code": "boom = 1"})

    result = run_async(session())
    assert result.is_error
    assert result.content[0].text == (
        "Error: not approved: the notebook's user did not allow test-agent 1.0 to run python."
    )
    assert "boom" not in kernel.namespace
    assert kernel.calls[-1][1] == "python" and kernel.calls[-1][3].startswith("Error: not approved")


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": "Basic x"}])
def test_wrong_or_missing_token_is_401(served: tuple[McpKernelServer, Kernel], headers: dict[str, str]) -> None:
    server, kernel = served
    assert server.info is not None
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "python", "arguments": {"code": "x = 1"}},
    }
    response = httpx2.post(server.info.url, json=body, headers={**headers, "Accept": "application/json"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert kernel.calls == [] and "x" not in kernel.namespace

    async def session() -> None:
        async with connect(server.info.url, "not-the-token"):  # type: ignore[union-attr]
            pass

    with pytest.raises(Exception):
        run_async(session())


def test_config_text_and_stop(served: tuple[McpKernelServer, Kernel]) -> None:
    server, _ = served
    assert server.info is not None
    url, token = server.info.url, server.info.token
    where = Path("/home/u/.shiro-neko/mcp/serve-1-2.env")
    text = server.config_text(where)
    # what the cell shows: the file, and commands that read the token from it; never the token
    assert token not in text and f"Bearer token: in {where} (readable only by you" in text
    assert (
        f'source {where} && claude mcp add --transport http shiro {url} --header "Authorization: Bearer $SHIRO_MCP_TOKEN"'
        in text
    )
    assert f"source {where} && codex mcp add shiro --url {url} --bearer-token-env-var SHIRO_MCP_TOKEN" in text
    assert '"Authorization": "Bearer ${SHIRO_MCP_TOKEN}"' in text and '"type": "http"' in text
    # what the file holds: export lines to source, and the same commands with the token written out
    secret = server.token_file_text()
    assert f"\nexport SHIRO_MCP_TOKEN={token}\n" in secret and f"\nexport SHIRO_MCP_URL={url}\n" in secret
    assert f'#   claude mcp add --transport http shiro {url} --header "Authorization: Bearer {token}"' in secret
    assert f'"Authorization": "Bearer {token}"' in secret
    assert server.start() == server.info  # idempotent
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    server.stop()
    assert not server.running and "not running" in server.config_text()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    # it can start again, with a new token
    again = server.start()
    assert again.token != token


def test_served_subset() -> None:
    """The tools another agent may use are those that say so (``Tool.served``), at the places they say."""
    assert list(served_tools(all_tools())) == [
        "python",
        "inspect",
        "notebook_read",
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "grep",
        "recall",
        "memory_read",
        "todo_write",
    ]


def test_our_client_talks_to_our_server(served: tuple[McpKernelServer, Kernel], tmp_path: Path) -> None:
    """Both directions at once: the client manager connects to the kernel server; a wrong token is a
    clear failure (the HTTP status, not the SDK's generic message) and never shows the token."""
    from shiro_kernel.mcp import McpManager
    from shiro_kernel.mcp.config import parse_server

    server, kernel = served
    assert server.info is not None
    manager = McpManager(tmp_path)
    try:
        manager.configure(
            {
                "kernel": parse_server(
                    "kernel",
                    {
                        "type": "http",
                        "url": server.info.url,
                        "headers": {"Authorization": f"Bearer {server.info.token}"},
                    },
                ),
                "wrong": parse_server(
                    "wrong", {"url": server.info.url, "headers": {"Authorization": "Bearer nope-nope"}}
                ),
            }
        )
        assert manager.wait_ready(20)
        assert manager.drain_notices() == [
            ("MCP server 'wrong' failed to start: HTTP 401 Unauthorized. Its tools are not available.")
        ]
        tools = {t.name: t for t in manager.tools()}
        assert sorted(tools) == [
            "mcp__kernel__grep",
            "mcp__kernel__inspect",
            "mcp__kernel__notebook_read",
            "mcp__kernel__python",
        ]
        assert tools["mcp__kernel__python"].needs_approval and not tools["mcp__kernel__inspect"].changes
        ctx = ToolContext(root=tmp_path)
        assert tools["mcp__kernel__python"].run({"code": "z = 7"}, ctx) == "ok on kernel-main_0"
        assert tools["mcp__kernel__inspect"].run({"names": ["z"]}, ctx) == "z=7"
        with pytest.raises(ToolError, match="Error: no matches for q"):
            tools["mcp__kernel__grep"].run({"pattern": "q"}, ctx)
        assert kernel.calls[0][0] == "shiro-kernel 0.1.0"
        assert server.info.token not in manager.status_text()
    finally:
        manager.close()
