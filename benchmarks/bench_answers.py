"""A benchmark of answers (issue 40, point 1): InfiAgent-DABench closed-form tasks asked of a real local model
through three harnesses side by side in one run — the same llama-server, the same model, the same sampling.

    .venv/bin/python benchmarks/bench_answers.py [--tasks 11,18] [--harness shiro,baseline,smolagents]
        [--model q15|q05] [--data DIR] [--base-url URL] [--out FILE] [--stop-after MIN]

- **shiro**: each task in a fresh real kernel (jupyter_client, headless, the notebook's path given by
  ``JPY_SESSION_NAME`` as Jupyter Server gives it), the task's CSV copied into a temporary project folder that is the
  kernel's working directory; cells ``%load_ext shiro_kernel``, then ``Shiro.base_url``, ``Shiro.model`` and
  ``Shiro.approval = 'auto'`` — nothing else set — and the prompt as a ``%%shiro`` cell. The answer is the last text
  entry of the turn's bundle (``application/vnd.shiro.turn+json``); its ``numbers`` say whether the answer holds a
  number no output of the turn showed.
- **baseline**: a code-first loop (:func:`run_baseline`, about forty lines): one kernel in the same kind of folder,
  a four-sentence system prompt, the model's ```` ```python ```` blocks and fenced-JSON ``python`` calls run there
  and their output sent back, until an answer without code (at most :data:`BASELINE_STEPS` requests).
- **smolagents**: its ``CodeAgent`` (PyPI ``smolagents``, pinned, in a venv of its own made by ``_peervenv``:
  ``benchmarks/.peer-venv-smolagents`` or ``$SHIRO_BENCH_SMOLAGENTS_VENV``), ``OpenAIServerModel`` on the same
  server, its local executor with the task's folder as working directory, pandas, numpy, scipy, sklearn and
  matplotlib authorised, its defaults otherwise but ``stream_outputs=True`` (so its time to first token is
  measured as the others', on a stream; it streams what it would otherwise get whole) and ``max_steps`` set to the
  baseline's cap (its default, 20, is over the time limit here: a step is ~45 s of prefill of its long prompt).

Every harness gets the same prompt (:func:`prompt_of`: DABench's question, constraints and answer format, and the
file's name) and the same wall limit per task (:data:`TASK_LIMIT_S`, shiro's own headless limit). The kernels have
what a data scientist's has: the ``bench`` extra of pyproject.toml (pandas, numpy, scipy, scikit-learn, matplotlib),
installed into this venv when missing and checked in a kernel before the first task.

**Measured** by a recording proxy between every harness and the server (:class:`Recorder`): it relays each request
as sent and each answer as it comes (streams included, chunk by chunk), and keeps per request the time to the first
byte and to the first token (the first streamed delta of text, reasoning or call arguments), the usage the server
reported (prompt, cached and completion tokens), and the sampling fields the client sent (none, for all three, is
checked and said). Per harness: tasks correct, tool calls per task (shiro: tool rows of the turn; baseline: code
runs; smolagents: steps with code), input tokens of the first request and per task, time to first token of the
first request, wall per task (from the prompt sent to the answer, kernel start not counted).

**Grading** (:func:`grade`), DABench's rule re-implemented: ``@name[value]`` pairs are read from the harness's final
answer; a task is correct when every name of its label is there with a value equal to the label's (the same string,
or as floats within 1e-6). Labels are read only there. No prompt or code here knows the tasks.

The server: ``--base-url`` (one already running, for every harness), else llama-server started by
``scripts/engines.py`` (built and the model assembled and checked once, cached) with ``--temp 0 --seed 1``, 16,384
tokens of context and at most :data:`N_PREDICT` tokens per answer (a server setting, the same for every client: at
greedy decoding this model can repeat itself until the context is full). Results go to a JSON file (default
``benchmarks/results/answers-<model>.json``, rewritten after every task) and a table on stdout; progress to
``/tmp/bench_answers.log``. DABench data: ``../shared/dabench`` (CC BY-NC 4.0, InfiAgent-DABench), never copied into
the package.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import _peervenv

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LOG = Path("/tmp/bench_answers.log")
HARNESSES = ("shiro", "baseline", "smolagents")
TASK_LIMIT_S = 900.0  # shiro's own limit of a headless turn (ui/text_view.py), for every harness
BASELINE_STEPS = 8
N_PREDICT = 1536
CTX = 16384
MODEL_ALIAS = "qwen"  # engines.ALIAS: the name the server serves its model under
SMOL_REQUIREMENTS = [
    "smolagents[openai]==1.26.0",
    "pandas>=2.0",
    "numpy>=1.24",
    "scipy>=1.10",
    "scikit-learn>=1.3",
    "matplotlib>=3.7",
]
SMOL_VENV = Path(os.environ.get("SHIRO_BENCH_SMOLAGENTS_VENV") or HERE / ".peer-venv-smolagents")
SMOL_IMPORTS = ["pandas", "pandas.*", "numpy", "numpy.*", "scipy", "scipy.*", "sklearn", "sklearn.*"]
SMOL_IMPORTS += ["matplotlib", "matplotlib.*", "csv", "json"]
SAMPLING = ("temperature", "top_p", "top_k", "seed", "max_tokens", "max_completion_tokens", "max_output_tokens")


def log(message: str) -> None:
    line = f"{time.strftime('%H:%M:%S')} {message}"
    print(line, file=sys.stderr, flush=True)
    with open(LOG, "a", encoding="utf-8") as out:
        out.write(line + "\n")


# ------------------------------------------------------------------------------------------- tasks, grading


@dataclass(frozen=True)
class Task:
    id: int
    question: str
    constraints: str
    format: str
    file_name: str
    level: str


def load_tasks(data: Path, ids: list[int] | None) -> list[Task]:
    """The questions (never the labels) of ``data/questions.jsonl``, those of ``ids`` when given, in file order."""
    tasks = []
    for line in (data / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            tasks.append(Task(q["id"], q["question"], q["constraints"], q["format"], q["file_name"], q["level"]))
    if ids:
        missing = set(ids) - {t.id for t in tasks}
        if missing:
            raise SystemExit(f"no task {sorted(missing)} in {data / 'questions.jsonl'}")
        tasks = [t for t in tasks if t.id in ids]
    return tasks


def prompt_of(task: Task) -> str:
    """The prompt every harness gets, in DABench's shape: the file, the question, its constraints, the format."""
    return (
        f"The file `{task.file_name}` is in the current folder.\n"
        f"Question: {task.question}\n"
        f"Constraints: {task.constraints}\n"
        f"Answer in the format {task.format}"
    )


ANSWER_PAIR = re.compile(r"@(\w+)\[(.*?)\]", re.DOTALL)


def answer_pairs(text: str) -> dict[str, str]:
    """``@name[value]`` pairs of an answer (the last one of a name counts)."""
    return {name: value.strip() for name, value in ANSWER_PAIR.findall(text or "")}


def same_value(got: str, want: str) -> bool:
    if got == want:
        return True
    try:
        return abs(float(got) - float(want)) <= 1e-6
    except ValueError:
        return False


def grade(answer: str, label: list[list[str]]) -> bool:
    """DABench's rule: every name of the label present in ``answer`` as ``@name[value]`` with an equal value."""
    pairs = answer_pairs(answer)
    return all(name in pairs and same_value(pairs[name], str(value).strip()) for name, value in label)


def load_labels(data: Path) -> dict[int, list[list[str]]]:
    """Read only by grading (:func:`main`, after every harness has answered a task)."""
    labels = {}
    for line in (data / "labels.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            labels[row["id"]] = row["common_answers"]
    return labels


# --------------------------------------------------------------------------------------------- the proxy


@dataclass
class Exchange:
    """One request through the :class:`Recorder` and what the server answered."""

    label: str  # "harness:task"
    method: str
    path: str
    stream: bool = False
    sampling: dict[str, Any] = field(default_factory=dict)
    request_bytes: int = 0
    status: int = 0
    started: float = 0.0  # monotonic, when the proxy had the request
    first_byte_s: float | None = None
    first_token_s: float | None = None
    total_s: float | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None


class _Usage:
    """What an answer says of its tokens, read from a whole JSON body or from a stream's events."""

    def __init__(self, exchange: Exchange) -> None:
        self.x = exchange

    def take(self, doc: Any) -> bool:
        """Read ``doc`` (a body or an event); True when it carries the answer's first token."""
        if not isinstance(doc, dict):
            return False
        usage = doc.get("usage") or (doc.get("response") or {}).get("usage")
        if isinstance(usage, dict):
            self.x.prompt_tokens = usage.get("prompt_tokens", usage.get("input_tokens", self.x.prompt_tokens))
            self.x.completion_tokens = usage.get(
                "completion_tokens", usage.get("output_tokens", self.x.completion_tokens)
            )
            details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
            if isinstance(details, dict) and details.get("cached_tokens") is not None:
                self.x.cached_tokens = details["cached_tokens"]
        timings = doc.get("timings")  # llama-server's own count: the only one in a Chat stream without usage asked
        if isinstance(timings, dict):
            cached, evaluated = timings.get("cache_n") or 0, timings.get("prompt_n") or 0
            if self.x.prompt_tokens is None and (cached or evaluated):
                self.x.prompt_tokens = cached + evaluated
            if self.x.cached_tokens is None and timings.get("cache_n") is not None:
                self.x.cached_tokens = cached
            if self.x.completion_tokens is None and timings.get("predicted_n") is not None:
                self.x.completion_tokens = timings["predicted_n"]
        kind = str(doc.get("type") or "")
        if kind.endswith(".delta"):  # Responses API: output text, reasoning, call arguments
            return bool(doc.get("delta"))
        for choice in doc.get("choices") or []:
            delta = choice.get("delta") or {}
            if any(delta.get(k) for k in ("content", "reasoning_content", "tool_calls")):
                return True
        return False


class Recorder:
    """A recording proxy on a free loopback port in front of ``upstream`` (``http://127.0.0.1:N``): every request
    goes on as sent; every answer comes back as the server sends it (a stream relayed chunk by chunk as it arrives).
    :attr:`label` names the harness and task the requests of now belong to (they run one at a time)."""

    def __init__(self, upstream: str, keep: Path | None = None) -> None:
        self.upstream = upstream.removeprefix("http://").rstrip("/")
        self.label = ""
        self.keep = keep  # a folder: each exchange's request and answer as sent, one JSON line per exchange
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
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
        x = Exchange(self.label, h.command, h.path, request_bytes=len(data), started=time.monotonic())
        if data:
            try:
                body = json.loads(data)
                x.stream = bool(body.get("stream"))
                x.sampling = {k: body[k] for k in SAMPLING if k in body}
            except (ValueError, AttributeError):
                pass
        if h.command == "POST":
            with self._lock:
                self.exchanges.append(x)
        skip = {"host", "content-length", "connection", "accept-encoding", "transfer-encoding"}
        headers = {k: v for k, v in h.headers.items() if k.lower() not in skip}
        upstream = http.client.HTTPConnection(self.upstream, timeout=3600)
        usage = _Usage(x)
        kept: list[bytes] = []  # the answer's bytes, when --keep asks for them
        try:
            upstream.request(h.command, h.path, body=data or None, headers=headers)
            answer = upstream.getresponse()
            x.status = answer.status
            kind = answer.getheader("content-type", "application/json")
            if "text/event-stream" not in kind:
                raw = answer.read()
                kept.append(raw)
                x.first_byte_s = x.total_s = time.monotonic() - x.started
                try:
                    if usage.take(json.loads(raw)):
                        x.first_token_s = x.total_s
                except ValueError:
                    pass
                h.send_response(answer.status)
                h.send_header("content-type", kind)
                h.send_header("content-length", str(len(raw)))
                h.end_headers()
                h.wfile.write(raw)
                return
            h.send_response(answer.status)
            h.send_header("content-type", kind)
            h.send_header("cache-control", "no-cache")
            h.send_header("transfer-encoding", "chunked")
            h.end_headers()
            pending = b""
            while chunk := answer.read1(65536):
                now = time.monotonic() - x.started
                if x.first_byte_s is None:
                    x.first_byte_s = now
                pending += chunk
                if self.keep is not None:
                    kept.append(chunk)
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.startswith(b"data:") and line[5:].strip() not in (b"", b"[DONE]"):
                        try:
                            if usage.take(json.loads(line[5:])) and x.first_token_s is None:
                                x.first_token_s = now
                        except ValueError:
                            pass
                h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                h.wfile.flush()
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client went away (a timeout of its own)
            pass
        finally:
            if x.total_s is None:
                x.total_s = time.monotonic() - x.started
            upstream.close()
            if self.keep is not None and h.command == "POST":
                self._keep(x, data, kept)

    def _keep(self, x: Exchange, request: bytes, answer: list[bytes]) -> None:
        assert self.keep is not None
        line = {
            "path": x.path,
            "status": x.status,
            "request": request.decode("utf-8", "replace"),
            "answer": b"".join(answer).decode("utf-8", "replace"),
        }
        with self._lock, (self.keep / f"{x.label.replace(':', '-')}.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def of(self, label: str) -> list[Exchange]:
        with self._lock:
            return [x for x in self.exchanges if x.label == label]

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


# --------------------------------------------------------------------------------------------- the kernels


def kernel_env(home: Path) -> dict[str, str]:
    """The environment of a user's kernel with nothing of ours set: no OpenAI or shiro variable, no notebook path;
    shiro's, IPython's, Jupyter's and matplotlib's folders under ``home`` (a fresh one per task)."""
    drop = ("OPENAI_", "SHIRO_", "JPY_", "JUPYTER", "IPYTHONDIR", "MPL")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    for var, name in (
        ("SHIRO_HOME", "shiro"),
        ("IPYTHONDIR", "ipython"),
        ("JUPYTER_CONFIG_DIR", "jupyter-config"),
        ("JUPYTER_DATA_DIR", "jupyter-data"),
        ("MPLCONFIGDIR", "mpl"),
    ):
        (home / name).mkdir(parents=True, exist_ok=True)
        env[var] = str(home / name)
    env["MPLBACKEND"] = "Agg"
    return env


class Kernel:
    """One real ``python3`` kernel (this venv's) with ``env`` as its whole environment and ``cwd`` its folder."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        from jupyter_client.manager import start_new_kernel

        self.km, self.kc = start_new_kernel(kernel_name="python3", startup_timeout=120, env=env, cwd=str(cwd))

    def execute(self, code: str, timeout: float, on_output: Callable[[dict[str, Any]], None] | None = None) -> str:
        """Run ``code``; what it showed as text (streams, results, errors), in order."""
        chunks: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            kind, content = msg["msg_type"], msg["content"]
            if on_output is not None:
                on_output(msg)
            if kind == "stream":
                chunks.append(content["text"])
            elif kind in ("execute_result", "display_data"):
                chunks.append(str(content.get("data", {}).get("text/plain", "")) + "\n")
            elif kind == "error":
                chunks.append("\n".join(content.get("traceback", [])) or f"{content['ename']}: {content['evalue']}")

        self.kc.execute_interactive(code, timeout=timeout, output_hook=hook, allow_stdin=False)
        return re.sub(r"\x1b\[[0-9;]*m", "", "".join(chunks))

    def close(self) -> None:
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=True)


def ensure_bench_extra() -> None:
    """The ``bench`` extra of pyproject.toml installed in this venv (the kernels' interpreter), then checked in a
    kernel: a task must not fail on a missing scipy."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: the test extra's tomli
        import tomli as tomllib  # type: ignore[no-redef]
    wanted = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["bench"]
    missing = []
    for requirement in wanted:
        name = re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0]
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(requirement)
    if missing:
        log(f"installing the bench extra's {', '.join(missing)} into {sys.prefix}")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *missing], check=True, stdout=sys.stderr)
    home = Path(tempfile.mkdtemp(prefix="bench-answers-check-"))
    kernel = Kernel(kernel_env(home), home)
    try:
        shown = kernel.execute("import sys, pandas, numpy, scipy, sklearn, matplotlib; print(sys.executable)", 120)
    finally:
        kernel.close()
        shutil.rmtree(home, ignore_errors=True)
    if "Error" in shown:
        raise SystemExit(f"the kernel lacks the bench extra's packages:\n{shown}")
    log(f"kernel interpreter: {shown.strip()} (pandas, numpy, scipy, sklearn, matplotlib import)")


# --------------------------------------------------------------------------------------------- the harnesses


@dataclass
class Outcome:
    """What one harness did with one task (the grade is added by :func:`main`)."""

    harness: str
    task: int
    answer: str = ""
    tool_calls: int = 0
    wall_s: float = 0.0
    error: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    correct: bool | None = None
    requests: int = 0
    first_prompt_tokens: int | None = None
    first_cached_tokens: int | None = None
    first_token_s: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    sampling_sent: list[dict[str, Any]] = field(default_factory=list)


def task_folder(task: Task, data: Path, harness: str, root: Path) -> Path:
    """A fresh project folder holding a copy of the task's CSV."""
    folder = root / f"{harness}-{task.id}"
    folder.mkdir(parents=True)
    shutil.copy(data / "tables" / task.file_name, folder / task.file_name)
    return folder


TURN_MIME = "application/vnd.shiro.turn+json"


def run_shiro(task: Task, folder: Path, base_url: str, out: Outcome) -> None:
    """One ``%%shiro`` turn in a fresh kernel whose notebook is ``folder/analysis.ipynb``."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    setup = [
        "%load_ext shiro_kernel",
        f'%config Shiro.base_url = "{base_url}"\n%config Shiro.model = "{MODEL_ALIAS}"\n'
        '%config Shiro.approval = "auto"',
    ]
    turn = f"%%shiro\n{prompt_of(task)}"
    notebook = folder / "analysis.ipynb"
    nb = new_notebook(cells=[new_code_cell(s) for s in [*setup, turn]])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, notebook)
    env = {**kernel_env(folder.parent / f".home-{folder.name}"), "JPY_SESSION_NAME": str(notebook)}
    kernel = Kernel(env, folder)
    try:
        for cell in setup:
            shown = kernel.execute(cell, 120)
            if "Error" in shown:
                raise RuntimeError(f"setup cell {cell!r} failed: {shown[-400:]}")
        bundles: list[dict[str, Any]] = []

        def keep(msg: dict[str, Any]) -> None:
            data = msg["content"].get("data") or {}
            if TURN_MIME in data:
                bundles.append(data[TURN_MIME])

        started = time.monotonic()
        shown = kernel.execute(turn, TASK_LIMIT_S + 120, keep)
        out.wall_s = time.monotonic() - started
    finally:
        kernel.close()
    if not bundles:
        out.error = f"no turn bundle; the cell showed: {shown[-600:]}"
        return
    bundle = bundles[-1]
    entries = bundle.get("entries") or []
    texts = [e.get("text") or "" for e in entries if e.get("type") == "text"]
    tools = [e for e in entries if e.get("type") == "tool"]
    out.answer = texts[-1] if texts else ""
    out.tool_calls = len(tools)
    numbers = bundle.get("numbers")
    out.detail = {
        "end": bundle.get("end"),
        "numbers": [{"text": n.get("text"), "found": n.get("found")} for n in numbers or []],
        "numbers_checked": numbers is not None,
        "unfound_numbers": sum(1 for n in numbers or [] if not n.get("found")),
        "tools": [
            {"name": e.get("name"), "status": e.get("status"), "code": (e.get("code") or e.get("args") or "")[:600]}
            for e in tools
        ],
        "notices": [e.get("text") for e in entries if e.get("type") == "notice"],
        "texts": len(texts),
    }


BASELINE_SYSTEM = (
    "You are a data analyst working in a Python kernel whose current folder holds the data files. To run code, "
    "reply with one ```python code block; you will be sent its output. Variables persist between blocks. When "
    "you have the result, reply with the final answer and no code."
)
FENCE = re.compile(r"```(\w*)[ \t]*\n(.*?)```", re.DOTALL)


def code_of(reply: str) -> str | None:
    """The code a reply asks to run: its ```python blocks, or a fenced JSON ``python`` call's ``code``."""
    blocks = [(lang.lower(), body) for lang, body in FENCE.findall(reply)]
    code = [body for lang, body in blocks if lang in ("python", "py")]
    if code:
        return "\n".join(code)
    for lang, body in blocks:
        if lang in ("json", "") and '"code"' in body:
            try:
                call = json.loads(body)
                return str((call.get("arguments") or call.get("parameters") or {})["code"])
            except (ValueError, KeyError, TypeError, AttributeError):
                quoted = re.search(r'"code"\s*:\s*(?:"""|\'\'\')(.*?)(?:"""|\'\'\')', body, re.DOTALL)
                if quoted:
                    return quoted.group(1)
    return None


def run_baseline(task: Task, folder: Path, base_url: str, out: Outcome) -> None:
    """The code-first loop: one kernel, a short system prompt, code run and its output sent back."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="no-key-needed", timeout=TASK_LIMIT_S, max_retries=0)
    kernel = Kernel(kernel_env(folder.parent / f".home-{folder.name}"), folder)
    messages: list[dict[str, str]] = [
        {"role": "system", "content": BASELINE_SYSTEM},
        {"role": "user", "content": prompt_of(task)},
    ]
    started = time.monotonic()
    try:
        for _ in range(BASELINE_STEPS):
            stream = client.chat.completions.create(model=MODEL_ALIAS, messages=messages, stream=True)
            reply = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            messages.append({"role": "assistant", "content": reply})
            out.answer = reply
            code = code_of(reply)
            left = TASK_LIMIT_S - (time.monotonic() - started)
            if code is None or left <= 0:
                break
            out.tool_calls += 1
            shown = kernel.execute(code, left)[-3000:] or "(no output)"
            messages.append({"role": "user", "content": f"Output:\n{shown}"})
        else:
            out.detail["step_cap"] = True
    finally:
        out.wall_s = time.monotonic() - started
        kernel.close()
    out.detail["steps"] = sum(1 for m in messages if m["role"] == "assistant")


SMOL_RUNNER = r"""
import json, sys, time
from smolagents import CodeAgent, OpenAIServerModel
cfg = json.loads(sys.stdin.read())
model = OpenAIServerModel(model_id=cfg["model"], api_base=cfg["base_url"], api_key="no-key-needed")
def said(step, agent=None):  # each step as it ends, on stderr: what a run stopped at the time limit did
    if hasattr(step, "step_number"):
        error = str(getattr(step, "error", None) or "")[:300]
        print("@@STEP " + json.dumps({"n": step.step_number, "code": bool(getattr(step, "code_action", None)),
              "error": error, "output": str(getattr(step, "model_output", "") or "")[:300]}), file=sys.stderr, flush=True)
agent = CodeAgent(tools=[], model=model, additional_authorized_imports=cfg["imports"], executor_type="local",
                  stream_outputs=True, verbosity_level=0, step_callbacks=[said], max_steps=cfg["max_steps"])
started = time.monotonic()
try:
    result = agent.run(cfg["prompt"], return_full_result=True)
    steps = [s for s in result.steps if isinstance(s, dict) and "step_number" in s]
    done = {"answer": "" if result.output is None else str(result.output), "state": result.state,
            "steps": len(steps), "code_steps": sum(1 for s in steps if s.get("code_action")),
            "errors": [str(s.get("error"))[:300] for s in steps if s.get("error")][:5]}
except Exception as exc:
    done = {"answer": "", "error": f"{type(exc).__name__}: {exc}"[:600]}
done["wall_s"] = time.monotonic() - started
print("\n@@RESULT " + json.dumps(done), flush=True)  # on a line of its own: smolagents' output may end without one
"""


def smol_python() -> Path:
    return _peervenv.peer_python(
        SMOL_VENV, SMOL_REQUIREMENTS, "smolagents, openai, pandas, scipy, sklearn", "smolagents"
    )


def run_smolagents(task: Task, folder: Path, base_url: str, out: Outcome) -> None:
    """smolagents' CodeAgent in its own venv's process, the task's folder its working directory."""
    cfg = {"model": MODEL_ALIAS, "base_url": base_url, "imports": SMOL_IMPORTS, "prompt": prompt_of(task)}
    cfg["max_steps"] = BASELINE_STEPS
    env = kernel_env(folder.parent / f".home-{folder.name}")
    env.pop("PYTHONPATH", None)
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(smol_python()), "-c", SMOL_RUNNER],
            input=json.dumps(cfg),
            capture_output=True,
            text=True,
            cwd=folder,
            env=env,
            timeout=TASK_LIMIT_S,
        )
    except subprocess.TimeoutExpired as stopped:
        out.wall_s = time.monotonic() - started
        out.error = f"stopped at the {TASK_LIMIT_S:g} s limit"
        steps = smol_steps(stopped.stderr)
        out.tool_calls = sum(1 for s in steps if s["code"])
        out.detail = {"steps": len(steps), "last_steps": steps[-3:]}
        return
    out.wall_s = time.monotonic() - started
    found = [line for line in done.stdout.splitlines() if line.startswith("@@RESULT ")]
    if not found:
        out.error = f"exit {done.returncode}: {done.stderr.strip()[-600:]}"
        return
    result = json.loads(found[-1][len("@@RESULT ") :])
    out.answer = result.get("answer", "")
    out.tool_calls = result.get("code_steps", 0)
    out.error = result.get("error", "")
    out.detail = {k: result[k] for k in ("state", "steps", "errors") if k in result}
    out.detail["last_steps"] = smol_steps(done.stderr)[-3:]


def smol_steps(stderr: str | bytes | None) -> list[dict[str, Any]]:
    """The steps the runner reported on stderr as they ended."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr or ""
    return [json.loads(line[len("@@STEP ") :]) for line in text.splitlines() if line.startswith("@@STEP ")]


RUNNERS: dict[str, Callable[[Task, Path, str, Outcome], None]] = {
    "shiro": run_shiro,
    "baseline": run_baseline,
    "smolagents": run_smolagents,
}


def measure(out: Outcome, exchanges: list[Exchange]) -> None:
    """The request figures of one (harness, task) from the proxy's record."""
    posts = [x for x in exchanges if x.method == "POST"]
    out.requests = len(posts)
    if posts:
        first = posts[0]
        out.first_prompt_tokens, out.first_cached_tokens = first.prompt_tokens, first.cached_tokens
        out.first_token_s = first.first_token_s
    out.prompt_tokens = sum(x.prompt_tokens or 0 for x in posts)
    out.completion_tokens = sum(x.completion_tokens or 0 for x in posts)
    out.sampling_sent = [x.sampling for x in posts if x.sampling]
    out.detail["statuses"] = sorted({x.status for x in posts})
    out.detail["paths"] = sorted({x.path for x in posts})
    out.detail["streamed"] = sum(1 for x in posts if x.stream)


# --------------------------------------------------------------------------------------------- the table


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def fmt(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}{unit}"


def summary(results: list[Outcome], harnesses: list[str], tasks: list[Task]) -> str:
    from _turnbench import table

    rows: list[list[str]] = []

    def row(name: str, cell: Callable[[list[Outcome]], str]) -> None:
        rows.append([name, *(cell([r for r in results if r.harness == h]) for h in harnesses)])

    def spread(values: list[float], unit: str, digits: int = 0) -> str:
        if not values:
            return "-"
        return f"{fmt(median(values), unit, digits)} ({fmt(min(values), '', digits)}–{fmt(max(values), unit, digits)})"

    row("tasks run", lambda rs: f"{len(rs)} of {len(tasks)}")
    row("tasks correct", lambda rs: f"{sum(1 for r in rs if r.correct)} of {len(rs)}")
    row("tasks in which code ran", lambda rs: f"{sum(1 for r in rs if r.tool_calls)} of {len(rs)}")
    row("tool calls per task (median, range)", lambda rs: spread([r.tool_calls for r in rs], ""))
    row("requests per task (median, range)", lambda rs: spread([r.requests for r in rs], ""))
    row(
        "input tokens, first request (median, range)",
        lambda rs: spread([r.first_prompt_tokens for r in rs if r.first_prompt_tokens is not None], ""),
    )
    row("input tokens per task (median, range)", lambda rs: spread([r.prompt_tokens for r in rs], ""))
    row("output tokens per task (median)", lambda rs: fmt(median([r.completion_tokens for r in rs])))
    row(
        "time to first token, first request (median, range)",
        lambda rs: spread([r.first_token_s for r in rs if r.first_token_s is not None], " s", 1),
    )
    row("wall per task (median, range)", lambda rs: spread([r.wall_s for r in rs], " s"))
    row("wall, all tasks", lambda rs: fmt(sum(r.wall_s for r in rs) / 60, " min", 1))
    row("harness errors", lambda rs: str(sum(1 for r in rs if r.error)))
    row(
        "sampling fields sent",
        lambda rs: ", ".join(sorted({k for r in rs for s in r.sampling_sent for k in s})) or "none",
    )
    if "shiro" in harnesses:
        shiro = [r for r in results if r.harness == "shiro" and not r.error]
        unfound = sum(1 for r in shiro if r.detail.get("unfound_numbers"))
        share = f"{unfound} of {len(shiro)}" + (f" ({100 * unfound / len(shiro):.0f} %)" if shiro else "")
        rows.append(
            ["turns ending with a number no output showed", *(share if h == "shiro" else "" for h in harnesses)]
        )
    per_task = ["", "per task (✓ correct, ✗ wrong, ! harness error; tool calls):"]
    for task in tasks:
        cells = []
        for h in harnesses:
            r = next((r for r in results if r.harness == h and r.task == task.id), None)
            cells.append(
                "   -   "
                if r is None
                else f"{'!' if r.error else '✓' if r.correct else '✗'} {r.tool_calls:>2} {r.wall_s:4.0f}s"
            )
        per_task.append(f"  #{task.id:<4} " + "  ".join(f"{h}: {c}" for h, c in zip(harnesses, cells)))
    return table(("measure", *harnesses), rows, per_task)


# --------------------------------------------------------------------------------------------- main


def engines() -> Any:
    spec = importlib.util.spec_from_file_location("shiro_engines", ROOT / "scripts" / "engines.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["shiro_engines"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", help="comma-separated task ids (default: every task of --data)")
    parser.add_argument("--harness", default=",".join(HARNESSES), help="comma-separated, of " + ", ".join(HARNESSES))
    parser.add_argument("--model", default="q15", choices=("q15", "q05"))
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "dabench")
    parser.add_argument("--base-url", help="a server already running (its /v1 URL), for every harness")
    parser.add_argument("--out", type=Path, help="the results JSON (default: benchmarks/results/answers-MODEL.json)")
    parser.add_argument(
        "--stop-after", type=float, help="minutes after which no new (harness, task) is started (the rest: not run)"
    )
    parser.add_argument(
        "--keep", type=Path, help="a folder to write each exchange's request and answer to (JSON lines)"
    )
    parser.add_argument("--table", type=Path, help="print the table of a results JSON this script wrote, and stop")
    args = parser.parse_args()
    if args.table:
        print(table_of(json.loads(args.table.read_text(encoding="utf-8")), args.data.resolve()))
        return
    harnesses = [h.strip() for h in args.harness.split(",") if h.strip()]
    if any(h not in HARNESSES for h in harnesses):
        raise SystemExit(f"--harness: one or more of {', '.join(HARNESSES)}")
    data = args.data.resolve()
    ids = [int(i) for i in args.tasks.split(",")] if args.tasks else None
    tasks = load_tasks(data, ids)
    out_path = args.out or HERE / "results" / f"answers-{args.model}.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    log(f"bench_answers: {len(tasks)} tasks, harnesses {harnesses}, model {args.model}, data {data}")
    ensure_bench_extra()
    if "smolagents" in harnesses:
        smol_python()
    began = time.monotonic()
    server = None
    if args.base_url:
        upstream = args.base_url.rstrip("/").removesuffix("/v1")
        server_args = f"(given: {args.base_url})"
    else:
        e = engines()
        server = e.serve(args.model, ctx=CTX, extra=["-n", str(N_PREDICT)])
        log(f"starting llama-server: {' '.join(server.args()[1:])}")
        server.start(timeout=600)
        upstream = server.url
        server_args = " ".join(Path(a).name if "/" in a else a for a in server.args())
    results: list[Outcome] = []
    labels = load_labels(data)  # for grading only
    work = Path(tempfile.mkdtemp(prefix="bench-answers-"))
    meta = {
        "model": args.model,
        "server": server_args,
        "prompt_example": prompt_of(tasks[0]) if tasks else "",
        "baseline_system": BASELINE_SYSTEM,
        "task_limit_s": TASK_LIMIT_S,
        "baseline_steps": BASELINE_STEPS,
        "smolagents": _peervenv.version_of(smol_python(), "smolagents") if "smolagents" in harnesses else None,
        "cpu_count": os.cpu_count(),
        "commit": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "uncommitted_files": len(
            subprocess.run(
                ["git", "-C", str(ROOT), "status", "--porcelain", "-uno"], capture_output=True, text=True
            ).stdout.splitlines()
        ),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    try:
        # shiro and the baseline interleaved task by task, then smolagents (minutes a task) as time allows
        passes = [[h for h in harnesses if h != "smolagents"], [h for h in harnesses if h == "smolagents"]]
        order = [(task, harness) for group in passes for task in tasks for harness in group]
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
        with Recorder(upstream, args.keep) as recorder:
            for task, harness in order:
                if args.stop_after is not None and time.monotonic() - began > args.stop_after * 60:
                    continue
                out = Outcome(harness, task.id)
                recorder.label = f"{harness}:{task.id}"
                folder = task_folder(task, data, harness, work)
                log(f"#{task.id} {harness}: started")
                try:
                    RUNNERS[harness](task, folder, recorder.base_url, out)
                except Exception as exc:  # a harness that broke: said in its row, the run goes on
                    out.error = f"{type(exc).__name__}: {exc}"[:600]
                measure(out, recorder.of(recorder.label))
                out.correct = grade(out.answer, labels[task.id])
                results.append(out)
                log(
                    f"#{task.id} {harness}: {'correct' if out.correct else 'wrong'}, {out.tool_calls} tool calls, "
                    f"{out.requests} requests, {out.wall_s:.0f} s{', error: ' + out.error if out.error else ''}; "
                    f"answer: {out.answer[-200:]!r}"
                )
                out_path.write_text(
                    json.dumps({"meta": meta, "results": [asdict(r) for r in results]}, indent=1),
                    encoding="utf-8",
                )
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    meta["minutes"] = round((time.monotonic() - began) / 60, 1)
    meta["harnesses"], meta["tasks"] = harnesses, [t.id for t in tasks]
    saved = {"meta": meta, "results": [asdict(r) for r in results]}
    out_path.write_text(json.dumps(saved, indent=1), encoding="utf-8")
    print(table_of(saved, data))


def table_of(saved: dict[str, Any], data: Path) -> str:
    """The table and its notes, from what :func:`main` saved."""
    meta = saved["meta"]
    results = [Outcome(**r) for r in saved["results"]]
    harnesses = meta.get("harnesses") or list(dict.fromkeys(r.harness for r in results))
    ids = meta.get("tasks") or sorted({r.task for r in results})
    tasks = load_tasks(data, ids)
    notes = [
        "",
        f"One run ({meta['date']}, {meta['cpu_count']} cores shared with other work; shiro at commit {meta['commit']}"
        f" with {meta['uncommitted_files']} files changed in the tree): {len(tasks)} InfiAgent-DABench dev tasks "
        f"(CC BY-NC 4.0), model {meta['model']} on `{meta['server']}`.",
        f"Every harness: the same prompt, {meta['task_limit_s']:g} s per task at most; the baseline and smolagents "
        f"stop at {meta['baseline_steps']} model calls; smolagents {meta.get('smolagents') or '-'}, run after the "
        "others, on the tasks time allowed.",
    ]
    if "minutes" in meta:
        notes.append(f"(this run: {meta['minutes']:.0f} min)")
    return summary(results, harnesses, tasks) + "\n".join(notes)


if __name__ == "__main__":
    main()
