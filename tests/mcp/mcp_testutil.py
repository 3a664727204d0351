"""Helpers for the MCP tests: where the test servers are, starting the HTTP one, child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PY = sys.executable
HERE = Path(__file__).parent
SDK_SERVER = str(HERE / "mcp_servers" / "sdk_server.py")
PNG_PREFIX = b"\x89PNG\r\n\x1a\n"


@contextmanager
def http_sdk_server() -> Iterator[str]:
    """The SDK test server over streamable HTTP on 127.0.0.1:<free port>; yields its URL."""
    proc = subprocess.Popen([PY, SDK_SERVER, "--http"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"the HTTP test server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.kill()
        proc.wait(10)


def children(pid: int | None = None) -> dict[int, str]:
    """Live (non-zombie) child processes of ``pid`` (default: this process): pid → command line."""
    parent = os.getpid() if pid is None else pid
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == parent and fields[0] != "Z":
                found[int(entry)] = Path("/proc", entry, "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
    return found


def wait_for(predicate: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return True
        time.sleep(0.02)
    return bool(callable(predicate) and predicate())


def run_async(coroutine: Any) -> Any:
    """``asyncio.run`` on a thread of its own: the browser tests' Playwright (sync API) keeps an event loop
    running on the main thread for the whole session, where ``asyncio.run`` refuses to start."""
    import asyncio
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result(timeout=120)
