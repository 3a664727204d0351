"""``%shiro /mcp serve`` in a real kernel (jupyter_client), reached by the official SDK client: another
agent inspects a DataFrame made in an earlier cell, runs code whose variable the next cell sees, and the
notebook's own agent is told what it did."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx2
from fakeopenai import Reply
from kernelutil import Kernel
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_testutil import run_async
from mcp_types import Implementation


def _connect(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    return Client(
        streamable_http_client(url, http_client=http), client_info=Implementation(name="test-agent", version="1.0")
    )


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_serve_the_live_kernel_to_another_agent(fake_openai: Any, tmp_path: Path) -> None:
    env = {
        "SHIRO_HOME": str(tmp_path / "home"),
        "OPENAI_API_KEY": "sk-test-serve",
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "JPY_SESSION_NAME": str(tmp_path / "served.ipynb"),
    }
    kernel = Kernel(env, cwd=str(tmp_path))
    try:
        kernel.run("%load_ext shiro_kernel")
        kernel.run("import pandas as pd\nsales = pd.DataFrame({'region': ['north', 'south'], 'units': [12, 30]})")
        shown = kernel.run("%shiro /mcp serve")
        url = re.search(r"MCP server for this kernel: (\S+)", shown)
        token = re.search(r"Bearer token: (\S+)", shown)
        assert url and token, shown
        assert "claude mcp add --transport http shiro" in shown and '"mcpServers"' in shown
        url_s, token_s = url.group(1), token.group(1)

        # a wrong token gets 401 before any MCP code runs
        probe = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        wrong = httpx2.post(url_s, json=probe, headers={"Authorization": "Bearer nope", "Accept": "application/json"})
        assert wrong.status_code == 401

        async def first() -> tuple[list[str], str, str]:
            async with _connect(url_s, token_s) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                seen = _text(await client.call_tool("inspect", {"names": ["sales"]}))
                refused = _text(await client.call_tool("python", {"code": "made_by_mcp = 41 + 1"}))
                return names, seen, refused

        names, seen, refused = run_async(first())
        assert names[:2] == ["python", "inspect"] and "shell" not in names and "recall" in names
        assert "sales" in seen and "DataFrame" in seen and "units" in seen, seen
        # headless kernel, approval "ask": nobody can click, so the mutating call is refused
        assert refused.startswith("Error: not approved"), refused
        assert "NameError" in kernel.run("made_by_mcp")

        kernel.run('%config Shiro.approval = "auto"')

        async def second() -> str:
            async with _connect(url_s, token_s) as client:
                return _text(await client.call_tool("python", {"code": "made_by_mcp = 41 + 1\nprint('set')"}))

        assert "set" in run_async(second())
        assert kernel.run("print(made_by_mcp * 2)").strip() == "84"  # the next cell sees it

        # the notebook's own agent is told what the other agent did
        fake_openai.enqueue(Reply(text="I see what test-agent did."))
        kernel.run("%shiro --wait what happened here?")
        sent = json.dumps(fake_openai.requests[-1].body)
        assert "test-agent 1.0 used this kernel through MCP: python(" in sent
        assert "made_by_mcp = 41 + 1" in sent and "inspect" in sent

        assert "Stopped the MCP server" in kernel.run("%shiro /mcp stop")
        try:
            gone = httpx2.post(url_s, json=probe, headers={"Authorization": f"Bearer {token_s}"}, timeout=3)
            assert gone.status_code >= 400
        except httpx2.HTTPError:
            pass  # nothing listens there any more
    finally:
        kernel.close()
