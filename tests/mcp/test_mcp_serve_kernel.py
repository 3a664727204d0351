"""``%shiro /mcp serve`` in a real kernel (jupyter_client), reached by the official SDK client: another
agent inspects a DataFrame made in an earlier cell, runs code whose variable the next cell sees, and the
notebook's own agent is told what it did."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx2
from fakeopenai import Call, Reply
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
        where = re.search(r"Bearer token: in (\S+) \(readable only by you", shown)
        assert url and where, shown
        token_file = Path(where.group(1))
        assert token_file.parent == tmp_path / "home" / "mcp" and token_file.name.endswith(".env")
        assert token_file.stat().st_mode & 0o777 == 0o600 and token_file.parent.stat().st_mode & 0o777 == 0o700
        token = re.search(r"^export SHIRO_MCP_TOKEN=(\S+)$", token_file.read_text(), re.M)
        assert token, token_file.read_text()
        url_s, token_s = url.group(1), token.group(1)
        # the cell shows where the token is and commands that read it from there, never the token itself
        assert token_s not in shown and len(token_s) >= 40
        assert f"source {token_file} && claude mcp add --transport http shiro {url_s}" in shown
        assert '"Bearer ${SHIRO_MCP_TOKEN}"' in shown and token_s not in kernel.run("%shiro /mcp")

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

        # a tool result that prints the token (the model reading the file) reaches the model redacted
        fake_openai.enqueue(
            Reply(tool_calls=[Call("python", {"code": f"print(open({str(token_file)!r}).read())"})]),
            Reply(text="It holds a redacted token."),
        )
        turn = kernel.run("%shiro --wait what is in the token file?")
        sent = json.dumps(fake_openai.requests[-1].body)
        assert "export SHIRO_MCP_TOKEN=[redacted:SHIRO_MCP_TOKEN]" in sent and token_s not in sent
        assert token_s not in turn and "It holds a redacted token." in turn

        assert "Stopped the MCP server" in kernel.run("%shiro /mcp stop")
        assert not token_file.exists()  # the token died with the server, and its file with it
        # nothing shiro keeps holds it: the session record has the redacted tool result
        kept = [f for f in (tmp_path / "home").rglob("*") if f.is_file() and token_s in f.read_text(errors="replace")]
        assert kept == [] and "[redacted:SHIRO_MCP_TOKEN]" in "".join(
            f.read_text() for f in (tmp_path / "home" / "sessions").glob("*.json")
        )
        try:
            gone = httpx2.post(url_s, json=probe, headers={"Authorization": f"Bearer {token_s}"}, timeout=3)
            assert gone.status_code >= 400
        except httpx2.HTTPError:
            pass  # nothing listens there any more
    finally:
        kernel.close()
