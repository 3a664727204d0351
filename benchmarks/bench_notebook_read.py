"""The first ``notebook_read`` of a fresh process (issue 29, point 8): a saved notebook of 30 cells with
outputs, read by the tool as a kernel's first call does, beside ``nbformat.read`` with its schema
validation (what the tool did before). Each figure is one fresh ``python -c`` process (nothing imported
or cached ahead), medians of several, interleaved.

    .venv/bin/python benchmarks/bench_notebook_read.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPEATS = 7

TOOL = """
import time, warnings, pathlib, sys
t = time.perf_counter()
from shiro_kernel.tools import ToolContext, run_tool
from shiro_kernel.tools.notebook import notebook_read
path = pathlib.Path(sys.argv[1])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = notebook_read({"cells": None, "images": None}, ToolContext(root=path.parent, notebook_path=path))
took = time.perf_counter() - t
assert "[29] code" in str(getattr(out, "text", out)), out
print(took, len(caught), "nbformat" in sys.modules)
"""

NBFORMAT = """
import time, warnings, sys
t = time.perf_counter()
import nbformat
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    nb = nbformat.read(sys.argv[1], as_version=4)
took = time.perf_counter() - t
assert len(nb.cells) == 30
print(took, len(caught), True)
"""


def notebook(path: Path) -> None:
    """30 code cells with a text output each and no cell ids (as a notebook written by an older tool is saved)."""
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": i + 1,
            "source": f"df{i} = df.groupby('month').sales.sum() * {i}\ndf{i}.head()",
            "outputs": [
                {
                    "output_type": "execute_result",
                    "execution_count": i + 1,
                    "metadata": {},
                    "data": {"text/plain": "\n".join(f"2024-{m:02d}  {m * i * 1.5:.2f}" for m in range(1, 13))},
                }
            ],
        }
        for i in range(30)
    ]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))


def run(code: str, path: Path) -> tuple[float, int, bool]:
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    took, warned, imported = out.stdout.split()
    return float(took), int(warned), imported == "True"


def main() -> None:
    path = Path(tempfile.mkdtemp()) / "thirty.ipynb"
    notebook(path)
    tool, old = [], []
    for _ in range(REPEATS):
        tool.append(run(TOOL, path))
        old.append(run(NBFORMAT, path))
    t, o = statistics.median(r[0] for r in tool), statistics.median(r[0] for r in old)
    print("measure                                                              | figure")
    print("---------------------------------------------------------------------|-------")
    print(f"first notebook_read of a fresh process, 30 cells (imports included)  | {t * 1e3:.1f} ms")
    print(
        f"  nbformat imported by it; warnings it raised                        | {tool[0][2]}; {max(r[1] for r in tool)}"
    )
    print(
        f"nbformat.read with validation, same file, fresh process (before)     | {o * 1e3:.1f} ms ({o / t:.0f}x the tool)"
    )
    print(f"  warnings it raised (MissingIDFieldWarning: the cells have no ids)  | {max(r[1] for r in old)}")
    print(f"\nMedians of {REPEATS} fresh processes each, interleaved.")


if __name__ == "__main__":
    main()
