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
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shiro_kernel.numbers import OutputIndex, check_turn, find_numbers
from shiro_kernel.transcript import ToolResultPart


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


if __name__ == "__main__":
    main()
