"""Figure figures (medians of repeats), in one process with matplotlib's Agg backend:

    .venv/bin/python benchmarks/bench_figures.py

1. Capturing a 2,400×1,600 figure in the ``python`` tool (render + display capture + close), and its
   downscale to the model's copy (long side 1,024 px) in the asset store.
2. Bytes per request in a 30-step session that plots every step (the newest 3 images on the wire), beside
   the same session with every image sent, and the session record's size.
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
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("SHIRO_HOME", tempfile.mkdtemp(prefix="shiro-bench-"))
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ["OPENAI_API_KEY"] = "sk-bench"

from fakeopenai import Call, FakeOpenAI, Reply
from IPython.core.interactiveshell import InteractiveShell

from shiro_kernel.context import limits
from shiro_kernel.provider import Provider, ProviderSettings
from shiro_kernel.session import Session
from shiro_kernel.store.assets import AssetStore
from shiro_kernel.store.records import session_to_record
from shiro_kernel.tools import ToolContext, all_tools
from shiro_kernel.tools.python_tool import run_python
from shiro_kernel.turn import Turn, TurnOptions

BIG = (
    "import matplotlib.pyplot as plt\nimport math\n"
    "fig, ax = plt.subplots(figsize=(24, 16), dpi=100)\n"
    "xs = [i / 100 for i in range(2000)]\n"
    "for k in range(5):\n    ax.plot(xs, [math.sin(x * (k + 1)) for x in xs], label=f'k={k}')\n"
    "ax.legend(); ax.set_title('five sines')\nplt.show()"
)


def median_ms(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def capture_rows(shell: InteractiveShell) -> list[tuple[str, str]]:
    run_python(shell, "import matplotlib.pyplot as plt")
    out = run_python(shell, BIG)
    image = out.images[0]
    store = AssetStore(Path(tempfile.mkdtemp()))
    capture = median_ms(lambda: run_python(shell, BIG))

    def downscale() -> None:
        AssetStore(Path(tempfile.mkdtemp())).put(image.data, image.mime)

    down = median_ms(downscale)
    ref = store.put(image.data, image.mime)
    small = store.get(ref) or b""
    return [
        ("capture a 2,400×1,600 figure (render, capture, close)", f"{capture:.0f} ms"),
        (f"downscale {len(image.data) / 1024:.0f} KiB PNG to {ref.width}×{ref.height}, hash, store", f"{down:.0f} ms"),
        ("the model's copy", f"{len(small) / 1024:.0f} KiB"),
    ]


def session_rows(shell: InteractiveShell) -> list[tuple[str, str]]:
    code = "import matplotlib.pyplot as plt\nplt.plot(range(50), [x * x for x in range(50)]); plt.title('step'); plt.show()"
    rows = []
    for label, keep in (("newest 3 images on the wire", limits.KEEP_IMAGES), ("every image sent (no cap)", 10_000)):
        saved = limits.KEEP_IMAGES
        limits.KEEP_IMAGES = keep
        limit = limits.limit_images.__defaults__
        limits.limit_images.__defaults__ = (keep,)
        try:
            with FakeOpenAI(validate=False) as fake:
                fake.enqueue(
                    *[Reply(tool_calls=[Call("python", {"code": code})]) for _ in range(30)], Reply(text="done")
                )
                session = Session()
                provider = Provider(ProviderSettings(model="gpt-4o-mini", base_url=fake.base_url, max_retries=0))
                from shiro_kernel.store.assets import assets

                provider.images = assets().data_url
                Turn(
                    session,
                    provider,
                    all_tools(),
                    ToolContext(root=ROOT, shell=shell),
                    "",
                    TurnOptions(approval="auto", max_steps=40),
                ).run("plot every step")
                sizes = [len(r.raw) for r in fake.requests]
        finally:
            limits.KEEP_IMAGES = saved
            limits.limit_images.__defaults__ = limit
        rows.append(
            (
                f"30-plot session, {label}: bytes per request (mean / last)",
                f"{statistics.mean(sizes) / 1024:.0f} KiB / {sizes[-1] / 1024:.0f} KiB",
            )
        )
    record = json.dumps(session_to_record(session, "gpt-4o-mini"), indent=2)
    rows.append(("30-plot session record (images beside it, by hash)", f"{len(record) / 1024:.0f} KiB"))
    return rows


def notebook_rows() -> list[tuple[str, str]]:
    """A turn looks at the notebook on disk at its start and end (cell changes): a notebook holding 30
    figures is megabytes of JSON. Read when it changed; the fingerprint kept when it did not."""
    import base64

    from shiro_kernel.context import cell_changes

    figure = base64.b64encode(os.urandom(300_000)).decode()  # ~400 KB of PNG as a notebook stores it
    nb_cells = [
        {
            "cell_type": "code",
            "id": f"c{i}",
            "metadata": {},
            "execution_count": i,
            "source": f"plot({i})",
            "outputs": [{"output_type": "display_data", "data": {"image/png": figure}, "metadata": {}}]
            if i % 3 == 0
            else [],
        }
        for i in range(90)
    ]
    path = Path(tempfile.mkdtemp()) / "figures.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": nb_cells}))

    def changed() -> None:
        os.utime(path)  # a new mtime: read again
        cell_changes.fingerprint(path)

    cold = median_ms(changed)
    warm = median_ms(lambda: cell_changes.fingerprint(path))
    size = path.stat().st_size / 1e6
    return [
        (f"cell fingerprint of a {size:.0f} MB notebook (30 figures), changed since the last look", f"{cold:.1f} ms"),
        ("the same, unchanged (a turn's end, when nothing saved it meanwhile)", f"{warm:.2f} ms"),
    ]


def main() -> None:
    shell = InteractiveShell.instance()
    rows = capture_rows(shell) + session_rows(shell) + notebook_rows()
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}} | figure")
    print(f"{'-' * width}-|-------")
    for name, value in rows:
        print(f"{name:<{width}} | {value}")


if __name__ == "__main__":
    main()
