"""Session-store figures with 10,000 records (medians of repeats).

    .venv/bin/python benchmarks/bench_sessions.py [N]

* ``list(15)`` and ``resolve(prefix)`` in a fresh store object (a new kernel: the index is read and
  parsed) and in a warm one (index cached in memory, only the freshness check: one scandir + 2 stats);
* a fresh store after another kernel saved (index re-read);
* the index rebuild (reading every record once), and one ``save`` at that scale;
* autosave writes during a 200-step change burst (400 ms debounce).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["SHIRO_HOME"] = tempfile.mkdtemp(prefix="shiro-bench-")

from shiro_kernel.session import Session
from shiro_kernel.store.sessions import Autosaver, SessionStore
from shiro_kernel.transcript import Message, TextPart


def median_ms(fn, repeat: int = 15) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def make_records(root: Path, n: int) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    ids = []
    for i in range(n):
        sid = f"{i:08x}-0000-7000-8000-{i:012x}"
        ids.append(sid)
        msgs = [
            {"role": "user", "parts": [{"type": "text", "text": f"question {i} about the data frame"}]},
            {"role": "assistant", "parts": [{"type": "text", "text": "an answer " * 20}]},
        ]
        (root / f"{sid}.json").write_text(
            json.dumps(
                {
                    "id": sid,
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "updatedAt": f"2025-01-{1 + i // 3600 % 28:02d}T{i // 60 % 24:02d}:{i % 60:02d}:00.000Z",
                    "cwd": "/home/user/projects/analysis",
                    "provider": "openai",
                    "model": "gpt-5",
                    "title": f"question {i} about the data frame",
                    "inputTokens": 100,
                    "outputTokens": 10,
                    "notebook": {"todos": []},
                    "notebookPath": f"/home/user/projects/analysis/nb{i % 20}.ipynb",
                    "messages": msgs,
                },
                indent=2,
            )
        )
    return ids


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    store = SessionStore()
    ids = make_records(store.root, n)
    prefix = ids[n // 2][:13]

    t0 = time.perf_counter()
    store.rebuild_index()
    rebuild = (time.perf_counter() - t0) * 1000
    index_kb = store.index_path.stat().st_size / 1024

    cold_list = median_ms(lambda: SessionStore().list(15))
    cold_resolve = median_ms(lambda: SessionStore().resolve(prefix))
    warm = SessionStore()
    warm.list(15)
    warm_list = median_ms(lambda: warm.list(15))
    warm_resolve = median_ms(lambda: warm.resolve(prefix))

    def other_kernel_saved() -> None:
        s = Session(notebook_path="/home/user/projects/analysis/nb1.ipynb")
        s.messages.append(Message.user("another kernel"))
        SessionStore().save(s, model="gpt-5")

    after_save = []
    saves = []
    for _ in range(7):
        t0 = time.perf_counter()
        other_kernel_saved()
        saves.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        warm.list(15)
        after_save.append((time.perf_counter() - t0) * 1000)

    time.sleep(2.1)  # the folder has settled: a warm store skips the listing
    warm.list(15)
    settled_list = median_ms(lambda: warm.list(15))
    settled_resolve = median_ms(lambda: warm.resolve(prefix))

    # autosave burst
    s = Session()
    saver = Autosaver(SessionStore(), s, lambda: "gpt-5", at_exit=False)
    s.append(Message.user("burst"))
    for i in range(200):
        s.append(Message("assistant", [TextPart(f"step {i}")]))
        time.sleep(0.002)
    time.sleep(1.0)
    burst_writes = saver.writes
    saver.close()

    rows = [
        (f"list(15), new store ({n:,} records)", f"{cold_list:.1f} ms"),
        ("resolve(prefix), new store", f"{cold_resolve:.1f} ms"),
        ("list(15), warm store", f"{warm_list:.1f} ms"),
        ("resolve(prefix), warm store", f"{warm_resolve:.1f} ms"),
        ("list(15), warm store, folder settled (>2 s)", f"{settled_list:.2f} ms"),
        ("resolve(prefix), warm store, folder settled", f"{settled_resolve:.2f} ms"),
        ("list(15) after another kernel saved", f"{statistics.median(after_save):.1f} ms"),
        ("save() of one session at this scale", f"{statistics.median(saves):.1f} ms"),
        (f"index rebuild (reads all {n:,} records)", f"{rebuild:.0f} ms"),
        ("index.json size", f"{index_kb:.0f} KiB"),
        ("autosave writes, 200 changes over ~0.4 s", f"{burst_writes}"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  -----")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
