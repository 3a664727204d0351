"""Shared pieces of ``bench_first_turn.py`` and ``bench_peer.py`` (not a suite of its own).

Everything here drives the kernel through its user surface only: fresh ``python -c`` processes that
start an IPython ``InteractiveShell`` and run cells (``%load_ext shiro_kernel``, ``%shiro --wait hi``),
configured through environment variables, against ``tests/fakeopenai.py`` served from this process.
Every call a child makes is checked against the fake server's record of requests, so a figure cannot
come from a turn that never reached the server.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakeopenai import FakeOpenAI, Recorded, Reply

MODEL = "gpt-4o-mini"
TURN = "%shiro --wait hi"
TURN_NEW = "%shiro --wait --new hi"  # a warm turn doing what a kernel's first turn does: a new session
REPLY_TEXT = "The mean is 2.0, computed from three rows."

# A fresh process: start an IPython shell, run the configured cells, report perf_counter timings as JSON
# on a marked line (the cells' own output goes to stdout too and is ignored).
CELLS_CHILD = r"""
import json, sys, time
t_start = time.perf_counter()
cfg = json.loads(sys.argv[1])
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
out = {"shell": time.perf_counter() - t_start}

def cell(src):
    t = time.perf_counter()
    r = shell.run_cell(src)
    dt = time.perf_counter() - t
    if not r.success:
        sys.stderr.write(f"cell failed: {src!r}: {r.error_before_exec or r.error_in_exec!r}\n")
        raise SystemExit(3)
    return dt

out["load"] = cell(cfg["load"])
out["shell_and_load"] = time.perf_counter() - t_start
for src in cfg.get("setup", []):
    cell(src)
time.sleep(cfg.get("delay", 0))
out["first"] = cell(cfg["cell"])
out["warm"] = [cell(cfg.get("warm_cell", cfg["cell"])) for _ in range(cfg.get("warm", 0))]
print("@@RESULT " + json.dumps(out), flush=True)
"""


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds >= 0.1 else f"{seconds * 1000:.1f} ms"


# Not passed to children. PYTHONDONTWRITEBYTECODE: some machines set it, a user's kernel does not; with it
# every fresh process would recompile shiro_kernel (an editable install has no bytecode from pip) while the
# peer's venv, compiled by pip, would not. The first (discarded) run of each kind writes the caches.
DROPPED_ENV = (
    "PYTHONDONTWRITEBYTECODE",
    "SHIRO_NO_WARMUP",
    "SHIRO_API",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_API_BASE",
)


def child_env(fake: FakeOpenAI, shiro_home: str, ipythondir: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env.update(
        OPENAI_API_KEY="sk-bench",
        OPENAI_BASE_URL=fake.base_url,
        SHIRO_HOME=shiro_home,
        SHIRO_MODEL=MODEL,
        IPYTHONDIR=ipythondir,
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


class Workspace:
    """A fake server with a fixed reply, plus fresh SHIRO_HOME / IPYTHONDIR / working folder for children."""

    def __init__(self) -> None:
        self.fake = FakeOpenAI(default_reply=Reply(text=REPLY_TEXT))
        self.fake.validate = False  # the spec validator is a test-time check; it would dominate the timing
        self.tmp = Path(tempfile.mkdtemp(prefix="shiro-bench-"))
        for sub in ("home", "ipython"):
            (self.tmp / sub).mkdir()

    def __enter__(self) -> Workspace:
        self.fake.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.fake.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, **extra: str) -> dict[str, str]:
        return child_env(self.fake, str(self.tmp / "home"), str(self.tmp / "ipython"), **extra)

    def fresh_cwd(self) -> Path:
        """A new working folder: a fresh kernel in it has no session to continue (the first ``%shiro`` of a
        kernel resumes the newest session recorded for its notebook / folder)."""
        return Path(tempfile.mkdtemp(prefix="cwd-", dir=self.tmp))

    def preconnect_ports(self) -> set[int]:
        """The client ports of the warm-ups' connection-opening requests so far (``GET /v1/models``, which
        the fake server records apart, in ``listings``: see ``shiro_kernel.warmup``), each checked
        to have carried no API key and been answered the real 401. (By port, not by process: a process that
        exits right after its turn may have its request handled after the next one has started.)"""
        for r in self.fake.listings:
            if "authorization" in r.headers or r.status != 401:
                raise RuntimeError(f"the warm-up's GET /v1/models carried a key or was answered {r.status}")
        return {r.port for r in self.fake.listings}

    def requests_since(self, n: int) -> list[Recorded]:
        return list(self.fake.requests[n:])

    def run_cells(
        self,
        python: str,
        cfg: dict[str, Any],
        *,
        expect_path: str,
        expect_calls: int,
        env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> dict[str, Any]:
        """One fresh process running CELLS_CHILD; checks that exactly ``expect_calls`` model calls reached
        the fake server at ``expect_path`` and were answered 200."""
        before = len(self.fake.requests)
        proc = subprocess.run(
            [python, "-c", CELLS_CHILD, json.dumps(cfg)],
            env=env or self.env(),
            cwd=self.fresh_cwd(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        result = parse_result(proc.stdout, proc.stderr, proc.returncode)
        recs = self.requests_since(before)
        check_calls(recs, expect_path, expect_calls, context=proc.stdout[-2000:])
        result["requests"] = recs
        return result


def parse_result(stdout: str, stderr: str, returncode: int) -> dict[str, Any]:
    for line in stdout.splitlines():
        if line.startswith("@@RESULT "):
            return json.loads(line[len("@@RESULT ") :])
    raise RuntimeError(f"child failed (exit {returncode}):\n{stdout[-3000:]}\n{stderr[-3000:]}")


def check_calls(recs: list[Recorded], path: str, n: int, *, context: str = "") -> None:
    got = [(r.method, r.path, r.status, r.body.get("model")) for r in recs]
    want = [("POST", path, 200, MODEL)] * n
    if got != want:
        raise RuntimeError(
            f"expected {n} answered POST {path} calls for {MODEL}, the fake server saw {got}\nchild output:\n{context}"
        )


def process_seconds(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t0


def interleave(n: int, *fns: Callable[[], Any]) -> list[list[Any]]:
    """Call the functions in turn, n rounds (the starting one rotates), so drift hits all alike."""
    out: list[list[Any]] = [[] for _ in fns]
    for r in range(n):
        for k in range(len(fns)):
            i = (r + k) % len(fns)
            out[i].append(fns[i]())
    return out


def table(header: Sequence[str], rows: list[Sequence[str]], notes: Sequence[str] = ()) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        " | ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True)).rstrip(),
        "-|-".join("-" * w for w in widths),
    ]
    lines += [" | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join([*lines, *notes])
