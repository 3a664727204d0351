"""Loading, the first turn of a fresh kernel, and a warm turn against the SDK on the same body (issue 15).

    .venv/bin/python benchmarks/bench_first_turn.py

Only the user surface is used (``%load_ext shiro_kernel``, ``%shiro --wait``, environment variables), in
fresh ``python -c`` processes running an IPython ``InteractiveShell``; the fake OpenAI-compatible server
(``tests/fakeopenai.py``) runs on 127.0.0.1 in this process, and every model call is checked against its
record of requests.

1. Loading shiro_kernel against a bare IPython start: process wall time, the variants interleaved, many
   rounds (warm-up thread off, as it would be cut short by the process exiting): loaded as ``%load_ext``
   loads it (the extension manager), and ``%load_ext`` run as the first cell against an empty first cell
   (IPython's first cell has a cost of its own, which any first cell pays). The ``%load_ext`` line itself is
   also timed in-process with the warm-up thread on.
2. The first ``%shiro --wait hi`` of a fresh process, issued 2 s after ``%load_ext`` and right after it
   (only the ``%shiro`` line is timed); the warm-up's preconnect is checked (no key, the real 401) and
   whether the first model call went over the connection it opened is counted.
3. A warm one-step turn (the same process, after a first turn): ``%shiro --wait --new hi``, so that every
   warm turn does what the first one did (one user message in a new session) and posts the same body.
   Also a warm turn continuing its session (``%shiro --wait hi``), what most warm turns are: no session switch.
4. The very body that turn sent (taken from the fake server's record) posted through the ``openai`` SDK
   without typed parsing: ``client.post(..., stream=True)`` yielding the SDK's decoded SSE events as
   dicts, and as raw SSE bytes.
5. The same body through the SDK's typed streaming (``client.responses.create(stream=True, ...)``).
Rows 3-5 are interleaved round by round in one process, each SDK call posting the body the turn just sent.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from _turnbench import (
    TURN,
    TURN_NEW,
    Workspace,
    check_calls,
    interleave,
    median,
    ms,
    process_seconds,
    table,
)

LOAD_PAIRS = 41  # rows 1-4: rounds of the five load processes
COLD_REPEATS = 15  # row 2: fresh processes per variant (the first-turn ratio sits near its goal: more samples)
WARM_ROUNDS = 6  # rows 3-5: rounds of (turn, each SDK variant) per warm process, one such process per repeat
SDK_WARMUP = 3

BARE = "from IPython.core.interactiveshell import InteractiveShell as S; S.instance()"
# the extension loaded as %load_ext loads it (and as c.InteractiveShellApp.extensions does at start-up):
# through IPython's extension manager, without running a cell
LOADED_EXT = (
    BARE + "; import time; t = time.perf_counter(); S.instance().extension_manager.load_extension('shiro_kernel')"
    "; print(time.perf_counter() - t)"
)
LOADED = BARE + "; S.instance().run_cell('%load_ext shiro_kernel')"
# what running any first cell costs IPython itself (its tokenizer's regexes, hashlib, bdb): part of row 2
ONE_CELL = BARE + "; S.instance().run_cell('pass')"
# the same in a folder with a .mcp.json: loading must not read it or import the MCP SDK (issue 16)
LOADED_NO_MCP_IMPORT = (
    LOADED + "; import sys; assert not [m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')], 'mcp'"
)

# One process: a first turn, warm-up turns, then rounds of (a turn; the body it sent, through the SDK five
# ways). The parent answers each "@@BODY" line with the path of a file holding that turn's request body.
WARM_CHILD = r"""
import inspect, json, os, sys, time
cfg = json.loads(sys.argv[1])
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()

def cell(src):
    t = time.perf_counter()
    r = shell.run_cell(src)
    dt = time.perf_counter() - t
    if not r.success:
        sys.stderr.write(f"cell failed: {src!r}\n")
        raise SystemExit(3)
    return dt

cell("%load_ext shiro_kernel")

# where a warm turn's time goes: the model call (our post, its SSE decoded and parsed) and the durable
# save at its end, timed around the two methods (about a microsecond each)
from shiro_kernel import agent as _agent, turn as _turn
parts = {"model": 0.0, "save": 0.0}
def _timed(cls, name, key):
    f = getattr(cls, name)
    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            parts[key] += time.perf_counter() - t
    setattr(cls, name, timed)
_timed(_turn.Turn, "_call_once", "model")
_timed(_agent.Agent, "save_now", "save")

for _ in range(1 + cfg["warmup_turns"]):
    cell(cfg["turn"])

import openai
try:
    import httpx2 as http_lib  # openai 3.x is built on httpx2
except ImportError:
    import httpx as http_lib

client = openai.OpenAI(api_key=os.environ["OPENAI_API_KEY"], base_url=os.environ["OPENAI_BASE_URL"], max_retries=0)
create_params = set(inspect.signature(client.responses.create).parameters)


def body_of_last_turn():
    print("@@BODY", flush=True)
    with open(sys.stdin.readline().strip(), "rb") as f:
        return json.loads(f.read())


def sdk_untyped(body):
    # The SDK's request path (auth, base URL, headers, error classes) and its SSE decoder; events stay dicts.
    for _ in client.post("/responses", body=body, cast_to=object, stream=True, stream_cls=openai.Stream[object]):
        pass


def sdk_raw_bytes(body):
    response = client.post("/responses", body=body, cast_to=http_lib.Response, stream=True)
    try:
        for _ in response.iter_bytes():
            pass
    finally:
        response.close()


def sdk_typed(body):
    # How most code calls it: the body's fields as keyword arguments, typed events.
    kwargs = {k: v for k, v in body.items() if k in create_params}
    extra = {k: v for k, v in body.items() if k not in create_params}
    if extra:
        kwargs["extra_body"] = extra
    for _ in client.responses.create(**kwargs):
        pass


def sdk_typed_extra_body(body):
    # Typed events, but the body passed through as extra_body (no typed transform of the input).
    rest = {k: v for k, v in body.items() if k not in ("model", "stream")}
    for _ in client.responses.create(model=body["model"], stream=True, extra_body=rest):
        pass


def sdk_untyped_in_a_cell(body):
    # The same post as a notebook cell runs it: IPython's cell machinery and its history thread included.
    shell.user_ns["_bench_post"] = lambda: sdk_untyped(body)
    if not shell.run_cell("_bench_post()").success:
        raise SystemExit(4)


variants = [("untyped", sdk_untyped), ("raw_bytes", sdk_raw_bytes), ("typed", sdk_typed),
            ("typed_extra_body", sdk_typed_extra_body), ("untyped_cell", sdk_untyped_in_a_cell)]
body = body_of_last_turn()
for _name, fn in variants:
    for _ in range(cfg["sdk_warmup"]):
        fn(body)
out = {"turn": [], "model": [], "save": [], **{name: [] for name, _ in variants}}
for r in range(cfg["rounds"]):
    parts.update(model=0.0, save=0.0)
    out["turn"].append(cell(cfg["turn"]))
    out["model"].append(parts["model"])
    out["save"].append(parts["save"])
    body = body_of_last_turn()
    for k in range(len(variants)):
        name, fn = variants[(r + k) % len(variants)]
        t = time.perf_counter()
        fn(body)
        out[name].append(time.perf_counter() - t)
print("@@RESULT " + json.dumps(out), flush=True)
"""


class Load(NamedTuple):
    """Medians of the load rows' processes, and the medians of each round's ratios (see the notes)."""

    bare: float
    extension: float
    cell: float
    loaded: float
    mcp: float
    r_extension: float  # loaded by the extension manager / bare
    r_cell: float  # %load_ext as the first cell / an empty first cell
    inside: float  # load_extension itself, timed in the process


def load_ext_vs_bare(ws: Workspace) -> Load:
    env = ws.env(SHIRO_NO_WARMUP="1")
    cwd = ws.fresh_cwd()
    mcp_cwd = ws.fresh_cwd()
    server = {"command": sys.executable, "args": ["-m", "mcp_server_time"]}
    (mcp_cwd / ".mcp.json").write_text(json.dumps({"mcpServers": {"time": server}}))

    def runs(code: str, where: Path = cwd) -> Callable[[], float]:
        return lambda: process_seconds([sys.executable, "-c", code], env, where)

    inside: list[float] = []  # the load itself, timed in the process

    def extension() -> float:
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", LOADED_EXT], env=env, cwd=cwd, check=True, capture_output=True, text=True
        )
        wall = time.perf_counter() - t0
        inside.append(float(done.stdout.split()[-1]))
        return wall

    variants = (runs(BARE), extension, runs(ONE_CELL), runs(LOADED), runs(LOADED_NO_MCP_IMPORT, mcp_cwd))
    for fn in variants:  # bytecode, IPython profile, file caches
        fn()
    bare, ext, cell, loaded, mcp = interleave(LOAD_PAIRS, *variants)

    def ratio(a: list[float], b: list[float]) -> float:
        # each round's processes ran back to back: the median of the rounds' ratios leaves out the drift
        return median([x / y for x, y in zip(a, b, strict=True)])

    return Load(
        median(bare),
        median(ext),
        median(cell),
        median(loaded),
        median(mcp),
        ratio(ext, bare),
        ratio(loaded, cell),
        median(inside),
    )


def first_turns_and_warm_rounds(
    ws: Workspace,
) -> tuple[dict[str, list[dict]], dict[str, list[float]], dict[str, list[float]], dict]:
    """Rows 2-5, interleaved: each repeat runs a delayed and an immediate first-turn process and two warm
    processes, one starting a new session each turn and one continuing its session (the order rotating), so
    that a slow spell of the machine does not land on one figure only."""

    def first(delay: float) -> dict:
        cfg = {"load": "%load_ext shiro_kernel", "delay": delay, "cell": TURN}
        return ws.run_cells(sys.executable, cfg, expect_path="/v1/responses", expect_calls=1)

    def pooled(runs: list[tuple[dict[str, list[float]], dict]]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for result, _shape in runs:
            for key, times in result.items():
                out.setdefault(key, []).extend(times)
        return out

    first(0)  # bytecode and caches of a first-ever run are not what a user's kernel start sees
    delayed, immediate, warm, cont = interleave(
        COLD_REPEATS,
        lambda: first(2.0),
        lambda: first(0.0),
        lambda: warm_rounds(ws, TURN_NEW),
        lambda: warm_rounds(ws, TURN),
    )
    return {"delayed": delayed, "immediate": immediate}, pooled(warm), pooled(cont), warm[-1][1]


def warm_rounds(ws: Workspace, turn: str) -> tuple[dict[str, list[float]], dict]:
    cfg = {"turn": turn, "warmup_turns": 3, "sdk_warmup": SDK_WARMUP, "rounds": WARM_ROUNDS}
    before = len(ws.fake.requests)
    with tempfile.TemporaryFile(mode="w+") as stderr:
        body_file = Path(ws.tmp / "body.json")
        proc = subprocess.Popen(
            [sys.executable, "-c", WARM_CHILD, json.dumps(cfg)],
            env=ws.env(),
            cwd=ws.fresh_cwd(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        result, turn_bodies, sdk_from = None, [], 0

        def check_same_body(sdk_calls: list) -> None:
            """The SDK posts of a round must carry exactly the body of that round's turn."""
            if turn_bodies and any(rec.body != turn_bodies[-1].body for rec in sdk_calls):
                raise RuntimeError("an SDK call did not post the same body as the turn")

        for line in proc.stdout:
            if line.startswith("@@BODY"):
                check_same_body(ws.fake.requests[sdk_from:-1])
                turn = ws.fake.requests[-1]
                if turn.path != "/v1/responses" or not turn.stream:
                    raise RuntimeError(f"the last request was not a streamed turn: {turn.path}")
                turn_bodies.append(turn)
                sdk_from = len(ws.fake.requests)
                body_file.write_bytes(turn.raw)
                proc.stdin.write(f"{body_file}\n")
                proc.stdin.flush()
            elif line.startswith("@@RESULT "):
                result = json.loads(line[len("@@RESULT ") :])
        proc.wait(timeout=60)
        if result is None:
            stderr.seek(0)
            raise RuntimeError(f"warm child failed (exit {proc.returncode}):\n{stderr.read()[-3000:]}")
        check_same_body(ws.fake.requests[sdk_from:])
    n_calls = (1 + cfg["warmup_turns"]) + 5 * SDK_WARMUP + WARM_ROUNDS * 6  # a turn and five SDK variants a round
    check_calls(ws.requests_since(before), "/v1/responses", n_calls)
    last = turn_bodies[-1]
    shape = {
        "bytes": len(last.raw),
        "items": len(last.body.get("input") or []),
        "tools": len(last.body.get("tools") or []),
    }
    return result, shape


def main() -> None:
    started = time.perf_counter()
    with Workspace() as ws:
        load = load_ext_vs_bare(ws)
        cold, warm, cont, shape = first_turns_and_warm_rounds(ws)
        opened = ws.preconnect_ports()
    load_line = median([r["load"] for rs in cold.values() for r in rs])
    first_delayed = median([r["first"] for r in cold["delayed"]])
    first_now = median([r["first"] for r in cold["immediate"]])

    def on_warm_connection(runs: list[dict]) -> str:
        """In how many processes the first turn's model call went over the connection the warm-up opened."""
        n = sum(r["requests"][0].port in opened for r in runs)
        return f"{n} of {len(runs)} processes"

    turn, untyped, raw = median(warm["turn"]), median(warm["untyped"]), median(warm["raw_bytes"])
    model, save = median(warm["model"]), median(warm["save"])
    rest = median([t - m - v for t, m, v in zip(warm["turn"], warm["model"], warm["save"], strict=True)])
    typed, typed_eb = median(warm["typed"]), median(warm["typed_extra_body"])
    in_cell = median(warm["untyped_cell"])
    cont_turn, cont_untyped, cont_cell = median(cont["turn"]), median(cont["untyped"]), median(cont["untyped_cell"])

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    r_first = first_delayed / turn
    rows = [
        (
            "IPython start + shiro_kernel loaded (what %load_ext calls) vs bare start",
            f"{ms(load.extension)} vs {ms(load.bare)} (x{load.r_extension:.2f})",
            f"<= x1.05: {verdict(load.r_extension <= 1.05)}",
        ),
        ("  of it: load_extension itself (timed in the process)", ms(load.inside), "-"),
        (
            "IPython start + %load_ext shiro_kernel as the first cell vs an empty first cell",
            f"{ms(load.loaded)} vs {ms(load.cell)} (x{load.r_cell:.2f})",
            "-",
        ),
        (
            "an empty first cell vs a bare start (IPython's own first-cell cost)",
            f"{ms(load.cell)} vs {ms(load.bare)} ({(load.cell - load.bare) * 1000:+.0f} ms, paid by any first cell)",
            "-",
        ),
        (
            "%load_ext as the first cell, in a folder with a .mcp.json",
            f"{ms(load.mcp)} (x{load.mcp / load.loaded:.2f} without it)",
            "unchanged (issue 16): the mcp SDK is never imported (asserted in every run); the ratio is noise",
        ),
        ("%load_ext shiro_kernel line alone (in-process, warm-up on)", ms(load_line), "-"),
        (
            "first %shiro --wait hi, 2 s after %load_ext",
            f"{ms(first_delayed)} (x{r_first:.2f} a warm turn)",
            f"<= x1.5 a warm turn: {verdict(r_first <= 1.5)}",
        ),
        (
            "  its model call on the connection the warm-up opened (GET /v1/models, no key)",
            on_warm_connection(cold["delayed"]),
            "-",
        ),
        (
            "first %shiro --wait hi, right after %load_ext",
            f"{ms(first_now)} (x{first_now / turn:.1f} a warm turn)",
            "reported",
        ),
        (
            "warm one-step turn (same process, after a first turn)",
            f"{ms(turn)} (x{turn / untyped:.2f} the untyped post)",
            "reported: the goal (<= x1.5) is judged on the turn loop, first table",
        ),
        (
            "  of it: the model call (our post, its events decoded and parsed)",
            f"{ms(model)} (x{model / untyped:.2f} the untyped post)",
            "-",
        ),
        ("  of it: the record written and fsync'd before the footer says saved", ms(save), "-"),
        ("  of it: the rest (IPython's cell, the magic, the session, the display)", ms(rest), "-"),
        ("same body, SDK without typed parsing (SSE events as dicts)", ms(untyped), "-"),
        ("same body, SDK without typed parsing (raw SSE bytes)", ms(raw), "-"),
        (
            "same body, SDK without typed parsing, run as a notebook cell",
            f"{ms(in_cell)} (turn is x{turn / in_cell:.2f} of it)",
            "-",
        ),
        (
            "warm turn continuing its session (%shiro --wait hi), same process",
            f"{ms(cont_turn)} (x{cont_turn / cont_untyped:.2f} the untyped post, x{cont_turn / cont_cell:.2f} as a cell)",
            "reported",
        ),
        (
            "same body, SDK typed streaming (fields as arguments)",
            f"{ms(typed)} (turn is x{turn / typed:.2f} of it)",
            "-",
        ),
        (
            "same body, SDK typed streaming (body as extra_body)",
            f"{ms(typed_eb)} (turn is x{turn / typed_eb:.2f} of it)",
            "-",
        ),
    ]
    items = shape["items"]
    notes = [
        "",
        f"Medians. Load: {LOAD_PAIRS} interleaved rounds of five fresh processes, with SHIRO_NO_WARMUP=1 (the process",
        "exits at once and would cut the warm-up thread short); a ratio is the median of the rounds' ratios (a round's",
        "processes run back to back). On this shared 2-core machine a process start varies by more than the",
        "load costs (timed in the process: second row), so the first row moves by a few percent from run to run.",
        "`%load_ext` calls the extension manager's load_extension, which the first row",
        "calls directly; running it in a cell adds the cost of IPython's first cell, which any first cell pays (third",
        "row). The %load_ext line alone is timed inside the first-turn",
        f"processes, warm-up on. First turns: {COLD_REPEATS} fresh processes per variant, interleaved, each in a new",
        "folder (nothing to resume); their warm-up opens the connection to the server (one GET /v1/models without",
        "the key, answered 401); the row under the first turn counts the processes whose model call went over it.",
        f"Warm rows: {WARM_ROUNDS} rounds in each of {COLD_REPEATS} processes (pooled),",
        "interleaved with the first-turn processes; each round a `%shiro --wait --new hi` and SDK calls posting",
        (
            f"the very body that turn sent ({shape['bytes'] / 1000:.1f} kB: {items} input "
            f"item{'s' if items != 1 else ''}, {shape['tools']} tools)."
        ),
        f"The continuing turn: {WARM_ROUNDS} rounds in each of {COLD_REPEATS} more processes, the same SDK calls on its",
        "body (its session grows by two messages a turn); no session switch (lease) on its path.",
        "SDK untyped: client.post('/responses', body=..., stream=True, cast_to=object, stream_cls=openai.Stream[object]);",
        "raw SSE bytes: the same with cast_to=<the SDK's http Response>, iter_bytes(); as a notebook cell: the untyped",
        "post called from shell.run_cell, as the turn is (IPython's cell and its history-saving thread included).",
        "The warm cell is reported; issue 15's goal for a warm one-step turn is judged on the turn loop (first",
        'table), because the cell also writes and fsyncs the session record before its footer says "Saved", which',
        "the fault tests hold it to (what a footer says is saved is on disk when the cell ends).",
        "Fake server: 127.0.0.1, in the",
        "benchmark process. Children cache bytecode as a user's kernel does (PYTHONDONTWRITEBYTECODE unset).",
        f"(this script: {time.perf_counter() - started:.0f} s)",
    ]
    print(table(("measure", "figure", "goal (issue 15)"), rows, notes))


if __name__ == "__main__":
    main()
