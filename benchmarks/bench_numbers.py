"""Anchoring an answer's numbers to the turn's tool outputs (issue 28): what the check costs.

    .venv/bin/python benchmarks/bench_numbers.py

A 2,000-word answer with ~100 numbers to check (half read off the outputs: rounded, as percentages, in
millions; half made up) over 1 MB of outputs from 45 calls: DataFrame-like text tables of floats that are
all distinct, HTML table displays, log lines.

1. ``find_numbers`` on the answer alone.
2. ``check_turn`` cold: the outputs parsed inside the call.
3. The same split as a turn runs it: ``OutputIndex.add_result`` once per result as it arrives, then
   ``check_turn`` at the end of the turn with that index (what the answer waits for).
Medians of repeats, in milliseconds.

The wiring (``numbers.turn_check.LastAnswer.follow``, the agent's events going through a ``TurnNumbers``):

4. Per event: a streamed answer of 500 and of 5,000 text deltas fed through the wrapper against the same
   events passed on bare (the cost per delta must not grow with the answer: the text is joined once, at
   the end), and a session of 10 or 5,000 messages behind it (the wrapper never reads the session).
5. Whole turns through ``%shiro`` in an ``InteractiveShell`` against tests/fakeopenai.py (one python call
   printing the issue's growth, then its answer), ``Shiro.check_numbers`` on and off interleaved, after
   a session of 10 and of 1,000 messages: the median wall time per turn (noisy: a machine's load moves it
   by more than the check costs), and the time spent in ``TurnNumbers.feed`` and ``.event`` within those
   turns (the wiring's own cost, which must not grow with the session).
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shiro_kernel.events import Pipe, TextDelta, ToolEnd, ToolStart, TurnEnd, Usage
from shiro_kernel.numbers.claims import find_numbers
from shiro_kernel.numbers.tool_outputs import OutputIndex
from shiro_kernel.numbers.turn_check import LastAnswer, check_turn
from shiro_kernel.transcript import Message, TextPart, ToolCallPart, ToolResultPart

ISSUE_OUTPUT = "cocoa -0.151335, coffee 0.131417, tea 0.050296"
ISSUE_ANSWER = "**Coffee** grew the most … (+16.4 %). Tea was flat and cocoa fell 3 %."


def median_ms(fn, repeat: int = 15) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def table_text(rng: random.Random, rows: int) -> str:
    head = "        region     units       revenue      growth     share\n"
    lines = [
        f"{i:<6}{rng.choice(['north', 'south', 'east', 'west']):>8}{rng.randint(10, 99_999):>10}"
        f"{rng.uniform(100, 2e6):>14.2f}{rng.uniform(-0.5, 0.5):>12.6f}{rng.random():>10.6f}"
        for i in range(rows)
    ]
    return head + "\n".join(lines)


def table_html(rng: random.Random, rows: int) -> str:
    cells = "\n".join(
        f"    <tr>\n      <th>{i}</th>\n      <td>{rng.uniform(100, 2e6):.2f}</td>\n      <td>{rng.uniform(-1, 1):.6f}</td>\n"
        f"      <td>{rng.randint(0, 10**6):,}</td>\n    </tr>"
        for i in range(rows)
    )
    return (
        '<div><style scoped>.dataframe tbody tr th {vertical-align: top;}</style><table border="1" class="dataframe">'
        f"\n  <tbody>\n{cells}\n  </tbody>\n</table>\n</div>"
    )


def outputs(rng: random.Random, total: int = 1_000_000) -> list[ToolResultPart]:
    results: list[ToolResultPart] = []
    size = 0
    while size < total:
        i = len(results)
        if i % 3 == 2:
            text = "\n".join(
                f"[{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}] step {j}: read {rng.randint(1, 10**6):,} rows "
                f"in {rng.uniform(0.01, 9):.3f} s ({rng.uniform(1, 500):.1f} MB/s)"
                for j in range(300)
            )
            result = ToolResultPart(f"call_{i}", "shell", text)
        else:
            html = table_html(rng, 120) if i % 3 == 1 else ""
            result = ToolResultPart(
                f"call_{i}",
                "python",
                table_text(rng, 300),
                displays=[{"data": {"text/plain": "<DataFrame>", "text/html": html}, "metadata": {}}] if html else [],
            )
        size += len(result.output) + sum(len(d["data"].get("text/html", "")) for d in result.displays)
        results.append(result)
    return results


def answer(
    rng: random.Random, results: list[ToolResultPart], numbers: int = 100, words: int = 2_000
) -> tuple[str, list[bool]]:
    """Prose with ``numbers`` numbers: half read off the outputs and presented as a model would (a growth
    as a percentage, a revenue in dollars or millions, rounded), half made up; and which were read off."""
    rows = [line.split() for r in results if r.name == "python" for line in r.output.splitlines()[1:]]
    revenue, growth = [float(row[3]) for row in rows], [float(row[4]) for row in rows]
    filler = ["the", "analysis", "shows", "that", "across", "regions", "and", "months", "the", "figures", "point"]
    out: list[str] = []
    read_off: list[bool] = []
    for k in range(numbers):
        out += rng.choices(filler, k=words // numbers - 2)
        if k % 2:
            g, r = rng.choice(growth), rng.choice(revenue)
            shown = [f"{g * 100:+.1f} %", f"${r:,.2f}", f"{r / 1e6:.2f} million", f"{r:,.0f}"][k // 2 % 4]
        else:
            shown = [f"{rng.uniform(1, 99):.1f} %", f"{rng.randint(100, 99_999):,}", f"${rng.uniform(1, 9):.1f}M"][
                k // 2 % 3
            ]
        out += ["was", shown + ","]
        read_off.append(bool(k % 2))
    return " ".join(out), read_off


def main() -> None:
    rng = random.Random(28)
    results = outputs(rng)
    size = sum(len(r.output) + sum(len(d["data"].get("text/html", "")) for d in r.displays) for r in results)
    text, read_off = answer(rng, results)
    claims = find_numbers(text)
    numbers = check_turn(text, "which region grew the most?", results)
    assert len(numbers) == len(read_off)
    real = sum(n["found"] for n, r in zip(numbers, read_off) if r)
    chance = sum(n["found"] for n, r in zip(numbers, read_off) if not r)
    print("bench_numbers (medians, ms)")
    print(
        f"  answer: {len(text.split()):,} words, {len(claims)} numbers to check; "
        f"outputs: {len(results)} calls, {size / 1e6:.2f} MB"
    )
    print(
        f"  found: {real} of the {sum(read_off)} read off the outputs; {chance} of the {len(read_off) - sum(read_off)} "
        "made up, by chance (1 MB of distinct random values holds most 2-3 digit numbers)"
    )
    print(f"  find_numbers on the answer:                  {median_ms(lambda: find_numbers(text)):8.2f}")
    cold = median_ms(lambda: check_turn(text, "which region grew the most?", results), 7)
    print(f"  check_turn cold (parses the 1 MB itself):    {cold:8.2f}")

    def feed() -> OutputIndex:
        index = OutputIndex()
        for result in results:
            index.add_result(result)
        return index

    total = median_ms(feed, 7)
    per_call = statistics.median(
        median_ms(lambda r=r: OutputIndex().add_result(r), 5) for r in results[: len(results) // 2]
    )
    index = feed()
    end = median_ms(lambda: check_turn(text, "which region grew the most?", index), 21)
    print(
        f"  OutputIndex.add_result, per call as it ends: {per_call:8.2f}   ({total:.1f} over the {len(results)} calls)"
    )
    print(f"  check_turn at the end of the turn (indexed): {end:8.2f}")
    wiring_per_event(text)
    wiring_per_turn()


def streamed(text: str, deltas: int) -> list[object]:
    """A turn's events: one python call with the issue's output, then ``text`` in ``deltas`` pieces."""
    call = ToolCallPart("call_growth", "python", '{"code": "print(growth)"}')
    size = max(len(text) // deltas, 1)
    pieces = [text[i : i + size] for i in range(0, size * deltas, size)]
    return [
        ToolStart(call),
        ToolEnd(call, ToolResultPart("call_growth", "python", ISSUE_OUTPUT), 0.01),
        *(TextDelta(p or " ") for p in pieces),
        TurnEnd("answered", Usage(0, 0, None)),
    ]


def wiring_per_event(text: str) -> None:
    sink: list[object] = []
    print("wiring: the events of one turn through LastAnswer.follow (medians, µs)")
    for deltas, messages in ((500, 10), (5_000, 10), (5_000, 5_000)):
        session = [Message.user(f"question {i}") for i in range(messages)]  # held, never read by the wrapper
        events = streamed(text, deltas)

        def bare() -> None:
            sink.clear()
            for event in events:
                sink.append(event)

        def wrapped() -> None:
            sink.clear()
            emit = Pipe([LastAnswer().check("which region grew the most?", session, True), sink.append])
            for event in events[:-1]:
                emit(event)

        def end() -> None:
            sink.clear()
            emit = Pipe([LastAnswer().check("which region grew the most?", session, True), sink.append])
            for event in events:
                emit(event)

        base, fed, whole = median_ms(bare, 31), median_ms(wrapped, 31), median_ms(end, 31)
        per = (fed - base) * 1000 / deltas
        print(
            f"  {deltas:>5} deltas, a session of {messages:>5} messages: {per:6.3f} per delta over passing it on; "
            f"the TurnEnd's check {(whole - fed) * 1000:7.1f}"
        )


def timed(spent: list[float], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` adding the seconds each call takes to ``spent[0]``."""

    def inner(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0

    return inner


def wiring_per_turn(rounds: int = 20) -> None:
    """Real turns, check on and off interleaved, in a short and a long session: the wall time of each turn,
    and the time spent in the wiring itself (TurnNumbers.feed and .event, timed inside those turns)."""
    import os
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from fakeopenai import Call, FakeOpenAI, Reply
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from shiro_kernel.numbers.turn_check import TurnNumbers

    spent = [0.0]
    TurnNumbers.feed = timed(spent, TurnNumbers.feed)  # type: ignore[method-assign]
    TurnNumbers.event = timed(spent, TurnNumbers.event)  # type: ignore[method-assign]
    fake = FakeOpenAI().start()
    fake.validate = False  # the spec validator is a test-time check; it would dominate the timing
    tmp = tempfile.mkdtemp(prefix="bench-numbers-")
    os.environ.update(
        SHIRO_HOME=tmp, OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=fake.base_url, SHIRO_MODEL="gpt-4o-mini"
    )
    os.environ["SHIRO_NO_WARMUP"] = "1"
    os.chdir(tmp)
    shell = InteractiveShell.instance()
    for line in ("%load_ext shiro_kernel", '%config Shiro.approval = "auto"'):
        shell.run_cell(line)
    agent = shell.magics_manager.registry["ShiroMagics"].agent
    print("wiring: whole turns through %shiro (one python call, then the issue's answer; medians, ms)")
    try:
        for history in (10, 1_000):
            fake.enqueue(Reply(text="ok"))
            with capture_output():
                shell.run_cell("%shiro --new hello")  # a new session, then filled
            agent.current.session.messages.extend(
                Message("user" if i % 2 == 0 else "assistant", [TextPart(f"message {i}")]) for i in range(history)
            )
            size = len(agent.current.session.messages)
            times: dict[bool, list[float]] = {True: [], False: []}
            wiring: list[float] = []
            for r in range(rounds * 2):
                on = r % 4 in (0, 3)  # on, off, off, on: neither always goes first
                shell.run_cell(f"%config Shiro.check_numbers = {on}")
                fake.enqueue(
                    Reply(tool_calls=[Call("python", {"code": f"print({ISSUE_OUTPUT!r})"})]), Reply(text=ISSUE_ANSWER)
                )
                spent[0] = 0.0
                with capture_output() as cap:
                    t0 = time.perf_counter()
                    shell.run_cell("%shiro which product grew the most?")
                    times[on].append(time.perf_counter() - t0)
                if on:
                    wiring.append(spent[0])
                marked = "+16.4 %⚠" in "".join(o.data.get("text/plain", "") for o in cap.outputs)
                assert marked == on, cap.stdout
            on_ms, off_ms = (statistics.median(times[k]) * 1000 for k in (True, False))
            print(
                f"  a session of {size:>5} messages (+{4 * rounds * 2} as it goes): turn with the check {on_ms:6.1f}, "
                f"without {off_ms:6.1f}; in the wiring {statistics.median(wiring) * 1000:.3f} of the turn"
            )
    finally:
        shell.run_cell("%unload_ext shiro_kernel")
        fake.stop()


if __name__ == "__main__":
    main()
