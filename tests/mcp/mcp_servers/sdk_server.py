"""A real MCP server written with the official SDK, for the MCP tests.

    python sdk_server.py            # stdio
    python sdk_server.py --http     # streamable HTTP on 127.0.0.1:<free port>; prints "PORT <n>" first

Tools: ``echo`` (readOnlyHint), ``greet`` (an optional argument), ``slow`` (progress, honours
cancellation and records it in $MCP_TEST_MARKERS), ``progress``, ``image``, ``fail`` (isError),
``crash`` (kills the server), ``resources`` (links and embedded resources), ``getenv``, ``odd_schema``
(a schema full of things OpenAI refuses), ``add_tool`` (changes the list and notifies) and one tool
with a very long name.
"""

from __future__ import annotations

import base64
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

# a real 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
LONG_NAME = "summarise_the_quarterly_revenue_table_for_every_region_in_detail"  # 64 chars alone

ODD_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "Point": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
        }
    },
    "properties": {
        "where": {"$ref": "#/$defs/Point", "description": "a point"},
        "tags": {"type": "array", "description": "no items given"},
        "meta": {"type": "object", "description": "free-form, no properties"},
        "url": {"type": "string", "format": "uri", "default": "https://example.org"},
        "mode": {"oneOf": [{"const": "fast"}, {"const": "slow"}]},
        "both": {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ]
        },
        "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "anything": True,
    },
    "required": ["where"],
}


def tool(
    name: str,
    description: str,
    properties: dict[str, Any] | None = None,
    required: list[str] | None = None,
    read_only: bool = False,
) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = required
    annotations = types.ToolAnnotations(read_only_hint=True) if read_only else None
    return types.Tool(name=name, description=description, input_schema=schema, annotations=annotations)


TOOLS = [
    tool("echo", "Echo the text back.", {"text": {"type": "string"}}, ["text"], read_only=True),
    tool("greet", "Greet someone.", {"name": {"type": "string"}, "punctuation": {"type": "string"}}, ["name"]),
    tool("slow", "Sleep, reporting progress every 0.1 s.", {"seconds": {"type": "number"}}, ["seconds"]),
    tool("progress", "Report progress, then finish.", {"steps": {"type": "integer"}}, ["steps"]),
    tool("image", "Return a 1x1 PNG."),
    tool("fail", "Always fails."),
    tool("crash", "Kills this server."),
    tool("resources", "Return resource links and embedded resources."),
    tool("getenv", "Read an environment variable of the server.", {"name": {"type": "string"}}, ["name"]),
    types.Tool(name="odd_schema", description="Takes a strange schema.", input_schema=ODD_SCHEMA),
    tool(LONG_NAME, "A tool whose name is already 64 characters long."),
    tool("add_tool", "Add a tool named 'added' and tell the client the list changed."),
]


def text(value: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)])


def marker(name: str) -> None:
    folder = os.environ.get("MCP_TEST_MARKERS")
    if folder:
        Path(folder, name).write_text("1")


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    name = params.name
    if name == "echo":
        return text(str(args["text"]))
    if name == "greet":
        punctuation = args.get("punctuation", "!")
        return text(f"Hello, {args['name']}{punctuation} (arguments: {', '.join(sorted(args))})")
    if name == "slow":
        try:
            steps = int(float(args["seconds"]) * 10)
            for i in range(steps):
                await ctx.session.report_progress(i + 1, steps, "sleeping")
                await anyio.sleep(0.1)
        except anyio.get_cancelled_exc_class():
            marker("cancelled-slow")
            raise
        return text("slept")
    if name == "progress":
        steps = int(args["steps"])
        for i in range(steps):
            await ctx.session.report_progress(i + 1, steps, f"step {i + 1}")
            await anyio.sleep(0.02)
        return text("done")
    if name == "image":
        data = base64.b64encode(PNG).decode()
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="a tiny image"),
                types.ImageContent(type="image", data=data, mime_type="image/png"),
            ]
        )
    if name == "fail":
        return types.CallToolResult(content=[types.TextContent(type="text", text="the disk is on fire")], is_error=True)
    if name == "crash":
        sys.stderr.write("fatal: simulated crash\n")
        sys.stderr.flush()
        os._exit(3)
    if name == "resources":
        return types.CallToolResult(
            content=[
                types.ResourceLink(
                    type="resource_link",
                    name="report",
                    uri="file:///tmp/report.csv",
                    mime_type="text/csv",
                    description="the full report",
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri="memo://note", mime_type="text/plain", text="remember the milk"
                    ),
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.BlobResourceContents(
                        uri="memo://pic", mime_type="image/png", blob=base64.b64encode(PNG).decode()
                    ),
                ),
            ]
        )
    if name == "getenv":
        return text(os.environ.get(str(args["name"]), "(unset)"))
    if name == "odd_schema":
        return text(f"got {sorted(args)}")
    if name == "add_tool":
        TOOLS.append(tool("added", "Added at run time.", read_only=True))
        await ctx.session.send_tool_list_changed()
        return text("added")
    if name == "added":
        return text("the added tool works")
    if name == LONG_NAME:
        return text("long name works")
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"unknown tool {name}")], is_error=True)


server = Server("shiro-test-server", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main_stdio() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def main_http() -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    app = server.streamable_http_app(streamable_http_path="/mcp")
    config = uvicorn.Config(app, log_config=None, access_log=False, log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    anyio.run(main_http if "--http" in sys.argv else main_stdio)
