"""The labextension in a real JupyterLab and Chromium: saved turns render without their kernel, a
live turn streams into the widget view with working approval buttons, and Shiro: Ask runs a cell."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import KEY, Lab  # tests/browser/conftest.py (its folder is on sys.path)
from fakeopenai import Call, Reply
from labutil import cell_output, kernel_print, open_notebook, save_notebook, shot, write_notebook
from nbclient import NotebookClient

TODOS = [
    {"content": "load the sales", "status": "done"},
    {"content": "compare regions", "status": "in_progress"},
    {"content": "plot", "status": "pending"},
    {"content": "publish", "status": "blocked", "note": "no access"},
]
pytestmark = pytest.mark.timeout(150)

BAR = f"tasks {'#' * 10}{'.' * 30} 1/4  1 blocked"


def test_saved_turn_renders_without_its_kernel(lab: Lab, page: Any) -> None:
    lab.fake.enqueue(
        Reply(
            text="Let me plan and compute.",
            tool_calls=[Call("todo_write", {"todos": TODOS}), Call("python", {"code": "df.x.mean()"})],
        ),
        Reply(text="The mean of `df.x` is **2.0**."),
    )
    path = lab.root / "saved.ipynb"
    nb = write_notebook(
        path,
        [
            "%load_ext shiro_kernel",
            "import pandas\ndf = pandas.DataFrame({'x': [1, 2, 3]})",
            '%config Shiro.approval = "auto"',
            "%shiro --wait what is the mean of df.x?",
        ],
    )
    env = {**lab.env, "JPY_SESSION_NAME": str(path)}
    NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(lab.root)}}).execute(
        env=env
    )
    nbformat.write(nb, path)
    assert any("application/vnd.shiro.turn+json" in o.get("data", {}) for o in nb.cells[3].outputs)

    open_notebook(page, lab, "saved.ipynb")
    turn = cell_output(page, 3).locator(".jp-RenderedShiroTurn")
    turn.wait_for(timeout=30_000)
    text = turn.inner_text()
    assert "The mean of df.x is 2.0." in " ".join(text.split()).replace("`", "")
    assert turn.locator("strong", has_text="2.0").count() == 1  # Markdown went through Lab's renderer
    summaries = turn.locator("details.shiro-tool summary").all_inner_texts()
    assert any("python(df.x.mean()) · ok" in s for s in summaries), summaries
    tasks = turn.locator("pre.shiro-tasks").inner_text()
    assert tasks.splitlines()[0] == BAR
    assert "[x] load the sales" in tasks and "[~] compare regions" in tasks and "[!] publish  (no access)" in tasks
    assert turn.locator("pre.shiro-tasks s", has_text="load the sales").count() == 1
    assert "out tokens" in turn.locator(".shiro-footer").inner_text()
    # a tool row expands on click to its output
    row = turn.locator("details.shiro-tool", has_text="df.x.mean()")
    row.locator("summary").click()
    assert row.locator("pre.shiro-tool-output").inner_text().strip() == "2.0"
    # our renderer, not the HTML fallback
    assert cell_output(page, 3).locator(".jp-RenderedHTMLCommon .shiro-turn").count() == 0
    assert KEY not in page.content()
    shot(page, "saved-turn")


def test_live_turn_streams_asks_approval_and_ends_in_the_static_bundle(lab: Lab, page: Any) -> None:
    lab.fake.enqueue(
        Reply(text="Planning first.", tool_calls=[Call("todo_write", {"todos": TODOS})]),
        Reply(text="Now computing.", tool_calls=[Call("python", {"code": "answer = 6 * 7\nanswer"})]),
        Reply(text="The answer is **42**."),
    )
    write_notebook(
        lab.root / "live.ipynb",
        ["%load_ext shiro_kernel", '%config Shiro.approval = "ask"', "%shiro work out six times seven"],
    )
    open_notebook(page, lab, "live.ipynb")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    out = cell_output(page, 2)
    # frontend = "auto" picked the live widget view in JupyterLab
    view = out.locator(".shiro-turn-view")
    view.wait_for(timeout=30_000)
    approve = view.locator("button", has_text="Approve")
    approve.wait_for(state="visible", timeout=30_000)
    assert "answer = 6 * 7" in view.inner_text()
    # everything that led to the question is drawn before the turn pauses for it
    assert "Planning first." in view.inner_text() and "Now computing." in view.inner_text()
    # the task list updated live, before the turn ended
    assert view.locator("pre.shiro-tasks").inner_text().splitlines()[0] == BAR
    shot(page, "live-approval")
    approve.click()
    # the final static bundle replaces the live view (update_display_data of its display id)
    turn = out.locator(".jp-RenderedShiroTurn")
    turn.wait_for(timeout=30_000)
    turn.get_by_text("The answer is 42.").wait_for(timeout=30_000)  # Markdown renders asynchronously
    text = " ".join(turn.inner_text().split())
    assert "The answer is 42." in text and "python(answer = 6 * 7 answer) · ok" in text
    assert turn.locator("pre.shiro-tasks").inner_text().splitlines()[0] == BAR
    shot(page, "live-final")
    kernel_value = kernel_print(page, "answer")
    assert kernel_value.strip() == "42"  # approved code ran in the kernel


def test_shiro_ask_inserts_and_runs_a_cell_with_history(lab: Lab, page: Any) -> None:
    lab.fake.enqueue(Reply(text="pong one"), Reply(text="pong two"))
    write_notebook(lab.root / "ask.ipynb", ["x = 1"])
    open_notebook(page, lab, "ask.ipynb")
    assert page.evaluate("window.jupyterapp.commands.label('shiro:ask')") == "Shiro: Ask"

    # the toolbar button opens the prompt box; Enter inserts a %%shiro cell below and runs it
    page.locator(".jp-ShiroAskButton").first.click()
    box = page.locator(".jp-Dialog .jp-ShiroAsk textarea")
    box.wait_for(timeout=10_000)
    box.fill("first question")
    shot(page, "ask-box")
    box.press("Enter")
    cells = page.locator(".jp-Notebook .jp-Cell")
    page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell').length === 2")
    assert "%%shiro" in cells.nth(1).locator(".jp-InputArea").inner_text()
    assert "first question" in cells.nth(1).locator(".jp-InputArea").inner_text()
    cells.nth(1).locator(".jp-OutputArea", has_text="pong one").wait_for(timeout=30_000)

    # the keyboard shortcut opens it again; Up shows the last prompt, Down gives the draft back
    page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Escape")
    page.keyboard.press("Alt+i")
    box.wait_for(timeout=10_000)
    # the kernel answers the history request once it is free (it may still be finishing the turn)
    page.wait_for_selector(".jp-Dialog textarea[data-history-loaded]", timeout=30_000)
    box.fill("my draft")
    box.press("Home")
    box.press("ArrowUp")
    assert box.input_value() == "first question"
    box.press("ArrowDown")
    assert box.input_value() == "my draft"
    page.keyboard.press("Escape")
    page.locator(".jp-Dialog").wait_for(state="detached", timeout=10_000)

    # and from the command (what the palette runs)
    page.evaluate("() => { void window.jupyterapp.commands.execute('shiro:ask'); }")  # resolves when the box closes
    box.wait_for(timeout=10_000)
    box.fill("second question")
    page.locator(".jp-Dialog button", has_text="Ask").click()
    page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell').length === 3")
    page.locator(".jp-Notebook .jp-Cell .jp-OutputArea", has_text="pong two").wait_for(timeout=30_000)
    shot(page, "ask-ran")
    assert json.loads(json.dumps(lab.fake.requests[-1].body))  # the turn reached the provider
    assert os.environ.get("OPENAI_API_KEY") is None  # the test process itself never held the key


PLOT = (
    "import matplotlib.pyplot as plt\n"
    "xs = list(range(10))\n"
    "plt.plot(xs, [x * x for x in xs])\n"
    "plt.title('x against its square')\n"
    "plt.show()"
)


def test_figures_show_under_their_row_live_and_after_reopening(lab: Lab, page: Any) -> None:
    lab.fake.enqueue(
        Reply(text="Plotting.", tool_calls=[Call("python", {"code": PLOT})]),
        Reply(text="One more check.", tool_calls=[Call("python", {"code": "len(xs)"})]),
        Reply(text="A parabola over **10** points."),
    )
    write_notebook(
        lab.root / "figures.ipynb",
        [
            "%matplotlib inline\n%load_ext shiro_kernel",
            '%config Shiro.approval = "ask"',
            "%shiro plot x against its square",
            "print('next cell')",
        ],
    )
    open_notebook(page, lab, "figures.ipynb")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    view = cell_output(page, 2).locator(".shiro-turn-view")
    view.wait_for(timeout=30_000)
    approve = view.locator("button", has_text="Approve")
    approve.wait_for(state="visible", timeout=30_000)
    # the approval shows the code as a highlighted, multi-line block, not one flattened line
    code = view.locator(".shiro-approval-code")
    assert "plt.title('x against its square')\nplt.show()" in code.inner_text()
    approve.click()
    # while the turn waits on its second call, the first call's figure is drawn under its row
    view.get_by_text("One more check.").wait_for(timeout=30_000)
    approve.wait_for(state="visible", timeout=30_000)
    figure = view.locator(".jp-OutputArea-output img")
    figure.wait_for(timeout=30_000)
    assert figure.evaluate("img => img.naturalWidth") > 100
    shot(page, "figure-live")
    approve.click()
    turn = cell_output(page, 2).locator(".jp-RenderedShiroTurn")
    turn.wait_for(timeout=30_000)
    turn.locator(".shiro-output img").wait_for(timeout=30_000)
    # nothing leaked: the next cell shows only its own print
    next_cell = cell_output(page, 3)
    next_cell.get_by_text("next cell").wait_for(timeout=30_000)
    assert next_cell.locator("img").count() == 0
    save_notebook(page)
    saved = nbformat.read(lab.root / "figures.ipynb", as_version=4)
    bundles = [
        o["data"]["application/vnd.shiro.turn+json"]
        for o in saved.cells[2].outputs
        if "application/vnd.shiro.turn+json" in o.get("data", {})
    ]
    assert bundles and any(
        "image/png" in out["data"]
        for e in bundles[-1]["entries"]
        if e["type"] == "tool"
        for out in e.get("outputs", [])
    )
    # reopened (a fresh page and kernel): the renderer draws the saved figure with no kernel state
    open_notebook(page, lab, "figures.ipynb")
    reopened = cell_output(page, 2).locator(".jp-RenderedShiroTurn .shiro-output img")
    reopened.wait_for(timeout=30_000)
    assert reopened.evaluate("img => img.naturalWidth") > 100
    shot(page, "figure-reopened")


def test_another_agent_asks_approval_under_the_serve_cell(lab: Lab, page: Any) -> None:
    """``%shiro /mcp serve`` in JupyterLab: another agent's ``python`` call waits for the buttons under the
    serve cell; approved, it runs in the kernel the notebook uses."""
    import asyncio
    import re
    import threading

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import Implementation

    write_notebook(lab.root / "serve.ipynb", ["%load_ext shiro_kernel", "%shiro /mcp serve"])
    open_notebook(page, lab, "serve.ipynb")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    out = cell_output(page, 1)
    out.get_by_text("Bearer token:").wait_for(timeout=30_000)
    shown = out.inner_text()
    url, where = re.search(r"MCP server for this kernel: (\S+)", shown), re.search(r"Bearer token: in (\S+) \(", shown)
    assert url and where, shown
    # the token is never in the cell: it is in a 0600 file the cell names
    token = re.search(r"^export SHIRO_MCP_TOKEN=(\S+)$", Path(where.group(1)).read_text(), re.M)
    assert token and token.group(1) not in shown, shown
    result: dict[str, str] = {}

    def another_agent() -> None:
        async def call() -> str:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token.group(1)}"})
            client = Client(
                streamable_http_client(url.group(1), http_client=http),
                client_info=Implementation(name="claude-code", version="2.0"),
            )
            async with client:
                answer = await client.call_tool("python", {"code": "from_mcp = 6 * 7\nprint('made it')"})
                return "".join(getattr(c, "text", "") for c in answer.content)

        result["text"] = asyncio.run(call())

    caller = threading.Thread(target=another_agent, daemon=True)  # Playwright's loop owns this thread
    caller.start()
    approve = out.locator("button", has_text="Approve")
    approve.wait_for(state="visible", timeout=30_000)
    assert "claude-code 2.0 (MCP) wants to run this Python in your kernel" in " ".join(out.inner_text().split())
    assert "from_mcp = 6 * 7" in out.inner_text()
    shot(page, "mcp-serve-approval")
    approve.click()
    caller.join(30)
    assert "made it" in result.get("text", ""), result
    out.get_by_text("claude-code 2.0 (MCP): python approved").wait_for(timeout=30_000)
    kernel_value = kernel_print(page, "from_mcp")
    assert kernel_value.strip() == "42"  # the other agent's code ran in this notebook's kernel


def test_an_mcp_tools_progress_shows_in_its_live_row(lab: Lab, page: Any) -> None:
    """The user's MCP server (``Shiro.mcp_servers``) in a live turn: its progress notifications update the
    running call's row while it runs, and the answer ends the turn."""
    import sys

    server = Path(__file__).resolve().parents[1] / "mcp" / "mcp_servers" / "sdk_server.py"
    lab.fake.enqueue(
        Reply(text="Asking the server.", tool_calls=[Call("mcp__sdk__slow", {"seconds": 4})]),
        Reply(text="The server slept **4 s**."),
    )
    config = json.dumps({"sdk": {"command": sys.executable, "args": [str(server)]}})
    write_notebook(
        lab.root / "mcp.ipynb",
        [
            "%load_ext shiro_kernel",
            f'%config Shiro.approval = "auto"\n%config Shiro.mcp_servers = {config}',
            "%shiro let the server sleep",
        ],
    )
    open_notebook(page, lab, "mcp.ipynb")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    view = cell_output(page, 2).locator(".shiro-turn-view")
    view.wait_for(timeout=30_000)
    # the running row shows the server's progress, and it moves
    view.get_by_text(re.compile(r"mcp__sdk__slow.*sleeping \(\d+/40\)")).wait_for(timeout=30_000)
    first = re.search(r"sleeping \((\d+)/40\)", view.inner_text())
    assert first
    page.wait_for_function(
        """([n]) => { const m = document.body.innerText.match(/sleeping \\((\\d+)\\/40\\)/);
                      return !m || Number(m[1]) > n; }""",
        arg=[int(first.group(1))],
        timeout=30_000,
    )
    shot(page, "mcp-progress-live")
    turn = cell_output(page, 2).locator(".jp-RenderedShiroTurn")
    turn.wait_for(timeout=30_000)
    turn.get_by_text("The server slept 4 s.").wait_for(timeout=30_000)
    assert "mcp__sdk__slow" in turn.inner_text() and "· ok" in turn.inner_text()
