"""Foundation figures, each a ratio measured side by side in one run (medians of repeats).

    .venv/bin/python benchmarks/bench_foundation.py

1. Proof that ``%load_ext shiro_kernel`` does not import ``openai`` (the warm-up thread off); the load time
   against a bare start is measured by ``bench_first_turn.py``.
2. A one-step turn against the ``openai`` SDK posting the same body to the same fake server without typed
   parsing (``client.post(..., cast_to=object)``, streamed events as dicts) — the floor for any client of the
   SDK — and against the SDK's typed call (``client.responses.create(input=...)``), non-streaming and
   streaming. Issue 15's goal for a warm one-step turn (<= 1.5 times the untyped post) is judged here, on the
   turn loop: the whole ``%shiro`` cell around it also writes and fsyncs the session record before its footer
   says "Saved", which the fault tests hold it to (``bench_first_turn.py`` reports the cell).
3. Per-step overhead at 10 and 2,000 messages: our streamed step against the untyped post of the same
   history, as a difference and as a ratio; the goal (issue 15) is that the ratio at 2,000 messages stays
   within 1.5 times the ratio at 10. Two kinds of step: one in a running session (each run is the next
   turn of a session that started with that history: it adds a prompt and an answer, which the session's
   meter measures once; the post sends the very request that turn sent), and the first step of a session
   just resumed from disk (every message measured for the first time). Each
   pair of runs (ours, then the post) is timed back to back and the ratio is the median of the pairs'
   ratios, so a slow moment of this shared machine falls on both sides.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("SHIRO_HOME", tempfile.mkdtemp())
os.environ.setdefault("IPYTHONDIR", tempfile.mkdtemp())

from fakeopenai import FakeOpenAI, Reply

from shiro_kernel.provider.client import Provider, ProviderSettings
from shiro_kernel.session import Session
from shiro_kernel.tools import ToolContext, all_tools
from shiro_kernel.transcript import Message, TextPart, ToolCallPart, ToolResultPart
from shiro_kernel.turn import Turn, TurnOptions


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def paired(ours, theirs, repeat: int) -> tuple[float, float, float]:
    """Median times of ``ours`` and ``theirs`` run back to back ``repeat`` times, and the median of the
    pairs' ratios."""
    t_ours, t_theirs, ratios = [], [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        ours()
        t1 = time.perf_counter()
        theirs()
        t2 = time.perf_counter()
        t_ours.append(t1 - t0)
        t_theirs.append(t2 - t1)
        ratios.append((t1 - t0) / (t2 - t1))
    return statistics.median(t_ours), statistics.median(t_theirs), statistics.median(ratios)


def bench_load_ext() -> list[tuple[str, str]]:
    """The proof that loading imports no ``openai`` (timed against a bare start by bench_first_turn.py,
    in interleaved fresh processes)."""
    loaded = (
        "from IPython.core.interactiveshell import InteractiveShell as S; S.instance()"
        "; S.instance().run_cell('%load_ext shiro_kernel'); import sys; print('openai' in sys.modules)"
    )
    env = {**os.environ, "SHIRO_NO_WARMUP": "1"}
    imported = subprocess.run(
        [sys.executable, "-c", loaded], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    return [("openai imported by %load_ext (its time: see 'Loading and the first turn')", imported)]


def history(n: int) -> list[Message]:
    msgs: list[Message] = [Message.user("start")]
    i = 0
    while len(msgs) + 2 <= n + 1:  # whole call/result pairs: about n messages
        call = ToolCallPart(f"call_{i}", "inspect", '{"names": ["df"]}')
        msgs.append(Message("assistant", [TextPart(f"step {i}: looking at df"), call]))
        msgs.append(Message("tool", [ToolResultPart(call.call_id, "inspect", "DataFrame 3x1, x int64 " * 8)]))
        i += 1
    return msgs


def bench_turns(fake: FakeOpenAI, repeat: int = 30) -> list[tuple[str, str]]:
    import openai

    os.environ["OPENAI_API_KEY"] = "sk-bench"
    client = openai.OpenAI(api_key="sk-bench", base_url=fake.base_url, max_retries=0)
    tools = all_tools()
    rows = []
    for stream in (False, True):
        fake.default_reply = Reply(text="The mean is 2.0, computed from three rows.")
        provider = Provider(
            ProviderSettings(model="gpt-4o-mini", base_url=fake.base_url, stream=stream, max_retries=0), client=client
        )

        def turn_in(session: Session) -> None:
            Turn(
                session,
                provider,
                tools,
                ToolContext(root=ROOT),
                "You are a test.",
                TurnOptions(approval="auto"),
            ).run("what is the mean?")

        def ours(messages: list[Message]) -> None:
            turn_in(Session(messages=list(messages)))  # a session just built from these messages

        def sent(messages: list[Message]) -> dict[str, Any]:
            """The body our turn posts for this history (taken from the fake server's record): the SDK calls
            below post exactly it, pruning and all."""
            ours(messages)
            return dict(fake.requests[-1].body)

        def raw(body: dict[str, Any], typed: bool = False) -> None:
            """The SDK posting ``body``: without typed parsing (the floor), or typed (``input=``, as most code
            calls it)."""
            if typed:
                fields = {k: v for k, v in body.items() if k != "stream"}
                if stream:
                    for _ in client.responses.create(stream=True, **fields):
                        pass
                else:
                    client.responses.create(**fields)
            elif stream:
                events = client.post(
                    "/responses", body=body, cast_to=object, stream=True, stream_cls=openai.Stream[object]
                )
                for _ in events:
                    pass
            else:
                client.post("/responses", body=body, cast_to=object)

        label = "streaming" if stream else "non-streaming"
        body = sent([])
        for _warm in range(3):  # connections, imports, caches
            ours([])
            raw(body)
            raw(body, typed=True)
        t_ours, t_raw, ratio = paired(lambda: ours([]), lambda: raw(body), repeat)
        t_typed = median_time(lambda: raw(body, typed=True), repeat)
        rows.append(
            (
                f"one-step turn vs the untyped SDK post of the same body ({label})",
                f"{t_ours * 1000:.2f} ms vs {t_raw * 1000:.2f} ms (x{ratio:.2f}; "
                f"goal <= x1.5: {'met' if ratio <= 1.5 else 'NOT met'})",
            )
        )
        rows.append((f"the typed SDK call, same body ({label})", f"{t_typed * 1000:.2f} ms"))
        if stream:
            ratios: dict[tuple[str, int], float] = {}
            for n in (10, 2000):
                msgs = history(n)
                body = sent(msgs)
                running = Session(messages=list(msgs))

                def step_running(running: Session = running) -> None:
                    """The next turn of a running session (it grows by a prompt and an answer each run)."""
                    turn_in(running)

                def post_last() -> None:
                    raw(dict(fake.requests[-1].body))  # the very request the turn just sent

                step_running()
                k = 41 if n < 100 else 21
                for kind, fn, theirs in (
                    ("running", step_running, post_last),
                    ("resumed", lambda msgs=msgs: ours(msgs), lambda body=body: raw(body)),
                ):
                    t_o, t_b, ratio = paired(fn, theirs, k)
                    ratios[(kind, n)] = ratio
                    what = (
                        f"a running session from {len(msgs):,} messages, +2 a turn"
                        if kind == "running"
                        else f"first step of a session resumed with {len(msgs):,} messages"
                    )
                    rows.append(
                        (
                            f"{what} ({len(body['input']):,} sent): ours vs untyped",
                            f"{t_o * 1000:.1f} ms vs {t_b * 1000:.1f} ms ({(t_o - t_b) * 1000:+.2f} ms, x{ratio:.2f})",
                        )
                    )
                t_t = median_time(lambda body=body: raw(body, typed=True), 3 if n > 100 else k)
                rows.append(
                    (
                        f"step with {len(msgs):,} messages: the typed SDK call, same body",
                        f"{t_t * 1000:.1f} ms (x{t_t / t_b:.1f} of the untyped post)",
                    )
                )
            for kind in ("running", "resumed"):
                growth = ratios[(kind, 2000)] / ratios[(kind, 10)]
                goal = f"goal <= x1.5: {'met' if growth <= 1.5 else 'NOT met'}" if kind == "running" else "reported"
                rows.append(
                    (
                        f"per-step overhead, 2,000 vs 10 messages ({'running session' if kind == 'running' else 'first step after resume'})",
                        f"x{growth:.2f} ({goal})",
                    )
                )
    return rows


def main() -> None:
    rows = bench_load_ext()
    with FakeOpenAI() as fake:
        fake.validate = False  # the spec validator is a test-time check; it would dominate the timing
        rows += bench_turns(fake)
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)} | figure")
    print(f"{'-' * width}-|-------")
    for name, figure in rows:
        print(f"{name.ljust(width)} | {figure}")


if __name__ == "__main__":
    main()
