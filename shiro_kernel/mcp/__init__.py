"""Model Context Protocol, both ways.

* Client (:class:`McpManager`): the user's MCP servers (``.mcp.json`` at the project root and
  ``Shiro.mcp_servers``) started off the main thread; their tools offered to the model as
  ``mcp__<server>__<tool>`` shiro :class:`~shiro_kernel.tools.base.Tool` objects.
* Server (:class:`McpKernelServer`): the live kernel's own tools served to other agents over
  streamable HTTP on 127.0.0.1 with a bearer token.

Invariant: importing this package (or any name below) never imports the ``mcp`` SDK; it is imported
only when a server is started or served, so ``%load_ext shiro_kernel`` stays as fast as without MCP.
Names are resolved lazily for the same reason (the client and server modules are small, but keeping
the package import trivial costs nothing).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import McpManager, ServerStatus
    from .config import McpConfigError, ServerConfig, load_config
    from .schema import openai_schema, tool_names
    from .server import McpKernelServer, ServeInfo, served

__all__ = [
    "McpConfigError",
    "McpKernelServer",
    "McpManager",
    "ServeInfo",
    "ServerConfig",
    "ServerStatus",
    "load_config",
    "openai_schema",
    "served",
    "tool_names",
]

_WHERE = {
    "McpManager": "client",
    "ServerStatus": "client",
    "McpConfigError": "config",
    "ServerConfig": "config",
    "load_config": "config",
    "openai_schema": "schema",
    "tool_names": "schema",
    "McpKernelServer": "server",
    "ServeInfo": "server",
    "served": "server",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
