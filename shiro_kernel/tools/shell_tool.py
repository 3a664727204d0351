"""The ``shell`` tool: run a command with ``bash -c`` in the project root.

The command gets its own process group (``start_new_session``), so at the timeout — or when the
user interrupts the turn — the whole group is killed, not just bash. Output (stdout and stderr
combined) is read on a helper thread into a bounded buffer, so a chatty command cannot exhaust
memory and a background job that keeps the pipe open cannot hang the tool.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from typing import Any

from ..redact import subprocess_env
from ..text import HeadTail
from .base import Effect, Preview, Tool, ToolContext, ToolError, outside, schema

DEFAULT_TIMEOUT_S = 60
MAX_TIMEOUT_S = 600
OUTPUT_HEAD_BYTES = 30_000
OUTPUT_TAIL_BYTES = 10_000
#: after the command ends, how long to wait for output still held open by background jobs
DRAIN_S = 1.0


class _Collector:
    """Reads a pipe to EOF on a daemon thread into a bounded head-and-tail buffer."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.buffer: HeadTail[bytes] = HeadTail(b"", OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES)
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, name="shiro-shell-reader", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                chunk = os.read(self._fd, 65536)
                if not chunk:
                    break
                with self._lock:
                    self.buffer.write(chunk)
        except OSError:
            pass
        finally:
            try:
                os.close(self._fd)
            except OSError:
                pass

    def text(self) -> str:
        with self._lock:
            head, tail = self.buffer.parts()
            dropped = self.buffer.dropped
        if dropped:
            return (
                f"{head.decode('utf-8', 'replace')}\n[... {dropped:,} bytes of output truncated ...]\n"
                f"{tail.decode('utf-8', 'replace')}"
            )
        return (head + tail).decode("utf-8", "replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's whole process group (it leads its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def run_command(command: str, cwd: str, timeout_s: float) -> str:
    bash = shutil.which("bash") or "/bin/sh"
    # the command never sees the model's API key (other variables stay: the user's tools may need them,
    # and tool results are redacted anyway)
    env = dict(subprocess_env(), PAGER="cat", GIT_PAGER="cat", GIT_TERMINAL_PROMPT="0")
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            [bash, "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        os.close(read_fd)
        raise ToolError(f"could not start {bash}: {exc}") from None
    finally:
        os.close(write_fd)
    collector = _Collector(read_fd)
    started = time.monotonic()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
    except KeyboardInterrupt as exc:  # the user stopped the turn: stop the command too, keep what it printed
        _kill_group(proc)
        collector.thread.join(DRAIN_S)
        exc.partial = collector.text()  # type: ignore[attr-defined]
        raise
    collector.thread.join(DRAIN_S)
    elapsed = time.monotonic() - started

    text = collector.text().rstrip("\n")
    notes = []
    if collector.thread.is_alive():
        notes.append("[background processes still hold the output open; their later output is not shown]")
    if timed_out:
        notes.append(
            f"[timed out after {timeout_s:g} s: the command and its process group were killed; "
            f"pass a larger timeout_s (max {MAX_TIMEOUT_S}) if it needs longer, or run it in the background]"
        )
    elif proc.returncode is not None and proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        notes.append(f"[killed by {name} after {elapsed:.1f} s]")
    else:
        notes.append(f"[exit code {proc.returncode}]")
    return "\n".join([text or "(no output)", *notes])


def _run(args: dict[str, Any], ctx: ToolContext) -> str:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("command is empty; pass a bash command line")
    timeout = args.get("timeout_s")
    if timeout is None:
        timeout = DEFAULT_TIMEOUT_S
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ToolError(f"timeout_s must be a positive number of seconds (at most {MAX_TIMEOUT_S})")
    if timeout > MAX_TIMEOUT_S:
        raise ToolError(
            f"timeout_s may be at most {MAX_TIMEOUT_S} seconds, not {timeout:g}; "
            "run longer jobs in the background and check on them later"
        )
    root = ctx.resolve(".")
    return run_command(command, str(root), float(timeout))


def _preview(args: dict[str, Any], ctx: ToolContext) -> Preview | None:
    command = args.get("command")
    if not isinstance(command, str):
        return None
    timeout = args.get("timeout_s")
    title = "run this shell command" + (f" (timeout {timeout:g} s)" if isinstance(timeout, (int, float)) else "")
    return Preview(title, command, "bash")


TOOLS = [
    Tool(
        name="shell",
        description=(
            "Run a bash command in the project root (non-interactive, stdin closed) and return its combined "
            "stdout/stderr and exit code. Killed with its child processes after timeout_s seconds (default 60, "
            "max 600); long output is truncated."
        ),
        parameters=schema(
            {
                "command": {"type": "string", "description": "the command line, run with bash -c"},
                "timeout_s": {"type": "number", "description": "seconds before the command is killed; null for 60"},
            },
            optional=("timeout_s",),
        ),
        run=_run,
        effects=Effect.FILES | Effect.OUTSIDE,  # it may write any file, and anything beyond: never undoable
        touches=outside("a shell command's effects outside the kernel cannot be taken back"),
        preview=_preview,
    ),
]
