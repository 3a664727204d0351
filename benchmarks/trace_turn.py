"""Which of the package's modules a warm one-call turn runs code in, and how often control passes between them:

    .venv/bin/python benchmarks/trace_turn.py

A real turn through the agent (an in-process IPython shell, the real ``openai`` client, the fake server): the
model calls ``python`` once (approved), then answers. The turn is run once to warm everything up, then traced
with ``sys.setprofile``: each call into a function of ``shiro_kernel`` counts for its module, and a *hop* is a
call whose caller is in another module of the package (calls inside one module, and into other packages, are
not hops). A *climb* is a hop that runs up the import graph: the callee imports the caller, directly or through
others, so control returns to a higher module through a callback it handed down — not counted when the caller is
``events`` (the observer pipe is how events go up by design) or the callee a generator being resumed (a stream
pulled item by item). A structure issue's figures (modules touched, hops,
hops into ``agent``, climbs and the climbs into ``agent``) come from this script.
"""

from __future__ import annotations

import inspect
import os
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ["SHIRO_NO_WARMUP"] = "1"
os.environ.setdefault("SHIRO_HOME", tempfile.mkdtemp())
os.environ.setdefault("MPLBACKEND", "Agg")

from fakeopenai import Call, FakeOpenAI, Reply

import shiro_kernel

PACKAGE = str(Path(shiro_kernel.__file__).parent)  # the package as imported (a worktree's, with PYTHONPATH)


def module_of(frame: FrameType | None) -> str | None:
    """The package module a frame runs in (``agent``, ``provider.client``), or None outside the package."""
    if frame is None:
        return None
    path = frame.f_code.co_filename
    if not path.startswith(PACKAGE):
        return None
    rel = Path(path).relative_to(PACKAGE).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts) or "__init__"


def above() -> dict[str, set[str]]:
    """Each module (as :func:`module_of` names it) and every module it imports, directly or through others: the
    ones it stands above (the import graph tests/test_shape.py reads)."""
    from test_shape import imports, modules

    known = modules()

    def short(name: str) -> str:
        return name.removeprefix("shiro_kernel").removeprefix(".") or "__init__"

    direct = {short(m): {short(t) for t in imports(m, path, known)} for m, path in known.items()}
    closure: dict[str, set[str]] = {}
    for start in direct:
        seen, stack = set(), list(direct[start])
        while stack:
            m = stack.pop()
            if m not in seen:
                seen.add(m)
                stack += direct.get(m, ())
        closure[start] = seen - {start}
    return closure


#: a generator's or coroutine's code: a "call" event into it is a resumption (its consumer pulling the next item),
#: not a callback
_RESUMED = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def trace(run: Any) -> tuple[Counter[str], Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """What ``run`` touches: the calls per module, the hops between modules, and the hops that resumed a
    generator."""
    touched: Counter[str] = Counter()
    hops: Counter[tuple[str, str]] = Counter()
    resumed: Counter[tuple[str, str]] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        here = module_of(frame)
        if here is None:
            return
        touched[here] += 1
        caller = module_of(frame.f_back)
        if caller is not None and caller != here:
            hops[(caller, here)] += 1
            if frame.f_code.co_flags & _RESUMED:
                resumed[(caller, here)] += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return touched, hops, resumed


def main() -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    with FakeOpenAI(validate=False) as fake:
        os.environ.update(OPENAI_API_KEY="sk-trace", OPENAI_BASE_URL=fake.base_url, SHIRO_MODEL="gpt-4o-mini")
        os.chdir(tempfile.mkdtemp())
        shell = InteractiveShell.instance()
        with capture_output():
            shell.run_cell("%load_ext shiro_kernel")
            shell.run_cell('%config Shiro.approval = "auto"')

        def turn(n: int) -> None:
            fake.enqueue(Reply(tool_calls=[Call("python", {"code": f"x = {n} + 1\nx"})]), Reply(text=f"x is {n + 1}"))
            with capture_output():
                shell.run_cell(f"%shiro compute {n}")

        turn(1)  # warm: imports, the session started, the provider built
        touched, hops, resumed = trace(lambda: turn(2))
    into: Counter[str] = Counter()
    for (_, callee), n in hops.items():
        into[callee] += n
    print(f"modules touched: {len(touched)}")
    print(f"hops between modules: {sum(hops.values())}")
    print(f"hops into agent: {into.get('agent', 0)}")
    below = above()
    up = {(a, b): n - resumed[(a, b)] for (a, b), n in hops.items() if a in below.get(b, ()) and a != "events"}
    climbs = Counter({pair: n for pair, n in up.items() if n})
    print(f"climbs (a callback up the import graph, not through events.Pipe): {sum(climbs.values())}")
    print(f"climbs into agent: {sum(n for (_, b), n in climbs.items() if b == 'agent')}")
    print("most climbs: " + ", ".join(f"{a}→{b} {n}" for (a, b), n in climbs.most_common(8)))
    print("most entered modules: " + ", ".join(f"{m} {n}" for m, n in into.most_common(8)))


if __name__ == "__main__":
    main()
