"""Helpers of the replay tests (importable as ``replayutil``): recorded turns as messages, turn bundles as a
live turn saves them, notebooks written as JSON, and a fresh IPython shell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shiro_kernel.rerun.replay_plan import replay_fields
from shiro_kernel.transcript import Message, TextPart, ToolCallPart, ToolResultPart

TURN_MIME = "application/vnd.shiro.turn+json"
HERE = Path(__file__).parent


def call(call_id: str, name: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(call_id, name, json.dumps(args))


def result(call_id: str, name: str, output: str, error: bool = False, refused: bool = False) -> ToolResultPart:
    return ToolResultPart(call_id, name, output, is_error=error or refused, refused=refused)


def turn(prompt: str, steps: list[tuple[ToolCallPart, ToolResultPart | None]], answer: str) -> list[Message]:
    """A recorded turn: the prompt, one assistant message and one tool message per call, then the answer."""
    messages = [Message.user(prompt)]
    for c, r in steps:
        messages.append(Message("assistant", [c]))
        if r is not None:
            messages.append(Message("tool", [r]))
    messages.append(Message("assistant", [TextPart(answer)]))
    return messages


def bundle(
    messages: list[Message],
    *,
    prompt: str,
    cell_id: str | None = None,
    ordinal: int = 0,
    turn_id: str = "turn-1",
    session_id: str = "0193ab2c-1f2a-7c3d-8000-000000000001",
) -> dict[str, Any]:
    """The bundle a live turn of ``messages`` leaves (entries as ``to_bundle_json`` writes them) with the
    replay fields."""
    entries: list[dict[str, Any]] = []
    results = {r.call_id: r for m in messages for r in m.tool_results()}
    for message in messages:
        if message.role != "assistant":
            continue
        if message.text:
            entries.append({"type": "text", "text": message.text})
        for c in message.tool_calls():
            r = results.get(c.call_id)
            code = json.loads(c.arguments).get("code", c.arguments)
            entries.append(
                {
                    "type": "tool",
                    "callId": c.call_id,
                    "name": c.name,
                    "args": code[:80],
                    "status": "error" if r is None or r.is_error else "ok",
                    "seconds": 0.01,
                    "output": r.output if r else "",
                    "code": code[:4000],
                    "outputs": [],
                }
            )
    data: dict[str, Any] = {
        "version": 1,
        "sessionId": session_id,
        "entries": entries,
        "usage": {"inputTokens": 100, "outputTokens": 10, "costUsd": None},
        "end": {"reason": "answered", "error": None},
    }
    data.update(replay_fields(messages, prompt=prompt, cell_id=cell_id, ordinal=ordinal, turn_id=turn_id))
    return data


def code_cell(source: str, outputs: list[dict[str, Any]] | None = None, cell_id: str | None = None) -> dict[str, Any]:
    cell: dict[str, Any] = {
        "cell_type": "code",
        "execution_count": 1 if outputs else None,
        "metadata": {},
        "outputs": outputs or [],
        "source": source,
    }
    if cell_id:
        cell["id"] = cell_id
    return cell


def turn_output(data: dict[str, Any]) -> dict[str, Any]:
    """A cell output holding a turn bundle, as a saved notebook has it."""
    return {
        "output_type": "display_data",
        "data": {"text/plain": "(the turn)", "text/markdown": "(the turn)", TURN_MIME: data},
        "metadata": {},
    }


def notebook(cells: list[dict[str, Any]]) -> dict[str, Any]:
    for number, cell in enumerate(cells):
        cell.setdefault("id", f"cell-{number}")
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write(path: Path, nb: dict[str, Any]) -> Path:
    path.write_text(json.dumps(nb, indent=1) + "\n")
    return path


def shell() -> Any:
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.clear_instance()
    return InteractiveShell.instance()


def kernel_env(**extra: str) -> dict[str, str]:
    """What the kernel tests add to a kernel's environment: this folder on the path (the ``%shiro``
    stand-in, :mod:`standin_shiro`), no warm-up."""
    import os

    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "SHIRO_NO_WARMUP": "1", **extra}


def execute(path: Path, env: dict[str, str], *, save: bool = True, allow_errors: bool = False) -> Any:
    """Run the notebook at ``path`` top to bottom with nbclient, as JupyterLab's Run All would (its path as
    ``JPY_SESSION_NAME``, its folder as the working directory), and save it with its outputs."""
    import os

    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute(env={**os.environ, **env, "JPY_SESSION_NAME": str(path)})
    if save:
        nbformat.write(nb, path)
    return nb


def texts(cell: Any) -> str:
    """A cell's streams and plain-text results, joined."""
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o["text"])
        elif "data" in o:
            out.append(str(o["data"].get("text/plain", "")))
        elif o.get("output_type") == "error":
            out.append(f"{o['ename']}: {o['evalue']}")
    return "".join(out)


def png(width: int, height: int) -> str:
    """A real PNG of that size (grey), base64 as a notebook holds it."""
    import base64
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    raw = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(raw).decode()
