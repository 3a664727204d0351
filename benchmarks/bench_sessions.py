"""Session-store figures with 10,000 records (medians of repeats).

    .venv/bin/python benchmarks/bench_sessions.py [N]

* ``list(15)``, ``resolve(prefix)`` and ``latest_for_notebook`` in a fresh store object (a new kernel: a new
  SQLite connection, "cold") and in a warm one;
* a warm store's listing after another kernel saved, and one ``save`` at that scale (record + index row);
* the index rebuild (reading every record once), and a ``save`` at 100 records beside the one at 10,000
  (O(1): the same cost whatever the number of records);
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
from shiro_kernel.store.autosave import Autosaver
from shiro_kernel.store.sessions import SessionStore
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


def _save_ms(store: SessionStore, repeat: int = 9) -> float:
    times = []
    for i in range(repeat):
        s = Session(notebook_path="/home/user/projects/analysis/nb1.ipynb")
        s.messages.append(Message.user(f"another kernel {i}"))
        t0 = time.perf_counter()
        store.save(s, model="gpt-5")
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    small = SessionStore(Path(tempfile.mkdtemp(prefix="shiro-bench-small-")))
    make_records(small.root, 100)
    small.rebuild_index()
    save_small = _save_ms(small)

    store = SessionStore()
    ids = make_records(store.root, n)
    prefix = ids[n // 2][:13]

    t0 = time.perf_counter()
    store.rebuild_index()
    rebuild = (time.perf_counter() - t0) * 1000
    store.index.close()  # checkpoints the write-ahead log into the file
    index_kb = (store.root / "index.sqlite").stat().st_size / 1024

    cold_list = median_ms(lambda: SessionStore().list(15))
    cold_resolve = median_ms(lambda: SessionStore().resolve(prefix))
    cold_latest = median_ms(lambda: SessionStore().latest_for_notebook("/home/user/projects/analysis/nb7.ipynb"))
    warm = SessionStore()
    warm.list(15)
    warm_list = median_ms(lambda: warm.list(15))
    warm_resolve = median_ms(lambda: warm.resolve(prefix))

    saver_store = SessionStore()
    after_save = []
    for _ in range(7):
        _save_ms(saver_store, 1)
        t0 = time.perf_counter()
        warm.list(15)
        after_save.append((time.perf_counter() - t0) * 1000)
    save_big = _save_ms(saver_store)

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
        (f"save() of one session, {n:,} records", f"{save_big:.2f} ms"),
        ("save() of one session, 100 records", f"{save_small:.2f} ms"),
        (f"list(15), new store ({n:,} records, cold)", f"{cold_list:.2f} ms"),
        ("resolve(prefix), new store (cold)", f"{cold_resolve:.2f} ms"),
        ("latest_for_notebook, new store (cold)", f"{cold_latest:.2f} ms"),
        ("list(15), warm store", f"{warm_list:.2f} ms"),
        ("resolve(prefix), warm store", f"{warm_resolve:.2f} ms"),
        ("list(15) after another kernel saved", f"{statistics.median(after_save):.2f} ms"),
        (f"index rebuild (reads all {n:,} records)", f"{rebuild:.0f} ms"),
        ("index.sqlite size", f"{index_kb:.0f} KiB"),
        ("autosave writes, 200 changes over ~0.4 s", f"{burst_writes}"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  -----")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
