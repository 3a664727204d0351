"""Helpers the browser tests share: write a notebook, open it in JupyterLab, save it, read a cell's output
area, ask the open notebook's kernel, take a screenshot into test-artifacts/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from conftest import ARTIFACTS, Lab  # tests/browser/conftest.py (its folder is on sys.path)
from nbformat.v4 import new_code_cell, new_notebook


def write_notebook(path: Path, sources: list[str]) -> nbformat.NotebookNode:
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return nb


def open_notebook(page: Any, lab: Lab, name: str) -> None:
    """Open ``name`` in JupyterLab and wait until its kernel is idle."""
    page.goto(f"{lab.url}/lab/tree/{name}?reset")  # ?reset: no tabs restored from an earlier test
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(
        """name => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                   const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
                   return !!k && k.status === 'idle' && w.context.path === name; }""",
        arg=name,
        timeout=60_000,
    )


def save_notebook(page: Any) -> None:
    """Save the open notebook the way the user does (the server signs it: reopened, it is trusted)."""
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def kernel_print(page: Any, expression: str) -> str:
    """What ``print(expression)`` shows in the open notebook's kernel (run silently, outside any cell)."""
    return str(
        page.evaluate(
            """async code => {
        const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
        let out = '';
        const f = k.requestExecute({code, silent: true, store_history: false});
        f.onIOPub = m => { if (m.header.msg_type === 'stream') out += m.content.text; };
        await f.done; return out; }""",
            f"print({expression})",
        )
    )


def cell_output(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea")
