"""Issue 23 (points 2, 4, 5) in real kernels: notebooks run headless by nbclient against the fake OpenAI
server, saved, and read back as a user (or a reviewer of the repository) would see them."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import nbformat
from fakeopenai import Call, Reply
from faultlog import record
from mcp_testutil import PY, SDK_SERVER
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook


def run_notebook(path: Path, sources: list[str], env: dict[str, str]) -> Any:
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute(env={**os.environ, **env, "JPY_SESSION_NAME": str(path)})
    nbformat.write(nb, path)
    return nb


def text_of(cell: Any) -> str:
    chunks = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            chunks.append(out["text"])
        elif "data" in out:
            chunks.append(out["data"].get("text/plain", ""))
        elif out.get("output_type") == "error":
            chunks.append("\n".join(out.get("traceback", [])))
    return "\n".join(chunks)


def outputs_sent(request: Any) -> list[str]:
    items = request.body.get("input") or []
    return [str(i.get("output")) for i in items if i.get("type") == "function_call_output"]


def test_a_clones_mcp_json_runs_nothing_until_allowed(fake_openai: Any, tmp_path: Path) -> None:
    marker = tmp_path / "the-repository-ran-this"
    script = f"touch {shlex.quote(str(marker))}; exec " + shlex.join([PY, SDK_SERVER])
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"sdk": {"command": "bash", "args": ["-c", script]}}})
    )
    fake_openai.enqueue(
        Reply(text="Hello."),
        Reply(tool_calls=[Call("mcp__sdk__echo", {"text": "I only read"})]),
        Reply(text="It was not approved."),
    )
    env = {
        "SHIRO_HOME": str(tmp_path / "home"),
        "OPENAI_API_KEY": "sk-test-consent-notebook",
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
    }
    nb = run_notebook(
        tmp_path / "clone.ipynb",
        [
            "%load_ext shiro_kernel",
            "%shiro --wait hello",
            f"import pathlib; print('ran:', pathlib.Path({str(marker)!r}).exists())",
            "%shiro /mcp",
            "%shiro /mcp allow sdk",
            f"print('ran:', pathlib.Path({str(marker)!r}).exists())",
            "%shiro --wait echo something",
        ],
        env,
    )
    cells = [text_of(c) for c in nb.cells]
    # the headless turn: nothing ran, one notice naming the server, what it would run, and the three ways
    assert "ran: False" in cells[2]
    assert "MCP server 'sdk' from " in cells[1] and "was not started: a repository's MCP servers run only" in cells[1]
    assert f"It would run: bash -c 'touch {marker}; exec " in cells[1]
    assert "%shiro /mcp allow sdk" in cells[1] and "shiro mcp allow sdk --project " in cells[1]
    assert "%config Shiro.mcp_servers" in cells[1]
    assert not [t for t in fake_openai.requests[0].body.get("tools", []) if t["name"].startswith("mcp__")]
    assert "not allowed yet (from .mcp.json): %shiro /mcp allow sdk starts it" in cells[3]
    # allowed: it starts (its command runs) and its tools are offered
    assert "allowed 'sdk' in " in cells[4] and "ready, 12 tools" in cells[4] and "ran: True" in cells[5]
    assert "mcp__sdk__echo" in [t["name"] for t in fake_openai.requests[1].body["tools"]]
    # its echo says readOnlyHint, but the repository's word is not taken: headless "ask" refuses it
    refused = outputs_sent(fake_openai.requests[2])
    assert len(refused) == 1 and refused[0].startswith("Error: not approved"), refused


def test_the_serve_token_is_not_in_the_saved_notebook(fake_openai: Any, tmp_path: Path) -> None:
    copy = tmp_path / "token-copy.env"
    code = (
        "import glob, os, shutil\n"
        "path = glob.glob(os.path.join(os.environ['SHIRO_HOME'], 'mcp', 'serve-*.env'))[0]\n"
        f"shutil.copy(path, {str(copy)!r})\n"
        "print('mode', oct(os.stat(path).st_mode & 0o777))\n"
        "print(open(path).read())"
    )
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": code})]), Reply(text="I read the token file."))
    env = {
        "SHIRO_HOME": str(tmp_path / "home"),
        "OPENAI_API_KEY": "sk-test-serve-notebook",
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
    }
    path = tmp_path / "served.ipynb"
    nb = run_notebook(
        path,
        [
            "%load_ext shiro_kernel",
            "%shiro /mcp serve",
            "%shiro /mcp",
            '%config Shiro.approval = "auto"',
            "%shiro --wait what is in the serve token file?",
        ],
        env,
    )
    saved = path.read_text()
    tokenish = re.findall(r"[A-Za-z0-9_-]{40,}", saved.replace("\\n", " "))
    # the turn's HTML anchors its tool rows by call id (shiro-call-call_…): an id, not a secret
    assert [t for t in tokenish if not t.startswith("shiro-call-")] == [], "a token-like string in the notebook"
    token = next(
        line.split("=", 1)[1] for line in copy.read_text().splitlines() if line.startswith("export SHIRO_MCP_TOKEN=")
    )
    assert len(token) >= 40
    serve = text_of(nb.cells[1])
    assert "Bearer token: in " in serve and "/home/mcp/serve-" in serve
    assert "Serving this kernel to other agents at http://127.0.0.1:" in text_of(nb.cells[2])
    assert "(bearer token in " in text_of(nb.cells[2])
    # the saved .ipynb (outputs, widget state, metadata) never holds the token
    assert token not in saved
    # the tool result that printed it reached the model (and the notebook) redacted, and said the file is 0600
    sent = outputs_sent(fake_openai.requests[1])
    assert len(sent) == 1 and "mode 0o600" in sent[0] and "[redacted:SHIRO_MCP_TOKEN]" in sent[0]
    assert token not in json.dumps([r.body for r in fake_openai.requests])
    assert "[redacted:SHIRO_MCP_TOKEN]" in saved
    # the kernel ended: the token file is gone, and nothing under SHIRO_HOME kept the token
    assert not list((tmp_path / "home" / "mcp").glob("serve-*.env"))
    kept = [f for f in (tmp_path / "home").rglob("*") if f.is_file() and token in f.read_text(errors="replace")]
    assert not kept
    record(
        "security: the `/mcp serve` bearer token (cell outputs, the saved .ipynb, requests to the model, SHIRO_HOME)",
        4,
        int(token in saved) + int(token in json.dumps([r.body for r in fake_openai.requests])) + len(kept),
        "0 copies anywhere (was 4–8 in the .ipynb); the token file is 0600 and deleted when the kernel ends; a "
        "tool result printing it reached the model as `[redacted:SHIRO_MCP_TOKEN]`",
    )
