"""shiro_kernel beside jupyter-ai-magics: loading, the first call and a warm call, in one run (issue 15).

    .venv/bin/python benchmarks/bench_peer.py

The peer is installed by this script into a throwaway venv (``benchmarks/.peer-venv``, or
``$SHIRO_BENCH_PEER_VENV``; kept between runs, rebuilt when the pinned requirements change; its install time
is not a figure): ``jupyter-ai-magics==2.31.7``, ``langchain-openai>=0.3,<0.4`` and ``ipython``.

Fresh processes of each venv, interleaved, each doing the same thing: start an IPython ``InteractiveShell``,
``%load_ext``, wait 2 s, a first call (``%shiro --wait hi`` / ``%%ai openai-chat:gpt-4o-mini`` with ``hi``),
then warm calls in the same process. Both talk to the same fake OpenAI-compatible server on 127.0.0.1
(``OPENAI_BASE_URL``), whose record of requests is checked after every process: each call must have
reached it and been answered.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import _peervenv
from _turnbench import MODEL, TURN, Workspace, interleave, median, ms, table

HERE = Path(__file__).resolve().parent
PEER_REQUIREMENTS = ["jupyter-ai-magics==2.31.7", "langchain-openai>=0.3,<0.4", "ipython"]
PEER_VENV = Path(os.environ.get("SHIRO_BENCH_PEER_VENV") or HERE / ".peer-venv")
PEER_CELL = f"%%ai openai-chat:{MODEL}\nhi"
REPEATS = 5  # fresh processes per side
WARM = 5  # warm calls per process
DELAY = 2.0  # seconds between %load_ext and the first call


def peer_python() -> Path:
    """The peer venv's interpreter (:func:`_peervenv.peer_python`)."""
    return _peervenv.peer_python(
        PEER_VENV, PEER_REQUIREMENTS, "jupyter_ai_magics, langchain_openai, IPython", "the peer"
    )


def main() -> None:
    peer_py = peer_python()
    started = time.perf_counter()
    with Workspace() as ws:
        ours_env = ws.env()
        peer_env = {k: v for k, v in ours_env.items() if k != "PYTHONPATH" and not k.startswith("SHIRO_")}

        def ours() -> dict:
            cfg = {"load": "%load_ext shiro_kernel", "delay": DELAY, "cell": TURN, "warm": WARM}
            return ws.run_cells(sys.executable, cfg, expect_path="/v1/responses", expect_calls=1 + WARM, env=ours_env)

        def peer() -> dict:
            cfg = {"load": "%load_ext jupyter_ai_magics", "delay": DELAY, "cell": PEER_CELL, "warm": WARM}
            return ws.run_cells(
                str(peer_py), cfg, expect_path="/v1/chat/completions", expect_calls=1 + WARM, env=peer_env
            )

        ours(), peer()  # bytecode and caches of a first-ever run
        o, p = interleave(REPEATS, ours, peer)

    def fig(runs: list[dict], key: str) -> float:
        return median([r[key] for r in runs])

    def warm(runs: list[dict]) -> float:
        return median([t for r in runs for t in r["warm"]])

    def call(runs: list[dict]) -> str:
        rec = runs[-1]["requests"][0]
        return f"POST {rec.path}, {'streamed' if rec.stream else 'not streamed'}, {len(rec.raw) / 1000:.1f} kB"

    load_ratio = fig(p, "load") / fig(o, "load")
    start_ratio = fig(p, "shell_and_load") / fig(o, "shell_and_load")
    rows = [
        ("IPython import + InteractiveShell (in-process)", ms(fig(o, "shell")), ms(fig(p, "shell")), "-"),
        (
            "%load_ext line",
            ms(fig(o, "load")),
            ms(fig(p, "load")),
            f">= x5 faster: x{load_ratio:.0f} ({'met' if load_ratio >= 5 else 'NOT met'})",
        ),
        (
            "IPython start + %load_ext (in-process)",
            ms(fig(o, "shell_and_load")),
            ms(fig(p, "shell_and_load")),
            f"x{start_ratio:.1f} faster",
        ),
        (f"first call, {DELAY:g} s after %load_ext", ms(fig(o, "first")), ms(fig(p, "first")), "-"),
        ("warm call (same process)", ms(warm(o)), ms(warm(p)), "-"),
        ("the model call (fake server's record)", call(o), call(p), "-"),
    ]
    notes = [
        "",
        f"Medians of {REPEATS} fresh processes per side, interleaved (warm calls: {WARM} per process, pooled).",
        (
            f"Calls: `{TURN}` / `%%ai openai-chat:{MODEL}` + `hi`, both to the same fake server on 127.0.0.1 via "
            "OPENAI_BASE_URL."
        ),
        (
            f"Peer venv: jupyter-ai-magics {_peervenv.version_of(peer_py, 'jupyter-ai-magics')}, langchain-openai "
            f"{_peervenv.version_of(peer_py, 'langchain-openai')}, openai {_peervenv.version_of(peer_py, 'openai')}, "
            f"IPython {_peervenv.version_of(peer_py, 'ipython')}; ours: openai {_peervenv.version_of(sys.executable, 'openai')}, "
            f"IPython {_peervenv.version_of(sys.executable, 'ipython')}."
        ),
        "Both sides cache bytecode as a user's kernel does (PYTHONDONTWRITEBYTECODE unset for the children).",
        f"(this script: {time.perf_counter() - started:.0f} s, not counting the one-time peer install)",
    ]
    print(table(("measure", "shiro_kernel", "jupyter-ai-magics", "goal (issue 15)"), rows, notes))


if __name__ == "__main__":
    main()
