"""How much of each prompt a real inference engine reuses from its cache over a 10-turn session (issue 32):

    .venv/bin/python benchmarks/bench_engine_cache.py

llama-cpp-python's server with SmolLM2-135M (``tests/realengine.py``), pointed at with only ``base_url`` and
``model`` (and ``max_output_tokens`` so the 135M model's answers stay short), through the real agent in an
in-process IPython shell. The engine logs, for every generation, how many of the prompt's tokens matched the
prompt it last evaluated (``Llama.generate: 507 prefix-match hit, remaining 16 prompt tokens to eval``): the share
reused is hit / (hit + remaining), per request after the first. shiro keeps the instructions byte-stable and the
per-step state after the conversation, so each request should begin with the whole previous one. Goal: ≥ 90 %.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ["SHIRO_NO_WARMUP"] = "1"
os.environ.setdefault("SHIRO_HOME", tempfile.mkdtemp())

GOAL = 0.90
TURNS = 10


def main() -> None:
    try:
        from realengine import MODEL, Engine, model_file

        model_file()
    except (ImportError, RuntimeError) as exc:
        print(f"(no real engine here: {exc})")
        return
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    engine = Engine(n_ctx=4096).start()
    try:
        shell = InteractiveShell.instance()
        with capture_output():
            shell.run_cell("%load_ext shiro_kernel")
            shell.run_cell(f'%config Shiro.base_url = "{engine.base_url}"')
            shell.run_cell(f'%config Shiro.model = "{MODEL}"')
            shell.run_cell("%config Shiro.max_output_tokens = 24")
        started = time.perf_counter()
        for n in range(TURNS):
            with capture_output():
                shell.run_cell(f"%shiro question {n}: what is {n} times {n}?")
        seconds = time.perf_counter() - started
        # the engine logs a prefix line for each request that found one: every request after the first
        later = engine.prefix_hits()
        asked = [r for r in engine.requests() if r.path == "/v1/chat/completions" and r.status == 200]
    finally:
        engine.stop()
    shares = [hit / (hit + rest) for hit, rest in later if hit + rest]
    total = sum(h for h, _ in later) / max(1, sum(h + r for h, r in later))
    prompts = [h + r for h, r in later]
    print("| figure | value |")
    print("|---|---|")
    print(f"| requests answered (one per turn; the first turn's 404 on /v1/responses aside) | {len(asked)} |")
    print(f"| prompt tokens per request, second → last | {prompts[0]:,} → {prompts[-1]:,} |")
    print(f"| share of prompt tokens reused, requests 2–{len(asked)} | **{total:.1%}** (goal ≥ {GOAL:.0%}) |")
    print(f"| per request: lowest, median | {min(shares):.1%}, {statistics.median(shares):.1%} |")
    print(f"| tokens evaluated per request after the first (median) | {statistics.median(r for _, r in later):,.0f} |")
    print(f"| wall time of the {TURNS} turns (2 shared cores, CPU) | {seconds:.1f} s |")
    print()
    print(
        f"{'goal met' if total >= GOAL else 'GOAL MISSED'}: {total:.1%} of prompt tokens reused from the engine's cache."
    )


if __name__ == "__main__":
    main()
