"""Real kernels for tests (importable as ``kernelutil``: tests/ is on sys.path): start an IPython kernel
with its own environment through ``jupyter_client``, run cells in it, read what they showed; run a whole
notebook headless with nbclient."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook


def output_text(msg: dict[str, Any]) -> str:
    """The text of one IOPub output message ('' for anything else)."""
    kind, content = msg["msg_type"], msg["content"]
    if kind == "stream":
        return str(content["text"])
    if kind in ("display_data", "update_display_data", "execute_result"):
        data = content.get("data", {})
        return str(data.get("text/plain", ""))
    if kind == "error":
        return "\n".join(content.get("traceback", [])) or f"{content.get('ename')}: {content.get('evalue')}"
    return ""


class Kernel:
    """One running ``python3`` kernel with ``env`` added to the test's environment (the notebook it
    serves is ``JPY_SESSION_NAME``, as JupyterLab sets it)."""

    def __init__(self, env: dict[str, str], cwd: str | None = None) -> None:
        self.km, self.kc = start_new_kernel(
            kernel_name="python3", startup_timeout=60, env={**os.environ, **env}, cwd=cwd or os.getcwd()
        )

    def run(self, code: str, timeout: float = 90) -> str:
        """Run one cell; everything it showed, as text (display updates included, in order)."""
        chunks: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            text = output_text(msg)
            if text:
                chunks.append(text)

        reply = self.kc.execute_interactive(code, timeout=timeout, output_hook=hook, allow_stdin=False)
        if reply["content"]["status"] != "ok":
            chunks.append(f"[cell status {reply['content']['status']}]")
        return "\n".join(chunks)

    def close(self) -> None:
        """Shut the kernel down gracefully (its atexit handlers run: a final autosave)."""
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=False)

    def kill(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


#: the key the nbclient tests give their kernels (it must never appear in a saved notebook)
NOTEBOOK_KEY = "sk-test-NOTEBOOKKEY-never-in-outputs-42"


def run_notebook(path: Path, sources: list[str], env: dict[str, str]) -> nbformat.NotebookNode:
    """Write a notebook of ``sources`` to ``path``, run it headless with nbclient (the kernel told its path
    as JupyterLab tells it) with ``env`` added, save it and return it."""
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    client = NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute(env={**os.environ, **env, "JPY_SESSION_NAME": str(path)})
    nbformat.write(nb, path)
    return nb


def outputs_text(cell: Any) -> str:
    """What a saved cell shows, as text: streams, Markdown and plain text of displays, tracebacks."""
    chunks = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            chunks.append(out["text"])
        elif "data" in out:
            chunks.append(out["data"].get("text/markdown", "") + out["data"].get("text/plain", ""))
        elif out.get("output_type") == "error":
            chunks.append("\n".join(out.get("traceback", [])))
    return "\n".join(chunks)


def tool_output(request: Any) -> str:
    """The newest tool result a recorded request sent to the model (either API)."""
    body = request.body
    items = body.get("input") or body.get("messages")
    outs = [
        i.get("output") or i.get("content")
        for i in items
        if i.get("type") == "function_call_output" or i.get("role") == "tool"
    ]
    return outs[-1] if outs else ""


def state_of(request: Any) -> str:
    """The per-step state message a recorded request ended with (the task list, cell changes, a restart's
    lost variables): the last item of ``input`` (Responses) or ``messages`` (Chat) when it is a system
    message; '' when the request has none."""
    items = request.body.get("input") or request.body.get("messages") or []
    last = items[-1] if items else {}
    return str(last.get("content") or "") if isinstance(last, dict) and last.get("role") == "system" else ""


def write_cells(path: Path, sources: list[str]) -> None:
    """``path`` as a saved notebook whose code cells ``sources`` have all run once (ids ``c0``, ``c1`` …), the
    plain JSON a front end writes: what the cell-change check reads between turns."""
    nb = {
        "cells": [
            {"cell_type": "code", "id": f"c{i}", "metadata": {}, "source": s, "outputs": [], "execution_count": i}
            for i, s in enumerate(sources)
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


def run_line(shell: Any, source: str) -> str:
    """Run ``source`` in an in-process shell; what it printed and displayed as text."""
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        shell.run_cell(source)
    return cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)


def agent_of(shell: Any) -> Any:
    """The agent of a shell that loaded the extension."""
    return shell.magics_manager.registry["ShiroMagics"].agent
