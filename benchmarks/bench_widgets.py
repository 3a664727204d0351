"""Widget updates per second while a background turn streams 5,000 tokens.

    .venv/bin/python benchmarks/bench_widgets.py

The full live path minus the network: a worker thread emits 5,000 ``TextDelta`` events (flat out, and
paced at ~2,500 tokens/s like a fast model) through the :class:`~shiro_kernel.ui.live.Inbox` into a real
asyncio loop on the main thread, where a :class:`~shiro_kernel.ui.widgets.TurnView` folds them in and
redraws (``Throttle(1/30)``). Every comm message a frontend would receive is counted with a recording
comm. Also reported: the cost of one redraw late in the answer, and the main thread's busy fraction.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import comm

from shiro_kernel.events import TextDelta, TurnEnd, Usage
from shiro_kernel.ui.live import Inbox

SENT: list = []


class RecordingComm:
    def __init__(self, *a, **k) -> None:
        self.comm_id = uuid.uuid4().hex
        self.kernel = object()

    def send(self, data=None, metadata=None, buffers=None):
        SENT.append((time.monotonic(), data))

    def on_msg(self, cb):
        pass

    def close(self, *a, **k):
        pass


comm.create_comm = RecordingComm  # type: ignore[assignment]

from shiro_kernel.ui.widgets import TurnView

WORDS = [
    "the",
    "mean",
    "of",
    "df.x",
    "is",
    "**2.0**;",
    "grouping",
    "by",
    "`region`",
    "shows",
    "the",
    "north",
    "leads",
    "|",
]


def run(tokens: int, rate: float | None) -> dict[str, float]:
    loop = asyncio.new_event_loop()
    inbox = Inbox(loop)
    view = TurnView(call_later=inbox.call_later)
    view.running()
    SENT.clear()
    busy = [0.0]
    in_drain = [False]
    finished = loop.create_future()
    original_drain = inbox.drain

    def drain() -> int:
        t = time.perf_counter()
        in_drain[0] = True
        try:
            n = original_drain()
        finally:
            in_drain[0] = False
        busy[0] += time.perf_counter() - t
        return n

    inbox.drain = drain  # type: ignore[method-assign]
    redraw = [0.0]
    original_flush = view.flush

    def flush() -> None:
        t = time.perf_counter()
        original_flush()
        spent = time.perf_counter() - t
        redraw[0] += spent
        if not in_drain[0]:  # a trailing redraw from the loop's timer
            busy[0] += spent

    view.flush = flush  # type: ignore[method-assign]

    def worker() -> None:
        start = time.monotonic()
        for i in range(tokens):
            word = WORDS[i % len(WORDS)] + (" " if i % 12 else "\n\n")
            inbox.post(lambda w=word: view.feed(TextDelta(w)))
            if rate:
                delay = start + (i + 1) / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        inbox.post(lambda: view.feed(TurnEnd("answered", Usage(10, tokens))))
        inbox.post(lambda: finished.set_result(None))

    started = time.monotonic()
    threading.Thread(target=worker, daemon=True).start()
    loop.run_until_complete(finished)
    elapsed = time.monotonic() - started
    loop.close()
    updates = [t for t, m in SENT if isinstance(m, dict) and m.get("method") == "update"]
    # the highest number of updates in any one-second window
    peak = 0
    j = 0
    for i, t in enumerate(updates):
        while updates[j] < t - 1.0:
            j += 1
        peak = max(peak, i - j + 1)
    t = time.perf_counter()
    original_flush()
    redraw_ms = (time.perf_counter() - t) * 1000
    return {
        "seconds": elapsed,
        "redraws": view.flushes,
        "messages": len(updates),
        "per_s": len(updates) / max(elapsed, 1.0),
        "peak_per_s": peak,
        "redraw_ms": redraw_ms,
        "busy": busy[0] / elapsed,
        "redraw_share": redraw[0] / elapsed,
        "chars": sum(len(e) for e in view.turn_log.entries if isinstance(e, str)),
    }


def main() -> None:
    for label, rate in (("flat out", None), ("paced 2,500 tok/s", 2500.0)):
        r = run(5000, rate)
        print(
            f"5,000 tokens, {label}: {r['seconds']:.2f} s, {r['redraws']} redraws, {r['messages']} widget "
            f"update messages = {r['per_s']:.1f}/s over max(1 s, run) (peak {r['peak_per_s']}/s in any 1 s window); "
            f"main thread busy {r['busy'] * 100:.0f}% (redraws {r['redraw_share'] * 100:.0f}%); one redraw at {r['chars']:,} chars: {r['redraw_ms']:.2f} ms"
        )


if __name__ == "__main__":
    main()
