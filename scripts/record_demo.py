"""Record binder/demo.ipynb: run it once against a scripted model (tests/fakeopenai.py) so the notebook is
saved with its turns — their answers, figures and the replay fields of each turn's bundle. A new user who
opens it without a key reruns it and sees the turns replayed (no model call); with a key, ``%shiro --again``
asks a real model. The notebook says the recorded turns came from a scripted model.

    .venv/bin/python scripts/record_demo.py        # rewrites binder/demo.ipynb
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import nbformat  # noqa: E402
from fakeopenai import Call, FakeOpenAI, Reply  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook  # noqa: E402

DEMO = ROOT / "binder" / "demo.ipynb"
INTRO = """# shiro_kernel demo

`%shiro` runs an agent turn right here, next to your data: it looks at your variables, runs Python in this
kernel (asking first), and answers in the cell.

**The turns below are recorded** (with a scripted model, for this demo: its numbers come from the data). Run the notebook top to bottom
without a key and they are *replayed*: their Python runs again, the answers show, no model is asked — so the
cells after them work. To ask a real model, set a key (`%env OPENAI_API_KEY=sk-...`) or point shiro at a
local OpenAI-compatible server (`%config Shiro.base_url = "http://localhost:11434/v1"`,
`%config Shiro.model = "llama3.1"`), then add `--again` to a `%shiro` line, or type a new one."""

LOAD = "%load_ext shiro_kernel\nimport pandas as pd\nsales = pd.read_csv('cafe_sales.csv')\nsales.head()"
ASK = "%shiro which product grew the most over the year, and in which region?"
GROWTH = (
    "monthly = sales.groupby(['month', 'product']).revenue.sum().unstack()\n"
    "growth = (monthly.iloc[-1] / monthly.iloc[0] - 1).sort_values(ascending=False)\n"
    "by_region = sales.pivot_table(index='region', columns='product', values='revenue', aggfunc='sum')\n"
    "print(growth.round(4).to_string())\n"
    "print()\n"
    "print(by_region.round(1).to_string())"
)
PLOT = "%shiro plot monthly revenue per product"
PLOT_CODE = (
    "import matplotlib.pyplot as plt\n"
    "ax = monthly.plot(marker='o', figsize=(7, 3.5), title='Monthly revenue per product')\n"
    "ax.set_ylabel('revenue')\n"
    "plt.show()"
)
AFTER = "# `monthly` and `growth` were made by the turn above: after a replay they exist again\ngrowth.round(3)"


def answer_from(request: object) -> Reply:
    """The scripted model's answer, written from what the python call printed (as a real model would)."""
    body = request.body  # type: ignore[attr-defined]
    items = body.get("input") or []
    printed = next(i["output"] for i in reversed(items) if i.get("type") == "function_call_output")
    rows = [ln.split() for ln in printed.splitlines()]
    top, value = next((r[0], float(r[1])) for r in rows if len(r) == 2 and r[1].lstrip("-").replace(".", "").isdigit())
    return Reply(
        text=(
            f"**{top.capitalize()}** grew the most over the year: revenue rose **{value:.1%}** from the first "
            "month to the last (`growth` holds every product's change). Revenue by region and product is in "
            "the table above (`by_region`); I made `monthly`, `growth` and `by_region` in your namespace."
        )
    )


def main() -> None:
    fake = FakeOpenAI().start()
    fake.enqueue(
        Reply(text="I'll compute each product's growth in the kernel.", tool_calls=[Call("python", {"code": GROWTH})]),
        answer_from,
        Reply(tool_calls=[Call("python", {"code": PLOT_CODE})]),
        Reply(text="Here is monthly revenue per product (one line each, from `monthly`)."),
    )
    nb = new_notebook(
        cells=[
            new_markdown_cell(INTRO),
            new_code_cell(LOAD),
            new_code_cell(ASK),
            new_code_cell(PLOT),
            new_code_cell(AFTER),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp) / "ipython" / "profile_default"
        profile.mkdir(parents=True)
        # approval for the recording only: the demo notebook itself keeps the default ("ask")
        (profile / "ipython_kernel_config.py").write_text('c.Shiro.approval = "auto"\nc.Shiro.frontend = "text"\n')
        env = {
            **os.environ,
            "OPENAI_API_KEY": "sk-demo-recording",
            "OPENAI_BASE_URL": fake.base_url,
            "SHIRO_MODEL": "gpt-5-mini",
            "SHIRO_HOME": str(Path(tmp) / "home"),
            "IPYTHONDIR": str(Path(tmp) / "ipython"),
            "JPY_SESSION_NAME": str(DEMO),
            "SHIRO_NO_WARMUP": "1",
            "SHIRO_REPLAY": "off",  # the notebook on disk holds the last recording: ask the scripted model
        }
        client = NotebookClient(
            nb,
            timeout=120,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(DEMO.parent)}},
        )
        client.execute(env=env)
    fake.stop()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" or out.get("name") == "stderr":
                shown = [
                    o.get("text") or o.get("data", {}).get("text/plain") for c in nb.cells for o in c.get("outputs", [])
                ]
                raise SystemExit(
                    f"the recording failed in {cell.source[:40]!r}: {out.get('evalue') or out.get('text')}\n{shown}"
                )
    if fake.handler_errors or len(fake.requests) != 4:
        raise SystemExit(f"the scripted model was not followed: {fake.handler_errors or len(fake.requests)}")
    nb.metadata.pop("widgets", None)
    text = json.dumps(nb, indent=1, ensure_ascii=False)
    if "sk-demo-recording" in text:
        raise SystemExit("the recording key reached the notebook")
    nbformat.validate(nb)
    nbformat.write(nb, DEMO)
    print(f"wrote {DEMO} ({len(fake.requests)} scripted model calls recorded)")


if __name__ == "__main__":
    main()
