"""Real kernels for tests (importable as ``kernelutil``: tests/ is on sys.path): start an IPython kernel
with its own environment through ``jupyter_client``, run cells in it, read what they showed."""

from __future__ import annotations

import os
from typing import Any

from jupyter_client.manager import start_new_kernel


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
