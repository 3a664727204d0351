"""Pruning, the context meter and the request validator: what they cost per model step.

    .venv/bin/python benchmarks/bench_prune.py

1. ``prune_to_fit`` on a ~120k-token transcript over the threshold (reasoning strip suffices, and the
   ladder), against a full ``estimate_tokens``.
2. The meter's incremental update per step (one new message) at 10 and at 2,000 messages, against a
   full re-serialisation.
3. ``rules.check_and_repair`` on a healthy 2,000-message history (returns the same list object).
Medians of repeats, in milliseconds.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shiro_kernel.context import rules
from shiro_kernel.context.estimate import estimate_tokens
from shiro_kernel.context.meter import TokenMeter
from shiro_kernel.context.prune import prune_to_fit
from shiro_kernel.transcript import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart


def median_ms(fn, repeat: int = 15) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def transcript(messages: int, *, output: int = 200, reasoning: int = 200) -> list[Message]:
    msgs = [Message.user("analyse the sales data and fix the notebook")]
    i = 0
    while len(msgs) < messages:
        msgs.append(
            Message(
                "assistant",
                [
                    ReasoningPart(["thinking " * (reasoning // 9)], "gAAAAB" + "x" * 40, item_id=f"rs_{i:050d}"),
                    TextPart(f"Step {i}: looking at the next file.", item_id=f"msg_{i:050d}"),
                    ToolCallPart(
                        f"call_{i}", "read_file", json.dumps({"path": f"src/m{i}.py"}), item_id=f"fc_{i:050d}"
                    ),
                ],
            )
        )
        msgs.append(Message("tool", [ToolResultPart(f"call_{i}", "read_file", ("line of code\n" * 200)[:output])]))
        i += 1
    return msgs[:messages]


def main() -> None:
    print("bench_prune (medians, ms)")
    # 1. a ~120k-token transcript
    big = transcript(700, output=560, reasoning=120)
    est = estimate_tokens(big)
    print(f"  transcript: {len(big)} messages, ~{est:,} estimated tokens")
    print(f"  estimate_tokens (full serialisation):        {median_ms(lambda: estimate_tokens(big), 7):8.2f}")
    strip_threshold = int(est * 0.9)
    res = prune_to_fit(big, strip_threshold)
    ms = median_ms(lambda: prune_to_fit(big, strip_threshold), 7)
    print(
        f"  prune_to_fit, reasoning strip suffices:      {ms:8.2f}"
        f"   ({res.before} -> {res.after} messages, {res.tokens_after:,} tokens)"
    )
    ladder_threshold = 60_000
    res = prune_to_fit(big, ladder_threshold)
    print(
        f"  prune_to_fit, ladder (threshold 60k):        {median_ms(lambda: prune_to_fit(big, ladder_threshold), 7):8.2f}"
        f"   ({res.before} -> {res.after} messages, rung {res.rung}, {res.tokens_after:,} tokens)"
    )
    # the same two, as a running session's next step: one more call and result, the session's meter
    # having measured the rest before (the new pair is taken off again after each run)
    step = transcript(4)[1:3]
    for label, threshold in (
        ("reasoning strip suffices", strip_threshold),
        ("ladder (threshold 60k)", ladder_threshold),
    ):
        meter = TokenMeter()
        prune_to_fit(big, threshold, meter=meter)

        def next_step(threshold: int = threshold, meter: TokenMeter = meter) -> None:
            big.extend(step)
            prune_to_fit(big, threshold, meter=meter)
            del big[-2:]

        print(f"  {'  the next step, with the session meter:':<45}{median_ms(next_step, 15):8.2f}   ({label})")
    meter = TokenMeter()
    meter.estimate(big)
    print(
        f"  prune_to_fit under threshold, warm meter:    "
        f"{median_ms(lambda: prune_to_fit(big, 10**9, meter=meter)):8.3f}"
    )

    # 2. the meter per step
    for n in (10, 2_000):
        base = transcript(n)
        meter = TokenMeter()
        meter.estimate(base)
        extra = transcript(4)[1:3]

        def one_step() -> None:
            base.append(extra[0])  # a new message arrives, as in a step
            meter.estimate(base)
            base.pop()
            meter.estimate(base)

        step_ms = median_ms(one_step, 21) / 2
        full_ms = median_ms(lambda: estimate_tokens(base), 21)
        assert meter.estimate(base) == estimate_tokens(base)
        print(
            f"  meter update per step at {n:>5} messages:      {step_ms:8.3f}   (full re-serialisation {full_ms:.3f})"
        )

    # 3. the validator on a healthy history
    healthy = transcript(2_000)
    out, repairs = rules.check_and_repair(healthy, store=True)
    assert out is healthy and repairs == []
    print(
        f"  check_and_repair, healthy 2,000 messages:    "
        f"{median_ms(lambda: rules.check_and_repair(healthy, store=True), 21):8.3f}   (same list returned)"
    )


if __name__ == "__main__":
    main()
