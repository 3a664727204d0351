"""Helpers the browser tests share: write a notebook, open it in JupyterLab, save it, read a cell's output
area and the document's sources, ask the open notebook's kernel (and its session's record), run a cell, take a
screenshot into test-artifacts/."""

from __future__ import annotations

import json
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


#: each call of the open notebook's session and how many results its saved record holds for it (one each)
RESULTS_PER_CALL = (
    "__import__('json').dumps((lambda a: (lambda s: {c.call_id: sum(r.call_id == c.call_id for n in s.messages "
    "for r in n.tool_results()) for m in s.messages for c in m.tool_calls()})(a.current.store.load(a.current.session.id)))"
    "(get_ipython().magics_manager.registry['ShiroMagics'].agent))"
)


def results_per_call(page: Any) -> dict[str, int]:
    """How many results the session's saved record (SHIRO_HOME) holds for each call the model made."""
    return dict(json.loads(kernel_print(page, RESULTS_PER_CALL)))


def run_cell_at(page: Any, index: int) -> None:
    """Run cell ``index`` of the open notebook as Shift+Enter on it does (JupyterLab's own Run)."""
    page.evaluate(
        """index => { const panel = window.jupyterapp.shell.currentWidget; panel.content.activeCellIndex = index;
                    return window.jupyterapp.commands.execute('notebook:run-cell'); }""",
        index,
    )


def sources(page: Any) -> list[str]:
    """The open document's cell sources (the model, not the file)."""
    return list(
        page.evaluate(
            """() => { const cells = window.jupyterapp.shell.currentWidget.content.model.cells; const out = [];
                     for (let i = 0; i < cells.length; i++) out.push(cells.get(i).sharedModel.getSource());
                     return out; }"""
        )
    )
