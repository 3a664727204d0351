"""The private values' boundary (issue 42 §1): what masking a request costs.

    .venv/bin/python benchmarks/bench_private.py

1. A session's mask of 100,000 private values (e-mail addresses, names, ids): giving them their stand-ins (a keyed
   hash each) and building the one Aho-Corasick automaton of every form they may be sent in (raw, repr, JSON, HTML).
2. Masking a 100 kB request (printed frames and JSON holding 400 of the values among other text) against them:
   the median of 30, the goal ≤ 10 ms; and the same text with no private value in it.
3. Reading the values from a kernel's namespace (``collect``): a 100,000-row frame whose ``email`` column is
   private, as a step does before each request.
4. The same request masked again after 1,000 more values were added: the same bytes (the prefix a cache serves
   stays byte-stable; a value's stand-in never changes within a session).
"""

from __future__ import annotations

import random
import statistics
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shiro_kernel.private.mask import Mask
from shiro_kernel.private.names import Name
from shiro_kernel.private.values import collect

VALUES = 100_000
REQUEST_BYTES = 100_000


def _word(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(string.ascii_lowercase, k=n))


def _values(rng: random.Random) -> dict[str, str]:
    out: dict[str, str] = {}
    while len(out) < VALUES:
        kind = len(out) % 3
        if kind == 0:
            out[f"{_word(rng, 6)}.{_word(rng, 7)}@{_word(rng, 5)}.com"] = "email"
        elif kind == 1:
            out[f"{_word(rng, 5).title()} {_word(rng, 8).title()}"] = "name"
        else:
            out[f"{rng.randrange(100, 999)}-{rng.randrange(10, 99)}-{rng.randrange(1000, 9999)}"] = "ssn"
    return out


def _request(rng: random.Random, values: list[str], with_values: bool) -> str:
    lines = []
    while sum(map(len, lines)) < REQUEST_BYTES:
        value = rng.choice(values) if with_values and len(lines) % 5 == 0 else _word(rng, 12)
        lines.append(f'{len(lines):>6}  {value:<40} {rng.random() * 1000:>10.2f}  "note": "{_word(rng, 20)}"')
    return "\n".join(lines)[:REQUEST_BYTES]


def _ms(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    rng = random.Random(42)
    values = _values(rng)
    mask = Mask("bench-key")
    t = time.perf_counter()
    mask.add(values)
    stand_ins = time.perf_counter() - t
    t = time.perf_counter()
    mask.mask("warm")
    built = time.perf_counter() - t
    listed = list(values)
    text = _request(rng, listed, with_values=True)
    plain = _request(rng, listed, with_values=False)
    masked, count = mask.mask(text)
    scan = _ms(lambda: mask.mask(text), 30)
    scan_plain = _ms(lambda: mask.mask(plain), 30)

    import pandas as pd

    frame = pd.DataFrame({"email": listed[0::3][:VALUES], "spend": [rng.random() for _ in listed[0::3][:VALUES]]})
    frame = pd.concat([frame] * 3, ignore_index=True).head(VALUES)
    names = [Name.parse("email")]
    read = _ms(lambda: collect({"df": frame}, names), 5)
    mask.add({f"later{i}@example.com": "email" for i in range(1000)})
    again, _ = mask.mask(text)

    rows = [
        ("private values in the session's mask", f"{len(values):,}"),
        ("their stand-ins (a keyed hash each)", f"{stand_ins * 1000:.0f} ms"),
        ("the automaton of every form (built once, again when values are added)", f"{built * 1000:.0f} ms"),
        (
            f"mask a {len(text) // 1000} kB request holding {count} of them (median of 30)",
            f"{scan:.2f} ms (goal <= 10 ms: {'met' if scan <= 10 else 'NOT met'})",
        ),
        (f"mask a {len(plain) // 1000} kB request holding none", f"{scan_plain:.2f} ms"),
        (f"read the values of a {len(frame):,}-row frame's private column (a step's look)", f"{read:.1f} ms"),
        ("the same request masked after 1,000 more values", "the same bytes" if again == masked else "CHANGED"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}} | figure")
    print(f"{'-' * width}-|-------")
    for name, figure in rows:
        print(f"{name:<{width}} | {figure}")


if __name__ == "__main__":
    main()
