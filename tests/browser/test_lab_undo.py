"""Undo buttons in a real JupyterLab and Chromium (issue 35 #2).

A real ``%shiro`` turn (approval "auto", the fake model scripting it) runs python that changes a variable and
inserts a cell; the saved turn's rendering (the labextension) has an Undo button on each row whose step the
kernel can take back; Undo on the first step's row restores the variable in the kernel and removes the inserted
cell from the document (through the front end, one undo step of the notebook), and says so under the row. A
``%shiro /undo`` typed in a cell does the same. After a kernel restart no button shows. The live view's own Undo
(ipywidgets) works in the browser too. A call id the model made up to hold code is sent to the kernel as data:
clicking its Undo runs none of it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from conftest import Lab  # tests/browser/conftest.py (its folder is on sys.path)
from fakeopenai import Call, Reply
from faultlog import SECURITY, record
from labutil import kernel_print, open_notebook, save_notebook, shot, sources, write_notebook

pytestmark = pytest.mark.timeout(150)

SETUP = '%load_ext shiro_kernel\n%config Shiro.approval = "auto"\nvalue = 1'
READ = Call("notebook_read", {"cells": None, "images": None})
ANSWER = "Set value to 2 and added a cell."
#: how many Undo buttons the labextension's renderings show (drawn, not merely in the page)
SHOWN = (
    "[...document.querySelectorAll('.jp-RenderedShiroTurn .shiro-undo-button')]"
    ".filter(b => getComputedStyle(b).display !== 'none' && b.offsetParent !== null).length"
)


def run_all(page: Any) -> None:
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")


def final_turn(page: Any, text: str) -> Any:
    """The saved turn's rendering (the labextension's), once its answer is drawn."""
    turn = page.locator(".jp-RenderedShiroTurn", has_text=text)
    turn.wait_for(timeout=30_000)
    return turn


def buttons(turn: Any) -> Any:
    return turn.locator(".shiro-undo-button:visible")


def change_and_insert(lab: Lab, page: Any, name: str) -> Any:
    """Open ``name`` and run a turn whose python step sets ``value`` to 2 and whose last step inserts a cell
    after the first; the turn's rendering once both steps have Undo buttons."""
    lab.fake.enqueue(
        Reply(text="Changing the value.", tool_calls=[Call("python", {"code": "value = 2\nhelper = value * 10"})]),
        Reply(tool_calls=[READ]),
        Reply(
            text="Adding a cell.",
            tool_calls=[Call("notebook_insert", {"after": 0, "source": "added_by_shiro = True", "cell_type": "code"})],
        ),
        Reply(text=ANSWER),
    )
    write_notebook(lab.root / name, [SETUP, "%shiro set value to 2 and add a cell"])
    open_notebook(page, lab, name)
    run_all(page)
    turn = final_turn(page, ANSWER)
    page.wait_for_function(f"() => {SHOWN} === 2", timeout=30_000)
    return turn


def test_undo_on_the_first_row_restores_the_variable_and_removes_the_inserted_cell(lab: Lab, page: Any) -> None:
    turn = change_and_insert(lab, page, "undo.ipynb")
    assert kernel_print(page, "value, helper").strip() == "2 20"
    assert sources(page) == [SETUP, "added_by_shiro = True", "%shiro set value to 2 and add a cell"]
    python_row = turn.locator(".shiro-tool-row", has_text="value = 2")
    insert_row = turn.locator(".shiro-tool-row", has_text="inserted cell 1")
    read_row = turn.locator(".shiro-tool-row", has_text="notebook_read")
    assert python_row.locator(".shiro-undo-button:visible").count() == 1
    assert insert_row.locator(".shiro-undo-button:visible").count() == 1
    assert read_row.locator(".shiro-undo-button").count() == 0  # it only read: nothing to take back
    shot(page, "undo-before")

    clicked = time.monotonic()
    python_row.locator(".shiro-undo-button").click()
    report = python_row.locator(".shiro-undo-report")
    report.get_by_text("undid 2 steps").wait_for(timeout=60_000)
    seconds = time.monotonic() - clicked
    text = report.inner_text()
    assert "restored: value" in text and "removed (the steps made them): helper" in text, text
    assert "cells: the inserted cell taken back" in text, text
    assert report.evaluate("e => e.children.length") == 0  # the kernel's words as text, never HTML

    assert kernel_print(page, "value, 'helper' in globals()").strip() == "1 False"
    assert sources(page) == [SETUP, "%shiro set value to 2 and add a cell"]  # the inserted cell is gone
    page.wait_for_function(f"() => {SHOWN} === 0", timeout=30_000)
    assert turn.locator(".shiro-tool-row.shiro-row-undone").count() == 2  # both steps taken back, marked
    shot(page, "undo-after")
    record(
        "Undo on a saved turn's first row in Chromium (a variable changed, a cell inserted)",
        1,
        0,
        f"variable restored in the kernel, the inserted cell gone from the document, both named; report under the "
        f"row {seconds:.2f} s after the click",
    )
    # the cell went through the document: the notebook's own undo (z in command mode) brings it back
    page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("z")
    assert sources(page) == [SETUP, "added_by_shiro = True", "%shiro set value to 2 and add a cell"]
    assert not page.console_errors, page.console_errors


def run_new_cell(page: Any, source: str) -> None:
    """Add a code cell at the end holding ``source`` and run it, as the user does."""
    page.evaluate(
        """source => { const panel = window.jupyterapp.shell.currentWidget; const nb = panel.content.model.sharedModel;
                 nb.insertCell(nb.cells.length, {cell_type: 'code', metadata: {}, source});
                 panel.content.activeCellIndex = nb.cells.length - 1;
                 return window.jupyterapp.commands.execute('notebook:run-cell'); }""",
        source,
    )


def test_a_typed_undo_reverts_the_cell_too_and_the_buttons_follow(lab: Lab, page: Any) -> None:
    """``%shiro /undo`` typed in a cell runs off the kernel's thread too (the front end must answer its cell
    reverts between cells): its report replaces a placeholder in that cell, and the rendering's buttons go."""
    change_and_insert(lab, page, "typed.ipynb")
    run_new_cell(page, "%shiro /undo")
    out = page.locator(".jp-Notebook .jp-Cell").last.locator(".jp-OutputArea")
    out.get_by_text("undid 2 steps").wait_for(timeout=60_000)
    text = out.inner_text()
    assert "the inserted cell taken back" in text and "restored: value" in text, text
    assert "added_by_shiro = True" not in sources(page)
    assert kernel_print(page, "value").strip() == "1"
    page.wait_for_function(f"() => {SHOWN} === 0", timeout=30_000)
    shot(page, "undo-typed")


def test_no_undo_button_after_a_kernel_restart(lab: Lab, page: Any) -> None:
    turn = change_and_insert(lab, page, "restart.ipynb")
    assert buttons(turn).count() == 2
    page.evaluate("() => { void window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart(); }")
    page.wait_for_function(f"() => {SHOWN} === 0", timeout=30_000)
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'", timeout=30_000
    )
    # the notebook opened again asks the new kernel (with shiro loaded again): it lists nothing
    kernel_print(page, "get_ipython().extension_manager.load_extension('shiro_kernel') or ''")
    save_notebook(page)
    open_notebook(page, lab, "restart.ipynb")
    page.wait_for_selector(".jp-RenderedShiroTurn", timeout=60_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-RenderedShiroTurn')].every(t => t.dataset.shiroUndo === 'asked')",
        timeout=30_000,
    )
    turn = final_turn(page, ANSWER)
    assert buttons(turn).count() == 0
    assert turn.locator(".shiro-tool-row").count() == 3  # the rows are there, without buttons
    shot(page, "undo-after-restart")


def test_the_live_views_undo_in_the_browser(lab: Lab, page: Any) -> None:
    """The ipywidgets view (what a front end without the labextension shows): its Undo works in Chromium."""
    change_and_insert(lab, page, "live-undo.ipynb")
    # the turn's own live view, shown again in a cell of its own
    run_new_cell(page, "get_ipython().find_line_magic('shiro').__self__.controller.finished[-1].view")
    view = page.locator(".shiro-turn-view")
    view.wait_for(timeout=30_000)
    undo = view.locator(".shiro-undo button:visible")
    undo.first.wait_for(timeout=30_000)
    assert undo.count() == 2
    undo.first.click()
    view.locator(".shiro-undo-report", has_text="undid 2 steps").wait_for(timeout=60_000)
    text = view.locator(".shiro-undo-report").first.inner_text()
    assert "restored: value" in text and "the inserted cell taken back" in text, text
    assert kernel_print(page, "value").strip() == "1"
    assert "added_by_shiro = True" not in sources(page)
    page.wait_for_function(  # nothing left to take back: the buttons are gone, both rows marked
        "() => [...document.querySelectorAll('.shiro-turn-view .shiro-undo button')]"
        ".every(b => getComputedStyle(b).display === 'none')",
        timeout=30_000,
    )
    assert view.locator(".shiro-undone").count() == 2
    shot(page, "undo-live-view")


def test_a_call_id_made_to_hold_code_runs_none_of_it(lab: Lab, page: Any) -> None:
    """The model names its calls; a name holding code (IPython would expand ``{…}`` and ``$name`` in a magic's
    line; quotes would end a string) reaches the kernel as data when the user clicks its Undo."""
    crafted = [
        "call_{__import__('pathlib').Path('PWNED_BRACES').touch()}",
        "call_\"); __import__('pathlib').Path('PWNED_QUOTES').touch(); (\"",
        "call_$(touch PWNED_SHELL)",
    ]
    lab.fake.enqueue(
        Reply(tool_calls=[Call("python", {"code": f"step_{i} = {i}"}, call_id=c) for i, c in enumerate(crafted)]),
        Reply(text="Three steps."),
    )
    write_notebook(lab.root / "crafted.ipynb", [SETUP, "%shiro three steps"])
    open_notebook(page, lab, "crafted.ipynb")
    run_all(page)
    turn = final_turn(page, "Three steps.")
    page.wait_for_function(f"() => {SHOWN} === 3", timeout=30_000)
    turn.locator(".shiro-undo-button").first.click()  # the first step and the two after it
    turn.locator(".shiro-undo-report", has_text="undid 3 steps").wait_for(timeout=60_000)
    assert kernel_print(page, "[n for n in globals() if n.startswith('step_')]").strip() == "[]"
    made = sorted(p.name for p in lab.root.glob("PWNED*"))
    record(
        f"{SECURITY}a call id made to hold code (`{{…}}`, quotes, `$( )`), Undo clicked in the browser",
        len(crafted),
        len(made),
        "each id reached the kernel as a string literal to the magic called as a function (no var_expand); "
        f"the 3 steps taken back, files made by the ids: {made or 'none'}",
    )
    assert made == []
