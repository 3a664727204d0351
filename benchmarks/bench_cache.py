"""How much of each request a provider's prefix cache could serve (issue 27), per API, in two long sessions
run through the real agent (an in-process IPython shell, the real ``openai`` client, the fake server):

    .venv/bin/python benchmarks/bench_cache.py

1. A text session of 40 turns, each with a python call printing ~6 kB, past a 30k-token threshold; the task
   list changes every five turns (``todo_write``); the user edits and runs a notebook cell between turns.
2. A figure session of 12 turns, each plotting a figure (an image sent to the model).
3. The text session on Chat Completions against a local model's chat template that refuses the state as a
   system message after the conversation (:mod:`shiro_kernel.provider.state`): Qwen's, which takes one
   system message, at the start (the state then goes as a user note), and one that makes roles alternate
   (the note then joins a user message before it). The refused request is counted too.

For each request: its prompt as a cache sees it (tools, instructions, then each input item, stored items
resolved) and the longest prefix an earlier request of the session began with. The share is the sum of
those prefixes over the sum of the prompts; the limit is what an append-only history would allow (each
request beginning with the whole previous one). Also: how many requests missed more than half, and the
share of input tokens the fake priced as cached (OpenAI's rule: from 1,024 tokens, in steps of 128).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ["SHIRO_NO_WARMUP"] = "1"

from fakeopenai import Call, FakeOpenAI, Reply
from kernelutil import write_cells

GOAL, GOAL_OF_LIMIT = 0.90, 0.93
NAMES = {
    "text": "40 text turns past a 30k threshold",
    "figure": "12 turns with a figure each",
    "text:system-first": "the same, a template taking one system message (Qwen's): the state as a user note",
    "text:alternate": "the same, a template making roles alternate (Mistral's): the note, users in a row as one",
}


def text_turn(n: int) -> list[Reply]:
    code = f"for i in range(120):\n    print('turn {n} row', i, 'value', i * {n}.5, 'x' * 20)"
    replies = [Reply(tool_calls=[Call("python", {"code": code})])]
    if n % 5 == 0:
        todos = [{"content": f"step {k}", "status": "done" if k < n // 5 else "pending"} for k in range(4)]
        replies.append(Reply(tool_calls=[Call("todo_write", {"todos": todos})]))
    replies.append(Reply(text=f"Turn {n}: the rows are printed above; the values grow by {n}.5 per row."))
    return replies


def figure_turn(n: int) -> list[Reply]:
    code = (
        "import matplotlib.pyplot as plt\n"
        f"plt.figure(figsize=(4, 3)); plt.plot(range(10), [i * {n} for i in range(10)]); plt.title('figure {n}')\n"
        "plt.show()"
    )
    return [Reply(tool_calls=[Call("python", {"code": code})]), Reply(text=f"Figure {n} is drawn.")]


def run(api: str, scenario: str, template: str | None = None) -> dict[str, float]:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    fake = FakeOpenAI().start()
    fake.chat_template = template  # a local model's template that refuses the state message where it is
    work = Path(tempfile.mkdtemp(prefix="shiro-cache-"))
    os.chdir(work)
    os.environ.update(
        OPENAI_API_KEY="sk-bench",
        OPENAI_BASE_URL=fake.base_url,
        SHIRO_MODEL="gpt-5-mini",
        SHIRO_API=api,
        SHIRO_HOME=str(work / "home"),
        JPY_SESSION_NAME=str(work / "nb.ipynb"),
    )
    write_cells(work / "nb.ipynb", ["import pandas as pd", "x = 1"])
    InteractiveShell.clear_instance()
    shell = InteractiveShell.instance()
    turns, make = (40, text_turn) if scenario == "text" else (12, figure_turn)
    try:
        with capture_output():
            shell.run_cell("%load_ext shiro_kernel")
            shell.run_cell('%config Shiro.approval = "auto"')
            shell.run_cell("%config Shiro.compact_threshold = 30000" if scenario == "text" else "")
            for n in range(1, turns + 1):
                fake.enqueue(*make(n))
                shell.run_cell(f"%shiro --wait turn {n}: go on")
                if scenario == "text":  # the user edits and runs a cell between turns
                    write_cells(work / "nb.ipynb", ["import pandas as pd", f"x = {n}", f"print(x * {n})"])
            shell.run_cell("%unload_ext shiro_kernel")
    finally:
        InteractiveShell.clear_instance()
        fake.stop()
    posts = [r for r in fake.requests if r.method == "POST"]
    prompts = [r.prompt_chars for r in posts]
    served = sum(r.cached_chars for r in posts)
    limit = sum(prompts[:-1])  # append-only: each request begins with the whole previous one
    misses = sum(1 for r in posts[1:] if r.cached_chars < r.prompt_chars / 2)
    inputs = sum((r.prompt_chars // 4) for r in posts)
    return {
        "requests": len(posts),
        "refused": sum(1 for r in posts if r.status >= 400),
        "share": served / sum(prompts),
        "limit": limit / sum(prompts),
        "misses": misses,
        "priced": sum(r.cached_tokens for r in posts) / max(1, inputs),
    }


def main() -> None:
    started = time.monotonic()
    rows = []
    for scenario in ("text", "figure"):
        for api in ("responses", "chat"):
            got = run(api, scenario)
            met = got["share"] >= GOAL and got["share"] >= GOAL_OF_LIMIT * got["limit"]
            rows.append((scenario, api, got, met))
    for template in ("system-first", "alternate"):  # the state placed where such a template takes it
        got = run("chat", "text", template)
        met = got["share"] >= GOAL and got["share"] >= GOAL_OF_LIMIT * got["limit"]
        rows.append((f"text:{template}", "chat", got, met))
    print(
        "| session | API | requests | prefix a cache could serve | append-only limit | of the limit | "
        "requests missing > half | priced as cached | goal (>= 90 %, >= 0.93 of the limit) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for scenario, api, got, met in rows:
        name = NAMES[scenario]
        if got["refused"]:
            name += f" ({got['refused']} refused)"
        print(
            f"| {name} | {api} | {got['requests']} | {got['share']:.1%} | {got['limit']:.1%} | "
            f"{got['share'] / got['limit']:.2f} | {got['misses']} | {got['priced']:.1%} | "
            f"{'met' if met else 'NOT met'} |"
        )
    print(f"\n(this script: {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
